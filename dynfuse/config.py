"""Configuration from the environment, read once at import; ``set_backend`` changes it at run time.

DYNFUSE_BACKEND      which executor materializes traces of host arrays: ``cpu`` (default), the
                     scheduler's plan, each kernel compiled by LLVM; ``numpy``, the reference
                     executor, op by op; ``groups``, the scheduler's plan, each kernel run as NumPy
                     calls; ``cuda-emulator``, the CUDA backend's kernels compiled by the host's C++
                     compiler and run on an emulated device, on device copies (slow: to check them
                     without a GPU); ``cuda``, the CUDA backend's kernels on a GPU through CuPy, on
                     device copies. Traces of a device's arrays run on that device's backend, or,
                     with ``numpy``, by the reference executor on host copies (``execute``)
DYNFUSE_CACHE_DIR    where compiled kernels are kept across processes (default ``~/.cache/dynfuse``)
DYNFUSE_DISK_CACHE   1 (default): compiled kernels are kept in DYNFUSE_CACHE_DIR; 0: never read or written
DYNFUSE_MAX_DEPTH    a trace deeper than this is materialized as it is recorded (default 256), so a
                     long loop of ``x = x * c`` keeps a bounded graph
DYNFUSE_PENDING_MEMORY
                     MiB that traces not yet materialized may keep alive on their own (arrays the
                     program dropped once it recorded over them); past it they are materialized
                     (default 64)
DYNFUSE_TIERS        1 (default): tiny work is interpreted, and small kernels until interpreting them has
                     cost a compile; 0: every kernel compiles at once (to test a backend on small arrays)
DYNFUSE_PLAN_CACHE   plans kept, one per trace signature (default 1024)
DYNFUSE_THREADS      threads a large kernel is split across (default: every core); 1 also compiles every
                     kernel at once, never on a background thread
DYNFUSE_KERNEL_CACHE compiled kernels kept in memory, one per kernel signature (default 1024)
DYNFUSE_PURE_PYTHON  1: record and launch kernels in Python even where the C extensions are built
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from .backends import cpu, cuda, groups
from .kernel import Backend

# Name -> the backend that compiles planned kernels; None is the reference executor, which runs
# the trace op by op with NumPy and plans nothing.
BACKENDS: dict[str, Backend | None] = {
    "numpy": None,
    "groups": groups.BACKEND,
    "cpu": cpu.BACKEND,
    "cuda": cuda.BACKEND,
    "cuda-emulator": cuda.EMULATOR,
}
DEFAULT_BACKEND = "cpu"


def unavailable_reason(name: str) -> str | None:
    """Why backend ``name`` cannot materialize arrays here, or None if it can."""
    if name not in BACKENDS:
        return f"unknown backend {name!r}; available: {', '.join(sorted(BACKENDS))}"
    backend = BACKENDS[name]
    reason = getattr(backend, "unavailable_reason", lambda: None)()
    if reason is not None:
        return (
            f"the {name!r} backend cannot run here: {reason} (its kernels can be read with "
            f"dynfuse.kernel_sources(..., backend={name!r}))"
        )
    return None


def _backend_from_environment() -> str:
    name = os.environ.get("DYNFUSE_BACKEND", DEFAULT_BACKEND).strip().lower() or DEFAULT_BACKEND
    reason = unavailable_reason(name)
    if reason is not None:
        warnings.warn(
            f"DYNFUSE_BACKEND={name!r}: {reason}; using {DEFAULT_BACKEND!r}",
            RuntimeWarning,
            stacklevel=2,
        )
        return DEFAULT_BACKEND
    return name


def _positive_int_from_environment(variable: str, default: int) -> int:
    text = os.environ.get(variable, "")
    try:
        value = int(text) if text else default
    except ValueError:
        value = 0
    if value < 1:
        warnings.warn(
            f"{variable}={text!r} is not a positive integer; using {default}", RuntimeWarning, stacklevel=2
        )
        return default
    return value


backend: str = _backend_from_environment()
cache_dir: Path = Path(os.environ.get("DYNFUSE_CACHE_DIR") or Path.home() / ".cache" / "dynfuse").expanduser()
disk_cache: bool = os.environ.get("DYNFUSE_DISK_CACHE", "1").strip() != "0"
max_depth: int = _positive_int_from_environment("DYNFUSE_MAX_DEPTH", 256)
pending_memory: int = _positive_int_from_environment("DYNFUSE_PENDING_MEMORY", 64) << 20
tiers: bool = os.environ.get("DYNFUSE_TIERS", "1").strip() != "0"
plan_cache_size: int = _positive_int_from_environment("DYNFUSE_PLAN_CACHE", 1024)
kernel_cache_size: int = _positive_int_from_environment("DYNFUSE_KERNEL_CACHE", 1024)
threads: int = _positive_int_from_environment("DYNFUSE_THREADS", os.cpu_count() or 1)
# Record and launch in Python even where the C extensions are built (dynfuse.accelerate): to compare,
# or to debug.
pure_python: bool = os.environ.get("DYNFUSE_PURE_PYTHON", "0").strip() not in ("", "0")


def set_backend(name: str) -> None:
    """Choose the executor for later materializations: one of ``BACKENDS``."""
    global backend
    reason = unavailable_reason(name)
    if reason is not None:
        raise ValueError(f"set_backend: {reason}")
    backend = name
