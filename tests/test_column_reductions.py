"""Column mode: the CPU backend reduces axes outer to the kept ones a chunk of columns at a time.

Column mode: reductions over axes outer to the kept ones in memory (axis 0 of a C-contiguous
matrix, the leading axes of a 3-d array), which the CPU backend reduces a chunk of columns at a time.

Every case is differential: NumPy's result on the same inputs, exact for bools and integers (sums
and products wrap in NumPy's dtype), argmax/argmin and max/min exact (NaN propagates, the first
NaN or extreme wins), float sums added row by row as NumPy's axis-0 sum adds them, means,
variances and float products within a few rounding errors. Each also checks which
mode its kernel ran in, so the tests fail if column mode is dropped or taken where it should not be.
"""

import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import dynfuse
from dynfuse import config, execute, registry, replay
from dynfuse.backends import cpu
from dynfuse.codegen import llvm

from .test_exactness import assert_exact, single_signed_zeros

DTYPES = [
    np.dtype(name) for name in ("bool", "int8", "int32", "int64", "uint8", "float16", "float32", "float64")
]
REDUCTIONS = ["sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin", "any", "all"]
# (shape, axis): reductions whose reduced axes lie outside the innermost kept axis
LEADING_AXES = [
    ((37, 45), 0, False),
    ((5, 7, 20), 0, True),
    ((5, 7, 20), 1, False),
    ((5, 7, 20), (0, 1), True),
]


@pytest.fixture(autouse=True)
def on_the_cpu_backend(monkeypatch):
    monkeypatch.setattr(registry, "backend", "cpu")


def modes(lazy):
    """Per reducing kernel of the plan that computes ``lazy``: True where it runs in column mode."""
    _, plan = execute.explain_plan([lazy._node], cpu.BACKEND)
    return [llvm.generate(step.kernel)[1].columns for step in plan.kernels if step.kernel.reduce_axes]


def sample(dtype, shape, rng, specials=True):
    """Values of ``dtype``: floats around 1 with NaN, ±inf and zeros of both signs in a few columns
    (most columns stay finite), integers over the dtype's whole range, bools at random."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    values = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    values = values.astype(dtype)
    if specials:
        flat = values.reshape(-1, shape[-1])  # a view: the kept innermost axis is the column
        flat[1, 0] = np.nan
        flat[-1, 1] = np.inf
        flat[0, 2], flat[-1, 2] = -np.inf, np.inf
        flat[:, 3] = -0.0
        flat[::2, 4] = 0.0
        flat[-2, 5], flat[1, 5] = np.nan, np.nan
    return values


def reduce(name, x, axis, keepdims=False):
    if name in ("argmax", "argmin") and isinstance(axis, tuple):
        pytest.skip("argmax and argmin take one axis")
    return getattr(x, name)(axis=axis, keepdims=keepdims)


def assert_matches(name, actual, expected, data, axis):
    """The comparison each reduction's result calls for (see the module's doc)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, actual.shape)
    if expected.dtype.kind != "f":
        assert_exact(actual, expected)
        return
    if name in ("max", "min"):  # the sign of a zero among zeros of both signs is NumPy's SIMD layout's
        assert_exact(actual, expected, zero_signs=single_signed_zeros(data, axis).reshape(expected.shape))
        return
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected), err_msg="NaN positions differ")
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(actual[~finite], expected[~finite])
    zeros = expected == 0
    np.testing.assert_array_equal(
        np.signbit(actual[zeros]), np.signbit(expected[zeros]), err_msg="zero signs"
    )
    if name == "sum":
        assert_sum_as_accurate_as_numpys(actual[finite], expected[finite], data, axis, finite)
        return
    rtol = {2: 1e-2, 4: 1e-5, 8: 1e-12}[expected.dtype.itemsize]
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=rtol, atol=rtol)


def assert_sum_as_accurate_as_numpys(actual, expected, data, axis, where):
    """No further from the exact sum than twice NumPy's error plus two roundings at the scale of the
    terms: with terms of both signs, a sum far smaller than its terms is luckier in one order or
    another, and only that scale bounds the error of every order."""
    wider = np.longdouble if data.dtype == np.float64 else np.float64  # 11 more bits, or 29
    with np.errstate(invalid="ignore"):  # inf - inf, in slices that ``where`` leaves out
        exact = np.sum(data.astype(wider), axis=axis, keepdims=True).reshape(where.shape)[where]
    scale = np.sum(np.abs(data.astype(wider)), axis=axis, keepdims=True).reshape(where.shape)[where]
    error, numpy_error = np.abs(actual - exact), np.abs(expected - exact)
    bound = 2 * numpy_error + 2 * np.finfo(expected.dtype).eps * scale
    assert (error <= bound).all(), f"error {np.max(error - bound)} beyond NumPy's ({np.max(numpy_error)})"


