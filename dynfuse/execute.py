"""Materialization: turn the trace behind some nodes into buffers, in one plan.

A node whose structure ran before as one compiled kernel is computed by its replay (``replay``).
Otherwise, with a kernel backend, the trace is planned (``schedule``) and the plan runs step by step
(``run_plan``): library calls for barriers, kernels for fusion groups, each launched (``launch``)
compiled or interpreted by the tier policy (``tiers``). A kernel that fails to compile or to run is
interpreted instead, with a warning: a fault in dynfuse never turns into a wrong answer. The nodes
computed become leaves, with the deep intermediates the program still holds
(``trace.held_intermediates``).

A trace runs where its backend's kernels run (``backend_for``): in its own memory, or, a device's
trace given to the reference executor or a host trace given to a device's backend, on copies of its
leaves there, its results copied back (``devices``). The reference executor always runs on the
host: a device's kernel interpreted runs on host copies. A library call on a device runs in the
device's library (CuPy's), or on host copies where that library cannot make it
(``launch.library_call``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import cache, interpret, registry, replay, stats, tiers, trace, views
from .devices import HOST, Memory, move
from .kernel import Backend, CompiledKernel, Kernel
from .launch import launch, leaf_value, library_call, read
from .ops import OpKind
from .tiers import Tier, kernel_tier, recording_verdict, repeated_enough, tiny
from .trace import (
    Node,
    dependent_sinks,
    held_intermediates,
    held_outside,
    pending_readers,
    references_within,
    topological_order,
)

if TYPE_CHECKING:  # the planner is imported at the first plan, off ``import dynfuse``'s path
    from . import schedule
    from .schedule import KernelStep, Plan, Source

# Materializing mutates nodes shared between arrays; one plan runs at a time. A process forked while
# another thread held it starts with it free (that thread does not exist there).
lock = threading.RLock()
os.register_at_fork(after_in_child=lock._at_fork_reinit)

_counters = stats.thread_counters


def viewed(node: Node) -> Node:
    """The first node under a chain of views: the one whose memory the views share."""
    while node.op.kind is OpKind.VIEW:
        node = node.inputs[0]
    return node


# The counters whose change over a materialization says whether recording paid (``tiers``' sites)
_VERDICT = ("kernels_planned", "fused_ops", "interpreted_ops")


def materialize(nodes: Sequence[Node]) -> None:
    """Compute every unmaterialized node in ``nodes`` together, sharing common work.

    A view is materialized together with the node it views, so that its buffer is a view of a
    buffer that node keeps: a later write through either is then seen by both, as in NumPy.

    Where sites of the program recorded since the last materialization (``tiers.site_repeats``),
    what is pending is a run of the program's loop, which ends here: everything this thread has
    pending is computed (``_loop_run``), as the loop's run would be when the loop comes back
    (``materialize_carried``), and what ran settles whether recording pays there
    (``tiers.settle_sites``).
    """
    with lock:
        if _replayed_in_c(nodes):
            return
        if tiers.site_repeats():
            _loop_run(nodes)
        else:
            _materialize(nodes, 0)


def _replayed_in_c(nodes: Sequence[Node], run: bool = True) -> bool:
    """Whether the launch their structure kept computed ``nodes``, in C (``replay.replay_now``,
    ``replay_group_now``; while sites' recordings are pending, with the run of the program's loop
    they belong to, as ``_loop_run``, unless ``run`` is False): a cached small statement's, a loop
    run's values. Only for pending host nodes, none a view, on a host backend, where the C
    recorder is in use."""
    if replay.replay_now is None:
        return False
    for node in nodes:
        if not node.inputs or node.device is not HOST or node.op.kind is OpKind.VIEW:
            return False
    backend = registry.BACKENDS[registry.backend]
    if backend is None or backend.memory is not HOST:
        return False
    if len(nodes) == 1:
        return replay.replay_now(nodes[0], backend.name, replay._replays, run)
    return replay.replay_group_now(tuple(nodes), backend.name, replay._replays, run)


def _loop_run(nodes: Sequence[Node]) -> None:
    """Compute ``nodes`` with everything this thread has pending (``trace.pending_run``): a run of
    the program's loop, whose values the loop carries into its next run, or the program reads
    once the loop is done; either way the same values in the same order, one trace of one
    structure, which replays. A view the next run took already of a carried value (``x[:, None]``)
    is then taken of the value computed, as NumPy takes it at once."""
    values, pending_views = trace.pending_run()  # C's, where the C recorder is in use
    members = [*values, *(node for node in nodes if node.op.kind is OpKind.VIEW or node not in values)]
    # A read of several values pays nothing: each run reading them goes through Python's writes
    # and reads around the replay (a masked write's), which fusing them does not pay for
    cap = tiers.cap_verdicts(0) if nodes and len(members) > 1 else None
    try:
        if not _replayed_in_c(members, run=False):
            _materialize(members, tiers.site_repeats())
    finally:
        if cap is not None:
            tiers.cap_verdicts(cap)
    take_views(pending_views)


def take_views(pending_views: list[Node]) -> None:
    """A loop run's views, taken of the values computed (``_loop_run``; ``replay_now`` in C)."""
    for view in pending_views:
        view_now(view)


