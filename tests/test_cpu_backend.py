"""The CPU backend's own promises: SIMD code, threads, the disk cache across processes.

Its fallback on a failing kernel is tested with the group backend's, in test_schedule.py.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import dynfuse
from dynfuse import config, execute
from dynfuse.backends import cpu

from .test_schedule import check_layouts_in_every_order


@pytest.fixture(autouse=True)
def on_the_cpu_backend(monkeypatch):
    monkeypatch.setattr(config, "backend", "cpu")


def kernel_of(array):
    _, plan = execute.explain_plan([array._node], cpu.BACKEND)
    (step,) = plan.kernels
    return step.kernel


def test_float32_chains_compile_to_vector_instructions():
    x = dynfuse.asarray(np.ones(4096, np.float32))
    assembly = cpu.BACKEND.assembly(kernel_of(np.maximum(x * 2, 0) + 1))
    vector_ops = [op for op in ("vmaxps", "vaddps", "vmulps", "maxps", "addps", "mulps") if op in assembly]
    assert vector_ops, assembly


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_work_split_across_threads_gives_the_same_results(threads, monkeypatch):
    """Ranges of elements, of rows, and within each row (three rows, more threads than rows)."""
    monkeypatch.setattr(config, "threads", threads)
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 0)  # split however small the work
    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 1 << 17)).astype(np.float32)
    x = dynfuse.asarray(data)
    total, rows, chain = (x * x).sum(), np.argmax(x, axis=1), np.tanh(x) * 2
    dynfuse.evaluate(total, rows, chain)
    np.testing.assert_allclose(np.asarray(total), (data.astype(np.float64) ** 2).sum(), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(rows), np.argmax(data, axis=1))
    np.testing.assert_allclose(np.asarray(chain), np.tanh(data) * 2, rtol=1e-6)


def test_float32_sums_are_as_accurate_as_numpy():
    data = np.random.default_rng(2).random(10**7, dtype=np.float32)
    exact = data.astype(np.float64).sum()
    ours = float(np.asarray(dynfuse.asarray(data).sum()))
    assert abs(ours - exact) <= 2 * abs(float(data.sum()) - exact) + np.spacing(np.float32(exact))


def test_a_second_process_loads_kernels_from_the_disk_cache(tmp_path):
    script = (
        "import numpy as np, dynfuse\n"
        "dynfuse.config.tiers = False\n"
        "x = dynfuse.asarray(np.arange(1000.0))\n"
        "print(float(np.asarray((np.sqrt(x) * 3 + 1).sum())), dynfuse.stats()['kernels_compiled'],"
        " dynfuse.stats()['disk_cache_hits'])\n"
    )
    environment = {**os.environ, "DYNFUSE_CACHE_DIR": str(tmp_path), "DYNFUSE_BACKEND": "cpu"}

    def run() -> list[str]:
        result = subprocess.run(
            [sys.executable, "-c", script], env=environment, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    first, second = run(), run()
    assert first[0] == second[0]
    assert first[2] == "0" and int(second[2]) >= 1  # the second process compiled nothing new


def test_parameters_numpy_converts_keep_the_range_flags_of_compared_ints():
    """1e300 overflows float32, so NumPy converts the parameters; 300 and -1 lie outside uint8's
    range, so their comparisons are decided by flags, which must survive that conversion."""
    small = np.array([1, 200, 255], np.uint8)
    values = np.array([1.0, -2.0, 3.0], np.float32)
    x, y = dynfuse.asarray(small), dynfuse.asarray(values)
    with np.errstate(over="ignore", invalid="ignore"):
        for lazy, eager in (
            ((y + 1e300 > 0) & (x < 300), (values + 1e300 > 0) & (small < 300)),
            ((x > -1) & (y * 1e300 < 0), (small > -1) & (values * 1e300 < 0)),
        ):
            np.testing.assert_array_equal(np.asarray(lazy), eager)


def test_kernels_compiled_for_one_layout_are_not_reused_for_another(monkeypatch):
    check_layouts_in_every_order(np.float32, monkeypatch)


def test_data_addresses_are_read_as_numpy_reports_them():
    base = np.arange(24.0).reshape(4, 6)
    for array in (base, base[1:, ::-2], base.T, np.broadcast_to(base[0], (3, 6)), np.empty(0), base[2:3]):
        assert cpu._data_address(array) == array.__array_interface__["data"][0]
