"""The CUDA backend's kernels, run on the emulated device (``cuda-emulator``), against NumPy.

The CUDA backend's kernels run, without a GPU: ``cuda-emulator`` compiles what the CUDA generator
writes with the host's C++ compiler and launches it as on a device (a block's threads as fibers,
meeting at every barrier and warp shuffle), so these tests compare what a GPU would compute with
NumPy. They cover each path of the generator: elementwise grid-stride loops over strided, flipped and
broadcast loads; weak scalars of every dtype; rows reduced by one warp, by several warps through
shared memory, in several passes, and in two stages (rows shared by blocks); every reduction of
every dtype along each axis. The whole of tests/test_exactness.py runs on the emulator too, in
``make test-slow``. On a GPU (``make test-gpu``) the kernel tests run there too, backend ``cuda``."""

import numpy as np
import pytest

import dynfuse
from dynfuse import config, execute, registry, replay
from dynfuse.backends import cuda, cuda_emulator
from dynfuse.codegen import cuda as cuda_codegen

from .helpers import assert_same

NO_COMPILER = pytest.mark.skipif(
    cuda_emulator.compiler() is None, reason="no C++ compiler with _Float16 to emulate a CUDA device"
)

DTYPES = list(dynfuse.dtypes.REAL_DTYPES)  # complex ones: test_complex_kernels_...


@pytest.fixture(
    autouse=True,
    params=[pytest.param("cuda-emulator", marks=NO_COMPILER), pytest.param("cuda", marks=pytest.mark.gpu)],
)
def cuda_backend(request, monkeypatch):
    """The emulated device, or a GPU."""
    reason = registry.unavailable_reason(request.param)
    if reason is not None:
        pytest.skip(reason)
    monkeypatch.setattr(registry, "backend", request.param)
    return request.param


def run(function, *values, close=False):
    """``function`` on lazy arrays and on NumPy arrays: each result compared, all of it launched on
    the emulator (no op interpreted, no fallback). Float results of sums (``close``) differ from
    NumPy's by their order (and complex functions by the device's math library): they are compared
    within a few epsilons of the largest result."""
    lazy = [dynfuse.asarray(value) for value in values]
    with np.errstate(all="ignore"):
        results = function(*lazy)
        expected = function(*values)
        results, expected = (results, expected) if isinstance(results, tuple) else ((results,), (expected,))
        dynfuse.evaluate(*results)
    counted = dynfuse.stats()
    assert counted["kernels_launched"] > 0 and counted["fallbacks"] == 0 and counted["interpreted_ops"] == 0
    for result, wanted in zip(results, expected, strict=True):
        wanted = np.asarray(wanted)
        if close and wanted.dtype.kind in "fc":
            assert result.dtype == wanted.dtype
            tolerance = 64 * np.finfo(wanted.dtype).eps
            scale = max(1.0, float(np.nanmax(np.abs(wanted), initial=0)))
            np.testing.assert_allclose(np.asarray(result), wanted, rtol=tolerance, atol=tolerance * scale)
        else:
            assert_same(result, wanted)


def sample(dtype, shape, seed=0):
    values = np.random.default_rng(seed).uniform(-100, 100, shape)
    if dtype.kind == "b":
        return values > 0
    if dtype.kind == "u":
        values = np.abs(values)
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_elementwise_kernels_over_strided_flipped_and_broadcast_views(dtype):
    x, y = sample(dtype, (37, 45)), sample(dtype, (45, 37), seed=1).T  # y: a transposed layout
    if dtype.kind == "b":
        run(lambda a, b: (a & b[::-1]) | ~a[:, :1], x, y)
        return
    run(lambda a, b: np.maximum(a[::-1, ::2] * 3, b[:, ::2]) - a[:1, ::2] + 2, x, y)
    run(lambda a: (a > 300) | (a < -300) | (a == 7), x)  # ints compared beyond their dtype's range


