"""The scheduler: from a trace and the shapes it now has, the kernels that compute it.

A plan is a list of steps. A *kernel step* is one fusion group: a backend compiles it into one
kernel that reads each input once and writes each output once. A *library step* runs a barrier
(matmul), or an op whose NumPy loop beats the backend's code (``Target.library_ops``), through its
library call on buffers. Between them, nodes are *stored*: computed by one
step into a buffer and read by later ones. Everything not stored is computed inside the kernels
that need it, views included (they become index maps, not copies).

What is stored:
- the requested outputs, and the inputs of barriers;
- a reduction whose result is read in a way its consumer's kernel cannot iterate along (another
  shape, other axes, a transposed read), and the input of a reshape that no index map can express;
- a reduction whose consumers need a second pass over rows too long to stay in cache or in one GPU
  block (``Target.persistent_row_elements``): softmax over short rows is one kernel, over long
  rows three;
- a node that several kernels would each recompute, when the cost model says that writing it once
  and reading it back costs less (see ``_worth_storing``).

Kernels of the same iteration space share one step when they are related (one reads a buffer the
other reads, or a value the other computes) and no dependency forbids it, so several outputs that
read the same inputs (``evaluate(a, b)``, the mean and variance of one array) come out of one
kernel. Unrelated work stays apart: joined, it would save no memory traffic, and every way a plan
happens to group it would be another signature to compile (a loop's iterations, materialized two
or three at a time).

Each decision can say why: ``reasons`` gives, for each kernel, why it did not join the kernel
before it or the latest kernel over its iteration space (``Apart``: different iteration spaces,
unrelated work, other rows, a value it cannot compute inline, a step in between computing what it
reads), and why each value between kernels is stored (``Stored``: how its reader reads it, long
rows, the cost model's numbers); ``dynfuse.explain`` prints them. Planning for a run notes none.

Plans are indexed by node *numbers* (inputs before consumers), not by nodes, and cached by the
trace's structural signature: op names, params, edges, shapes and dtypes, the strides of buffers
that are not C-contiguous (a plan reads broadcast axes and contiguity from them), with weak scalars
by type only. A loop that rebuilds the same trace, with changing scalars, plans once.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from . import cache, config, ops, views
from .devices import HOST
from .kernel import LOAD, PARAM, Instruction, Kernel, Output, Signature, Target
from .ops import OpKind
from .trace import Node, buffer_key
from .views import IndexMap

# A plan's parts are named tuples, not frozen dataclasses: making this module's classes is a
# program's first plan's cost, and a frozen dataclass takes about 1 ms to make, a named tuple 0.3.


class Source(NamedTuple):
    """A buffer as a step reads it: a node that holds one, through view nodes applied to it."""

    node: int
    views: tuple[int, ...] = ()  # view nodes, innermost first
    index_map: IndexMap | None = None  # for kernel loads: where the iteration index reads it

    @property
    def reads_in_place(self) -> bool:
        """The index map is the identity: a buffer of the iteration's shape is read as it is."""
        return self.index_map == views.identity_map(len(self.index_map.rows)) if self.index_map else False


class KernelStep(NamedTuple):
    kernel: Kernel
    loads: tuple[Source, ...]  # one per load slot
    params: tuple[int, ...]  # the scalar node of each parameter slot
    stores: tuple[int, ...]  # the node each output holds
    nodes: tuple[int, ...]  # the trace nodes it computes, in order: what an interpreter would run


class LibraryStep(NamedTuple):
    node: int
    inputs: tuple[Source, ...]


Step = KernelStep | LibraryStep


class Why(enum.Enum):
    """A reason the planner gives: text with ``{}`` for its details, ``{node}`` for the trace node it
    names, ``{earlier}`` and ``{later}`` for the two kernel steps it keeps apart."""

    # why a kernel did not join an earlier kernel
    SHAPES = "different iteration spaces {} and {}"
    UNRELATED = "unrelated: no input or computed value in common, so joining them saves nothing"
    AXES = "different rows: kernel {earlier} runs along axes {}, kernel {later} along {}"
    ROW_VALUE = "kernel {later} reads {node} per element, which kernel {earlier} has only once a row is done"
    NOT_INLINE = "kernel {later} reads {node}, a {} that kernel {earlier} stores and it cannot compute inline"
    BARRIER = "a barrier between them: kernel {later} reads {node} from library {}"
    AFTER = "kernel {later} reads {node} from kernel {}, which runs between them"
    UNSHARED = (
        "kernel {later} reads {node} out of its order (shifted, or per row): kernel {earlier} computes it"
    )
    # why a node is stored, besides being requested or a library call's input
    REDUCTION_READ = "a reduction that a kernel over {} reads other than along its rows"
    SCAN_READ = "a scan along axes {} that a kernel over {} reads other than in order in its own pass"
    RESHAPE = "a reshape from {} to {} that no index map expresses reads it"
    MOVED = "a kernel over {} reads this roll with a step or across axes, which no wrap expresses"
    GATHERED = "a gather reads it at the positions its index arrays give"
    MANY_PLACES = "a kernel reads it at more than {} places around each element (a stencil of a stencil)"
    LONG_ROWS = "its readers need another pass over rows of {} elements, more than the {} one kernel makes"
    COST = "computing it in each of {} kernels costs {:g}, storing it once {:g} (in element loads)"
    RUNNING = "a {} that {} kernels would each compute, each reading its whole operand: computed once"


