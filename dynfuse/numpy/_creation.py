"""Creation: NumPy makes the array at once, and it becomes a leaf of the trace.

There is no work to fuse in making an array, and what NumPy returns is new memory that nothing
else sees, so writes into it (``x += 1``) may stay lazy. Lazy arguments (``linspace(0, x.max())``)
are computed first; the prototype of a ``*_like`` function is not, only its shape and dtype count.
``device=`` (the array API's) puts the array on that device; a ``*_like`` array is on its
prototype's by default.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import array as array_module
from .. import direct, pressure, record
from ..array import LazyArray
from ..devices import HOST

__all__ = [
    "arange",
    "array",
    "asanyarray",
    "asarray",
    "ascontiguousarray",
    "empty",
    "empty_like",
    "full",
    "full_like",
    "geomspace",
    "linspace",
    "logspace",
    "ones",
    "ones_like",
    "zeros",
    "zeros_like",
]


def _creating(function: Callable) -> Callable:
    @functools.wraps(function)
    def create(*args: Any, device: Any = None, **kwargs: Any) -> Any:
        kwargs.pop("like", None)  # what ``like=`` asks for is an array of its kind: a lazy one here
        if device is None and _plain(args, kwargs):
            return _wrapped(function(*args, **kwargs))  # sizes, values, a dtype (small: direct.numpy_call)
        return _placed(record.call_numpy(function, args, kwargs, fresh=True), device)

    return create


def _plain(*values: Any) -> bool:
    """Whether no lazy array is among ``values``, in lists, tuples and dicts too."""
    return not any(values) or not any(map(record.is_lazy, record.flatten(values)))


def _wrapped(made: Any) -> Any:
    """NumPy's new array as a leaf: a large one counted toward the pending-memory check (``pressure``),
    a small one as direct execution makes it."""
    if not isinstance(made, np.ndarray):
        return made
    if made.size < direct.direct_elements():
        return direct.fresh(made)
    return LazyArray(pressure.new_leaf(made, exposed=False))


def _placed(array: LazyArray, device: Any) -> LazyArray:
    """``array``, made by NumPy on the host, on ``device`` (None: where it is)."""
    return array if device is None else array_module.asarray(array, device=device)


# The memory of every stand-in: each of its elements is these bytes (zero strides)
_NO_MEMORY = bytes(64)


def _stand_in(prototype: Any) -> Any:
    """What a ``*_like`` function reads of a lazy prototype: its shape and dtype, in no memory."""
    if not record.is_lazy(prototype):
        return prototype
    shape, dtype = prototype.shape, prototype.dtype
    if dtype.itemsize > len(_NO_MEMORY):
        return np.broadcast_to(np.zeros((), dtype), shape)
    return np.ndarray(shape, dtype, buffer=_NO_MEMORY, strides=(0,) * len(shape))


def _creating_like(function: Callable) -> Callable:
    @functools.wraps(function)
    def create_like(*args: Any, device: Any = None, **kwargs: Any) -> Any:
        name = _prototype_name(function) if not args and kwargs else None
        prototype = args[0] if args else kwargs.get(name) if name else None
        if device is None and record.is_lazy(prototype) and prototype._node.memory is not HOST:
            device = prototype.device
        if args:
            args = (_stand_in(args[0]), *args[1:])
        elif name in kwargs:
            kwargs[name] = _stand_in(kwargs[name])
        if device is None and _plain(args[1:], kwargs):  # the prototype is a stand-in now
            return _wrapped(function(*args, **kwargs))  # a host prototype's shape and dtype alone
        return _placed(record.call_numpy(function, args, kwargs, fresh=True), device)

    return create_like


@functools.cache
def _prototype_name(function: Callable) -> str:
    """The name of the prototype parameter (``a``, ``prototype``): read from the signature when a
    call passes it by name, not at import, where ``inspect.signature`` took milliseconds each."""
    return next(iter(inspect.signature(function).parameters))


arange = _creating(np.arange)
empty = _creating(np.empty)
full = _creating(np.full)
geomspace = _creating(np.geomspace)
linspace = _creating(np.linspace)
logspace = _creating(np.logspace)
ones = _creating(np.ones)
zeros = _creating(np.zeros)
empty_like = _creating_like(np.empty_like)
full_like = _creating_like(np.full_like)
ones_like = _creating_like(np.ones_like)
zeros_like = _creating_like(np.zeros_like)


def asarray(
    a: Any,
    dtype: Any = None,
    order: str | None = None,
    *,
    device: Any = None,
    copy: bool | None = None,
    like: Any = None,
) -> LazyArray:
    """``numpy.asarray``: an ndarray is wrapped without a copy (see ``dynfuse.asarray``)."""
    return array_module.asarray(a, dtype=dtype, copy=copy, device=device)


asanyarray = asarray


def array(
    object: Any,
    dtype: Any = None,
    *,
    copy: bool | None = True,
    order: str = "K",
    subok: bool = False,
    ndmin: int = 0,
    like: Any = None,
) -> LazyArray:
    """``numpy.array``: a copy unless ``copy`` is False or None, with at least ``ndmin`` axes."""
    result = array_module.asarray(object, dtype=dtype, copy=copy if copy else None)
    if result.ndim >= ndmin:
        return result
    return record.reshape(result, (1,) * (ndmin - result.ndim) + result.shape)


def ascontiguousarray(a: Any, dtype: Any = None, *, like: Any = None) -> LazyArray:
    """``numpy.ascontiguousarray``: at least one axis (how a lazy array is laid out is its own affair)."""
    result = array_module.asarray(a, dtype=dtype)
    return result if result.ndim else record.reshape(result, (1,))
