"""``dynfuse.numpy`` in place of ``numpy``: each group of functions against NumPy.

What stays lazy, what falls through to NumPy (counted by name), NumPy's errors, the submodules and
the array API."""

import importlib
import importlib.util
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import execute
from dynfuse.schedule import LibraryStep

from .helpers import outcome

RNG = np.random.default_rng(6)
FLOAT_TOLERANCE = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}


def assert_like_numpy(actual, expected):
    """Same kind of result, dtype and shape; exact for bools and integers, within rounding for floats."""
    if isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for got, want in zip(actual, expected, strict=True):
            assert_like_numpy(got, want)
        return
    if not isinstance(expected, (np.ndarray, np.generic)):  # a shape, a Python number
        assert actual == expected
        return
    assert isinstance(actual, dynfuse.LazyArray), type(actual)
    expected = np.asarray(expected)
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape)  # as recorded
    got = np.asarray(actual)
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected)
        return
    tolerance = FLOAT_TOLERANCE[expected.dtype]
    scale = float(np.nanmax(np.abs(expected), initial=0.0)) if np.isfinite(expected).any() else 0.0
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * scale, equal_nan=True)


def compare(function, *arrays):
    """``function(xp, *arrays)`` with NumPy and with dynfuse: the same result, or the same exception type."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = outcome(function, np, *arrays)
        actual = outcome(
            function, dnp, *(dynfuse.asarray(a) if isinstance(a, np.ndarray) else a for a in arrays)
        )
    if isinstance(expected, type) and issubclass(expected, Exception):
        assert actual is expected, (actual, expected)
    else:
        assert_like_numpy(actual, expected)


def values(dtype, shape, nan=False):
    """Small values of ``dtype`` (negative ones too where it has them), NaN in floats if asked."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.integers(0, 2, shape).astype(bool)
    low = 0 if dtype.kind == "u" else -9
    data = RNG.integers(low, 10, shape).astype(dtype)
    if dtype.kind == "f":
        data = (data / 4).astype(dtype)
        if nan:
            data.flat[:: max(data.size // 3, 1)] = np.nan
    return data


def assert_raises_like_numpy(function, a):
    """``function(xp, a)`` raises with NumPy; with dynfuse it raises the same type, at the call."""
    with pytest.raises(Exception) as numpy_error:
        function(np, a)
    with pytest.raises(Exception) as lazy_error:
        function(dnp, dynfuse.asarray(a))
    assert lazy_error.type is numpy_error.type, (lazy_error.value, numpy_error.value)
    assert dynfuse.stats()["materializations"] == 0


def assert_lazy(*results):
    """Recorded without running anything, and nothing fell back."""
    for result in results:
        assert isinstance(result, dynfuse.LazyArray) and result._node.inputs
    stats = dynfuse.stats()
    assert (stats["materializations"], stats["fallbacks"]) == (0, 0), stats


def library_calls(*arrays):
    """The names of the library calls materializing ``arrays`` would make (nothing runs)."""
    nodes, plan = execute.explain_plan([array._node for array in arrays], dynfuse.registry.BACKENDS["cpu"])
    return [nodes[step.node].op.name for step in plan.steps if isinstance(step, LibraryStep)]


# ---- the namespace itself ---------------------------------------------------------------------


def test_submodules_import_as_numpys_do():
    linalg = importlib.import_module("dynfuse.numpy.linalg")
    from dynfuse.numpy.fft import rfft
    from dynfuse.numpy.random import default_rng

    assert dnp.linalg is linalg and callable(rfft) and callable(default_rng)
    assert dnp.random is importlib.import_module("dynfuse.numpy.random")
    assert dnp.fft is importlib.import_module("dynfuse.numpy.fft")


@pytest.mark.parametrize(
    "name",
    ["float32", "int8", "uint64", "bool", "pi", "e", "inf", "newaxis", "dtype", "finfo", "iinfo", "ndarray"],
)
def test_dtypes_and_constants_are_numpys_own(name):
    assert getattr(dnp, name) is getattr(np, name)


def test_fall_through_gives_numpys_classes_constants_and_modules_as_they_are():
    assert dnp.errstate is np.errstate and dnp.float128 is np.float128 and dnp.ma is np.ma
    assert (
        dnp.random.SeedSequence is np.random.SeedSequence and dnp.linalg.LinAlgError is np.linalg.LinAlgError
    )
    assert dnp.gcd is np.gcd  # a ufunc: on lazy arrays it reaches __array_ufunc__
    assert np.isnan(dnp.nan) and dnp.__array_api_version__ == np.__array_api_version__
    assert dynfuse.stats()["fallbacks"] == 0
    with pytest.raises(AttributeError, match=r"dynfuse\.numpy.*no_such_thing"):
        dnp.no_such_thing  # noqa: B018


def test_what_describes_a_module_does_not_fall_through():
    for module in (dnp.linalg, dnp.random, dnp.fft):  # modules, not packages: NumPy's files stay NumPy's
        assert not hasattr(module, "__path__")
        with pytest.raises(ModuleNotFoundError):
            importlib.util.find_spec(f"{module.__name__}.lapack_lite")
    assert dnp.__path__ != np.__path__ and dnp.__array_namespace_info__ is np.__array_namespace_info__


def test_star_import_and_dir_give_numpys_names():
    namespace = {}
    exec("from dynfuse.numpy import *", namespace)
    assert set(np.__all__) <= set(namespace)
    assert namespace["concatenate"] is dnp.concatenate and namespace["linalg"] is dnp.linalg
    assert {"loadtxt", "concatenate", "sum"} <= set(dir(dnp))


def test_fall_through_functions_run_numpy_and_are_counted_by_name():
    a = values(np.float64, (3, 3)) + 3 * np.eye(3)
    x = dynfuse.asarray(a)
    assert dnp.sort is dnp.sort  # wrapped once
    assert_like_numpy(dnp.sort(x, axis=0), np.sort(a, axis=0))
    assert_like_numpy(dnp.linalg.inv(x), np.linalg.inv(a))
    assert_like_numpy(dnp.fft.rfft(x), np.fft.rfft(a))
    assert_like_numpy(dnp.gcd(x.astype(int), 6), np.gcd(a.astype(int), 6))
    assert dnp.array_equal(x, a) is True
    assert dynfuse.stats()["fallback_names"] == {
        "sort": 1,
        "linalg.inv": 1,
        "fft.rfft": 1,
        "gcd": 1,
        "array_equal": 1,
    }


@pytest.mark.parametrize(
    "write",
    [
        lambda xp, x: xp.copyto(x, 5),
        lambda xp, x: xp.put(x, [0, 2], [7, 8]),
        lambda xp, x: xp.fill_diagonal(x.reshape(2, 2), 9),
        lambda xp, x: xp.add.at(x, [0, 0, 3], 1),
        lambda xp, x: np.copyto(x, 5),  # through __array_function__
        lambda xp, x: xp.copyto(x, x[::-1] * 3, where=x > 1),
        lambda xp, x: xp.putmask(x, x % 2 == 0, [10, 20]),
        lambda xp, x: xp.place(x, x > 0, [5, 6]),
        lambda xp, x: xp.put_along_axis(x.reshape(2, 2), np.array([[1], [0]]), -1, axis=1),
        lambda xp, x: xp.put(x, [5, -9], [1, 2], mode="clip"),
    ],
)
def test_writes_into_a_lazy_array_keep_numpys_aliasing(write):
    """NumPy's functions that write into their first argument write at their line: what was
    recorded before reads the values from before, as in NumPy."""
    expected = np.arange(4)
    before = expected * 2
    write(np, expected)
    x = dynfuse.asarray(np.arange(4)) + 0
    pending = x * 2  # reads x as it was: NumPy would have computed it already
    write(dnp, x)
    assert_like_numpy(x, expected)
    assert_like_numpy(pending, before)
    assert dynfuse.stats()["fallbacks"] == 0


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_clips_or_wraps_its_indices_as_numpys(mode):
    values = np.arange(12.0).reshape(3, 4)
    indices = np.array([[-7, 0], [3, 9]])
    for axis in (None, 0, 1, -1):
        got = dnp.take(dynfuse.asarray(values) * 2, indices, axis=axis, mode=mode)
        assert_like_numpy(got, np.take(values * 2, indices, axis=axis, mode=mode))
    assert dynfuse.stats()["fallbacks"] == 0


# ---- creation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.float32, np.float64])
@pytest.mark.parametrize(
    "create",
    [
        lambda xp, dtype: xp.zeros((2, 3), dtype),
        lambda xp, dtype: xp.ones(4, dtype=dtype),
        lambda xp, dtype: xp.full((3, 1), 1, dtype),
        lambda xp, dtype: xp.empty((2, 2), dtype).shape,
        lambda xp, dtype: xp.arange(1, 7, 2, dtype=dtype),
        lambda xp, dtype: xp.linspace(0, 1, 5, dtype=dtype),
        lambda xp, dtype: xp.eye(3, 4, k=1, dtype=dtype),
        lambda xp, dtype: xp.identity(3, dtype=dtype),
        lambda xp, dtype: xp.tri(3, dtype=dtype),
        lambda xp, dtype: xp.array([[1, 0], [1, 1]], dtype=dtype, ndmin=3),
        lambda xp, dtype: xp.asarray([1, 0, 1], dtype),
        lambda xp, dtype: xp.ascontiguousarray(dtype(1)),
    ],
)
def test_creation_is_numpys(create, dtype):
    compare(create, dtype)


@pytest.mark.parametrize(
    "like",
    [
        lambda xp, x: xp.zeros_like(x),
        lambda xp, x: xp.ones_like(x, dtype=np.int16),
        lambda xp, x: xp.full_like(x, 7),
        lambda xp, x: xp.full_like(a=x, fill_value=2.5, shape=(2, 2)),
        lambda xp, x: xp.empty_like(x).shape,
    ],
)
def test_like_functions_read_only_the_prototypes_shape_and_dtype(like):
    compare(like, values(np.float32, (2, 3)))
    prototype = dynfuse.asarray(np.arange(6.0)) * 2
    like(dnp, prototype)
    like(np, prototype)  # numpy.zeros_like on a lazy array: __array_function__
    assert dynfuse.stats()["materializations"] == 0 and prototype._node.inputs


def test_created_arrays_are_fresh_memory_so_writes_into_them_stay_lazy():
    z = dnp.zeros(5)
    z += dnp.arange(5)
    z *= 2
    assert dynfuse.stats()["materializations"] == 0
    assert_like_numpy(z, np.arange(5.0) * 2)


def test_numpy_creation_like_a_lazy_array_makes_a_lazy_array():
    x = dynfuse.asarray(np.arange(3.0)) * 2
    assert_like_numpy(np.zeros((2, 2), like=x), np.zeros((2, 2)))
    assert_like_numpy(np.arange(1, 4, like=x), np.arange(1, 4))
    assert dynfuse.stats()["fallbacks"] == 0 and x._node.inputs


def test_creation_computes_lazy_arguments():
    x = dynfuse.asarray(np.arange(5.0))
    assert_like_numpy(dnp.linspace(0, x.max(), 3), np.linspace(0, 4.0, 3))
    assert_like_numpy(dnp.full(2, x[1]), np.full(2, 1.0))
    assert dynfuse.stats()["fallbacks"] == 0


@pytest.mark.parametrize(
    "kwargs", [{}, {"indexing": "ij"}, {"sparse": True}, {"copy": False}, {"sparse": True, "indexing": "ij"}]
)
def test_meshgrid_is_recorded_as_views(kwargs):
    x, y, z = np.arange(3), np.linspace(0, 1, 4), np.array([2.0, 5.0])
    compare(lambda xp, *arrays: xp.meshgrid(*arrays, **kwargs), x, y, z)
    dynfuse.reset_stats()
    grids = dnp.meshgrid(dynfuse.asarray(x), dynfuse.asarray(y), **kwargs)
    assert_lazy(*grids)
    with pytest.raises(ValueError, match="indexing"):
        dnp.meshgrid(x, y, indexing="yx")


# ---- random --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng: rng.standard_normal(5),
        lambda rng: rng.random((2, 3), dtype=np.float32),
        lambda rng: rng.integers(0, 10, 6),
        lambda rng: rng.normal(loc=np.arange(3.0), scale=2.0),
        lambda rng: rng.choice(np.arange(10), 4, replace=False),
        lambda rng: rng.permutation(6),
        lambda rng: rng.uniform(-1, 1, size=(2, 2)),
    ],
)
def test_generators_draw_numpys_numbers_as_lazy_arrays(draw):
    assert_like_numpy(draw(dnp.random.default_rng(42)), draw(np.random.default_rng(42)))
    assert_like_numpy(
        draw(dnp.random.Generator(np.random.PCG64(7))), draw(np.random.Generator(np.random.PCG64(7)))
    )
    assert dynfuse.stats()["fallbacks"] == 0