@pytest.mark.parametrize("dtype", [np.dtype(name) for name in ("float16", "float32", "float64")], ids=str)
def test_float_kernels_with_weak_scalars_and_transcendentals(dtype):
    x = sample(dtype, (300, 41)) / 25
    run(lambda a: np.where(a > 0.5, np.exp(a) * 1.5, np.sin(a) / 3.25) + np.hypot(a, 2.0), x)
    run(lambda a: (a * 1e300, np.floor_divide(a, 0.75), np.remainder(a, -1.5)), x)


@pytest.mark.parametrize("dtype", [np.dtype(name) for name in ("float16", "float32", "float64")], ids=str)
def test_nan_and_infinities_are_classified_as_numpy_classifies_them(dtype):
    x = np.tile(np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, 65504], dtype), 40)
    run(lambda a: (np.isnan(a), np.isinf(a), np.isfinite(a), np.isfinite(a / a)), x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_float_product_overflows_and_underflows_as_numpys_order_does(dtype):
    """Multiplied in NumPy's order: inf then 0 is NaN, 0 then inf is NaN, where other orders give
    0 or inf (one row of each case, and a long row that a warp would share)."""
    big, small = np.finfo(dtype).max / 4, np.finfo(dtype).tiny * 4
    rows = np.ones((4, 300), dtype)
    rows[0, :4] = [big, big, big, 0]
    rows[1, :4] = [small, small, big, big]
    rows[2, :4] = [big, big, small, small]
    rows[3, 100:104] = [big, big, big, big]
    run(lambda a: (np.prod(a, axis=1), np.prod(a[:, :4], axis=1)), rows)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_kernels_over_views_with_scalars_functions_and_sums(dtype):
    """Complex arithmetic and functions fused over strided views with a complex scalar; sums along
    each axis, their pairs combined across a row's threads (rows of 70: more than a warp)."""
    rng = np.random.default_rng(2)
    z = (rng.uniform(-3, 3, (40, 70)) + 1j * rng.uniform(-3, 3, (40, 70))).astype(dtype)
    run(
        lambda a: np.sqrt(a[::-1, ::2] * (0.5 - 2j)) / (np.exp(a[:, ::2] / 4) + 1) - np.log(a[:, 1::2]),
        z,
        close=True,
    )
    run(
        lambda a: (
            np.sin(a[::-1, ::2]) * np.cosh(a[:, 1::2] / 3) + np.tanh(a[:, ::2]) ** 2.5 - np.log10(a[:, 1::2])
        ),
        z,
        close=True,
    )
    run(
        lambda a: (a.sum(axis=0), (a * a.conj()).sum(axis=1), np.abs(a).sum(), (a == a[::-1]).any()),
        z,
        close=True,
    )


def test_a_scan_computed_again_in_a_later_pass_starts_each_row_afresh():
    x = np.arange(1, 61, dtype=np.int8).reshape(3, 20) % 3
    run(lambda a: (np.cumsum(a, axis=1), np.std(np.cumsum(a, axis=1), axis=1)), x, close=True)


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_reduction_along_each_axis_in_one_kernel(dtype, axis):
    """Rows of 40 and 70 elements: more than a warp, so also combined through shared memory."""
    x = sample(dtype, (40, 70))
    names = ["max", "min", "argmax", "argmin", "any", "all"]
    # Float sums and products differ from NumPy's by their order (and float16 sums accumulate in
    # float32 where NumPy rounds each step): test_exactness bounds their error, in make test-slow.
    names += ["sum", "prod"] if dtype.kind in "biu" else ["sum"] if dtype != np.float16 else []

    def reductions(a):
        return tuple(getattr(a * True, name)(axis=axis) for name in names)

    run(reductions, x, close=True)


@pytest.mark.parametrize("shape", [(3, 5), (7, 1000), (3, 2500), (2, 40000)], ids=str)
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=str)
def test_softmax_and_layernorm_over_rows(dtype, shape):
    """A row in one block of several passes, up to a block of 1024 threads, its elements kept in
    registers where they fit (3 a thread for 2500); past the backend's persistent row length the
    reduction is a kernel of its own."""
    x = sample(dtype, shape) / 10

    def softmax(a):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def layernorm(a):
        return (a - a.mean(axis=1, keepdims=True)) / np.sqrt(a.var(axis=1, keepdims=True) + 1e-5)

    run(lambda a: (softmax(a), layernorm(a)), x, close=True)


