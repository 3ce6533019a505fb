"""Complex arrays in compiled kernels: arithmetic, absolute values, tests, casts and the C library's
functions bit for bit as NumPy's loops give them, special values included, from the LLVM generator
and the CUDA one (on the emulator); what the generators have no code for runs interpreted, with
NumPy's answers."""

import itertools
import warnings

import numpy as np
import pytest

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import registry
from dynfuse.codegen import llvm
from dynfuse.codegen.common import COMPLEX_C_MATH
from dynfuse.testing.compare import compiling

from .helpers import assert_same

COMPLEX = [np.dtype(np.complex64), np.dtype(np.complex128)]
BACKENDS = ["cpu", "cuda-emulator"]
SPECIAL_PARTS = [0.0, -0.0, 1.0, -2.5, 1e-30, 3e38, 1e300, -1e-310, np.inf, -np.inf, np.nan]


def special_values(dtype: np.dtype) -> np.ndarray:
    """Every pair of special parts, then random values over many scales."""
    rng = np.random.default_rng(7)
    pairs = [complex(re, im) for re, im in itertools.product(SPECIAL_PARTS, repeat=2)]
    scales = 10.0 ** rng.integers(-20, 20, (2, 400))
    random = rng.standard_normal(400) * scales[0] + 1j * rng.standard_normal(400) * scales[1]
    with np.errstate(over="ignore"):
        return np.concatenate([np.array(pairs), random]).astype(dtype)


def same_bits(actual, expected) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.kind in "fc":
        floats = np.dtype(f"f{expected.dtype.itemsize // (2 if expected.dtype.kind == 'c' else 1)}")
        ints = np.dtype(f"u{floats.itemsize}")
        got, want = actual.reshape(-1).view(floats), expected.reshape(-1).view(floats)
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(ints), want[~nan].view(ints))
    else:
        np.testing.assert_array_equal(actual, expected)


def both(function, *arrays, backend="cpu"):
    """``function`` by NumPy and by dynfuse with every kernel compiled, on ``backend``."""
    if registry.unavailable_reason(backend) is not None:
        pytest.skip(registry.unavailable_reason(backend))
    with np.errstate(all="ignore"):
        expected = function(np, *arrays)
    with compiling(backend), np.errstate(all="ignore"):
        actual = function(dnp, *(dnp.asarray(a) for a in arrays))
        actual = np.asarray(actual)
    return actual, expected


