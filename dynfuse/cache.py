"""Caches that count themselves: compiled kernels by kernel signature, plans by trace signature.

A kernel may be compiled in the background (``compile_in_background``), on one thread of its own:
its entry is then the compile's future until it finishes, and whoever asks for the kernel before
that waits for it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import cachetools

from . import config, pools, stats
from .kernel import Backend, CompiledKernel, Kernel

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor


class _Building:
    """An entry whose value a background build is making: its future. A class of its own, so that
    telling it from a value needs no ``concurrent.futures`` until a build starts."""

    __slots__ = ("future",)

    def __init__(self, future: Future) -> None:
        self.future = future


class CountedCache:
    """A bounded LRU cache, safe across threads, whose hits and misses show in ``stats()``."""

    def __init__(self, maxsize: int, hits: str, misses: str) -> None:
        self._entries: cachetools.LRUCache = cachetools.LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget_parent_builds)
        self._hits, self._misses = hits, misses

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The value of ``key``, built here if there is none; one building in the background is
        waited for (its failure raised here, as if it had been built here), and is no hit."""
        with self._lock:
            value = self._entries.get(key)
        if isinstance(value, _Building):  # a build in flight, counted as a miss where it started
            return self._finished(key, value)
        if value is not None:
            stats.count(self._hits)
            return value
        stats.count(self._misses)
        value = build()
        with self._lock:
            self._entries[key] = value
        return value

    def __contains__(self, key: Hashable) -> bool:
        """Whether ``key`` is built, or being built."""
        with self._lock:
            return key in self._entries

    def build_in_background(
        self, key: Hashable, build: Callable[[], Any], thread: ThreadPoolExecutor
    ) -> None:
        """Start building ``key``'s value on ``thread``, unless it is built or being built."""
        with self._lock:
            if key in self._entries:
                return
            building = _Building(thread.submit(build))
            self._entries[key] = building
        stats.count(self._misses)
        building.future.add_done_callback(lambda _: self._settle(key, building))

    def _settle(self, key: Hashable, building: _Building) -> None:
        """A successful build's value takes its future's place."""
        if building.future.exception() is None:
            with self._lock:
                if self._entries.get(key) is building:
                    self._entries[key] = building.future.result()

    def _finished(self, key: Hashable, building: _Building) -> Any:
        """A background build's value, waited for. A failed build is forgotten here, where it is
        met, as one built on the spot would be: when that happens depends on the program, not on
        how long the build took."""
        try:
            return building.future.result()
        except Exception:
            with self._lock:
                if self._entries.get(key) is building:
                    del self._entries[key]
            raise

    def _forget_parent_builds(self) -> None:
        """In a forked child: the lock is free (as execute.lock), and builds in flight were on a
        thread of the parent's that does not exist here: waited for, they would never finish."""
        self._lock._at_fork_reinit()
        for key in [key for key, value in self._entries.items() if isinstance(value, _Building)]:
            del self._entries[key]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


# Compiled kernels (a background compile's future until it is done), by backend, variant and signature
kernels = CountedCache(config.kernel_cache_size, "cache_hits", "cache_misses")


_DECLINED = object()  # what the cache holds for a kernel its backend does not support


def compiled_kernel(backend: Backend, kernel: Kernel) -> CompiledKernel | None:
    """The compiled kernel, built on first use (or waited for, if it is compiling in the
    background); None if the backend declines it (it then runs interpreted): asked once per
    signature, not on every launch."""
    compiled = kernels.get_or_build(_key(backend, kernel), _builder(backend, kernel))
    return None if compiled is _DECLINED else compiled


def _key(backend: Backend, kernel: Kernel) -> tuple:
    return backend.name, backend.variant(), kernel.signature


def has_compiled(backend: Backend, kernel: Kernel) -> bool:
    """Whether the kernel is compiled, or compiling, in this process."""
    return _key(backend, kernel) in kernels


def compile_in_background(backend: Backend, kernel: Kernel) -> None:
    """Compile the kernel on the compile thread, unless it is compiled or compiling already."""
    kernels.build_in_background(_key(backend, kernel), _builder(backend, kernel), _compile_thread.get())


def finish_background_compiles() -> None:
    """Wait until every background compile asked for so far is done, its code on disk: the one
    compile thread runs them in order, so a no-op asked for now finishes after them."""
    _compile_thread.get().submit(lambda: None).result()


def _builder(backend: Backend, kernel: Kernel) -> Callable[[], Any]:
    def build() -> CompiledKernel:
        if not backend.supports(kernel):
            return _DECLINED
        started = time.perf_counter()
        compiled = backend.compile(kernel)
        stats.count("compile_seconds", time.perf_counter() - started)
        stats.count("kernels_compiled")
        return compiled

    return build


# One thread, so background compiles take one core and finish in the order they were asked for.
# At exit Python waits for those in flight; their code is then in the disk cache.
_compile_thread = pools.LazyPool(lambda: 1, "dynfuse-compile")