def test_a_lazy_draw_argument_is_computed_and_a_generator_passes_through():
    rng = dnp.random.default_rng(3)
    assert dnp.random.default_rng(rng) is rng
    loc = dynfuse.asarray(np.arange(3.0)) * 10
    assert_like_numpy(rng.normal(loc), np.random.default_rng(3).normal(np.arange(3.0) * 10))
    children = rng.spawn(2)
    assert all(isinstance(child, dnp.random.Generator) for child in children)
    assert isinstance(rng.bit_generator, np.random.PCG64)


def legacy_draws(xp):
    return (
        xp.random.rand(3),
        xp.random.randn(2, 2),
        xp.random.normal(1.0, 2.0, 3),
        xp.random.randint(9, size=4),
    )


def test_legacy_functions_draw_from_numpys_global_state():
    dnp.random.seed(11)
    lazy = legacy_draws(dnp)
    np.random.seed(11)
    assert_like_numpy(lazy, legacy_draws(np))
    state = dnp.random.RandomState(5)
    assert_like_numpy(state.uniform(size=3), np.random.RandomState(5).uniform(size=3))
    assert dynfuse.stats()["fallbacks"] == 0


@pytest.mark.parametrize(
    "shuffle", [lambda xp: xp.random.default_rng(2).shuffle, lambda xp: xp.random.RandomState(2).shuffle]
)
def test_shuffle_in_place_keeps_numpys_aliasing(shuffle):
    expected = np.arange(8)
    shuffle(np)(expected)
    x = dynfuse.asarray(np.arange(8)) + 0
    pending = x + 0
    assert shuffle(dnp)(x) is None
    assert_like_numpy(x, expected)
    assert_like_numpy(pending, np.arange(8))


