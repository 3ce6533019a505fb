"""Exactness: where NumPy's answer is exactly determined, or nearly, every fused kernel gives it.

Each test records a short chain of ops on lazy arrays, so that the op under test runs inside a compiled
kernel and reads a value computed there, materializes it, and compares it with NumPy on the same inputs:
bit for bit for bools, integers and the IEEE-exact float ops (NaN where NumPy has NaN, zeros of the same
sign), within a few ulp for transcendentals, and at least as accurately as NumPy for float sums. Each
test also checks that a kernel ran and that nothing fell back to the reference executor, which would
hide a backend's mistake. The module runs over every kernel backend registered: ``groups`` runs NumPy
op by op inside its kernels, so there it checks the planner and the tests themselves.

Two of NumPy's answers come from its loops rather than from IEEE 754, and are required as NumPy gives
them on the machine that runs the tests, where they hold for every length and layout: the zero that
elementwise ``maximum`` and ``minimum`` return for equal zeros of both signs, and float ``power`` by a
scalar exponent of 0.5, 2 or -1, which NumPy computes as ``sqrt``, ``square`` or ``reciprocal``. Where
NumPy's answer depends on the layout of its SIMD lanes (the zero that a max or min reduction, fmax,
fmin or clip picks among equal zeros of both signs), only the value is compared, not the sign.
"""

import numpy as np
import pytest

import dynfuse
from dynfuse import registry

# The CUDA backend's kernels too, emulated on the host (tests/test_cuda_emulator.py): slow, as each
# kernel is compiled by the host's C++ compiler; in make test-slow. On a GPU, in make test-gpu.
KERNEL_BACKENDS = [
    "groups",
    "cpu",
    pytest.param("cuda-emulator", marks=pytest.mark.slow),
    pytest.param("cuda", marks=pytest.mark.gpu),
]

# Complex kernels, whose reductions and orderings run interpreted, are tested in test_complex.py
ALL_DTYPES = list(dynfuse.dtypes.REAL_DTYPES)
FLOAT_DTYPES = [dtype for dtype in ALL_DTYPES if dtype.kind == "f"]
INTEGER_DTYPES = [dtype for dtype in ALL_DTYPES if dtype.kind in "iu"]
BOOL_AND_INTEGER_DTYPES = [dtype for dtype in ALL_DTYPES if dtype.kind in "biu"]

# For transcendentals: results this close to zero are compared absolutely, where ulps mean nothing.
NEAR_ZERO = {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-15}


@pytest.fixture(autouse=True, params=KERNEL_BACKENDS)
def kernel_backend(request):
    """Every test runs once per kernel backend, then the previous backend is restored."""
    reason = registry.unavailable_reason(request.param)
    if reason is not None:
        pytest.skip(reason)
    saved = registry.backend
    dynfuse.set_backend(request.param)
    yield request.param
    dynfuse.set_backend(saved)


# ---- helpers ------------------------------------------------------------------------------------


def keep(x):
    """``x * True``: an op that changes no value of any dtype (NaN, -0.0, ±inf and integer extremes stay
    as they are), so that the op after it reads a value computed in the kernel rather than a load."""
    return x * True


def run_fused(function, *inputs):
    """``function`` on lazy arrays wrapping ``inputs`` and on the inputs themselves, as (dynfuse's result,
    NumPy's). Checks that at least one compiled kernel computed it and that nothing fell back."""
    with np.errstate(all="ignore"):
        expected = np.asarray(function(*inputs))
        dynfuse.reset_stats()
        result = function(*[dynfuse.asarray(value) for value in inputs])
        assert isinstance(result, dynfuse.LazyArray), type(result)
        actual = np.asarray(result)
    stats = dynfuse.stats()
    assert stats["kernels_launched"] > 0, "no kernel ran: the backend was not exercised"
    assert stats["fallbacks"] == 0, stats["fallback_names"]
    return actual, expected


def assert_exact(actual, expected, zero_signs=True):
    """Same dtype, shape and values; NaN where NumPy has NaN (any payload); zeros of the same sign where
    ``zero_signs`` (True, False, or a mask broadcast against the result) says so."""
    np.testing.assert_array_equal(actual, expected, strict=True)
    if expected.dtype.kind == "f":
        compared = ~np.isnan(expected) & np.broadcast_to(zero_signs, expected.shape)
        np.testing.assert_array_equal(
            np.signbit(actual[compared]), np.signbit(expected[compared]), err_msg="signs of zeros differ"
        )


def single_signed_zeros(x, axis):
    """Where a max or min of ``x`` along ``axis`` has a definite sign if it is zero: where its slice does
    not hold zeros of both signs. Between those NumPy's reduction picks by the layout of its SIMD lanes
    (the first zero of a row here, the last one there), which no other loop reproduces."""
    zeros = x == 0
    return ~((zeros & np.signbit(x)).any(axis=axis) & (zeros & ~np.signbit(x)).any(axis=axis))


