"""The reference executor: runs a trace op by op with NumPy.

It is the correctness oracle for every backend and the path for work too small to compile.
Each node runs its op's NumPy reference on its inputs' values, weak scalars passed as the Python
scalars they are, so results follow NumPy exactly. An intermediate is dropped as soon as its
last consumer has run, or, from ``host_pool.INTERPRETED_MIN_BYTES``, that consumer, a ufunc of its
dtype and shape, computes into it; a large elementwise result or roll is computed into an array
of the host's pool (``host_pool``), as a compiled kernel's is, not into fresh pages that fault at
every run. Each op runs under NumPy's error state when it was recorded (``Node.errstate``), so it warns
or raises as it would have then. A run follows a ``Recipe`` worked out from the trace's structure,
kept for a plan's step that runs interpreted again and again (``step_recipe``).
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple

import cachetools
import numpy as np

from . import config, float_errors, host_pool, stats
from .devices import HOST, move
from .ops import ELEMENTWISE, WALK_INDEPENDENT_UFUNCS, OpKind
from .trace import Node


def run(
    order: Sequence[Node],
    outputs: Sequence[Node],
    known: Mapping[Node, Any] | None = None,
    into: np.ndarray | None = None,
    strips: bool = False,
) -> dict[Node, np.ndarray]:
    """Compute every node of ``order`` (inputs first); return the values of ``outputs``.

    ``known`` holds values computed earlier for nodes that are not materialized yet, and host
    copies of leaves that live on a device: it runs on host arrays only. ``into``: an array the
    first output's op may compute into (``Recipe.run``). ``strips``: elementwise ops may run a
    block at a time (``Recipe``), where a backend's tier runs the trace interpreted; the reference
    executor itself, the oracle, and the reruns that give NumPy's warnings call NumPy op by op.
    """
    recipe = Recipe(order, outputs, strips)
    known = known or {}
    values = recipe.run(order, [known.get(node, node.buffer) for node in recipe.externals], into)
    return {
        node: known[node] if position is None else values[position]
        for node, position in zip(outputs, recipe.stored, strict=True)
    }


class Recipe:
    """How the reference executor runs a trace's nodes, worked out once from its structure (what
    each node reads, which intermediate the op reading it last may compute into, where it is
    freed), so a plan's step interpreted again and again, each time over new nodes of the same
    structure (``step_recipe``), pays only for its NumPy calls and a few checks of its arrays.

    With ``strips``, a run whose ops are NumPy ufuncs over one shape (and views of what it reads)
    calls their loops a block of elements at a time (``_strip_program``, ``run_strips``): every op
    on a block while it is in the cache, no temporary of the whole shape, and each operand read
    once, where NumPy's calls make a pass over memory per op."""

    def __init__(self, order: Sequence[Node], outputs: Collection[Node], strips: bool = False) -> None:
        wanted = set(outputs)
        reusable = _reusable(order, wanted)
        computed = set(order)
        # The nodes it reads from outside, then ``order``'s: the places of their values in ``run``
        self.externals = _read_from_outside(order, computed)
        places = {node: place for place, node in enumerate([*self.externals, *order])}
        last_reader: dict[Node, int] = {}
        for position, node in enumerate(order):
            for child in node.inputs:
                last_reader[child] = position
        freed: dict[int, list[int]] = {}
        for child, position in last_reader.items():
            if child in computed and child not in wanted:
                freed.setdefault(position, []).append(places[child])
        self.steps = [
            _Step(
                # An op whose params take work to turn into its reference's (a getitem's index):
                # turned once, bound to the reference
                node.op.bound(node.params) if node.op.bind is not None else node.op.reference,
                dict(node.params) if node.params and node.op.bind is None else {},
                _reader(tuple(places[child] for child in node.inputs)),
                _written_over(node, position, reusable, last_reader),
                _pool_candidate(node),
                node.op.kind is OpKind.BARRIER,
                tuple(freed.get(position, ())),
            )
            for position, node in enumerate(order)
        ]
        # Each output's place (None: not computed here, but known)
        self.stored = [places[node] if node in computed else None for node in outputs]
        # Where the first output is the last node computed, by an op that fills ``out``: its step,
        # which may compute into a given array (``run``'s ``into``), as no later op reads it
        first = next(iter(outputs), None)
        self.last_fills = (
            first is order[-1] and (first.op.fills_out or (first.op.computes_into and not first.params))
            if order
            else False
        )
        self.strips = _strip_program(order, outputs, places) if strips and run_strips is not None else None
        self._numbers: list[int] | None = None

    def numbers(self, nodes: Sequence[Node]) -> list[int]:
        """The numbers in ``nodes`` (a numbered trace that holds the recipe's nodes) of the nodes it
        reads from outside: the same at every run of a plan, worked out at the first."""
        if self._numbers is None:
            numbering = {id(node): number for number, node in enumerate(nodes)}
            self._numbers = [numbering[id(node)] for node in self.externals]
            self.externals = []  # the nodes of that run: held no longer
        return self._numbers

    def run(self, order: Sequence[Node], externals: list[Any], given: np.ndarray | None = None) -> list[Any]:
        """The values of the nodes it reads from outside (``externals``), then of ``order``'s nodes
        (those freed, None): the places ``stored`` names. ``given``: an array of the first
        output's dtype and shape (a write's region), which that output is computed into where its
        op, the last, fills ``out``: NumPy's ufunc writes the region, no temporary and no copy
        (overlap with what it reads is NumPy's to handle, as for its own ``out=``)."""
        values: list[Any] = [*externals, *itertools.repeat(None, len(order))]
        if self.strips is not None and self._run_strips(order, values, len(externals), given):
            stats.count("interpreted_ops", len(order))
            return values
        place = len(externals)
        now = float_errors.current()
        last = len(order) - 1 if given is not None and self.last_fills else -1
        for position, (node, (reference, params, read, over, pool, barrier, freed)) in enumerate(
            zip(order, self.steps, strict=True)
        ):
            args = read(values)
            into = None
            if position == last and given.dtype == node.dtype and given.shape == node.shape:
                into = given
            else:
                for argument in over:
                    value = args[argument]
                    if (
                        type(value) is np.ndarray
                        and value.dtype == node.dtype
                        and value.shape == node.shape
                        and value.flags.writeable
                        and host_pool.owns_memory(value)
                    ):
                        into = value
                        break
                if into is None and pool:
                    into = _pooled(node, args)
            token = None if node.errstate is now else float_errors.enter(node.errstate)
            try:
                # asarray: NumPy returns scalars for 0-d results, and a view of a scalar would be a copy.
                if into is None:
                    values[place] = np.asarray(reference(*args, **params))
                else:
                    values[place] = reference(*args, **params, out=into)
            finally:
                if token is not None:
                    float_errors.leave(token)
            if barrier:
                # A library call costs far more than reading its result: the node keeps it (as a
                # leaf), so what is recorded over it and materialized later reads it rather than
                # call again. It lives as long as something recorded over it does.
                node.become_leaf(move(values[place], HOST, node.memory))
            for freed_place in freed:
                values[freed_place] = None
            place += 1
        stats.count("interpreted_ops", len(order))
        return values

    def _run_strips(
        self, order: Sequence[Node], values: list[Any], first: int, given: np.ndarray | None
    ) -> bool:
        """``run``'s values, the stored nodes' by ``run_strips`` (the views they read by NumPy
        first), into ``given`` where the first output is the last node, else into C-ordered arrays;
        whether it ran them (not where an operand or a loop would make NumPy's calls compute
        otherwise: an operand that NumPy casts, a Python int beyond the dtype, operands whose
        layout would make NumPy lay out its results otherwise)."""
        program = self.strips
        for position in program.views:
            step = self.steps[position]
            values[first + position] = step.reference(*step.read(values), **step.params)
        slots: list[Any] = [None] * program.slots
        for slot, place in program.reads:
            slots[slot] = values[place]
        for number, (slot, place) in enumerate(program.stored):
            node = order[place - first]
            if (
                number == 0
                and given is not None
                and program.given_fits
                and given.dtype == node.dtype
                and given.shape == node.shape
            ):
                slots[slot] = given
            else:
                slots[slot] = host_pool.empty(node.shape, node.dtype, host_pool.INTERPRETED_MIN_BYTES)
        flags = run_strips(program.steps, slots, program.shape)
        if flags is None:
            return False
        for slot, place in program.stored:
            values[place] = slots[slot]
        if flags and float_errors.heeded(flags, (node.errstate for node in order)):
            read = _read_from_outside(order, set(order))  # this run's nodes at the externals' places
            rerun_for_errors(order, dict(zip(read, values, strict=False)))
        return True


