"""dynfuse: a runtime JIT fusion engine for NumPy-style array code.

Operations on a ``LazyArray`` are recorded, not run; when a value is needed, the whole recorded
trace is planned and executed at once.
"""

from __future__ import annotations

from . import accelerate, config, dtypes, numpy, registry
from .array import LazyArray, array, asarray
from .explain import explain, kernel_sources
from .host_pool import free as free_pool
from .record import evaluate
from .registry import set_backend
from .stats import reset_stats, stats
from .version import __version__

__all__ = [
    "LazyArray",
    "__version__",
    "accelerate",
    "array",
    "asarray",
    "config",
    "dtypes",
    "evaluate",
    "explain",
    "free_pool",
    "kernel_sources",
    "numpy",
    "registry",
    "reset_stats",
    "set_backend",
    "stats",
]
