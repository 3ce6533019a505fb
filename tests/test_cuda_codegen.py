"""codegen/cuda without a GPU: every kernel it writes compiles with NVRTC for sm_90 and sm_80.

The CUDA generator checked without a GPU: every kernel it writes for a broad set of fusion groups
(each op and dtype, strided, broadcast and flipped views, float16, reductions along each axis and
their multi-pass and split forms, random DAGs) compiles with NVRTC to PTX for sm_90 and sm_80, so a
code-generation error fails CI. Kernels are compiled in batches, one program each, renamed apart;
a batch that fails is compiled kernel by kernel to name the culprit."""

import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dynfuse
from dynfuse import execute, ops, registry
from dynfuse.codegen import cuda
from dynfuse.kernel import Kernel, Target

from .test_plan_differential import STEP, inputs, record

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="NVRTC (cupy-cuda13x) is not installed")

ARCHITECTURES = ("compute_90", "compute_80")
DTYPES = [np.dtype(name) for name in ("bool", "int8", "uint8", "int16", "int32", "uint32", "int64", "uint64")]
DTYPES += [np.dtype(name) for name in ("float16", "float32", "float64", "complex64", "complex128")]
BACKEND = registry.BACKENDS["cuda"]


def compile_to_ptx(source: str, architecture: str) -> str:
    program = nvrtc.createProgram(source, "dynfuse.cu", [], [])
    try:
        nvrtc.compileProgram(program, [f"--gpu-architecture={architecture}", *cuda.COMPILE_OPTIONS])
    except nvrtc.NVRTCError as error:
        raise AssertionError(f"NVRTC failed for {architecture}:\n{nvrtc.getProgramLog(program)}") from error
    ptx = nvrtc.getPTX(program)
    return ptx.decode() if isinstance(ptx, bytes) else ptx


def check_compiles(kernels: list[Kernel]) -> None:
    """Every kernel the generator has code for (``supports``: not complex functions it lacks)
    compiles for every architecture, and its PTX has its entry."""
    kernels = [kernel for kernel in dict.fromkeys(kernels) if BACKEND.supports(kernel)]
    assert kernels
    bodies = []
    for number, kernel in enumerate(kernels):
        source = BACKEND.source(kernel)
        assert source.startswith(cuda.PRELUDE)
        bodies.append(source[len(cuda.PRELUDE) :].replace(cuda.ENTRY, f"{cuda.ENTRY}_{number}"))
    batch = cuda.PRELUDE + "\n".join(bodies)
    for architecture in ARCHITECTURES:
        try:
            ptx = compile_to_ptx(batch, architecture)
        except AssertionError:
            for body in bodies:  # name the kernel that fails
                compile_to_ptx(cuda.PRELUDE + body, architecture)
            raise
        entries = set(re.findall(rf"\.entry ({cuda.ENTRY}_\w+)", ptx))
        assert entries == set(re.findall(rf"void __launch_bounds__\(\d+\) ({cuda.ENTRY}_\w+)\(", batch))
        assert {f"{cuda.ENTRY}_{number}" for number in range(len(bodies))} <= entries


def kernels_of(*arrays, target: Target = BACKEND.target) -> list[Kernel]:
    outputs = execute.wanted_nodes([array._node for array in arrays])
    saved = BACKEND.target
    BACKEND.target = target
    try:
        _, plan = execute.explain_plan(outputs, BACKEND)
    finally:
        BACKEND.target = saved
    return [step.kernel for step in plan.kernels]


def sample(dtype: np.dtype, shape=(6, 5)) -> np.ndarray:
    values = np.arange(-12, 18, dtype=np.float64).reshape(6, 5)[: shape[0], : shape[1]]
    with np.errstate(all="ignore"):
        return values.astype(dtype)


