"""Replays: a repeated trace run again from its new leaves, without walking, numbering or planning it.

A materialization that plans a trace with a replay key (``trace.replay_key``: the backend and the
structure recorded with the node, or with the group of nodes materialized together,
``Node.group``) keeps what it ran under that key. A later node of the same
structure finds its own leaves and intermediates at the same positions of its ``leaves`` and
``ancestors`` (the structure fixes them), and runs that again:
- ``KernelReplay``, a plan of one compiled kernel whose loads are leaves or views of leaves: it is
  launched on the leaves' buffers (every cached statement over arrays: one launch, no plan);
- ``PlanReplay``, any other plan (several kernels, library calls, kernels the tier policy still
  interprets): ``execute.run_plan`` runs it over the trace's own nodes, laid out as it numbered
  them, without the walk, the numbering and the plan lookup; once its kernels alone ran, all
  compiled, it is launched in C as they ran (``PlanReplay.keep_launch``).

Which deep intermediates the program still holds is part of what a run computes (they become
leaves too, ``trace.held_intermediates``), so a structure keeps a run for each set of them it met
(``Replay.runs``), and finds which set it is from reference counts alone (``trace.held_ancestors``).
Replays stand for plans and hold compiled kernels: forgetting either forgets them (``clear_plans``,
``clear_kernels``).
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.lib.array_utils import byte_bounds

from . import cache, config, interpret, stats, tiers, trace
from .devices import HOST, Memory
from .kernel import CompiledKernel, Kernel
from .launch import launch, leaf_value, read
from .ops import OpKind
from .trace import Node

if TYPE_CHECKING:  # the planner is imported at the first plan, off ``import dynfuse``'s path
    from .schedule import KernelStep, Plan, Source

_counters = stats.thread_counters

# Replays by replay key, most recently used last; read and written under ``execute.lock``. An
# OrderedDict, not a ``cache.CountedCache``: a replay lookup is on the dispatch path of every small
# trace, and cachetools' LRU with its own lock costs microseconds there. Not counted here: a replay
# is counted when it runs, and a miss is the planned path's to count.
_replays: OrderedDict[tuple, Replay] = OrderedDict()

# ``launch_replay(node, launch_plan)``: a ``KernelReplay``'s launch, or a ``PlanReplay``'s kernels',
# in C, where the C recorder is in use (``accelerate``); None otherwise, and they run in Python.
launch_replay: Callable[[Node, tuple], bool] | None = None
# ``replay_now(node, backend_name, _replays)``: what ``execute.materialize`` does for a node whose
# structure kept a launch in C, done in C (while sites' recordings are pending, with the run of the
# program's loop it belongs to, as ``execute._loop_run``); None where the C recorder is not in use.
replay_now: Callable[[Node, str, OrderedDict, bool], bool] | None = None
# ``replay_group_now(nodes, backend_name, _replays)``: the same for several pending host nodes, none
# a view, replayed as their group (``Node.group``).
replay_group_now: Callable[[tuple, str, OrderedDict, bool], bool] | None = None


def find(key: tuple) -> Replay | None:
    found = _replays.get(key)
    if found is not None:
        _replays.move_to_end(key)
    return found


def keep(key: tuple, node: Node, order: list[Node], held: tuple[int, ...], run: Run) -> None:
    """Keep ``run`` for ``node``'s structure, when the program holds the deep intermediates at
    ``held`` (positions in ``node.ancestors``); ``order`` is the trace, still unmaterialized."""
    kept = _replays.get(key)
    if kept is None:
        kept = _replays[key] = Replay(trace.deep_ancestors(node, order))
        if len(_replays) > config.plan_cache_size:
            _replays.popitem(last=False)
    kept.runs[held] = run


def forget(key: tuple) -> None:
    _replays.pop(key, None)


def clear_plans() -> None:
    """Forget every plan, and the replays that stand for them: the next traces are planned again."""
    from . import schedule

    schedule.plans.clear()
    _replays.clear()


def clear_kernels() -> None:
    """Forget every compiled kernel, and the replays that hold them: the next kernels compile again."""
    cache.kernels.clear()
    _replays.clear()


class Replay:
    """What one structure keeps: a run for each set of held deep intermediates it met."""

    __slots__ = ("deep", "runs")

    def __init__(self, deep: tuple[tuple[int, int], ...]) -> None:
        self.deep = deep  # ``trace.deep_ancestors``: where held intermediates may be
        self.runs: dict[tuple[int, ...], Run] = {}

    def held(self, node: Node) -> tuple[int, ...]:
        """The positions in ``node.ancestors`` of the deep intermediates the program holds."""
        return trace.held_ancestors(node, self.deep) if self.deep else ()


def pool(node: Node) -> tuple[Node, ...]:
    """Every node of ``node``'s trace at a position its structure fixes: leaves, ancestors, itself."""
    return (*node.leaves, *node.ancestors, node)