def _read_from_outside(order: Sequence[Node], computed: Collection[Node]) -> list[Node]:
    """The nodes ``order`` reads that it does not compute (``computed``), in the order first read:
    a run's values start with theirs."""
    return list(dict.fromkeys(child for node in order for child in node.inputs if child not in computed))


# Set by ``accelerate`` where the C recorder is built: ``_recorder.run_strips(steps, slots,
# shape)``, which runs elementwise steps a block at a time by NumPy's loops; None: op by op.
run_strips: Callable[[tuple, list, tuple], int | None] | None = None

# At most this many ops, and operands and values, a strip program holds (``_recorder.c``'s bounds)
STRIP_MOST_STEPS = 128
STRIP_MOST_SLOTS = 64


class _StripProgram(NamedTuple):
    """A recipe's elementwise ops as ``run_strips`` runs them. Slots number the operands (values
    the run reads: a leaf's, or a view's), the stored nodes' arrays, and the temporaries (a
    block's buffer, taken again once the op reading it last has run)."""

    steps: tuple[tuple, ...]  # (ufunc, output slot, input slots...) per elementwise node, in order
    reads: tuple[tuple[int, int], ...]  # (slot, place in the run's values) of each operand
    stored: tuple[tuple[int, int], ...]  # (slot, place) of each output, in the outputs' order
    views: tuple[int, ...]  # the positions of the views computed first, by NumPy
    slots: int
    shape: tuple[int, ...]
    given_fits: bool  # the first output is the last node: no op reads a given array after it