def _layout(*arrays):
    """The launch layout of the kernel that materializing ``arrays`` takes, and the device."""
    backend = registry.BACKENDS[registry.backend]
    _, plan = execute.explain_plan([array._node for array in arrays], backend)
    (step,) = plan.kernels
    return cuda_codegen.generate(step.kernel)[1], backend.device


def _reductions(dtype):
    names = ["max", "min", "argmax", "argmin", "any", "all"]
    names += ["sum", "prod"] if dtype.kind in "biu" else ["sum"] if dtype != np.float16 else []

    def reductions(a, axis=None):
        return tuple(getattr(a * True, name)(axis=axis) for name in names)

    return reductions


@pytest.mark.parametrize(
    "dtype", [np.dtype(name) for name in ("bool", "int8", "uint64", "float16", "float64")], ids=str
)
@pytest.mark.parametrize("shape", [(5, 7, 30), (45, 70)], ids=str)
def test_reductions_over_leading_axes_of_many_columns_take_column_tiles(dtype, shape, monkeypatch):
    """Columns enough (``COLUMN_ROWS``, lowered here): a warp takes 32 adjacent columns, and warps
    share each column's elements where it has more than a thread's share (their states meet in
    shared memory); every reduction, and a later pass reading a column's value, as NumPy's."""
    monkeypatch.setattr(cuda_codegen, "COLUMN_ROWS", 64)
    replay.clear_kernels()
    x = sample(dtype, shape)
    lazy = dynfuse.asarray(x)
    if len(shape) == 3:  # 210 columns along axis 0 (5 elements: one thread each), 30 along axes 0, 1
        layouts = [_layout(lazy.sum(axis=axis))[0] for axis in (0, (0, 1), 2)]
        assert [layout.threads_per_row >= cuda_codegen.WARP for layout in layouts] == [False, True, True]
    else:  # 70 columns of 45 elements: 8 threads each, in 8 warps
        layout = _layout(lazy.max(axis=0))[0]
        assert (layout.threads_per_row, layout.block_threads) == (8, 256)
    run(lambda a: _reductions(dtype)(a, axis=0), x, close=True)
    if dtype.kind == "f":
        run(lambda a: (a - a.mean(axis=0), a.std(axis=0)), x, close=True)


def test_ties_between_warps_of_a_column_tile_give_the_first_index(monkeypatch):
    """argmax and argmin over equal values held by different warps of a column: the first index, as
    NumPy's."""
    monkeypatch.setattr(cuda_codegen, "COLUMN_ROWS", 64)
    replay.clear_kernels()
    x = np.zeros((60, 96), np.float32)
    x[[7, 20, 41], :] = 1.0
    x[[3, 50], :] = -1.0
    run(lambda a: (a.argmax(axis=0), a.argmin(axis=0)), x)


@pytest.mark.parametrize(
    ("dtype", "shape", "kept"),
    [(np.float32, (3, 2500), 3), (np.float64, (3, 2500), 3), (np.float32, (2, 40000), 0)],
    ids=str,
)
def test_a_thread_keeps_the_elements_it_loaded_for_later_passes(dtype, shape, kept):
    """A kernel of several passes keeps the row elements each thread loaded in registers, where
    they fit ``CACHED_WORDS`` (test_softmax_and_layernorm_over_rows runs such kernels)."""
    lazy = dynfuse.asarray(sample(np.dtype(dtype), shape))
    _, plan = execute.explain_plan(
        [(lazy - lazy.mean(axis=1, keepdims=True))._node], registry.BACKENDS["cuda"]
    )
    generator = cuda_codegen._Generator(plan.kernels[0].kernel)
    assert (generator.threads_per_row, generator.cached_per_thread) == (1024, kept)
    assert len(generator.cached_loads) == (1 if kept else 0)


