"""The tier policy: whether a trace is planned, and whether each kernel runs compiled or interpreted.

Below ``Target.tiny_elements`` a trace is interpreted unplanned (planning it costs more than
NumPy's few calls), unless it repeats ``Target.tiny_repeats`` times: then its interpreted runs have
paid for a plan, which is kept and replayed. A larger trace is interpreted unplanned the first time
it is seen too, where its whole work could not pay for any kernel's code (``unplanned_first_sight``),
and planned from its second sighting. A kernel is interpreted until the work of its
signature's interpreted runs reaches what getting its code costs: compiling it
(``Backend.compile_work``), or loading it where the backend keeps it (tiered, like a JIT: one-off
small work pays no compile), and compiled from then on; a tiny kernel only in a repeated trace
(a tiny one, or one that replays).
Where another core is free, the compile runs on a thread of its own from the run that reaches its
cost, and the kernel stays interpreted until as much work again is interpreted (one run, where a
run's work takes a compile's time, ``Target.background_work``); later runs wait for the compile
if it is not done. The compile is hidden behind the work, and which runs are interpreted depends
only on the program, never on timing.

Small work on computed arrays runs at once, by NumPy (``direct_elements``), unless the place in the
program that calls it records (a site, kept by the C recorder): a statement a loop runs again and
again costs a compiled replay of its trace, less than NumPy's calls, once recording it is seen to
pay. A site runs its ops at once until ``SITE_TRIAL_AT`` runs, then records once (a trial); the
materialization of what it recorded settles it (``settle_sites``, ``recording_verdict``): where the
trace replays as one kernel launched in C that fuses ``RECORDING_PAYS_OPS`` ops or more
(``paying_ops``), the site records from then on, as long as that keeps holding; where the trace
was planned or ran as a plan (a compile not yet paid for), it runs at once again until twice as
many runs; where it cannot pay (``could_pay``; no replay key; no C launch; its value carried into
the loop's next run), until ``SITE_MOST_TRIAL_AT`` runs. A trial's trace stands for the runs its
site ran at once since the last (``site_repeats``): it is planned as a repeated trace, and its
kernels are credited with that work, so a kernel the loop would have paid a compile for compiles
(in the background, where a core is free) while the loop runs on by NumPy. Where the C recorder is
not in use, every small op runs at once.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

import cachetools

from . import cache, config, registry, views
from .devices import HOST
from .kernel import Backend, Kernel, Target
from .ops import OpKind
from .trace import Node

if TYPE_CHECKING:
    from .schedule import KernelStep

# A site's first trial after this many runs: a trial costs about what planning and interpreting its
# trace cost, some 300 us the first time (a 13-op 64x64 heat step), what 20 runs of it by NumPy cost.
SITE_TRIAL_AT = 32
SITE_MOST_TRIAL_AT = 1 << 16
# A compiled trace pays for recording where its kernels fuse this many ops each: recording an op
# costs about 0.4 us, and a NumPy call on a small array about 0.6 us more than a fused op.
RECORDING_PAYS_OPS = 4


# The C recorder's, where it is in use (``accelerate``); without it there are no sites, and these
# stand in for them.
def settle_sites(verdict: int, nodes: Sequence[Node]) -> None:
    """Tell the sites that recorded since the last materialization, and whose nodes are among this
    one's ``nodes``, its verdict (``recording_verdict``)."""


def site_records() -> bool:
    """Whether the program's place that calls the op about to run at once records it instead (its
    site's trial, or a site that records), the runs counted; then ``note_recorded`` tells it the
    node recorded."""
    return False


def cap_verdicts(cap: int) -> int:
    """Verdicts are at most ``cap`` from now on (0 while the program reads several values of a loop's
    run: ``execute._loop_run``); returns the cap before."""
    return 1


def note_recorded(node: Node) -> None:
    """``node`` is what the op of the last site that ``site_records`` noted recorded."""


def site_repeats() -> int:
    """The runs the sites that recorded since the last materialization stand for; 0: none did."""
    return 0


def set_site_trials(first: int, most: int) -> None:
    """Forget every site; each tries recording after ``first`` runs, then after at most ``most``."""


def sites() -> list[tuple]:
    """Each site known: its code, instruction, state ("direct", "waiting", "recording"), runs
    counted and the run of its next trial."""
    return []


def forget_sites() -> None:
    """Every site counts its runs afresh, as in a new process."""
    set_site_trials(SITE_TRIAL_AT, SITE_MOST_TRIAL_AT)


