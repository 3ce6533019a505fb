"""The backends and memories by name: which backend materializes arrays, and why one cannot here.

DYNFUSE_BACKEND (read at import; ``set_backend`` changes it at run time) names the executor that
materializes traces of host arrays: ``cpu`` (default), the scheduler's plan, each kernel compiled by
LLVM; ``numpy``, the reference executor, op by op; ``groups``, the scheduler's plan, each kernel run
as NumPy calls; ``cuda-emulator``, the CUDA backend's kernels compiled by the host's C++ compiler and
run on an emulated device, on device copies (slow: to check them without a GPU); ``cuda``, the CUDA
backend's kernels on a GPU through CuPy, on device copies. Traces of a device's arrays run on that
device's backend, or, with ``numpy``, by the reference executor on host copies (``execute``).

A memory is named by what ``LazyArray.device`` returns (``'cpu'``, ``'cuda'``, ``'cuda-emulator'``)
and known through the backend that runs kernels on it (``Backend.memory``).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from .backends import cpu, cuda, groups
from .devices import HOST, Memory
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


# The name of the backend that materializes host arrays: one of ``BACKENDS``.
backend: str = _backend_from_environment()


def set_backend(name: str) -> None:
    """Choose the executor for later materializations: one of ``BACKENDS``."""
    global backend
    reason = unavailable_reason(name)
    if reason is not None:
        raise ValueError(f"set_backend: {reason}")
    backend = name


def memories() -> dict[str, Memory]:
    """Every memory by name: the host's, and each device's that a backend runs kernels on."""
    found: dict[str, Memory] = {HOST.name: HOST}
    for executor in BACKENDS.values():
        if executor is not None:  # the reference executor runs where its arrays are
            found.setdefault(executor.memory.name, executor.memory)
    return found


def memory_named(device: Any, operation: str) -> Memory:
    """The memory ``device`` names (a name, or a memory), ready for arrays; ValueError naming
    ``operation`` otherwise, as the array API has ``asarray`` refuse a device."""
    if hasattr(device, "owns"):  # a memory itself
        device = device.name
    found = memories()
    memory = found.get(device) if isinstance(device, str) else None
    if memory is None:
        raise ValueError(f"{operation}: unknown device {device!r}; devices: {', '.join(sorted(found))}")
    reason = memory.unavailable_reason()
    if reason is not None:
        raise ValueError(f"{operation}: device {device!r} is not available here: {reason}")
    return memory


def owner(value: Any) -> Memory | None:
    """The device memory whose array ``value`` is (a CuPy array, an emulated device's); None for
    anything else, host arrays included."""
    if isinstance(value, np.ndarray):
        return None
    for memory in memories().values():
        if memory is not HOST and memory.owns(value):
            return memory
    return None