BINARY = {
    "add": lambda xp, a, b: a + b,
    "subtract": lambda xp, a, b: a - b,
    "multiply": lambda xp, a, b: a * b,
    "divide": lambda xp, a, b: a / b,
    "equal": lambda xp, a, b: a == b,
    "not_equal": lambda xp, a, b: a != b,
    "where": lambda xp, a, b: xp.where(xp.isnan(a), b, a * 2),
}
UNARY = {
    "negative": lambda xp, a: -a,
    "positive": lambda xp, a: +a,
    "conjugate": lambda xp, a: xp.conj(a) * a.conjugate(),
    "square": lambda xp, a: xp.square(a),
    "power 2": lambda xp, a: a**2,
    "reciprocal": lambda xp, a: xp.reciprocal(a) + a**-1,
    "absolute": lambda xp, a: xp.abs(a),
    "isnan": lambda xp, a: xp.isnan(a),
    "isinf": lambda xp, a: xp.isinf(a),
    "isfinite": lambda xp, a: xp.isfinite(a),
    "to bool": lambda xp, a: a.astype(bool),
    "logical_not": lambda xp, a: xp.logical_not(a),
    "chain": lambda xp, a: xp.abs(a * a + a / 3) <= 2,
    "complex scalars": lambda xp, a: a * (0.5 - 2j) + 1j,
    "real scalars": lambda xp, a: 2.5 / a - 3,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops_match_numpy_bit_for_bit(name, dtype, backend):
    values = special_values(dtype)
    left, right = (grid.ravel() for grid in np.meshgrid(values[:121], values[:121]))
    left, right = np.concatenate([left, values]), np.concatenate([right, values[::-1]])
    same_bits(*both(BINARY[name], left, right, backend=backend))
    assert dynfuse.stats()["kernels_launched"] >= 1 and dynfuse.stats()["interpreted_ops"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops_match_numpy_bit_for_bit(name, dtype, backend):
    same_bits(*both(UNARY[name], special_values(dtype), backend=backend))
    assert dynfuse.stats()["kernels_launched"] >= 1 and dynfuse.stats()["interpreted_ops"] == 0


@pytest.mark.skipif(not llvm._X86, reason="the C library's complex functions are called on x86-64")
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", sorted(COMPLEX_C_MATH))
def test_complex_functions_are_the_c_librarys_as_numpys_bit_for_bit(name, dtype):
    same_bits(*both(lambda xp, a: getattr(xp, name)(a), special_values(dtype)))
    assert dynfuse.stats()["kernels_launched"] >= 1


CUDA_COMPLEX_FUNCTIONS = [
    *("exp", "log", "sqrt", "log2", "log10", "exp2"),
    *("sin", "cos", "tan", "sinh", "cosh", "tanh"),
    *("arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"),
]


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", CUDA_COMPLEX_FUNCTIONS)
def test_cuda_complex_functions_have_the_c_librarys_special_values_within_a_few_ulp(name, dtype):
    """The CUDA generator's complex functions: C99 Annex G's special values as the C library gives
    them (a zero, infinite or NaN part bit for bit), finite parts within 4 ulp of NumPy's; near the
    unit circle and the branch points +-1 and +-i, and magnitudes near overflow and in the
    subnormals, included."""
    if registry.unavailable_reason("cuda-emulator") is not None:
        pytest.skip(registry.unavailable_reason("cuda-emulator"))
    rng = np.random.default_rng(11)
    angles = rng.uniform(-np.pi, np.pi, 200)
    near_one = np.exp(1j * angles) * (1 + rng.uniform(-1e-6, 1e-6, 200))
    finfo = np.finfo(dtype)
    extremes = np.array([complex(finfo.max / 3, finfo.max / 2), complex(finfo.tiny / 8, -finfo.tiny / 64)])
    ones = np.concatenate([1 + finfo.eps * np.arange(-3, 4), -1 + finfo.eps * np.arange(-3, 4)])
    tiny = np.array([1e-40, 1e-30, 1e-12, 1e-4])
    branch_points = (ones[:, None] + 1j * tiny[None, :]).ravel()
    with np.errstate(under="ignore"):
        z = [special_values(dtype), near_one, extremes, branch_points, 1j * branch_points]
        z = np.concatenate([part.astype(dtype) for part in z])
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(z)
    with compiling("cuda-emulator"), np.errstate(all="ignore"):
        assert_same(getattr(dnp, name)(dnp.asarray(z)), expected, max_ulp=4)
    assert dynfuse.stats()["kernels_launched"] >= 1 and dynfuse.stats()["interpreted_ops"] == 0


@pytest.mark.skipif(not llvm._X86, reason="the C library's complex functions are called on x86-64")
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", ["log2", "log10", "exp2"])
def test_numpys_formulas_over_the_c_library_bit_for_bit(name, dtype):
    same_bits(*both(lambda xp, a: getattr(xp, name)(a), special_values(dtype)))
    assert dynfuse.stats()["kernels_launched"] >= 1 and dynfuse.stats()["interpreted_ops"] == 0


@pytest.mark.parametrize(
    "mixed",
    [
        lambda xp, z, x: z * x + 1.5,
        lambda xp, z, x: x / z - z,
        lambda xp, z, x: (z + x.astype(xp.float32)).astype(xp.complex64),
        lambda xp, z, x: z.astype(xp.complex128) * (x > 0),
        lambda xp, z, x: xp.isnan(z * x).any(),
    ],
)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_real_operands_and_casts_join_complex_kernels(mixed, dtype, backend):
    z = special_values(dtype)
    x = np.linspace(-3.0, 3.0, z.size)
    same_bits(*both(mixed, z, x, backend=backend))


def test_casting_complex_to_real_warns_as_numpy_and_keeps_the_real_part():
    z = special_values(np.dtype(np.complex128))
    with pytest.warns(np.exceptions.ComplexWarning), np.errstate(all="ignore"):
        expected = (z * 2).astype(np.float64)
    with compiling("cpu"), pytest.warns(np.exceptions.ComplexWarning) as caught, np.errstate(all="ignore"):
        lazy = (dnp.asarray(z) * 2).astype(np.float64)
    assert caught[0].filename == __file__
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("error")  # warned once, where the cast was written
        same_bits(lazy, expected)


@pytest.mark.skipif(not llvm._X86, reason="the C library's cpow is called on x86-64")
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize(
    "exponent", [0, 1, 2, 3, 4, 7, -1, -3, 99, 100, -99, 2.5, 0.5 + 1j, -0.0, 1j, np.nan, "array"], ids=str
)
def test_powers_are_numpys_bit_for_bit(exponent, dtype):
    """Integral exponents by C's products (1, 2, 3 unrolled), others by the C library's cpow, zero
    bases and exponents as NumPy's special cases: each branch's value as NumPy's."""
    z = special_values(dtype)
    if exponent == "array":
        same_bits(*both(lambda xp, a, b: xp.power(a, b), z, z[::-1].copy()))
    else:
        same_bits(*both(lambda xp, a: xp.power(a, exponent), z))
    assert dynfuse.stats()["kernels_launched"] >= 1 and dynfuse.stats()["interpreted_ops"] == 0


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize(
    "exponent", [0, 1, 2, 3, 4, 7, -1, -3, 99, 100, -99, 2.5, 0.5 + 1j, -0.0, 1j, np.nan, "array"], ids=str
)
def test_cuda_powers_are_numpys_branches(exponent, dtype):
    """The CUDA generator's complex power takes NumPy's branches: zero exponents and bases, and
    integral exponents below 100 by C's products, bit for bit; others as e^(b log a), the C
    library's cpow, with its special values bit for bit and finite parts within 4 ulp of NumPy's
    times the condition of the exponential, |b log a| (rounding ``log a`` moves e^(b log a) that
    much, in either library)."""
    if registry.unavailable_reason("cuda-emulator") is not None:
        pytest.skip(registry.unavailable_reason("cuda-emulator"))
    z = special_values(dtype)
    w = z[::-1].copy() if exponent == "array" else np.full_like(z, exponent)
    with np.errstate(all="ignore"):
        expected = np.power(z, w)
    with compiling("cuda-emulator"), np.errstate(all="ignore"):
        actual = np.asarray(dnp.power(dnp.asarray(z), w if exponent == "array" else exponent))
    assert dynfuse.stats()["kernels_launched"] >= 1 and dynfuse.stats()["interpreted_ops"] == 0
    integral = (w.imag == 0) & (w.real == np.trunc(w.real)) & (np.abs(w.real) < 100)
    with np.errstate(all="ignore"):
        condition = 1 + np.abs(w) * (np.abs(np.log(np.abs(z))) + np.pi)
    # where rounding log a can turn e^(b log a) right round, an infinite part's sign is either
    settled = condition * np.finfo(dtype).eps < 1e-3
    finite = np.isfinite(expected) & np.isfinite(actual)
    exact = integral | (w == 0) | (z == 0) | (settled & ~finite)
    same_bits(actual[exact], expected[exact])
    for part in ("real", "imag"):
        got, want = getattr(actual, part), getattr(expected, part)
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    rest = ~exact & finite
    # each part's error in units of the modulus's last place: a part far below the modulus carries
    # the modulus's rounding
    spacing = np.spacing(np.abs(expected[rest])).astype(np.float64)
    spacing = np.maximum(spacing, np.finfo(spacing.dtype).smallest_subnormal)
    for part in ("real", "imag"):
        got, want = getattr(actual[rest], part), getattr(expected[rest], part)
        assert np.all(got[want == 0] == 0)  # a real base to a real power: no imaginary part
        error = np.abs(got.astype(np.float64) - want) / spacing
        assert np.all(error <= 4 * condition[rest]), error.max()


def test_ordinary_powers_raise_no_warning_numpy_does_not():
    z = dnp.asarray(np.random.default_rng(5).standard_normal(1000) * 3 + 2j)
    with compiling("cpu"), warnings.catch_warnings():
        warnings.simplefilter("error")
        for exponent in (3, 5, -4, 2.5):
            np.asarray(dnp.power(z, exponent))
    assert dynfuse.stats()["float_error_reruns"] == 0


REDUCTIONS = {
    "sum": lambda xp, a: (a * 1).sum(),
    "sum of rows": lambda xp, a: (a * 1).sum(axis=-1),
    "sum of columns": lambda xp, a: (a * 1).sum(axis=0),
    "mean": lambda xp, a: (a + 0).mean(axis=0),
    "prod": lambda xp, a: (a * 0.1 + 0.99).prod(axis=-1),
    "var": lambda xp, a: (a * 1).var(axis=-1),
    "std": lambda xp, a: (a * 1).std(axis=0),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("shape", [(1000,), (48, 300), (300, 48), (3, 5, 7)], ids=str)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_sums_and_products_are_computed_in_kernels_within_rounding(name, shape, dtype, backend):
    rng = np.random.default_rng(3)
    z = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    actual, expected = both(REDUCTIONS[name], z, backend=backend)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    # Summed in another order than NumPy's: a rounding per term at most, of the terms' magnitude
    terms = z.size // max(expected.size, 1)
    tolerance = 4 * terms * np.finfo(dtype).eps * max(1.0, float(np.abs(z).max()))
    if name == "prod":  # each step rounded: relative to the product itself
        np.testing.assert_allclose(actual, expected, rtol=4 * terms * np.finfo(dtype).eps)
    else:
        np.testing.assert_allclose(actual, expected, rtol=0, atol=tolerance)
    assert dynfuse.stats()["kernels_launched"] >= 1 and dynfuse.stats()["interpreted_ops"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize(
    "shape, axis",
    [((-1, 9), -1), ((-1, 9), None), ((-1, 9), 0), ((-1, 9, 1), 1), ((-1, 1, 9), (0, 1)), ((-1, 9, 2), 2)],
    ids=str,
)
def test_products_round_as_numpys_loop_for_the_axis_bit_for_bit(shape, axis, dtype, backend):
    """NumPy's product along the innermost axis (extent-1 axes aside) is C's, each part's products
    rounded; across a kept innermost axis it is its SIMD loop's, fused where the CPU has FMA. Where
    a part overflows, the rounding decides between an infinity and NaN."""
    values = special_values(dtype)
    values = values[: values.size // 18 * 18].reshape(shape)
    same_bits(*both(lambda xp, a: (a * 1).prod(axis=axis), values, backend=backend))


@pytest.mark.parametrize(
    "function",
    [
        lambda xp, z: xp.expm1(z) + 1,
        lambda xp, z: xp.log1p(z) * 2,
        lambda xp, z: (z * 3).max(),
        lambda xp, z: xp.cumsum(z + 1),
        lambda xp, z: (z + 1) < (z * 2),
    ],
)
@pytest.mark.parametrize("backend", ["cpu", "cuda-emulator"])
def test_complex_ops_without_code_run_interpreted_with_numpy_answers(function, backend):
    if registry.unavailable_reason(backend) is not None:
        pytest.skip(registry.unavailable_reason(backend))
    z = special_values(np.dtype(np.complex128))[:200]
    with np.errstate(all="ignore"):
        expected = function(np, z)
    with compiling(backend), np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")  # no kernel fails: they are declined
        actual = np.asarray(function(dnp, dnp.asarray(z)))
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=1e-13, equal_nan=True)


def test_the_cuda_generator_declines_the_complex_functions_it_has_no_code_for():
    if registry.unavailable_reason("cuda-emulator") is not None:
        pytest.skip(registry.unavailable_reason("cuda-emulator"))
    z = special_values(np.dtype(np.complex64))
    with compiling("cuda-emulator"), np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        lazy = dnp.asarray(z)
        same_bits(dnp.expm1(lazy * lazy), np.expm1(z * z))
    assert dynfuse.stats()["fallbacks"] == 0 and dynfuse.stats()["interpreted_ops"] >= 1


def test_explain_shows_complex_code_and_says_a_kernel_without_code_runs_interpreted():
    z = dnp.asarray(special_values(np.dtype(np.complex128)))
    (source,) = dynfuse.kernel_sources(dnp.expm1(z) + 1, backend="cuda")
    assert "runs interpreted" in source
    assert "runs interpreted" in dynfuse.explain(dnp.expm1(z) + 1, backend="cuda", source=True)
    (source,) = dynfuse.kernel_sources(dnp.sin(z) ** 2.5, backend="cuda")
    assert "df_csin(" in source and "df_cpow(" in source
    (source,) = dynfuse.kernel_sources(z * z + 1, backend="cuda")
    assert "df_cmul(" in source and "df_c128" in source  # complex values as the prelude's pairs
    (source,) = dynfuse.kernel_sources(z * z + 1, backend="cpu")
    assert "insertvalue" in source  # complex values as pairs of doubles


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["sum", "prod"])
def test_a_reduction_of_one_value_is_numpys_start_combined_with_it(name, backend):
    """NumPy adds a 0-d value to +0 and multiplies 1 by it: signed zeros and infinite parts change."""
    for value in special_values(np.dtype(np.complex64))[:121]:
        same_bits(*both(lambda xp, a: getattr(xp, name)(-a), np.array(value), backend=backend))


PARTS = {
    "of a buffer": lambda xp, a, b: a.real * 2 - a.imag,
    "of a computed value": lambda xp, a, b: (a * b).real + (a - b).imag,
    "through other views": lambda xp, a, b: a.T.real[1:, ::3] - xp.imag(b[::-1]).T[1:, ::3],
    "gathered": lambda xp, a, b: a.imag[[3, 0, 3]] - xp.real(a * b)[[1, -1, 5]],
    "of real arrays": lambda xp, a, b: xp.imag(a.real) + xp.real(b.imag) * 2,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", sorted(PARTS))
def test_real_and_imaginary_parts_are_views_that_kernels_read(name, dtype, backend):
    """A part of a buffer is loaded through the buffer's strides, a part of a computed value taken in
    the kernel that computes it: NumPy's bits, no fallback, nothing interpreted."""
    a = special_values(dtype)[:520].reshape(20, 26)
    before = dynfuse.stats()
    same_bits(*both(PARTS[name], a, np.roll(a, 7), backend=backend))
    after = dynfuse.stats()
    assert after["kernels_launched"] > before["kernels_launched"]
    assert after["interpreted_ops"] == before["interpreted_ops"] and not after["fallback_names"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [*COMPLEX, np.dtype(np.float32), np.dtype(np.int16)], ids=str)
@pytest.mark.parametrize("deg", [False, True])
def test_angle_is_numpys_arctan2_of_the_parts(deg, dtype, backend):
    values = special_values(np.dtype(np.complex128))
    values = values if dtype.kind == "c" else values.real
    with np.errstate(all="ignore"):
        values = values.astype(dtype)
    actual, expected = both(lambda xp, a: xp.angle(a, deg=deg), values, backend=backend)
    assert_same(dnp.asarray(actual), expected)
    assert not dynfuse.stats()["fallback_names"]


def _write_through_real(xp, a, x):
    c = a.copy()
    c.real[...] = x
    return c


def _update_through_a_kept_part(xp, a, x):
    c = a * 1
    part = c.real
    before = c * 2  # pending: keeps the values before the write
    part += 1
    return before + c


def _set_the_parts(xp, a, x):
    c = a.copy()
    c.real = 5
    c.imag = c.real * x
    return c


def _scatter_and_mask(xp, a, x):
    c = a.copy()
    c.real[xp.asarray([0, 3, 3, 7])] = xp.asarray([1.0, 2.0, 3.0, 4.0])[:, None]
    c.imag[x > 0] = 0
    return c


def _the_whole_array_from_its_real_part(xp, a, x):
    c = a.copy()
    c[...] = c.real  # not the array itself, though it starts where it does: the imaginary parts go
    return c


def _library_writes(xp, a, x):
    c = a.copy()
    xp.copyto(c.real, x)
    c.imag.fill(3)
    xp.multiply(c.real, 2, out=c.imag[::-1])
    return c


def _stencil_between_the_parts(xp, a, x):
    c = a.copy()
    c.imag[1:-1, 1:-1] = c.real[2:, 1:-1] + c.real[:-2, 1:-1]
    c.real[1:] = c.real[:-1]
    c.real.T[0] = 9
    return c


def _swap_the_parts(xp, a, x):
    c = a * 3
    c.real += c.imag
    kept = c.imag * 1
    c.imag *= 2
    return c + kept


PART_WRITES = [
    _write_through_real,
    _update_through_a_kept_part,
    _set_the_parts,
    _scatter_and_mask,
    _the_whole_array_from_its_real_part,
    _library_writes,
    _stencil_between_the_parts,
    _swap_the_parts,
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("side", [8, 200], ids=["small", "large"])
@pytest.mark.parametrize("program", PART_WRITES, ids=lambda program: program.__name__.strip("_"))
def test_writes_through_the_parts_change_the_array_as_numpys(program, side, backend):
    rng = np.random.default_rng(side)
    a = rng.standard_normal((side, side)) + 1j * rng.standard_normal((side, side))
    x = rng.standard_normal((side, side))
    same_bits(*both(program, a, x, backend=backend))


def test_a_wrapped_ndarray_is_written_through_its_parts():
    memory = np.ones(100_000, np.complex64)
    wrapped = dnp.asarray(memory)
    pending = wrapped * 2
    wrapped.imag[::2] = 7
    assert memory[0] == 1 + 7j and memory[1] == 1
    same_bits(pending, np.full(100_000, 2, np.complex64))


def test_the_parts_of_real_arrays_and_numbers_are_numpys():
    x = dnp.arange(100_000.0)
    assert x.real is x and np.real(x) is x
    zeros = x.imag
    same_bits(zeros, np.zeros(100_000))
    with pytest.raises(ValueError, match="read-only"):
        zeros[0] = 1
    with pytest.raises(TypeError, match="does not have imaginary part"):
        x.imag = 3
    with pytest.raises(AttributeError, match="not writable"):
        x[3].real = 1
    assert dnp.real(3 + 4j) == 3 and dnp.imag(np.complex64(3 + 4j)) == np.float32(4)
    assert dnp.angle(1j) == np.angle(1j)
    flags = dnp.asarray(np.array([True, False]))
    same_bits(flags.imag, np.array([True, False]).imag)
    same_bits(dnp.angle(flags), np.angle(np.array([True, False])))
    assert not dynfuse.stats()["fallback_names"]


@pytest.mark.parametrize("index", [Ellipsis, slice(1, None)], ids=["all", "rows"])
def test_a_buffer_assigned_its_own_real_part_loses_its_imaginary_parts(index):
    """The real part starts where the array does, with its shape and strides: only the dtype tells
    that writing it there is not writing the array onto itself."""
    values = np.full((300, 300), 1 + 2j)
    expected = values.copy()
    expected[index] = expected.real[index]
    buffer = dnp.asarray(values.copy())
    buffer[index] = buffer.real[index]
    same_bits(buffer, expected)