def assert_ulp_close(actual, expected, max_ulp=4, near_zero=0.0):
    """Within ``max_ulp`` units in the last place of NumPy's result, or ``near_zero`` of it absolutely;
    NaN, ±inf and the sign of exact zeros exactly where NumPy has them."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, actual.shape)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected), err_msg="NaN positions differ")
    infinite = np.isinf(actual) | np.isinf(expected)
    np.testing.assert_array_equal(actual[infinite], expected[infinite], err_msg="infinities differ")
    zeros = (actual == 0) & (expected == 0)
    np.testing.assert_array_equal(
        np.signbit(actual[zeros]), np.signbit(expected[zeros]), err_msg="signs of zeros differ"
    )
    finite = np.isfinite(expected)
    got, want = actual[finite].astype(np.float64), expected[finite].astype(np.float64)
    error = np.abs(got - want)
    with np.errstate(over="ignore"):  # the spacing of the largest finite value is inf
        ulp = np.spacing(np.abs(expected[finite])).astype(np.float64)
    bad = (error > max_ulp * ulp) & (error > near_zero)
    if bad.any():
        worst = np.argmax(np.where(bad, error / ulp, 0))
        raise AssertionError(
            f"{bad.sum()} results more than {max_ulp} ulp from NumPy's; worst: {got[worst]!r} for "
            f"{want[worst]!r} ({error[worst] / ulp[worst]:.1f} ulp)"
        )


def assert_as_accurate_as_numpy(actual, numpy_result, exact):
    """No further from the exact answer than NumPy's own result is, with a factor 2 of slack, plus one ulp
    of the result: a different summation order may be more accurate than NumPy's, never much less."""
    assert actual.dtype == numpy_result.dtype and actual.shape == numpy_result.shape
    exact = np.asarray(exact, np.float64)
    numpy_error = np.abs(numpy_result.astype(np.float64) - exact)
    error = np.abs(actual.astype(np.float64) - exact)
    bound = 2 * numpy_error + np.spacing(np.abs(numpy_result)).astype(np.float64)
    assert (error <= bound).all(), f"error {np.max(error - bound)} beyond NumPy's ({np.max(numpy_error)})"


def edge_values(dtype):
    """The values where exactness is tested: extremes, zeros and NaN of both signs, ±1, ±inf, subnormals."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.array([False, True])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = {info.min, info.min + 1, -7, -2, -1, 0, 1, 2, 3, 7, 2**53, 2**53 + 1, info.max - 1, info.max}
        return np.array(sorted(value for value in values if info.min <= value <= info.max), dtype)
    info = np.finfo(dtype)
    tiny, normal, huge = info.smallest_subnormal, info.smallest_normal, info.max
    positive = [tiny, normal, 0.5, 1, 2.5, huge]
    signed = [-np.inf, *(-v for v in reversed(positive)), -0.0, 0.0, *positive, np.inf]
    return np.array([*signed, np.nan, -np.nan], dtype)  # NaN of both signs: copysign reads it


def pairs(values):
    """A column and a row of ``values``: broadcast together, a binary op sees every pair."""
    return values[:, None], values[None, :]


def reduction_matrix(dtype, shape=(8, 9)):
    """Edge values at random places, with ties; for floats NaN in some rows and columns, not all."""
    values = edge_values(dtype)
    if dtype.kind == "f":
        values = values[~np.isnan(values)]
    matrix = np.random.default_rng(7).choice(values, shape)
    if dtype.kind == "f":
        for row, column in [(1, 3), (1, 6), (4, 0), (6, 8), (6, 2)]:
            matrix[row, column] = np.nan
    return matrix


# ---- NaN propagation ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["maximum", "minimum", "fmax", "fmin"])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_maximum_minimum_propagate_nan_and_fmax_fmin_ignore_it(dtype, name):
    """Every pair of edge values, in both orders. Equal zeros of both signs give the zero NumPy gives for
    maximum and minimum; fmax and fmin pick one that depends on where NumPy's SIMD loop ends, so there
    only their values are compared."""
    ufunc = getattr(np, name)
    actual, expected = run_fused(lambda x, y: ufunc(keep(x), keep(y)), *pairs(edge_values(dtype)))
    assert_exact(actual, expected, zero_signs=name in ("maximum", "minimum"))


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_max_min_reductions_propagate_nan_and_arg_reductions_find_the_first(dtype, name, axis):
    """A NaN anywhere wins max and min; argmax and argmin give the first NaN's index, else the first of
    equal extremes (-0.0 and 0.0 are equal)."""
    x = reduction_matrix(dtype)
    actual, expected = run_fused(lambda v: getattr(keep(v), name)(axis=axis), x)
    assert_exact(actual, expected, zero_signs=single_signed_zeros(x, axis))


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_float16_products_that_overflow_on_the_way(axis):
    """Along the innermost axis NumPy multiplies float16 in float32 and rounds once (16**4 passes
    65504, then a 0 brings it back); across it, every step is rounded (inf, then inf * 0 is NaN)."""
    x = np.array([[16, 16, 16], [16, 0, 16], [16, 16, 0.5]], np.float16).repeat(2, axis=0)
    actual, expected = run_fused(lambda v: keep(v).prod(axis=axis), x)
    assert_exact(actual, expected)


CLIP_BOUNDS = {
    "array bounds with NaN": lambda x, low, high: np.clip(keep(x), keep(low), keep(high)),
    "scalar bounds": lambda x, low, high: np.clip(keep(x), -1.0, 2.0),
    "a NaN scalar bound": lambda x, low, high: np.clip(keep(x), 0.0, np.nan),
    "a lower bound only": lambda x, low, high: np.clip(keep(x), keep(low), None),
}


@pytest.mark.parametrize("bounds", sorted(CLIP_BOUNDS))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_clip_propagates_nan_from_the_value_and_the_bounds(dtype, bounds):
    """NumPy's clip is minimum(maximum(x, low), high), so a NaN value or bound gives NaN. Which zero a
    tie of zeros gives differs between scalar and array bounds in NumPy: zero signs are not compared."""
    x = edge_values(dtype)
    low = np.roll(x, 3)
    high = np.where(np.arange(x.size) % 4 == 0, np.nan, np.abs(np.roll(x, 5))).astype(dtype)
    actual, expected = run_fused(CLIP_BOUNDS[bounds], x, low, high)
    assert_exact(actual, expected, zero_signs=False)


# ---- signed zeros -------------------------------------------------------------------------------

SIGNED_ZERO_VALUES = [-0.0, 0.0, -0.3, 0.3, -0.5, 0.5, -0.7, -1.0, 1.0, -1.5, 1.5, -2.5, 2.5, -np.inf, np.inf]
SIGNED_ZERO_CASES = {
    "negative": lambda x, y: -keep(x),
    "zero minus": lambda x, y: 0.0 - keep(x),
    "add": lambda x, y: keep(x) + keep(y),
    "subtract": lambda x, y: keep(x) - keep(y),
    "multiply": lambda x, y: keep(x) * keep(y),
    "divide": lambda x, y: keep(x) / keep(y),
    "times negative zero": lambda x, y: keep(x) * -0.0,
    "absolute": lambda x, y: np.abs(keep(x)),
    "copysign": lambda x, y: np.copysign(keep(x), keep(y)),
    "copysign of one": lambda x, y: np.copysign(1.0, keep(x)),
    "sign": lambda x, y: np.sign(keep(x)),  # NumPy: sign(-0.0) is +0.0
    "floor": lambda x, y: np.floor(keep(x)),
    "ceil": lambda x, y: np.ceil(keep(x)),  # ceil(-0.3) is -0.0
    "trunc": lambda x, y: np.trunc(keep(x)),
    "rint": lambda x, y: np.rint(keep(x)),  # ties to even: rint(-0.5) is -0.0, rint(2.5) is 2.0
    "sqrt": lambda x, y: np.sqrt(keep(x)),  # sqrt(-0.0) is -0.0
    "maximum with scalar 0.0": lambda x, y: np.maximum(keep(x), 0.0),
    "maximum with scalar -0.0": lambda x, y: np.maximum(keep(x), -0.0),
    "minimum with scalar 0.0": lambda x, y: np.minimum(keep(x), 0.0),
    "minimum with scalar -0.0": lambda x, y: np.minimum(keep(x), -0.0),
}


@pytest.mark.parametrize("case", sorted(SIGNED_ZERO_CASES))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_signed_zeros(dtype, case):
    """Ops whose result is a zero of a definite sign: every pair of values for binary ones."""
    x, y = pairs(np.array(SIGNED_ZERO_VALUES, dtype))
    actual, expected = run_fused(SIGNED_ZERO_CASES[case], x, y)
    assert_exact(actual, expected)


SIGNED_ZEROS = {
    "negative": lambda rng: np.full((5, 24), -0.0),
    "positive": lambda rng: np.full((5, 24), 0.0),
    "mixed": lambda rng: np.where(rng.random((5, 24)) < 0.5, -0.0, 0.0),
}


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("zeros", sorted(SIGNED_ZEROS))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_max_min_reductions_of_signed_zeros(dtype, zeros, name, axis):
    """Zeros of one sign reduce to a zero of that sign. Among zeros of both signs the result is a zero
    of the sign NumPy's SIMD lanes happen to pick, so there its sign is not compared."""
    x = SIGNED_ZEROS[zeros](np.random.default_rng(2)).astype(dtype)
    actual, expected = run_fused(lambda v: getattr(keep(v), name)(axis=axis), x)
    assert_exact(actual, expected, zero_signs=single_signed_zeros(x, axis))


