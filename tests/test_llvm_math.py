"""codegen/llvm_math: the CPU backend's own exp, log, tanh and pow, their accuracy, edges and vector code.

The CPU backend's own exp, log, tanh and pow (``codegen/llvm_math.py``): accuracy against a
reference computed in more precision, the edges of each domain, and that they vectorize."""

import itertools
import re

import numpy as np
import pytest

import dynfuse
from dynfuse import execute
from dynfuse.backends import cpu
from dynfuse.codegen import llvm_math
from dynfuse.codegen.common import C_MATH
from dynfuse.codegen.llvm import ENTRY

from .helpers import on_cpu_leaving_to_numpy

# Where each function's errors show: the reductions' edges (|r| near ln2/2, m near sqrt(2)) are hit
# by the wide spread, cancellation (expm1, log1p, tanh near zero) by the narrow one, and the
# arguments just above 1 (arccosh).
DOMAINS = {
    "exp": (-100, 88),
    "exp2": (-140, 127),
    "expm1": (-30, 30),
    "log": (0, 1e6),
    "log2": (0, 1e6),
    "log10": (0, 1e6),
    "log1p": (-1, 1e3),
    "tanh": (-20, 20),
    "sinh": (-720, 720),
    "cosh": (-720, 720),
    "arcsinh": (-1e6, 1e6),
    "arccosh": (1, 1e6),
    "arctanh": (-1, 1),
    "cbrt": (-1e300, 1e300),
    "arctan": (-1e3, 1e3),
    "arcsin": (-1, 1),
    "arccos": (-1, 1),
}
# Most ulps from the reference: float32 results are a double rounded once; float64 ones carry the
# series' and reductions' rounding (tanh, the inverse hyperbolics and arcsin most: about 2.3).
MAX_ULP = {np.dtype(np.float32): 0.51, np.dtype(np.float64): 3.0}


@pytest.fixture(autouse=True)
def on_the_cpu_backend(monkeypatch):
    """The generator's own code for every function, those the CPU target leaves to NumPy's loop
    (``library_ops``) too."""
    with on_cpu_leaving_to_numpy(monkeypatch, ()):
        yield


def test_the_table_covers_every_function():
    assert set(DOMAINS) == llvm_math.FUNCTIONS
    assert set(BINARY_ARGUMENTS) == llvm_math.BINARY_FUNCTIONS
    assert {"sin", "cos", "tan"} == llvm_math.GUARDED


def arguments(name, dtype, rng):
    low, high = DOMAINS[name]
    magnitudes = np.exp(rng.uniform(-80, 6, 100_000))
    signs = 1.0 if name.startswith("log") and name != "log1p" else rng.choice([-1.0, 1.0], magnitudes.size)
    spread, near_zero = rng.uniform(low, high, 100_000), rng.uniform(-1, 1, 100_000)
    above_one = 1 + np.exp(rng.uniform(-40, 0, 20_000))
    values = np.concatenate([spread, near_zero, signs * magnitudes, above_one])
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_accuracy_against_a_more_precise_reference(name, dtype):
    dtype = np.dtype(dtype)
    x = arguments(name, dtype, np.random.default_rng(sorted(DOMAINS).index(name)))
    function = getattr(np, name)
    wider = np.longdouble if dtype == np.float64 else np.float64
    with np.errstate(all="ignore"):
        assert_within_ulps(
            np.asarray(function(dynfuse.asarray(x))), function(x.astype(wider)), MAX_ULP[dtype]
        )


def assert_within_ulps(actual, reference, max_ulp):
    """``actual`` within ``max_ulp`` of ``reference`` (computed wider), and exactly NaN, inf and 0
    where the reference rounds to them."""
    dtype = actual.dtype
    wider = reference.dtype
    with np.errstate(all="ignore"):
        rounded = reference.astype(dtype)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(rounded))
    infinite = np.isinf(rounded)
    np.testing.assert_array_equal(actual[infinite], rounded[infinite])
    compared = np.isfinite(rounded) & (rounded != 0)
    ulp = np.spacing(np.abs(rounded[compared])).astype(wider)
    error = np.abs(actual[compared].astype(wider) - reference[compared]) / ulp
    assert float(error.max(initial=0)) <= max_ulp, (np.argmax(error), float(error.max()))


