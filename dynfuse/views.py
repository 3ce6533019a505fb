"""Shapes, broadcasting, axes and basic indices, checked when an op is recorded.

Every function here raises the exception type NumPy raises for the same mistake, with a message
that names the operation and the offending shapes or values. Where NumPy's own checks are the
simplest exact answer (basic indexing, broadcast_to, squeeze), they run on a stride-0 stand-in of
the right shape, which costs O(1) whatever the shape; library calls that move elements
(concatenate, tile, pad) run on a stand-in whose elements have no bytes.
"""

from __future__ import annotations

import itertools
import operator
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
from numpy._core.einsumfunc import _parse_einsum_input
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from .devices import Memory

Shape = tuple[int, ...]


def shape_stand_in(shape: Shape) -> np.ndarray:
    """An array of ``shape`` that uses no memory: lets NumPy check shape operations for us."""
    return np.broadcast_to(np.zeros((), np.int8), shape)


_NO_BYTES = np.dtype([])


def zero_byte_stand_in(shape: Shape) -> np.ndarray:
    """An array of ``shape`` whose elements have no bytes: NumPy can move them (concatenate, tile,
    pad, ...) and so give its own result shape and errors, at no cost whatever the shape."""
    return np.empty(shape, _NO_BYTES)


@lru_cache(maxsize=4096)
def broadcast_shapes(opname: str, *shapes: Shape) -> Shape:
    ndim = max(map(len, shapes), default=0)
    result = []
    for axis in range(-ndim, 0):
        sizes = {shape[axis] for shape in shapes if len(shape) >= -axis} - {1}
        if len(sizes) > 1:
            listed = " ".join(str(shape) for shape in shapes)
            raise ValueError(f"{opname}: operands could not be broadcast together with shapes {listed}")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def place(array: np.ndarray) -> tuple:
    """Where a host array's elements are: its first's address, its shape, its strides and its dtype
    (two arrays of one place are the same elements; a complex array's real part starts where it
    does)."""
    return (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype)


def size_of(shape: Shape) -> int:
    size = 1
    for extent in shape:
        size *= extent
    return size


def normalize_shape(opname: str, shape: Any) -> Shape:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        return tuple(operator.index(extent) for extent in shape)
    except TypeError:
        raise TypeError(f"{opname}: shape must be a sequence of integers, got {shape!r}") from None


def reduction_axes(opname: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """Normalized axes of a reduction, in order (``None`` means all of them): a kernel walks them
    in that order, and NumPy walks ``axis=(2, 1)`` as ``(1, 2)``, which decides where a float
    product overflows (``inf * 0`` is NaN, ``0 * inf`` too, but ``big * 0 * big`` is 0)."""
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(normalize_axis_tuple(axis, ndim, argname=opname)))


def single_axis(opname: str, axis: Any, ndim: int) -> int | None:
    return None if axis is None else normalize_axis_index(operator.index(axis), ndim, opname)


def reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if axis in axes else extent for axis, extent in enumerate(shape))
    return tuple(extent for axis, extent in enumerate(shape) if axis not in axes)