# ---- reductions and statistics ----------------------------------------------------------------

# (name, function, the library calls it makes: none when it is recorded as fusable ops)
STATISTICS = [
    ("nansum", lambda xp, a: xp.nansum(a, axis=1), []),
    ("nansum keepdims", lambda xp, a: xp.nansum(a, keepdims=True), []),
    ("nanprod", lambda xp, a: xp.nanprod(a, axis=0), []),
    ("ptp", lambda xp, a: xp.ptp(a, axis=1), []),
    ("average", lambda xp, a: xp.average(a, axis=0), []),
    ("average weights", lambda xp, a: xp.average(a, axis=1, weights=np.arange(1, 5)), []),
    ("average returned", lambda xp, a: xp.average(a, weights=np.ones((3, 4)), returned=True), []),
    ("count_nonzero", lambda xp, a: xp.count_nonzero(a), []),
    ("count_nonzero axes", lambda xp, a: xp.count_nonzero(a, axis=(0, -1), keepdims=True), []),
    ("count_nonzero of a comparison", lambda xp, a: xp.count_nonzero(a > 1, axis=1), []),
    ("cumsum", lambda xp, a: xp.cumsum(a), []),
    ("cumsum axis", lambda xp, a: xp.cumsum(a, axis=1, dtype=np.float32), []),
    ("cumprod", lambda xp, a: xp.cumprod(a, axis=0), []),
    ("nancumsum", lambda xp, a: xp.nancumsum(a, axis=0), []),
    ("nancumprod", lambda xp, a: xp.nancumprod(a, axis=1), []),
    ("median", lambda xp, a: xp.median(a, axis=1, keepdims=True), ["median"]),
    ("percentile", lambda xp, a: xp.percentile(a, [10, 90], axis=0), ["percentile"]),
    ("quantile", lambda xp, a: xp.quantile(a, 0.25), ["quantile"]),
    ("quantile array", lambda xp, a: xp.quantile(a, np.array([0.5, 0.75], np.float32), axis=1), ["quantile"]),
    ("nanmean", lambda xp, a: xp.nanmean(a, axis=0), ["nanmean"]),
    ("nanvar", lambda xp, a: xp.nanvar(a, ddof=1), ["nanvar"]),
    ("nanstd", lambda xp, a: xp.nanstd(a, axis=1), ["nanstd"]),
    ("nanmax", lambda xp, a: xp.nanmax(a, axis=0), ["nanmax"]),
    ("nanmin", lambda xp, a: xp.nanmin(a), ["nanmin"]),
    ("nanmedian", lambda xp, a: xp.nanmedian(a, axis=1), ["nanmedian"]),
    ("nanpercentile", lambda xp, a: xp.nanpercentile(a, 50), ["nanpercentile"]),
]


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("name", [case[0] for case in STATISTICS])
def test_statistics_are_numpys(name, dtype):
    _, function, _ = next(case for case in STATISTICS if case[0] == name)
    compare(function, values(dtype, (3, 4), nan=True))