class Apart(NamedTuple):
    """Why kernel step ``later`` did not join kernel step ``earlier``: the kernel before it, or the
    latest one over the same iteration space."""

    earlier: int
    later: int
    why: Why
    node: int | None  # the trace node the reason names
    details: tuple = ()


class Stored(NamedTuple):
    """Why node ``node`` is stored, besides being requested or a library call's input."""

    node: int
    why: Why
    details: tuple


class Reasons(NamedTuple):
    """Why a plan's kernels stay apart and its values between them are stored (``reasons``)."""

    apart: tuple[Apart, ...]  # for each kernel, why it did not join the one before, nor the last of its shape
    stored: tuple[Stored, ...]  # by node


class Plan(NamedTuple):
    steps: tuple[Step, ...]
    outputs: tuple[tuple[int, Source], ...]  # each requested node and where its value is
    release: tuple[tuple[int, ...], ...]  # per step: stored nodes nothing reads after it

    @property
    def kernels(self) -> list[KernelStep]:
        return [step for step in self.steps if isinstance(step, KernelStep)]


# ---- the trace, numbered ------------------------------------------------------------------------


class Trace(NamedTuple):
    """The nodes that materializing ``outputs`` needs, numbered inputs first, and its signature."""

    nodes: list[Node]
    outputs: tuple[int, ...]
    signature: Signature


def number_trace(order: list[Node], outputs: list[Node]) -> Trace:
    """``order`` is ``topological_order(outputs)``."""
    numbers: dict[int, int] = {}
    nodes: list[Node] = []
    items: list[tuple] = []
    scalar_op = ops.SCALAR
    for node in order:
        inputs = []
        for child in node.inputs:
            number = numbers.get(id(child))
            if number is None:  # a leaf, numbered before its first reader
                number = numbers[id(child)] = len(nodes)
                nodes.append(child)
                if child.op is scalar_op:
                    items.append(("scalar", type(child.buffer)))
                else:
                    items.append(("buffer", *buffer_key(child.buffer)))
            inputs.append(number)
        numbers[id(node)] = len(nodes)
        nodes.append(node)
        items.append((node.op.name, node.params, tuple(inputs), node.shape, node.dtype))
    requested = tuple(numbers[id(node)] for node in outputs)
    return Trace(nodes, requested, Signature((tuple(items), requested)))


# ---- the plan cache -----------------------------------------------------------------------------

plans = cache.CountedCache(config.plan_cache_size, "plan_cache_hits", "plan_cache_misses")


def plan_for(trace: Trace, target: Target) -> Plan:
    return plans.get_or_build((target, trace.signature), lambda: _Planner(trace, target).plan())


# ---- planning -----------------------------------------------------------------------------------


def reduction_axes(node: Node) -> tuple[int, ...]:
    axis = dict(node.params)["axis"]
    ndim = len(node.inputs[0].shape)
    if axis is None:
        return tuple(range(ndim))
    return axis if isinstance(axis, tuple) else (axis,)


def _scan_axes(node: Node) -> tuple[int, ...]:
    return (dict(node.params)["axis"],)


# Nodes that read whole rows of their operand for each value: never computed twice.
_RUNNING = (OpKind.REDUCTION, OpKind.SCAN)
# What a kernel computes inline where a kernel it joins stores it: values per element, in its pass
_INLINE = (OpKind.ELEMENTWISE, OpKind.SCAN, OpKind.MOVE, OpKind.GATHER)
# The most index maps a kernel computes one elementwise node at (a 3x3 stencil's of a computed
# value); a node read at more is stored, so a chain of stencils (a time loop of rolls) is not
# inlined step into step, its work multiplying with each step.
MOST_PLACES = 9


def _keeps_dims(node: Node) -> bool:
    return len(node.shape) == len(node.inputs[0].shape)


def _contiguous_stand_in(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An array with a fresh C-contiguous buffer's layout, over one element: never to be read."""
    strides = tuple(stride * dtype.itemsize for stride in views.contiguous_strides(shape))
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, strides)