class _Verdict:
    """Whether a materialization of ``nodes`` paid for what sites recorded among them
    (``tiers.recording_verdict``), told them as it ends; where no site recorded (``repeats`` 0),
    nothing is counted. Only kernels launched in C cost less than NumPy's calls on small arrays
    (``replay.KernelReplay`` and a plan's replay launched in C tell that verdict at each launch):
    replayed as a plan it does not pay yet (at most 0), nor planned, unless the plan ran compiled,
    kept as a kernel's replay or a launch in C under ``key`` (its next run launches it; for the
    deep intermediates ``held``, where a plan's replay ran). Recording cannot pay (``possible`` False) for a
    trace without a replay key (too large a structure: it is planned again every time), nor for one
    of fewer ops than a kernel must fuse (``tiers.could_pay``)."""

    def __init__(
        self,
        repeats: int,
        nodes: Sequence[Node],
        possible: bool = True,
        key: tuple | None = None,
        held: tuple[int, ...] | None = None,
    ) -> None:
        self.counters = _counters() if repeats else None
        self.before = [self.counters[name] for name in _VERDICT] if repeats else []
        self.nodes = nodes
        self.possible = possible
        self.key = key
        self.held = held

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exception: object) -> None:
        if self.counters is not None and exception[0] is None:
            kernels, fused, interpreted = (
                self.counters[name] - was for name, was in zip(_VERDICT, self.before, strict=True)
            )
            # Each op counted by what fusing it saves, as a replay's launch counts it
            ops = [node for node in self.nodes if node.inputs and node.op.kind is not OpKind.VIEW]
            saves = tiers.paying_ops(ops) / len(ops) if ops else 1.0
            verdict = recording_verdict(kernels, fused * saves, interpreted * saves) if self.possible else -1
            if verdict > 0 and not self._kernel_kept():
                verdict = 0
            tiers.settle_sites(verdict, self.nodes)

    def _kernel_kept(self) -> bool:
        kept = None if self.key is None else replay.find(self.key)
        if kept is None:
            return False
        runs = kept.runs.values() if self.held is None else [kept.runs.get(self.held)]
        return any(isinstance(run, replay.KernelReplay) or getattr(run, "launch_plan", None) for run in runs)


