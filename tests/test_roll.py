"""``np.roll`` as an index map: read through a wrap inside kernels, never copied, exact on every backend.

A roll's result is an array of its own (NumPy's is a copy), so writes through it or into what it
rolled are checked too; its errors are NumPy's, raised where it is called.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import registry

from .helpers import backend

KERNEL_BACKENDS = [
    "groups",
    "cpu",
    pytest.param("cuda-emulator", marks=pytest.mark.slow),
    pytest.param("cuda", marks=pytest.mark.gpu),
]


def laplacian(xp, z):
    return xp.roll(z, 1, 0) + xp.roll(z, -1, 0) + xp.roll(z, 1, 1) + xp.roll(z, -1, 1) - 4 * z


# Programs of one array ``z`` (int64: every result exact), each reading rolls the way programs do:
# of a buffer and of a computed value, sliced, flipped, transposed, reduced along and across the
# rolled axis, rolled twice, scanned.
PROGRAMS = {
    "stencil": lambda xp, z, s, a: laplacian(xp, z) * z,
    "of a computed value": lambda xp, z, s, a: xp.roll(z * 3 - 1, s, a) + z,
    "sliced": lambda xp, z, s, a: xp.roll(z, s, a)[1:, ::2] - 1,
    "flipped": lambda xp, z, s, a: xp.roll(z, s, a)[::-1] + z[::-1],
    "of a slice": lambda xp, z, s, a: xp.roll(z[:, 1:], s, a) * 2,
    "transposed": lambda xp, z, s, a: xp.roll(z.T, s, a) + z.T,
    "summed along every axis": lambda xp, z, s, a: (
        xp.roll(z + 1, s, a).sum(axis=0)[None, :] + xp.roll(z, s, a).sum(axis=1)[:, None]
    ),
    "rolled twice": lambda xp, z, s, a: xp.roll(xp.roll(z, s, a), 3, a) - z,
    "scanned": lambda xp, z, s, a: xp.roll(z, s, a).cumsum(axis=1),
    "of a reduction": lambda xp, z, s, a: xp.roll(z.sum(axis=0), s, 0) + z,
    "broadcast": lambda xp, z, s, a: xp.roll(z[:, :1], s, a) + z,
    "flattened": lambda xp, z, s, a: xp.roll(z * 2, s) + z,
}


@pytest.mark.parametrize("kernel_backend", KERNEL_BACKENDS)
@given(
    z=hnp.arrays(
        np.int64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=6),
        elements=st.integers(-9, 9),
    ),
    shift=st.one_of(st.integers(-13, 13), st.tuples(st.integers(-7, 7), st.integers(-7, 7))),
    axis=st.sampled_from([0, 1, -1, (0, 1), (1, 1)]),
    program=st.sampled_from(sorted(PROGRAMS)),
)
def test_a_roll_reads_what_numpys_copy_holds(kernel_backend, z, shift, axis, program):
    if isinstance(shift, tuple) != isinstance(axis, tuple):
        axis = (0, 1) if isinstance(shift, tuple) else 0
    function = PROGRAMS[program]
    expected = function(np, z, shift, axis)
    with backend(kernel_backend):
        result = np.asarray(function(dnp, dynfuse.asarray(z), shift, axis))
    np.testing.assert_array_equal(result, expected)
    assert dynfuse.stats()["fallbacks"] == 0


@st.composite
def rolls(draw):
    """An array of any dtype and layout (strided, flipped, transposed), and a shift and axis for it."""
    dtype = draw(st.sampled_from(["bool", "uint8", "int32", "float16", "float32", "float64"]))
    values = draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)))
    layouts = {"as is": values, "flipped": values[::-1], "transposed": values.T, "strided": values[..., ::2]}
    values = layouts[draw(st.sampled_from(sorted(layouts)))]
    axis = draw(st.one_of(st.none(), st.integers(-values.ndim, values.ndim - 1)))
    return values, draw(st.integers(-9, 9)), axis


@pytest.mark.parametrize("kernel_backend", KERNEL_BACKENDS)
@given(case=rolls())
def test_a_roll_of_any_dtype_and_layout_moves_every_value(kernel_backend, case):
    values, shift, axis = case
    expected = np.roll(values, shift, axis)
    with backend(kernel_backend):
        lazy = dynfuse.asarray(values)
        read = np.asarray(dnp.roll(lazy, shift, axis))  # a kernel that reads the buffer through a wrap
        computed = np.asarray(dnp.roll(lazy.copy(), shift, axis))  # and one that moves a computed value
    for result in (read, computed):
        assert result.dtype == expected.dtype
        np.testing.assert_array_equal(result, expected)
        np.testing.assert_array_equal(np.signbit(result), np.signbit(expected))


@pytest.mark.parametrize("kernel_backend", KERNEL_BACKENDS)
@pytest.mark.parametrize(
    ("shape", "shift", "axis"),
    [
        ((300, 257), (5, -7), (0, 1)),
        ((3, 70001), 12345, 1),
        ((70001, 3), -2, 0),
        ((40, 50, 60), (1, -1), (0, 2)),
    ],
)
def test_long_rows_and_threads_read_rolls_in_runs(kernel_backend, shape, shift, axis):
    """Vectorized runs between the points where a load wraps, rows shared between threads, and
    reductions along and across the rolled axes."""
    x = np.random.default_rng(0).integers(-50, 50, shape).astype(np.float64)
    lazy = dynfuse.asarray(x)
    rolled = np.roll(x, shift, axis)
    for reduce in (None, 0, -1):
        with backend(kernel_backend):
            got = dnp.roll(lazy * 2, shift, axis) - lazy
            want = rolled * 2 - x
            if reduce is not None:
                got, want = got.sum(axis=reduce), want.sum(axis=reduce)
            got = np.asarray(got)
        np.testing.assert_array_equal(got, want)
    assert dynfuse.stats()["fallbacks"] == 0


@backend("cpu")
def test_a_periodic_stencil_is_one_kernel_that_copies_nothing():
    z = dynfuse.asarray(np.arange(20.0).reshape(4, 5))
    total = (laplacian(dnp, z) ** 2).sum()
    plan = dynfuse.explain(total)
    assert "1 kernel(s), 0 library call(s)" in plan, plan
    assert "% 4" in plan and "% 5" in plan  # loads that wrap around each axis
    assert float(total) == (laplacian(np, np.arange(20.0).reshape(4, 5)) ** 2).sum()
    assert dynfuse.stats()["kernels_launched"] == 1


@backend("cpu")
def test_a_time_loop_of_rolls_is_a_kernel_a_step():
    """Each step reads the last one at five places: inlined into one another, the work would grow
    with every step; each step is one kernel, reading the last step's two arrays."""
    rng = np.random.default_rng(1)
    u0, v0 = rng.random((16, 16)), rng.random((16, 16))
    u, v = dynfuse.asarray(u0), dynfuse.asarray(v0)
    nu, nv = u0, v0
    for _ in range(6):
        u, v = u + 0.1 * laplacian(dnp, u) - u * v * v, v + 0.05 * laplacian(dnp, v) + u * v * v
        nu, nv = nu + 0.1 * laplacian(np, nu) - nu * nv * nv, nv + 0.05 * laplacian(np, nv) + nu * nv * nv
    plan = dynfuse.explain(u, v)
    assert "6 kernel(s), 0 library call(s)" in plan, plan
    np.testing.assert_allclose(np.asarray(u), nu, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(v), nv, rtol=1e-12)


