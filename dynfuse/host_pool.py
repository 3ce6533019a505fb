"""Large host arrays from freed blocks kept for reuse, as CuPy's and PyTorch's caching allocators
keep device memory.

A fresh large array is mapped by the system and faulted in page by page on first write, each page
zeroed by the kernel: a streaming kernel writing a new output pays two thirds again on its own
pass. A block handed out again is already mapped, so kernel outputs, plan intermediates and
contiguous copies of ``MIN_BYTES`` or more come from here (``empty``, which host memory's
``empty`` is), and the reference executor's values from ``INTERPRETED_MIN_BYTES``. Smaller arrays
are NumPy's own.

Each array handed out is a NumPy array whose base is a ``_Lease`` of one block; a view of it keeps
the array, or the lease, alive. When the last of them dies the lease's ``__del__`` returns the
block to the free lists, by size class (eight to a doubling, so a loop over the same shapes finds
its blocks every time). The free bytes kept are bounded by ``config.pool_memory`` (0: no pool; the
least recently returned go first); blocks unused for ``IDLE_SECONDS`` are released the next time
the pool is used, all of them when an allocation raises MemoryError (which is then tried once more),
and on demand (``free``, public as ``dynfuse.free_pool``). A forked child drops its free lists: the
parent's threads may have been changing them, and every block in use stays with its arrays.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from . import config, stats

MIN_BYTES = 1 << 20  # smaller kernel outputs are NumPy's: C launches a cached kernel's with its own
# From glibc's mmap threshold on, malloc maps a fresh array and the system faults it in page by page
# again and again as the reference executor's values come and go (a 161² cavity step of 30 ops on
# 200 KB arrays: 3,900 faults a call and 21-23 ms, from the pool none and 13 ms; NumPy's own 7 ms)
INTERPRETED_MIN_BYTES = 1 << 17
IDLE_SECONDS = 10.0  # a free block not reused for this long goes back to the system
ALIGNMENT = 64  # every array handed out starts on a cache line
_PAGE = 4096


class _Block:
    """Memory from the system: ``size`` bytes at ``address``, kept alive by ``raw``."""

    __slots__ = ("address", "raw", "returned_at", "size")

    def __init__(self, size: int) -> None:
        self.raw = _system_memory(size + ALIGNMENT)
        self.address = self.raw.ctypes.data + (-self.raw.ctypes.data % ALIGNMENT)
        self.size = size
        self.returned_at = 0.0


def _system_memory(nbytes: int) -> np.ndarray:
    """Fresh memory from the system (NumPy's allocator, which asks for huge pages where it can)."""
    return np.empty(nbytes, np.uint8)


def size_class(nbytes: int) -> int:
    """The block size that holds ``nbytes``: whole pages, and eight classes to a doubling (a
    block at most an eighth larger than asked)."""
    step = max(_PAGE, 1 << max(nbytes.bit_length() - 4, 0))
    return -(-nbytes // step) * step


# The C launcher's maker of an array on a lease (``accelerate`` sets it): NumPy's reading of the
# lease's ``__array_interface__`` costs several microseconds a pooled output
leased_array: Callable[[Any, int, tuple[int, ...], np.dtype], np.ndarray] | None = None

# The free blocks by size class, most recently returned last; the same blocks oldest first, to
# evict by age; their bytes. All under _lock.
_free: dict[int, list[_Block]] = {}
_by_age: dict[_Block, None] = {}
_held = 0
_lock = threading.Lock()
# Blocks returned by a thread that did not get the lock (another thread holds it, or the returning
# thread itself, when a lease dies inside a locked section): whoever holds the lock takes them in
# as it lets go (_settle). A lease can die anywhere, so returning never waits for the lock.
_returned: deque[_Block] = deque()


def empty(shape: tuple[int, ...], dtype: np.dtype, least: int = MIN_BYTES) -> np.ndarray:
    """An uninitialized C-contiguous array: a pooled block for one of ``least`` bytes or more."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < least or nbytes > config.pool_memory or dtype.hasobject or not dtype.isbuiltin:
        try:
            return np.empty(shape, dtype)
        except MemoryError:
            free()
            return np.empty(shape, dtype)
    size = size_class(nbytes)
    block = _take(size)
    if block is None:
        try:
            block = _Block(size)
        except MemoryError:
            free()
            block = _Block(size)
    lease = _Lease(block, tuple(shape), dtype)
    if leased_array is None:
        return np.asarray(lease)
    return leased_array(lease, block.address, lease.shape, dtype)


def contiguous(array: np.ndarray) -> np.ndarray:
    """``array`` itself if C-contiguous, else a C-contiguous copy (from the pool if large)."""
    if array.flags.c_contiguous:
        return array
    copy = empty(array.shape, array.dtype)
    np.copyto(copy, array)
    return copy


def owns_memory(array: Any) -> bool:
    """Whether ``array``'s memory is its own, as an array NumPy allocated: no base, or a lease no
    other array holds. (Views of ``array`` itself hold ``array``: its reference count tells.)"""
    base = array.base
    # The lease's references: the array's, this function's name, and getrefcount's argument
    return base is None or (type(base) is _Lease and sys.getrefcount(base) <= 3)


def free() -> int:
    """Release every free block to the system; the bytes released."""
    with _lock:
        _take_in_returned()
        released = _held
        _evict(lambda: True)
    _settle()
    return released


def held_bytes() -> int:
    """The bytes of the free blocks kept."""
    return _held


class _Lease:
    """The base of the arrays handed out on one block: views keep the lease alive, and its death
    frees the block for reuse. The array is made on it in C (``leased_array``), or by NumPy from
    its ``__array_interface__``."""

    __slots__ = ("_block", "dtype", "shape")

    def __init__(self, block: _Block, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self._block = block
        self.shape = shape
        self.dtype = dtype

    @property
    def __array_interface__(self) -> dict[str, Any]:
        data = (self._block.address, False)
        return {"shape": self.shape, "typestr": self.dtype.str, "data": data, "version": 3}

    def __del__(self) -> None:
        _give_back(self._block)


def _take(size: int) -> _Block | None:
    """A free block of ``size`` bytes, or None: counted as a hit or a miss."""
    global _held
    with _lock:
        _evict_idle()
        blocks = _free.get(size)
        block = blocks.pop() if blocks else None
        if block is not None:
            del _by_age[block]
            _held -= size
    _settle()
    stats.count("pool_hits" if block is not None else "pool_misses")
    return block


def _give_back(block: _Block) -> None:
    block.returned_at = time.monotonic()
    _returned.append(block)
    _settle()


def _settle() -> None:
    """Take in the returned blocks, unless another holds the lock: it will, as it lets go."""
    while _returned and _lock.acquire(blocking=False):
        try:
            _take_in_returned()
            _evict_idle()
        finally:
            _lock.release()


def _take_in_returned() -> None:
    """Put the returned blocks on the free lists, within the bound (under _lock)."""
    while _returned:
        _keep(_returned.popleft())


def _keep(block: _Block) -> None:
    global _held
    limit = config.pool_memory
    if block.size > limit:
        return  # released: dropped here
    _free.setdefault(block.size, []).append(block)
    _by_age[block] = None
    _held += block.size
    while _held > limit:
        _release(next(iter(_by_age)))


def _evict_idle() -> None:
    cutoff = time.monotonic() - IDLE_SECONDS
    if _by_age and next(iter(_by_age)).returned_at < cutoff:  # seldom: no closure made otherwise
        _evict(lambda: next(iter(_by_age)).returned_at < cutoff)


def _evict(oldest_goes: Callable[[], bool]) -> None:
    """Release the oldest free blocks while there are some and ``oldest_goes()`` (under _lock)."""
    while _by_age and oldest_goes():
        _release(next(iter(_by_age)))


def _release(block: _Block) -> None:
    global _held
    del _by_age[block]
    _free[block.size].remove(block)
    _held -= block.size


def _forget_parent_blocks() -> None:
    """In a forked child: the free lists as the parent's threads may have left them half changed,
    and a lock one of them may hold; the child starts with none."""
    global _held
    _lock._at_fork_reinit()
    _free.clear()
    _by_age.clear()
    _returned.clear()
    _held = 0


os.register_at_fork(after_in_child=_forget_parent_blocks)
stats.GAUGES["pool_bytes"] = held_bytes