def circular_arguments(rng):
    """Where sin's, cos's and tan's errors show: a few turns either way (every quarter turn's ends),
    the doubles nearest multiples of pi/2 up to the core's limit (the remainder cancels most there;
    tan's poles), magnitudes from 2^-90 to 2^60 (tiny ones, and libm's beyond the limit, mixed
    with the core's in each vector), and both sides of the limit."""
    count = 100_000
    turns = rng.integers(1, int(llvm_math.TRIG_LIMIT / 1.5), count).astype(np.longdouble)
    half_pi = np.longdouble("1.570796326794896619231321691639751442")
    near = (turns * half_pi).astype(np.float64)
    limit = llvm_math.TRIG_LIMIT * (1 + rng.uniform(-1e-6, 1e-6, 1000))
    signs = rng.choice([-1.0, 1.0], count)
    return np.concatenate(
        [
            rng.uniform(-10, 10, count),
            near * signs,
            signs * np.exp2(rng.uniform(-90, 60, count)),
            limit,
            -limit,
        ]
    )


# sin, cos and tan in float64: glibc's sin and cos are within 0.514 ulp on these arguments, the core
# within 0.59 (its last addition's or division's half ulp, and its terms' roundings)
CIRCULAR_MAX_ULP = {np.dtype(np.float32): 0.501, np.dtype(np.float64): 0.6}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("name", sorted(llvm_math.GUARDED))
def test_circular_accuracy_against_a_more_precise_reference(name, dtype):
    """sin, cos and tan below the core's limit and beyond it (libm's there): float32 correctly
    rounded from the double, float64 within 0.6 ulp."""
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore"):
        x = circular_arguments(np.random.default_rng(7)).astype(dtype)
    function = getattr(np, name)
    wider = np.longdouble if dtype == np.float64 else np.float64
    with np.errstate(all="ignore"):
        actual = np.asarray(function(dynfuse.asarray(x)))
        assert_within_ulps(actual, function(x.astype(wider)), CIRCULAR_MAX_ULP[dtype])


def power_arguments(dtype, rng):
    """Bases and exponents where pow's errors show: results across the whole range, bases near 1
    raised to large powers (y·log|x| near the overflow edge with |log x| small), negative bases
    to integer powers, subnormal bases and results."""
    count = 50_000
    wide = 700 if dtype == np.float64 else 85
    return [
        (np.exp(rng.uniform(-wide, wide, count)), rng.uniform(-3, 3, count)),
        (rng.uniform(0.5, 2, count), rng.uniform(-2000, 2000, count)),
        (1 + rng.uniform(-1e-3, 1e-3, count), rng.uniform(-5e5, 5e5, count)),
        (rng.uniform(-10, 10, count), rng.integers(-40, 40, count).astype(float)),
        (np.exp(rng.uniform(-745 if dtype == np.float64 else -103, 0, count)), rng.uniform(-1.5, 1.5, count)),
    ]


def arctan2_arguments(dtype, rng):
    """Points in every quadrant, at ratios from tiny to huge and near each reduction's edges."""
    count = 50_000

    def signed(values):
        return values * rng.choice([-1.0, 1.0], count)

    return [
        (signed(rng.uniform(0, 10, count)), signed(rng.uniform(0, 10, count))),
        (signed(np.exp(rng.uniform(-80, 80, count))), signed(np.exp(rng.uniform(-80, 80, count)))),
        (signed(rng.uniform(0, 1, count)), np.ones(count)),
    ]


