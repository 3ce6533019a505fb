"""views: shapes, broadcasting, axes and basic indices as NumPy checks them, and index maps over views."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dynfuse
from dynfuse import ops, views
from dynfuse.devices import HOST
from dynfuse.ops import OpKind

SMALL_SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)


def numpys_outcome(function, *args):
    """What ``function(*args)`` gives, or the type of the exception it raises."""
    try:
        return function(*args)
    except Exception as error:
        return type(error)


def assert_same_outcome(ours, numpys):
    """Both raise the same exception type, or both give the same value."""
    if isinstance(numpys, type):
        assert ours is numpys, (ours, numpys)
    else:
        assert ours == numpys, (ours, numpys)


# ---- stand-ins --------------------------------------------------------------------------------


def test_stand_ins_have_the_shape_and_no_bytes():
    stand_in = views.shape_stand_in((1000, 1000, 1000))
    assert stand_in.shape == (1000, 1000, 1000) and stand_in.strides == (0, 0, 0)
    empty = views.zero_byte_stand_in((1000, 1000))
    assert empty.shape == (1000, 1000) and empty.nbytes == 0
    assert np.concatenate([empty, empty]).shape == (2000, 1000)


# ---- broadcasting -------------------------------------------------------------------------------


@given(shapes=st.lists(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3), max_size=3))
def test_broadcast_shapes_are_numpys(shapes):
    assert_same_outcome(
        numpys_outcome(views.broadcast_shapes, "add", *shapes), numpys_outcome(np.broadcast_shapes, *shapes)
    )


def test_a_broadcast_error_names_the_op_and_every_shape():
    with pytest.raises(ValueError, match=r"^maximum: operands could not be broadcast together with shapes"):
        views.broadcast_shapes("maximum", (2, 3), (3, 2))
    with pytest.raises(ValueError, match=r"shapes \(3,\) \(1, 3\) \(4,\)$"):
        views.broadcast_shapes("add", (3,), (1, 3), (4,))
    assert views.broadcast_shapes("add", (0, 1), (1, 5)) == (0, 5)  # 0 is an extent, not a broadcast
    assert views.broadcast_shapes("add") == ()


# ---- shapes and axes ----------------------------------------------------------------------------


def test_shapes_are_tuples_of_ints():
    assert views.normalize_shape("zeros", 3) == (3,)
    assert views.normalize_shape("zeros", [np.int8(2), 3]) == (2, 3)
    with pytest.raises(TypeError, match=r"^reshape: shape must be a sequence of integers, got \[1.5\]"):
        views.normalize_shape("reshape", [1.5])
    assert views.size_of(()) == 1 and views.size_of((2, 0, 3)) == 0


@pytest.mark.parametrize(
    ("axis", "ndim", "expected"),
    [(None, 3, (0, 1, 2)), (-1, 3, (2,)), ((0, -1), 3, (0, 2)), ((), 2, ()), (None, 0, ())],
)
def test_reduction_axes_are_normalized(axis, ndim, expected):
    assert views.reduction_axes("sum", axis, ndim) == expected


def test_axes_out_of_range_raise_numpys_axis_error_naming_the_op():
    with pytest.raises(
        np.exceptions.AxisError, match=r"^sum: axis 2 is out of bounds for array of dimension 1"
    ):
        views.reduction_axes("sum", 2, 1)
    with pytest.raises(ValueError, match="repeated axis in `sum` argument"):
        views.reduction_axes("sum", (0, -2), 2)
    with pytest.raises(np.exceptions.AxisError, match=r"^argmax: axis -3"):
        views.single_axis("argmax", -3, 2)
    with pytest.raises(TypeError):
        views.single_axis("argmax", 1.5, 2)
    assert views.single_axis("argmax", None, 2) is None and views.single_axis("argmax", -1, 2) == 1


@pytest.mark.parametrize("keepdims", [False, True])
def test_reduced_shape(keepdims):
    expected = np.ones((2, 3, 4)).sum(axis=(0, 2), keepdims=keepdims).shape
    assert views.reduced_shape((2, 3, 4), (0, 2), keepdims) == expected


@given(shape=SMALL_SHAPES, newshape=st.lists(st.integers(-1, 6), max_size=4))
def test_reshape_shapes_are_numpys(shape, newshape):
    assert_same_outcome(
        numpys_outcome(views.reshape_shape, shape, newshape),
        numpys_outcome(lambda: np.empty(shape).reshape(newshape).shape),
    )


def test_reshape_errors_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"cannot reshape array of size 6 into shape \(4, 2\)"):
        views.reshape_shape((6,), (4, 2))
    with pytest.raises(ValueError, match="can only specify one unknown dimension"):
        views.reshape_shape((6,), (-1, -1))
    with pytest.raises(ValueError, match="size 0 into shape"):
        views.reshape_shape((0,), (-1, 0))  # the unknown extent is not determined


AXES = st.lists(st.integers(-5, 5), max_size=4)


def numbered(ndim):
    """An array of ``ndim`` axes of different extents, each element its own number."""
    shape = (2, 3, 4, 5)[:ndim]
    return np.arange(int(np.prod(shape))).reshape(shape)


@given(ndim=st.integers(0, 4), data=st.data())
def test_transpose_axes_are_numpys(ndim, data):
    in_range = st.lists(st.integers(-ndim, ndim - 1), max_size=5) if ndim else st.just([])
    axes = data.draw(st.one_of(st.none(), in_range))  # repeated or too few, but never out of range
    array = numbered(ndim)
    ours = numpys_outcome(lambda: array.transpose(views.transpose_axes(axes, ndim)).tolist())
    assert_same_outcome(ours, numpys_outcome(lambda: np.transpose(array, axes).tolist()))


def test_transpose_axes_out_of_range_raise_numpys_axis_error():
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds for array of dimension 2"):
        views.transpose_axes((0, 2), 2)


@given(
    ndim=st.integers(1, 4),
    source=st.one_of(st.integers(-5, 5), AXES),
    destination=st.one_of(st.integers(-5, 5), AXES),
)
def test_moveaxis_axes_are_numpys(ndim, source, destination):
    array = numbered(ndim)
    ours = numpys_outcome(lambda: array.transpose(views.moveaxis_axes(source, destination, ndim)).tolist())
    assert_same_outcome(ours, numpys_outcome(lambda: np.moveaxis(array, source, destination).tolist()))


@given(ndim=st.integers(1, 4), axis1=st.integers(-5, 5), axis2=st.integers(-5, 5))
def test_swapaxes_axes_are_numpys(ndim, axis1, axis2):
    array = numbered(ndim)
    ours = numpys_outcome(lambda: array.transpose(views.swapaxes_axes(axis1, axis2, ndim)).tolist())
    assert_same_outcome(ours, numpys_outcome(lambda: np.swapaxes(array, axis1, axis2).tolist()))


# ---- basic indices ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "basic"),
    [
        (0, True),
        (slice(None, None, -1), True),
        ((None, Ellipsis, 1), True),
        ((), True),
        (True, False),
        (np.bool_(False), False),
        ([0, 1], False),
        (np.array([0]), False),
        (np.array(0), False),  # a 0-d array indexes as an array does
        ((0, [1]), False),
        (1.5, False),
        ("a", False),
    ],
)
def test_basic_indices_are_those_numpy_answers_with_a_view(index, basic):
    assert views.is_basic_index(index) is basic


def test_a_lazy_array_is_never_a_basic_index():
    assert not views.is_basic_index(dynfuse.asarray(np.int64(1)))


INDEX_ITEMS = st.one_of(
    st.integers(-6, 6),
    st.builds(
        slice,
        st.one_of(st.none(), st.integers(-7, 7)),
        st.one_of(st.none(), st.integers(-7, 7)),
        st.one_of(st.none(), st.integers(-3, 3).filter(bool)),
    ),
    st.none(),
    st.just(Ellipsis),
)


def read_normalized(array, items):
    """The elements ``basic_index``'s items name, found one axis at a time."""
    axis = 0
    for item in items:
        if item is None:
            array = np.expand_dims(array, axis)
            axis += 1
        elif isinstance(item, tuple):
            start, step, length = item
            array = np.take(array, start + step * np.arange(length, dtype=np.intp), axis=axis)
            axis += 1
        else:
            array = np.take(array, item, axis=axis)
    return array


