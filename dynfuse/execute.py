"""Materialization: turn the trace behind some nodes into buffers, in one plan.

With a kernel backend the trace is planned (``schedule``), and the plan runs step by step: library
calls for barriers, kernels for fusion groups. A kernel runs compiled or interpreted by the tier
policy: below ``Target.tiny_elements`` always interpreted (a compiled launch costs more than
NumPy's few calls); otherwise interpreted until the work of its signature's interpreted runs
reaches what getting its code costs: compiling it (``Backend.compile_work``), or loading it where
the backend keeps it (tiered, like a JIT: one-off small work pays no compile), and compiled from
then on. Where that first compiled run would do less work than ``Target.background_work`` and
another core is free, it runs interpreted once more while the kernel compiles on a thread of its
own, and later runs wait for that compile: the compile is hidden behind the work, and which runs
are interpreted still depends only on the program, not on timing. A kernel that fails to compile
or to run is interpreted instead, with a warning: a fault in dynfuse never turns into a wrong
answer.

A trace runs where its backend's kernels run (``backend_for``): in its own memory, or, a device's
trace given to the reference executor or a host trace given to a device's backend, on copies of its
leaves there, its results copied back (``devices``). The reference executor always runs on the
host: a device's kernel interpreted runs on host copies. A library call on a device runs in the
device's library (CuPy's), or on host copies where that library cannot make it (``library_call``).
"""

from __future__ import annotations

import contextlib
import enum
import os
import sys
import threading
import warnings
from collections.abc import Hashable, Sequence
from typing import Any

import cachetools
import numpy as np

from . import cache, config, interpret, registry, schedule, stats, trace, views
from .devices import HOST, Memory, move
from .kernel import Backend, CompiledKernel, Kernel
from .ops import OpKind
from .schedule import KernelStep, LibraryStep, Plan, Source
from .trace import Node, topological_order

# Materializing mutates nodes shared between arrays; one plan runs at a time. A process forked while
# another thread held it starts with it free (that thread does not exist there).
lock = threading.RLock()
os.register_at_fork(after_in_child=lock._at_fork_reinit)

# How often each kernel signature has been seen, for the tier policy.
_sightings: cachetools.LRUCache = cachetools.LRUCache(maxsize=4 * config.kernel_cache_size)


def _viewed(node: Node) -> Node:
    """The first node under a chain of views: the one whose memory the views share."""
    while node.op.kind is OpKind.VIEW:
        node = node.inputs[0]
    return node


def materialize(nodes: Sequence[Node]) -> None:
    """Compute every unmaterialized node in ``nodes`` together, sharing common work.

    A view is materialized together with the node it views, so that its buffer is a view of a
    buffer that node keeps: a later write through either is then seen by both, as in NumPy.
    """
    with lock:
        if len(nodes) == 1 and nodes[0].op.kind is not OpKind.VIEW:  # the common case, in line
            outputs = [nodes[0]] if nodes[0].inputs else ()
        else:
            outputs = wanted_nodes(nodes)
        if not outputs:
            return
        device = outputs[0].device
        if len(outputs) > 1 and any(node.device is not device for node in outputs):
            for group in _by_device(outputs):
                materialize(group)
            return
        memory = device or HOST
        backend = registry.BACKENDS[registry.backend] if memory is HOST else backend_for(memory)
        key = None
        if backend is not None and backend.memory is memory and len(outputs) == 1:
            # A device's replays hold kernels compiled for the GPU they ran on (``Backend.variant``)
            runs_on = backend.name if memory is HOST else (backend.name, backend.variant())
            key = trace.replay_key(runs_on, outputs[0])
        if key is not None:
            replay = cache.replay(key)
            if replay is not None and replay.materialize(outputs[0], key):
                return
        order = topological_order(outputs)
        held = held_intermediates(order, outputs)
        if held:
            outputs, key = [*outputs, *held], None  # no replay: it computes one node
        tiny = backend is not None and _tiny(order, backend)
        interpreted = backend is None or (tiny and not _repeated_enough(key, backend))
        place = HOST if interpreted else backend.memory
        moved = {} if place is HOST and memory is HOST else moved_leaves(order, place)
        if interpreted:
            results = interpret.run(order, outputs, moved)
        else:
            results = run_planned(order, outputs, backend, key, compile_small=tiny, moved=moved)
        for node in outputs:
            node.become_leaf(results[node] if place is memory else move(results[node], place, memory))
        _counters()["materializations"] += 1


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