@pytest.mark.parametrize("name", [case[0] for case in STATISTICS])
def test_statistics_are_recorded_as_fusable_ops_or_one_library_call(name):
    _, function, calls = next(case for case in STATISTICS if case[0] == name)
    operand = dynfuse.asarray(values(np.float64, (3, 4), nan=True)) * 1
    result = function(dnp, operand)
    result = result[0] if isinstance(result, tuple) else result
    assert result._node.inputs and operand._node.inputs  # nothing of the data computed yet
    assert dynfuse.stats()["fallbacks"] == 0
    assert library_calls(result) == calls


@pytest.mark.parametrize("shape", [(), (0,), (2, 0)])
@pytest.mark.parametrize(
    "function",
    [
        lambda xp, a: xp.nanpercentile(a, [10, 90], axis=-1),
        lambda xp, a: xp.percentile(a, 30),
        lambda xp, a: xp.nanmean(a),
        lambda xp, a: xp.median(a, axis=0),
        lambda xp, a: xp.cumsum(a, axis=0),
        lambda xp, a: xp.cumprod(a, axis=-1),
        lambda xp, a: xp.count_nonzero(a, axis=-1),
        lambda xp, a: xp.count_nonzero(a, keepdims=True),
    ],
)
def test_statistics_of_empty_and_0d_arrays_are_numpys(function, shape):
    compare(function, np.ones(shape, np.float32))


def test_quantiles_of_two_dimensions_are_numpys():
    compare(
        lambda xp, a: xp.nanpercentile(a, [[5, 50], [60, 95]], axis=(0, -1)), values(np.float64, (2, 3, 4))
    )


def test_statistics_raise_numpys_errors_at_the_call():
    x = dynfuse.asarray(values(np.float64, (3, 4)))
    for error, call in [
        (np.exceptions.AxisError, lambda: dnp.median(x, axis=2)),
        (np.exceptions.AxisError, lambda: dnp.cumsum(x, axis=-3)),
        (np.exceptions.AxisError, lambda: dnp.count_nonzero(x, axis=2)),
        (ValueError, lambda: dnp.count_nonzero(x, axis=(1, -1))),
        (ValueError, lambda: dnp.percentile(x, 150)),
        (ValueError, lambda: dnp.quantile(x, np.array([0.5, 2.0]))),
        (TypeError, lambda: dnp.ptp(x > 0)),
        (TypeError, lambda: dnp.average(x, weights=np.ones(4))),
        (ValueError, lambda: dnp.average(x, axis=0, weights=np.ones(4))),
        (TypeError, lambda: dnp.median(x, no_such_argument=1)),
    ]:
        with pytest.raises(error):
            call()
    assert dynfuse.stats()["materializations"] == 0


def test_weights_that_sum_to_zero_raise_numpys_error_at_the_call():
    x = dynfuse.asarray(values(np.float64, (2, 3)))
    with pytest.raises(ZeroDivisionError):
        dnp.average(x, axis=1, weights=[1.0, -1.0, 0.0])


def test_a_statistic_with_data_in_its_params_falls_back_counted():
    a = values(np.float64, (3, 4))
    where = a > 0
    assert_like_numpy(dnp.nanmean(dynfuse.asarray(a), where=where), np.nanmean(a, where=where))
    assert dynfuse.stats()["fallback_names"] == {"nanmean": 1}


# ---- closeness and the tests of complex values ---------------------------------------------------