def _strip_program(
    order: Sequence[Node], outputs: Collection[Node], places: Mapping[Node, int]
) -> _StripProgram | None:
    """How ``run_strips`` runs ``order``, where its nodes are NumPy ufuncs without parameters whose
    every element is exact however the elements are walked (``ops.WALK_INDEPENDENT_UFUNCS``) and
    selects (``where``), of one shape, on the host, and views of what the run reads, and its
    outputs are such ops' values; None otherwise, or where one op is all there is."""
    computed = [node for node in order if node.op.kind is OpKind.ELEMENTWISE]
    if len(computed) < 2 or len(order) > STRIP_MOST_STEPS or not computed[0].shape:
        return None
    shape, inside, wanted = computed[0].shape, set(computed), set(outputs)
    if not wanted <= inside:
        return None
    views = []
    heads = {}
    for position, node in enumerate(order):
        if node.op.kind is OpKind.VIEW:
            if node in wanted or any(child in inside for child in node.inputs):
                return None
            views.append(position)
            continue
        head = heads[node] = _strip_head(node)
        if head is None or node.shape != shape or node.device is not HOST:
            return None
    last_reader = {child: position for position, node in enumerate(order) for child in node.inputs}
    slot_of: dict[Node, int] = {}
    read_slots: dict[int, int] = {}  # a place in the run's values: its slot
    free: list[int] = []
    steps = []
    count = 0
    for position, node in enumerate(order):
        if node.op.kind is not OpKind.ELEMENTWISE:
            continue
        reading = []
        for child in node.inputs:
            if child in slot_of:
                reading.append(slot_of[child])
                continue
            if places[child] not in read_slots:
                read_slots[places[child]] = count
                count += 1
            reading.append(read_slots[places[child]])
        for child in dict.fromkeys(node.inputs):  # a temporary read last here: its buffer taken again
            if child in slot_of and child not in wanted and last_reader[child] == position:
                free.append(slot_of[child])
        if free and node not in wanted:
            slot_of[node] = free.pop()
        else:
            slot_of[node] = count
            count += 1
        steps.append((heads[node], slot_of[node], *reading))
    if count > STRIP_MOST_SLOTS:
        return None
    stored = tuple(dict.fromkeys((slot_of[node], places[node]) for node in outputs))
    return _StripProgram(
        tuple(steps),
        tuple((slot, place) for place, slot in read_slots.items()),
        stored,
        tuple(views),
        count,
        shape,
        next(iter(outputs)) is order[-1],
    )