_counters = stats.thread_counters

# Bytes of buffer leaves made since pending traces were last looked at (``new_leaf``)
_new_leaf_bytes = 0
# Pending traces whose results are this many times smaller than what they alone keep alive have
# reduced their data: materialized early, they let it go and lose little fusion (``new_leaf``).
SHRINKING = 8


def new_leaf(array: Any, exposed: bool, device: Memory | None = HOST) -> Node:
    """A buffer leaf over ``device``'s ``array`` (``exposed``: code outside dynfuse may hold its
    memory; ``device`` None: a converted NumPy scalar, which goes with any device).

    New memory is when lazy traces can come to hold too much: a program that drops each array it
    made once a lazy result is recorded over it (a loop of ``f(rng.random(n))``) would, NumPy having
    freed each, keep them all until its results are asked for. Every quarter of
    ``DYNFUSE_PENDING_MEMORY`` made, the pending traces are looked at (``trace.pending_memory``), and
    materialized if what they alone keep alive has passed it: as ``DYNFUSE_MAX_DEPTH`` bounds a
    trace's depth, this bounds its memory. They are materialized at a quarter of it already when
    their results (the sinks) are ``SHRINKING`` times smaller than that memory: a loop of
    ``f(rng.random(n)).mean(axis=1)`` then holds one draw at a time, as NumPy does, rather than
    several (whose memory, freed together, the allocator returns to the system and faults in again).
    The fusion given up is only with what later reads those small results.
    """
    global _new_leaf_bytes
    node = Node.leaf(array, exposed, device)
    _new_leaf_bytes += array.nbytes
    check = config.pending_memory // 4
    if _new_leaf_bytes >= check:
        _new_leaf_bytes = 0
        held, sinks = trace.pending_memory()
        if held > config.pending_memory or (
            held > check
            and SHRINKING * sum(sink.dtype.itemsize * views.size_of(sink.shape) for sink in sinks) <= held
        ):
            materialize(sinks)
    return node


# An intermediate this deep costs a chain of ops to compute again, more than storing it now and
# reading it back later (two passes).
HELD_DEPTH = 4
# References to a node of ``order`` that ``held_intermediates`` itself holds while it counts: the
# ``order`` list, the ``deep`` list, its loop variable, and ``sys.getrefcount``'s argument.
_COUNTING_REFERENCES = 4


def held_intermediates(order: list[Node], outputs: Sequence[Node]) -> list[Node]:
    """The nodes of ``order`` (not outputs, not views) that the program still holds, and that are
    deep: computed now, they are kept (they become leaves), as NumPy would have them, rather than
    computed again when asked for (``x = layer(x); print(x.std())``, then the next layer).

    "Held": referenced from outside this trace, by a lazy array the program keeps or by a graph
    recorded over the node. That is what is left of its reference count once the trace's own
    references (``trace.references_within``) are taken away, as NumPy's temporary elision reads
    reference counts. A miscount can only cost speed: a kept node holds its own value.
    """
    requested = set(map(id, outputs))
    deep = [
        node
        for node in order
        if node.depth >= HELD_DEPTH and node.op.kind is not OpKind.VIEW and id(node) not in requested
    ]
    if not deep:
        return []
    inside = trace.references_within(order)
    return [node for node in deep if sys.getrefcount(node) > inside[id(node)] + _COUNTING_REFERENCES]


def _sighted(key: Hashable, amount: float = 1) -> float:
    """How much of ``key`` has been seen, this time's ``amount`` included: sightings of a trace
    (its replay key), or the work of a kernel (its signature). What the tier policy decides by."""
    seen = _sightings.get(key, 0) + amount
    _sightings[key] = seen
    return seen