def reshape_shape(shape: Shape, newshape: Any) -> Shape:
    newshape = normalize_shape("reshape", newshape)
    size = size_of(shape)
    unknown = [axis for axis, extent in enumerate(newshape) if extent == -1]
    if len(unknown) > 1:
        raise ValueError("reshape: can only specify one unknown dimension")
    if any(extent < -1 for extent in newshape):
        raise ValueError(f"reshape: negative dimensions not allowed in shape {newshape}")
    known = size_of(tuple(extent for extent in newshape if extent != -1))
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {newshape}")
        newshape = tuple(size // known if extent == -1 else extent for extent in newshape)
    elif known != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {newshape}")
    return newshape


def transpose_axes(axes: Any, ndim: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(reversed(range(ndim)))
    axes = normalize_shape("transpose", axes)
    if len(axes) != ndim:
        raise ValueError(f"transpose: axes {axes} don't match array of dimension {ndim}")
    return normalize_axis_tuple(axes, ndim, argname="transpose")


def moveaxis_axes(source: Any, destination: Any, ndim: int) -> tuple[int, ...]:
    source = normalize_axis_tuple(source, ndim, "source")
    destination = normalize_axis_tuple(destination, ndim, "destination")
    if len(source) != len(destination):
        raise ValueError(
            "moveaxis: `source` and `destination` arguments must have the same number of elements"
        )
    order = [axis for axis in range(ndim) if axis not in source]
    for dest, src in sorted(zip(destination, source, strict=True)):
        order.insert(dest, src)
    return tuple(order)


def swapaxes_axes(axis1: Any, axis2: Any, ndim: int) -> tuple[int, ...]:
    axis1 = normalize_axis_index(operator.index(axis1), ndim, "swapaxes")
    axis2 = normalize_axis_index(operator.index(axis2), ndim, "swapaxes")
    order = list(range(ndim))
    order[axis1], order[axis2] = axis2, axis1
    return tuple(order)


def is_basic_index(index: Any) -> bool:
    """True for an index NumPy answers with a view: ints, slices, None, Ellipsis."""
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        if item is None or item is Ellipsis or isinstance(item, slice):
            continue
        # Arrays (lazy ones too, which also have __index__) index as NumPy's advanced indexing does.
        if isinstance(item, (bool, np.bool_)) or hasattr(item, "__array__") or not hasattr(item, "__index__"):
            return False
    return True


_PLAIN_SLICE_PARTS = frozenset({int, type(None)})
# (shape, index key) -> basic_index's answer, for indices of Python ints, slices of them, None and
# Ellipsis: a loop slices the same shapes the same way at every step (a stencil's four slices), and
# NumPy's check on a stand-in costs microseconds each time.
_basic_indices: dict[tuple, tuple[tuple, Shape, bool]] = {}
BASIC_INDEX_CACHE_LIMIT = 4096


def index_key(index: Any) -> tuple | None:
    """A basic index as a hashable key (a slice as its triple: a slice is unhashable before Python
    3.12), where it is made of Python ints, slices of ints and None, None and Ellipsis; else None."""
    key = []
    for item in index if type(index) is tuple else (index,):
        kind = type(item)
        if kind is slice:
            start, stop, step = item.start, item.stop, item.step
            if not (
                type(start) in _PLAIN_SLICE_PARTS
                and type(stop) in _PLAIN_SLICE_PARTS
                and type(step) in _PLAIN_SLICE_PARTS
            ):
                return None
            key.append((start, stop, step))
        elif kind is int or item is None or item is Ellipsis:
            key.append(item)
        else:
            return None
    return tuple(key)


def basic_index(shape: Shape, index: Any) -> tuple[tuple, Shape, bool]:
    """Normalize a basic index into (items, result shape, is_view).

    Items are one per output or consumed axis: an int (a non-negative position), a
    (start, step, length) triple for a slice, or None for a new axis; Ellipsis is expanded and
    every axis of ``shape`` is accounted for. ``is_view`` is False where NumPy returns a scalar
    (a copy) rather than a 0-d view: every axis taken by an int and no Ellipsis. Remembered for the
    indices ``index_key`` names.
    """
    key = index_key(index)
    if key is None:
        return _basic_index(shape, index)
    found = _basic_indices.get((shape, key))
    if found is None:
        found = _basic_index(shape, index)
        if len(_basic_indices) >= BASIC_INDEX_CACHE_LIMIT:
            _basic_indices.clear()
        _basic_indices[shape, key] = found
    return found


def _basic_index(shape: Shape, index: Any) -> tuple[tuple, Shape, bool]:
    items = index if isinstance(index, tuple) else (index,)
    result_shape = shape_stand_in(shape)[index].shape  # NumPy's own errors for bad indices
    consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
    normalized: list[Any] = []
    axis = 0
    for item in items:
        if item is None:
            normalized.append(None)
        elif item is Ellipsis:
            for _ in range(len(shape) - consumed):
                normalized.append((0, 1, shape[axis]))
                axis += 1
        elif isinstance(item, slice):
            start, stop, step = item.indices(shape[axis])
            length = len(range(start, stop, step))
            normalized.append((start, step, length) if length else (0, 1, 0))
            axis += 1
        else:
            position = operator.index(item)
            normalized.append(position + shape[axis] if position < 0 else position)
            axis += 1
    normalized.extend((0, 1, extent) for extent in shape[axis:])
    is_view = bool(result_shape) or any(item is Ellipsis for item in items)
    return tuple(normalized), result_shape, is_view


def matmul_shape(a: Shape, b: Shape) -> Shape:
    signature = "(n?,k),(k,m?)->(n?,m?)"
    for position, shape in enumerate((a, b)):
        if not shape:
            raise ValueError(
                f"matmul: Input operand {position} does not have enough dimensions "
                f"(has 0, gufunc core with signature {signature} requires 1)"
            )
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
            f"{signature} (size {b2[-2]} is different from {a2[-1]})"
        )
    batch = broadcast_shapes("matmul", a2[:-2], b2[:-2])
    core = (a2[-2],) if len(a) > 1 else ()
    core += (b2[-1],) if len(b) > 1 else ()
    return batch + core


# ---- result shapes of library calls (barriers), with NumPy's exception types --------------------


def shape_by_reference(reference: Any, shapes: list[Shape], params: dict[str, Any]) -> Shape:
    """The shape ``reference`` gives, found by running it on zero-byte stand-ins: for ops that only
    move elements. Their dtype does not take part: elements without bytes have none to cast."""
    shape_params = {key: value for key, value in params.items() if key not in ("dtype", "casting")}
    return reference(*map(zero_byte_stand_in, shapes), **shape_params).shape


def _not_aligned(name: str, a: Shape, b: Shape, a_axis: int, b_axis: int) -> ValueError:
    return ValueError(
        f"{name}: shapes {a} and {b} not aligned: {a[a_axis]} (dim {a_axis}) != {b[b_axis]} (dim {b_axis})"
    )


def dot_shape(a: Shape, b: Shape) -> Shape:
    """``numpy.dot``: a 0-d operand multiplies; else the last axis of ``a`` meets the second-to-last
    of ``b`` (its only one if 1-d)."""
    if not a or not b:
        return a or b
    contracted = max(len(b) - 2, 0)
    if a[-1] != b[contracted]:
        raise _not_aligned("dot", a, b, len(a) - 1, contracted)
    return a[:-1] + b[:contracted] + b[contracted + 1 :]


def inner_shape(a: Shape, b: Shape) -> Shape:
    """``numpy.inner``: a 0-d operand multiplies; else the last axes of both meet."""
    if not a or not b:
        return a or b
    if a[-1] != b[-1]:
        raise _not_aligned("inner", a, b, len(a) - 1, len(b) - 1)
    return a[:-1] + b[:-1]


def einsum_subscripts(operands: tuple) -> str:
    """The interleaved form of einsum's operands (``a, [0, 1], b, [1, 2], [0, 2]``: each operand
    followed by its axes' labels, then the output's) as subscripts, by NumPy's own parser."""
    stand_ins = list(operands)
    for position in range(0, len(operands) - len(operands) % 2, 2):
        stand_ins[position] = zero_byte_stand_in(np.shape(operands[position]))
    inputs, output, _ = _parse_einsum_input(stand_ins)
    return f"{inputs}->{output}"


def einsum_shape(*shapes: Shape, subscripts: str, **ignored: Any) -> Shape:
    """``numpy.einsum``: NumPy parses the subscripts (ellipses become letters, an implicit output is
    made explicit); a label's extent is the same wherever it appears, or 1 there (broadcast)."""
    inputs, output, _ = _parse_einsum_input((subscripts, *map(zero_byte_stand_in, shapes)))
    extents: dict[str, int] = {}
    for position, (labels, shape) in enumerate(zip(inputs.split(","), shapes, strict=True)):
        if len(labels) != len(shape):
            raise ValueError(
                f"einsum: operand {position} has {len(shape)} dimensions (shape {shape}) "
                f"but its subscripts {labels!r} name {len(labels)}"
            )
        own: dict[str, int] = {}
        for label, extent in zip(labels, shape, strict=True):
            if own.setdefault(label, extent) != extent:
                raise ValueError(
                    f"einsum: dimensions in operand {position} (shape {shape}) for collapsing "
                    f"index {label!r} don't match ({own[label]} != {extent})"
                )
            known = extents.get(label, 1)
            if extent != 1 and known not in (1, extent):
                raise ValueError(
                    f"einsum: size of label {label!r} for operand {position} ({extent}) does not "
                    f"match previous operands ({known})"
                )
            if known == 1:
                extents[label] = extent
    return tuple(extents[label] for label in output)


def cumulative_shape(shape: Shape, *, axis: Any = None, **ignored: Any) -> Shape:
    """``cumsum``, ``cumprod``: the shape kept along one axis, or flattened without one. NumPy's axis
    check makes a 0-d array 1-d first."""
    if axis is None:
        return (size_of(shape),)
    shape = shape or (1,)
    normalize_axis_index(operator.index(axis), len(shape))
    return shape


def statistic_shape(
    shape: Shape,
    q_shape: Shape | None = None,
    *,
    q: Any = None,
    axis: Any = None,
    keepdims: bool = False,
    **ignored: Any,
) -> Shape:
    """``median``, ``percentile``, ``nanmean``...: the reduced shape, after the shape of the
    quantiles ``q`` (an operand when given as an array, else a param)."""
    axes = tuple(range(len(shape))) if axis is None else normalize_axis_tuple(axis, len(shape))
    prefix = q_shape if q_shape is not None else np.shape(q) if q is not None else ()
    return prefix + reduced_shape(shape, axes, bool(keepdims))


def pad_shape(shape: Shape, *, pad_width: Any, **ignored: Any) -> Shape:
    """``numpy.pad``: NumPy's own reading of ``pad_width`` (every mode pads the same widths)."""
    return np.pad(zero_byte_stand_in(shape), pad_width).shape


# ---- index maps: where a kernel's iteration index lands in a node's array ------------------------
#
# A kernel iterates over one shape. Each value it computes belongs to some node, read at an index
# that is an affine function of the iteration index: node_index[d] = offsets[d] + sum_k
# rows[d][k] * i[k]. Views (transpose, broadcast, slices with any step, flips, reshapes that only
# regroup axes) and implicit broadcasting change the map, not the data, so a view of a computed
# value costs index arithmetic, not a copy. Maps are canonical, so two view paths that land on the
# same elements give the same value, once.
#
# A roll (``np.roll``) moves elements around an axis, which no affine map does: the map then
# wraps some kernel axes first. ``wraps`` lists (k, start, modulus): the affine map reads kernel
# axis k at (i[k] + start) % modulus, the position along the rolled axis of an array of extent
# ``modulus``. A wrap is kept only where it happens inside the iteration (start + extent >
# modulus); otherwise the roll only shifts the index, and its map stays affine.


class IndexMap(NamedTuple):
    rows: tuple[tuple[int, ...], ...]  # one per node axis: a coefficient per kernel axis
    offsets: tuple[int, ...]  # one per node axis
    wraps: tuple[tuple[int, int, int], ...] = ()  # (kernel axis, start, modulus), by kernel axis


def identity_map(ndim: int) -> IndexMap:
    return IndexMap(tuple(tuple(int(k == d) for k in range(ndim)) for d in range(ndim)), (0,) * ndim)


def row_map(ndim: int, axes: tuple[int, ...], keepdims: bool) -> IndexMap:
    """The map that reads a reduction's result (over ``axes`` of an ``ndim`` iteration) at the row index."""
    kept = tuple(axis for axis in range(ndim) if keepdims or axis not in axes)
    rows = tuple(tuple(int(k == axis and axis not in axes) for k in range(ndim)) for axis in kept)
    return IndexMap(rows, (0,) * len(kept))


def is_row_read(index_map: IndexMap, shape: Shape, axes: tuple[int, ...], keepdims: bool) -> bool:
    """True when ``index_map`` reads a reduction's result of ``shape`` at the row index, as ``row_map``."""
    expected = row_map(len(index_map.rows[0]) if index_map.rows else 0, axes, keepdims)
    if len(expected.rows) != len(index_map.rows) or index_map.wraps:
        return False
    return all(
        extent == 1 or (row == wanted and offset == 0)
        for extent, row, wanted, offset in zip(
            shape, index_map.rows, expected.rows, index_map.offsets, strict=True
        )
    )


def gathered_data_map(index_map: IndexMap, sources: tuple[int, ...], width: int) -> IndexMap:
    """The map into a gather's data (``ops._gather``'s ``sources``) given the map into the gather,
    in an iteration of ``width`` axes: along a followed axis, the result's axis; along an indexed
    axis, 0 (the index values move the read from there)."""
    return IndexMap(
        tuple(index_map.rows[at] if at >= 0 else (0,) * width for at in sources),
        tuple(index_map.offsets[at] if at >= 0 else 0 for at in sources),
        index_map.wraps,
    )


def ignores_axes(index_map: IndexMap, axes: tuple[int, ...]) -> bool:
    """True when the node's index does not depend on ``axes`` of the iteration (a per-row value)."""
    return all(row[axis] == 0 for row in index_map.rows for axis in axes)


def broadcast_input_map(index_map: IndexMap, input_shape: Shape, output_shape: Shape) -> IndexMap:
    """The map into an operand that NumPy broadcasts from ``input_shape`` to ``output_shape``."""
    if input_shape == output_shape and 1 not in input_shape:  # the common case: no axis broadcast
        return index_map
    lead = len(output_shape) - len(input_shape)
    width = len(index_map.rows[0]) if index_map.rows else 0
    broadcast = [extent == 1 for extent in input_shape]
    return IndexMap(
        tuple((0,) * width if ones else index_map.rows[axis + lead] for axis, ones in enumerate(broadcast)),
        tuple(0 if ones else index_map.offsets[axis + lead] for axis, ones in enumerate(broadcast)),
        index_map.wraps,
    )


def _combine(weights: tuple[int, ...], index_map: IndexMap, width: int) -> tuple[list[int], int]:
    """The map weighted per node axis into one number: per-kernel-axis steps, and the start."""
    steps = [sum(w * row[k] for w, row in zip(weights, index_map.rows, strict=True)) for k in range(width)]
    return steps, sum(w * offset for w, offset in zip(weights, index_map.offsets, strict=True))


def view_input_map(
    index_map: IndexMap, op_name: str, params: dict[str, Any], input_shape: Shape, iteration_shape: Shape
) -> IndexMap | None:
    """The map into a view's input, given the map into the view; None where it is not affine."""
    if op_name == "transpose":
        rows = [()] * len(input_shape)
        offsets = [0] * len(input_shape)
        for position, axis in enumerate(params["axes"]):
            rows[axis] = index_map.rows[position]
            offsets[axis] = index_map.offsets[position]
        return IndexMap(tuple(rows), tuple(offsets), index_map.wraps)
    if op_name == "broadcast_to":
        return broadcast_input_map(index_map, input_shape, params["shape"])
    if op_name == "getitem":
        return _getitem_input_map(index_map, params["index"], len(iteration_shape))
    if op_name == "reshape":
        return _reshape_input_map(index_map, params["shape"], input_shape, iteration_shape)
    if op_name == "diagonal":
        return _diagonal_input_map(index_map, params["offset"], params["axis1"], params["axis2"], input_shape)
    if op_name == "roll":
        return _roll_input_map(index_map, params["shifts"], input_shape, iteration_shape)
    if op_name in ("real", "imag"):  # a part of each element: the same elements
        return index_map
    raise ValueError(f"no index map for the view {op_name!r}")


def _diagonal_input_map(
    index_map: IndexMap, offset: int, axis1: int, axis2: int, input_shape: Shape
) -> IndexMap:
    """The view's axes are the input's but ``axis1`` and ``axis2``, in order, then the diagonal,
    which steps both: from row ``-offset`` and column ``offset``, whichever is positive."""
    rows: list[tuple[int, ...]] = [()] * len(input_shape)
    offsets = [0] * len(input_shape)
    others = [axis for axis in range(len(input_shape)) if axis not in (axis1, axis2)]
    for position, axis in enumerate(others):
        rows[axis], offsets[axis] = index_map.rows[position], index_map.offsets[position]
    length = min(input_shape[axis1] - max(-offset, 0), input_shape[axis2] - max(offset, 0))
    along, start = index_map.rows[-1], index_map.offsets[-1]
    for axis, shift in ((axis1, max(-offset, 0)), (axis2, max(offset, 0))):
        rows[axis] = along
        offsets[axis] = start + shift if length > 0 else 0  # an empty diagonal reads nothing
    return IndexMap(tuple(rows), tuple(offsets), index_map.wraps)


def _getitem_input_map(index_map: IndexMap, index: tuple, width: int) -> IndexMap:
    rows, offsets = [], []
    position = 0  # the view's axis that the next item produces
    for item in index:
        if item is None:  # a new axis of the view, no axis of the input
            position += 1
        elif isinstance(item, tuple):
            start, step, _ = item
            rows.append(tuple(step * coefficient for coefficient in index_map.rows[position]))
            offsets.append(start + step * index_map.offsets[position])
            position += 1
        else:  # an integer: a fixed position on an input axis the view drops
            rows.append((0,) * width)
            offsets.append(item)
    return IndexMap(tuple(rows), tuple(offsets), index_map.wraps)


def contiguous_strides(shape: Shape) -> tuple[int, ...]:
    """C-order strides, in elements."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def common_refinement(shape: Shape, other: Shape) -> Shape | None:
    """The coarsest shape whose axes split those of both shapes (same size), if there is one.

    In C order an axis boundary is a suffix product; both shapes' boundaries must nest.
    """
    if size_of(shape) != size_of(other) or size_of(shape) == 0:
        return None
    boundaries = sorted({step for strides in map(contiguous_strides, (shape, other)) for step in strides})
    boundaries.append(size_of(shape))
    pairs = list(itertools.pairwise(boundaries))
    if any(outer % inner for inner, outer in pairs):
        return None
    return tuple(outer // inner for inner, outer in reversed(pairs))


def _reshape_input_map(
    index_map: IndexMap, shape: Shape, input_shape: Shape, iteration_shape: Shape
) -> IndexMap | None:
    """A reshape keeps the C-order position; the map stays affine when no axis carries into another."""
    width = len(iteration_shape)
    if size_of(iteration_shape) == 0 or size_of(input_shape) == 0:
        return IndexMap(((0,) * width,) * len(input_shape), (0,) * len(input_shape))
    iteration_shape = read_extents(index_map, iteration_shape)
    linear, position = _combine(contiguous_strides(shape), index_map, width)
    in_strides = contiguous_strides(input_shape)
    offsets = []
    for stride in in_strides:
        offsets.append(position // stride)
        position %= stride
    rows = [[0] * width for _ in input_shape]
    for k, (step, extent) in enumerate(zip(linear, iteration_shape, strict=True)):
        if extent == 1 or step == 0:
            continue
        axes = [axis for axis, stride in enumerate(in_strides) if input_shape[axis] > 1 and not step % stride]
        if not axes:
            return None
        axis = max(axes, key=lambda candidate: in_strides[candidate])
        rows[axis][k] = step // in_strides[axis]
    for axis, extent in enumerate(input_shape):
        spans = [rows[axis][k] * (iteration_shape[k] - 1) for k in range(width)]
        low = offsets[axis] + sum(span for span in spans if span < 0)
        high = offsets[axis] + sum(span for span in spans if span > 0)
        if low < 0 or high >= extent:
            return None  # the index would carry from one axis into the next: not a strided view
    return IndexMap(tuple(map(tuple, rows)), tuple(offsets), index_map.wraps)


def read_extents(index_map: IndexMap, iteration_shape: Shape) -> Shape:
    """How far the affine part of the map reads along each kernel axis: the iteration's extent, or a
    wrapped axis's whole modulus (a wrap that happens reads every position of it)."""
    if not index_map.wraps:
        return iteration_shape
    extents = list(iteration_shape)
    for axis, _, modulus in index_map.wraps:
        extents[axis] = modulus
    return tuple(extents)


def _roll_input_map(
    index_map: IndexMap, shifts: tuple[tuple[int, int], ...], input_shape: Shape, iteration_shape: Shape
) -> IndexMap | None:
    """The map into a roll's input: along each rolled axis d, position p of the result is position
    (p - shift) % extent of the input. Where d does not move with the iteration, that is a new
    offset; where it moves with one kernel axis k at unit step (and no other axis reads k), k wraps;
    None otherwise (a strided or flipped read of a roll: the roll is stored first)."""
    rows, offsets = list(index_map.rows), list(index_map.offsets)
    wraps = {axis: (start, modulus) for axis, start, modulus in index_map.wraps}
    for d, shift in shifts:
        extent = input_shape[d]
        moving = [k for k, step in enumerate(rows[d]) if step and iteration_shape[k] > 1]
        if not moving:
            offsets[d] = (offsets[d] - shift) % extent
            continue
        k = moving[0]
        if len(moving) > 1 or rows[d][k] != 1 or any(row[k] for e, row in enumerate(rows) if e != d):
            return None
        if k in wraps:  # a roll of a roll along the same whole axis: the shifts add
            start, modulus = wraps[k]
            if offsets[d] or modulus != extent:
                return None
            start = (start - shift) % extent
        else:
            start = (offsets[d] - shift) % extent
            offsets[d] = 0
        if start + iteration_shape[k] <= extent:  # no wrap inside the iteration: a shift
            offsets[d] += start
            wraps.pop(k, None)
        else:
            wraps[k] = (start, extent)
    return IndexMap(tuple(rows), tuple(offsets), tuple((axis, *wraps[axis]) for axis in sorted(wraps)))


def wrapped_axes(index_map: IndexMap) -> tuple[tuple[int, int, int], ...]:
    """The wraps a read through ``index_map`` depends on: those of kernel axes it reads along."""
    return tuple(wrap for wrap in index_map.wraps if any(row[wrap[0]] for row in index_map.rows))


def strided_view(array: Any, index_map: IndexMap, shape: Shape, memory: Memory) -> Any:
    """``array`` of ``memory`` read through ``index_map`` as a read-only array of the iteration
    ``shape``: no copy.

    ``shape`` may be empty along axes the map ignores (a reduction over no elements still reads
    its per-row values); an empty ``array`` is only read by an empty iteration.
    """
    if array.size == 0:  # nothing to read; an empty iteration still reads per-row values
        return memory.empty(shape, array.dtype)
    origin = array[(*index_map.offsets, Ellipsis)]  # a 0-d view at the first element read
    return memory.as_strided(origin, shape, read_strides(array.strides, index_map, len(shape)))


def read_strides(strides: tuple[int, ...], index_map: IndexMap, ndim: int) -> tuple[int, ...]:
    """The byte strides, along each of ``ndim`` iteration axes, of a read through ``index_map`` of
    an array of ``strides`` (``strided_view``'s, without making the view)."""
    return tuple(_combine(strides, index_map, ndim)[0])


def is_c_contiguous(shape: Shape, strides: tuple[int, ...], itemsize: int) -> bool:
    """NumPy's ``flags.c_contiguous`` of a non-empty array of this layout: axes of one element may
    have any stride."""
    step = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides), strict=True):
        if extent != 1:
            if stride != step:
                return False
            step *= extent
    return True
