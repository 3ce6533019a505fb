"""Shape functions: views recorded as index maps, and the library calls that move elements.

Views (reshape, transpose, broadcasting, new axes, flips) cost nothing: a kernel reads through
them, and through ``roll`` too (an index map that wraps around the axis; its result is an array of
its own, as NumPy's); ``take`` and ``take_along_axis`` are gathers, read at computed positions;
``extract`` and ``compress`` gather where ``nonzero``, computed at the call, says. ``copyto``,
``put``, ``place``, ``putmask``, ``fill_diagonal`` and ``put_along_axis`` write at their line.
``concatenate``, ``tile``, ``repeat`` and ``pad`` are library calls (barriers)
that NumPy runs on buffers; ``stack``, ``hstack``, ``vstack``, ``dstack``, ``column_stack``, ``diff``
and ``meshgrid`` are written here as NumPy writes them, from those and from views.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from .. import ops, record, views
from ..array import LazyArray
from ..devices import HOST

__all__ = [
    "argwhere",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "broadcast_arrays",
    "broadcast_to",
    "column_stack",
    "compress",
    "concat",
    "concatenate",
    "copy",
    "copyto",
    "diff",
    "dstack",
    "expand_dims",
    "extract",
    "fill_diagonal",
    "flatnonzero",
    "flip",
    "fliplr",
    "flipud",
    "hstack",
    "meshgrid",
    "moveaxis",
    "ndim",
    "nonzero",
    "pad",
    "permute_dims",
    "place",
    "put",
    "put_along_axis",
    "putmask",
    "ravel",
    "repeat",
    "reshape",
    "roll",
    "shape",
    "size",
    "squeeze",
    "stack",
    "swapaxes",
    "take",
    "take_along_axis",
    "tile",
    "transpose",
    "vstack",
]


def reshape(a: Any, /, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None) -> Any:
    shape = newshape if shape is None else shape
    if order != "C" or copy is not None:
        arguments = {"order": order, "copy": copy}
        return record.fallback(
            "reshape", np.reshape, (a, shape), arguments, "order= other than 'C', or copy="
        )
    return record.reshape(a, shape)


def transpose(a: Any, axes: Any = None) -> Any:
    return record.transpose(a, axes)


def permute_dims(a: Any, /, axes: Any = None) -> Any:
    return record.transpose(a, axes)


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    a = record.lazy(a)
    return record.permute(a, views.swapaxes_axes(axis1, axis2, a.ndim))


def moveaxis(a: Any, source: Any, destination: Any) -> Any:
    a = record.lazy(a)
    return record.permute(a, views.moveaxis_axes(source, destination, a.ndim))


def broadcast_to(array: Any, shape: Any, subok: bool = False) -> Any:
    return record.broadcast_to(array, shape)


def broadcast_arrays(*args: Any, subok: bool = False) -> tuple[Any, ...]:
    arrays = [record.lazy(value) for value in args]
    shape = views.broadcast_shapes("broadcast_arrays", *(array.shape for array in arrays))
    return tuple(array if array.shape == shape else record.broadcast_to(array, shape) for array in arrays)


def expand_dims(a: Any, axis: Any) -> Any:
    return record.expand_dims(a, axis)


expand_dims.fast_path = (None, "expand_dims")  # recorded in C where the C recorder is in use


def squeeze(a: Any, axis: Any = None) -> Any:
    return record.lazy(a).squeeze(axis)


def ravel(a: Any, order: str = "C") -> Any:
    if order != "C":
        return record.fallback("ravel", np.ravel, (a,), {"order": order}, "order= other than 'C'")
    return record.reshape(a, -1)


def flip(m: Any, axis: Any = None) -> Any:
    m = record.lazy(m)
    axes = views.reduction_axes("flip", axis, m.ndim)
    return m[tuple(slice(None, None, -1) if axis in axes else slice(None) for axis in range(m.ndim))]


def fliplr(m: Any) -> Any:
    m = record.lazy(m)
    if m.ndim < 2:
        raise ValueError(f"fliplr: input must be >= 2-d, got shape {m.shape}")
    return m[:, ::-1]


def flipud(m: Any) -> Any:
    m = record.lazy(m)
    if m.ndim < 1:
        raise ValueError("flipud: input must be >= 1-d, got a 0-d array")
    return m[::-1, ...]


def copy(a: Any, order: str = "K", subok: bool = False) -> Any:
    return record.lazy(a).copy()


def shape(a: Any) -> tuple[int, ...]:
    return a.shape if isinstance(a, LazyArray) else np.shape(a)


def ndim(a: Any) -> int:
    return a.ndim if isinstance(a, LazyArray) else np.ndim(a)


def size(a: Any, axis: Any = None) -> int:
    if isinstance(a, LazyArray):
        return a.size if axis is None else a.shape[axis]
    return np.size(a, axis)


# ---- at least so many axes: views ---------------------------------------------------------------


def _at_least(lifted: Callable[[tuple[int, ...]], tuple[int, ...]], arrays: tuple) -> Any:
    """Each array with the shape ``lifted`` gives it (a view); one array alone, not in a tuple."""
    results = []
    for value in arrays:
        array = record.lazy(value)
        shape = lifted(array.shape)
        results.append(array if shape == array.shape else record.reshape(array, shape))
    return results[0] if len(results) == 1 else tuple(results)


def atleast_1d(*arys: Any) -> Any:
    return _at_least(lambda shape: shape or (1,), arys)


def atleast_2d(*arys: Any) -> Any:
    return _at_least(lambda shape: (1,) * (2 - len(shape)) + shape, arys)


def atleast_3d(*arys: Any) -> Any:
    """A 1-d array becomes (1, n, 1) and a 2-d one (m, n, 1), as in NumPy: not just axes in front."""
    return _at_least(
        lambda shape: {0: (1, 1, 1), 1: (1, *shape, 1), 2: (*shape, 1)}.get(len(shape), shape), arys
    )


# ---- joining: one library call, ``concatenate`` --------------------------------------------------


def concatenate(
    arrays: Iterable[Any], /, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: str = "same_kind"
) -> Any:
    params = {"axis": axis}
    if dtype is not None:
        params["dtype"] = dtype
    if casting != "same_kind":
        params["casting"] = casting
    return record.barrier(ops.BARRIERS["concatenate"], tuple(arrays), params, out=out)


concat = concatenate


def _joined(arrays: Any) -> tuple:
    return arrays if isinstance(arrays, tuple) else (arrays,)


def stack(
    arrays: Iterable[Any], axis: int = 0, out: Any = None, *, dtype: Any = None, casting: str = "same_kind"
) -> Any:
    arrays = [record.lazy(value) for value in arrays]
    if not arrays:
        raise ValueError("stack: need at least one array to stack")
    shapes = {array.shape for array in arrays}
    if len(shapes) != 1:
        raise ValueError(f"stack: all input arrays must have the same shape, got {sorted(shapes)}")
    axis = normalize_axis_index(axis, arrays[0].ndim + 1, "stack")
    new_axis = (slice(None),) * axis + (None,)
    return concatenate(
        [array[new_axis] for array in arrays], axis=axis, out=out, dtype=dtype, casting=casting
    )


def hstack(tup: Iterable[Any], *, dtype: Any = None, casting: str = "same_kind") -> Any:
    arrays = _joined(atleast_1d(*tup))
    axis = 0 if arrays and arrays[0].ndim == 1 else 1  # 1-d arrays join along their only axis
    return concatenate(arrays, axis, dtype=dtype, casting=casting)


def vstack(tup: Iterable[Any], *, dtype: Any = None, casting: str = "same_kind") -> Any:
    return concatenate(_joined(atleast_2d(*tup)), 0, dtype=dtype, casting=casting)


def dstack(tup: Iterable[Any]) -> Any:
    return concatenate(_joined(atleast_3d(*tup)), 2)


def column_stack(tup: Iterable[Any]) -> Any:
    """Arrays of fewer than two axes become columns; the rest join as they are."""
    arrays = []
    for value in tup:
        array = record.lazy(value)
        arrays.append(record.reshape(array, (-1, 1)) if array.ndim < 2 else array)
    return concatenate(arrays, 1)


# ---- other library calls that move elements ----------------------------------------------------------


def roll(a: Any, shift: Any, axis: Any = None) -> Any:
    return record.roll(a, shift, axis)


roll.asks_site = True  # run at once unless its place in the program records (``record.roll``)


def take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Any:
    """NumPy's ``take``: a gather along one axis (of the flattened array without one), read by the
    kernel that consumes it. The clipping and wrapping modes move the indices into the axis here
    (they are computed here anyway); ``out=`` is NumPy's to run."""
    array = record.lazy(a)
    extent = array.size if axis is None else array.shape[normalize_axis_index(axis, array.ndim)]
    if out is not None or mode not in ("raise", "clip", "wrap") or (mode != "raise" and not extent):
        arguments = {"axis": axis, "out": out, "mode": mode}
        why = "out=, or a clipping or wrapping mode along an empty axis"
        return record.fallback("take", np.take, (a, indices), arguments, why)
    if axis is None:
        array, axis = record.reshape(array, -1), 0
    axis = normalize_axis_index(axis, array.ndim)
    if mode != "raise":
        positions = np.asarray(record.host_value(record.lazy(indices)._node))
        indices = np.clip(positions, 0, extent - 1) if mode == "clip" else np.mod(positions, extent)
    return record.getitem(array, (slice(None),) * axis + (indices,))


