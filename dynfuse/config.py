"""Settings from the environment, read once at import; tests and tools may change them at run time.

DYNFUSE_BACKEND      which executor materializes arrays: read by ``registry``, which knows the backends
DYNFUSE_CACHE_DIR    where compiled kernels are kept across processes (default ``~/.cache/dynfuse``)
DYNFUSE_DISK_CACHE   1 (default): compiled kernels are kept in DYNFUSE_CACHE_DIR; 0: never read or written
DYNFUSE_CACHE_KEY    a key file only a team can read: DYNFUSE_CACHE_DIR is a cache they share, whose entries
                     are authenticated with HMAC-SHA256 under that key (``disk_cache``)
DYNFUSE_MAX_DEPTH    a trace deeper than this is materialized as it is recorded (default 256), so a
                     long loop of ``x = x * c`` keeps a bounded graph
DYNFUSE_PENDING_MEMORY
                     MiB that traces not yet materialized may keep alive on their own (arrays the
                     program dropped once it recorded over them); past it they are materialized
                     (default 64)
DYNFUSE_POOL_MEMORY  MiB of freed large host arrays kept for reuse (default 512; 0: none), so a
                     kernel's fresh output is memory already mapped, not pages the system maps and
                     zeroes on first write (``host_pool``; ``dynfuse.free_pool()`` releases them)
DYNFUSE_TIERS        1 (default): tiny work is interpreted, and small kernels until interpreting them has
                     cost a compile; 0: every kernel compiles at once (to test a backend on small arrays)
DYNFUSE_DIRECT       1 (default): an op on computed arrays smaller than the backend's tiny size runs at once,
                     by NumPy, instead of being recorded; 0: every op is recorded (to see or test traces
                     of small arrays)
DYNFUSE_PLAN_CACHE   plans kept, one per trace signature (default 1024)
DYNFUSE_THREADS      threads a large kernel is split across (default: every core); 1 also compiles every
                     kernel at once, never on a background thread
DYNFUSE_KERNEL_CACHE compiled kernels kept in memory, one per kernel signature (default 1024)
DYNFUSE_PURE_PYTHON  1: record and launch kernels in Python even where the C extensions are built
DYNFUSE_PROFILE      1: profile the whole process line by line (``dynfuse.profile``), the table printed
                     to stderr at exit
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path


def _int_from_environment(variable: str, default: int, least: int = 1) -> int:
    text = os.environ.get(variable, "")
    try:
        value = int(text) if text else default
    except ValueError:
        value = least - 1
    if value < least:
        kind = "a positive" if least == 1 else "a non-negative"
        warnings.warn(
            f"{variable}={text!r} is not {kind} integer; using {default}", RuntimeWarning, stacklevel=2
        )
        return default
    return value


cache_dir: Path = Path(os.environ.get("DYNFUSE_CACHE_DIR") or Path.home() / ".cache" / "dynfuse").expanduser()
disk_cache: bool = os.environ.get("DYNFUSE_DISK_CACHE", "1").strip() != "0"
cache_key: Path | None = (
    Path(os.environ["DYNFUSE_CACHE_KEY"]).expanduser() if os.environ.get("DYNFUSE_CACHE_KEY") else None
)
max_depth: int = _int_from_environment("DYNFUSE_MAX_DEPTH", 256)
pending_memory: int = _int_from_environment("DYNFUSE_PENDING_MEMORY", 64) << 20
pool_memory: int = _int_from_environment("DYNFUSE_POOL_MEMORY", 512, least=0) << 20
tiers: bool = os.environ.get("DYNFUSE_TIERS", "1").strip() != "0"
direct: bool = os.environ.get("DYNFUSE_DIRECT", "1").strip() != "0"
plan_cache_size: int = _int_from_environment("DYNFUSE_PLAN_CACHE", 1024)
kernel_cache_size: int = _int_from_environment("DYNFUSE_KERNEL_CACHE", 1024)
threads: int = _int_from_environment("DYNFUSE_THREADS", os.cpu_count() or 1)
# Record and launch in Python even where the C extensions are built (dynfuse.accelerate): to compare,
# or to debug.
pure_python: bool = os.environ.get("DYNFUSE_PURE_PYTHON", "0").strip() not in ("", "0")
# Profile the whole process line by line, the table printed at exit (``dynfuse.profiler``)
profile: bool = os.environ.get("DYNFUSE_PROFILE", "0").strip() not in ("", "0")
