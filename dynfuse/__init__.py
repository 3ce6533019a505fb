"""dynfuse: a runtime JIT fusion engine for NumPy-style array code.

Operations on a ``LazyArray`` are recorded, not run; when a value is needed, the whole recorded
trace is planned and executed at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import accelerate, config, dtypes, numpy, registry
from .array import LazyArray, array, asarray
from .explain import explain, kernel_sources
from .host_pool import free as free_pool
from .record import evaluate
from .registry import set_backend
from .stats import reset_stats, stats
from .version import __version__

if TYPE_CHECKING:
    from .profiler import Profile


def profile() -> Profile:
    """A profile of what dynfuse does for each line of the program, to start and stop or use as
    ``with dynfuse.profile() as profile:``; then ``profile.text()``, ``profile.html()``,
    ``profile.data()``. Its module is imported when first asked for, as planning's is."""
    from .profiler import Profile

    return Profile()


if config.profile:  # DYNFUSE_PROFILE=1: the whole process, its text printed at exit
    from .profiler import profile_process

    profile_process()

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
    "profile",
    "registry",
    "reset_stats",
    "set_backend",
    "stats",
]
