"""Caches that count themselves: compiled kernels by kernel signature, plans by trace signature;
and replays (``execute.Replay``) by the structure recorded with a node."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import cachetools

from . import config, stats
from .kernel import Backend, CompiledKernel, Kernel


class CountedCache:
    """A bounded LRU cache, safe across threads, whose hits and misses show in ``stats()``."""

    def __init__(self, maxsize: int, hits: str, misses: str) -> None:
        self._entries: cachetools.LRUCache = cachetools.LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._lock._at_fork_reinit)  # as execute.lock
        self._hits, self._misses = hits, misses

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> Any:
        with self._lock:
            value = self._entries.get(key)
        if value is not None:
            stats.count(self._hits)
            return value
        stats.count(self._misses)
        value = build()
        with self._lock:
            self._entries[key] = value
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_compiled = CountedCache(config.kernel_cache_size, "cache_hits", "cache_misses")


_DECLINED = object()  # what the cache holds for a kernel its backend does not support


def compiled_kernel(backend: Backend, kernel: Kernel) -> CompiledKernel | None:
    """The compiled kernel, built on first use; None if the backend declines it (it then runs
    interpreted): asked once per signature, not on every launch."""

    def build() -> CompiledKernel:
        if not backend.supports(kernel):
            return _DECLINED
        started = time.perf_counter()
        compiled = backend.compile(kernel)
        stats.count("compile_seconds", time.perf_counter() - started)
        stats.count("kernels_compiled")
        return compiled

    compiled = _compiled.get_or_build((backend.name, kernel.signature), build)
    return None if compiled is _DECLINED else compiled


# Replays, most recently used last; read and written under ``execute.lock``. An OrderedDict, not a
# CountedCache: a replay lookup is on the dispatch path of every small trace, and cachetools' LRU
# with its own lock costs microseconds there. Not counted here: a replay is counted when it runs,
# and a miss is the planned path's to count.
_replays: OrderedDict[tuple, Any] = OrderedDict()


def replay(key: tuple) -> Any:
    found = _replays.get(key)
    if found is not None:
        _replays.move_to_end(key)
    return found


def keep_replay(key: tuple, replay: Any) -> None:
    _replays[key] = replay
    if len(_replays) > config.plan_cache_size:
        _replays.popitem(last=False)


def forget_replay(key: tuple) -> None:
    _replays.pop(key, None)


def clear_replays() -> None:
    """Replays hold compiled kernels and stand for plans: cleared with either cache."""
    _replays.clear()


def clear() -> None:
    _compiled.clear()
    clear_replays()
