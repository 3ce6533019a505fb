"""The NumPy namespace, lazily: ``import dynfuse.numpy as np`` and write NumPy.

Every function here records its operation instead of running it. Each one also serves
``__array_function__``, so the same call on a LazyArray through real NumPy (``numpy.sum(x)``)
stays lazy. What this namespace does not record falls back to NumPy (see ``record.fallback``).
"""

from __future__ import annotations

from typing import Any

import numpy as _np

from . import ops as _ops
from . import record as _record
from . import views as _views
from .array import LazyArray
from .array import array as array
from .array import asarray as asarray


def _ufunc_function(name: str, op: _ops.Op) -> Any:
    ufunc = op.reference

    def function(*operands: Any, out: Any = None, **kwargs: Any) -> Any:
        if len(operands) != ufunc.nin:
            raise TypeError(f"{name}() takes {ufunc.nin} positional arguments but {len(operands)} were given")
        return _record.ufunc_call(op, operands, out, kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"Lazy ``numpy.{name}``: recorded now, fused when materialized."
    return function


for _name, _op in _ops.ELEMENTWISE.items():
    if isinstance(_op.reference, _np.ufunc):
        globals()[_name] = _ufunc_function(_name, _op)
for _alias, _name in _ops.ALIASES.items():
    globals()[_alias] = _ufunc_function(_alias, _ops.ELEMENTWISE[_name])


def clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """``numpy.clip``; a missing bound is the one-sided ``maximum``/``minimum`` NumPy computes."""
    a_min = kwargs.pop("min", a_min)
    a_max = kwargs.pop("max", a_max)
    if kwargs or (a_min is None and a_max is None):
        return _record.fallback(
            "clip", _np.clip, (a, a_min, a_max), {**kwargs, "out": out} if out is not None else kwargs
        )
    if a_min is None:
        return _record.elementwise(_ops.ELEMENTWISE["minimum"], (a, a_max), out=out)
    if a_max is None:
        return _record.elementwise(_ops.ELEMENTWISE["maximum"], (a, a_min), out=out)
    return _record.elementwise(_ops.ELEMENTWISE["clip"], (a, a_min, a_max), out=out)


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None and y is None:
        return _record.fallback("where", _np.where, (condition,), {})
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y should be given")
    return _record.elementwise(_ops.ELEMENTWISE["where"], (condition, x, y))


def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    return _record.astype(x, dtype, copy=copy)


def matmul(x1: Any, x2: Any, /, out: Any = None) -> Any:
    return _record.matmul(x1, x2, out=out)


sum = LazyArray.sum
prod = LazyArray.prod
mean = LazyArray.mean
var = LazyArray.var
std = LazyArray.std
max = amax = LazyArray.max
min = amin = LazyArray.min
any = LazyArray.any
all = LazyArray.all
argmax = LazyArray.argmax
argmin = LazyArray.argmin


def reshape(a: Any, /, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None) -> Any:
    shape = newshape if shape is None else shape
    if order != "C" or copy is not None:
        return _record.fallback("reshape", _np.reshape, (a, shape), {"order": order, "copy": copy})
    return _record.reshape(a, shape)


def transpose(a: Any, axes: Any = None) -> Any:
    return _record.transpose(a, axes)


def permute_dims(a: Any, /, axes: Any = None) -> Any:
    return _record.transpose(a, axes)


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    a = _record.lazy(a)
    return _record.permute(a, _views.swapaxes_axes(axis1, axis2, a.ndim))


def moveaxis(a: Any, source: Any, destination: Any) -> Any:
    a = _record.lazy(a)
    return _record.permute(a, _views.moveaxis_axes(source, destination, a.ndim))


def broadcast_to(array: Any, shape: Any, subok: bool = False) -> Any:
    return _record.broadcast_to(array, shape)


def expand_dims(a: Any, axis: Any) -> Any:
    a = _record.lazy(a)
    return _record.reshape(a, _np.expand_dims(_views.shape_stand_in(a.shape), axis).shape)


def squeeze(a: Any, axis: Any = None) -> Any:
    return _record.lazy(a).squeeze(axis)


def ravel(a: Any, order: str = "C") -> Any:
    if order != "C":
        return _record.fallback("ravel", _np.ravel, (a,), {"order": order})
    return _record.reshape(a, -1)


def flip(m: Any, axis: Any = None) -> Any:
    m = _record.lazy(m)
    axes = _views.reduction_axes("flip", axis, m.ndim)
    return m[tuple(slice(None, None, -1) if axis in axes else slice(None) for axis in range(m.ndim))]


def copy(a: Any, order: str = "K", subok: bool = False) -> Any:
    return _record.lazy(a).copy()


def shape(a: Any) -> tuple[int, ...]:
    return a.shape if isinstance(a, LazyArray) else _np.shape(a)


def ndim(a: Any) -> int:
    return a.ndim if isinstance(a, LazyArray) else _np.ndim(a)


def size(a: Any, axis: Any = None) -> int:
    if isinstance(a, LazyArray):
        return a.size if axis is None else a.shape[axis]
    return _np.size(a, axis)


# NumPy functions (not ufuncs: those reach ``__array_ufunc__``) that these functions record.
for _name, _function in list(globals().items()):
    _numpy_function = getattr(_np, _name, None)
    if (
        callable(_function)
        and not _name.startswith("_")
        and _numpy_function is not None
        and not isinstance(_numpy_function, _np.ufunc)
        and hasattr(_numpy_function, "_implementation")
    ):
        _record.HANDLED_FUNCTIONS[_numpy_function] = _function

newaxis = None
__all__ = sorted(name for name in globals() if not name.startswith("_") and name != "annotations")
del _name, _op, _alias, _function, _numpy_function