def recording_verdict(kernels: int, fused: float, interpreted: int) -> int:
    """Whether a materialization paid for what sites recorded, from the ``kernels`` of its plan
    (0: unplanned) and their ops, ``fused`` in compiled kernels (``paying_ops``, where known) and
    ``interpreted``: 1 where they all ran compiled, ``RECORDING_PAYS_OPS`` ops a kernel or more; -1
    where no kernel can fuse that many (all but one of a single op leave the last too few); 0
    where some ran interpreted (their compile not yet paid for: a later trial may find them
    compiled), where nothing was planned, or where one kernel may pay among others that do not:
    values an earlier run left pending, computed with a loop's trial (an outer loop's derivatives
    with its inner loop's first run), are kernels of their own, which a later trial may not meet."""
    if not kernels:
        return 0
    ops = fused + interpreted
    if ops - (kernels - 1) < RECORDING_PAYS_OPS:
        return -1
    if ops < RECORDING_PAYS_OPS * kernels:
        return 0
    return 0 if interpreted else 1


def could_pay(order: Sequence[Node]) -> bool:
    """Whether a trace (its unmaterialized nodes) has the ops that recording it needs to pay, were
    they all fused in one kernel."""
    return paying_ops(order) >= RECORDING_PAYS_OPS


def paying_ops(nodes: Sequence[Node]) -> float:
    """The ops among ``nodes`` a kernel fuses, each as much as fusing it saves: an op on 1-byte
    elements (a mask's ``&``) a quarter of one on 4 or 8, as NumPy's own loop over them is that
    much cheaper (a 100x100 mask's four ops take NumPy 1.8 us, a float64 chain's four 7.3 us), the
    elements read counted with those written (a comparison of float64 values, which writes bools,
    took NumPy 3.2 us on 3,600 elements, a product 4.1); a view, which moves no elements, nothing;
    an op of the backend's tiny size or more twice: what fusing it saves grows with its elements,
    recording it does not (NumPy's temporaries of a 150x150 FDTD update's three ops, mapped afresh
    by malloc: 208 us a statement run by NumPy, 46 us recorded and replayed); a gather below that
    size, what recording it costs (``GATHER_RECORDING_OPS``), against."""
    large = registry.BACKENDS[registry.backend].target.tiny_elements
    paying = 0.0
    for node in nodes:
        kind = node.op.kind
        if kind is OpKind.VIEW:
            continue
        elements = views.size_of(node.shape)
        if kind is OpKind.GATHER and elements < large:
            paying -= GATHER_RECORDING_OPS
        else:
            paying += min(_widest_element(node), 4) / 4 * (2 if elements >= large else 1)
    return paying


# Recording a gather checks its indices at its line (NumPy's IndexError there), in Python: about
# 20 us for 100 indices, where NumPy indexes a small array in 2. Below the tiny size it costs what
# recording this many ops does, so a loop's small gathers run at once (a cross-entropy step on
# 100x100 logits: 157 us recorded, 103 by NumPy).
GATHER_RECORDING_OPS = 40


def _widest_element(node: Node) -> int:
    """The bytes of the widest element an op reads (its array operands) or writes."""
    read = (child.dtype.itemsize for child in node.inputs if child.op.kind is not OpKind.SCALAR)
    return max(node.dtype.itemsize, *read)


# How often each kernel signature has been seen, for the tier policy.
_sightings: cachetools.LRUCache = cachetools.LRUCache(maxsize=4 * config.kernel_cache_size)


class Tier(enum.Enum):
    """How a kernel step runs this time (``kernel_tier``)."""

    INTERPRETED = "interpreted"  # op by op, by the reference executor
    COMPILED = "compiled"  # launched, compiled first if it must be
    COMPILING = "compiling"  # interpreted, while it compiles in the background for later runs


def _sighted(key: Hashable, amount: float = 1) -> float:
    """How much of ``key`` has been seen, this time's ``amount`` included: sightings of a trace
    (its replay key), or the work of a kernel (its signature). What the tier policy decides by."""
    seen = _sightings.get(key, 0) + amount
    _sightings[key] = seen
    return seen


def direct_elements() -> int:
    """Operations on computed host arrays of fewer elements than this run at once, by NumPy
    (``direct``), unless their site records: the chosen backend's ``Target.direct_elements``, and at
    least its ``tiny_elements``, below which it would interpret them anyway. 0 (never) with
    ``DYNFUSE_DIRECT=0``, with the tiers off (every kernel compiles, to test a backend), and with the
    reference executor (the oracle for recorded traces)."""
    backend = registry.BACKENDS[registry.backend]
    if not (config.direct and config.tiers) or backend is None or backend.memory is not HOST:
        return 0
    return max(backend.target.direct_elements, backend.target.tiny_elements)


def tiny(order: list[Node], backend: Backend) -> bool:
    """Work too small for any kernel to pay off on first sight: not even worth planning. A
    reduction's work is its input's size, however small its result (``x.sum(axis=0)``)."""
    limit = backend.target.tiny_elements
    return config.tiers and all(
        views.size_of(node.shape) < limit
        and (node.op.kind is not OpKind.REDUCTION or views.size_of(node.inputs[0].shape) < limit)
        for node in order
    )