def _materialize(nodes: Sequence[Node], repeats: int, into: Any = None) -> None:
    """``materialize``, for a trace that stands for ``repeats`` runs (a site's trial; 0 where no
    site recorded). A replay launched as one kernel settles the sites itself
    (``replay.KernelReplay``); any other run, here. ``into``: the one node's value is written there
    too (``materialize_into``)."""
    if len(nodes) == 1 and nodes[0].op.kind is not OpKind.VIEW:  # the common case, in line
        outputs = [nodes[0]] if nodes[0].inputs else ()
    else:
        outputs = wanted_nodes(nodes)
    if not outputs:
        return
    device = outputs[0].device
    if len(outputs) > 1 and any(node.device is not device for node in outputs):
        for group in _by_device(outputs):
            _materialize(group, repeats)
        return
    memory = device or HOST
    backend = registry.BACKENDS[registry.backend] if memory is HOST else backend_for(memory)
    key = group = None
    if backend is not None and backend.memory is memory:
        # Several outputs are replayed as their group (a write and the mask it reads, a time
        # step's carried values); a device's replays hold kernels compiled for the GPU they ran on
        replayed = outputs[0] if len(outputs) == 1 else (group := Node.group(outputs))
        runs_on = backend.name if memory is HOST else (backend.name, backend.variant())
        key = trace.replay_key(runs_on, replayed)
        if key is not None and into is not None:  # its kernel writes through strides: a run of its own
            key = (_INTO, key)
        if key is not None:
            kept = replay.find(key)
            if kept is not None and _replayed(kept, replayed, key, backend, repeats, into):
                return
    order = topological_order(outputs)
    held = held_intermediates(order, outputs, group)
    small = backend is not None and tiny(order, backend)
    # A site's trial of a trace that cannot pay is not planned: run as it would be unrepeated
    pays = bool(repeats) and key is not None and tiers.could_pay(order)
    # A trace too long for a replay key is known again by its signature, which planning needs anyway
    numbered = sighted = None
    if backend is not None and not small and not repeats:
        sighted = key
        if key is None:
            from . import schedule

            numbered = schedule.number_trace(order, [*outputs, *held])
            sighted = (_SIGNATURE, backend.name, numbered.signature)
    interpreted = (
        backend is None
        or (small and not repeated_enough(key, backend, repeats if pays else 0))
        or (sighted is not None and tiers.unplanned_first_sight(sighted, order, backend))
    )
    place = HOST if interpreted else backend.memory
    moved = {} if place is HOST and memory is HOST else moved_leaves(order, place)
    with _Verdict(repeats, order, pays, key):
        if interpreted:
            # strips where the recipe's making pays (a tiny trace's is made at each run)
            strips = backend is not None and not small
            results = interpret.run(order, [*outputs, *held], moved, into, strips=strips)
        else:
            unplanned = tiers.unplanned_runs(sighted)
            results = run_planned(
                order, outputs, backend, key, small, moved, held, repeats, group, into, unplanned, numbered
            )
        kept = [*outputs, *held]
        if place is not memory:
            results = _moved_results(results, kept, place, memory)
        if into is not None:  # the node stays pending (``materialize_into``)
            _write_into(into, results[outputs[0]])
            kept = list(held)
        for node in kept:
            node.become_leaf(results[node])
    _counters()["materializations"] += 1


def _moved_results(results: dict, kept: list[Node], place: Memory, memory: Memory) -> dict:
    """The results of ``kept`` computed in ``place``, moved to ``memory``: a view is taken again of
    what it views there (the moved buffer of a node computed with it, or a leaf's own buffer, of
    that memory), so that the two share memory as in NumPy, and a later write through either is
    seen by both."""
    moved: dict = {}

    def shared(node: Node) -> bool:
        """Whether ``node``'s value in ``memory`` is memory of its own there, which views share."""
        under = viewed(node)
        return under in results or (not under.inputs and under.memory is memory)

    def value(node: Node) -> Any:
        if node not in moved:
            if node.op.kind is OpKind.VIEW and shared(node):
                moved[node] = node.op.reference(value(node.inputs[0]), **dict(node.params))
            elif not node.inputs and node.memory is memory:
                moved[node] = node.buffer
            else:
                moved[node] = move(results[node], place, memory)
        return moved[node]

    return {node: value(node) for node in kept}


# Tags the replay key of a materialization into a given array (``materialize_into``); the signature
# that tells the tier policy a trace too long for a replay key has been seen (``_materialize``)
_INTO = "into"
_SIGNATURE = "signature"


def materialize_into(node: Node, destination: Any, reads_destination: bool = False) -> None:
    """Write the value of ``node`` (pending, on the host, not a view) into ``destination``, a host
    array of its shape and dtype that its trace reads, if at all, only where it writes it, and that
    no other pending node reads: a write's value computed straight into the written region. Where
    the backend's kernels write through strides (``Target.in_place_elements``) the kernel that
    stores the node writes ``destination`` itself, no temporary and no copy; elsewhere (an
    interpreted kernel, a library call) the value is copied in. The node stays pending (that
    memory may be written again): read later, it is computed again from its leaves, which keep
    their values as any pending node's do, or, where it was computed from ``destination`` itself
    (``reads_destination``), whose values have changed, it stands for a copy of it
    (``Node.read_back``). A statement's value is a temporary, which nothing reads later."""
    with lock:
        _materialize([node], tiers.site_repeats(), destination)
        if reads_destination:
            node.read_back(destination)


def _write_into(destination: Any, value: Any) -> None:
    """``value`` into ``destination``, unless a kernel or the interpreter wrote it there (then they
    are one array, or views of the same elements)."""
    if destination is None or value is destination:
        return
    if views.place(value) != views.place(destination):
        np.copyto(destination, value)


