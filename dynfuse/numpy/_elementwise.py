"""Elementwise functions: every ufunc of the op table, ``clip``, ``where``, ``astype``, a complex
array's parts (``real``, ``imag``: views), ``angle`` and the tests of complex values, and
``isclose``/``allclose`` as NumPy's formula (``allclose`` reads both arrays once, in one kernel).

Each ufunc is a function that records its op, carrying its NumPy ufunc's attributes and methods
(``np.add.reduce``, ``np.subtract.outer``, ``np.maximum.accumulate``...): those are the NumPy
ufunc's own, so on lazy arrays they reach ``LazyArray.__array_ufunc__``, which records what it can.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import direct, ops, record
from ..array import LazyArray
from ._creation import zeros

# What a NumPy user reads off a ufunc besides calling it.
_UFUNC_ATTRIBUTES = "reduce accumulate reduceat outer at nin nout nargs ntypes types identity signature"


def _ufunc_function(name: str, op: ops.Op) -> Any:
    ufunc = op.reference
    nin = ufunc.nin

    def function(*operands: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is None and not kwargs and len(operands) == nin:  # the common case, first
            scalars = direct.SCALARS
            if type(operands[0]) in scalars and (nin == 1 or type(operands[1]) in scalars):
                return ufunc(*operands)  # scalar code: NumPy's scalar math, as NumPy runs it
            if nin <= 2:
                recorded = record.record_common(op, *operands)
                if recorded is not None:
                    return recorded
        if len(operands) != ufunc.nin:
            raise TypeError(f"{name}() takes {ufunc.nin} positional arguments but {len(operands)} were given")
        if record.foreign((*operands, out)):  # another library's array: NumPy's ufunc hands it over
            return ufunc(*operands, **kwargs) if out is None else ufunc(*operands, out=out, **kwargs)
        return record.ufunc_call(op, operands, out, kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"Lazy ``numpy.{name}``: recorded now, fused when materialized."
    for attribute in _UFUNC_ATTRIBUTES.split():
        setattr(function, attribute, getattr(ufunc, attribute))
    if nin <= 2:  # what ``accelerate`` needs to run the common case in C
        function.fast_path = (op, "unary" if nin == 1 else "forward")
    return function


UFUNCS: dict[str, Any] = {
    name: _ufunc_function(name, op)
    for name, op in ops.ELEMENTWISE.items()
    if isinstance(op.reference, np.ufunc)
}
UFUNCS.update({alias: _ufunc_function(alias, ops.ELEMENTWISE[name]) for alias, name in ops.ALIASES.items()})
globals().update(UFUNCS)
__all__ = [
    "allclose",
    "angle",
    "astype",
    "clip",
    "imag",
    "iscomplex",
    "iscomplexobj",
    "isclose",
    "isreal",
    "isrealobj",
    "real",
    "where",
    *UFUNCS,
]


def clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """``numpy.clip``; a missing bound is the one-sided ``maximum``/``minimum`` NumPy computes."""
    a_min = kwargs.pop("min", a_min)
    a_max = kwargs.pop("max", a_max)
    if kwargs:
        why = f"{', '.join(f'{key}=' for key in kwargs)} not recorded"
        arguments = {**kwargs, "out": out} if out is not None else kwargs
        return record.fallback("clip", np.clip, (a, a_min, a_max), arguments, why)
    dtype = getattr(a, "dtype", None)
    if dtype is not None and np.dtype(dtype).kind in "iu":
        # As NumPy: a Python int bound beyond an integer array's range bounds nothing (NEP 50 would
        # refuse it as an operand), while one beyond the other end still raises.
        limits = np.iinfo(dtype)
        a_min = None if type(a_min) is int and a_min <= limits.min else a_min
        a_max = None if type(a_max) is int and a_max >= limits.max else a_max
    if a_min is None and a_max is None:
        return record.elementwise(ops.ELEMENTWISE["positive"], (a,), out=out)
    if a_min is None:
        return record.elementwise(ops.ELEMENTWISE["minimum"], (a, a_max), out=out)
    if a_max is None:
        return record.elementwise(ops.ELEMENTWISE["maximum"], (a, a_min), out=out)
    return record.elementwise(ops.ELEMENTWISE["clip"], (a, a_min, a_max), out=out)


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None and y is None:  # the positions of the nonzero values, computed here
        return record.selected_now(np.nonzero, condition)
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y should be given")
    return record.elementwise(ops.ELEMENTWISE["where"], (condition, x, y))


where.fast_path = (ops.ELEMENTWISE["where"], "forward")  # three operands, recorded in C


def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    result = record.astype(x, dtype, copy=copy)
    return result if device is None else result.to(device)


def real(val: Any) -> Any:
    """``numpy.real``: of a complex array a view of the real parts (``LazyArray.real``); a number's
    as NumPy gives it."""
    if type(val) in direct.SCALARS:
        return np.real(val)
    return record.complex_part(val, "real")


def imag(val: Any) -> Any:
    """``numpy.imag``: of a complex array a view of the imaginary parts; of a real one, zeros."""
    if type(val) in direct.SCALARS:
        return np.imag(val)
    return record.complex_part(val, "imag")


def angle(z: Any, deg: bool = False) -> Any:
    """``numpy.angle``, as NumPy computes it: ``arctan2`` of the parts (of a real array, of 0 and the
    values), in degrees scaled after, fused with whatever reads it."""
    if type(z) in direct.SCALARS:
        return np.angle(z, deg)
    z = record.lazy(z)
    parts = (z.imag, z.real) if z.dtype.kind == "c" else (0, z)
    turned = UFUNCS["arctan2"](*parts)
    return turned * (180 / np.pi) if deg else turned


def iscomplexobj(x: Any) -> bool:
    """``numpy.iscomplexobj``: a lazy array's dtype says it, without computing the array."""
    return x.dtype.kind == "c" if isinstance(x, LazyArray) else np.iscomplexobj(x)