def repeated_enough(key: tuple | None, backend: Backend, repeats: int = 0) -> bool:
    """A small trace seen ``Target.tiny_repeats`` times is planned (and its plan kept for replaying):
    its interpreted runs have cost what planning it costs. Its kernels then compile by their work
    (``kernel_tier``): replayed, a launch costs less than interpreting them. A site's trial stands
    for its ``repeats`` runs (``site_repeats``)."""
    needed = backend.target.tiny_repeats
    if key is None or not needed:
        return False
    return _sighted(key, max(repeats, 1)) >= needed


def unplanned_first_sight(key: tuple | None, order: Sequence[Node], backend: Backend) -> bool:
    """Whether a trace runs unplanned, op by op as NumPy would run it: the first time it is seen on
    the host, where its whole work could not pay for planning it and any kernel's code in this run
    (``plan_node_work`` a node, and the least code costs: ``first_sight_work``, and ``start_work``
    too while the compiler is not started and no code is kept). Planning a long trace costs
    milliseconds that a trace seen once never gets back (a 400² Gray-Scott run's 373 nodes: 135-177
    ms, against 80-90 ms for NumPy's whole run); from its second
    sighting it is planned, its plan kept for replaying, and its kernels compiled by their work.
    Never a site's trial (``repeats``: planned as the runs it stands for). ``key``: the trace's
    replay key, or its signature where it is too long for one (none: never)."""
    if key is None or not config.tiers or backend.memory is not HOST:
        return False
    if _sighted((_TRACE_SEEN, key)) > 1:
        return False
    target = backend.target
    least = target.first_sight_work + target.plan_node_work * len(order)
    if (_STARTED, backend.name) not in _sightings and not backend.keeps_code():
        least += target.start_work
    work = 0.0
    for node in order:
        if node.inputs:
            work += _interpreting_work(node, target)
            if work >= least:
                return False
    _sightings[(_UNPLANNED, key)] = 1
    return True


def unplanned_runs(key: tuple | None) -> int:
    """The runs of a trace now planned that ran unplanned before (``unplanned_first_sight``): its
    kernels are credited with their work (``kernel_tier``'s ``unplanned``), as if planned then."""
    return 0 if key is None else _sightings.pop((_UNPLANNED, key), 0)


def kernel_tier(
    step: KernelStep,
    nodes: list[Node],
    backend: Backend,
    compile_small: bool,
    repeats: int = 0,
    unplanned: int = 0,
) -> Tier:
    """How ``step`` of a plan over the numbered ``nodes`` runs on ``backend`` this time
    (``compile_small``: its trace is repeated, tiny or replayed, so its tiny kernels may compile too; a
    site's trial stands for its ``repeats`` runs by NumPy, whose work counts too: ``_direct_work``;
    the trace ran ``unplanned`` times before it was planned, interpreted: that work counts too).

    Interpreted until interpreting this kernel's signature has cost as much as getting its code
    would (compiling it, as the backend estimates; loading it, where the backend keeps it), then
    compiled: the ski-rental rule, which never pays more than twice the best choice made knowing
    how often the kernel will run. A one-off statistic stays interpreted; a loop's body compiles
    after a few iterations, or at once.

    Where another core is free and the code is not at hand, the compile runs in the background
    (``Target.background_work``) from the run that reaches its cost, and the kernel stays
    interpreted until the work interpreted since then reaches that cost again: about as long as
    the compile takes, so the program does not wait for it, and what it spends is what compiling
    in the foreground would have cost (the rule's bound holds). A run that does at least
    ``background_work`` takes about a compile's time by itself: the next run waits for the compile.

    Interpreting costs every node of the group computed whole, a NumPy pass each, and a NumPy
    call each (``_interpreting_work``). A kernel may compute far less (one element of a long
    chain, through an index map). Below ``Target.first_sight_work``, the least any code costs, the
    backend is not asked."""
    if not config.tiers:
        return Tier.COMPILED
    target, kernel = backend.target, step.kernel
    work, largest = _step_work(step, nodes, target)
    if not compile_small and largest < target.tiny_elements:
        return Tier.INTERPRETED
    key = (backend.name, kernel.signature)
    compiled = cache.has_compiled(backend, kernel)
    # Compiled, or compiling in the background: interpreted until the run it is due by
    compiled_at = _sightings.get((_COMPILED_AT, key)) if compiled else None
    if compiled and compiled_at is None:
        return Tier.COMPILED  # the common case, a loop's: nothing more to count
    # A site's trial: its runs by NumPy since the last are work seen too
    direct = repeats * sum(_direct_work(nodes[number], target) for number in step.nodes) if repeats else 0
    seen = _sighted(key, work * (1 + unplanned) + direct)  # this run's work included
    if compiled:
        if seen < compiled_at:
            return _climbing()
        _sightings.pop((_COMPILED_AT, key), None)
        return Tier.COMPILED
    if seen < target.first_sight_work:
        return _climbing()
    started = (_STARTED, backend.name)
    known = _sightings.get((_CODE_COST, key))
    if known is None and not backend.keeps_code():
        # No code is kept, so the kernel compiles: that costs at least what the backend says without
        # generating its code, and starting the compiler where it is not started, so the backend is
        # not asked before the work reaches that (an answer generates the code, the code generator
        # imported first: tens of ms): a short program never asks
        least = backend.least_compile_work(kernel) + (0 if started in _sightings else target.start_work)
        if seen < least:
            return _climbing()
    cost, at_hand = known or _code_cost(backend, kernel, key)
    if not at_hand and started not in _sightings:
        cost += target.start_work  # this compile would start the compiler too
    if seen < cost:
        return _climbing()
    _sightings[started] = True
    _sightings.pop((_CODE_COST, key), None)  # it will be kept: asked again if it is forgotten
    if work < target.background_work and config.threads > 1 and not at_hand:
        # Later runs wait for it once they have interpreted as much again as the compile costs
        _sightings[(_COMPILED_AT, key)] = seen + cost - work
        return Tier.COMPILING
    _sightings.pop((_COMPILED_AT, key), None)
    return Tier.COMPILED