def nodes_computed(node: Node) -> list[Node]:
    """What a run for ``node`` computes, inputs first: its ancestors and itself, or, for a group of
    nodes materialized together (``Node.group``), its ancestors, the members among them."""
    return [*node.ancestors] if node.op is trace.GROUP else [*node.ancestors, node]


def positions_of(node: Node) -> dict[int, int]:
    """Each node of ``node``'s trace, by id: its first position in ``pool(node)``."""
    positions: dict[int, int] = {}
    for position, member in enumerate(pool(node)):
        positions.setdefault(id(member), position)
    return positions


class PlanReplay:
    """A plan run again over another trace of the same structure: its nodes, laid out as the plan
    numbered them, are taken from the trace's ``pool`` (``nodes_of``), so nothing is walked,
    numbered or looked up. ``execute.run_plan`` runs it, each kernel at the tier it gets then."""

    __slots__ = (
        "distinct",
        "first",
        "launch_plan",
        "launchable",
        "launchable_in_c",
        "outputs",
        "plan",
        "take",
    )

    def __init__(self, plan: Plan, numbers: list[int], node: Node, positions: dict[int, int]) -> None:
        self.plan = plan
        take = operator.itemgetter(*numbers)
        self.take: Callable[[tuple], Any] = take if len(numbers) > 1 else lambda p: (take(p),)
        self.outputs = tuple(number for number, _ in plan.outputs)
        # Whether a run of it as one compiled kernel may be a ``KernelReplay`` (cleared once not)
        self.launchable = len(plan.steps) == 1 and len(plan.kernels) == 1
        # How the trace shares its intermediates, which its structure alone does not say (``t + t``
        # and ``-x + -x``): the first position of each ancestor, and how many distinct ones it has.
        leaves, ancestors = len(node.leaves), node.ancestors
        first = tuple(positions[id(ancestor)] - leaves for ancestor in ancestors)
        self.first = None if first == tuple(range(len(ancestors))) else first
        self.distinct = len(set(map(id, ancestors)))
        # What ``launch_replay`` takes, once its kernels alone ran, all compiled (``keep_launch``);
        # whether that may still be: not once a kernel ran compiled that C cannot launch
        self.launch_plan: tuple | None = None
        self.launchable_in_c = True

    @classmethod
    def of(cls, plan: Plan, nodes: list[Node], node: Node) -> PlanReplay | None:
        """The replay of ``plan`` over the numbered ``nodes`` of ``node``'s trace, or None where one
        of them is not at a position of its structure (then nothing is replayed)."""
        positions = positions_of(node)
        try:
            numbers = [positions[id(member)] for member in nodes]
        except KeyError:
            return None
        return cls(plan, numbers, node, positions)

    def nodes_of(self, node: Node) -> list[Node] | None:
        """``node``'s trace as the plan numbered it, or None where it shares its intermediates
        otherwise than the trace planned (then the plan would not compute it as numbered)."""
        ancestors = node.ancestors
        if len(set(map(id, ancestors))) != self.distinct:
            return None
        first = self.first
        if first is not None and any(ancestors[i] is not ancestors[f] for i, f in enumerate(first)):
            return None
        return list(self.take(pool(node)))

    def keep_launch(
        self, nodes: list[Node], node: Node, launched: list[tuple[KernelStep, tuple | None]], values: dict
    ) -> None:
        """Launch the plan in C from now on (``launch_plan``), where the run that computed ``values``
        over its numbered ``nodes`` (of ``node``'s trace) ran its kernels alone, each compiled and
        launchable in C (``launched``, as ``execute.run_plan`` found them), reading leaves of the
        trace and outputs of the kernels before it, and each of the plan's outputs is a kernel's
        output as it is."""
        # What keeps a plan from C holds for every trace of its structure; not an interpreted kernel
        if any(launch is None for _, launch in launched):
            self.launchable_in_c = False
            return
        if len(launched) != len(self.plan.steps):  # a kernel interpreted: maybe not next time
            return
        positions = positions_of(node)
        leaf_count = len(node.leaves)
        made: dict[int, int] = {}  # a stored number: its position among the values a launch reads
        steps = []
        for step, (loads, run, layouts, placements) in launched:
            try:
                slots = [
                    made[source.node]
                    if source.node in made
                    else _leaf_position(positions, nodes[source.node], leaf_count)
                    for source in step.loads
                ]
                params = [_leaf_position(positions, nodes[number], leaf_count) for number in step.params]
            except KeyError:  # an intermediate that no kernel before it stored
                self.launchable_in_c = False
                return
            for number in step.stores:
                made[number] = leaf_count + len(made)
            steps.append(((*slots, *params), loads, run, layouts, placements))
        stores, keys = [], []
        for number, source in self.plan.outputs:
            if source.views or number not in made:
                self.launchable_in_c = False
                return
            at = positions[id(nodes[number])] - leaf_count
            stores.append((made[number] - leaf_count, -1 if at == len(node.ancestors) else at))
            keys.append(trace.structure_id(trace.buffer_key(values[nodes[number]], node.device)))
        computed = [nodes[number] for step, _ in launched for number in step.nodes]
        verdict = tiers.recording_verdict(len(steps), tiers.paying_ops(computed), 0)
        self.launch_plan = (tuple(steps), tuple(stores), tuple(keys), len(computed), verdict)