@given(shape=SMALL_SHAPES, items=st.lists(INDEX_ITEMS, max_size=5), as_tuple=st.booleans())
def test_basic_index_normalizes_as_numpy_indexes(shape, items, as_tuple):
    index = tuple(items) if as_tuple or len(items) != 1 else items[0]
    array = np.arange(int(np.prod(shape))).reshape(shape)
    expected = numpys_outcome(lambda: array[index])
    found = numpys_outcome(views.basic_index, shape, index)
    if isinstance(expected, type):
        assert found is expected
        return
    normalized, result_shape, is_view = found
    assert result_shape == np.shape(expected)
    assert is_view == isinstance(expected, np.ndarray)  # NumPy gives a scalar, a copy, otherwise
    assert sum(item is not None for item in normalized) == len(shape)  # every axis, once
    for item in normalized:
        assert item is None or (item[0] >= 0 and item[2] >= 0 if isinstance(item, tuple) else item >= 0)
    np.testing.assert_array_equal(read_normalized(array, normalized), expected)


@given(shape=SMALL_SHAPES, items=st.lists(INDEX_ITEMS, max_size=5), as_tuple=st.booleans())
def test_a_remembered_basic_index_is_the_one_computed(shape, items, as_tuple):
    index = tuple(items) if as_tuple or len(items) != 1 else items[0]
    expected = numpys_outcome(views._basic_index, shape, index)
    for _ in range(2):  # computed, then remembered
        assert numpys_outcome(views.basic_index, shape, index) == expected


