"""Replays: a repeated trace's one compiled kernel run again from its new leaves, unplanned.

A materialization whose plan is one compiled kernel that reads the node's leaves keeps a ``Replay``
under the node's replay key (``trace.replay_key``: the backend and the structure recorded with the
node); a later node of the same structure is computed by that kernel on its own leaves. Replays
stand for plans and hold compiled kernels: forgetting either forgets them (``clear_plans``,
``clear_kernels``).
"""

from __future__ import annotations

from collections import OrderedDict

from . import cache, config, schedule, stats, trace
from .devices import Memory
from .kernel import CompiledKernel, Kernel
from .launch import launch, leaf_value, read
from .ops import OpKind
from .schedule import KernelStep, Plan, Source
from .trace import Node

_counters = stats.thread_counters

# Replays, most recently used last; read and written under ``execute.lock``. An OrderedDict, not a
# ``cache.CountedCache``: a replay lookup is on the dispatch path of every small trace, and
# cachetools' LRU with its own lock costs microseconds there. Not counted here: a replay is counted
# when it runs, and a miss is the planned path's to count.
_replays: OrderedDict[tuple, Replay] = OrderedDict()


def find(key: tuple) -> Replay | None:
    found = _replays.get(key)
    if found is not None:
        _replays.move_to_end(key)
    return found


def keep(key: tuple, replay: Replay) -> None:
    _replays[key] = replay
    if len(_replays) > config.plan_cache_size:
        _replays.popitem(last=False)


def forget(key: tuple) -> None:
    _replays.pop(key, None)


def clear_plans() -> None:
    """Forget every plan, and the replays that stand for them: the next traces are planned again."""
    schedule.plans.clear()
    _replays.clear()


def clear_kernels() -> None:
    """Forget every compiled kernel, and the replays that hold them: the next kernels compile again."""
    cache.kernels.clear()
    _replays.clear()


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
            forget(key)
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