@pytest.mark.parametrize("shape", [(0,), (3, 0)], ids=str)
def test_kernels_of_several_passes_over_empty_rows(shape):
    """Rows of no elements: nothing to keep in registers; every pass's value is NumPy's."""
    x = np.zeros(shape, np.float32)
    run(lambda a: (a.var(axis=-1), a.std(axis=-1, keepdims=True), a - a.mean(axis=-1, keepdims=True)), x)


@pytest.fixture
def eight_multiprocessors(monkeypatch):
    """A larger emulated device, on which a few rows leave it idle, and fresh launchers for it."""
    monkeypatch.setattr(cuda_emulator.EmulatedDevice, "multiprocessors", 8)
    replay.clear_kernels()
    yield
    replay.clear_kernels()


def run_split(function, *arrays, **options):
    """``run``, where the one kernel of ``function`` shares its rows between blocks (PARTIAL, FINISH)."""
    layout, device = _layout(*function(*map(dynfuse.asarray, arrays)))
    assert cuda.split_blocks(layout, device.multiprocessors, device.resident_threads)
    run(function, *arrays, **options)


@pytest.mark.parametrize(
    "dtype", [np.dtype(name) for name in ("bool", "int8", "uint64", "float16", "float64")], ids=str
)
def test_whole_array_reductions_share_the_array_between_blocks(dtype):
    """PARTIAL's blocks each reduce a chunk of the array, FINISH combines them. Values of one sign: a
    float sum that cancels would leave only its rounding to compare."""
    run_split(_reductions(dtype), np.abs(sample(dtype, (70001,))), close=True)


def test_rows_too_few_to_fill_the_device_are_shared_by_blocks(eight_multiprocessors):
    """Three rows longer than a chunk, along either axis, with an elementwise output written by the
    blocks that read each chunk."""
    dtype = np.dtype(np.float32)
    rows, reductions = np.abs(sample(dtype, (3, 40000), seed=1)), _reductions(dtype)
    run_split(lambda a: (a + 1, *reductions(a, axis=1)), rows, close=True)
    run_split(lambda a: reductions(a, axis=0), rows.T.copy(), close=True)


def test_what_follows_a_shared_reduction_is_computed_once_per_row(eight_multiprocessors):
    x = sample(np.dtype(np.float32), (2, 50000)) / 100
    offsets = np.array([[1.5], [-2.0]], np.float32)
    run_split(lambda a, b: (np.sqrt(np.abs(a.sum(axis=1, keepdims=True) * 2 + b)),), x, offsets, close=True)
    run_split(lambda a: (a.argmax() + 1,), x)


def test_float16_products_across_rows_are_multiplied_in_numpys_order():
    """Every step rounds to float16 where the innermost axis is kept: 16**4 overflows to inf before a
    0.5 comes, in NumPy's order; in a tree's order (16 * 0.5) * ... it would not."""
    x = np.array([[16, 16, 16], [16, 0, 16], [16, 16, 0.5]], np.float16).repeat(2, axis=0)
    run(lambda a: (a.prod(axis=0), (a[:, :, None] * a[:, None, :]).prod(axis=(0, 1))), x)


def test_empty_rows_and_no_rows():
    run(lambda a: (a.sum(axis=1), a.max(axis=0), a.prod(axis=1)), np.ones((5, 0), np.float32)[:, :0].T.T)
    run(lambda a: (a.sum(axis=1), a * 2), np.ones((0, 5), np.int32))


def test_grids_smaller_than_the_work_stride_over_it():
    layout, device = _layout(dynfuse.asarray(np.ones(10000, np.float32)) * 2)
    blocks, threads = cuda.launch_shape(layout, device.multiprocessors, device.resident_threads)
    assert blocks * threads < 10000
    run(lambda a: a * 2 + 1, np.arange(10000, dtype=np.float32))
    run(lambda a: a.sum(axis=1), np.ones((3000, 3), np.int16))  # many rows per block, few blocks