def kernel_launch(
    kernel: Kernel, compiled: CompiledKernel, bases: list[Any], inputs: list[Any], outputs: list[Any]
) -> tuple | None:
    """How C launches a kernel again, once it ran on ``inputs`` (views of ``bases``, the values its
    loads read, or those values themselves) into fresh ``outputs``: (its loads, ``compiled``'s C
    call (``native_call``), its outputs' layouts, where each load lies in its base
    (``_placement``; None where each is its base)); what a launch plan's step holds but the
    positions of the values it reads. None where C cannot: no such call, an output not
    C-contiguous, a load not placed, or one the kernel reads contiguous that was not (``launch``
    copied it). C takes a large output from the pool, as ``launch`` does."""
    native_call = getattr(compiled, "native_call", None)
    run = native_call() if native_call is not None else None
    if (
        run is None
        or any(not output.flags.c_contiguous for output in outputs)
        or any(
            contiguous and not value.flags.c_contiguous
            for value, contiguous in zip(inputs, kernel.contiguous_loads, strict=True)
        )
    ):
        return None
    placements = tuple(_placement(base, value) for base, value in zip(bases, inputs, strict=True))
    if False in placements:
        return None
    layouts = tuple((output.shape, output.dtype) for output in outputs)
    return len(inputs), run, layouts, None if all(p is None for p in placements) else placements