# ---- division and remainder ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod"])
@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
def test_integer_division_by_zero_by_minus_one_and_of_negatives(dtype, name):
    """x // 0 and x % 0 are 0; MIN // -1 wraps to MIN; floor_divide and remainder round toward -inf
    (Python's rule), fmod toward zero (C's)."""
    ufunc = getattr(np, name)
    actual, expected = run_fused(lambda x, y: ufunc(keep(x), keep(y)), *pairs(edge_values(dtype)))
    assert_exact(actual, expected)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_a_nan_keeps_its_sign_through_a_kernel(dtype):
    """copysign and signbit read the sign of a NaN the kernel loaded, which NumPy's float16 conversions
    keep (a GPU's own conversion of a float16 NaN gives the positive NaN)."""
    x, y = pairs(edge_values(dtype))
    assert_exact(*run_fused(lambda a, b: np.copysign(keep(a), b), x, y))
    assert_exact(*run_fused(lambda a, b: np.copysign(65520.0, b) * keep(a), x, y))
    assert_exact(*run_fused(lambda a: np.signbit(a) ^ np.isinf(keep(a)), edge_values(dtype)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_arithmetic_keeps_a_nans_sign_on_the_host(dtype, kernel_backend):
    """A product of a NaN keeps its sign on the host, as NumPy's loops there do. IEEE 754 leaves the sign
    of an arithmetic NaN open, and a GPU's float and half units return their one positive NaN, as CuPy's
    kernels do there."""
    if kernel_backend == "cuda":
        pytest.skip("a GPU's arithmetic returns the positive NaN")
    x, y = pairs(edge_values(dtype))
    assert_exact(*run_fused(lambda a, b: np.copysign(keep(a), keep(b)), x, y))
    assert_exact(*run_fused(lambda a: np.signbit(keep(a)), edge_values(dtype)))


# NumPy refuses a negative Python int with an unsigned array.
PYTHON_DIVISORS = [
    (dtype, d) for dtype in INTEGER_DTYPES for d in (0, -1, 3, -3) if d >= 0 or dtype.kind == "i"
]


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod"])
@pytest.mark.parametrize(("dtype", "divisor"), PYTHON_DIVISORS, ids=str)
def test_integer_division_by_a_python_int(dtype, divisor, name):
    """The divisor is a kernel parameter: division by zero and MIN // -1 must not trap at run time."""
    ufunc = getattr(np, name)
    actual, expected = run_fused(lambda x: ufunc(keep(x), divisor), edge_values(dtype))
    assert_exact(actual, expected)


@pytest.mark.parametrize("name", ["divide", "floor_divide", "remainder", "fmod"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_float_division_and_remainder_by_zero_inf_and_nan(dtype, name):
    """NumPy's rules: x // 0 is ±inf by the zero's sign, 0 // 0 and x % 0 are NaN, inf // y is NaN,
    x % inf is x for x >= 0 and inf for x < 0, remainder takes the sign of the divisor; floor_divide is
    NumPy's divmod (1 // 0.1 is 9, not floor(1 / 0.1) = 10)."""
    values = np.concatenate([edge_values(dtype), np.array([0.1, -0.1, 0.7, 3.0, -3.0, 5.5, -5.5], dtype)])
    ufunc = getattr(np, name)
    actual, expected = run_fused(lambda x, y: ufunc(keep(x), keep(y)), *pairs(values))
    assert_exact(actual, expected)


# ---- integer overflow, shifts, power ------------------------------------------------------------

WRAPPING_OPS = ["add", "subtract", "multiply", "negative", "absolute", "square", "positive", "invert", "sign"]


@pytest.mark.parametrize("name", WRAPPING_OPS)
@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
def test_integer_arithmetic_wraps(dtype, name):
    """Two's complement wraparound at every width: abs(MIN) is MIN, -MIN is MIN, -1 as uint is MAX."""
    ufunc = getattr(np, name)
    values = edge_values(dtype)
    if ufunc.nin == 1:
        actual, expected = run_fused(lambda x: ufunc(keep(x)), values)
    else:
        actual, expected = run_fused(lambda x, y: ufunc(keep(x), keep(y)), *pairs(values))
    assert_exact(actual, expected)


@pytest.mark.parametrize("name", ["left_shift", "right_shift"])
@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
def test_shifts_by_the_bit_width_or_more_and_by_negative_amounts(dtype, name):
    """NumPy defines what C leaves undefined: a left shift by the width or more is 0, a right shift is 0,
    or -1 for negatives; a negative amount counts as a huge one."""
    info, bits = np.iinfo(dtype), dtype.itemsize * 8
    amounts = [0, 1, bits - 1, bits, bits + 1, info.max] + ([-1, -bits, info.min] if info.min else [])
    ufunc = getattr(np, name)
    values, amounts = edge_values(dtype)[:, None], np.array(amounts, dtype)[None, :]
    actual, expected = run_fused(lambda x, y: ufunc(keep(x), keep(y)), values, amounts)
    assert_exact(actual, expected)


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
def test_integer_power_wraps(dtype):
    """Integer power is exact repeated multiplication modulo 2**bits; 0**0 is 1."""
    info, bits = np.iinfo(dtype), dtype.itemsize * 8
    exponents = [e for e in (0, 1, 2, 3, 7, bits - 1, bits, 63, 64, 100, 1000) if e <= info.max]
    bases, exponents = edge_values(dtype)[:, None], np.array(exponents, dtype)[None, :]
    actual, expected = run_fused(lambda x, y: np.power(keep(x), y), bases, exponents)
    assert_exact(actual, expected)


# ---- casts --------------------------------------------------------------------------------------

# Floats whose conversion to an integer truncates to a value in range (others are undefined in C, and
# NumPy's result depends on the platform): the ones that fit the target are used.
FLOATS_TO_TRUNCATE = [-0.0, 0.0, 0.4, -0.4, 0.9, -0.9, 1.0, -1.0, 1.5, -2.7, 7.99, 100.25, -100.25, 127.0]
FLOATS_TO_TRUNCATE += [-128.0, 255.0, 256.0, 1000.5, 32767.0, -32768.0, 65504.0, 2.0**31 - 128, -(2.0**31)]
FLOATS_TO_TRUNCATE += [2.0**32 - 256, 2.0**53, 2.0**63 - 1024, -(2.0**63), 2.0**63, 2.0**64 - 2048]
# Floats that round differently to a narrower float: ties to even, double rounding through float32
# (1 + 2**-11 + 2**-30 rounds up to float16 directly, to 1.0 through float32), overflow and underflow.
FLOATS_TO_ROUND = [1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-30, 1 + 2**-24, 1 + 2**-24 + 2**-60]
FLOATS_TO_ROUND += [65504.0, 65519.99, 65520.0, 2.0**-25, 2.0**-25 * 1.0001, 2.0**-24 * 1.5, 1e-8, -1e-8]
FLOATS_TO_ROUND += [3.4028235677973366e38, 3.4028235e38, 1e-46, 1e300, -1e300, 0.1, 1 / 3]
# Integers that round to a float: ties to even at float16's, float32's and float64's precision, and
# one that rounds wrongly through float64 on its way to float32.
INTEGERS_TO_ROUND = [2049, 2051, 65519, 65520, -65520, 2**24 + 1, 2**24 + 3, 2**60 + 2**36 + 1]
INTEGERS_TO_ROUND += [2**53 + 1, 2**53 + 3, 2**63 - 1, 2**64 - 1, -(2**63)]


def cast_sources(source, target):
    """Values of ``source`` whose conversion to ``target`` NumPy defines on every platform."""
    if source.kind == "b":
        return np.array([False, True])
    if source.kind in "iu":
        info = np.iinfo(source)
        extra = [value for value in INTEGERS_TO_ROUND if info.min <= value <= info.max]
        return np.concatenate([edge_values(source), np.array(extra, source)])
    if target.kind in "iu":
        info = np.iinfo(target)
        with np.errstate(over="ignore"):
            candidates = np.array(FLOATS_TO_TRUNCATE, source)
        fits = [np.isfinite(value) and info.min <= int(value) <= info.max for value in candidates]
        return candidates[np.array(fits)]
    with np.errstate(over="ignore", under="ignore"):
        return np.concatenate([edge_values(source), np.array(FLOATS_TO_ROUND, source)])


@pytest.mark.parametrize("target", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("source", ALL_DTYPES, ids=str)
def test_astype_between_all_dtype_pairs(source, target):
    """Integers wrap; floats truncate toward zero; floats and integers round to nearest, ties to even,
    directly to the target (never through float32 or float64); NaN, -0.0 and subnormals cast to bool by
    truthiness (NaN is True, -0.0 False); float16 overflows to inf above 65519.99."""
    actual, expected = run_fused(lambda x: keep(x).astype(target), cast_sources(source, target))
    assert_exact(actual, expected)


# ---- float16 ------------------------------------------------------------------------------------


def float16_values():
    """Normal, subnormal, large (sums and products overflow), zero, infinite and NaN float16 values."""
    rng = np.random.default_rng(16)
    scales = np.repeat([1e-6, 1e-3, 1.0, 30.0, 3e4], 200)
    with np.errstate(over="ignore"):
        values = (rng.standard_normal(scales.size) * scales).astype(np.float16)
    return np.concatenate([values, edge_values(np.float16)])


FLOAT16_CASES = {
    "add": lambda x, y, z: keep(x) + keep(y),
    "subtract": lambda x, y, z: keep(x) - keep(y),
    "multiply": lambda x, y, z: keep(x) * keep(y),
    "divide": lambda x, y, z: keep(x) / keep(y),
    "square": lambda x, y, z: np.square(keep(x)),
    "sqrt": lambda x, y, z: np.sqrt(keep(x)),
    "less": lambda x, y, z: keep(x) < keep(y),
    "equal": lambda x, y, z: keep(x) == keep(y),
    # Each op rounds to float16: computing the chain in float32 and rounding once would differ.
    "a chain rounded at each op": lambda x, y, z: (keep(x) * keep(y) + keep(x)) / keep(y) - 0.5,
    "plus float32 is float32": lambda x, y, z: keep(x) + keep(z),
    # A Python float is rounded to float16 first: x * 0.1 is x * 0.0999755859375.
    "times a Python float": lambda x, y, z: keep(x) * 0.1,
    "plus a Python float beyond float16": lambda x, y, z: keep(x) + 70000.0,
    "mean of two": lambda x, y, z: (keep(x) + keep(y)) / 2,
}


@pytest.mark.parametrize("case", sorted(FLOAT16_CASES))
def test_float16_ops_round_each_result_to_float16(case):
    """NumPy computes a float16 op in float32 and rounds its result to float16, which for + - * / sqrt
    is the correctly rounded float16 result; each op of a chain rounds."""
    x = float16_values()
    y = np.roll(x, 7)
    z = np.random.default_rng(32).standard_normal(x.size).astype(np.float32)
    actual, expected = run_fused(FLOAT16_CASES[case], x, y, z)
    assert_exact(actual, expected)


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_float16_sum_and_mean_accumulate_beyond_float16(name, axis):
    """A float16 sum summed in float16 stalls near 2048; NumPy sums contiguous rows in float32 pairwise
    (and a mean in float32 always). Along axis 0 it adds row by row in float16, losing up to 1%:
    the kernel must be at least about as accurate, not equal."""
    x = np.random.default_rng(5).uniform(0, 1, (300, 200)).astype(np.float16)
    actual, expected = run_fused(lambda v: getattr(keep(v), name)(axis=axis), x)
    exact = getattr(x.astype(np.float64), name)(axis=axis)
    assert_as_accurate_as_numpy(actual, expected, exact)


# ---- weak Python scalars ------------------------------------------------------------------------

WEAK_SCALAR_CASES = {
    "uint8 < 300": ("uint8", lambda x: keep(x) < 300),
    "uint8 >= -1": ("uint8", lambda x: keep(x) >= -1),
    "int8 == 1000": ("int8", lambda x: keep(x) == 1000),
    "int8 != -1000": ("int8", lambda x: keep(x) != -1000),
    "uint64 > -1": ("uint64", lambda x: keep(x) > -1),
    "int64 < 2**63": ("int64", lambda x: keep(x) < 2**63),
    "int64 > -2**100": ("int64", lambda x: keep(x) > -(2**100)),
    "int64 == 2**53 + 1, exactly": ("int64", lambda x: keep(x) == 2**53 + 1),
    "int64 < 2.0**63, in float64": ("int64", lambda x: keep(x) < 2.0**63),
    "uint64 + (2**64 - 1) wraps": ("uint64", lambda x: keep(x) + (2**64 - 1)),
    "uint8 - 1 wraps": ("uint8", lambda x: keep(x) - 1),
    "int8 * 100 wraps": ("int8", lambda x: keep(x) * 100),
    "int16 ** 3 wraps": ("int16", lambda x: keep(x) ** 3),
    "int8 * 2.5 is float64": ("int8", lambda x: keep(x) * 2.5),
    "uint64 + 1.0 is float64": ("uint64", lambda x: keep(x) + 1.0),
    "int64 > 2.5": ("int64", lambda x: keep(x) > 2.5),
    "bool + True is bool": ("bool", lambda x: keep(x) + True),
    "bool * 2 is int64": ("bool", lambda x: keep(x) * 2),
    "float32 * 1e300, inf in float32": ("float32", lambda x: keep(x) * 1e300),
    "float32 + 1e-50, zero in float32": ("float32", lambda x: keep(x) + 1e-50),
    "float16 * 0.1 is float16": ("float16", lambda x: keep(x) * 0.1),
}


def edge_values_and_more(dtype):
    """Edge values, and for floats a few ordinary ones that round when a Python float scales them."""
    values = edge_values(dtype)
    if values.dtype.kind == "f":
        values = np.concatenate([values, np.array([0.1, 3.0, 7.5, -100.0, 1e4, 0.3], dtype)])
    return values


@pytest.mark.parametrize("case", sorted(WEAK_SCALAR_CASES))
def test_weak_python_scalars_in_kernels(case):
    """NEP 50: a Python scalar takes the array's dtype when it fits; an out-of-range int still compares
    exactly; a Python float scalar is rounded to the array's float dtype first."""
    dtype, function = WEAK_SCALAR_CASES[case]
    actual, expected = run_fused(function, edge_values_and_more(dtype))
    assert_exact(actual, expected)


SCALAR_EXPONENTS = {
    "a Python float": lambda x, exponent: np.power(keep(x), exponent),
    "a NumPy scalar": lambda x, exponent: np.power(keep(x), x.dtype.type(exponent)),
    "a 0-d array": lambda x, exponent: np.power(keep(x), np.array(exponent, x.dtype)),
    "the ** operator": lambda x, exponent: keep(x) ** exponent,
}


@pytest.mark.parametrize("kind", sorted(SCALAR_EXPONENTS))
@pytest.mark.parametrize("exponent", [0.5, 2.0, -1.0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_power_by_a_scalar_half_two_or_minus_one(dtype, exponent, kind):
    """NumPy's float32 and float64 power by a scalar 0.5, 2 or -1 is sqrt, square or reciprocal, not
    pow: power(-0.0, 0.5) is -0.0 and power(-inf, 0.5) NaN (pow gives 0.0 and inf), and x ** 2 is x * x
    exactly (its general power can be 1 ulp off)."""
    x = np.concatenate([edge_values_and_more(dtype), np.random.default_rng(8).standard_normal(1000)])
    actual, expected = run_fused(lambda v: SCALAR_EXPONENTS[kind](v, exponent), x.astype(dtype))
    assert_exact(actual, expected)


@pytest.mark.parametrize("exponent", [3, 3.0])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_a_cube_is_within_an_ulp_of_numpys_pow(dtype, exponent):
    """``x ** 3`` is NumPy's pow(x, 3); dynfuse multiplies (float32 in double, float64 with fmas):
    within an ulp, and overflow to ±inf, signed zeros, subnormals, NaN and ±inf as pow gives them."""
    rng = np.random.default_rng(9)
    scales = [1.0, 1e-3, 1e3] if dtype == "float16" else [1.0, 1e-30, 1e12, 1e100]
    finite = np.concatenate([rng.standard_normal(2000) * scale for scale in scales])
    with np.errstate(over="ignore"):
        x = np.concatenate([edge_values_and_more(dtype), finite.astype(dtype)])
    actual, expected = run_fused(lambda v: keep(v) ** exponent, x)
    assert_ulp_close(actual, expected, max_ulp=1)


@pytest.mark.parametrize("exponent", [-0.5, 1.5, -1.5])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_half_integer_powers_are_within_two_ulp_of_numpys_pow(dtype, exponent):
    """``x ** -1.5`` (``1.5``, ``-0.5``) is NumPy's pow; dynfuse takes a square root: within two ulp
    across the whole range (one in float32), with pow's ±0, ±inf, NaN and signs at the edges
    (``(-0.0) ** -0.5`` and ``(-inf) ** e``, where the root alone would differ)."""
    rng = np.random.default_rng(10)
    info = np.finfo(dtype)
    magnitudes = 2.0 ** rng.uniform(np.log2(info.smallest_subnormal), np.log2(info.max), 20000)
    with np.errstate(over="ignore"):
        finite = np.concatenate([magnitudes, -magnitudes[:100], rng.random(1000)]).astype(dtype)
    x = np.concatenate([edge_values_and_more(dtype), finite])
    actual, expected = run_fused(lambda v: keep(v) ** exponent, x)
    assert (keep(dynfuse.asarray(x)) ** exponent)._node.op.name != "power"
    assert_ulp_close(actual, expected, max_ulp=1 if dtype == "float32" else 2)


@pytest.mark.parametrize("name", ["less", "greater_equal", "equal", "not_equal"])
@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
def test_comparisons_with_python_ints_of_any_size_in_one_kernel(dtype, name):
    """A kernel's signature holds a scalar's Python type, not its value, so one compiled comparison
    must answer exactly for every int, inside the dtype's range or far outside it."""
    ufunc = getattr(np, name)
    info = np.iinfo(dtype)
    scalars = [0, 3, -1, info.max, info.max + 1, info.min - 1, 300, -300, 2**63, 2**64, -(2**70)]
    for position, scalar in enumerate(scalars):
        actual, expected = run_fused(lambda x, s=scalar: ufunc(keep(x), s), edge_values(dtype))
        assert_exact(actual, expected)
        assert position == 0 or dynfuse.stats()["kernels_compiled"] == 0, f"recompiled for {scalar}"


# ---- transcendentals ----------------------------------------------------------------------------

# Where each function's random inputs are drawn, whether results near zero are compared absolutely
# (trigonometric functions near their zeros, logaddexp where the result cancels to about zero), and
# the ulps allowed against NumPy. NumPy's float32 functions are within 2 ulp of the correctly rounded
# result, its float64 ones (libm's) within 1, cbrt within 3: 4 ulp leaves room for a backend's own
# error. float16 functions are computed in float32 and rounded, so two roundings can differ by 1.
TRANSCENDENTALS = {
    "exp": ((-120, 120), False),
    "exp2": ((-160, 160), False),
    "expm1": ((-30, 30), False),
    "log": ((0, 1e6), False),
    "log2": ((0, 1e6), False),
    "log10": ((0, 1e6), False),
    "log1p": ((-1, 1e3), False),
    "sin": ((-1e4, 1e4), True),
    "cos": ((-1e4, 1e4), True),
    "tan": ((-1e4, 1e4), True),
    "arcsin": ((-1, 1), False),
    "arccos": ((-1, 1), False),
    "arctan": ((-1e3, 1e3), False),
    "sinh": ((-100, 100), False),
    "cosh": ((-100, 100), False),
    "tanh": ((-20, 20), False),
    "arcsinh": ((-1e5, 1e5), False),
    "arccosh": ((1, 1e5), False),
    "arctanh": ((-1, 1), False),
    "cbrt": ((-1e6, 1e6), False),
    "arctan2": ((-50, 50), False),
    "hypot": ((-1e3, 1e3), False),
    "power": ((0, 10), False),
    "logaddexp": ((-50, 50), True),
    "logaddexp2": ((-50, 50), True),
}
MAX_ULP = {np.dtype(np.float16): 1, np.dtype(np.float32): 4, np.dtype(np.float64): 4}
# Overflow and underflow thresholds of exp at each precision, small arguments of expm1 and log1p,
# the edges of arcsin's, arccosh's and arctanh's domains (1 ± eps gives NaN on one side).
TRANSCENDENTAL_EDGES = [88.72, 88.73, 89.0, 709.78, 709.79, 710.0, -87.3, -103.9, -104.0, -745.1, -745.2]
TRANSCENDENTAL_EDGES += [11.08, 11.09, -17.3, 1e-5, -1e-5, 1e-10, -1e-10, 1e-30, -1e-30, 1e4 - 1, -3.0, 0.25]


def transcendental_inputs(name, dtype):
    """Random values over the function's domain, then edge values (and every pair of a few of them for
    binary functions). Arguments of sin, cos and tan stay below 1e4 in magnitude."""
    (low, high), _ = TRANSCENDENTALS[name]
    rng = np.random.default_rng(sorted(TRANSCENDENTALS).index(name))
    eps = np.finfo(dtype).eps
    with np.errstate(over="ignore"):
        edges = np.concatenate(
            [edge_values(dtype), np.array([*TRANSCENDENTAL_EDGES, 1 + eps, 1 - eps / 2, -1 - eps], dtype)]
        )
        spread = rng.uniform(low, high, 4000).astype(dtype)
    if name in ("sin", "cos", "tan"):
        edges = edges[~(np.abs(edges) >= 1e4)]
    if getattr(np, name).nin == 1:
        return (np.concatenate([spread, edges]),)
    few = np.array([0.0, -0.0, 0.5, 1.0, -1.0, 2.0, -2.0, 3.0, np.inf, -np.inf, np.nan, 1e-30], dtype)
    x, y = (np.broadcast_to(v, (few.size, few.size)).ravel() for v in pairs(few))
    if name == "power":  # exponents of both signs, bases around 1 and across the range
        other = rng.uniform(-30, 30, spread.size).astype(dtype)
    else:
        other = rng.uniform(low, high, spread.size).astype(dtype)
    return np.concatenate([spread, edges, x]), np.concatenate([other, edges[::-1], y])


@pytest.mark.parametrize("name", sorted(TRANSCENDENTALS))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_transcendentals_within_a_few_ulp(dtype, name):
    """Within a few ulp of NumPy, with NaN for arguments outside the domain (log of a negative,
    arcsin(1 + eps)), inf on overflow, and the sign of exact zeros (sin(-0.0) is -0.0)."""
    ufunc = getattr(np, name)
    _, near_zero = TRANSCENDENTALS[name]
    inputs = transcendental_inputs(name, dtype)
    actual, expected = run_fused(lambda *args: ufunc(*map(keep, args)), *inputs)
    assert_ulp_close(actual, expected, MAX_ULP[dtype], NEAR_ZERO[dtype] if near_zero else 0.0)


# ---- scans --------------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_running_sums_and_products_are_numpys_step_by_step(dtype, name, axis):
    """NumPy accumulates one element after the other, in the result's dtype (int64 for small ints and
    bools, uint64 for small unsigned ones, float16 rounded at every step): so does a fused scan, bit
    for bit, with NaN, ±inf, overflow to inf and integer wrap-around where NumPy has them."""
    x = reduction_matrix(dtype, (7, 40))
    actual, expected = run_fused(lambda v: getattr(np, name)(keep(v), axis=axis), x)
    assert_exact(actual, expected)


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), np.dtype(np.int8), np.dtype(np.float64)], ids=str)
def test_a_running_sum_in_a_requested_dtype(dtype):
    x = (np.arange(60).reshape(3, 20) * 7.25).astype(dtype)
    actual, expected = run_fused(lambda v: np.cumsum(keep(v), axis=1, dtype=np.float32) * 2, x)
    assert_exact(actual, expected)
    actual, expected = run_fused(lambda v: keep(v).cumprod(axis=0, dtype=np.int16), x)
    assert_exact(actual, expected)


def test_running_sums_over_many_columns_and_one_long_row():
    """Axis 0 of a wide array reads columns side by side (the CPU backend's column mode); one long row
    may not be shared between threads, which would each start it over."""
    x = np.random.default_rng(3).standard_normal((50, 300))
    actual, expected = run_fused(lambda v: np.cumsum(keep(v), axis=0), x)
    assert_exact(actual, expected)
    y = np.random.default_rng(4).random(300_000)
    actual, expected = run_fused(lambda v: np.cumsum(keep(v) - 0.5), y)
    assert_exact(actual, expected)


# ---- reductions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [10**7, pytest.param(10**8, marks=pytest.mark.slow)])
def test_float32_sum_is_as_accurate_as_numpys(size):
    """NumPy sums float32 pairwise; a kernel summing 10**7 values one by one in float32 drifts far
    further from the exact sum, and fails."""
    x = np.random.default_rng(0).random(size, dtype=np.float32)
    actual, expected = run_fused(lambda v: keep(v).sum(), x)
    assert_as_accurate_as_numpy(actual, expected, x.sum(dtype=np.float64))


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["sum", "prod"])
@pytest.mark.parametrize("dtype", BOOL_AND_INTEGER_DTYPES, ids=str)
def test_integer_sums_and_products_wrap_in_numpys_dtype(dtype, name, axis):
    """Small integers and bools sum and multiply in int64 or uint64 (bool and int8 sums are int64,
    uint32's uint64), wrapping on overflow."""
    actual, expected = run_fused(lambda x: getattr(keep(x), name)(axis=axis), reduction_matrix(dtype))
    assert_exact(actual, expected)


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_float_products_of_powers_of_two_are_exact(dtype, axis):
    """Products of powers of two never round, in any order: NaN from 0 * inf, the sign of zero from the
    count of negatives."""
    rng = np.random.default_rng(11)
    x = rng.choice(np.array([0.5, 2.0, -1.0, 1.0, -2.0, 0.25], dtype), (6, 9))
    x[1, 2], x[2, 4], x[3, 0], x[3, 5], x[4, 7] = 0.0, -0.0, np.inf, 0.0, np.nan
    actual, expected = run_fused(lambda v: keep(v).prod(axis=axis), x)
    assert_exact(actual, expected)


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["any", "all"])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_any_and_all_by_truthiness(dtype, name, axis):
    """NaN is true and -0.0 false; rows of zeros, of non-zeros, and mixed."""
    values = edge_values(dtype)
    nonzero, zero = np.resize(values[values != 0], 5), np.zeros(5, dtype)
    if dtype.kind == "f":
        zero[::2] = -0.0
    x = np.stack([zero, nonzero, np.where([1, 0, 1, 0, 0], nonzero, zero), zero])
    x[3, 4] = nonzero[-1]  # NaN for floats
    actual, expected = run_fused(lambda v: getattr(keep(v), name)(axis=axis), x)
    assert_exact(actual, expected)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [0, 1, (0, 2), (1, 2), None])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_sums_over_axes_of_a_3d_array(dtype, axis, keepdims):
    """Small whole numbers, so that every summation order gives the exact sum in every dtype."""
    rng = np.random.default_rng(3)
    low = 0 if dtype.kind in "bu" else -4
    x = rng.integers(low, 5, (3, 4, 5)).astype(dtype)
    actual, expected = run_fused(lambda v: (keep(v) * keep(v)).sum(axis=axis, keepdims=keepdims), x)
    assert_exact(actual, expected)


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["sum", "prod", "any", "all"])
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint64", "float16", "float64"])
def test_reductions_over_empty_axes_give_the_identity(dtype, name, axis):
    """A (4, 0) array: sum is 0, prod 1, any False, all True, each in NumPy's result dtype; along
    axis 0 the result itself is empty."""
    x = np.zeros((4, 0), dtype)
    actual, expected = run_fused(lambda v: getattr(keep(v), name)(axis=axis), x)
    assert_exact(actual, expected)