def test_a_kernel_the_host_compiler_refuses_falls_back_with_a_warning(cuda_backend, monkeypatch):
    """A compile that fails (here the compiler is ``false``) runs the kernel by the reference
    executor: the right result, a warning, and the fallback counted for the backend."""
    if cuda_backend != "cuda-emulator":
        pytest.skip("the emulator's own compiler (tests/test_cupy_device.py: NVRTC's faults)")
    monkeypatch.setattr(cuda_emulator, "compiler", lambda: ("false", "false"))
    monkeypatch.setattr(config, "disk_cache", False)
    replay.clear_kernels()
    data = np.linspace(-3, 3, 50)
    with pytest.warns(RuntimeWarning, match="cuda-emulator kernel failed.*host compiler failed"):
        result = np.asarray(np.tanh(dynfuse.asarray(data)) * 3 + 1)
    np.testing.assert_allclose(result, np.tanh(data) * 3 + 1, rtol=1e-15)
    assert dynfuse.stats()["fallback_names"] == {"kernel:cuda-emulator": 1}
    replay.clear_kernels()


def test_a_launch_the_device_refuses_falls_back_with_a_warning(cuda_backend, monkeypatch):
    """A launch that fails (on a GPU, a driver error: too many resources asked, an illegal address)
    is the reference executor's to run: the right result, a warning, the fallback counted. Here
    the emulated device's entry reports failure, as a failed cuLaunchKernel returns one."""
    if cuda_backend != "cuda-emulator":
        pytest.skip("the emulator's own launch (tests/test_cupy_device.py: a GPU's faults)")
    build_function = cuda_emulator.EmulatedDevice.function

    def refusing(device, module, name):
        build_function(device, module, name)
        return lambda grid, block, arguments, workspace: 1

    monkeypatch.setattr(cuda_emulator.EmulatedDevice, "function", refusing)
    replay.clear_kernels()
    data = np.linspace(-3, 3, 50)
    with pytest.warns(RuntimeWarning, match="cuda-emulator kernel failed.*emulated launch of"):
        result = np.asarray(np.tanh(dynfuse.asarray(data)).sum() + dynfuse.asarray(data))
    np.testing.assert_allclose(result, np.tanh(data).sum() + data, rtol=1e-14)
    assert dynfuse.stats()["fallback_names"] == {"kernel:cuda-emulator": 1}
    replay.clear_kernels()


@pytest.mark.parametrize(
    "dtype", [np.dtype(name) for name in ("bool", "int8", "float16", "float32", "float64")], ids=str
)
def test_contiguous_arrays_go_in_packs_when_aligned_and_one_by_one_when_not(dtype):
    """Packs of 8 narrow or 16 bytes of wide elements, a tail of fewer than a pack, a view that starts
    between words (then every element is taken alone), and arrays of several widths in one kernel."""
    a, b = sample(dtype, (1003,)), sample(dtype, (1003,), seed=1)
    wide = sample(np.dtype(np.float64), (1003,), seed=2)
    run(lambda x, y: (np.maximum(x, y), x == y), a, b)
    run(lambda x, y: np.minimum(x[1:], y[:-1]), a, b)
    run(lambda x, w: (x * 2 > w, (w * 3).astype(x.dtype)), a, wide)


def test_a_kernel_that_reports_a_flag_over_a_library_calls_result_warns_as_numpy():
    """NumPy's rerun for the warning reads the library call's result, which the device computed:
    on a host copy of it."""
    x = np.arange(12.0).reshape(3, 4)
    lazy = dynfuse.asarray(x) + 0
    empty = np.concatenate([lazy[:0, 0], lazy[:0, 1]])
    with pytest.warns(RuntimeWarning) as said:
        result = np.asarray(empty.std(keepdims=True))
    with pytest.warns(RuntimeWarning) as numpy_said:
        expected = np.concatenate([x[:0, 0], x[:0, 1]]).std(keepdims=True)
    assert [str(w.message) for w in said] == [str(w.message) for w in numpy_said]
    np.testing.assert_array_equal(result, expected)
