"""Where arrays live: host memory, or a device's (a GPU's through CuPy, or the emulated CUDA device).

Every node knows the memory its value lives in (``Node.device``; None for a weak scalar, which goes
anywhere). All arrays of one operation live in one memory: an op that mixes two raises TypeError
where it is written, as CuPy does for a NumPy operand. Values move between memories only when asked:
``asarray(x, device=...)``, ``x.to(...)``, ``numpy.asarray(x)``, or a backend chosen to run
elsewhere (``execute``: a device's trace run by the reference executor runs on host copies).

A memory is named by what ``LazyArray.device`` returns (``'cpu'``, ``'cuda'``, ``'cuda-emulator'``)
and known through the backend that runs kernels on it (``Backend.memory``).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Memory(Protocol):
    """What dynfuse needs of a memory: its arrays made, moved and viewed."""

    name: str

    def unavailable_reason(self) -> str | None:
        """Why arrays cannot live here, or None."""
        ...

    def owns(self, value: Any) -> bool:
        """Whether ``value`` is an array in this memory."""
        ...

    def from_host(self, array: np.ndarray) -> Any:
        """A copy of ``array`` in this memory."""
        ...

    def to_host(self, array: Any) -> np.ndarray:
        """A NumPy copy of this memory's ``array``."""
        ...

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """An uninitialized C-contiguous array."""
        ...

    def contiguous(self, array: Any) -> Any:
        """``array`` itself if C-contiguous, else a C-contiguous copy."""
        ...

    def as_strided(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
        """A read-only view of ``array``'s memory from its first element, with these strides."""
        ...


class Host:
    """Host memory: NumPy's arrays."""

    name = "cpu"

    def unavailable_reason(self) -> str | None:
        return None

    def owns(self, value: Any) -> bool:
        return isinstance(value, np.ndarray)

    def from_host(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, copy=True)

    def to_host(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, copy=True)

    # NumPy's own functions, called without a Python frame between: every kernel launch allocates
    empty = staticmethod(np.empty)
    contiguous = staticmethod(np.ascontiguousarray)

    def as_strided(self, array: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
        return np.lib.stride_tricks.as_strided(array, shape, strides, writeable=False)

    def __repr__(self) -> str:
        return "<memory cpu>"


HOST = Host()


def move(array: Any, source: Memory, target: Memory) -> Any:
    """``array`` of ``source`` as an array of ``target``: itself where they are one memory."""
    if source is target:
        return array
    if source is HOST:
        return target.from_host(array)
    host = source.to_host(array)
    return host if target is HOST else target.from_host(host)


def memories() -> dict[str, Memory]:
    """Every memory by name: the host's, and each device's that a backend runs kernels on."""
    from . import config  # config imports the backends, which import this module

    found: dict[str, Memory] = {HOST.name: HOST}
    for backend in config.BACKENDS.values():
        if backend is not None:  # the reference executor runs where its arrays are
            found.setdefault(backend.memory.name, backend.memory)
    return found


def named(device: Any, operation: str) -> Memory:
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