def take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Any:
    return record.take_along_axis(arr, indices, axis)


def nonzero(a: Any) -> tuple:
    return record.selected_now(np.nonzero, a)


def flatnonzero(a: Any) -> Any:
    return record.selected_now(np.nonzero, record.reshape(a, -1))[0]


def argwhere(a: Any) -> Any:
    return record.selected_now(np.argwhere, a)


def extract(condition: Any, arr: Any) -> Any:
    """The values of ``arr`` where ``condition`` holds, flattened: a gather at the positions of the
    condition's nonzero values (computed here: their count is the result's length)."""
    return take(record.reshape(arr, -1), flatnonzero(condition))


def compress(condition: Any, a: Any, axis: Any = None, out: Any = None) -> Any:
    """The slices of ``a`` along ``axis`` where ``condition`` (1-d) holds: a gather, as ``take``."""
    if out is not None or np.ndim(condition) != 1:
        why = "out=, or a condition of other than one dimension"
        return record.fallback("compress", np.compress, (condition, a), {"axis": axis, "out": out}, why)
    return take(a, nonzero(condition)[0], axis)


def _written(function: Callable) -> Callable:
    """NumPy's ``function`` that writes into its first argument (``copyto``, ``put``, ``place``...),
    run at its line into a lazy array's memory, as a write through an index array or a mask is
    (``record.write_now``); into another array, NumPy's on computed arguments."""

    def write(target: Any, *args: Any, **kwargs: Any) -> None:
        if type(target) is not LazyArray or target._node.memory is not HOST:
            why = "a write into an array that is not a lazy array of the host"
            return record.fallback(function.__name__, function, (target, *args), kwargs, why)
        return record.write_now(
            function.__name__,
            target,
            (args, kwargs),
            lambda buffer, args, kwargs: function(buffer, *args, **kwargs),
        )

    write.__name__ = write.__qualname__ = function.__name__
    write.__doc__ = function.__doc__
    return write


