"""Thread pools started when first used, that a forked child forgets: its parent's threads do not
exist there, and work handed to them would wait forever. ``concurrent.futures`` (and the logging it
imports) is imported by the first ``get``, not with dynfuse."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import config

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor


class LazyPool:
    """A ``ThreadPoolExecutor`` of ``workers()`` threads, made on the first ``get``."""

    def __init__(self, workers: Callable[[], int], name: str) -> None:
        self._workers, self._name = workers, name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget_parent_threads)

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(self._workers(), thread_name_prefix=self._name)
            return self._pool

    def run_all(self, calls: list[Callable[[], object]]) -> None:
        """Run each call: the first on this thread, the others on the pool; return when all have."""
        futures = [self.get().submit(call) for call in calls[1:]]
        calls[0]()
        for future in futures:
            future.result()

    def _forget_parent_threads(self) -> None:
        self._pool = None
        self._lock._at_fork_reinit()


# The threads work is split across, besides the calling one: a kernel's ranges, a NumPy loop's parts.
WORKERS = LazyPool(lambda: max(config.threads - 1, 1), "dynfuse")
