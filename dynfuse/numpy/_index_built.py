"""Arrays built from their indices, as expressions.

``tri``, ``eye`` and ``identity`` compare a row index with a column index, each a small ``arange``
broadcast along the other axis, and ``triu`` and ``tril`` select through such a comparison, as
NumPy itself computes them (``tri`` is ``greater_equal.outer`` of two aranges; ``triu`` and
``tril`` a ``where`` over it): the results are NumPy's, and they fuse like any other op, so
``np.triu(M, 1).sum()`` reads M once and writes nothing but the sum, and ``A + n * np.eye(n)``
never makes the identity; ``diag`` of a vector selects it through the same comparison, and
``indices`` picks each axis's ``arange`` by the first axis's index. ``diagonal``
(and ``diag`` of a 2-d array) is a view, read through its index map. What these cannot express
(Fortran order, a device's ``eye``, a dtype no kernel holds) is NumPy's own call, made at once.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .. import array as array_module
from .. import dtypes, record
from ..array import LazyArray
from ._creation import _creating, _wrapped

__all__ = ["diag", "diagonal", "eye", "identity", "indices", "tri", "tril", "triu"]

# Indices this far from int64's limits shift without overflow (``k`` added to a row index).
_SAFE_SHIFT = 1 << 62
# A matrix ``diag`` builds of more bytes than this is NumPy's to refuse, at once
_MOST_BYTES = 1 << 40

_numpy_tri, _numpy_eye = _creating(np.tri), _creating(np.eye)


def _sizes(*values: Any) -> tuple[int, ...] | None:
    """Sizes and shifts as NumPy takes them (``operator.index``), where an expression of them is
    exact: non-negative sizes, shifts that cannot overflow; None otherwise (NumPy's call decides)."""
    try:
        sizes, shift = [operator.index(value) for value in values[:-1]], operator.index(values[-1])
    except TypeError:
        return None
    if any(size < 0 or size >= _SAFE_SHIFT for size in sizes) or not -_SAFE_SHIFT < shift < _SAFE_SHIFT:
        return None
    return (*sizes, shift)


def _row_and_column(
    rows: int, columns: int, shift: int, device: str | None = None
) -> tuple[LazyArray, LazyArray]:
    """The row index plus ``shift`` down a column, and the column index along a row: broadcast
    together, the (rows, columns) grid of both, on ``device`` (None: the host)."""
    row = record.getitem(
        array_module.asarray(np.arange(shift, rows + shift), device=device), (slice(None), None)
    )
    column = record.getitem(array_module.asarray(np.arange(columns), device=device), (None, slice(None)))
    return row, column


def _lower(rows: int, columns: int, k: int, device: str | None = None) -> LazyArray:
    """``tri``'s mask: true on and below the ``k``-th diagonal (column <= row + k)."""
    row, column = _row_and_column(rows, columns, k, device)
    return np.greater_equal(row, column)


def tri(N: Any, M: Any = None, k: Any = 0, dtype: Any = float, *, like: Any = None) -> Any:
    sizes = _sizes(N, N if M is None else M, k)
    if sizes is None or not dtypes.is_supported(np.dtype(dtype)):
        return _numpy_tri(N, M, k, dtype)
    mask = _lower(*sizes)
    return mask if np.dtype(dtype) == np.bool_ else mask.astype(dtype)


def eye(
    N: Any,
    M: Any = None,
    k: Any = 0,
    dtype: Any = float,
    order: str = "C",
    *,
    device: Any = None,
    like: Any = None,
) -> Any:
    sizes = _sizes(N, N if M is None else M, k)
    if sizes is None or order != "C" or device is not None or not dtypes.is_supported(np.dtype(dtype)):
        return _numpy_eye(N, M, k, dtype, order, device=device)
    row, column = _row_and_column(*sizes)
    diagonal = np.equal(row, column)
    return diagonal if np.dtype(dtype) == np.bool_ else diagonal.astype(dtype)


def identity(n: Any, dtype: Any = None, *, like: Any = None) -> Any:
    return eye(n, dtype=dtype)


def indices(dimensions: Any, dtype: Any = int, sparse: bool = False) -> Any:
    """Each axis's index over the grid ``dimensions``, stacked along a first axis: a small
    ``arange`` per axis, broadcast, and the one of them the first axis's index names chosen by
    ``where``s, where NumPy writes each grid in full. Sparse grids are NumPy's own, small."""
    try:
        dimensions = tuple(dimensions)  # as NumPy takes it: an iterator once
        sizes = tuple(map(operator.index, dimensions))
    except TypeError:
        sizes = ()
    if sparse or not sizes or min(sizes) < 0 or not dtypes.is_supported(np.dtype(dtype)):
        made = np.indices(dimensions, dtype, sparse)  # NumPy's results and errors
        return tuple(map(_wrapped, made)) if sparse else _wrapped(made)
    count = len(sizes)

    def along(axis: int, size: int) -> LazyArray:
        """``arange(size)`` along ``axis`` of the result (0 is the first axis, which picks)."""
        shape = [1] * (count + 1)
        shape[axis] = size
        return array_module.asarray(np.arange(size, dtype=dtype).reshape(shape))

    which = along(0, count)
    grids = along(count, sizes[-1])
    for axis in range(count - 2, -1, -1):
        grids = np.where(which == axis, along(axis + 1, sizes[axis]), grids)
    return grids


def _triangle(m: Any, k: Any, keep_lower: bool) -> Any:
    """NumPy's ``tril`` (``keep_lower``) or ``triu``: ``m`` where its mask holds, else zero."""
    m = record.lazy(m)
    name = "tril" if keep_lower else "triu"
    sizes = _sizes(*m.shape[-2:], k) if m.ndim else None
    if sizes is None or not dtypes.is_supported(m.dtype):
        why = "a 0-d array or a dtype it does not record"
        return record.fallback(name, getattr(np, name), (m,), {"k": k}, why)
    rows, columns = (sizes[0], sizes[0]) if m.ndim == 1 else sizes[:2]
    mask = _lower(rows, columns, sizes[-1] if keep_lower else sizes[-1] - 1, m.device)
    zero = array_module.asarray(np.zeros(1, m.dtype), device=m.device)  # as NumPy selects from
    return np.where(mask, m, zero) if keep_lower else np.where(mask, zero, m)


def tril(m: Any, k: Any = 0) -> Any:
    return _triangle(m, k, keep_lower=True)


def triu(m: Any, k: Any = 0) -> Any:
    return _triangle(m, k, keep_lower=False)


diagonal = LazyArray.diagonal


def diag(v: Any, k: Any = 0) -> Any:
    """Of a 2-d array, its ``k``-th diagonal (a view); of a 1-d one, the square matrix that holds it
    on its ``k``-th diagonal and zeros elsewhere: ``eye``'s comparison selecting the vector, laid
    along the rows (k >= 0) or the columns (k < 0) and padded with |k| zeros to the matrix's side
    (a join of the vector alone, which the select reads)."""
    v = record.lazy(v)
    if v.ndim == 2:
        return record.diagonal(v, k)
    sizes = _sizes(v.shape[0], k) if v.ndim == 1 else None
    side = sizes[0] + abs(sizes[1]) if sizes is not None else 0
    if sizes is None or not dtypes.is_supported(v.dtype) or side * side * v.dtype.itemsize >= _MOST_BYTES:
        return record.call_numpy(np.diag, (v, k), {}, fresh=True)  # NumPy's errors too (a 3-d v)
    shift = sizes[1]
    zeros = array_module.asarray(np.zeros(abs(shift) + 1, v.dtype), device=v.device)
    padded = np.concatenate([v, zeros[1:]]) if shift else v
    values = record.getitem(padded, (slice(None), None) if shift >= 0 else (None, slice(None)))
    row, column = _row_and_column(side, side, shift, v.device)
    return np.where(np.equal(row, column), values, zeros[:1])
