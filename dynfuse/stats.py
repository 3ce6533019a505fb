"""Counters of what dynfuse did: what was recorded, interpreted, compiled, reused, fallen back."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

_COUNTER_NAMES = (
    "ops_recorded",
    "materializations",
    "plan_cache_hits",
    "plan_cache_misses",
    "replays",
    "kernels_planned",
    "fused_ops",
    "kernels_compiled",
    "kernels_launched",
    "cache_hits",
    "cache_misses",
    "disk_cache_hits",
    "disk_cache_misses",
    "disk_cache_writes",
    "disk_cache_errors",
    "interpreted_ops",
    "direct_ops",
    "direct_loops",
    "strip_runs",
    "fallbacks",
    "float_error_reruns",
    "writes_in_place",
    "compile_seconds",
    "pool_hits",
    "pool_misses",
)

# Values read when a snapshot is taken rather than counted, each by the module that knows it (the
# host pool sets ``pool_bytes``: the bytes of the free blocks it keeps); a reset leaves them.
GAUGES: dict[str, Callable[[], float]] = {}

# Counters kept elsewhere (the C recorder's, counted once per op), as (read, reset): ``read()`` gives
# counts by name, added to the snapshot's.
SOURCES: list[tuple[Callable[[], dict[str, float]], Callable[[], None]]] = []

# Counting happens on every recorded op and launch, from any thread: each thread adds to counters of
# its own, without a lock, and a snapshot sums them all. A count racing a reset lands on either side.
_lock = threading.Lock()
os.register_at_fork(after_in_child=_lock._at_fork_reinit)  # free in a forked child, as in execute
_local = threading.local()
_per_thread: list[dict[str, float]] = []
_fallback_names: Counter[str] = Counter()
_fallback_reasons: dict[str, str] = {}


def thread_counters() -> dict[str, float]:
    """This thread's counters, to add to without a lock (``count``, and recording directly)."""
    try:
        return _local.counters
    except AttributeError:
        counters = _local.counters = dict.fromkeys(_COUNTER_NAMES, 0)
        with _lock:
            _per_thread.append(counters)
        return counters


def count(name: str, amount: float = 1) -> None:
    try:
        _local.counters[name] += amount
    except AttributeError:
        thread_counters()[name] += amount


def count_fallback(function_name: str, why: str) -> None:
    """A call that ran through NumPy unrecorded, and why (the last reason is kept per name)."""
    count("fallbacks")
    with _lock:
        _fallback_names[function_name] += 1
        _fallback_reasons[function_name] = why


def stats() -> dict[str, Any]:
    """A snapshot of the counters and gauges; ``fallback_names`` maps each fallen-back function to
    its count, ``fallback_reasons`` to why it fell back (the last time)."""
    with _lock:
        snapshot: dict[str, Any] = {
            name: sum(counters[name] for counters in _per_thread) for name in _COUNTER_NAMES
        }
        snapshot["fallback_names"] = dict(_fallback_names)
        snapshot["fallback_reasons"] = dict(_fallback_reasons)
        for read, _ in SOURCES:
            for name, value in read().items():
                snapshot[name] += value
    snapshot.update((name, read()) for name, read in GAUGES.items())
    return snapshot


def reset_stats() -> None:
    with _lock:
        for counters in _per_thread:
            counters.update(dict.fromkeys(_COUNTER_NAMES, 0))
        _fallback_names.clear()
        _fallback_reasons.clear()
        for _, reset in SOURCES:
            reset()