def near_values(dtype, size=50_000):
    """Pairs of values of ``dtype`` around the default tolerances' edge, with NaN and infinities."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal(size) * 10.0 ** rng.integers(-9, 4, size)
    b = a * (1 + rng.choice([0.0, 5e-6, 1e-5, 2e-5, -1e-5], size)) + rng.choice([0.0, 5e-9, 2e-8], size)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]
    a[:36], b[:36] = np.repeat(special, 6), np.tile(special, 6)
    with np.errstate(all="ignore"):
        if np.dtype(dtype).kind == "c":
            a, b = a + 1j * b[::-1], b + 1j * a[::-1]
        return a.astype(dtype), b.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.bool_, np.complex64], ids=str)
@pytest.mark.parametrize(
    "call",
    [
        lambda xp, a, b: xp.isclose(a, b),
        lambda xp, a, b: xp.isclose(a, b, equal_nan=True),
        lambda xp, a, b: xp.isclose(a * 2, b[0], rtol=1e-3, atol=0),
        lambda xp, a, b: xp.isclose(1.5, b),
        lambda xp, a, b: xp.allclose(a, b),
        lambda xp, a, b: xp.allclose(a, a * 1, equal_nan=True),
        lambda xp, a, b: xp.allclose(a.reshape(-1, 10), b[:10], atol=100),
    ],
)
def test_isclose_and_allclose_are_numpys_formula_recorded(call, dtype):
    a, b = near_values(dtype)
    compare(call, a, b)
    assert dynfuse.stats()["fallbacks"] == 0


def test_isclose_with_tolerances_that_are_not_finite_is_numpys_with_its_warning():
    a, b = near_values(np.float64)
    with pytest.warns(RuntimeWarning, match="One of rtol or atol is not valid"):
        actual = dnp.isclose(dynfuse.asarray(a), b, atol=np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_like_numpy(actual, np.isclose(a, b, atol=np.nan))


@pytest.mark.parametrize("dtype", [np.complex128, np.float32, np.int64], ids=str)
def test_the_tests_of_complex_values_are_recorded(dtype):
    a, _ = near_values(dtype)
    a[::7] = a[::7].real
    x = dynfuse.asarray(a) * 1
    assert dnp.iscomplexobj(x) == np.iscomplexobj(a) != dnp.isrealobj(x)
    assert np.iscomplexobj(x) == np.iscomplexobj(a)  # through NumPy's function too
    assert dynfuse.stats()["materializations"] == 0  # the dtype says it
    for test in ("isreal", "iscomplex"):
        compare(lambda xp, x, test=test: getattr(xp, test)(x * 1), a)
    assert dynfuse.stats()["fallbacks"] == 0


# ---- shape functions ------------------------------------------------------------------------------

SHAPE_FUNCTIONS = [
    lambda xp, a, b: xp.concatenate([a, b], axis=1),
    lambda xp, a, b: xp.concatenate([a, b], axis=None),
    lambda xp, a, b: xp.concatenate((a, b), dtype=np.float32),
    lambda xp, a, b: xp.concat([a, b[:, :1]], axis=-1),
    lambda xp, a, b: xp.stack([a, b], axis=1),
    lambda xp, a, b: xp.stack([a[0], b[0], a[1]], axis=-1),
    lambda xp, a, b: xp.hstack([a, b]),
    lambda xp, a, b: xp.hstack([a[0], b[1]]),
    lambda xp, a, b: xp.vstack([a, b[0]]),
    lambda xp, a, b: xp.dstack([a, b]),
    lambda xp, a, b: xp.column_stack([a[0], b]),
    lambda xp, a, b: xp.roll(a, 2),
    lambda xp, a, b: xp.roll(a, (1, -1), axis=(0, 1)),
    lambda xp, a, b: xp.tile(a, (2, 1, 2)),
    lambda xp, a, b: xp.repeat(b, 2, axis=0),
    lambda xp, a, b: xp.repeat(b, 3),
    lambda xp, a, b: xp.pad(a, ((1, 0), (2, 1))),
    lambda xp, a, b: xp.pad(a, 1, mode="edge"),
    lambda xp, a, b: xp.pad(a, [1, 2], constant_values=3),
    lambda xp, a, b: xp.diff(a),
    lambda xp, a, b: xp.diff(a, n=2, axis=0, prepend=0, append=a[:1]),
    lambda xp, a, b: xp.atleast_3d(a[0], b, 5),
    lambda xp, a, b: xp.atleast_2d(a[0, 0]),
    lambda xp, a, b: xp.broadcast_arrays(a, b[:1], 2),
    lambda xp, a, b: xp.fliplr(a),
    lambda xp, a, b: xp.flipud(b),
]


@pytest.mark.parametrize(
    "dtypes", [(np.int8, np.uint8), (np.bool_, np.bool_), (np.float32, np.int16), (np.float64,) * 2]
)
@pytest.mark.parametrize("case", range(len(SHAPE_FUNCTIONS)))
def test_shape_functions_are_numpys(case, dtypes):
    compare(SHAPE_FUNCTIONS[case], values(dtypes[0], (2, 3)), values(dtypes[1], (2, 3)))


def test_numpys_own_shape_functions_stay_lazy_on_lazy_arrays():
    x = dynfuse.asarray(np.arange(6.0).reshape(2, 3)) * 2
    results = [
        np.concatenate([x, x]),
        np.stack([x, x]),
        np.hstack([x, x]),
        np.vstack([x, x]),
        np.roll(x, 1),
        np.tile(x, 2),
        np.repeat(x, 2),
        np.pad(x, 1),
        np.diff(x),
        np.atleast_3d(x),
    ]
    assert_lazy(*results)
    assert library_calls(results[0]) == ["concatenate"] and library_calls(results[-2]) == []


def test_ops_around_a_library_call_still_fuse():
    x = dynfuse.asarray(np.arange(6.0).reshape(2, 3))
    y = dnp.concatenate([x * 2, x + 1]).sum(axis=0) * 3
    _, plan = execute.explain_plan([y._node], dynfuse.registry.BACKENDS["cpu"])
    assert [type(step).__name__ for step in plan.steps] == ["KernelStep", "LibraryStep", "KernelStep"]
    assert_like_numpy(
        y, np.concatenate([np.arange(6.0).reshape(2, 3) * 2, np.arange(6.0).reshape(2, 3) + 1]).sum(0) * 3
    )


@pytest.mark.parametrize(
    "function",
    [
        lambda xp, a: xp.concatenate([a, a.T]),
        lambda xp, a: xp.concatenate([a, a], axis=2),
        lambda xp, a: xp.concatenate([a[0, 0], a[0, 0]]),
        lambda xp, a: xp.concatenate([]),
        lambda xp, a: xp.concatenate([a, a.astype(np.float32)], dtype=np.int32),
        lambda xp, a: xp.stack([a, a[0]]),
        lambda xp, a: xp.stack([a, a], axis=3),
        lambda xp, a: xp.stack([]),
        lambda xp, a: xp.vstack([a, a[:, :1]]),
        lambda xp, a: xp.roll(a, (1, 2), axis=(0, 1, 0)),
        lambda xp, a: xp.roll(a, 1, axis=5),
        lambda xp, a: xp.tile(a, 1.5),
        lambda xp, a: xp.repeat(a, -1),
        lambda xp, a: xp.pad(a, ((1, 2), (3, 4), (5, 6))),
        lambda xp, a: xp.pad(a, 1, mode="no such mode"),
        lambda xp, a: xp.pad(a, -1),
        lambda xp, a: xp.diff(a, n=-1),
        lambda xp, a: xp.diff(a[0, 0]),
        lambda xp, a: xp.fliplr(a[0]),
        lambda xp, a: xp.broadcast_arrays(a, a[:, :2]),
    ],
)
def test_shape_functions_raise_numpys_errors_at_the_call(function):
    assert_raises_like_numpy(function, values(np.float64, (2, 3)))


def test_repeat_with_a_count_per_element_falls_back_counted():
    a = values(np.int32, (3,))
    assert_like_numpy(dnp.repeat(dynfuse.asarray(a), [1, 0, 2]), np.repeat(a, [1, 0, 2]))
    assert dynfuse.stats()["fallback_names"] == {"repeat": 1}


SHAPES = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@settings(max_examples=60)
@given(
    shapes=st.lists(SHAPES, min_size=1, max_size=3),
    axis=st.one_of(st.none(), st.integers(-3, 3)),
    kind=st.sampled_from(["concatenate", "stack", "roll", "tile", "pad"]),
)
def test_moving_elements_gives_numpys_shapes_and_errors(shapes, axis, kind):
    arrays = [np.arange(np.prod(shape), dtype=np.int16).reshape(shape) for shape in shapes]
    calls = {
        "concatenate": lambda xp, *a: xp.concatenate(a, axis=axis),
        "stack": lambda xp, *a: xp.stack(a, axis=0 if axis is None else axis),
        "roll": lambda xp, a, *rest: xp.roll(a, len(rest) - 1, axis=axis),
        "tile": lambda xp, a, *rest: xp.tile(a, tuple(shape[0] if shape else 2 for shape in shapes)),
        "pad": lambda xp, a, *rest: xp.pad(a, [(1, len(rest))] * a.ndim if axis is None else axis),
    }
    compare(calls[kind], *arrays)


# ---- products -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
@pytest.mark.parametrize(
    "function",
    [
        lambda xp, a, b: xp.dot(a, b),
        lambda xp, a, b: xp.dot(a[0], b[:, 0]),
        lambda xp, a, b: xp.dot(a[0], b),
        lambda xp, a, b: xp.dot(a[None], b),
        lambda xp, a, b: xp.dot(a, 3),
        lambda xp, a, b: xp.inner(a, b.T),
        lambda xp, a, b: xp.inner(a[0], 2.5),
        lambda xp, a, b: xp.outer(a, b),
        lambda xp, a, b: xp.tensordot(a, b, 1),
        lambda xp, a, b: xp.tensordot(a, b.T, ([1], [1])),
        lambda xp, a, b: xp.tensordot(a, b, 0),
        lambda xp, a, b: xp.einsum("ij,jk->ki", a, b),
        lambda xp, a, b: xp.einsum("ij,jk", a, b),
        lambda xp, a, b: xp.einsum("...j,j", a, b[:, 0]),
        lambda xp, a, b: xp.einsum("ii->i", a[:, :2]),
        lambda xp, a, b: xp.einsum("ii", b[:, :3]),
        lambda xp, a, b: xp.einsum(a, [0, 1], b, [1, 2], [2]),
        lambda xp, a, b: xp.matmul(a, b),
        lambda xp, a, b: a @ b,
    ],
)
def test_products_are_numpys(function, dtype):
    compare(function, values(dtype, (2, 3)), values(dtype, (3, 4)))


def test_products_are_library_calls_or_composed_from_one():
    a, b = dynfuse.asarray(values(np.float64, (2, 3))) + 1, dynfuse.asarray(values(np.float64, (3, 4)))
    results = {
        "dot": dnp.dot(a, b),
        "inner": dnp.inner(a, b.T),
        "einsum": dnp.einsum("ij,jk", a, b),
        "matmul": np.matmul(a, b),
        "tensordot": np.tensordot(a, b, 1),
        "outer": np.outer(a, b),
    }
    assert_lazy(*results.values())
    for name, result in results.items():
        expected = {"tensordot": ["dot"], "outer": []}.get(name, [name])
        assert library_calls(result) == expected, name


def test_a_product_writes_into_a_lazy_out():
    a, b = values(np.float64, (2, 3)), values(np.float64, (3, 4))
    out = dnp.zeros((2, 4))
    assert dnp.dot(dynfuse.asarray(a), b, out=out) is out
    assert_like_numpy(out, a @ b)
    with pytest.raises(ValueError):
        dnp.dot(a, b, out=dnp.zeros((2, 4), np.float32))  # numpy.dot wants its exact dtype
    with pytest.raises(ValueError, match=r"\(4, 2\)"):
        dnp.dot(a, b, out=dnp.zeros((4, 2)))


@pytest.mark.parametrize(
    "function",
    [
        lambda xp, a: xp.dot(a, a),
        lambda xp, a: xp.inner(a, a.T),
        lambda xp, a: xp.einsum("ij,ij->i", a, a.T),
        lambda xp, a: xp.einsum("ijk", a),
        lambda xp, a: xp.einsum("ij,jk", a),
        lambda xp, a: xp.einsum("ij->k", a),
        lambda xp, a: xp.einsum("ii", a),
        lambda xp, a: xp.tensordot(a, a, 1),
        lambda xp, a: xp.tensordot(a, a, ([0, 0], [1, 0])),
        lambda xp, a: xp.matmul(a, a),
    ],
)
def test_products_raise_numpys_errors_at_the_call(function):
    assert_raises_like_numpy(function, values(np.float64, (2, 3)))


@settings(max_examples=60)
@given(a=SHAPES, b=SHAPES, kind=st.sampled_from(["dot", "inner", "matmul", "tensordot", "einsum"]))
def test_products_give_numpys_shapes_and_errors(a, b, kind):
    calls = {
        "dot": lambda xp, x, y: xp.dot(x, y),
        "inner": lambda xp, x, y: xp.inner(x, y),
        "matmul": lambda xp, x, y: xp.matmul(x, y),
        "tensordot": lambda xp, x, y: xp.tensordot(x, y, min(x.ndim, y.ndim, 1)),
        "einsum": lambda xp, x, y: xp.einsum("...i,i...", x, y),
    }
    compare(
        calls[kind],
        np.arange(1, np.prod(a) + 1.0).reshape(a),
        np.arange(np.prod(b), dtype=np.int64).reshape(b),
    )


# ---- linalg.norm ---------------------------------------------------------------------------------

NORMS = [
    {},
    {"keepdims": True},
    {"ord": "fro"},
    {"axis": 1},
    {"axis": 0, "ord": 1},
    {"axis": -1, "ord": np.inf, "keepdims": True},
    {"axis": 0, "ord": -np.inf},
    {"axis": 1, "ord": 0},
    {"axis": 1, "ord": 3},
    {"axis": 0, "ord": -1.5},
    {"ord": 1},
    {"ord": -1, "keepdims": True},
    {"ord": np.inf},
    {"axis": (1, 0), "ord": -np.inf},
]


@pytest.mark.parametrize("dtype", [np.int8, np.float32, np.float64])
@pytest.mark.parametrize("kwargs", NORMS, ids=str)
def test_norms_are_numpys_and_recorded(kwargs, dtype):
    a = values(dtype, (3, 4))
    compare(lambda xp, x: xp.linalg.norm(x, **kwargs), a)
    dynfuse.reset_stats()
    assert_lazy(dnp.linalg.norm(dynfuse.asarray(a), **kwargs), np.linalg.norm(dynfuse.asarray(a), **kwargs))


def test_norms_by_singular_values_fall_back_counted():
    a = values(np.float64, (3, 4))
    compare(lambda xp, x: xp.linalg.norm(x, ord="nuc"), a)
    compare(lambda xp, x: xp.linalg.norm(x, ord=2), a)
    assert dynfuse.stats()["fallback_names"] == {"linalg.norm": 2}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ord": "fro", "axis": 0},
        {"axis": (0, 1, 2)},
        {"axis": (1, 1)},
        {"ord": "bad"},
        {"axis": 1.5},
        {"axis": 3},
    ],
)
def test_norms_raise_numpys_errors(kwargs):
    compare(lambda xp, x: xp.linalg.norm(x, **kwargs), values(np.float64, (3, 4)))


# ---- ufunc methods, __array_function__ and the array API ---------------------------------------------


def test_ufuncs_numpy_has_twice_under_two_names_are_recorded():
    """``radians`` and ``degrees`` are ufuncs of their own, with ``deg2rad``'s and ``rad2deg``'s loops."""
    a = values(np.float32, (2, 3))
    x = dynfuse.asarray(a)
    recorded = [dnp.radians(x), np.radians(x), dnp.degrees(x), np.degrees(x)]
    assert_lazy(*recorded)
    for got, want in zip(recorded, [np.radians(a)] * 2 + [np.degrees(a)] * 2, strict=True):
        assert_like_numpy(got, want)
    assert dynfuse.stats()["fallbacks"] == 0


def test_ufuncs_carry_numpys_methods_and_attributes():
    a, b = values(np.float64, (2, 3)), values(np.int8, (4,))
    x, y = dynfuse.asarray(a), dynfuse.asarray(b)
    recorded = [
        dnp.add.reduce(x, axis=1),
        dnp.subtract.outer(x, y),
        np.multiply.outer(y, x),
        dnp.maximum.reduce(x),
    ]
    assert_lazy(*recorded)
    expected = [
        np.add.reduce(a, axis=1),
        np.subtract.outer(a, b),
        np.multiply.outer(b, a),
        np.maximum.reduce(a),
    ]
    for got, want in zip(recorded, expected, strict=True):
        assert_like_numpy(got, want)
    assert_like_numpy(dnp.add.accumulate(x, axis=1), np.add.accumulate(a, axis=1))
    assert dynfuse.stats()["fallback_names"] == {"add.accumulate": 1}
    assert (dnp.add.nin, dnp.add.identity, dnp.sqrt.nout) == (2, 0, 1)


def test_array_namespace_is_dynfuse_numpy():
    x = dynfuse.asarray(values(np.float32, (2, 3)))
    assert x.__array_namespace__() is dnp and x.__array_namespace__(api_version="2023.12") is dnp
    with pytest.raises(ValueError):
        x.__array_namespace__(api_version="2020.01")

    def softmax(v):  # array API code: the namespace comes from the array
        xp = v.__array_namespace__()
        e = xp.exp(v - xp.max(v, axis=-1, keepdims=True))
        return e / xp.sum(e, axis=-1, keepdims=True)

    result = softmax(x)
    assert_lazy(result)
    assert_like_numpy(result, softmax(np.asarray(x)))


# ---- ndarray attributes that LazyArray does not record ------------------------------------------


@pytest.mark.parametrize(
    ("name", "use"),
    [
        ("argsort", lambda x: x.argsort(axis=0)),
        ("round", lambda x: x.round(1)),
        ("nonzero", lambda x: x.nonzero()),
        ("take", lambda x: x.take([2, 0], axis=1)),
        ("strides", lambda x: x.strides),
        ("tobytes", lambda x: x.tobytes()),
    ],
)
def test_ndarray_attributes_fall_back_counted(name, use):
    a = values(np.float64, (2, 3)) / 3
    assert_like_numpy(use(dynfuse.asarray(a)), use(a))
    assert dynfuse.stats()["fallback_names"] == {f"ndarray.{name}": 1}


@pytest.mark.parametrize(
    "write", [lambda x: x.sort(), lambda x: x.put([0, 1], [7, 8]), lambda x: x.partition(1)]
)
def test_ndarray_methods_that_write_keep_numpys_aliasing(write):
    expected = np.array([3, 1, 2, 0])
    write(expected)
    x = dynfuse.asarray(np.array([3, 1, 2, 0])) + 0
    pending = x * 1
    write(x)
    assert_like_numpy(x, expected)
    assert_like_numpy(pending, np.array([3, 1, 2, 0]))


def test_matrix_transpose_and_device_are_known_at_once():
    x = dynfuse.asarray(values(np.int16, (2, 3, 4))) * 1
    assert x.device == "cpu"
    assert_lazy(x.mT)
    assert_like_numpy(x.mT, np.asarray(x).mT)
    with pytest.raises(ValueError):
        x[0, 0].mT  # noqa: B018


@pytest.mark.parametrize(
    "name", ["sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin", "all", "any"]
)
def test_reductions_show_numpys_signatures(name):
    """Introspection (the array API suite's signature checks, IDEs) sees NumPy's parameters."""
    import inspect

    assert inspect.signature(getattr(dnp, name)) == inspect.signature(getattr(np, name))
    method = getattr(dnp.asarray(np.ones(3)), name)
    assert (
        list(inspect.signature(method).parameters)
        == list(inspect.signature(getattr(np, name)).parameters)[1:]
    )


@pytest.mark.parametrize("pending", [False, True], ids=["computed", "pending"])
def test_dlpack_shares_the_arrays_memory(pending, recorder):
    values = np.arange(6.0).reshape(2, 3)
    x = dnp.asarray(values.copy())
    if pending:
        x = x * 2
    assert x.__dlpack_device__() == (1, 0)
    shared = np.from_dlpack(x)
    np.testing.assert_array_equal(shared, values * (2 if pending else 1))
    shared[0, 0] = -1.0
    assert np.asarray(x)[0, 0] == -1.0
    copied = np.from_dlpack(x, copy=True)
    copied[0, 1] = 99.0
    assert np.asarray(x)[0, 1] != 99.0


def test_containment_deletion_and_generic_alias_are_ndarrays():
    values = np.arange(6.0).reshape(2, 3)
    lazy = dnp.asarray(values.copy()) * 1
    for probe in (3.0, 7.0, [0.0, 1.0, 2.0], [9.0, 9.0, 9.0], np.nan):
        assert (probe in lazy) == (probe in values)
    for array in (lazy, values):
        with pytest.raises(ValueError, match="cannot delete array elements"):
            del array[0]
    assert dynfuse.LazyArray[int, float].__origin__ is dynfuse.LazyArray
    public = {name for name in dir(np.ndarray) if not name.startswith("_") or name.startswith("__")}
    missing = {name for name in public if not hasattr(dynfuse.LazyArray, name)}
    # NumPy's subclass hooks and raw memory interfaces: a lazy array hands its memory out by __array__
    raw = {"__array_interface__", "__array_struct__", "__buffer__"}
    assert missing <= {"__array_finalize__", "__array_wrap__", "__setstate__", *raw}