copyto, put, place, putmask, fill_diagonal, put_along_axis = map(
    _written, (np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis)
)


def tile(A: Any, reps: Any) -> Any:
    return record.barrier(ops.BARRIERS["tile"], (A,), {"reps": reps})


def repeat(a: Any, repeats: Any, axis: Any = None) -> Any:
    """A count per element makes the result's shape depend on the counts' values: NumPy runs it."""
    if np.ndim(repeats):
        why = "a count per element: the shape depends on the values"
        return record.fallback("repeat", np.repeat, (a, repeats), {"axis": axis}, why)
    return record.barrier(ops.BARRIERS["repeat"], (a,), {"repeats": repeats, "axis": axis})


def pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    return record.barrier(ops.BARRIERS["pad"], (array,), {"pad_width": pad_width, "mode": mode, **kwargs})


# ---- written from the above, as NumPy writes them ----------------------------------------------


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = np._NoValue, append: Any = np._NoValue) -> Any:
    """Differences of neighbours (``not_equal`` for booleans), ``n`` times over: slices, no copies."""
    if n == 0:
        return a
    if n < 0:
        raise ValueError(f"diff: order must be non-negative but got {n!r}")
    a = record.lazy(a)
    if a.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = normalize_axis_index(axis, a.ndim, "diff")
    edge = tuple(1 if position == axis else extent for position, extent in enumerate(a.shape))
    combined = []
    for value in (prepend, a, append):
        if value is not np._NoValue:
            value = record.lazy(value)
            combined.append(record.broadcast_to(value, edge) if value.ndim == 0 else value)
    if len(combined) > 1:
        a = concatenate(combined, axis)
    later = tuple(slice(1, None) if position == axis else slice(None) for position in range(a.ndim))
    earlier = tuple(slice(None, -1) if position == axis else slice(None) for position in range(a.ndim))
    op = ops.ELEMENTWISE["not_equal" if a.dtype == np.bool_ else "subtract"]
    for _ in range(n):
        a = record.elementwise(op, (a[later], a[earlier]))
    return a


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> Any:
    """Coordinate arrays: each input along its own axis (the first two swapped for 'xy'), broadcast
    to the full grid unless sparse, and copied (the grid written out) unless ``copy=False``."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    ndim = len(xi)
    ones = (1,) * ndim
    output = [record.reshape(x, (*ones[:i], -1, *ones[i + 1 :])) for i, x in enumerate(xi)]
    if indexing == "xy" and ndim > 1:
        output[0] = record.reshape(output[0], (1, -1, *ones[2:]))
        output[1] = record.reshape(output[1], (-1, 1, *ones[2:]))
    if not sparse:
        output = broadcast_arrays(*output)
    if copy:
        output = tuple(x.copy() for x in output)
    return output