def _tiny(order: list[Node], backend: Backend) -> bool:
    """Work too small for any kernel to pay off on first sight: not even worth planning. A
    reduction's work is its input's size, however small its result (``x.sum(axis=0)``)."""
    limit = backend.target.tiny_elements
    return config.tiers and all(
        views.size_of(node.shape) < limit
        and (node.op.kind is not OpKind.REDUCTION or views.size_of(node.inputs[0].shape) < limit)
        for node in order
    )


def _repeated_enough(key: tuple | None, backend: Backend) -> bool:
    """A small trace seen ``Target.tiny_repeats`` times compiles: replayed, its launch costs less
    than interpreting it, and the compile is paid back over the repeats."""
    repeats = backend.target.tiny_repeats
    if key is None or not repeats:
        return False
    return _sighted(key) >= repeats


def run_planned(
    order: list[Node],
    outputs: list[Node],
    backend: Backend,
    key: tuple | None = None,
    compile_small: bool = False,
    moved: dict[Node, Any] | None = None,
) -> dict[Node, Any]:
    """Plan and run on the backend's memory, reading ``moved`` leaves' copies there; with a replay
    ``key``, a plan of one compiled kernel is kept for replaying."""
    trace = schedule.number_trace(order, outputs)
    try:
        plan = schedule.plan_for(trace, backend.target)
    except MemoryError:  # the program's to handle, as under NumPy: not a fault of dynfuse's
        raise
    except Exception as error:  # a fault of the scheduler's: the trace still runs, op by op
        _warn_fault("planning", error)
        stats.count_fallback("plan")
        return _on(backend.memory, interpret.run(order, outputs, moved_leaves(order, HOST)))
    run = _Run(trace.nodes, plan, backend, compile_small, moved or {})
    if key is not None and run.compiled_step is not None:
        replay = Replay.of(trace.nodes, plan, run.compiled_step, outputs[0], backend.memory)
        if replay is not None:
            cache.keep_replay(key, replay)
    return run.results(outputs)


def _on(place: Memory, values: dict[Node, Any]) -> dict[Node, Any]:
    """The reference executor's results (host arrays) as arrays of ``place``."""
    return {node: move(value, HOST, place) for node, value in values.items()}


def _warn_fault(what: str, error: Exception) -> None:
    warnings.warn(
        f"dynfuse: {what} failed ({type(error).__name__}: {error}); running it with the reference executor",
        RuntimeWarning,
        stacklevel=4,
    )


