"""The tier policy: whether a trace is planned, and whether each kernel runs compiled or interpreted.

Below ``Target.tiny_elements`` a trace is interpreted unplanned (a compiled launch costs more than
NumPy's few calls), unless it repeats ``Target.tiny_repeats`` times. Otherwise a kernel is
interpreted until the work of its signature's interpreted runs reaches what getting its code costs:
compiling it (``Backend.compile_work``), or loading it where the backend keeps it (tiered, like a
JIT: one-off small work pays no compile), and compiled from then on. Where that first compiled run
would do less work than ``Target.background_work`` and another core is free, it runs interpreted
once more while the kernel compiles on a thread of its own, and later runs wait for that compile:
the compile is hidden behind the work, and which runs are interpreted still depends only on the
program, not on timing.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable

import cachetools

from . import cache, config, registry, views
from .devices import HOST
from .kernel import Backend, Kernel
from .ops import OpKind
from .schedule import KernelStep
from .trace import Node

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
    (``direct``): the chosen backend's ``Target.tiny_elements``, below which it would interpret them
    anyway. 0 (never) with ``DYNFUSE_DIRECT=0``, with the tiers off (every kernel compiles, to test a
    backend), and with the reference executor (the oracle for recorded traces)."""
    backend = registry.BACKENDS[registry.backend]
    if not (config.direct and config.tiers) or backend is None or backend.memory is not HOST:
        return 0
    return backend.target.tiny_elements


def tiny(order: list[Node], backend: Backend) -> bool:
    """Work too small for any kernel to pay off on first sight: not even worth planning. A
    reduction's work is its input's size, however small its result (``x.sum(axis=0)``)."""
    limit = backend.target.tiny_elements
    return config.tiers and all(
        views.size_of(node.shape) < limit
        and (node.op.kind is not OpKind.REDUCTION or views.size_of(node.inputs[0].shape) < limit)
        for node in order
    )


def repeated_enough(key: tuple | None, backend: Backend) -> bool:
    """A small trace seen ``Target.tiny_repeats`` times compiles: replayed, its launch costs less
    than interpreting it, and the compile is paid back over the repeats."""
    repeats = backend.target.tiny_repeats
    if key is None or not repeats:
        return False
    return _sighted(key) >= repeats


def kernel_tier(step: KernelStep, nodes: list[Node], backend: Backend, compile_small: bool) -> Tier:
    """How ``step`` of a plan over the numbered ``nodes`` runs on ``backend`` this time
    (``compile_small``: its trace repeated, so it compiles whatever its size).

    Interpreted until interpreting this kernel's signature has cost as much as getting its code
    would (compiling it, as the backend estimates; loading it, where the backend keeps it), then
    compiled: the ski-rental rule, which never pays more than twice the best choice made knowing
    how often the kernel will run. A one-off statistic stays interpreted; a loop's body compiles
    after a few iterations, or at once. The first run that would compile is interpreted while the
    kernel compiles in the background (``Target.background_work``), unless its code is at hand
    (then compiling is only loading it).

    Interpreting costs every node of the group computed whole, a NumPy pass each
    (``_interpreting_work``). A kernel may compute far less (one element of a long chain, through
    an index map). Below ``Target.first_sight_work``, the least any code costs, the backend is not
    asked."""
    if not config.tiers:
        return Tier.COMPILED
    target, kernel = backend.target, step.kernel
    group = [nodes[number] for number in step.nodes]
    sizes = (views.size_of(node.shape) for node in group)
    if max(views.size_of(kernel.shape), *sizes) < target.tiny_elements:
        return Tier.COMPILED if compile_small else Tier.INTERPRETED
    work = sum(map(_interpreting_work, group))
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
