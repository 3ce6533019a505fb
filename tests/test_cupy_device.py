"""backends.cupy_device: NVRTC compiles per architecture, the disk cache, kernels cached per GPU.

The GPU device (``backends.cupy_device``): what it compiles with NVRTC, for which architecture, what
it keeps on disk, how kernels are cached per GPU, and what it says without a GPU. Its arrays and
launches run in tests/test_devices.py and tests/test_reliability.py, on CuPy's interface emulated
(``emulated_cupy``) and, marked ``gpu``, on a GPU."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dynfuse
from dynfuse import config, replay
from dynfuse.backends import cuda, cuda_emulator
from dynfuse.backends.cupy_device import CupyDevice, architecture, compile_program

from . import emulated_cupy
from .helpers import assert_same

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="NVRTC (cupy-cuda13x) is not installed")


DATA = np.linspace(-2, 2, 3000, dtype=np.float32)


def chain(x):
    return x * 3 + x / 7


def float32_kernel_source():
    """The CUDA source of ``chain`` on DATA, as the backend generates it."""
    (source,) = dynfuse.kernel_sources(chain(dynfuse.asarray(DATA)), backend="cuda")
    return source


def test_the_architecture_is_the_gpus_where_nvrtc_knows_it_else_ptx_for_an_older_one():
    supported = (75, 80, 86, 90, 100)
    assert architecture(90, supported) == "sm_90"
    assert architecture(89, supported) == "compute_86"  # the driver finishes PTX for the GPU
    assert architecture(120, supported) == "compute_100"
    with pytest.raises(RuntimeError, match=r"compute capabilities 7\.5 and later; this GPU has 7\.0"):
        architecture(70, supported)


def test_nvrtc_compiles_a_cubin_for_the_gpu_or_ptx_for_the_driver():
    source = float32_kernel_source()
    assert compile_program(nvrtc, source, "sm_90").startswith(b"\x7fELF")
    ptx = compile_program(nvrtc, source, "compute_80")
    assert ptx.endswith(b"\0") and ptx.count(b"\0") == 1 and b".entry dynfuse_kernel" in ptx


def test_float32_arithmetic_keeps_subnormals_as_numpy_does():
    """Compiled without CuPy's -ftz=true (which a RawModule would append): no instruction flushes
    subnormals to zero."""
    ptx = compile_program(nvrtc, float32_kernel_source(), "compute_90").decode()
    arithmetic = re.findall(r"^\s*(?:add|sub|mul|div|fma)\.\S*f32\b.*$", ptx, re.MULTILINE)
    assert arithmetic and not any(".ftz" in line for line in arithmetic)


def test_an_nvrtc_error_names_the_target_and_gives_the_log():
    with pytest.raises(RuntimeError, match=r"NVRTC failed on a CUDA kernel for sm_90(.|\n)*undefined"):
        compile_program(nvrtc, 'extern "C" __global__ void k() { undefined_name(); }', "sm_90")


def test_without_a_gpu_the_device_says_why_and_arrays_cannot_go_there():
    device = CupyDevice()
    if device.unavailable_reason() is None:
        pytest.skip("this machine has a GPU")
    assert "CUDA finds no GPU" in device.unavailable_reason()
    with pytest.raises(ValueError, match="device 'cuda' is not available here: CUDA finds no GPU"):
        dynfuse.asarray([1.0], device="cuda")
    with pytest.raises(ValueError, match="set_backend: the 'cuda' backend cannot run here"):
        dynfuse.set_backend("cuda")


def test_cupys_own_kernels_are_cached_under_dynfuses_cache_by_default(monkeypatch):
    monkeypatch.delenv("CUPY_CACHE_DIR", raising=False)
    CupyDevice().library  # noqa: B018 - imports CuPy, as the first use of the device does
    assert os.environ["CUPY_CACHE_DIR"] == str(config.cache_dir / "cupy")
    monkeypatch.setenv("CUPY_CACHE_DIR", "/elsewhere")
    CupyDevice().library  # noqa: B018
    assert os.environ["CUPY_CACHE_DIR"] == "/elsewhere"  # the user's own choice is kept


@pytest.mark.skipif(cuda_emulator.compiler() is None, reason="no C++ compiler to emulate a CUDA device")
def test_binaries_are_kept_on_disk_per_architecture_and_kernels_cached_per_gpu(monkeypatch):
    compiled = []
    nvrtc_compile = emulated_cupy.compile_program
    monkeypatch.setattr(
        emulated_cupy.LIBRARY.cuda.nvrtc,
        "compileProgram",
        lambda program, options: compiled.append(options) or nvrtc_compile(program, options),
    )
    with emulated_cupy.installed() as device:
        source = float32_kernel_source()
        assert not device.cached(source)
        x = dynfuse.asarray(DATA, device="cuda")
        assert_same(chain(x), chain(DATA))
        assert device.cached(source) and len(compiled) == 1
        assert compiled[0][0] == "--gpu-architecture=sm_90"

        replay.clear_kernels()  # a new process: the binary is loaded from disk, not compiled
        assert_same(chain(x), chain(DATA))
        assert len(compiled) == 1 and dynfuse.stats()["kernels_compiled"] == 2

        # Another GPU, of another architecture: kernels of its own, compiled for it
        monkeypatch.setattr(emulated_cupy.LIBRARY.cuda.runtime, "getDevice", lambda: 1)
        monkeypatch.setattr(
            emulated_cupy.LIBRARY.cuda.runtime,
            "getDeviceProperties",
            lambda gpu: {**emulated_cupy.PROPERTIES, "major": 8, "minor": 9},
        )
        assert cuda.BACKEND.variant() == (1, 8, 9) and not device.cached(source)
        assert_same(chain(x), chain(DATA))
        assert compiled[-1][0] == "--gpu-architecture=sm_89" and len(compiled) == 2


@pytest.mark.skipif(cuda_emulator.compiler() is None, reason="no C++ compiler to emulate a CUDA device")
def test_a_library_call_the_devices_library_lacks_runs_on_host_copies(monkeypatch):
    def lacking(self, function, types, args, kwargs):
        if function is np.median:
            return NotImplemented  # as CuPy answers for a function it does not have
        return emulated_cupy.ndarray.__base__.__array_function__(self, function, types, args, kwargs)

    monkeypatch.setattr(emulated_cupy.ndarray, "__array_function__", lacking)
    values = np.random.default_rng(0).standard_normal((20, 30))
    with emulated_cupy.installed() as device:
        x = dynfuse.asarray(values, device="cuda")
        result = np.median(x * 2, axis=0) + 1
        dynfuse.evaluate(result)
        assert device.owns(result._node.buffer)
        assert dynfuse.stats()["fallback_names"] == {"median on the host": 1}
        assert_same(result, np.median(values * 2, axis=0) + 1)


@pytest.mark.skipif(cuda_emulator.compiler() is None, reason="no C++ compiler to emulate a CUDA device")
def test_the_gpu_benchmark_checks_and_times_every_case_on_the_emulated_device():
    """perf/bench_gpu.py, which only a GPU session can run in full, kept working in CI."""
    perf = Path(__file__).resolve().parent.parent / "perf"
    command = [
        sys.executable,
        "bench_gpu.py",
        "--device",
        "cuda-emulator",
        "--size",
        "tiny",
        "--repeats",
        "2",
    ]
    environment = {**os.environ, "DYNFUSE_CACHE_DIR": str(config.cache_dir)}
    finished = subprocess.run(
        [*command, "--print-only"], cwd=perf, env=environment, capture_output=True, text=True, timeout=600
    )
    assert finished.returncode == 0, finished.stderr
    for case in ("x * 2.5 + y", "GELU (tanh)", "8-op chain", "row softmax", "row layernorm"):
        assert f"| {case}" in finished.stdout


@pytest.mark.skipif(cuda_emulator.compiler() is None, reason="no C++ compiler to emulate a CUDA device")
def test_an_nvrtc_failure_falls_back_with_the_compilers_log(monkeypatch):
    def failing(program, options):
        raise emulated_cupy.NVRTCError("NVRTC_ERROR_COMPILATION (6)")

    monkeypatch.setattr(emulated_cupy.LIBRARY.cuda.nvrtc, "compileProgram", failing)
    monkeypatch.setattr(config, "disk_cache", False)
    with emulated_cupy.installed():
        x = dynfuse.asarray(DATA, device="cuda")
        with pytest.warns(
            RuntimeWarning, match="cuda kernel failed.*NVRTC failed on a CUDA kernel for sm_90"
        ):
            assert_same(chain(x), chain(DATA))
        assert dynfuse.stats()["fallback_names"] == {"kernel:cuda": 1}
