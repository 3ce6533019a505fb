"""dynfuse.dask: Dask arrays on dynfuse chunks, against the same computations on NumPy chunks.

On Dask's threads, and on a ``distributed`` cluster of two worker processes, where each task's chunk
work is one dynfuse plan run in the worker."""

import contextlib
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynfuse
from dynfuse.backends import cuda, cuda_emulator

from . import emulated_cupy

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
dynfuse_dask = pytest.importorskip("dynfuse.dask")

# Uneven chunks along both axes, and a last chunk of one row.
SHAPE = (1201, 700)
CHUNKS = ((400, 500, 300, 1), (300, 400))


def drawn(seed=0):
    return da.random.default_rng(seed).standard_normal(SHAPE, chunks=CHUNKS)


def softmax(x):
    shifted = da.exp(x - x.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def normal_cdf(x):
    return 0.5 * (1.0 + da.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def black_scholes(spot, strike, years):
    rate, volatility = 0.02, 0.3
    d1 = (da.log(spot / strike) + (rate + 0.5 * volatility**2) * years) / (volatility * da.sqrt(years))
    d2 = d1 - volatility * da.sqrt(years)
    return spot * normal_cdf(d1) - strike * da.exp(-rate * years) * normal_cdf(d2)


def option_inputs(x):
    return 100 + 10 * da.tanh(x), 100 + 5 * da.cos(x), 0.25 + da.abs(da.sin(x))


WORKLOADS = {
    "elementwise chain": lambda x: da.exp(-(x**2)) * 3 + da.sin(x) / (1 + da.abs(x)),
    "sum axis 0": lambda x: (x * 2 + 1).sum(axis=0),
    "sum axis 1": lambda x: (x * 2 + 1).sum(axis=1),
    "sum": lambda x: (x * 2 + 1).sum(),
    "mean axis 0": lambda x: da.exp(x).mean(axis=0),
    "mean axis 1": lambda x: da.exp(x).mean(axis=1),
    "var axis 0": lambda x: (x * 3).var(axis=0),
    "var axis 1": lambda x: (x * 3).var(axis=1),
    "var": lambda x: (x * 3).var(),
    "max axis 0": lambda x: da.abs(x).max(axis=0),
    "max axis 1": lambda x: da.abs(x).max(axis=1),
    "argmax axis 0": lambda x: (x * x).argmax(axis=0),
    "argmax axis 1": lambda x: (x * x).argmax(axis=1),
    "argmax": lambda x: (x * x).argmax(),
    "softmax over rows": softmax,
    "black-scholes": lambda x: black_scholes(*option_inputs(x)),
}


def assert_close(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    if expected.dtype.kind in "iub":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("workload", WORKLOADS, ids=list(WORKLOADS))
def test_on_dask_threads_as_on_numpy_chunks(workload):
    x = drawn()
    expected = WORKLOADS[workload](x).compute(scheduler="threads")
    result = WORKLOADS[workload](dynfuse_dask.from_dask(x))
    assert isinstance(result._meta, dynfuse.LazyArray)
    computed = result.compute(scheduler="threads")
    assert isinstance(computed, dynfuse.LazyArray)
    assert_close(computed, expected)


def test_each_task_materializes_its_chunk_once_in_one_plan():
    x = drawn()
    chunks = math.prod(len(sizes) for sizes in CHUNKS)
    dynfuse.reset_stats()
    result = dynfuse_dask.to_numpy_chunks(da.exp(dynfuse_dask.from_dask(x)) * 2 - x.mean())
    computed = result.compute(scheduler="sync")
    assert type(computed) is np.ndarray
    stats = dynfuse.stats()
    # One plan per chunk task, of one kernel (tests compile every kernel); the mean is NumPy's.
    assert stats["materializations"] == chunks and stats["kernels_launched"] == chunks
    assert_close(computed, (da.exp(x) * 2 - x.mean()).compute(scheduler="sync"))


def test_to_numpy_chunks_gives_numpy_chunks_and_meta():
    x = dynfuse_dask.to_numpy_chunks(dynfuse_dask.from_dask(drawn()) + 1)
    assert type(x._meta) is np.ndarray
    blocks = dask.compute(*x.to_delayed().ravel(), scheduler="sync")
    assert len(blocks) == x.npartitions and all(type(block) is np.ndarray for block in blocks)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two worker processes on loopback, compiling every kernel (no tiers) into the tests' disk
    cache; stopped at the end of the module."""
    saved = {name: os.environ.get(name) for name in ("DYNFUSE_TIERS", "DYNFUSE_CACHE_DIR")}
    os.environ["DYNFUSE_TIERS"] = "0"
    os.environ["DYNFUSE_CACHE_DIR"] = str(tmp_path_factory.mktemp("worker-kernels"))
    try:
        with (
            distributed.LocalCluster(
                n_workers=2,
                processes=True,
                threads_per_worker=1,
                memory_limit="2GiB",
                host="127.0.0.1",
                dashboard_address=None,
            ) as local_cluster,
            distributed.Client(local_cluster) as client,
        ):
            yield client
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.mark.parametrize("workload", WORKLOADS, ids=list(WORKLOADS))
def test_on_a_distributed_cluster_as_on_numpy_chunks(workload, cluster):
    x = drawn()
    expected = WORKLOADS[workload](x).compute()
    cluster.run(dynfuse.reset_stats)
    assert_close(WORKLOADS[workload](dynfuse_dask.from_dask(x)).compute(), expected)
    ran = cluster.run(dynfuse.stats)
    assert len(ran) == 2
    assert sum(stats["kernels_launched"] for stats in ran.values()) > 0  # fused in the workers


def test_workers_compile_each_kernel_once_and_share_the_disk_cache(cluster):
    """After the first run, no worker compiles again: a kernel it has not run yet (its chunks went
    to the other worker) is loaded from the disk cache the other filled."""
    x = dynfuse_dask.from_dask(drawn(1))

    def totals():
        ran = cluster.run(dynfuse.stats).values()
        return {
            "kernels_compiled": sum(stats["kernels_compiled"] - stats["disk_cache_hits"] for stats in ran),
            "kernels_launched": sum(stats["kernels_launched"] for stats in ran),
        }

    cluster.run(dynfuse.reset_stats)
    (da.cos(x) * 2 + 1).sum(axis=0).compute()
    first = totals()
    for _ in range(2):
        (da.cos(x) * 2 + 1).sum(axis=0).compute()
    later = totals()
    assert first["kernels_compiled"] > 0
    assert later["kernels_compiled"] == first["kernels_compiled"]
    assert later["kernels_launched"] == 3 * first["kernels_launched"]


def test_lazy_arrays_leave_dask_arrays_to_dask():
    """As ndarray does (NEP 13): an operator, a ufunc or a dynfuse.numpy function given a Dask
    array builds a Dask array, rather than computing it here."""
    values = np.arange(12.0).reshape(3, 4)
    lazy, dask_array = dynfuse.asarray(values), da.from_array(values, chunks=2)
    dynfuse.reset_stats()
    for result in (
        lazy + dask_array,
        dask_array * lazy,
        np.add(lazy, dask_array),
        dynfuse.numpy.exp(dask_array),
        dynfuse.numpy.mean(dask_array, axis=0),
        dynfuse.numpy.concatenate([dask_array, dask_array]),
    ):
        assert isinstance(result, da.Array)
    assert dynfuse.stats()["materializations"] == 0  # nothing computed while building
    assert_close((lazy + dask_array).compute(scheduler="sync"), values + values)


def test_a_lazy_array_tells_dask_what_it_needs_without_computing():
    base = dynfuse.asarray(np.arange(12.0))
    pending = base * 2
    assert pending.flags.owndata and not pending[2:].flags.owndata and pending.__array_priority__ > 0
    assert dask.base.tokenize(pending) != dask.base.tokenize(pending)  # a fresh token while pending
    assert dynfuse.stats()["materializations"] == 0
    assert dask.base.tokenize(base) == dask.base.tokenize(dynfuse.asarray(np.arange(12.0)))
    assert dask.sizeof.sizeof(pending) == pending.nbytes


def test_dynfuse_run_on_a_script_that_uses_dask_on_a_cluster(tmp_path):
    """The script's NumPy arrays, made into Dask arrays, have lazy chunks; the workers fuse them, and
    the report counts what they ran."""
    script = tmp_path / "uses_dask.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            import dask.array as da
            from distributed import Client, LocalCluster

            if __name__ == "__main__":
                cluster = LocalCluster(
                    n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
                )
                client = Client(cluster)
                x = da.from_array(np.linspace(-2, 2, 60_000).reshape(300, 200), chunks=(100, 200))
                y = np.exp(-(x**2)) * 3 + np.sin(x)
                print(f"{float(y.sum().compute()):.12g} {float(np.mean(y, axis=0)[7].compute()):.12g}")
            """
        )
    )
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DYNFUSE_")}
    environment |= {"DYNFUSE_CACHE_DIR": str(tmp_path / "kernels"), "DYNFUSE_TIERS": "0"}
    report = tmp_path / "report.json"

    def run(*command):
        finished = subprocess.run(
            [sys.executable, *command, str(script)],
            env=environment,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert finished.returncode == 0, finished.stderr
        return finished.stdout

    expected = run()
    assert run("-m", "dynfuse", "run", "--report-file", str(report)) == expected
    workers = json.loads(report.read_text())["workers"]
    assert len(workers) == 2
    assert sum(worker["kernels_launched"] for worker in workers.values()) > 0


@pytest.mark.skipif(cuda_emulator.compiler() is None, reason="no C++ compiler to emulate a CUDA device")
@pytest.mark.parametrize("emulated", ["device", "CuPy"])
def test_chunks_on_a_device_run_on_its_backend(emulated):
    """Chunks a device holds (CuPy's arrays, on a GPU) are lazy arrays on it: each task's plan runs
    on the device's backend until ``to_numpy_chunks``. Here on the emulated CUDA device, and on the
    GPU device's own code over CuPy's interface emulated (``emulated_cupy``)."""
    with contextlib.ExitStack() as stack:
        device = (
            cuda.EMULATOR.device if emulated == "device" else stack.enter_context(emulated_cupy.installed())
        )
        check_chunks_on(device)


def check_chunks_on(device):
    x = da.random.default_rng(1).standard_normal((301, 200), chunks=((150, 150, 1), (100, 100)))
    expected = softmax(x).compute(scheduler="sync")
    meta = np.empty((0, 0), x.dtype)
    on_device = dynfuse_dask.from_dask(x.map_blocks(device.from_host, dtype=x.dtype, meta=meta))
    assert softmax(on_device).blocks[1, 0].compute(scheduler="sync").device == device.name
    dynfuse.reset_stats()
    result = dynfuse_dask.to_numpy_chunks(softmax(on_device)).compute(scheduler="sync")
    assert type(result) is np.ndarray
    stats = dynfuse.stats()
    assert stats["kernels_launched"] > 0 and stats["fallbacks"] == 0
    np.testing.assert_allclose(result, expected, rtol=1e-13, atol=1e-15)