def hypot_arguments(dtype, rng):
    """Legs of similar and of very different sizes, across the whole range (where squares would
    overflow or underflow), subnormal ones, and legs far below the other (negligible)."""
    count = 50_000
    wide = 700 if dtype == np.float64 else 85

    def signed(values):
        return values * rng.choice([-1.0, 1.0], count)

    tiny = 1e-308 if dtype == np.float64 else 1e-38
    return [
        (signed(rng.uniform(0, 10, count)), signed(rng.uniform(0, 10, count))),
        (signed(np.exp(rng.uniform(-wide, wide, count))), signed(np.exp(rng.uniform(-wide, wide, count)))),
        (signed(np.exp(rng.uniform(-5, 5, count))), signed(np.exp(rng.uniform(-5, 5, count)) * 2.0**-62)),
        (signed(rng.uniform(0, tiny, count)), signed(rng.uniform(0, tiny, count))),
    ]


BINARY_ARGUMENTS = {"power": power_arguments, "arctan2": arctan2_arguments, "hypot": hypot_arguments}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY_ARGUMENTS))
def test_binary_accuracy_against_a_more_precise_reference(name, dtype):
    """float32 is correctly rounded from double; float64 within about an ulp, even where pow's
    y·log|x| nears the overflow edge (its logarithm is carried to about 64 bits), and hypot within
    half an ulp and a hair (an ulp where its result is subnormal: the root is rounded to double,
    then to the subnormal's fewer bits); for an array of second operands and for one (NumPy's
    power-by-one-value loop)."""
    dtype = np.dtype(dtype)
    function = getattr(np, name)
    wider = np.longdouble if dtype == np.float64 else np.float64
    max_ulp = {np.dtype(np.float32): 0.51, np.dtype(np.float64): 2.0}[dtype]

    def check(actual, reference):
        if name != "hypot" or dtype != np.float64:
            return assert_within_ulps(actual, reference, max_ulp)
        normal = np.abs(reference) >= np.finfo(dtype).tiny
        assert_within_ulps(actual[normal], reference[normal], 0.501)
        assert_within_ulps(actual[~normal], reference[~normal], 1.0)

    for x, y in BINARY_ARGUMENTS[name](dtype, np.random.default_rng(7)):
        with np.errstate(all="ignore"):
            x, y = x.astype(dtype), y.astype(dtype)
            actual = np.asarray(function(dynfuse.asarray(x), dynfuse.asarray(y)))
            check(actual, function(x.astype(wider), y.astype(wider)))
            one = y[:1].astype(wider)[0]
            actual = np.asarray(function(dynfuse.asarray(x), float(one)))
            check(actual, function(x.astype(wider), one))


EDGES = np.array(
    [
        *(0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 5e-324, 2.2250738585072014e-308, 1e-310, -1e-310),
        *(709.78, 709.79, -745.13, -745.14, 88.72, 88.73, -103.97, -103.98, 1024.0, -1075.0, 128.0, -150.0),
        *(1e-30, -1e-30, 1e300, -1e300, 0.34657359027997264, -0.34657359027997264, 0.7071067811865476),
    ]
)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("name", sorted([*DOMAINS, *llvm_math.GUARDED]))
def test_edges_give_what_libm_gives(name, dtype):
    """NaN, ±inf, signed zeros, overflow, subnormal results and domain errors, as NumPy's libm loops."""
    with np.errstate(all="ignore"):
        x = EDGES.astype(dtype)
        expected = getattr(np, name)(x)
        actual = np.asarray(getattr(np, name)(dynfuse.asarray(x)))
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    exact = np.isinf(expected) | (expected == 0)
    np.testing.assert_array_equal(actual[exact], expected[exact])
    np.testing.assert_array_equal(np.signbit(actual[exact]), np.signbit(expected[exact]))
    np.testing.assert_allclose(actual[~exact], expected[~exact], rtol=4 * np.finfo(dtype).eps, atol=0)