def recorded(function, *arguments):
    """The kernels of ``function`` on lazy arguments; none where NumPy refuses the dtypes."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return kernels_of(function(*arguments))
    except (TypeError, ValueError, OverflowError, np._core._exceptions._UFuncNoLoopError):
        return []


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_elementwise_op_compiles(dtype):
    x = dynfuse.asarray(sample(dtype))
    y = dynfuse.asarray(sample(dtype)[::-1].T.copy().T)  # another layout: strided loads
    kernels = []
    for name, op in ops.ELEMENTWISE.items():
        if name == "astype":
            kernels += [k for to in DTYPES for k in recorded(lambda a, to=to: a.astype(to), x)]
            continue
        half_powers = {name: exponent for exponent, name in ops.HALF_POWERS.items()}
        if not isinstance(op.reference, np.ufunc) and name not in ("where", "clip", "cube", *half_powers):
            continue
        if name == "cube":
            kernels += recorded(lambda a: a**3, x)  # recorded as cube on float arrays
        elif name in half_powers:
            kernels += recorded(lambda a, e=half_powers[name]: a**e, x)
        elif name == "where":
            kernels += recorded(lambda a, b: np.where(a > 1, a, b), x, y)
        elif name == "clip":
            kernels += recorded(lambda a, b: np.clip(a, b, 7), x, y)
            kernels += recorded(lambda a: np.clip(a, -1, 3), x)  # one-value bounds
        elif op.reference.nin == 1:
            kernels += recorded(op.reference, x)
            kernels += recorded(lambda a, f=op.reference: f(a[::-1, ::2]), x)
        else:
            kernels += recorded(op.reference, x, y)
            kernels += recorded(op.reference, x, 3)  # a weak scalar parameter
            kernels += recorded(op.reference, x, 2.5)
            kernels += recorded(lambda a, f=op.reference: f(a, 300), x)  # an int compared beyond the dtype
            kernels += recorded(lambda a, f=op.reference: f(a[:1], a[:, :1]), x)  # broadcast operands
    if dtype.kind == "c":  # a part of a buffer is a strided load, of a computed value an op
        kernels += recorded(lambda a, b: (a * b).real - a.imag[::-1] + np.angle(b), x, y)
    assert kernels
    check_compiles(kernels)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_reduction_along_each_axis_compiles(dtype):
    x = dynfuse.asarray(sample(dtype))
    kernels = []
    for name in ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all", "mean", "var", "std"):
        for axis in (None, 0, 1):
            kernels += recorded(lambda a, name=name, axis=axis: getattr(a, name)(axis=axis), x)
            kernels += recorded(lambda a, name=name, axis=axis: getattr(a.T[::-1], name)(axis=axis), x)
    kernels += recorded(lambda a: (a * 2).sum(axis=1, keepdims=True) + a, x)
    assert kernels
    check_compiles(kernels)


@pytest.mark.parametrize("row_limit", [1, 32768])
def test_row_kernels_of_several_passes_and_their_split_forms_compile(row_limit):
    target = Target(f"rows<={row_limit}", persistent_row_elements=row_limit)
    kernels = []
    for shape in [(4, 3), (64, 2000), (3, 70000), (1, 1), (0, 5)]:
        x = dynfuse.asarray(np.ones(shape, np.float32))
        softmax = np.exp(x - x.max(axis=1, keepdims=True))
        softmax = softmax / softmax.sum(axis=1, keepdims=True)
        layernorm = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
        kernels += kernels_of(softmax, target=target) + kernels_of(layernorm, target=target)
        kernels += kernels_of(x.astype(np.float16).sum(axis=0), target=target)
    kernels += kernels_of(dynfuse.asarray(np.ones((5, 0))).sum(axis=1), target=target)  # empty rows
    check_compiles(kernels)


def test_large_arrays_use_64_bit_indices():
    x = dynfuse.asarray(np.broadcast_to(np.float32(1), (1 << 15, 1 << 15)))
    (kernel,) = kernels_of(x * 2 + 1)
    source = BACKEND.source(kernel)
    assert "df_i64 element" in source and "df_i32 element" not in source
    (small,) = kernels_of(dynfuse.asarray(np.ones(1000, np.float32)) * 2)
    assert "df_i32 element" in BACKEND.source(small)
    check_compiles([kernel, small])


@pytest.mark.parametrize(
    ("dtype", "vector"), [("float32", "v4.[fu]32"), ("float64", "v2.[fu]64"), ("float16", "v4.u32")], ids=str
)
def test_contiguous_elementwise_kernels_load_and_store_16_bytes_at_once(dtype, vector):
    x = dynfuse.asarray(np.ones(1 << 20, dtype))
    (kernel,) = kernels_of(np.tanh(x * 2 + x))
    ptx = compile_to_ptx(BACKEND.source(kernel), "compute_90")
    assert re.search(rf"ld\.global\.nc\.{vector}\b", ptx)  # 16 bytes, as floats or as words
    assert re.search(rf"st\.global\.{vector}\b", ptx)
    strided = dynfuse.asarray(np.ones((1024, 1024), dtype))[:, ::2]
    (one_by_one,) = kernels_of(np.tanh(strided * 2))  # strides passed at launch: no packs
    assert "df_pack<" not in BACKEND.source(one_by_one).split("// ")[-1]


def test_sources_and_explain_need_no_gpu():
    x = dynfuse.asarray(np.ones((8, 300), np.float32))
    y = np.exp(x - x.max(axis=1, keepdims=True))
    (source,) = dynfuse.kernel_sources(y, backend="cuda")
    assert 'extern "C" __global__' in source and "__shfl_down_sync" in source
    text = dynfuse.explain(y, backend="cuda", source=True)
    assert all(line.strip() in text for line in source[len(cuda.PRELUDE) :].splitlines())
    assert dynfuse.stats()["materializations"] == 0


def test_rolled_loads_compile():
    """Loads that wrap around an axis (``np.roll``), elementwise and in reductions along and across it."""
    kernels = []
    for shape in [(6, 5), (64, 2000), (3, 70000)]:
        x = dynfuse.asarray(np.ones(shape, np.float32))
        stencil = np.roll(x, 1, 0) + np.roll(x, -1, 0) + np.roll(x, 3, 1) - 4 * x
        kernels += kernels_of(stencil) + kernels_of(np.roll(x * 2, 2, 1).sum(axis=1))
        kernels += kernels_of(np.roll(x, (1, -2), (0, 1)).max(axis=0))
    assert all("df_wrap(" in BACKEND.source(kernel) for kernel in kernels)
    check_compiles(kernels)


def test_gathering_loads_compile():
    """Loads moved by index values of every integer dtype (``x[idx]``, ``take_along_axis``),
    elementwise and in reductions along and across the gathered axes."""
    kernels = []
    for shape in [(6, 5), (64, 2000)]:
        x = dynfuse.asarray(np.ones(shape, np.float32))
        for dtype in ["int8", "uint16", "int32", "int64", "uint64"]:
            rows = np.array([3, 1, 0, 5], dtype)
            columns = np.zeros((4, 1), dtype)
            kernels += kernels_of((x * 2)[rows] + 1) + kernels_of((x * 2)[rows, columns].sum(axis=1))
        kernels += kernels_of(np.take_along_axis(x - 1, np.zeros((1, shape[1]), np.int64), 0).max(axis=0))
    assert sum("moved by" in kernel.text() for kernel in kernels) == 2 * (5 * 2 + 1)
    check_compiles(kernels)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    arrays=inputs(),
    program=st.lists(STEP, min_size=6, max_size=24),
    outputs=st.lists(st.integers(0, 1000), max_size=3),
    row_limit=st.sampled_from([1, 4, 32768]),
)
def test_kernels_of_random_dags_compile(arrays, program, outputs, row_limit):
    """The plan-differential tests' random programs, recorded (nothing runs) and planned for cuda."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen = record(program, arrays, outputs)
    target = Target(f"rows<={row_limit}", persistent_row_elements=row_limit)
    kernels = kernels_of(*chosen, target=target)
    if kernels:
        check_compiles(kernels)


def test_only_kernels_that_can_report_a_floating_point_error_take_the_flags_word():
    """A GPU keeps no IEEE flags: a kernel of ops that can report judges their values and takes the
    device's word to report into; one of comparisons, selects and integer arithmetic takes none."""
    x = dynfuse.asarray(np.linspace(-1, 1, 1000, dtype=np.float32))
    i = dynfuse.asarray(np.arange(1000))
    (quiet,) = kernels_of(np.where((x > 0) & (i + 1 > 3), np.maximum(x, 0.5), -x))
    (reporting,) = kernels_of(np.log(x * 2) + 1)
    (dividing,) = kernels_of((i + 1) // (i - 7))
    assert not cuda.generate(quiet)[1].reports and "float_flags" not in BACKEND.source(quiet)
    for kernel in (reporting, dividing):
        source = BACKEND.source(kernel)
        assert cuda.generate(kernel)[1].reports and "atomicOr(float_flags" in source
    assert "df_raised<float>" in BACKEND.source(reporting)
    assert "df_flags |= DF_DIVIDE" in BACKEND.source(dividing)
    check_compiles([quiet, reporting, dividing])
