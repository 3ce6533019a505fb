"""Products: ``matmul``, ``dot``, ``inner`` and ``einsum`` are library calls (barriers) that NumPy
runs on buffers, so BLAS does what it does best while the ops on each side still fuse; ``outer``
and ``tensordot`` are written from views, an elementwise multiply and ``dot``, as NumPy writes them.
"""

from __future__ import annotations

import math
from typing import Any

from .. import ops, record, views
from ..array import LazyArray

__all__ = ["dot", "einsum", "inner", "matmul", "outer", "tensordot"]


def matmul(x1: Any, x2: Any, /, out: Any = None) -> Any:
    return record.matmul(x1, x2, out=out)


dot = LazyArray.dot


def inner(a: Any, b: Any, /) -> Any:
    return record.barrier(ops.BARRIERS["inner"], (a, b))


def einsum(*operands: Any, out: Any = None, optimize: Any = False, **kwargs: Any) -> Any:
    """The subscripts are a param; the interleaved form (``einsum(a, [0, 1], b, [1, 2])``) is first
    written as subscripts."""
    if operands and isinstance(operands[0], str):
        subscripts, arrays = operands[0], operands[1:]
    else:
        subscripts = views.einsum_subscripts(operands)
        arrays = operands[: len(operands) - len(operands) % 2 : 2]
    params = {"subscripts": subscripts, **kwargs}
    if optimize is not False:
        params["optimize"] = optimize
    return record.barrier(ops.BARRIERS["einsum"], arrays, params, out=out)


def outer(a: Any, b: Any, out: Any = None) -> Any:
    """Every product of an element of ``a`` and one of ``b``: one elementwise multiply."""
    a, b = record.reshape(a, (-1, 1)), record.reshape(b, (1, -1))
    return record.elementwise(ops.ELEMENTWISE["multiply"], (a, b), out=out)


def _axis_list(axes: Any) -> list:
    try:
        return list(axes)
    except TypeError:
        return [axes]


def tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    """NumPy's steps: the summed axes moved to the end of ``a`` and the front of ``b``, both made
    matrices (views where the layout allows), one ``dot``, and its result shaped back."""
    try:
        iter(axes)
    except TypeError:
        axes_a, axes_b = list(range(-axes, 0)), list(range(axes))
    else:
        axes_a, axes_b = axes
    axes_a, axes_b = _axis_list(axes_a), _axis_list(axes_b)
    if len(set(axes_a)) != len(axes_a) or len(set(axes_b)) != len(axes_b):
        raise ValueError("duplicate axes are not allowed in tensordot")
    a, b = record.lazy(a), record.lazy(b)
    if len(axes_a) != len(axes_b) or any(
        a.shape[axis_a] != b.shape[axis_b] for axis_a, axis_b in zip(axes_a, axes_b, strict=True)
    ):
        raise ValueError(
            f"tensordot: shape-mismatch for sum of axes {axes_a} of {a.shape} and {axes_b} of {b.shape}"
        )
    axes_a = [axis % a.ndim for axis in axes_a]
    axes_b = [axis % b.ndim for axis in axes_b]
    kept_a = [axis for axis in range(a.ndim) if axis not in axes_a]
    kept_b = [axis for axis in range(b.ndim) if axis not in axes_b]
    shape_a, shape_b = [a.shape[axis] for axis in kept_a], [b.shape[axis] for axis in kept_b]
    summed = math.prod(a.shape[axis] for axis in axes_a)
    matrix_a = record.reshape(record.permute(a, (*kept_a, *axes_a)), (math.prod(shape_a), summed))
    matrix_b = record.reshape(record.permute(b, (*axes_b, *kept_b)), (summed, math.prod(shape_b)))
    return record.reshape(dot(matrix_a, matrix_b), (*shape_a, *shape_b))