def test_a_roll_is_an_array_of_its_own():
    x = dynfuse.asarray(np.arange(6.0))
    rolled = dnp.roll(x, 2)
    x[0] = 100.0  # a write after the roll is not seen by it
    assert np.asarray(rolled).tolist() == [4.0, 5.0, 0.0, 1.0, 2.0, 3.0]
    rolled[1] = -1.0  # nor does a write into it reach what it rolled
    assert np.asarray(x).tolist() == [100.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert np.asarray(rolled).tolist() == [4.0, -1.0, 0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("shift", "axis"), [(1, 2), (1, -3), ((1, 2), 0), ([[1]], 0), (1, (0, 5)), (1.5, 0), ((1, 2, 3), (0, 1))]
)
def test_bad_shifts_and_axes_raise_numpys_errors(shift, axis):
    x = np.zeros((3, 4))
    try:
        np.roll(x, shift, axis)
    except Exception as error:
        with pytest.raises(type(error)):
            dnp.roll(dynfuse.asarray(x), shift, axis)
    else:
        np.testing.assert_array_equal(
            np.asarray(dnp.roll(dynfuse.asarray(x), shift, axis)), np.roll(x, shift, axis)
        )


@pytest.mark.parametrize("run_at_once", [False, True], ids=["recorded", "direct"])
def test_shifts_of_every_kind_and_empty_arrays(run_at_once, monkeypatch):
    """Recorded, or run at once on a small computed array (``ops._roll``'s blocks, the flattened
    array's for no axis): NumPy's values and layout."""
    monkeypatch.setattr(dynfuse.config, "tiers", run_at_once)
    monkeypatch.setattr(registry, "backend", "cpu")
    x = np.arange(12).reshape(3, 4)
    lazy = dynfuse.asarray(x)
    for shift, axis in [
        (np.int8(-5), 1),
        (np.array([1, 2]), (0, 1)),
        (0, 0),
        (7, None),
        (3, ()),
        (-1, (1, 1, 0)),
    ]:
        rolled = dnp.roll(lazy, shift, axis)
        if run_at_once:  # a computed array, not a pending node
            assert not rolled._node.inputs
        np.testing.assert_array_equal(np.asarray(rolled), np.roll(x, shift, axis))
    transposed = dnp.roll(dynfuse.asarray(x.T), 5)
    np.testing.assert_array_equal(np.asarray(transposed), np.roll(x.T, 5))
    assert np.asarray(transposed).flags.c_contiguous
    assert np.asarray(dnp.roll(dynfuse.asarray(np.zeros((0, 3))), 2, 0)).shape == (0, 3)
    assert np.asarray(dnp.roll(dynfuse.asarray(np.float64(2.5)), 1)) == 2.5
    shift = dynfuse.asarray(np.array(2))  # a shift that is data: NumPy runs the call
    np.testing.assert_array_equal(np.asarray(dnp.roll(lazy, shift, 1)), np.roll(x, 2, 1))