def check(function, *inputs, columns=True):
    """``function`` on lazy arrays against NumPy; its reducing kernels run in column mode or not."""
    with np.errstate(all="ignore"):
        expected = np.asarray(function(*inputs))
        lazy = function(*[dynfuse.asarray(value) for value in inputs])
        found = modes(lazy)
        assert found and all(mode == columns for mode in found), found
        dynfuse.reset_stats()
        actual = np.asarray(lazy)
    stats = dynfuse.stats()
    assert stats["kernels_launched"] > 0 and stats["fallbacks"] == 0, stats
    return actual, expected


# ---- which mode ---------------------------------------------------------------------------------


def test_column_mode_is_taken_where_memory_runs_along_the_kept_axes():
    matrix = dynfuse.asarray(np.ones((6, 16), np.float32))
    cube = dynfuse.asarray(np.ones((3, 4, 5)))
    assert modes((matrix * 2).sum(axis=0)) == [True]
    assert modes(matrix.var(axis=0)) == [True]  # one kernel of two passes
    assert modes(matrix - matrix.max(axis=0)) == [True]
    assert modes(matrix[:, ::2].sum(axis=0)) == [True]  # strided along the kept axis
    assert modes(cube.sum(axis=1)) == [True]
    assert modes(cube.sum(axis=(0, 1))) == [True]
    assert modes(cube.max(axis=0, keepdims=True)) == [True]
    assert modes(dynfuse.asarray(np.ones((100, 16), np.int8)).sum(axis=0)) == [True]


def test_row_mode_is_kept_where_memory_runs_along_the_reduced_axes():
    matrix = dynfuse.asarray(np.ones((6, 8), np.float32))
    cube = dynfuse.asarray(np.ones((3, 4, 5)))
    assert modes(matrix.sum(axis=1)) == [False]
    assert modes(matrix.T.sum(axis=0)) == [False]  # the transpose steps fastest along axis 0
    assert modes(cube.sum(axis=(0, 2))) == [False]
    assert modes(matrix[:, :1].sum(axis=0)) == [False]  # one column: nothing to vectorize across
    # too few columns (4 float32, 8 int8): a loop over them runs as scalar code
    assert modes(dynfuse.asarray(np.ones((100, 4), np.float32)).sum(axis=0)) == [False]
    assert modes(dynfuse.asarray(np.ones((100, 8), np.int8)).sum(axis=0)) == [False]


# A packed instruction each reduction's column loop has once vectorized: a packed compare for max
# and argmax (then a blend on AVX2, a masked move on AVX-512).
PACKED = {"sum": "addps", "mean": "addps", "var": "addps", "max": r"cmp\w*ps\b", "argmax": r"cmp\w*ps\b"}


@pytest.mark.parametrize("name", sorted(PACKED))
def test_column_loops_vectorize_without_runtime_overlap_checks(name):
    """The lanes lie in the scratch the launcher passes, where alias scopes tell LLVM what separate
    arrays on the stack told it: no lane array overlaps another, nor the inputs and outputs."""
    lazy = reduce(name, dynfuse.asarray(np.ones((256, 1024), np.float32)), 0)
    _, plan = execute.explain_plan([lazy._node], cpu.BACKEND)
    (step,) = plan.kernels
    host = cpu._host()
    splittable = llvm.generate(step.kernel)[1].splittable
    for split in (False, True) if splittable else (False,):  # ENTRY's module; PARTIAL and FINISH's
        optimized = host.emit(str(llvm.generate(step.kernel, split)[0]), "ir").decode()
        assert "vector.memcheck" not in optimized
    assert re.search(PACKED[name], cpu.BACKEND.assembly(step.kernel))


# ---- every reduction, dtype and leading axis ----------------------------------------------------