class Replay:
    """A plan of one compiled kernel whose loads are leaves, run again from the leaves of another
    trace of the same structure: no walk, no numbering, no plan lookup."""

    __slots__ = (
        "compiled",
        "direct",
        "fused_ops",
        "kernel",
        "loads",
        "memory",
        "output",
        "params",
        "positions",
        "result_key",
        "shape",
    )

    def __init__(
        self,
        kernel: Kernel,
        compiled: CompiledKernel,
        loads: tuple[tuple[int, Source], ...],
        params: tuple[int, ...],
        output: int,
        shape: tuple[int, ...],
        fused_ops: int,
        direct: bool,
        memory: Memory,
    ) -> None:
        self.kernel = kernel
        self.compiled = compiled
        self.memory = memory  # the backend's, which is the node's leaves' (``Replay.of``)
        self.loads = loads  # (leaf position, source) per load slot
        self.params = params  # leaf position per parameter slot
        self.output = output  # which output holds the node
        # The node's shape, where the kernel's output has another (the replay key fixes it)
        self.shape = None if kernel.output_layouts[output][0] == shape else shape
        self.fused_ops = fused_ops
        # Every load is its leaf's buffer as it is, in the layout the kernel was built for. The
        # replay key holds the leaves' layouts, so what held for this trace holds for every replay.
        self.direct = direct
        # The leaf positions of the loads, then of the parameters: what a direct launch reads
        self.positions = tuple(position for position, _ in loads) + params
        # The result's ``structure_id(buffer_key(...))``, once known. Ids are never reused, so one
        # kept past a reset of the table is at worst a replay miss for what reads the result.
        self.result_key: int | None = None

    @classmethod
    def of(
        cls, nodes: list[Node], plan: Plan, compiled: CompiledKernel, node: Node, memory: Memory
    ) -> Replay | None:
        """The replay of ``plan`` for ``node``'s structure, or None if the plan does more than that,
        or reads a leaf from another memory than ``memory``, where the kernel runs. (The structure
        holds where each leaf is, so what holds for this trace holds for every replay.)"""
        if len(plan.steps) != 1 or not isinstance(plan.steps[0], KernelStep):
            return None
        if any(leaf.memory is not memory for leaf in node.leaves if leaf.op.kind is OpKind.BUFFER):
            return None
        step = plan.steps[0]
        ((number, source),) = plan.outputs
        if source.views or number not in step.stores or any(load.views for load in step.loads):
            return None
        positions: dict[int, int] = {}
        for position, leaf in enumerate(node.leaves):
            positions.setdefault(id(leaf), position)
        try:
            loads = tuple((positions[id(nodes[load.node])], load) for load in step.loads)
            params = tuple(positions[id(nodes[number])] for number in step.params)
        except KeyError:  # a source that is not one of the node's leaves
            return None
        kernel = step.kernel
        direct = all(
            _read_as_it_is(nodes[load.node], load, kernel.shape, contiguous, memory)
            for load, contiguous in zip(step.loads, kernel.contiguous_loads, strict=True)
        )
        output = step.stores.index(number)
        return cls(kernel, compiled, loads, params, output, node.shape, len(step.nodes), direct, memory)

    def materialize(self, node: Node, key: tuple) -> bool:
        """Compute ``node`` by this replay; False if that failed (then it is forgotten, and the
        planned path runs the trace again, warning and falling back if it must)."""
        try:
            leaves = node.leaves
            if self.direct:  # the common case: every cached small trace's launch
                values = [leaves[position].buffer for position in self.positions]
                loads = len(self.loads)
                inputs, params = values[:loads], values[loads:]
            else:
                shape = self.kernel.shape
                inputs = [
                    read(leaf_value(leaves[position], self.memory), source, shape, self.memory)
                    for position, source in self.loads
                ]
                params = [leaves[position].buffer for position in self.params]
            result = launch(self.kernel, self.compiled, inputs, params, self.memory, held=self.direct)
            result = result[self.output]
            if self.shape is not None:
                result = result.reshape(self.shape)
            if self.result_key is None:  # the same every time: the kernel allocates it
                self.result_key = trace.structure_id(trace.buffer_key(result, node.device))
            node.become_leaf(result, self.result_key)
        except MemoryError:
            raise
        except Exception:
            cache.forget_replay(key)
            return False
        counters = _counters()
        counters["replays"] += 1
        counters["kernels_launched"] += 1
        counters["fused_ops"] += self.fused_ops
        counters["materializations"] += 1
        return True


def _read_as_it_is(
    leaf: Node, load: Source, shape: tuple[int, ...], contiguous: bool, memory: Memory
) -> bool:
    """Whether a kernel reads this leaf's buffer itself: no strided view, no contiguous copy."""
    if leaf.op.kind is not OpKind.BUFFER or (contiguous and not leaf.buffer.flags.c_contiguous):
        return False
    return read(leaf.buffer, load, shape, memory) is leaf.buffer


def leaf_value(node: Node, memory: Memory = HOST) -> Any:
    """A leaf's value as an array: its buffer, or its weak scalar as a 0-d array of ``memory``."""
    if node.op.kind is OpKind.SCALAR:
        return move(np.asarray(node.buffer), HOST, memory)
    return node.buffer


def read(value: Any, source: Source, shape: tuple[int, ...] | None, memory: Memory) -> Any:
    """``value``, an array of ``memory``, as ``source`` reads it: through its index map, unless that
    reads it as it is."""
    if source.index_map is not None and not (source.reads_in_place and value.shape == shape):
        value = views.strided_view(value, source.index_map, shape, memory)
    return value