class KernelReplay:
    """A plan of one compiled kernel whose loads are leaves or views of leaves, launched again on
    the leaves of another trace of the same structure: no walk, no numbering, no plan lookup."""

    __slots__ = (
        "compiled",
        "direct",
        "fused_ops",
        "gather",
        "kernel",
        "launch_plan",
        "loads",
        "memory",
        "params",
        "result_keys",
        "stores",
        "verdict",
    )

    def __init__(
        self,
        kernel: Kernel,
        compiled: CompiledKernel,
        loads: tuple[tuple[int, tuple, Source], ...],
        params: tuple[int, ...],
        stores: tuple[tuple[int, int, tuple[int, ...] | None], ...],
        fused_ops: int,
        direct: bool,
        memory: Memory,
        verdict: int = 1,
    ) -> None:
        self.kernel = kernel
        # What a launch of it tells the sites whose nodes it computes (``tiers.recording_verdict``)
        self.verdict = verdict
        self.compiled = compiled
        self.memory = memory  # the backend's, which is the node's leaves' (``KernelReplay.of``)
        # Per load slot: its leaf's position, the views it is read through, and its source where
        # the view is then read through its index map (None: read as it is)
        self.loads = loads
        self.params = params  # leaf position per parameter slot
        # Per value computed: the kernel's output holding it, its position in ``node.ancestors``
        # (-1: the node itself), and its shape where the output has another (the key fixes it)
        self.stores = stores
        self.fused_ops = fused_ops
        # Every load is its leaf's buffer as it is, in the layout the kernel was built for. The
        # replay key holds the leaves' layouts, so what held for this trace holds for every replay.
        self.direct = direct
        # The leaves at the positions of the loads, then of the parameters: what a direct launch reads
        positions = tuple(position for position, _, _ in loads) + params
        take = operator.itemgetter(*positions)
        self.gather: Callable[[tuple], Any] = take if len(positions) > 1 else lambda leaves: (take(leaves),)
        # Each result's ``structure_id(buffer_key(...))``, once known. Ids are never reused, so one
        # kept past a reset of the table is at worst a replay miss for what reads the result.
        self.result_keys: list[int | None] = [None] * len(stores)
        # What ``launch_replay`` takes, once a launch in Python has found the result keys
        # (``_launch_plan``); None until then, and for ever where C cannot launch it.
        self.launch_plan: tuple | None = None

    @classmethod
    def of(
        cls,
        nodes: list[Node],
        plan: Plan,
        compiled: tuple[Kernel, CompiledKernel],
        node: Node,
        memory: Memory,
    ) -> KernelReplay | None:
        """The replay of ``plan`` (over the numbered ``nodes`` of ``node``'s trace), launching the
        ``compiled`` kernel its one step ran (the step's, or its variant writing a given array), or
        None if the plan does more than one kernel over leaves and their views, or reads a leaf
        from another memory than ``memory``, where the kernel runs, but a converted NumPy scalar,
        which each launch puts there. (The structure holds where each leaf is, so what holds for this trace
        holds for every replay.)"""
        if len(plan.steps) != 1 or len(plan.kernels) != 1:
            return None
        if any(
            leaf.memory is not memory and leaf.device is not None
            for leaf in node.leaves
            if leaf.op.kind is OpKind.BUFFER
        ):
            return None
        step = plan.steps[0]
        if any(source.views or number not in step.stores for number, source in plan.outputs):
            return None
        positions = positions_of(node)
        leaves, ancestors = len(node.leaves), len(node.ancestors)
        try:
            loads = tuple(
                (_leaf_position(positions, nodes[load.node], leaves), _views(nodes, load.views), load)
                for load in step.loads
            )
            params = tuple(_leaf_position(positions, nodes[number], leaves) for number in step.params)
        except KeyError:  # a source that is not one of the node's leaves
            return None
        stores = []
        for number, _ in plan.outputs:
            position = positions[id(nodes[number])] - leaves
            output = step.stores.index(number)
            shape = nodes[number].shape
            stores.append((output, -1 if position == ancestors else position, _reshape(step, output, shape)))
        kernel, compiled_kernel = compiled
        direct = all(
            not views and _read_as_it_is(nodes[load.node], load, kernel.shape, contiguous, memory)
            for (_, views, load), contiguous in zip(loads, kernel.contiguous_loads, strict=True)
        )
        if not direct:  # where a load's view already has the iteration's shape, it is read as it is
            loads = tuple(
                (
                    position,
                    views,
                    None if _viewed_as_it_is(nodes[load.node], views, load, kernel, memory) else load,
                )
                for position, views, load in loads
            )
        verdict = tiers.recording_verdict(1, tiers.paying_ops([nodes[n] for n in step.nodes]), 0)
        return cls(
            kernel, compiled_kernel, loads, params, tuple(stores), len(step.nodes), direct, memory, verdict
        )

    def materialize(self, node: Node, key: tuple, into: Any = None) -> bool:
        """Compute ``node`` (and the held intermediates this replay was kept for) by this replay;
        False if that failed (then it is forgotten, and the planned path runs the trace again,
        warning and falling back if it must). ``into``: where the node's value is written, which
        stays pending (``execute.materialize_into``); by the kernel, where its output is strided."""
        try:
            plan = self.launch_plan
            if plan is not None and into is None and launch_replay is not None and launch_replay(node, plan):
                return True  # counted, and the sites settled, in C
            members = pool(node)  # the trace's nodes, for the sites' verdict
            leaves = node.leaves
            if self.direct:  # the common case: every cached small trace's launch
                values = [leaf.buffer for leaf in self.gather(leaves)]
                loads = len(self.loads)
                inputs, params = values[:loads], values[loads:]
            else:
                memory = self.memory
                inputs = []
                for position, views, source in self.loads:
                    value = leaf_value(leaves[position], memory)
                    for view in views:
                        value = view(value)
                    inputs.append(value if source is None else read(value, source, self.kernel.shape, memory))
                params = [leaves[position].buffer for position in self.params]
            given = None
            if into is not None:  # where the kernel writes it through strides (else it is copied in)
                output = next(output for output, at, _ in self.stores if at < 0)
                given = (output, into) if self.kernel.outputs[output].strided else None
            results = launch(self.kernel, self.compiled, inputs, params, self.memory, self.direct, given)
        except MemoryError:
            raise
        except Exception:
            forget(key)
            return False
        interpret.heed_kernel_flags(lambda: nodes_computed(node))  # the program's error, not a fault
        try:
            ancestors = node.ancestors
            computed = [node if at < 0 else ancestors[at] for _, at, _ in self.stores]
            for slot, (output, at, shape) in enumerate(self.stores):
                result = results[output] if shape is None else results[output].reshape(shape)
                result_key = self.result_keys[slot]
                if into is not None and at < 0:
                    if given is None:
                        np.copyto(into, result)
                    continue
                if result_key is None:  # the same every time: the kernel allocates it
                    result_key = self.result_keys[slot] = trace.structure_id(
                        trace.buffer_key(result, node.device)
                    )
                computed[slot].become_leaf(result, result_key)
        except MemoryError:
            raise
        except Exception:
            forget(key)
            return False
        if self.launch_plan is None and launch_replay is not None and into is None:
            self.launch_plan = self._launch_plan(leaves, inputs, results)
        # Recording pays where the next replays launch in C (``launch_replay`` tells it from then on)
        tiers.settle_sites(self.verdict if self.launch_plan is not None else -1, members)
        counters = _counters()
        counters["replays"] += 1
        counters["kernels_launched"] += 1
        counters["fused_ops"] += self.fused_ops
        counters["materializations"] += 1
        return True

    def _launch_plan(self, leaves: tuple[Node, ...], inputs: list[Any], outputs: list[Any]) -> tuple | None:
        """What ``launch_replay`` takes: this kernel's launch (``kernel_launch``, given the ``inputs``
        and ``outputs`` of this launch), its outputs each made in the shape of the node it is stored
        as (a fresh output is C-contiguous: a per-row value's (rows, 1) is its node's (rows,)). None
        where the kernel cannot be launched so, or runs elsewhere than on the host."""
        shapes = {output: shape for output, _, shape in self.stores if shape is not None}
        twice = len(shapes) < len({(output, shape) for output, _, shape in self.stores if shape is not None})
        if self.memory is not HOST or None in self.result_keys or twice:
            return None
        outputs = [value.reshape(shapes.get(output, value.shape)) for output, value in enumerate(outputs)]
        bases = [leaves[position].buffer for position, _, _ in self.loads]
        launch = kernel_launch(self.kernel, self.compiled, bases, inputs, outputs)
        if launch is None:
            return None
        positions = tuple(position for position, _, _ in self.loads) + self.params
        stores = tuple((output, at) for output, at, _ in self.stores)
        return ((positions, *launch),), stores, tuple(self.result_keys), self.fused_ops, self.verdict