def materialize_carried(node: Node) -> None:
    """Compute what this thread has pending (``_loop_run``): ``node``, the value a site recorded in
    the last run of the program's loop, is pending as the loop comes back to it, so what is
    pending is that run's trace and the values it carries into this run. So each run of the loop
    is one trace of one structure, replayed, and the materialization's verdict settles the sites
    that recorded it."""
    with lock:
        if node.inputs:
            materialize(())


def view_now(node: Node) -> None:
    """A pending chain of views over a computed node, computed: each a view of what it views."""
    if node.inputs and node.op.kind is OpKind.VIEW:
        under = node.inputs[0]
        view_now(under)
        if not under.inputs:
            node.become_leaf(node.op.reference(under.buffer, **dict(node.params)))


def materialize_readers(buffer: Any, memory: Memory = HOST) -> None:
    """Compute what a write into ``buffer`` (an array of ``memory``) must not disturb: the pending
    nodes that read its memory (``trace.pending_readers``), fused with what depends on them
    (``trace.dependent_sinks``), until none is left: a computed reader may itself be a view of it."""
    while readers := pending_readers(buffer, memory):
        sinks = dependent_sinks(readers)
        del readers  # the next search must not find these alive through this list
        materialize(sinks)


def backend_for(memory: Memory) -> Backend | None:
    """The backend that runs a trace of ``memory``'s arrays: the configured one (``DYNFUSE_BACKEND``)
    for host arrays, or where it runs kernels on that memory; a device's own otherwise, unless the
    reference executor (``numpy``) is configured: a device's trace then runs on host copies."""
    chosen = registry.BACKENDS[registry.backend]
    if memory is HOST or chosen is None or chosen.memory is memory:
        return chosen
    return next(backend for backend in registry.BACKENDS.values() if backend and backend.memory is memory)


def _by_device(nodes: Sequence[Node]) -> list[list[Node]]:
    groups: dict[int, list[Node]] = {}
    for node in nodes:
        groups.setdefault(id(node.device), []).append(node)
    return list(groups.values())


def moved_leaves(order: Sequence[Node], place: Memory) -> dict[Node, Any]:
    """Copies in ``place`` of the leaves ``order`` reads from another memory: what a run there reads
    in their stead. A converted NumPy scalar (no device) is host memory."""
    moved: dict[Node, Any] = {}
    for node in order:
        for child in node.inputs:
            if child.op.kind is OpKind.BUFFER and child not in moved and child.memory is not place:
                moved[child] = move(child.buffer, child.memory, place)
    return moved


def run_planned(
    order: list[Node],
    outputs: list[Node],
    backend: Backend,
    key: tuple | None = None,
    compile_small: bool = False,
    moved: dict[Node, Any] | None = None,
    held: Sequence[Node] = (),
    repeats: int = 0,
    group: Node | None = None,
    into: Any = None,
    unplanned: int = 0,
    numbered: schedule.Trace | None = None,
) -> dict[Node, Any]:
    """Plan and run on the backend's memory, reading ``moved`` leaves' copies there, the deep
    intermediates the program ``held`` computed too; with a replay ``key``, what ran is kept for
    replaying, under the one output or the outputs' ``group``. ``repeats``: the runs a site's trial
    stands for, ``unplanned``: the runs of the trace interpreted before, unplanned
    (``tiers.kernel_tier``); ``into``: where the kernel storing the one output writes it, if it can
    (``materialize_into``); ``numbered``: the trace numbered already (``schedule.number_trace``)."""
    from . import schedule

    computed = [*outputs, *held]
    if numbered is None:
        numbered = schedule.number_trace(order, computed)
    try:
        plan = schedule.plan_for(numbered, backend.target)
    except MemoryError:  # the program's to handle, as under NumPy: not a fault of dynfuse's
        raise
    except Exception as error:  # a fault of the scheduler's: the trace still runs, op by op
        _warn_fault("planning", error)
        stats.count_fallback("plan", f"planning failed ({type(error).__name__}: {error})")
        return _on(backend.memory, interpret.run(order, computed, moved_leaves(order, HOST)))
    kept = None
    # A replay reads its leaves where they are: none may have been moved but a converted NumPy
    # scalar, which goes with any device (``launch.leaf_value`` puts it there at each replay)
    if key is not None and all(leaf.device is None for leaf in moved or ()):  # made while the trace is whole
        node = outputs[0] if group is None else group
        positions = trace.held_positions(node, list(held))
        kept = replay.PlanReplay.of(plan, numbered.nodes, node)
        if kept is not None:
            replay.keep(key, node, order, positions, kept)
    given = None if into is None else (numbered.outputs[0], into)
    values, ran = run_plan(
        numbered.nodes, plan, backend, compile_small, moved or {}, repeats, given, unplanned=unplanned
    )
    if kept is not None and ran.compiled_step is not None and kept.launchable:
        kept.launchable = _keep_kernel(key, positions, numbered.nodes, plan, ran.compiled_step, node, backend)
    return {node: values[node] for node in computed}