STATISTICS_INPUTS = {
    # An offset far larger than the spread: a one-pass E[x**2] - E[x]**2 variance fails here.
    "float32": lambda rng: (1000 + rng.standard_normal((64, 100))).astype(np.float32),
    "float64": lambda rng: 1e6 + rng.standard_normal((64, 100)),
    "int8": lambda rng: rng.integers(-128, 128, (64, 100)).astype(np.int8),
    "uint32": lambda rng: rng.integers(2**32 - 1000, 2**32, (64, 100)).astype(np.uint32),
    "int64": lambda rng: rng.integers(-(2**40), 2**40, (64, 100)),
    "bool": lambda rng: rng.random((64, 100)) < 0.3,
}


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["mean", "var", "std"])
@pytest.mark.parametrize("kind", sorted(STATISTICS_INPUTS))
def test_mean_var_std(kind, name, axis):
    """In NumPy's dtype (float64 for integers and bools, the float's own otherwise), close to NumPy's
    two-pass result."""
    x = STATISTICS_INPUTS[kind](np.random.default_rng(9))
    actual, expected = run_fused(lambda v: getattr(keep(v), name)(axis=axis), x)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    rtol = 1e-5 if expected.dtype == np.float32 else 1e-6
    np.testing.assert_allclose(actual, expected, rtol=rtol)