class _Group:
    """Stored nodes that one kernel computes, over one iteration space."""

    __slots__ = ("axes", "roots", "row_roots", "shape", "sources")

    def __init__(self, shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
        self.shape = shape
        self.axes = axes
        self.roots: list[int] = []
        self.row_roots: set[int] = set()  # reductions, and values per row
        self.sources: set[int] = set()  # the buffers its roots read, and the roots


def reasons(trace: Trace, target: Target) -> Reasons:
    """Why the plan for ``trace`` keeps its kernels apart and stores what it stores.

    Planning for a run notes no reasons, so as to cost nothing: the trace is planned again, and its
    final grouping made once more, noting each refusal.
    """
    planner = _Planner(trace, target)
    plan = planner.plan()
    apart: list[Apart] = []
    assert len(planner._group(apart)) == len(plan.steps), "grouping again gave another plan"
    return Reasons(tuple(apart), tuple(Stored(n, *why) for n, why in sorted(planner.why_stored.items())))


def _runs_in_library(node: Node, target: Target) -> bool:
    """A barrier; an elementwise op whose NumPy loop is faster than the target's code for it; or a
    reduction whose NumPy loop is faster along its operand's last axis (``library_row_reductions``)
    that reduces that axis, in rows long enough (``library_row_elements``)."""
    kind = node.op.kind
    if kind is OpKind.ELEMENTWISE:
        return (node.op.name, node.dtype.char) in target.library_ops
    if kind is OpKind.REDUCTION and node.op.name in target.library_row_reductions:
        axis, shape = dict(node.params).get("axis"), node.inputs[0].shape
        if axis is None:
            return views.size_of(shape) >= target.library_row_elements
        return axis == len(shape) - 1 and shape[axis] >= target.library_row_elements
    return kind is OpKind.BARRIER


class _Planner:
    def __init__(self, trace: Trace, target: Target) -> None:
        self.nodes = trace.nodes
        self.requested = trace.outputs
        self.target = target
        self.numbers = {id(node): number for number, node in enumerate(self.nodes)}
        self.library = {n for n, node in enumerate(self.nodes) if _runs_in_library(node, target)}
        self.stored = {n for n in self.requested if self.nodes[n].op.kind is not OpKind.VIEW} - self.library
        # Stored nodes of one iteration space share kernels, unless a shared kernel would compute a
        # node and also read it out of its order: then no node that reads it joins its kernel.
        self.unshared: set[int] = set()
        # Stored values per row, with their kernels' iteration spaces, as the grouping meets them:
        # what is computed from one alone, elementwise, is per row in the same kernel.
        self.row_domains: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self.why_stored: dict[int, tuple[Why, tuple]] = {}  # see ``Stored``
        # The nodes a kernel's builder asks ``is_source`` about while it builds (``_builder``)
        self.asked: set[int] | None = None

    def number(self, node: Node) -> int:
        return self.numbers[id(node)]

    def is_source(self, n: int, computing: frozenset[int] = frozenset()) -> bool:
        """A node holding a buffer when a step that computes ``computing`` runs."""
        if self.asked is not None:
            self.asked.add(n)
        node = self.nodes[n]
        return node.is_materialized or ((n in self.stored or n in self.library) and n not in computing)

    def source_chain(self, n: int, computing: frozenset[int] = frozenset()) -> Source | None:
        """``n`` as views of a source, or None when a computed node lies under its views."""
        chain = []
        while self.nodes[n].op.kind is OpKind.VIEW and not self.is_source(n, computing):
            chain.append(n)
            n = self.number(self.nodes[n].inputs[0])
        return Source(n, tuple(reversed(chain))) if self.is_source(n, computing) else None

    def access_layout(self, source: Source, shape: tuple[int, ...]) -> tuple:
        """How a load reads memory: the axes it is constant along, whether it is contiguous, whether
        its source is 0-d (one value for the whole kernel, as NumPy sees a 0-d operand), and the axis
        it steps along fastest (its smallest stride; None if it reads one value), which tells a
        backend whether a reduction reads memory in order along its rows or across them.

        Found from the buffers this trace holds (``source_array``).
        """
        array = self.source_array(source)
        if array.size == 0:  # read only by an empty iteration, as an empty array: NumPy's strides 0
            strides = (0,) * len(shape)
        else:  # the strides of the view ``views.strided_view`` would make
            strides = views.read_strides(array.strides, source.index_map, len(shape))
        broadcast = tuple(
            axis
            for axis, (stride, extent) in enumerate(zip(strides, shape, strict=True))
            if not stride and extent > 1
        )
        steps = {
            axis: abs(stride)
            for axis, (stride, extent) in enumerate(zip(strides, shape, strict=True))
            if stride and extent > 1
        }
        fastest = min(reversed(steps), key=steps.__getitem__, default=None)  # the last axis of a tie
        # An empty iteration still reads per-row values, each row its own: NumPy calls any empty
        # array C-contiguous, whose C strides would read every row's value at the first row's place
        contiguous = views.size_of(shape) > 0 and views.is_c_contiguous(shape, strides, array.dtype.itemsize)
        return broadcast, contiguous, array.ndim == 0, fastest

    def source_array(self, source: Source) -> np.ndarray:
        """The array a step reads for ``source``, or one of its layout: the buffers this trace holds
        (their strides are part of the trace signature, so the answer holds for every trace that
        shares the plan); a buffer the plan computes, or a host array a device's kernels read from
        their copy, is a fresh C-contiguous array, stood in for by one that shares no memory and is
        never read."""
        node = self.nodes[source.node]
        if node.op is ops.SCALAR:
            array = np.asarray(node.buffer)
        elif node.is_materialized and not (self.target.copies_host_arrays and node.memory is HOST):
            array = node.buffer
        else:
            array = _contiguous_stand_in(node.shape, node.dtype)
        for number in source.views:
            view = self.nodes[number]
            params = dict(view.params)
            if view.op.name == "reshape":
                try:
                    array = np.reshape(array, params["shape"], copy=False)
                except ValueError:  # the executor's reshape copies: a fresh C-contiguous array
                    array = _contiguous_stand_in(view.shape, array.dtype)
            else:
                array = view.op.reference(array, **params)
        return array

    def plan(self) -> Plan:
        built: dict[tuple, tuple[_KernelBuilder, set[int], frozenset[int]]] = {}
        while True:
            self._store_barrier_inputs()
            steps = self._group()
            builders = [self._builder(group, built) for group in steps if isinstance(group, _Group)]
            needs: dict[int, tuple[Why, tuple]] = {}
            for builder in builders:
                needs |= builder.needs
            new = needs.keys() - self.stored
            if new:
                self.stored |= new
                self.why_stored.update((n, needs[n]) for n in new)
                continue
            if needs:  # a kernel would need a node that it computes itself: its readers keep out
                if needs.keys() <= self.unshared:
                    raise AssertionError(f"the planner cannot make progress: nodes {sorted(needs)}")
                self.unshared |= needs.keys()
                continue
            shared = self._worth_storing(builders)
            if shared:
                unshared = {n for n in shared if n in self.stored}
                self.unshared |= unshared
                self.stored |= shared.keys()
                self.why_stored |= {n: why for n, why in shared.items() if n not in unshared}
                continue
            return self._assemble(steps, builders)

    def _builder(self, group: _Group, built: dict) -> _KernelBuilder:
        """The kernel of ``group``, as an earlier round of ``plan`` built it where the same group
        came out and none of the nodes its builder asked ``is_source`` about has been stored since
        (what it builds depends on nothing else that changes between rounds); built afresh
        otherwise. A long trace's plan takes several rounds, each storing a few nodes more."""
        key = (
            group.shape,
            group.axes,
            tuple(group.roots),
            frozenset(group.row_roots),
            frozenset(group.sources),
        )
        kept = built.get(key)
        if kept is not None:
            builder, asked, answered = kept
            if frozenset(n for n in asked if n in self.stored) == answered:
                builder.group = group
                return builder
        self.asked = set()
        try:
            builder = _KernelBuilder(self, group)
            asked = self.asked
        finally:
            self.asked = None
        built[key] = builder, asked, frozenset(n for n in asked if n in self.stored)
        return builder

    def _store_barrier_inputs(self) -> None:
        for n in self.library:
            for child in self.nodes[n].inputs:
                if self.source_chain(self.number(child)) is None:
                    under = child
                    while under.op.kind is OpKind.VIEW:
                        under = under.inputs[0]
                    self.stored.add(self.number(under))

    # -- grouping stored nodes into kernels --

    def _survey(
        self, root: int, row_domains: dict[int, tuple]
    ) -> tuple[tuple[int, ...], tuple[int, ...], bool, set[int], set[int]]:
        """The iteration space of the kernel computing ``root``, and the buffers it reads: per row of
        a kernel where it is computed elementwise from ``row_domains``' values of that kernel.

        Returns (shape, reduce axes, whether root is per row, sources read: inputs and stored nodes,
        the row values of ``row_domains`` it reads only per row: through same-shape elementwise ops).
        """
        node = self.nodes[root]
        domain = None
        if node.op.kind is OpKind.REDUCTION:
            domain = (node.inputs[0].shape, reduction_axes(node), True)
        elif node.op.kind is OpKind.SCAN:
            domain = (node.shape, _scan_axes(node), False)
        sources: set[int] = set()
        elsewhere: set[int] = set()  # sources read other than per row
        seen = {root: True}  # node -> whether every way to it seen so far is plain
        stack = [(child, True) for child in node.inputs]  # (node, reached through same-shape elementwise)
        while stack:
            child, plain = stack.pop()
            n = self.number(child)
            if n in seen and (plain or not seen[n]):
                continue
            seen[n] = plain
            plain_read = plain and child.shape == node.shape
            if self.is_source(n):
                sources.add(n)
                if not plain_read:
                    elsewhere.add(n)
                elif domain is None and n in row_domains:
                    domain = (*row_domains[n], True)
                continue
            if child.op.kind is OpKind.REDUCTION:
                if domain is None and child.inputs[0].shape == node.shape:
                    domain = (node.shape, reduction_axes(child), False)
                elif domain is None and plain and child.shape == node.shape:
                    domain = (child.inputs[0].shape, reduction_axes(child), True)
            elif child.op.kind is OpKind.SCAN and domain is None and plain and child.shape == node.shape:
                domain = (node.shape, _scan_axes(child), False)
            plain = plain and child.op.kind is OpKind.ELEMENTWISE and child.shape == node.shape
            stack.extend((grandchild, plain) for grandchild in child.inputs)
        shape, axes, row = domain if domain is not None else (node.shape, (), False)
        return shape, axes, row, sources, {n for n in sources & row_domains.keys() if n not in elsewhere}

    def _group(self, apart: list[Apart] | None = None) -> list[_Group | int]:
        """Stored nodes in order, each joining the latest compatible kernel that it may join. Given
        ``apart``, adds to it why each kernel after the first did not join an earlier one."""
        steps: list[_Group | int] = []  # kernel groups, and library nodes by number
        producers: dict[int, int] = {}  # stored or library node -> its step
        self.row_domains.clear()
        for n in range(len(self.nodes)):
            if n in self.library:
                producers[n] = len(steps)
                steps.append(n)
            elif n in self.stored and not self.nodes[n].is_materialized:
                shape, axes, row, sources, row_reads = self._survey(n, self.row_domains)
                reads = {read for read in sources if not self.nodes[read].is_materialized}
                after = {producers[read] for read in reads}
                refused = None if apart is None else []
                joining = (steps, reads, sources, after)
                position = self._joinable(*joining, shape, axes, row, row_reads, refused)
                if position is None and row:  # per row only in the kernel computing those rows
                    domain = self._survey(n, {})[:3]
                    if domain != (shape, axes, row):
                        shape, axes, row = domain
                        position = self._joinable(*joining, shape, axes, row, set(), refused)
                if position is None:
                    if apart is not None:
                        apart += self._apart(steps, shape, reads, after, producers, refused)
                    position = len(steps)
                    steps.append(_Group(shape, axes))
                group = steps[position]
                assert isinstance(group, _Group)
                group.roots.append(n)
                group.sources |= sources | {n}
                group.axes = group.axes or axes
                if row:
                    group.row_roots.add(n)
                    self.row_domains[n] = shape, axes
                producers[n] = position
        return steps

    def _joinable(
        self,
        steps: list,
        reads: set[int],
        sources: set[int],
        after: set[int],
        shape: tuple,
        axes: tuple,
        row: bool,
        row_reads: set[int],
        refused: list[Apart] | None,
    ) -> int | None:
        """The latest related kernel this stored node can join: same iteration space, after what it
        reads, reading a buffer it reads or computing a value it reads. Given ``refused``, adds to it
        why each kernel it looked at refused it.

        It may read what that kernel stores only where the value can be computed inline: an
        elementwise node or a scan (per element, in the pass that computes it), or a per-row value
        that it reads only per row itself (``row_reads``, along the kernel's axes: once a row is
        done), not a reduction or a per-row value otherwise, nor a node an earlier plan found read
        out of its order (``unshared``).
        """
        later = len(steps)
        for position in range(later - 1, max(max(after, default=-1), 0) - 1, -1):
            group = steps[position]
            if not isinstance(group, _Group):
                continue
            if group.shape != shape:
                if refused is not None:
                    refused.append(Apart(position, later, Why.SHAPES, None, (group.shape, shape)))
                continue
            if not group.sources & sources:
                if refused is not None:
                    refused.append(Apart(position, later, Why.UNRELATED, None))
                continue
            elementwise_only = not axes and not row
            if not (group.axes == axes or elementwise_only or (not group.axes and not group.row_roots)):
                if refused is not None:
                    refused.append(Apart(position, later, Why.AXES, None, (group.axes, axes)))
                continue
            if position in after:
                unshared = reads.intersection(group.roots, self.unshared)
                if unshared:
                    if refused is not None:
                        refused.append(Apart(position, later, Why.UNSHARED, min(unshared)))
                    continue
                per_row = row_reads if row and axes == group.axes else set()  # read once a row is done
                computed = [
                    n
                    for n in reads.intersection(group.roots)
                    if not (n in per_row and n in group.row_roots)
                    and (self.nodes[n].op.kind not in _INLINE or n in group.row_roots)
                ]
                if computed:
                    if refused is not None:
                        refused.append(self._not_inline(group, position, later, min(computed)))
                    continue
            return position
        return None

    def _not_inline(self, group: _Group, earlier: int, later: int, n: int) -> Apart:
        """Kernel ``later`` reads ``n``, which kernel ``earlier`` (``group``) stores, out of its pass."""
        if n in group.row_roots:
            return Apart(earlier, later, Why.ROW_VALUE, n)
        return Apart(earlier, later, Why.NOT_INLINE, n, (self.nodes[n].op.kind.value,))

    def _apart(
        self,
        steps: list,
        shape: tuple,
        reads: set[int],
        after: set[int],
        producers: dict[int, int],
        refused: list[Apart],
    ) -> list[Apart]:
        """Why a stored node, starting a kernel of its own, joined neither the kernel before it nor
        (where that is another) the latest kernel over the same iteration space: the refusal of
        each (``refused``), or else what kept the planner from asking it."""
        kernels = (p for p in range(len(steps) - 1, -1, -1) if isinstance(steps[p], _Group))
        earlier = next(kernels, None)
        if earlier is None:
            return []
        asked = [earlier]
        if steps[earlier].shape != shape:  # the latest one over its shape is further back
            same = next((p for p in kernels if steps[p].shape == shape), None)
            asked += [] if same is None else [same]
        answers = {refusal.earlier: refusal for refusal in refused}
        latest_read = max(after, default=-1)
        apart = []
        for position in asked:
            if position in answers:
                apart.append(answers[position])
            else:  # a step between them computes what it reads
                assert latest_read > position, "a kernel the planner asked gave no answer"
                node = min(n for n in reads if producers[n] == latest_read)
                why = Why.AFTER if isinstance(steps[latest_read], _Group) else Why.BARRIER
                apart.append(Apart(position, len(steps), why, node, (latest_read,)))
        return apart

    # -- the cost model: recompute in each kernel, or store once --

    def _worth_storing(self, builders: list[_KernelBuilder]) -> dict[int, tuple[Why, tuple]]:
        """Nodes computed by several kernels that are cheaper written once and read back, and why.

        A kernel computes a node it inlines once per element of its iteration space: ``s_j``
        elements in kernel ``j``, each costing the work of the node's inlined region (op costs from
        the op table, weighted by ``Target.compute_weight``), ``w`` in all. Recomputing costs
        ``w * sum(s_j)``; storing costs ``w * size`` once, a write of ``size`` and reads of
        ``sum(s_j)``. So a node that one kernel reads through a small view (a column of it) is
        computed again there rather than stored whole. A kernel that reads a node at several places
        around each element (shifted views, rolls: a stencil) computes it once per place, each
        counted as a kernel of its own. A reduction computed twice re-reads its whole input: always
        stored. Units: one element loaded or stored.

        A node stored already, that the kernel storing it also computes at other places (a time
        step's result, read shifted by the next step, which joined its kernel), is read back by a
        kernel of its own after it (``unshared``) where computing it again costs more than reading
        it: ``w`` a place against a load, and a pass more over its ``size``.
        """
        weight = self.target.compute_weight
        computed_over: dict[int, list[int]] = {}  # node -> the iteration size of each computation of it
        for builder in builders:
            size = views.size_of(builder.shape)
            for n, places in builder.places().items():
                computed_over.setdefault(n, []).extend([size] * places)
        region_cost: dict[int, float] = {}
        winners: dict[int, tuple[Why, tuple]] = {}
        for n in sorted(computed_over):
            node = self.nodes[n]
            inner = sum(
                region_cost.get(self.number(child), 0.0)
                for child in node.inputs
                if not self.is_source(self.number(child))
            )
            region_cost[n] = min(node.op.cost + inner if node.op.kind is OpKind.ELEMENTWISE else inner, 1e12)
            sizes = computed_over[n]
            if len(sizes) < 2 or node.op.kind is OpKind.VIEW or n in self.unshared:
                continue
            work, size, reads = weight * region_cost[n], views.size_of(node.shape), sum(sizes)
            if n in self.stored:
                again = reads - sizes[0]
                if work * again > again + size:
                    winners[n] = Why.UNSHARED, ()
            elif node.op.kind in _RUNNING:
                winners[n] = Why.RUNNING, (node.op.name, len(sizes))
            elif work * reads > work * size + size + reads:
                winners[n] = Why.COST, (len(sizes), work * reads, work * size + size + reads)
        # Store the outermost winners first: storing them (or unsharing them) may make the inner ones
        # single-use. The walk stops at stored nodes: those are unshared all at once.
        inner = set()
        below = [self.number(child) for n in winners for child in self.nodes[n].inputs]
        while below:
            n = below.pop()
            if n not in inner and not self.is_source(n):
                inner.add(n)
                below.extend(self.number(child) for child in self.nodes[n].inputs)
        return {n: why for n, why in winners.items() if n not in inner}

    # -- the plan --

    def _assemble(self, grouped: list[_Group | int], builders: list[_KernelBuilder]) -> Plan:
        built = iter(builders)
        steps: list[Step] = []
        for item in grouped:
            if isinstance(item, _Group):
                steps.append(next(built).step())
            else:
                chains = tuple(self.source_chain(self.number(child)) for child in self.nodes[item].inputs)
                assert None not in chains, "a barrier input was not stored"
                steps.append(LibraryStep(item, chains))
        outputs = []
        for n in self.requested:
            source = self.source_chain(n)
            assert source is not None, f"requested node {n} is neither stored nor a view of a stored node"
            outputs.append((n, source))
        return Plan(tuple(steps), tuple(outputs), self._releases(steps, outputs))

    def _releases(self, steps: list[Step], outputs: list) -> tuple[tuple[int, ...], ...]:
        last_reader: dict[int, int] = {}
        for position, step in enumerate(steps):
            sources = step.loads if isinstance(step, KernelStep) else step.inputs
            for source in sources:
                last_reader[source.node] = position
        keep = {source.node for _, source in outputs}
        releases: list[list[int]] = [[] for _ in steps]
        for n, position in last_reader.items():
            if n not in keep and not self.nodes[n].is_materialized:
                releases[position].append(n)
        return tuple(tuple(sorted(release)) for release in releases)


class _KernelBuilder:
    """Builds one kernel's instructions from its stored roots, inlining what is not stored."""

    def __init__(self, planner: _Planner, group: _Group) -> None:
        self.planner = planner
        self.group = group
        self.axes = group.axes
        self.roots = frozenset(group.roots)
        self._build(group.shape)
        # An elementwise kernel writes contiguous outputs, so it may iterate over any shape that
        # splits the outputs' axes further: the one that makes a flattening reshape (``ravel``)
        # of a computed value an index map again, instead of a stored temporary.
        while self.reshaped and not self.axes:
            finer = views.common_refinement(self.shape, self.reshaped.pop())
            if finer is not None and finer != self.shape:
                coarser = self.shape
                self._build(finer)
                if self.needs.keys() & self.roots:  # a root (a roll) that the finer shape cannot read
                    self._build(coarser)
                    break
        self._check_passes()

    def _build(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.instructions: list[Instruction] = []
        self.numbering: dict[tuple, int] = {}  # instruction key -> number: each value computed once
        self.values: dict[tuple[int, IndexMap | None], int] = {}
        self.loads: list[Source] = []
        self.params: list[int] = []
        self.computed: set[int] = set()  # trace nodes computed here (not loaded)
        # reduce instruction -> its trace nodes (reductions that differ in keepdims alone are one)
        self.reduction_nodes: dict[int, set[int]] = {}
        self.needs: dict[int, tuple[Why, tuple]] = {}  # nodes that must be stored for it to exist, and why
        self.reshaped: list[tuple[int, ...]] = []  # input shapes of reshapes no index map expressed
        self.maps_read: Counter[int] = Counter()  # elementwise node -> the index maps it is computed at
        # What each (node, index map) read is made of (``_expand``), and how to make it
        self.expansions: dict[tuple[int, IndexMap], tuple[list, Callable]] = {}
        roots = [(n, self._root_map(n)) for n in self.group.roots]
        self._discover(roots)
        if self.needs:  # the planner stores them and builds the kernel again: none to make now
            self.outputs = []
        else:
            self.outputs = [
                Output(self.value(*root), root[0] in self.group.row_roots, self.planner.nodes[root[0]].dtype)
                for root in roots
            ]
        self.expansions.clear()  # their closures hold the builder: no cycle may keep the trace alive

    def _root_map(self, n: int) -> IndexMap:
        ndim = len(self.shape)
        node = self.planner.nodes[n]
        if n in self.group.row_roots:
            return views.row_map(ndim, self.axes, keepdims=len(node.shape) == ndim)
        if node.shape != self.shape:  # iterating over a finer split of the output's axes
            return views.view_input_map(
                views.identity_map(ndim), "reshape", {"shape": self.shape}, node.shape, self.shape
            )
        return views.identity_map(ndim)

    # -- values --

    def _discover(self, roots: list[tuple[int, IndexMap]]) -> None:
        """Every (node, index map) read the kernel makes from ``roots``, expanded in the order the
        instructions will be made (depth first, first operands first), before any is made: a kernel
        that needs a node stored is built again once it is, and making its instructions first
        would cost three times its expansion (a 373-node Gray-Scott trace: 100 ms a round)."""
        stack = list(reversed(roots))
        while stack:
            key = stack.pop()
            if key not in self.expansions:
                operands, _ = self.expansions[key] = self._expand(*key)
                stack.extend(reversed(operands))

    def value(self, n: int, index_map: IndexMap) -> int:
        """The instruction computing node ``n`` read at ``index_map`` (iterative: traces are deep)."""
        stack = [(n, index_map)]
        while stack:
            key = stack[-1]
            if key in self.values:
                stack.pop()
                continue
            operands, finish = self.expansions[key]
            missing = [operand for operand in operands if operand not in self.values]
            if missing:
                stack.extend(reversed(missing))  # first operands first: instructions read in order
                continue
            stack.pop()
            self.values[key] = finish([self.values[operand] for operand in operands])
        return self.values[(n, index_map)]

    def _expand(self, n: int, index_map: IndexMap) -> tuple[list, object]:
        """What the value of (n, index_map) is made of, and how to make it from those values."""
        planner = self.planner
        node = planner.nodes[n]
        kind = node.op.kind
        if kind is OpKind.SCALAR:
            return [], lambda _: self._param(n)
        if planner.is_source(n, self.roots):
            return [], lambda _: self._load(Source(n, (), index_map))
        if kind is OpKind.VIEW:
            chain = planner.source_chain(n, self.roots)
            if chain is not None:
                return [], lambda _: self._load(Source(chain.node, chain.views, index_map))
            child = planner.number(node.inputs[0])
            params = dict(node.params)
            child_map = views.view_input_map(
                index_map, node.op.name, params, node.inputs[0].shape, self.shape
            )
            if child_map is None:  # a reshape no index map expresses: its input gets a buffer
                self.needs[child] = Why.RESHAPE, (node.inputs[0].shape, node.shape)
                self.reshaped.append(node.inputs[0].shape)
                return [], lambda _: self._load(Source(n, (), index_map))
            computed_as = ops.COMPUTED_VIEWS.get(node.op.name)
            if computed_as is not None:  # a part of a computed complex value
                return [(child, child_map)], lambda values: self._compute(n, values, computed_as)
            self.computed.add(n)
            return [(child, child_map)], lambda values: values[0]
        if kind is OpKind.MOVE:  # read through a map that wraps: its input is read where it moved from
            params = dict(node.params)
            child_map = views.view_input_map(
                index_map, node.op.name, params, node.inputs[0].shape, self.shape
            )
            if child_map is None:
                self.needs[n] = Why.MOVED, (self.shape,)
                return [], lambda _: self._load(Source(n, (), index_map))
            self.computed.add(n)
            return [(planner.number(node.inputs[0]), child_map)], lambda values: values[0]
        if kind is OpKind.ELEMENTWISE:
            self.maps_read[n] += 1
            if self.maps_read[n] > MOST_PLACES:  # inlined further, a stencil's work would multiply
                self.needs[n] = Why.MANY_PLACES, (MOST_PLACES,)
                return [], lambda _: self._load(Source(n, (), index_map))
            operands = [
                (planner.number(child), views.broadcast_input_map(index_map, child.shape, node.shape))
                for child in node.inputs
            ]
            return operands, lambda values: self._compute(n, values)
        if kind is OpKind.SCAN:
            identity = views.identity_map(len(self.shape))
            if node.shape != self.shape or _scan_axes(node) != self.axes or index_map != identity:
                self.needs[n] = Why.SCAN_READ, (_scan_axes(node), self.shape)
                return [], lambda _: self._load(Source(n, (), index_map))
            return [(planner.number(node.inputs[0]), identity)], lambda values: self._compute(n, values)
        if kind is OpKind.GATHER:  # a load moved by the index arrays' values, read at the same place
            data = planner.number(node.inputs[0])
            chain = planner.source_chain(data, self.roots)
            if chain is None:
                self.needs[data] = Why.GATHERED, ()
                return [], lambda _: self._load(Source(n, (), index_map))
            self.computed.add(n)
            sources = dict(node.params)["sources"]
            data_map = views.gathered_data_map(index_map, sources, len(self.shape))
            read = Source(chain.node, chain.views, data_map)
            operands = [
                (planner.number(index), views.broadcast_input_map(index_map, index.shape, node.shape))
                for index in node.inputs[1:]
            ]
            return operands, lambda values: self._load(read, self._gather_axes(read, sources), values)
        assert kind is OpKind.REDUCTION, node
        axes = reduction_axes(node)
        fits = (
            node.inputs[0].shape == self.shape
            and axes == self.axes
            and views.is_row_read(index_map, node.shape, axes, _keeps_dims(node))
        )
        if not fits:
            self.needs[n] = Why.REDUCTION_READ, (self.shape,)
            return [], lambda _: self._load(Source(n, (), index_map))
        operand = (planner.number(node.inputs[0]), views.identity_map(len(self.shape)))
        return [operand], lambda values: self._compute(n, values)

    def _emit(self, key: tuple, instruction: Instruction) -> int:
        number = self.numbering.get(key)
        if number is None:
            number = self.numbering[key] = len(self.instructions)
            self.instructions.append(instruction)
        return number

    def _load(self, source: Source, gather: tuple = (), positions: tuple[int, ...] | list[int] = ()) -> int:
        """A load of ``source``; a gathering one moved from there by the values ``positions`` (index
        instructions), each along a data axis of ``gather``'s (element stride, extent)."""
        positions = tuple(positions)
        row = bool(self.axes) and views.ignores_axes(source.index_map, self.axes)
        row = row and all(self.instructions[number].row for number in positions)
        stage = max((self.instructions[number].stage for number in positions), default=0)
        dtype = self.planner.nodes[source.views[-1] if source.views else source.node].dtype
        if dtype is None:  # a view of a weak scalar: NumPy makes it an array first
            dtype = np.asarray(self.planner.nodes[source.node].buffer).dtype
        key = ("load", source, positions)
        if key not in self.numbering:
            slot = len(self.loads)
            self.loads.append(source)
            self.computed.update(source.views)
            broadcast, contiguous, zero_dim, fastest = self.planner.access_layout(source, self.shape)
            wraps = views.wrapped_axes(source.index_map)
            params = (
                ("slot", slot),
                ("broadcast", broadcast),
                ("contiguous", contiguous and not wraps and not gather),
                ("zero_dim", zero_dim and not gather),
                ("fastest", fastest),
                ("wraps", wraps),
            )
            if gather:
                params += (("gather", gather),)
            return self._emit(key, Instruction(LOAD, positions, params, dtype, row, stage))
        return self.numbering[key]

    def _gather_axes(self, source: Source, sources: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        """Each indexed data axis's element stride and extent, in the order of the index arrays."""
        array = self.planner.source_array(source)
        indexed = sorted((-1 - at, axis) for axis, at in enumerate(sources) if at < 0)
        itemsize = array.dtype.itemsize
        return tuple((array.strides[axis] // itemsize, array.shape[axis]) for _, axis in indexed)

    def _param(self, n: int) -> int:
        key = ("param", n)
        if key not in self.numbering:
            slot = len(self.params)
            self.params.append(n)
            params = (("slot", slot), ("type", type(self.planner.nodes[n].buffer).__name__))
            return self._emit(key, Instruction(PARAM, (), params, None, bool(self.axes), 0))
        return self.numbering[key]

    def _compute(self, n: int, args: list[int], op: ops.Op | None = None) -> int:
        """The instruction computing node ``n`` from ``args``: by its op, or by ``op`` in its place."""
        node = self.planner.nodes[n]
        op = node.op if op is None else op
        self.computed.add(n)
        operands = [self.instructions[arg] for arg in args]
        if op.kind is OpKind.REDUCTION:
            params = tuple((key, value) for key, value in node.params if key != "keepdims")
            stage, row = operands[0].stage + 1, True
        elif op.kind is OpKind.SCAN:  # computed in its operand's pass, in order along the row
            params, stage, row = node.params, operands[0].stage, False
        else:
            params = node.params
            stage = max((operand.stage for operand in operands), default=0)
            row = bool(self.axes) and all(operand.row for operand in operands)
        instruction = Instruction(op, tuple(args), params, node.dtype, row, stage)
        number = self._emit((op, tuple(args), params, node.dtype), instruction)
        if op.kind is OpKind.REDUCTION:
            self.reduction_nodes.setdefault(number, set()).add(n)
        return number

    # -- passes --

    def _check_passes(self) -> None:
        """Rows too long for several passes in one kernel: store what forces the extra passes."""
        if not self.axes or self.needs:
            return
        row_elements = views.size_of(tuple(self.shape[axis] for axis in self.axes))
        if row_elements <= self.planner.target.persistent_row_elements or self.kernel().passes == 1:
            return
        per_element = [inst for inst in self.instructions if not inst.row]
        wanted = [arg for inst in per_element for arg in inst.args]
        wanted += [out.value for out in self.outputs if not out.row]
        seen: set[int] = set()
        while wanted:
            number = wanted.pop()
            inst = self.instructions[number]
            if number in seen or not inst.row or inst.stage == 0:
                continue
            seen.add(number)
            if number in self.reduction_nodes:
                limit = self.planner.target.persistent_row_elements
                for n in self.reduction_nodes[number]:
                    self.needs[n] = Why.LONG_ROWS, (row_elements, limit)
            else:
                wanted.extend(inst.args)

    def places(self) -> Counter[int]:
        """Each node it computes, and at how many places around an element it does: its index maps,
        less what they say of axes of extent 1 (the iteration's index there is always 0)."""
        moving = [extent > 1 for extent in self.shape]
        places = {
            (
                n,
                tuple(
                    tuple(step * move for step, move in zip(row, moving, strict=True))
                    for row in index_map.rows
                ),
                index_map[1:],
            )
            for n, index_map in self.values
            if n in self.computed
        }
        return Counter(n for n, _, _ in places)

    def kernel(self) -> Kernel:
        return Kernel(self.shape, self.axes, tuple(self.instructions), tuple(self.outputs))

    def step(self) -> KernelStep:
        order = tuple(sorted(self.computed | self.roots))
        return KernelStep(
            self.kernel(), tuple(self.loads), tuple(self.params), tuple(self.group.roots), order
        )
