"""Counters of what dynfuse did: what was recorded, interpreted, compiled, reused, fallen back."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

_COUNTER_NAMES = (
    "ops_recorded",
    "materializations",
    "plan_cache_hits",
    "plan_cache_misses",
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
    "fallbacks",
    "compile_seconds",
)

_lock = threading.Lock()
_counters: dict[str, float] = dict.fromkeys(_COUNTER_NAMES, 0)
_fallback_names: Counter[str] = Counter()


def count(name: str, amount: float = 1) -> None:
    with _lock:
        _counters[name] += amount


def count_fallback(function_name: str) -> None:
    with _lock:
        _counters["fallbacks"] += 1
        _fallback_names[function_name] += 1


def stats() -> dict[str, Any]:
    """A snapshot of the counters; ``fallback_names`` maps each fallen-back function to its count."""
    with _lock:
        snapshot: dict[str, Any] = dict(_counters)
        snapshot["fallback_names"] = dict(_fallback_names)
    return snapshot


def reset_stats() -> None:
    with _lock:
        _counters.update(dict.fromkeys(_COUNTER_NAMES, 0))
        _fallback_names.clear()