def launch(
    kernel: Kernel,
    compiled: CompiledKernel,
    inputs: list[Any],
    params: list,
    memory: Memory = HOST,
    held: bool = False,
) -> list[Any]:
    """Run a compiled kernel on its inputs in ``memory``, first copied into the layout it was built
    for unless they are ``held`` in it already; its fresh outputs."""
    if not held:
        inputs = [
            memory.contiguous(value) if contiguous and not value.flags.c_contiguous else value
            for value, contiguous in zip(inputs, kernel.contiguous_loads, strict=True)
        ]
    outputs = allocate_outputs(kernel, memory)
    compiled(inputs, params, outputs)
    return outputs


def allocate_outputs(kernel: Kernel, memory: Memory) -> list[Any]:
    """A kernel's fresh outputs. Running out of memory here raises MemoryError, as NumPy would for
    the same arrays: the program's to handle, never a fault that falls back."""
    return [memory.empty(shape, dtype) for shape, dtype in kernel.output_layouts]


def _code_cost(backend: Backend, kernel: Kernel) -> tuple[float, bool]:
    """What getting the kernel's code costs, in the work of interpreting it, and whether the backend
    keeps that code (then it is only loaded, at the least cost, ``Target.first_sight_work``). If
    asking fails: nothing, as if kept; the kernel is then compiled at once, where the failure falls
    back as any compile's does."""
    try:
        if backend.cached(kernel):
            return backend.target.first_sight_work, True
        return backend.compile_work(kernel), False
    except Exception:
        return 0, True


def _interpreting_work(node: Node) -> float:
    """What the reference executor's NumPy pass for ``node`` costs: its elements (a reduction's
    operand's), as dear as its op (an exp is ten adds) and its elements' bytes (float64 twice
    float32)."""
    counted = node.inputs[0] if node.op.kind is OpKind.REDUCTION else node
    return views.size_of(counted.shape) * node.op.cost * max(node.dtype.itemsize, 4) / 4


class Tier(enum.Enum):
    """How a kernel step runs this time (``_Run._tier``)."""

    INTERPRETED = "interpreted"  # op by op, by the reference executor
    COMPILED = "compiled"  # launched, compiled first if it must be
    COMPILING = "compiling"  # interpreted, while it compiles in the background for later runs


