"""codegen/llvm_math: the CPU backend's own exp, log and tanh, their accuracy, edges and vector code.

The CPU backend's own exp, log and tanh (``codegen/llvm_math.py``): accuracy against a reference
computed in more precision, the edges of each domain, and that they vectorize."""

import re

import numpy as np
import pytest

import dynfuse
from dynfuse import execute, registry
from dynfuse.backends import cpu
from dynfuse.codegen import llvm_math

# Where each function's errors show: the reductions' edges (|r| near ln2/2, m near sqrt(2)) are hit
# by the wide spread, cancellation (expm1, log1p, tanh near zero) by the narrow one.
DOMAINS = {
    "exp": (-100, 88),
    "exp2": (-140, 127),
    "expm1": (-30, 30),
    "log": (0, 1e6),
    "log2": (0, 1e6),
    "log10": (0, 1e6),
    "log1p": (-1, 1e3),
    "tanh": (-20, 20),
}
# Most ulps from the reference: float32 results are a double rounded once; float64 ones carry the
# series' and reductions' rounding (tanh most, through expm1 and a division).
MAX_ULP = {np.dtype(np.float32): 0.51, np.dtype(np.float64): 3.0}


@pytest.fixture(autouse=True)
def on_the_cpu_backend(monkeypatch):
    monkeypatch.setattr(registry, "backend", "cpu")


def test_the_table_covers_every_function():
    assert set(DOMAINS) == llvm_math.FUNCTIONS


def arguments(name, dtype, rng):
    low, high = DOMAINS[name]
    magnitudes = np.exp(rng.uniform(-80, 6, 100_000))
    signs = 1.0 if name.startswith("log") and name != "log1p" else rng.choice([-1.0, 1.0], magnitudes.size)
    spread, near_zero = rng.uniform(low, high, 100_000), rng.uniform(-1, 1, 100_000)
    values = np.concatenate([spread, near_zero, signs * magnitudes])
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_accuracy_against_a_more_precise_reference(name, dtype):
    dtype = np.dtype(dtype)
    x = arguments(name, dtype, np.random.default_rng(sorted(DOMAINS).index(name)))
    function = getattr(np, name)
    wider = np.longdouble if dtype == np.float64 else np.float64
    with np.errstate(all="ignore"):
        reference = function(x.astype(wider))
        actual = np.asarray(function(dynfuse.asarray(x)))
        rounded = reference.astype(dtype)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(rounded))
    infinite = np.isinf(rounded)
    np.testing.assert_array_equal(actual[infinite], rounded[infinite])
    compared = np.isfinite(rounded) & (rounded != 0)
    ulp = np.spacing(np.abs(rounded[compared])).astype(wider)
    error = np.abs(actual[compared].astype(wider) - reference[compared]) / ulp
    assert float(error.max()) <= MAX_ULP[dtype], (name, x[compared][np.argmax(error)], float(error.max()))


EDGES = np.array(
    [
        *(0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 5e-324, 2.2250738585072014e-308, 1e-310, -1e-310),
        *(709.78, 709.79, -745.13, -745.14, 88.72, 88.73, -103.97, -103.98, 1024.0, -1075.0, 128.0, -150.0),
        *(1e-30, -1e-30, 1e300, -1e300, 0.34657359027997264, -0.34657359027997264, 0.7071067811865476),
    ]
)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("name", sorted(DOMAINS))
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


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_loops_calling_them_vectorize(name):
    """No call to libm is left in the loop, and the loop works on whole vector registers."""
    x = dynfuse.asarray(np.ones(4096, np.float32))
    _, plan = execute.explain_plan([getattr(np, name)(x)._node], cpu.BACKEND)
    (step,) = plan.kernels
    assembly = cpu.BACKEND.assembly(step.kernel)
    assert f"{name}f" not in assembly and f"{name}@" not in assembly
    assert re.search(r"\b(vfmadd\d*pd|v?mulpd)\b", assembly), assembly  # packed, not scalar (sd)


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_float16_results_round_twice_without_a_libcall(name):
    """float16 is computed in float32 and rounded again; LLVM would merge the roundings into a call
    to __truncdfhf2, which the JIT cannot resolve (a crash, before the fence)."""
    with np.errstate(all="ignore"):
        x = np.array([0.5, 1.0, 3.0, 100.0, 7.0, 2.0], np.float16)
        for values in (x, x.astype(np.int8)):  # int8 runs the float16 loop too
            expected = getattr(np, name)(values)
            actual = np.asarray(getattr(np, name)(dynfuse.asarray(values)))
            assert actual.dtype == expected.dtype
            np.testing.assert_allclose(actual, expected, rtol=1e-3)
