"""Where arrays live: host memory, or a device's (a GPU's through CuPy, or the emulated CUDA device).

Every node knows the memory its value lives in (``Node.device``; None for a weak scalar, which goes
anywhere). All arrays of one operation live in one memory: an op that mixes two raises TypeError
where it is written, as CuPy does for a NumPy operand. Values move between memories only when asked:
``asarray(x, device=...)``, ``x.to(...)``, ``numpy.asarray(x)``, or a backend chosen to run
elsewhere (``execute``: a device's trace run by the reference executor runs on host copies).

This module is the ground floor: it knows the host's memory and what a memory is; the devices'
memories are known by name through the backends that run kernels on them (``registry``). Host
memory's large arrays come from ``host_pool``, which keeps freed ones for reuse.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from . import host_pool


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
        """A C-contiguous copy of ``array`` in this memory (what plans of a backend that copies host
        arrays, ``Target.copies_host_arrays``, lay a host leaf out as)."""
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

    # The pool's functions, called without a method's frame between: every kernel launch allocates
    empty = staticmethod(host_pool.empty)
    contiguous = staticmethod(host_pool.contiguous)

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
