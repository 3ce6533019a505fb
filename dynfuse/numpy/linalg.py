"""``numpy.linalg`` for lazy arrays: ``norm`` is recorded, as the sums, maxima and ``dot`` NumPy
computes it with; the rest is NumPy's, run on materialized inputs and counted as fallbacks.
"""

from __future__ import annotations

import sys as _sys
from typing import Any

import numpy as _np
from numpy.lib.array_utils import normalize_axis_index as _normalize_axis_index

from .. import accelerate as _accelerate
from .. import ops as _ops
from .. import record as _record
from ._namespace import fall_through as _fall_through
from ._namespace import register_array_functions as _register_array_functions


def _apply(name: str, *operands: Any, out: Any = None) -> Any:
    return _record.elementwise(_ops.ELEMENTWISE[name], operands, out=out)


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """NumPy's norms, step by step as NumPy takes them. The default, Frobenius and 2-norms of a whole
    array are ``sqrt(dot(x, x))`` of the flattened array; the other vector and matrix norms reduce
    ``abs(x)``. Norms by singular values ('nuc', 2 and -2 of matrices), of complex or empty arrays
    fall back to NumPy."""
    arguments = {"ord": ord, "axis": axis, "keepdims": keepdims}
    x = _record.lazy(x)
    if x.dtype.kind == "c" or x.size == 0:
        return _record.fallback("linalg.norm", _np.linalg.norm, (x,), arguments, "a complex or empty array")
    if x.dtype.kind != "f":
        x = x.astype(float)
    if axis is None:
        if ord is None or (ord in ("f", "fro") and x.ndim == 2) or (ord == 2 and x.ndim == 1):
            flat = _record.reshape(x, -1)
            result = _apply("sqrt", _record.barrier(_ops.BARRIERS["dot"], (flat, flat)))
            return _record.reshape(result, (1,) * x.ndim) if keepdims else result
        axis = tuple(range(x.ndim))
    elif not isinstance(axis, tuple):
        try:
            axis = (int(axis),)
        except Exception as error:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from error
    if len(axis) == 1:
        return _vector_norm(x, ord, axis, keepdims)
    if len(axis) != 2:
        raise ValueError("Improper number of dimensions to norm.")
    rows, columns = (_normalize_axis_index(position, x.ndim) for position in axis)
    if rows == columns:
        raise ValueError("Duplicate axes given.")
    if ord in (2, -2, "nuc"):
        return _record.fallback("linalg.norm", _np.linalg.norm, (x,), arguments, "a norm by singular values")
    result = _matrix_norm(x, ord, rows, columns)
    if keepdims:
        result = _record.reshape(
            result, tuple(1 if position in (rows, columns) else n for position, n in enumerate(x.shape))
        )
    return result


def _vector_norm(x: Any, ord: Any, axis: tuple[int], keepdims: bool) -> Any:
    if ord == _np.inf:
        return abs(x).max(axis=axis, keepdims=keepdims)
    if ord == -_np.inf:
        return abs(x).min(axis=axis, keepdims=keepdims)
    if ord == 0:
        return (x != 0).astype(x.dtype).sum(axis=axis, keepdims=keepdims)
    if ord == 1:
        return abs(x).sum(axis=axis, keepdims=keepdims)
    if ord is None or ord == 2:
        return _apply("sqrt", (x * x).sum(axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    result = (abs(x) ** ord).sum(axis=axis, keepdims=keepdims)
    # In place, as NumPy raises to the reciprocal power: computed in its dtype, stored in the sum's.
    return _apply("power", result, _np.reciprocal(ord, dtype=result.dtype), out=result)


def _matrix_norm(x: Any, ord: Any, rows: int, columns: int) -> Any:
    """Maxima or minima of the sums of ``abs(x)`` along columns (ord ±1) or rows (ord ±inf)."""
    if ord in (None, "fro", "f"):
        return _apply("sqrt", (x * x).sum(axis=(rows, columns)))
    if ord in (1, -1):
        summed, kept = rows, columns - (columns > rows)
    elif ord in (_np.inf, -_np.inf):
        summed, kept = columns, rows - (rows > columns)
    else:
        raise ValueError("Invalid norm order for matrices.")
    sums = abs(x).sum(axis=summed)
    return sums.max(axis=kept) if ord > 0 else sums.min(axis=kept)


_register_array_functions(globals(), _np.linalg)
_accelerate.accelerate_namespace(_sys.modules[__name__])
_fall_through(globals(), _np.linalg)