# Runs of kernels interpreted while their work climbed toward their code's cost (``kernel_tier``)
_climbing_runs = [0]


def _climbing() -> Tier:
    _climbing_runs[0] += 1
    return Tier.INTERPRETED


def climbing_runs() -> int:
    """How many kernel runs were interpreted while their signature's work climbed toward what its
    code costs: a loop that goes on running them compiles them, which is what a benchmark's warm-up
    waits for before it calls a loop's runs its steady state."""
    return _climbing_runs[0]


# A plan's step, by its id, with its work and largest size (``_step_work``): a cached plan's steps
# run again and again, each time on nodes of the same shapes and ops.
_step_works: cachetools.LRUCache = cachetools.LRUCache(maxsize=4 * config.kernel_cache_size)


def _step_work(step: KernelStep, nodes: list[Node], target: Target) -> tuple[float, int]:
    """The work of interpreting ``step`` once (``_interpreting_work`` of each node it computes), and
    the most elements it or its kernel iterates over."""
    known = _step_works.get(id(step))
    if known is not None and known[0] is step and known[1] is target:
        return known[2], known[3]
    group = [nodes[number] for number in step.nodes]
    work = sum(_interpreting_work(node, target) for node in group)
    largest = max(views.size_of(step.kernel.shape), *(views.size_of(node.shape) for node in group))
    _step_works[id(step)] = (step, target, work, largest)
    return work, largest


# Tags, beside each kernel signature's work seen: the work seen by which its background compile is
# due, and what getting its code costs (asked once while it is interpreted: a disk lookup, a
# module's lines counted); beside a trace's replay key, how often it was seen unkept and whether it
# then ran unplanned; beside a backend's name, that a kernel of this process got its code (the
# compiler is started: ``Target.start_work`` paid).
_COMPILED_AT = "compiled at"
_CODE_COST = "code cost"
_TRACE_SEEN = "trace seen"
_UNPLANNED = "ran unplanned"
_STARTED = "compiler started"


def _code_cost(backend: Backend, kernel: Kernel, key: Hashable) -> tuple[float, bool]:
    """What getting the kernel's code costs, in the work of interpreting it, and whether the backend
    keeps that code (then it is only loaded, at the least cost, ``Target.first_sight_work``), kept
    under ``key`` for its next runs. If asking fails: nothing, as if kept; the kernel is then
    compiled at once, where the failure falls back as any compile's does."""
    try:
        if backend.cached(kernel):
            found = backend.target.first_sight_work, True
        else:
            found = backend.compile_work(kernel), False
    except Exception:
        return 0, True
    _sightings[(_CODE_COST, key)] = found
    return found


def _elements_work(node: Node) -> float:
    """A node's elements (a reduction's operand's), as dear as its op (an exp is ten adds) and its
    elements' bytes (float64 twice float32)."""
    counted = node.inputs[0] if node.op.kind is OpKind.REDUCTION else node
    return views.size_of(counted.shape) * node.op.cost * max(node.dtype.itemsize, 4) / 4


def _direct_work(node: Node, target: Target) -> float:
    """What NumPy's call for ``node``, run directly, costs: its elements' work and the call."""
    return _elements_work(node) + target.direct_op_work


def _interpreting_work(node: Node, target: Target) -> float:
    """What the reference executor's NumPy call for ``node`` costs: its elements' work and the call
    itself (``Target.interpreted_op_work``)."""
    return _elements_work(node) + target.interpreted_op_work