def _keep_kernel(
    key: tuple,
    held: tuple[int, ...],
    nodes: list[Node],
    plan: Plan,
    compiled: tuple[Kernel, CompiledKernel],
    node: Node,
    backend: Backend,
) -> bool:
    """A plan that ran as one compiled kernel over leaves and their views: replayed by a launch
    from then on. Whether it is."""
    kernel = replay.KernelReplay.of(nodes, plan, compiled, node, backend.memory)
    kept = replay.find(key)
    if kernel is None or kept is None:
        return False
    kept.runs[held] = kernel
    return True


def _replayed(
    kept: replay.Replay, node: Node, key: tuple, backend: Backend, repeats: int = 0, into: Any = None
) -> bool:
    """Compute ``node`` by what its structure kept, if it kept a run for the deep intermediates
    the program holds now; False where it did not, or that run cannot take this trace."""
    held = kept.held(node)
    run = kept.runs.get(held)
    if run is None:
        return False
    if isinstance(run, replay.KernelReplay):
        return run.materialize(node, key, into)
    launch_in_c = replay.launch_replay if into is None else None  # None too in pure Python
    if run.launch_plan is not None and launch_in_c is not None and launch_in_c(node, run.launch_plan):
        return True  # counted, and the sites settled, in C
    nodes = run.nodes_of(node)
    if nodes is None:
        return False
    memory = backend.memory
    moved = {} if memory is HOST else moved_leaves(nodes, memory)
    with _Verdict(repeats, nodes, key=key, held=held):
        given = None if into is None else (run.outputs[0], into)
        # A plan of several kernels learns how C launches them (a single one is a ``KernelReplay``)
        launches = (
            into is None
            and memory is HOST
            and not run.launchable
            and run.launch_plan is None
            and run.launchable_in_c
            and replay.launch_replay is not None
        )
        # A replayed trace is a repeated one: its tiny kernels take the tier rule too (``kernel_tier``)
        values, ran = run_plan(nodes, run.plan, backend, True, moved, repeats, given, launches)
        outputs = [nodes[number] for number in run.outputs]
        if ran.compiled_step is not None and run.launchable:
            run.launchable = _keep_kernel(key, held, nodes, run.plan, ran.compiled_step, node, backend)
        elif ran.launched is not None:
            run.keep_launch(nodes, node, ran.launched, values)
        if into is not None:  # the node stays pending (``materialize_into``)
            _write_into(into, values[node])
            outputs = [output for output in outputs if output is not node]
        for output in outputs:
            output.become_leaf(values[output])
    counters = _counters()
    counters["replays"] += 1
    counters["materializations"] += 1
    return True


def _on(place: Memory, values: dict[Node, Any]) -> dict[Node, Any]:
    """The reference executor's results (host arrays) as arrays of ``place``."""
    return {node: move(value, HOST, place) for node, value in values.items()}


def _warn_fault(what: str, error: Exception) -> None:
    warnings.warn(
        f"dynfuse: {what} failed ({type(error).__name__}: {error}); running it with the reference executor",
        RuntimeWarning,
        stacklevel=4,
    )


