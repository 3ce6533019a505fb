"""Index maps: a chain of views read through one affine map lands on the elements NumPy's views do."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dynfuse
from dynfuse import views
from dynfuse.devices import HOST
from dynfuse.ops import OpKind

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
