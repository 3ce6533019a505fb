"""Compiled kernels, kept by signature so that a kernel compiles once per process."""

from __future__ import annotations

import threading
import time

import cachetools

from . import config, stats
from .kernel import Backend, CompiledKernel, Kernel

_compiled: cachetools.LRUCache = cachetools.LRUCache(maxsize=config.kernel_cache_size)
_lock = threading.Lock()


def compiled_kernel(backend: Backend, kernel: Kernel) -> CompiledKernel:
    key = (backend.name, kernel.signature)
    with _lock:
        compiled = _compiled.get(key)
    if compiled is not None:
        stats.count("cache_hits")
        return compiled
    stats.count("cache_misses")
    started = time.perf_counter()
    compiled = backend.compile(kernel)
    stats.count("compile_seconds", time.perf_counter() - started)
    stats.count("kernels_compiled")
    with _lock:
        _compiled[key] = compiled
    return compiled


def clear() -> None:
    with _lock:
        _compiled.clear()