def isrealobj(x: Any) -> bool:
    return not iscomplexobj(x)


def isreal(x: Any) -> Any:
    """``numpy.isreal``, as NumPy computes it: the imaginary parts equal to zero."""
    return UFUNCS["equal"](imag(x), 0)


def iscomplex(x: Any) -> Any:
    """``numpy.iscomplex``, as NumPy computes it: a complex array's imaginary parts not zero; of a
    real array, all False."""
    x = record.lazy(x)
    if x.dtype.kind == "c":
        return UFUNCS["not_equal"](x.imag, 0)
    return zeros(x.shape, bool)[()]


def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Any:
    """``numpy.isclose``, NumPy's formula elementwise: ``|a - b| <= atol + rtol * |b|`` where ``b``
    is finite, or ``a == b`` (NaNs too with ``equal_nan``), ``b`` made inexact first."""
    x, y, atol, rtol = (
        value if isinstance(value, (int, float, complex)) else record.lazy(value)
        for value in (a, b, atol, rtol)
    )
    if not all(np.isfinite(np.asarray(tolerance)).all() for tolerance in (atol, rtol)):
        arguments = {"rtol": rtol, "atol": atol, "equal_nan": equal_nan}
        return record.fallback("isclose", np.isclose, (a, b), arguments, "tolerances that are not finite")
    if isinstance(y, LazyArray):
        y = record.astype(y, np.result_type(y.dtype, 1.0), copy=False)
    elif isinstance(y, int):
        y = float(y)
    with np.errstate(invalid="ignore"):
        near = UFUNCS["less_equal"](UFUNCS["absolute"](x - y), atol + rtol * UFUNCS["absolute"](y))
        result = near & UFUNCS["isfinite"](y) | UFUNCS["equal"](x, y)
        if equal_nan:
            result = result | UFUNCS["isnan"](x) & UFUNCS["isnan"](y)
    return result[()]


def allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> bool:
    """``numpy.allclose``: whether ``isclose`` holds everywhere, the test and its ``all`` one kernel."""
    close = isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return bool(close.all())
