"""Gathers: integer-array indexing, ``take`` and ``take_along_axis`` read inside kernels.

The data is read at the positions the index arrays give (negative ones from the end), fused with
what consumes the result; the result's axes are laid out as NumPy lays them. An index out of
bounds raises NumPy's IndexError where it is written.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dynfuse
import dynfuse.numpy as dnp

from .helpers import backend

KERNEL_BACKENDS = [
    "numpy",
    "groups",
    "cpu",
    pytest.param("cuda-emulator", marks=pytest.mark.slow),
    pytest.param("cuda", marks=pytest.mark.gpu),
]


@st.composite
def indexed(draw):
    """An array (of any layout) and an index of integer arrays, integers and slices for it, each
    index array of its own dtype and shape (broadcasting with the others)."""
    dtype = draw(st.sampled_from(["int64", "float64", "float32", "uint8", "bool"]))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    values = draw(hnp.arrays(dtype, shape, elements=hnp.from_dtype(np.dtype(dtype), allow_nan=False)))
    layouts = {"as is": values, "flipped": values[::-1], "transposed": values.T}
    values = layouts[draw(st.sampled_from(sorted(layouts)))]
    block = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    items = []
    for extent in values.shape:
        kind = draw(st.sampled_from(["array", "array", "slice", "int"]))
        if kind == "slice":
            start = draw(st.integers(-extent, extent))
            step = draw(st.sampled_from([1, 2, -1]))
            items.append(slice(start, None, step))
        elif kind == "int":
            items.append(draw(st.integers(-extent, extent - 1)))
        else:
            index_dtype = draw(st.sampled_from(["int64", "int32", "int8", "uint8", "uint64"]))
            low = 0 if index_dtype.startswith("u") else -extent
            own = block[draw(st.integers(0, len(block))) :]  # broadcasts with the others
            items.append(draw(hnp.arrays(index_dtype, own, elements=st.integers(low, extent - 1))))
    items = items[: draw(st.integers(1, len(items)))]
    if not any(isinstance(item, np.ndarray) for item in items):
        items[0] = np.array([0, -1])
    return values, tuple(items)


PROGRAMS = {
    "read": lambda xp, x, index: x[index],
    "of a computed value": lambda xp, x, index: (x * 3)[index] + 1,
    "summed": lambda xp, x, index: (x * 2)[index].sum(axis=-1),
    "compared": lambda xp, x, index: (x - 1)[index] > x.max(),
}


@pytest.mark.parametrize("kernel_backend", KERNEL_BACKENDS)
@given(case=indexed(), program=st.sampled_from(sorted(PROGRAMS)))
def test_a_gather_reads_what_numpys_indexing_copies(kernel_backend, case, program):
    values, index = case
    function = PROGRAMS[program]
    with np.errstate(all="ignore"):
        if (values.dtype == np.bool_ and program != "read") or program == "summed":
            values = values.astype(np.int64)  # sums exact in any order
        try:
            expected = function(np, values, index)
        except (IndexError, np.exceptions.AxisError):
            pytest.skip("NumPy refuses this reduction of an empty or 0-d gather")
        with backend(kernel_backend):
            result = np.asarray(function(dnp, dynfuse.asarray(values), index))
    assert result.dtype == expected.dtype
    assert result.shape == np.shape(expected)
    np.testing.assert_array_equal(result, expected)
    assert dynfuse.stats()["fallbacks"] == 0


@pytest.mark.parametrize("kernel_backend", KERNEL_BACKENDS)
def test_a_softmax_cross_entropy_gathers_its_targets_in_the_kernel_that_averages_them(kernel_backend):
    rng = np.random.default_rng(0)
    z, labels = rng.standard_normal((300, 10)), rng.integers(0, 10, 300)

    def loss(xp, z):
        p = xp.exp(z - z.max(axis=1, keepdims=True))
        p = p / p.sum(axis=1, keepdims=True)
        return -xp.log(p[xp.arange(len(labels)), labels]).mean()

    with backend(kernel_backend):
        lazy = loss(dnp, dynfuse.asarray(z))
        explanation = str(dynfuse.explain(lazy))
        result = float(lazy)
    np.testing.assert_allclose(result, loss(np, z), rtol=1e-12)
    if kernel_backend != "numpy":
        assert "2 kernel(s), 0 library call(s)" in explanation
        assert "a gather reads it at the positions its index arrays give" in explanation
    assert dynfuse.stats()["fallbacks"] == 0


@pytest.mark.parametrize("kernel_backend", KERNEL_BACKENDS)
@pytest.mark.parametrize(
    ("axis", "index"),
    [
        (None, [[3, -1], [0, 2]]),
        (0, [4, 4, -5]),
        (1, np.array([[2], [0]], np.int16)),
        (-1, np.array([], np.int64)),
        (2, np.array(3)),
    ],
)
def test_take_gathers_along_an_axis(kernel_backend, axis, index):
    x = np.arange(5 * 4 * 6, dtype=np.float64).reshape(5, 4, 6) - 40
    expected = np.take(x * 2, index, axis=axis) - 1
    with backend(kernel_backend):
        result = np.asarray(dnp.take(dynfuse.asarray(x) * 2, index, axis=axis) - 1)
    np.testing.assert_array_equal(result, expected)
    assert dynfuse.stats()["fallbacks"] == 0


@pytest.mark.parametrize("kernel_backend", KERNEL_BACKENDS)
@given(
    x=hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)),
    data=st.data(),
)
def test_take_along_axis_reads_each_row_at_its_own_positions(kernel_backend, x, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    if axis is None:
        shape = (data.draw(st.integers(0, 6)),)
        extent = x.size
    else:
        # each axis but ``axis`` of the index broadcasts with the array's
        shape = tuple(
            data.draw(st.integers(0, 4)) if at == axis % x.ndim else data.draw(st.sampled_from([1, n]))
            for at, n in enumerate(x.shape)
        )
        extent = x.shape[axis]
    index = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(-extent, extent - 1)))
    expected = np.take_along_axis(x * 2, index, axis) + x.max()
    with backend(kernel_backend):
        lazy = dynfuse.asarray(x)
        result = np.asarray(dnp.take_along_axis(lazy * 2, index, axis) + lazy.max())
    np.testing.assert_array_equal(result, expected)
    assert dynfuse.stats()["fallbacks"] == 0


def test_an_index_out_of_bounds_raises_numpys_error_where_it_is_written():
    x = dynfuse.asarray(np.arange(12.0).reshape(3, 4)) * 2
    for index, axis, size in [
        (np.array([0, 3]), 0, 3),
        ((slice(None), np.array([-5])), 1, 4),
        ((np.array([1]), 7), 1, 4),
    ]:
        with pytest.raises(IndexError) as raised:
            x[index]
        with pytest.raises(IndexError) as numpys:
            (np.arange(12.0).reshape(3, 4) * 2)[index]
        assert str(raised.value) == str(numpys.value)
        assert f"axis {axis} with size {size}" in str(raised.value)
    with pytest.raises(IndexError, match="out of bounds"):
        dnp.take(x, [12])
    with pytest.raises(IndexError, match="out of bounds"):
        dnp.take_along_axis(x, np.array([[0], [9], [0]]), 1)
    np.testing.assert_array_equal(np.asarray(x), np.arange(12.0).reshape(3, 4) * 2)


def test_an_index_numpy_refuses_raises_numpys_error():
    x = dynfuse.asarray(np.arange(12.0).reshape(3, 4)) * 2
    for index in [np.array([0.5]), (np.array([0, 1]), np.array([0, 1, 2])), (0, 0, np.array([0]))]:
        with pytest.raises(IndexError):
            x[index]
    with pytest.raises(ValueError, match="same number of dimensions"):
        dnp.take_along_axis(x, np.array([0]), 1)


def test_a_pending_index_is_computed_at_its_line_and_checked():
    x = dynfuse.asarray(np.arange(10.0)) + 1
    positions = dynfuse.asarray(np.array([1, 4, 9])) * 2  # 18 is out of bounds
    with pytest.raises(IndexError, match="index 18 is out of bounds for axis 0 with size 10"):
        x[positions]
    positions = dynfuse.asarray(np.array([1, 4, 9])) - 5
    np.testing.assert_array_equal(np.asarray(x[positions] * 2), (np.arange(10.0) + 1)[[-4, -1, 4]] * 2)


@pytest.mark.parametrize("kernel_backend", ["cpu", pytest.param("cuda-emulator", marks=pytest.mark.slow)])
def test_a_loop_of_gathers_replays_with_new_indices(kernel_backend):
    rng = np.random.default_rng(1)
    table = rng.standard_normal((50, 8))
    with backend(kernel_backend):
        lazy = dynfuse.asarray(table)
        for step in range(6):
            rows = rng.integers(-50, 50, 20)
            got = np.asarray(((lazy + step) * 2)[rows].sum(axis=1))
            np.testing.assert_allclose(got, ((table + step) * 2)[rows].sum(axis=1), rtol=1e-13)
    if kernel_backend == "cpu":  # the host's plans replay
        assert dynfuse.stats()["replays"] >= 3


@pytest.mark.parametrize("kernel_backend", KERNEL_BACKENDS)
def test_gathers_of_rolled_reduced_and_large_values(kernel_backend):
    rng = np.random.default_rng(2)
    x = rng.integers(-50, 50, (300, 257)).astype(np.float64)
    rows = rng.integers(-300, 300, 1000)
    columns = rng.integers(0, 257, (1000, 1))
    cases = [
        lambda xp, x: xp.roll(x * 2, 3, 0)[rows] - 1,
        lambda xp, x: (x + 1)[rows, :].sum(axis=0),
        lambda xp, x: (x + 1)[rows[:, None], columns].max(axis=1),
        lambda xp, x: xp.take_along_axis(x - 1, columns[:257].reshape(1, -1) % 300, 0),
        lambda xp, x: (x.T * 2)[::2, rows[:5]].sum(),
    ]
    for case in cases:
        with backend(kernel_backend):
            result = np.asarray(case(dnp, dynfuse.asarray(x)))
        np.testing.assert_array_equal(result, case(np, x))
    assert dynfuse.stats()["fallbacks"] == 0


# ---- scatters: writes through index arrays --------------------------------------------------------


SCATTERS = {
    "assigned, the last write wins": lambda xp, a, i, v: a.__setitem__(i, v),
    "added, buffered": lambda xp, a, i, v: a.__setitem__(i, a[i] + v),
    "added at, accumulating": lambda xp, a, i, v: xp.add.at(a, i, v),
    "multiplied at": lambda xp, a, i, v: xp.multiply.at(a, i, v),
    "maximum at, through a view": lambda xp, a, i, v: xp.maximum.at(a[::-1], i, v),
}


@pytest.mark.parametrize("kernel_backend", KERNEL_BACKENDS)
@given(
    a=hnp.arrays(np.int64, st.integers(1, 8), elements=st.integers(-50, 50)),
    data=st.data(),
    scatter=st.sampled_from(sorted(SCATTERS)),
)
def test_a_scatter_writes_what_numpy_writes_and_earlier_reads_keep_the_old_values(
    kernel_backend, a, data, scatter
):
    index = data.draw(hnp.arrays(np.int64, st.integers(0, 6), elements=st.integers(-len(a), len(a) - 1)))
    value = data.draw(
        st.one_of(st.integers(-9, 9), hnp.arrays(np.int64, index.shape, elements=st.integers(-9, 9)))
    )
    expected = a * 2
    read_before = expected + 1
    SCATTERS[scatter](np, expected, index, value)
    with backend(kernel_backend):
        lazy = dynfuse.asarray(a) * 2  # pending: the write computes it first
        before = lazy + 1
        SCATTERS[scatter](dnp, lazy, dynfuse.asarray(index), value)
        np.testing.assert_array_equal(np.asarray(lazy), expected)
        np.testing.assert_array_equal(np.asarray(before), read_before)
    assert dynfuse.stats()["fallbacks"] == 0


def test_a_scatter_out_of_bounds_raises_numpys_error_and_writes_nothing():
    lazy = dynfuse.asarray(np.arange(5.0)) * 2
    for write in (lambda: lazy.__setitem__(np.array([1, 5]), 0.0), lambda: dnp.add.at(lazy, [1, 7], 1.0)):
        with pytest.raises(IndexError, match="out of bounds"):
            write()
    np.testing.assert_array_equal(np.asarray(lazy), np.arange(5.0) * 2)


# ---- selections whose length the values decide ----------------------------------------------------


SELECTIONS = {
    "nonzero": lambda xp, a: xp.nonzero(a * 2),
    "where": lambda xp, a: xp.where(a > 0),
    "flatnonzero": lambda xp, a: xp.flatnonzero(a - 1),
    "argwhere": lambda xp, a: xp.argwhere(a < 0),
    "extract": lambda xp, a: xp.extract(a > 0, a * 3),
    "compress": lambda xp, a: xp.compress(a.ravel()[: a.shape[-1]] > 0, a + 1, axis=-1),
    "compress flattened": lambda xp, a: xp.compress(a.ravel() != 0, a * 2),
}


@pytest.mark.parametrize("kernel_backend", KERNEL_BACKENDS)
@given(
    a=hnp.arrays(
        np.int64,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5),
        elements=st.integers(-3, 3),
    ),
    selection=st.sampled_from(sorted(SELECTIONS)),
)
def test_selections_give_numpys_positions_and_values(kernel_backend, a, selection):
    expected = SELECTIONS[selection](np, a)
    with backend(kernel_backend):
        result = SELECTIONS[selection](dnp, dynfuse.asarray(a))
    for got, want in zip(
        *((result, expected) if isinstance(expected, tuple) else ((result,), (expected,))), strict=True
    ):
        got = np.asarray(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert dynfuse.stats()["fallbacks"] == 0


@pytest.mark.parametrize("kernel_backend", ["cpu", pytest.param("cuda-emulator", marks=pytest.mark.slow)])
def test_an_index_changed_where_numpy_sees_it_never_reads_outside_the_array(kernel_backend):
    """Indices are checked where the gather is written; one changed later through memory NumPy can
    see (as a pending read of any array sees such a change) moves the read to the first element,
    never outside the data."""
    with backend(kernel_backend):
        index = dynfuse.evaluate(dynfuse.asarray(np.array([0, 1, 2])) * 1)
        data = dynfuse.evaluate(dynfuse.asarray(np.arange(5.0)) + 1)
        gathered = (data * 2)[index]
        shared = np.asarray(index)  # the index's own memory
        shared[0], shared[1] = 10**12, -(10**12)
        np.testing.assert_array_equal(np.asarray(gathered), [2.0, 2.0, 6.0])