def _strip_head(node: Node) -> np.ufunc | np.dtype | None:
    """What heads ``node``'s step in a strip program: its ufunc (one of
    ``ops.WALK_INDEPENDENT_UFUNCS``, of one or two operands, without parameters), or for a
    ``where`` the dtype it selects; None where it cannot run in strips: a complex value read or
    made (complex products and quotients are not correctly rounded, and NumPy's vector and scalar
    loops for them may round differently)."""
    op = node.op
    if op.kind is not OpKind.ELEMENTWISE or node.params:
        return None
    if any(value.dtype is not None and value.dtype.kind == "c" for value in (node, *node.inputs)):
        return None
    if op is ELEMENTWISE["where"]:
        return node.dtype
    return op.reference if op.reference in WALK_INDEPENDENT_UFUNCS and len(node.inputs) <= 2 else None


class _Step(NamedTuple):
    """One node's run in a ``Recipe``: its op's reference and parameters, its arguments taken from
    the run's values (``_reader``), the arguments it may compute into if they own their memory
    (``_written_over``), whether it may compute into the pool's memory (``_pooled``), whether it
    is a library call, and the places of the values it reads last."""

    reference: Callable
    params: dict
    read: Callable[[list], tuple]
    over: tuple[int, ...]
    pool: bool
    barrier: bool
    freed: tuple[int, ...]


def _reader(places: tuple[int, ...]) -> Callable[[list], tuple]:
    """The values at ``places`` of a list, as a tuple: in C, not a comprehension's frame."""
    if len(places) == 1:
        only = operator.itemgetter(places[0])
        return lambda values: (only(values),)
    return operator.itemgetter(*places) if places else lambda _: ()


# A plan's step, by its id, with its recipe: a cached plan's steps are interpreted again and again
_step_recipes: cachetools.LRUCache = cachetools.LRUCache(maxsize=4 * config.kernel_cache_size)


def step_recipe(step: Any, order: Sequence[Node], outputs: Sequence[Node]) -> Recipe:
    """The recipe of a plan's step (``order``: its nodes, ``outputs``: those it stores), kept for
    the step's next runs: the same plan's nodes have the same structure at every run. A backend's
    step interpreted: its elementwise ops may run a block at a time (``Recipe``'s ``strips``)."""
    known = _step_recipes.get(id(step))
    if known is not None and known[0] is step:
        return known[1]
    recipe = Recipe(order, outputs, strips=True)
    _step_recipes[id(step)] = (step, recipe)
    return recipe


def heed_kernel_flags(
    nodes: Callable[[], Sequence[Node]], known: Callable[[], Mapping[Node, Any]] | None = None
) -> None:
    """After a compiled kernel's launch: the floating-point flags it raised taken, and where an op
    of ``nodes()`` (what it computed, inputs first) heeds one, the ops run again by NumPy for what it
    reports (``rerun_for_errors``); ``known()`` gives the values of what they read that are not
    leaves. Both are asked for only then: a launch without a flag pays one read of the word (and a
    device's launch, where an op heeds a flag, a wait for the device to read its own word)."""
    computed = functools.cache(nodes)  # asked for once, where a flag needs it

    def heeds(flags: int) -> bool:
        return float_errors.heeded(flags, (node.errstate for node in computed()))

    # A device's word is read only where an op heeds some flag: reading it waits for the device
    flags = float_errors.take_flags() | float_errors.device_flags(lambda: heeds(float_errors.ALL))
    if flags and heeds(flags):
        rerun_for_errors(computed(), None if known is None else known())


def rerun_for_errors(order: Sequence[Node], known: Mapping[Node, Any] | None = None) -> None:
    """For a compiled kernel that raised a floating-point flag an op of ``order`` heeds: NumPy's run
    of the ops that can report a floating-point error (``Op.reports_float_errors_on``), with the ops of
    ``order`` they read, each under its recorded error state, so NumPy warns (at the program's line
    that asked for the value), raises, calls or logs as it would have. The values stay the
    kernel's: a comparison or a select reading NaN raises the hardware's flag, NumPy's never
    report, and a kernel of those alone costs nothing."""
    order = list(dict.fromkeys(order))
    reporting = [
        node
        for node in order
        if node.op.reports_float_errors_on([node.dtype, *(child.dtype for child in node.inputs)])
    ]
    if not reporting:
        return
    inside, needed, pending = set(order), set(), list(reporting)
    while pending:
        node = pending.pop()
        if node not in needed:
            needed.add(node)
            pending.extend(child for child in node.inputs if child in inside)
    stats.count("float_error_reruns")
    rerun = [node for node in order if node in needed]
    known = dict(known or {})
    for read in {child for node in rerun for child in node.inputs if child not in needed}:
        value = known.get(read, read.buffer)
        # A device kernel's (not a plan's value, which comes as a host copy): NumPy runs on host copies
        if read.memory is not HOST and not isinstance(value, np.ndarray):
            known[read] = move(value, read.memory, HOST)
    with float_errors.warned_where_asked():
        run(rerun, (), known)  # for what NumPy says alone