def run_plan(
    nodes: list[Node],
    plan: Plan,
    backend: Backend,
    compile_small: bool = False,
    moved: dict[Node, Any] | None = None,
    repeats: int = 0,
    given: tuple[int, Any] | None = None,
    launches: bool = False,
    unplanned: int = 0,
) -> tuple[dict[Node, Any], _Run]:
    """Run ``plan`` over its numbered ``nodes`` on the backend's memory, step by step, each stored
    buffer freed after its last reader: the values of the plan's outputs, and the run, which knows
    the kernels that ran compiled (what a replay launches again). ``given``: a node's number and the
    array the kernel storing it writes it into, where it can (``Target.in_place_elements``).
    ``launches``: find how C would launch each kernel that ran compiled (``_Run.launched``).
    ``unplanned``: the runs of the trace interpreted before, unplanned (``tiers.kernel_tier``)."""
    from .schedule import LibraryStep

    run = _Run(nodes, backend, compile_small, moved, repeats, given, launches, unplanned)
    stats.count("kernels_planned", len(plan.kernels))
    inside = None
    for step, release in zip(plan.steps, plan.release, strict=True):
        if isinstance(step, LibraryStep):
            node = nodes[step.node]
            value = library_call(node, [run.argument(source) for source in step.inputs], run.memory)
            run.buffers[step.node] = value
            # Kept (as a leaf) where the program holds it, never called again (see interpret.run);
            # otherwise freed after its last reader here, as a long trace of library calls (a loop
            # of np.roll) would hold every result to the end. Listed here: the plan's nodes, the
            # materialization's order, and ``node``.
            inside = references_within(nodes) if inside is None else inside
            if held_outside([node], inside, listed=3):
                node.become_leaf(move(value, run.memory, node.memory))
        else:
            run.run_kernel(step)
        for number in release:
            del run.buffers[number]
    return {nodes[number]: run.array(source) for number, source in plan.outputs}, run