def _placement(buffer: Any, value: Any) -> tuple | bool | None:
    """Where a load ``value`` lies in its leaf's ``buffer``: None where it is the buffer itself;
    (byte offset, shape, strides, dtype) where it is a view inside the buffer's bytes, the same
    in every replay (the structure fixes the leaf's layout, and the views' params); False where it
    is neither (a copy, a device's array)."""
    if value is buffer:
        return None
    if not (isinstance(value, np.ndarray) and isinstance(buffer, np.ndarray)) or not value.size:
        return False
    low, high = byte_bounds(value)
    start, end = byte_bounds(buffer)
    if low < start or high > end:
        return False
    offset = value.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]
    return offset, value.shape, value.strides, value.dtype


Run = KernelReplay | PlanReplay


def _leaf_position(positions: dict[int, int], leaf: Node, leaves: int) -> int:
    position = positions[id(leaf)]
    if position >= leaves:
        raise KeyError(position)  # an intermediate: not a leaf of the trace
    return position


def _views(nodes: list[Node], numbers: tuple[int, ...]) -> tuple[Callable, ...]:
    """The view nodes a load reads its leaf through, as calls: their ops and params are the
    structure's, the same in every trace of it."""
    return tuple(nodes[number].op.bound(nodes[number].params) for number in numbers)


def _viewed_as_it_is(
    leaf: Node, views: tuple[Callable, ...], load: Source, kernel: Kernel, memory: Memory
) -> bool:
    """Whether the kernel reads the view of this leaf as it is (then so it does in every replay:
    the structure fixes the leaf's layout, and so the view's)."""
    value = leaf_value(leaf, memory)
    for view in views:
        value = view(value)
    return read(value, load, kernel.shape, memory) is value


def _reshape(step: KernelStep, output: int, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The node's shape, where the kernel's output has another."""
    return None if step.kernel.output_layouts[output][0] == shape else shape


def _read_as_it_is(
    leaf: Node, load: Source, shape: tuple[int, ...], contiguous: bool, memory: Memory
) -> bool:
    """Whether a kernel reads this leaf's buffer itself: no strided view, no contiguous copy, no
    move to the device."""
    if leaf.op.kind is not OpKind.BUFFER or (contiguous and not leaf.buffer.flags.c_contiguous):
        return False
    if leaf.memory is not memory:
        return False
    return read(leaf.buffer, load, shape, memory) is leaf.buffer