def _reusable(order: Sequence[Node], wanted: Collection[Node]) -> set[Node]:
    """Intermediates whose memory the last op reading them may write its result into, as NumPy's own
    ``var`` squares in place: a fresh array of a large intermediate then costs its page faults
    again at every run. Not an output, nor a library call's result (a leaf then): an elementwise
    op's, a reduction's or a roll's, read only by such ops, which never keep a view of what they
    read."""
    copying = (OpKind.ELEMENTWISE, OpKind.REDUCTION, OpKind.MOVE)
    readers_ok: dict[Node, bool] = {}
    for node in order:
        keeps_no_view = node.op.kind in copying
        for child in node.inputs:
            readers_ok[child] = readers_ok.get(child, True) and keeps_no_view
    return {node for node in order if readers_ok.get(node) and node not in wanted and node.op.kind in copying}


def _pool_candidate(node: Node) -> bool:
    """Whether ``node``, an elementwise ufunc of one result or an op that fills ``out``
    (``Op.fills_out``: a cast, a roll) on the host, computes a result of
    ``host_pool.INTERPRETED_MIN_BYTES`` or more: one it may compute into the pool's memory."""
    op = node.op
    if node.device is not HOST or not _large(node):
        return False
    return op.fills_out or (op.kind is OpKind.ELEMENTWISE and op.computes_into and not node.params)


def _large(node: Node) -> bool:
    """Whether ``node``'s value is of ``host_pool.INTERPRETED_MIN_BYTES`` or more: malloc would
    map it afresh at each run."""
    return node.dtype.itemsize * math.prod(node.shape) >= host_pool.INTERPRETED_MIN_BYTES


def _pooled(node: Node, args: list) -> np.ndarray | None:
    """An array of the host's pool that ``node``, a pool candidate (``_pool_candidate``), may
    compute into: where every array it reads is of its shape (or one element) with its axes in C
    order (``_c_ordered``: a slice of rows or of columns too), so that NumPy's own result would be
    C-contiguous."""
    whole = [value for value in args if isinstance(value, np.ndarray) and value.size != 1]
    if any(value.shape != node.shape or not _c_ordered(value) for value in whole):
        return None
    return host_pool.empty(node.shape, node.dtype, host_pool.INTERPRETED_MIN_BYTES)


def _c_ordered(value: np.ndarray) -> bool:
    """Whether NumPy lays a ufunc's result on ``value`` out in C order (its ``order="K"`` follows
    the operands' strides): ``value``'s axes of more than one element have strides that shrink
    from the first to the last, by magnitude."""
    if value.flags.c_contiguous:
        return True
    strides = [abs(stride) for stride, length in zip(value.strides, value.shape, strict=True) if length > 1]
    return all(outer > inner > 0 for outer, inner in itertools.pairwise(strides))


def _written_over(
    node: Node, position: int, reusable: set[Node], last_reader: dict[Node, int]
) -> tuple[int, ...]:
    """The arguments whose arrays ``node``, a ufunc (``Op.computes_into``) at ``position``, may
    compute into, in order, where one owns its memory and is of its dtype and shape:
    intermediates that it reads last."""
    if not node.op.computes_into or node.params:  # only for ufuncs without parameters
        return ()
    if not _large(node):
        return ()  # a small array's memory is NumPy's allocator's to reuse (as its own elision)
    return tuple(
        argument
        for argument, child in enumerate(node.inputs)
        if child in reusable
        and last_reader.get(child) == position
        and child.dtype == node.dtype
        and child.shape == node.shape
    )