def test_indices_that_only_compare_equal_are_not_remembered_together():
    """True == 1 and np.int64(1) == 1, but NumPy indexes with each differently (or refuses them)."""
    for lookalike in (True, np.int64(1), 1.0, slice(True, None), slice(np.int64(1), None), slice(1.0, None)):
        assert views.index_key(lookalike) is None
        assert views.index_key((0, lookalike)) is None
    assert views.index_key((1, slice(None, -1), None, Ellipsis)) == (1, (None, -1, None), None, Ellipsis)


def test_basic_index_errors_are_numpys():
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 3"):
        views.basic_index((3,), 5)
    with pytest.raises(IndexError, match="too many indices"):
        views.basic_index((3,), (0, 0))
    with pytest.raises(IndexError, match="ellipsis"):
        views.basic_index((3,), (Ellipsis, Ellipsis))
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        views.basic_index((3,), slice(None, None, 0))


def test_every_axis_taken_by_an_int_is_a_copy_unless_an_ellipsis_keeps_a_view():
    assert views.basic_index((2, 3), (1, -1)) == ((1, 2), (), False)
    assert views.basic_index((2, 3), (1, -1, Ellipsis)) == ((1, 2), (), True)
    assert views.basic_index((2, 3), (None, 0)) == ((None, 0, (0, 1, 3)), (1, 3), True)
    assert views.basic_index((4,), slice(3, 0, -2)) == (((3, -2, 2),), (2,), True)
    assert views.basic_index((4,), slice(3, 3)) == (((0, 1, 0),), (0,), True)  # empty: one form


# ---- result shapes of library calls -------------------------------------------------------------

PRODUCT_SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)


@given(a=PRODUCT_SHAPES, b=PRODUCT_SHAPES)
def test_product_shapes_are_numpys(a, b):
    x, y = np.ones(a), np.ones(b)
    assert_same_outcome(
        numpys_outcome(views.matmul_shape, a, b), numpys_outcome(lambda: np.matmul(x, y).shape)
    )
    assert_same_outcome(numpys_outcome(views.dot_shape, a, b), numpys_outcome(lambda: np.dot(x, y).shape))
    assert_same_outcome(numpys_outcome(views.inner_shape, a, b), numpys_outcome(lambda: np.inner(x, y).shape))


def test_product_shape_errors_name_the_call_and_the_mismatch():
    with pytest.raises(ValueError, match=r"^matmul: .*\(size 4 is different from 3\)"):
        views.matmul_shape((2, 3), (4, 2))
    with pytest.raises(ValueError, match="matmul: Input operand 0 does not have enough dimensions"):
        views.matmul_shape((), (3,))
    with pytest.raises(
        ValueError, match=r"^dot: shapes \(2, 3\) and \(4, 2\) not aligned: 3 \(dim 1\) != 4 \(dim 0\)"
    ):
        views.dot_shape((2, 3), (4, 2))
    with pytest.raises(ValueError, match=r"^inner: shapes \(2, 3\) and \(4, 2\) not aligned"):
        views.inner_shape((2, 3), (4, 2))


