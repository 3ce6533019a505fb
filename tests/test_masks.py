"""Boolean masks of an array's shape: ``x[m]`` recorded, and a masked update ``z[m] = f(z[m], c[m])``
computed on whole arrays as ``where(m, f(z, c), z)``, with NumPy's values, casts and warnings."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import registry
from dynfuse.testing.compare import compiling

from .helpers import assert_same

BACKENDS = ["cpu", "cuda-emulator"]


def run_both(program, *arrays, backend="cpu"):
    """``program`` by NumPy and by dynfuse (every kernel compiled), each with the warnings it gave."""
    if registry.unavailable_reason(backend) is not None:
        pytest.skip(registry.unavailable_reason(backend))
    with warnings.catch_warnings(record=True) as numpy_warnings:
        warnings.simplefilter("always")
        expected = program(np, *(a.copy() for a in arrays))
    with compiling(backend), warnings.catch_warnings(record=True) as dynfuse_warnings:
        warnings.simplefilter("always")
        actual = program(dnp, *(dnp.asarray(a.copy()) for a in arrays))
        actual = [dynfuse.evaluate(value) for value in actual]
    said = [str(w.message) for w in dynfuse_warnings if "running it with the reference" not in str(w.message)]
    assert said == [str(w.message) for w in numpy_warnings]
    for got, want in zip(actual, expected, strict=True):
        assert_same(got, want)


def escape_time(xp, c, steps=12):
    z = xp.zeros_like(c)
    count = xp.zeros(c.shape, dtype=np.int64)
    for k in range(steps):
        inside = xp.abs(z) <= 2.0
        count[inside] = k
        z[inside] = z[inside] ** 2 + c[inside]
    return count, z


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_a_masked_update_in_a_loop_runs_as_kernels(dtype, backend):
    real, imaginary = np.meshgrid(np.linspace(-1.6, 1.6, 37), np.linspace(-1.0, 1.0, 23))
    c = (real + 1j * imaginary).astype(dtype)
    run_both(escape_time, c, backend=backend)
    assert dynfuse.stats()["fallback_names"] == {}
    if backend == "cpu":
        assert dynfuse.stats()["kernels_launched"] > 0


def sqrt_of_positives(xp, a):
    a[a > 0] = xp.sqrt(a[a > 0]) * 2 + 1
    return (a,)


def log_of_nonnegatives(xp, a):
    m = a >= 0
    a[m] = xp.log(a[m])
    return (a,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lanes_outside_the_mask_raise_no_warning_numpy_does_not(backend):
    """sqrt is computed where the mask is false too, on the first selected element: no warning
    about the negative values NumPy never takes the root of."""
    a = np.array([[-4.0, 9.0, -1.0, 0.0], [16.0, -np.inf, 2.0, -0.0]])
    run_both(sqrt_of_positives, a, backend=backend)
    assert dynfuse.stats()["fallback_names"] == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_warnings_numpy_gives_are_given(backend):
    a = np.array([-3.0, 0.0, 5.0, -0.5, 1.0])
    run_both(log_of_nonnegatives, a, backend=backend)


def integer_update(xp, a, b):
    m = (a % 3) == 1
    a[m] = a[m] // 3 + b[m]
    return (a,)


def narrowing_update(xp, a, b):
    m = a > 0.25
    a[m] = a[m] * b[m]  # float64 into float32: cast as NumPy's assignment casts
    return (a,)


def float_into_integers(xp, a, b):
    m = a > 2**60
    a[m] = b[m] * 0.5  # float into int64: not a safe cast, NumPy's assignment does it
    return (a,)


@pytest.mark.parametrize(
    "program, arrays",
    [
        (integer_update, (np.arange(2**62, 2**62 + 60, dtype=np.int64), np.arange(60, dtype=np.int32))),
        (narrowing_update, (np.linspace(0, 1, 50, dtype=np.float32), np.linspace(1, 3, 50))),
        (float_into_integers, (np.arange(2**60 - 20, 2**60 + 20, dtype=np.int64), np.linspace(1, 9, 40))),
    ],
    ids=["integers", "narrowing", "float into integers"],
)
def test_values_are_cast_as_numpys_assignment_casts(program, arrays):
    run_both(program, *arrays)


def read_then_written(xp, z):
    m = z > 0.5
    doubled = z[m] * 2
    z[0, 0] = 99.0  # the write comes after the read: the doubled values are the old ones
    z[m] = doubled + 1
    return z, doubled


def read_twice(xp, z):
    m = z < 0.3
    z[m] = z[m] * z[m] - z[m]
    return (z,)


def through_a_view(xp, z):
    row = z[2]
    row[row > 0.5] = row[row > 0.5] * 10
    return z, row


def mixed_operands(xp, z):
    m = z > 0.5
    picked = z[m]
    z[m] = picked + xp.asarray(np.linspace(0, 1, picked.shape[0]))  # not read through the mask
    return (z,)


def selected_and_reduced(xp, z):
    picked = z[z > 0.5]
    return picked, picked.sum(), picked * 2 - 1


def empty_and_full_masks(xp, z):
    none, every = z > 2, z >= 0
    z[none] = z[none] + 1
    z[every] = z[every] * 3
    return z, z[none]


@pytest.mark.parametrize(
    "program",
    [
        read_then_written,
        read_twice,
        through_a_view,
        mixed_operands,
        selected_and_reduced,
        empty_and_full_masks,
    ],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_aliasing_and_selections_are_numpys(program, backend):
    z = np.random.default_rng(5).random((5, 8))
    run_both(program, z, backend=backend)
    assert dynfuse.stats()["fallback_names"] == {}


def test_a_mask_changed_before_the_write_gives_numpys_error():
    for xp in (np, dnp):
        x = xp.asarray(np.arange(10.0))
        m = x > 4
        value = x[m] + 1
        m[:] = x > 2  # seven true now, five values
        with pytest.raises(ValueError):
            x[m] = value
        np.testing.assert_array_equal(np.asarray(x), np.arange(10.0))


UPDATES = {
    "root": lambda xp, a, b: xp.sqrt(a) * 2 + b,
    "logarithm": lambda xp, a, b: xp.log(a) - b,
    "quotient": lambda xp, a, b: a / b,
    "square plus": lambda xp, a, b: a * a + b,
    "integer power": lambda xp, a, b: a**2 - b * 3,
}


@settings(max_examples=60)
@given(
    dtype=st.sampled_from([np.float32, np.float64, np.int64, np.complex128]),
    shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
    update=st.sampled_from(sorted(UPDATES)),
    comparison=st.sampled_from(["greater", "less_equal", "not_equal"]),
    threshold=st.sampled_from([0, 1, -2.5]),
    data=st.data(),
)
def test_random_masked_updates_match_numpy(dtype, shape, update, comparison, threshold, data):
    """``a[m] = f(a[m], b[m])`` for masks of every count, special values included: NumPy's values and
    warnings."""
    a, b = (data.draw(hnp.arrays(dtype, shape)) for _ in range(2))

    def program(xp, a, b):
        m = getattr(xp, comparison)(a.real if a.dtype.kind == "c" else a, threshold)
        a[m] = UPDATES[update](xp, a[m], b[m])
        return (a,)

    run_both(program, a, b)


def test_an_error_numpy_raises_is_raised_at_the_line_and_nothing_is_written():
    for xp in (np, dnp):
        a = xp.zeros(6) + 0.0  # dynfuse's pending: an array the update may rebind
        m = a >= 0
        with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
            a[m] = xp.log(a[m])
        np.testing.assert_array_equal(np.asarray(a), np.zeros(6))


def test_a_value_of_another_shape_gets_numpys_error():
    for xp in (np, dnp):
        z = xp.asarray(np.arange(12.0).reshape(3, 4))
        m = z > 4
        with pytest.raises(TypeError, match="0 or 1-dimensional input"):
            z[m] = z[m] + xp.zeros((2, 1))  # (2, 7): values of two dimensions
        np.testing.assert_array_equal(np.asarray(z), np.arange(12.0).reshape(3, 4))


def augmented_updates(xp, x, y):
    m = x > 0.5
    x[m] += 1
    x[m] *= y[m]
    x[x < 0.2] -= y[x < 0.2] * 2  # the mask made twice: two masks of the same values
    return (x,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_augmented_masked_updates_are_numpys(backend):
    rng = np.random.default_rng(2)
    run_both(augmented_updates, rng.random((6, 7)), rng.random((6, 7)), backend=backend)


def test_a_mask_made_twice_still_updates_whole_arrays():
    rng = np.random.default_rng(3)
    x, y = rng.random((6, 7)), rng.random((6, 7))
    with compiling("cpu"):
        lazy = dnp.asarray(x) + 0  # pending: the update rebinds it to its where
        lazy[lazy < 0.2] -= dnp.asarray(y)[lazy < 0.2] * 2
        assert lazy._node.op.name == "where"
        expected = x.copy()
        expected[x < 0.2] -= y[x < 0.2] * 2
        assert_same(lazy, expected)


REDUCTIONS_OF_SELECTIONS = {
    "sum": lambda xp, a: a[a > 0.5].sum(),
    "mean": lambda xp, a: xp.mean(a[a > 0.5]),
    "var": lambda xp, a: a[a > 0].var(ddof=1),
    "std, kept axis": lambda xp, a: a[a < 0].std(keepdims=True),
    "max": lambda xp, a: a[a < 0].max(),
    "min of squares": lambda xp, a: (a[a > 0] ** 2).min(),
    "product": lambda xp, a: (a[a > 1] * 0.5).prod(),
    "any": lambda xp, a: (a[a > 1] > 2).any(),
    "all": lambda xp, a: (a[a > 1] > 1).all(axis=0),
    "sum in float32": lambda xp, a: a[a > 0].sum(dtype=np.float32),
    "centred": lambda xp, a: ((a[a > 0] - a[a > 0].mean(keepdims=True)) ** 2).sum(),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("name", sorted(REDUCTIONS_OF_SELECTIONS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_of_selections_run_on_whole_arrays(name, dtype, backend):
    """``x[m].sum()`` is ``where(m, x, -0.0).sum()``, a max's neutral -inf, and so on: NumPy's
    values (sums within rounding), no compaction in the plan."""
    rng = np.random.default_rng(4)
    values = (rng.standard_normal((9, 11)) * 3).astype(dtype)
    program = REDUCTIONS_OF_SELECTIONS[name]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program(np, values)
    except ValueError:  # a max of nothing selected
        with compiling(backend), pytest.raises(ValueError, match="zero-size array"):
            dynfuse.evaluate(program(dnp, dnp.asarray(values)))
        return
    run_both(lambda xp, a: (program(xp, a),), values, backend=backend)
    if dtype is np.bool_:
        return  # most of these select nothing from bools: NumPy's empty cases, through its indexing
    with compiling(backend), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = program(dnp, dnp.asarray(values))
        if isinstance(result, dynfuse.LazyArray) and not result._node.inputs:
            return  # computed at its line (a sum NumPy would raise about, a one-element selection)
        assert "masked_select" not in dynfuse.explain(result)


def test_a_loop_whose_selection_changes_replays_one_plan():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 300))
    with compiling("cpu"):
        lazy = dnp.asarray(x)
        means = [float(lazy[lazy > threshold].mean()) for threshold in np.linspace(-1, 1, 8)]
        assert dynfuse.stats()["replays"] >= 6  # the counts differ, the plan does not
    np.testing.assert_allclose(means, [x[x > t].mean() for t in np.linspace(-1, 1, 8)], rtol=1e-12)
