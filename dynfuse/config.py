"""Configuration from the environment, read once at import; ``set_backend`` changes it at run time.

DYNFUSE_BACKEND      which executor materializes traces (default: ``numpy``, the reference executor)
DYNFUSE_CACHE_DIR    where compiled kernels are kept across processes (default ``~/.cache/dynfuse``)
DYNFUSE_MAX_DEPTH    a trace deeper than this is materialized as it is recorded (default 256), so a
                     long loop of ``x = x * c`` keeps a bounded graph
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path

from . import interpret

# Name -> the executor that runs an ordered trace: ``run(order, outputs) -> {node: ndarray}``.
BACKENDS: dict[str, Callable] = {"numpy": interpret.run}
DEFAULT_BACKEND = "numpy"


def _backend_from_environment() -> str:
    name = os.environ.get("DYNFUSE_BACKEND", DEFAULT_BACKEND).strip().lower() or DEFAULT_BACKEND
    if name not in BACKENDS:
        warnings.warn(
            f"DYNFUSE_BACKEND={name!r} is not one of {sorted(BACKENDS)}; using {DEFAULT_BACKEND!r}",
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
max_depth: int = _positive_int_from_environment("DYNFUSE_MAX_DEPTH", 256)


def set_backend(name: str) -> None:
    """Choose the executor for later materializations: one of ``BACKENDS``."""
    global backend
    if name not in BACKENDS:
        raise ValueError(f"set_backend: unknown backend {name!r}; available: {', '.join(sorted(BACKENDS))}")
    backend = name