BINARY_EDGES = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1.5)
BINARY_EDGES += (1e300, -1e300, 5e-324, -5e-324, 1e-310, 1024.0, -1075.0, 1e20, -1e20, 2.0**53 + 2)
BINARY_EDGES += (0.9999999999999999, 1.0000000000000002, 709.78, -745.1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY_ARGUMENTS))
def test_binary_edges_give_what_numpy_gives(name, dtype):
    """C99's cases, for an array of second operands and for one. pow: x^0 and 1^y are 1 even for
    NaN, zeros and infinities by the sign of y, odd integer powers keep the sign of x (-0.0 too),
    a negative finite base to a non-integer power is NaN, ±inf exponents go by |x| against 1.
    atan2: signed zeros give ±0 or ±pi, infinities the multiples of pi/4."""
    function = getattr(np, name)
    pairs = np.array(list(itertools.product(BINARY_EDGES, BINARY_EDGES)))
    with np.errstate(over="ignore"):
        x, y = pairs[:, 0].astype(dtype), pairs[:, 1].astype(dtype)
    with np.errstate(all="ignore"):
        results = [(function(x, y), np.asarray(function(dynfuse.asarray(x), dynfuse.asarray(y))))]
        results += [(function(x, one), np.asarray(function(dynfuse.asarray(x), one))) for one in np.unique(y)]
    for expected, actual in results:
        np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
        exact = np.isinf(expected) | (expected == 0) | (np.abs(expected) == 1)
        np.testing.assert_array_equal(actual[exact], expected[exact])
        np.testing.assert_array_equal(np.signbit(actual[exact]), np.signbit(expected[exact]))
        inexact = ~exact & ~np.isnan(expected)
        np.testing.assert_allclose(actual[inexact], expected[inexact], rtol=4 * np.finfo(dtype).eps, atol=0)


def computing(name, x):
    """``name`` applied to ``x`` (with a constant second operand for a binary function)."""
    function = getattr(np, name)
    return function(x, 0.7) if name in BINARY_ARGUMENTS else function(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("name", sorted(llvm_math.INLINE))
def test_loops_calling_them_vectorize(name, dtype):
    """No call to libm is left in the loop (but on a guarded function's rare path), and the loop
    works on whole vector registers (for float64 too: no table, whose gather would keep the loop
    scalar)."""
    x = dynfuse.asarray(np.ones(4096, dtype))
    _, plan = execute.explain_plan([computing(name, x)._node], cpu.BACKEND)
    (step,) = plan.kernels
    assembly = cpu.BACKEND.assembly(step.kernel)
    symbol = C_MATH.get(name, name)
    kernel = assembly[assembly.index(f"{ENTRY}:") :]
    kernel = kernel[: kernel.index(".Lfunc_end")]
    if name in llvm_math.GUARDED:
        # libm only in the rare path's function, which the inlined vector variant calls
        assert f"{symbol}@" not in kernel and f"dynfuse.{name}.library.v" in kernel
        assert not re.search(rf"dynfuse\.{name}\.f\d+\.v\d+@", kernel)  # inlined, not called
    else:
        assert f"{symbol}f" not in assembly and f"{symbol}@" not in assembly
    assert re.search(r"\b(vfmadd\d*pd|v?mulpd)\b", kernel), assembly  # packed, not scalar (sd)


@pytest.mark.parametrize("name", sorted(llvm_math.INLINE))
def test_float16_results_round_twice_without_a_libcall(name):
    """float16 is computed in float32 and rounded again; LLVM would merge the roundings into a call
    to __truncdfhf2, which the JIT cannot resolve (a crash, before the fence)."""
    with np.errstate(all="ignore"):
        x = np.array([0.5, 1.0, 3.0, 100.0, 7.0, 2.0], np.float16)
        for values in (x, x.astype(np.int8)):  # int8 runs the float16 loop too
            expected = computing(name, values)
            actual = np.asarray(computing(name, dynfuse.asarray(values)))
            assert actual.dtype == expected.dtype
            np.testing.assert_allclose(actual, expected, rtol=1e-3)