@pytest.mark.parametrize(("shape", "axis", "keepdims"), LEADING_AXES, ids=str)
@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reductions_over_leading_axes(dtype, name, shape, axis, keepdims):
    data = sample(dtype, shape, np.random.default_rng(len(shape) + 7))
    actual, expected = check(lambda x: reduce(name, x * True, axis, keepdims), data)
    assert_matches(name, actual, expected, data, axis)


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dtype", ["bool", "int8", "float16", "float64"])
def test_chunks_narrower_than_a_row(dtype, name, monkeypatch):
    """Columns in chunks of 8: chunks that end inside a row and a last chunk of 5 columns."""
    monkeypatch.setattr(llvm, "COLUMN_LANES", 8)
    replay.clear_kernels()  # kernels compiled with wider chunks are cached by signature, not by their code
    try:
        data = sample(dtype, (3, 11, 45), np.random.default_rng(4))
        actual, expected = check(lambda x: reduce(name, x, 1), data)
        assert_matches(name, actual, expected, data, 1)
    finally:
        replay.clear_kernels()


@pytest.mark.parametrize(
    ("shape", "axis"),
    [((0, 5), 0), ((5, 0), 0), ((1, 5), 0), ((4, 1, 6), (0, 1)), ((3, 0, 4), 1), ((2, 3, 1, 4), (0, 2))],
    ids=str,
)
@pytest.mark.parametrize("name", ["sum", "prod", "any", "all", "mean", "max", "argmin"])
def test_empty_and_single_element_axes(name, shape, axis):
    """Sums over nothing give the identity; NumPy's errors (a max over nothing) are raised at once."""
    data = sample(np.float32, shape, np.random.default_rng(1), specials=False)
    function = lambda x: reduce(name, x * 1, axis)  # noqa: E731
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of nothing, from both
        try:
            expected = np.asarray(function(data))
        except ValueError:
            with pytest.raises(ValueError):
                function(dynfuse.asarray(data))
            return
        actual = np.asarray(function(dynfuse.asarray(data)))
    assert_matches(name, actual, expected, data, axis)


# ---- layouts, producers, multi-pass kernels -----------------------------------------------------