class _Run:
    """The state of one plan's run (``run_plan``): the buffers of stored nodes, by number."""

    def __init__(
        self,
        nodes: list[Node],
        backend: Backend,
        compile_small: bool = False,
        moved: dict[Node, Any] | None = None,
        repeats: int = 0,
        given: tuple[int, Any] | None = None,
        launches: bool = False,
        unplanned: int = 0,
    ) -> None:
        self.nodes = nodes
        self.given = given if given is not None and backend.target.in_place_elements else None
        self.repeats = repeats  # the runs a site's trial stands for
        self.unplanned = unplanned  # the runs of the trace interpreted before, unplanned
        self.backend = backend
        self.memory: Memory = backend.memory  # where every buffer of the run is
        self.compile_small = compile_small  # a repeated trace: compile whatever the kernels' size
        # the last kernel that ran compiled, and its code
        self.compiled_step: tuple[Kernel, CompiledKernel] | None = None
        # With ``launches``: each kernel that ran compiled into fresh outputs, and its launch in C
        # (``replay.kernel_launch``; None where C cannot launch it)
        self.launched: list[tuple[KernelStep, tuple | None]] | None = [] if launches else None
        self.buffers: dict[int, Any] = {}
        # Leaves from another memory, by number: their copies in this one
        self.moved = (
            {number: moved[node] for number, node in enumerate(nodes) if node in moved} if moved else {}
        )

    def argument(self, source: Source) -> Any:
        """A source as a library call takes it: an array (``array``), or a weak scalar as the
        Python scalar it is, whose dtype NumPy's promotion then leaves to the arrays (a 0-d array
        of it would make float32's arctan2 by 0.5 a float64 one)."""
        node = self.nodes[source.node]
        return node.buffer if node.op.kind is OpKind.SCALAR else self.array(source)

    def array(self, source: Source, shape: tuple[int, ...] | None = None) -> Any:
        """A source as an array: the buffer, through its views, then read through its index map."""
        buffers = self.buffers  # a library call's result too, though its node holds it (as a leaf)
        if source.node in buffers:
            value = buffers[source.node]
        elif source.node in self.moved:
            value = self.moved[source.node]
        else:
            value = leaf_value(self.nodes[source.node], self.memory)
        for number in source.views:
            view = self.nodes[number]
            value = view.op.reference(value, **dict(view.params))
        return read(value, source, shape, self.memory)

    def run_kernel(self, planned: KernelStep) -> None:
        step, given = self.writing_given(planned)
        kernel = step.kernel
        compiled = None
        tier = kernel_tier(step, self.nodes, self.backend, self.compile_small, self.repeats, self.unplanned)
        if tier is Tier.COMPILING:
            # No thread to be had (Python is exiting): then it compiles when next asked for.
            with contextlib.suppress(RuntimeError):
                cache.compile_in_background(self.backend, kernel)
        elif tier is Tier.COMPILED:
            try:
                compiled = cache.compiled_kernel(self.backend, kernel)
                if compiled is not None:
                    inputs = [self.array(source, kernel.shape) for source in step.loads]
                    params = [self.nodes[n].buffer for n in step.params]
                    outputs = launch(kernel, compiled, inputs, params, self.memory, given=given)
            except MemoryError:
                raise
            except Exception as error:  # a fault of dynfuse's own code: never a wrong answer
                _warn_fault(f"a {self.backend.name} kernel", error)
                stats.count_fallback(
                    f"kernel:{self.backend.name}", f"a kernel failed ({type(error).__name__}: {error})"
                )
                compiled = None
        if compiled is None:
            self.interpret(planned)
            return
        # NumPy's warning or error, outside the fault handling: the program's, not a fault
        interpret.heed_kernel_flags(
            lambda: [self.nodes[number] for number in step.nodes],
            lambda: {self.nodes[number]: self.on_host(value) for number, value in self.buffers.items()},
        )
        self.compiled_step = (kernel, compiled)
        stats.count("kernels_launched")
        stats.count("fused_ops", len(step.nodes))
        for number, output in zip(step.stores, outputs, strict=True):
            self.buffers[number] = output.reshape(self.nodes[number].shape)
        if self.launched is not None and given is None:  # a kernel reads none of its own stores
            bases = [self.buffers.get(source.node, self.nodes[source.node].buffer) for source in step.loads]
            stored = [self.buffers[number] for number in step.stores]
            self.launched.append((step, replay.kernel_launch(kernel, compiled, bases, inputs, stored)))

    def on_host(self, value: Any) -> Any:
        """A value the plan computed, on the host: in the plan's memory, a library call's too,
        whatever its node's device says (NumPy reruns the ops that report errors from these)."""
        return value if isinstance(value, np.ndarray) else move(value, self.memory, HOST)

    def writing_given(self, step: KernelStep) -> tuple[KernelStep, tuple[int, Any] | None]:
        """The step with its kernel writing the given array, where it stores the given node in the
        given array's shape (a per-row output may hold it in another), and that output's position
        with the array; the step as it is otherwise."""
        if self.given is None or self.given[0] not in step.stores:
            return step, None
        number, array = self.given
        position = step.stores.index(number)
        if step.kernel.output_layouts[position][0] != array.shape:
            return step, None
        return step._replace(kernel=step.kernel.storing_into(position)), (position, array)

    def interpret(self, step: KernelStep) -> None:
        """The step's nodes by the reference executor: on host copies where the run is elsewhere."""
        order = [self.nodes[number] for number in step.nodes]
        stores = [self.nodes[number] for number in step.stores]
        if self.memory is HOST and not self.moved:  # the common case: the step's recipe, kept
            recipe = interpret.step_recipe(step, order, stores)
            buffers, nodes = self.buffers, self.nodes
            read = [buffers[n] if n in buffers else nodes[n].buffer for n in recipe.numbers(nodes)]
            given = self.given[1] if self.given is not None and step.stores[:1] == (self.given[0],) else None
            values = recipe.run(order, read, given)
            for number, position in zip(step.stores, recipe.stored, strict=True):
                self.buffers[number] = values[position]
            return
        known = {self.nodes[number]: value for number, value in self.buffers.items()}
        if self.memory is not HOST:
            needed = {child for node in order for child in node.inputs}
            known = {node: move(value, self.memory, HOST) for node, value in known.items() if node in needed}
            known.update(moved_leaves(order, HOST))
        values = interpret.run(order, stores, known)
        for number, node in zip(step.stores, stores, strict=True):
            self.buffers[number] = move(values[node], HOST, self.memory)


def explain_plan(outputs: list[Node], backend: Backend) -> tuple[list[Node], Plan]:
    """The numbered trace and the plan that materializing ``outputs`` would run: nothing runs."""
    from . import schedule

    numbered = schedule.number_trace(topological_order(outputs), outputs)
    return numbered.nodes, schedule.plan_for(numbered, backend.target)


def wanted_nodes(nodes: Sequence[Node]) -> list[Node]:
    """The nodes a materialization of ``nodes`` computes: views together with what they view."""
    wanted: dict[int, Node] = {}
    for node in nodes:
        if not node.is_materialized:
            wanted[id(node)] = node
            under = viewed(node)
            if under is not node and not under.is_materialized:
                wanted[id(under)] = under
    return list(wanted.values())