class _Run:
    """One execution of a plan: the buffers of stored nodes, freed after their last reader."""

    def __init__(
        self,
        nodes: list[Node],
        plan: Plan,
        backend: Backend,
        compile_small: bool = False,
        moved: dict[Node, Any] | None = None,
    ) -> None:
        self.nodes = nodes
        self.plan = plan
        self.backend = backend
        self.memory: Memory = backend.memory  # where every buffer of the run is
        self.compile_small = compile_small  # a repeated trace: compile whatever the kernels' size
        self.compiled_step: CompiledKernel | None = None  # the last kernel that ran compiled
        self.buffers: dict[int, Any] = {}
        # Leaves from another memory, by number: their copies in this one
        self.moved = (
            {number: moved[node] for number, node in enumerate(nodes) if node in moved} if moved else {}
        )
        stats.count("kernels_planned", len(plan.kernels))
        for step, release in zip(plan.steps, plan.release, strict=True):
            if isinstance(step, LibraryStep):
                node = nodes[step.node]
                value = self.library_call(node, [self.array(source) for source in step.inputs])
                self.buffers[step.node] = value
                # See interpret.run: kept, never called again
                node.become_leaf(move(value, self.memory, node.memory))
            else:
                self.run_kernel(step)
            for number in release:
                del self.buffers[number]

    def library_call(self, node: Node, arguments: list) -> Any:
        """A library call's NumPy function on the run's arrays. On a device it is given the device's
        arrays, which NumPy hands to the device's library (CuPy's, by ``__array_function__``); where
        that fails, or does not give the shape and dtype NumPy's would, it runs on host copies."""
        params = dict(node.params)
        if self.memory is not HOST:
            try:
                value = node.op.reference(*arguments, **params)
            except MemoryError:  # the device's memory is full: as NumPy's would be, not a fault
                raise
            except Exception:  # the device's library lacks the function, or this use of it
                value = None
            if self.memory.owns(value) and value.shape == node.shape and value.dtype == node.dtype:
                return value
            stats.count_fallback(f"{node.op.name} on the host")
            arguments = [move(argument, self.memory, HOST) for argument in arguments]
        return move(np.asarray(node.op.reference(*arguments, **params)), HOST, self.memory)

    def results(self, outputs: list[Node]) -> dict[Node, Any]:
        values = {self.nodes[number]: self.array(source) for number, source in self.plan.outputs}
        return {node: values[node] for node in outputs}

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

    def run_kernel(self, step: KernelStep) -> None:
        kernel = step.kernel
        compiled = None
        tier = self._tier(step)
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
                    outputs = launch(kernel, compiled, inputs, params, self.memory)
            except MemoryError:
                raise
            except Exception as error:  # a fault of dynfuse's own code: never a wrong answer
                _warn_fault(f"a {self.backend.name} kernel", error)
                stats.count_fallback(f"kernel:{self.backend.name}")
                compiled = None
        if compiled is None:
            self.interpret(step)
            return
        self.compiled_step = compiled
        stats.count("kernels_launched")
        stats.count("fused_ops", len(step.nodes))
        for number, output in zip(step.stores, outputs, strict=True):
            self.buffers[number] = output.reshape(self.nodes[number].shape)

    def _tier(self, step: KernelStep) -> Tier:
        """Interpreted until interpreting this kernel's signature has cost as much as getting its
        code would (compiling it, as the backend estimates; loading it, where the backend keeps
        it), then compiled: the ski-rental rule, which never pays more than twice the best choice
        made knowing how often the kernel will run. A one-off statistic stays interpreted; a
        loop's body compiles after a few iterations, or at once. The first run that would compile
        is interpreted while the kernel compiles in the background (``Target.background_work``),
        unless its code is at hand (then compiling is only loading it).

        Interpreting costs every node of the group computed whole, a NumPy pass each
        (``_interpreting_work``). A kernel may compute far less (one element of a long chain,
        through an index map). Below ``Target.first_sight_work``, the least any code costs, the
        backend is not asked."""
        if not config.tiers:
            return Tier.COMPILED
        backend, target, kernel = self.backend, self.backend.target, step.kernel
        nodes = [self.nodes[number] for number in step.nodes]
        sizes = (views.size_of(node.shape) for node in nodes)
        if max(views.size_of(kernel.shape), *sizes) < target.tiny_elements:
            return Tier.COMPILED if self.compile_small else Tier.INTERPRETED
        work = sum(map(_interpreting_work, nodes))
        seen = _sighted((backend.name, kernel.signature), work)  # this run's work included
        if seen < target.first_sight_work:
            return Tier.INTERPRETED
        if cache.has_compiled(backend, kernel):
            return Tier.COMPILED
        cost, at_hand = _code_cost(backend, kernel)
        if seen < cost:
            return Tier.INTERPRETED
        if work < target.background_work and config.threads > 1 and not at_hand:
            return Tier.COMPILING
        return Tier.COMPILED

    def interpret(self, step: KernelStep) -> None:
        """The step's nodes by the reference executor: on host copies where the run is elsewhere."""
        order = [self.nodes[number] for number in step.nodes]
        stores = [self.nodes[number] for number in step.stores]
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
    trace = schedule.number_trace(topological_order(outputs), outputs)
    return trace.nodes, schedule.plan_for(trace, backend.target)


def wanted_nodes(nodes: Sequence[Node]) -> list[Node]:
    """The nodes a materialization of ``nodes`` computes: views together with what they view."""
    wanted: dict[int, Node] = {}
    for node in nodes:
        if not node.is_materialized:
            wanted[id(node)] = node
            viewed = _viewed(node)
            if viewed is not node and not viewed.is_materialized:
                wanted[id(viewed)] = viewed
    return list(wanted.values())