@pytest.mark.parametrize(
    ("subscripts", "shapes"),
    [
        ("ij,jk->ik", [(2, 3), (3, 4)]),
        ("ij,jk", [(2, 3), (3, 4)]),
        ("...i,...i", [(2, 1, 3), (4, 3)]),
        ("ii->i", [(3, 3)]),
        ("ij->", [(2, 3)]),
        ("i,i", [(3,), (1,)]),
        ("ij,jk", [(2, 3), (4, 5)]),
        ("ii", [(2, 3)]),
        ("ijk", [(2, 3)]),
    ],
)
def test_einsum_shapes_are_numpys(subscripts, shapes):
    operands = [np.ones(shape) for shape in shapes]
    expected = numpys_outcome(lambda: np.einsum(subscripts, *operands).shape)
    assert_same_outcome(numpys_outcome(lambda: views.einsum_shape(*shapes, subscripts=subscripts)), expected)


def test_einsum_subscripts_of_the_interleaved_form():
    a, b = np.ones((2, 3)), np.ones((3, 4))
    assert views.einsum_subscripts((a, [0, 1], b, [1, 2], [0, 2])) == "AB,BC->AC"
    assert views.einsum_subscripts((a, [0, 1], b, [1, 2])) == "AB,BC->AC"


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("axis", [None, 0, -1, 2])
def test_cumulative_shapes_are_numpys(shape, axis):
    expected = numpys_outcome(lambda: np.cumsum(np.ones(shape), axis=axis).shape)
    assert_same_outcome(numpys_outcome(lambda: views.cumulative_shape(shape, axis=axis)), expected)


@pytest.mark.parametrize(
    ("q", "axis", "keepdims"),
    [(50, None, False), ([10, 90], 0, False), ([[5], [60]], (0, -1), True), (50, 1, True)],
)
def test_statistic_shapes_are_numpys(q, axis, keepdims):
    expected = np.percentile(np.ones((2, 3, 4)), q, axis=axis, keepdims=keepdims).shape
    assert views.statistic_shape((2, 3, 4), q=q, axis=axis, keepdims=keepdims) == expected
    assert views.statistic_shape((2, 3, 4), np.shape(q), axis=axis, keepdims=keepdims) == expected


@pytest.mark.parametrize("pad_width", [1, (1, 2), ((1, 0), (2, 3)), ((1, 2, 3),)])
def test_pad_shapes_are_numpys(pad_width):
    expected = numpys_outcome(lambda: np.pad(np.ones((2, 3)), pad_width).shape)
    assert_same_outcome(numpys_outcome(lambda: views.pad_shape((2, 3), pad_width=pad_width)), expected)


def test_shapes_by_reference_ignore_the_dtype():
    concatenate = ops.BARRIERS["concatenate"].reference
    shape = views.shape_by_reference(concatenate, [(2, 3), (1, 3)], {"axis": 0, "dtype": np.int8})
    assert shape == (3, 3)
    assert views.shape_by_reference(np.tile, [(2, 3)], {"reps": (2, 1, 2)}) == (2, 2, 6)


# ---- index maps ---------------------------------------------------------------------------------


def test_row_maps_read_a_reduction_at_the_row_index():
    assert views.row_map(2, (1,), False) == views.IndexMap(((1, 0),), (0,))
    assert views.row_map(2, (1,), True) == views.IndexMap(((1, 0), (0, 0)), (0, 0))
    assert views.is_row_read(views.row_map(3, (0, 2), False), (4,), (0, 2), False)
    assert views.is_row_read(views.IndexMap(((0, 0),), (0,)), (1,), (1,), False)  # extent 1: any map
    assert not views.is_row_read(views.identity_map(2), (2, 3), (1,), False)
    assert views.ignores_axes(views.row_map(2, (1,), False), (1,))
    assert not views.ignores_axes(views.identity_map(2), (1,))


def test_broadcast_input_maps_drop_leading_and_unit_axes():
    identity = views.identity_map(2)
    assert views.broadcast_input_map(identity, (3,), (2, 3)) == views.IndexMap(((0, 1),), (0,))
    assert views.broadcast_input_map(identity, (1, 3), (2, 3)) == views.IndexMap(((0, 0), (0, 1)), (0, 0))
    assert views.broadcast_input_map(identity, (), (2, 3)) == views.IndexMap((), ())


def test_contiguous_strides_count_elements():
    assert views.contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert views.contiguous_strides((0, 3)) == (3, 1)
    assert views.contiguous_strides(()) == ()


def test_a_strided_view_of_an_empty_array_is_empty():
    read = views.strided_view(np.ones((0, 3)), views.identity_map(2), (0, 3), HOST)
    assert read.shape == (0, 3) and read.dtype == np.float64