LAYOUTS = {
    "contiguous": (lambda a: a, True),
    "strided": (lambda a: a[1::2, ::3], True),
    "reversed": (lambda a: a[::-1, ::-1], True),
    "broadcast": (lambda a: np.broadcast_to(a[0], a.shape), True),
    "transposed": (lambda a: a.T, False),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", ["sum", "max", "argmax", "var", "all"])
def test_inputs_in_any_layout(layout, name):
    """Each in the mode its layout calls for: a transposed input steps fastest along axis 0."""
    view, columns = LAYOUTS[layout]
    data = sample(np.float64, (48, 60), np.random.default_rng(2))
    actual, expected = check(lambda x: reduce(name, view(x) * True, 0), data, columns=columns)
    assert_matches(name, actual, expected, np.asarray(view(data)), 0)


def test_fused_producers_are_computed_in_the_column_kernel():
    rng = np.random.default_rng(3)
    a, row = rng.standard_normal((40, 33)).astype(np.float32), rng.standard_normal(33).astype(np.float32)
    function = lambda x, r: (np.sqrt(np.abs(x)) * 2 + r[None, :]).sum(axis=0)  # noqa: E731
    actual, expected = check(function, a, row)
    assert dynfuse.stats()["kernels_launched"] == 1
    np.testing.assert_allclose(actual, expected, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_of_several_passes_read_their_per_column_values(dtype):
    """Softmax along axis 0 (three passes, per-element outputs), centring by a stored mean (a load
    per column), and a mean with the variance of the same array (one kernel, two outputs)."""
    rng = np.random.default_rng(6)
    a = (100 + rng.standard_normal((50, 70))).astype(dtype)
    rtol = 1e-5 if dtype == np.float32 else 1e-12

    def softmax(x):
        exps = np.exp(x - x.max(axis=0, keepdims=True))
        return exps / exps.sum(axis=0, keepdims=True)

    actual, expected = check(softmax, a)
    np.testing.assert_allclose(actual, expected, rtol=rtol)
    means = a.mean(axis=0, keepdims=True)
    actual, expected = check(lambda x, m: ((x - m) ** 2).sum(axis=0), a, means)
    np.testing.assert_allclose(actual, expected, rtol=rtol)
    x = dynfuse.asarray(a)
    mean, variance = x.mean(axis=0), x.var(axis=0)
    assert modes(mean) == [True]
    dynfuse.evaluate(mean, variance)
    np.testing.assert_allclose(np.asarray(mean), a.mean(axis=0), rtol=rtol)
    np.testing.assert_allclose(np.asarray(variance), a.var(axis=0), rtol=100 * rtol)


@pytest.mark.parametrize("threads", [1, 2])
def test_float_column_sums_add_the_rows_in_order_as_numpys(threads, monkeypatch):
    """NumPy adds the rows of an axis-0 sum one by one, and so does column mode: bit for bit on one
    thread; threads that share the rows add their ranges' sums in order, each range's rows in
    order, within a sequential sum's error bound."""
    monkeypatch.setattr(config, "threads", threads)
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 0)
    for dtype in (np.float32, np.float64):
        data = np.random.default_rng(8).random((1 << 16, 40), dtype=dtype)
        actual, expected = check(lambda x: x.sum(axis=0), data)
        if threads == 1:
            np.testing.assert_array_equal(actual, expected)
        bound = len(data) * np.finfo(dtype).eps * np.abs(data).sum(axis=0, dtype=np.float64)
        assert (np.abs(actual - data.astype(np.float64).sum(axis=0)) <= bound).all()


# ---- threads ------------------------------------------------------------------------------------


THREAD_SPLITS = {  # shape: how two or three threads share a one-pass column kernel
    (16, 20000): "columns",  # more columns than one chunk holds: ranges of them
    (256, 1000): "rows",  # every column in one chunk: ranges of the reduced rows, read in order
    (4096, 16): "rows",  # too few columns to share
}


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("shape", sorted(THREAD_SPLITS), ids=str)
def test_column_work_split_across_threads_gives_the_same_results(threads, shape, monkeypatch):
    """Split as ``THREAD_SPLITS`` says (partial states of the reduced rows combined in order), or
    by columns for a kernel of two passes (the variance)."""
    monkeypatch.setattr(config, "threads", threads)
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 0)  # split however small the work
    partial_splits = []
    split_rows = cpu._Launcher.split_rows
    monkeypatch.setattr(
        cpu._Launcher, "split_rows", lambda *args: partial_splits.append(args) or split_rows(*args)
    )
    rng = np.random.default_rng(10)
    data = rng.standard_normal(shape).astype(np.float32)
    data[shape[0] // 2, 3] = np.nan
    ints = rng.integers(-100, 100, shape).astype(np.int32)
    cases = [  # (reduction, what it reduces, of which input)
        ("sum", lambda v: v * 2, data),
        ("argmax", lambda v: v * 1, data),
        ("max", lambda v: v * 1, data),
        ("var", lambda v: v * 1, data),
        ("sum", lambda v: v * v, ints),
        ("any", lambda v: v > 2, data),
    ]
    for name, produce, value in cases:
        partial_splits.clear()
        result = reduce(name, produce(dynfuse.asarray(value)), 0)
        assert modes(result) == [True]
        actual = np.asarray(result)
        splits_rows = threads > 1 and name != "var" and THREAD_SPLITS[shape] == "rows"
        assert len(partial_splits) == splits_rows, (name, partial_splits)
        with np.errstate(invalid="ignore"):
            reduced = produce(value)
            expected = reduce(name, reduced, 0)
        assert_matches(name, actual, expected, reduced, 0)


SMALL_STACK_SCRIPT = """
import threading
import numpy as np
import dynfuse

dynfuse.config.tiers = False
dynfuse.config.threads = 1  # the kernel runs on the thread that asks for it
data = np.random.default_rng(0).random((1024, 8192), dtype=np.float32)
np.asarray((dynfuse.asarray(data) * 2).sum(axis=0))  # compiled here, on the main thread
results = []


def reduce():
    results.append(np.asarray((dynfuse.asarray(data) * 2).sum(axis=0)))


previous = threading.stack_size(64 * 1024)
try:
    thread = threading.Thread(target=reduce)
    thread.start()
    thread.join()
finally:
    threading.stack_size(previous)
print(np.allclose(results[0], (data * 2).sum(axis=0), rtol=1e-5), dynfuse.stats()["fallbacks"])
"""


def test_a_thread_with_a_small_stack_runs_a_column_kernel(tmp_path):
    """A chunk of 8192 float32 columns holds 224 KiB of lanes (a sum's block, its pairwise levels
    and the result), far more than a 64 KiB thread stack: they must not live on the stack. Run in
    another process, which a kernel holding them there crashes."""
    environment = {**os.environ, "DYNFUSE_CACHE_DIR": str(tmp_path), "DYNFUSE_BACKEND": "cpu"}
    result = subprocess.run(
        [sys.executable, "-c", SMALL_STACK_SCRIPT], env=environment, capture_output=True, text=True
    )
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.stdout.split() == ["True", "0"]