# ---- views in kernels ---------------------------------------------------------------------------

VIEW_CASES = {
    "negative steps": lambda x, row, s: x[::-1, ::-2] * row[::-2],
    "transpose": lambda x, row, s: x.T * row[:, None] + x.T,
    "row vector plus column vector": lambda x, row, s: row[None, :] + x[:, 1][:, None],
    "0-d operands": lambda x, row, s: np.maximum(s, x) * s + s,
    "non-contiguous inputs": lambda x, row, s: x[::2, ::3] * x[1::2, 1::3] + x[1::2, ::3],
    "broadcast_to": lambda x, row, s: np.broadcast_to(row, (6, 8)) * x,
    "a view of a computed value": lambda x, row, s: (x * s)[::-1].T + row[::-1, None],
    "a reduction of a view": lambda x, row, s: (x[::-1, ::2] * row[1::2]).sum(axis=0),
}


@pytest.mark.parametrize("case", sorted(VIEW_CASES))
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_views_read_in_kernels(dtype, case):
    """Negative strides, zero strides, transposes and 0-d operands, as loads of a fused kernel."""
    rng = np.random.default_rng(4)
    low = 0 if dtype.kind in "bu" else -3
    x = rng.integers(low, 4, (6, 8)).astype(dtype)
    row = rng.integers(low, 4, 8).astype(dtype)
    scalar = np.array(2, dtype)
    actual, expected = run_fused(VIEW_CASES[case], x, row, scalar)
    assert_exact(actual, expected)