STEPS = st.lists(
    st.tuples(
        st.sampled_from(["transpose", "slice", "newaxis", "int", "broadcast", "reshape"]),
        st.lists(st.integers(-5, 5), min_size=8, max_size=8),
    ),
    min_size=1,
    max_size=5,
)


def apply_views(array, steps):
    """Random views (never a copy: no integer index takes the last axis)."""
    for kind, numbers in steps:
        ndim = array.ndim
        if kind == "transpose" and ndim:
            array = array.transpose(sorted(range(ndim), key=lambda axis: numbers[axis]))
        elif kind == "slice" and ndim:
            steps_ = [1, 2, -1, -3]
            drawn = [[numbers[(a + shift) % len(numbers)] for shift in range(3)] for a in range(ndim)]
            index = tuple(slice(start, stop, steps_[step % 4]) for start, stop, step in drawn)
            array = array[index]
        elif kind == "newaxis":
            array = array[None]
        elif kind == "int" and ndim > 1 and array.shape[0]:
            array = array[numbers[0] % array.shape[0]]
        elif kind == "broadcast":
            array = dynfuse.numpy.broadcast_to(array, (2, *array.shape))
        elif kind == "reshape":
            sizes = [extent for extent in array.shape if extent != 1]
            array = array.reshape((*sizes, 1) if numbers[0] % 2 else tuple(reversed(sizes)))
    return array


@given(steps=STEPS, shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
def test_view_chains_compose_into_one_strided_read(steps, shape):
    base = np.arange(int(np.prod(shape))).reshape(shape)
    result = apply_views(dynfuse.asarray(base), steps)
    node = result._node
    index_map = views.identity_map(len(node.shape))
    while node.op.kind is OpKind.VIEW:
        child = node.inputs[0]
        index_map = views.view_input_map(
            index_map, node.op.name, dict(node.params), child.shape, result.shape
        )
        if index_map is None:
            return  # a reshape that carries between axes: the scheduler stores its input instead
        node = child
    assert node.is_materialized
    np.testing.assert_array_equal(views.strided_view(base, index_map, result.shape, HOST), np.asarray(result))


def test_reshape_maps_split_and_merge_axes_or_refuse():
    identity = views.identity_map(2)
    merged = views.view_input_map(identity, "reshape", {"shape": (2, 6)}, (12,), (2, 6))
    assert merged == views.IndexMap(((6, 1),), (0,))
    split = views.view_input_map(views.identity_map(3), "reshape", {"shape": (2, 3, 4)}, (6, 4), (2, 3, 4))
    assert split == views.IndexMap(((3, 1, 0), (0, 0, 1)), (0, 0))
    # (4, 3) regrouped as (6, 2): the second axis carries into the first; no affine map does it
    assert views.view_input_map(identity, "reshape", {"shape": (6, 2)}, (4, 3), (6, 2)) is None


def test_common_refinement():
    assert views.common_refinement((24,), (2, 3, 4)) == (2, 3, 4)
    assert views.common_refinement((6, 4), (2, 3, 4)) == (2, 3, 4)
    assert views.common_refinement((6, 4), (4, 6)) is None
    assert views.common_refinement((0, 3), (3, 0)) is None


@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    steps=st.lists(st.sampled_from([1, 2, -1, -2]), min_size=3, max_size=3),
    order=st.permutations([0, 1, 2]),
)
def test_a_layout_s_contiguity_is_numpys(shape, steps, order):
    """What the planner reads of a load's layout without making the view: NumPy's flag."""
    base = np.zeros([extent * 2 for extent in shape], np.float32)
    view = base[tuple(slice(None, None, step) for step in steps[: len(shape)])]
    view = view.transpose([axis for axis in order if axis < len(shape)])
    assert views.is_c_contiguous(view.shape, view.strides, view.itemsize) == view.flags.c_contiguous


def test_the_strides_of_a_read_are_those_of_the_view_it_would_make():
    array = np.zeros((6, 8), np.float64)[::2, 1:]
    maps = {  # the iteration's shape each reads the 3 x 7 array over
        views.identity_map(2): (3, 7),
        views.IndexMap(((0, 1), (1, 0)), (0, 0)): (7, 3),  # transposed
        views.IndexMap(((0, 0), (0, 1)), (1, 0)): (3, 7),  # its row 1 broadcast along axis 0
    }
    for index_map, read in maps.items():
        made = views.strided_view(array, index_map, read, HOST)
        assert views.read_strides(array.strides, index_map, len(read)) == made.strides
