"""Reliability: out of memory, interrupts, threads and processes never give a wrong answer,
never hang, and leave every array and cache usable."""

import contextlib
import gc
import multiprocessing
import os
import threading
import time
import tracemalloc
import warnings

import numpy as np
import pytest

import dynfuse
from dynfuse import config, disk_cache, execute, launch, registry, replay
from dynfuse.backends import cpu

from . import emulated_cupy
from .helpers import assert_same, held_by_another_thread

# The GPU device's own code runs in CI on CuPy's interface emulated (tests/emulated_cupy.py)
BACKENDS = [
    "cpu",
    "groups",
    "cuda-emulator",
    "cuda on emulated CuPy",
    pytest.param("cuda", marks=pytest.mark.gpu),
]


@pytest.fixture(autouse=True)
def no_dynfuse_faults():
    """A fallback here would hide what these tests check: each must go right, or raise."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="dynfuse: .* failed", category=RuntimeWarning)
        yield


@pytest.fixture
def backend(request, monkeypatch):
    name = request.param
    with contextlib.ExitStack() as installed:
        if name == "cuda on emulated CuPy":
            name = "cuda"
            installed.enter_context(emulated_cupy.installed())
        elif registry.unavailable_reason(name) is not None:
            pytest.skip(registry.unavailable_reason(name))
        monkeypatch.setattr(registry, "backend", name)
        replay.clear_kernels()
        yield registry.BACKENDS[name]
        replay.clear_kernels()


def chain(x):
    return np.exp(x * 0.5) - x / 3


def inputs(seed=0, size=1000):
    return np.random.default_rng(seed).standard_normal(size)


# ---- memory -------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_out_of_memory_for_a_fused_output_raises_memory_error(backend, monkeypatch):
    """As NumPy raises it for the same arrays: not a fault of dynfuse's (no fallback that would only
    ask for the memory again), and nothing changed, so the program may free memory and go on."""
    data = inputs()
    x = dynfuse.asarray(data)
    y = chain(x)

    def no_memory(kernel, memory, given=None):
        raise MemoryError(f"simulated: cannot allocate {kernel.output_layouts}")

    monkeypatch.setattr(launch, "allocate_outputs", no_memory)
    with pytest.raises(MemoryError, match="simulated"):
        np.asarray(y)
    assert dynfuse.stats()["fallbacks"] == 0
    monkeypatch.undo()
    assert_same(y, chain(data))
    assert_same(x, data)


# ---- interrupts ---------------------------------------------------------------------------------


def interrupt_once(where, on_call=1):
    """A function that raises KeyboardInterrupt on call ``on_call``, and otherwise calls ``where``."""
    calls = []

    def interrupted(*arguments):
        calls.append(arguments)
        if len(calls) == on_call:
            raise KeyboardInterrupt
        return where(*arguments)

    return interrupted


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_keyboard_interrupt_during_a_compile(backend, monkeypatch):
    """The interrupt reaches the program; no half-built kernel is cached, the next use compiles it."""
    monkeypatch.setattr(backend, "compile", interrupt_once(backend.compile))
    data = inputs()
    y = chain(dynfuse.asarray(data))
    with pytest.raises(KeyboardInterrupt):
        np.asarray(y)
    assert dynfuse.stats()["kernels_compiled"] == 0
    assert_same(y, chain(data))
    assert dynfuse.stats()["kernels_compiled"] == 1
    assert_same(chain(dynfuse.asarray(data)), chain(data))  # the kernel cached is whole
    assert dynfuse.stats()["kernels_compiled"] == 1


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_keyboard_interrupt_during_a_kernel(backend, monkeypatch):
    compile_kernel = backend.compile
    launch = interrupt_once(lambda compiled, *arguments: compiled(*arguments))  # the first launch of all

    def compile_interrupted_once(kernel):
        compiled = compile_kernel(kernel)
        return lambda *arguments: launch(compiled, *arguments)

    monkeypatch.setattr(backend, "compile", compile_interrupted_once)
    data = inputs()
    x = dynfuse.asarray(data)
    y, z = chain(x), chain(x) * 2
    with pytest.raises(KeyboardInterrupt):
        dynfuse.evaluate(y, z)
    assert not y._node.is_materialized and not z._node.is_materialized
    assert_same(y, chain(data))
    assert_same(z, chain(data) * 2)
    assert_same(x, data)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_keyboard_interrupt_between_the_steps_of_a_plan(backend, monkeypatch):
    """Interrupted after the kernel before a library call (matmul) and the call itself ran: what they
    computed is kept or computed again, and the result is right."""
    monkeypatch.setattr(backend, "compile", interrupt_once(backend.compile, on_call=2))
    data = inputs(size=64).reshape(8, 8)
    y = np.tanh(np.exp(dynfuse.asarray(data) * 0.1) @ data) + 1
    with pytest.raises(KeyboardInterrupt):
        np.asarray(y)
    np.testing.assert_allclose(np.asarray(y), np.tanh(np.exp(data * 0.1) @ data) + 1, rtol=1e-12)


# ---- threads ------------------------------------------------------------------------------------


def thread_programs(shared):
    """Work for one thread: traces of its own, traces over arrays every thread shares."""
    return [
        lambda: chain(shared) * 2,
        lambda: (shared * shared).sum(axis=0),
        lambda: np.maximum(shared[::2] - shared.mean(), 0),
        lambda: np.exp(shared - shared.max(axis=1, keepdims=True)).sum(axis=1),
        lambda: chain(dynfuse.asarray(np.arange(300.0).reshape(10, 30))).T + 1,
    ]


def run_in_threads(count, work):
    """``work(number)`` on ``count`` threads started together; their results, and any exception."""
    start = threading.Barrier(count)
    results, errors = [None] * count, []

    def worker(number):
        try:
            start.wait()
            results[number] = work(number)
        except BaseException as error:  # reported below, whatever it is
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(number,)) for number in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hangs"
    assert not errors, errors
    return results


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_eight_threads_give_the_results_of_one(backend):
    data = inputs(size=4000).reshape(40, 100)
    alone = [np.asarray(program()) for program in thread_programs(dynfuse.asarray(data))]
    shared = dynfuse.asarray(data) + 0  # lazy: the threads share a pending trace, and its leaves

    def work(number):
        values = []
        for _ in range(5):
            for program in thread_programs(shared):
                values.append(np.asarray(program()))
        return values

    for values in run_in_threads(8, work):
        for round_number in range(5):
            for got, expected in zip(values[5 * round_number :], alone, strict=False):
                np.testing.assert_array_equal(got, expected)


def test_a_thread_waiting_for_a_kernel_another_compiles(monkeypatch):
    """No deadlock, and one compile: the second thread finds the first one's kernel."""
    compile_kernel = cpu.BACKEND.compile

    def slow_compile(kernel):
        time.sleep(0.2)
        return compile_kernel(kernel)

    monkeypatch.setattr(registry, "backend", "cpu")
    monkeypatch.setattr(cpu.BACKEND, "compile", slow_compile)
    replay.clear_kernels()
    data = inputs(1234)
    results = run_in_threads(2, lambda number: np.asarray(chain(dynfuse.asarray(data)) + 7.0))
    for result in results:
        np.testing.assert_array_equal(result, results[0])
    np.testing.assert_allclose(results[0], chain(data) + 7.0, rtol=1e-14)
    assert dynfuse.stats()["kernels_compiled"] == 1
    replay.clear_kernels()


# ---- processes ----------------------------------------------------------------------------------


def worker_result(seed):
    """What a worker process computes, and what it did to get there (its own counters)."""
    dynfuse.reset_stats()
    data = inputs(seed, 1 << 21)  # large enough to be split across the pool's threads
    value = float(chain(dynfuse.asarray(data)).sum())
    counters = dynfuse.stats()
    return value, counters["disk_cache_hits"], counters["disk_cache_misses"], counters["fallbacks"]


def expected_value(seed):
    return float(chain(inputs(seed, 1 << 21)).sum())


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_worker_processes_compute_and_share_the_disk_cache(start_method, tmp_path, monkeypatch):
    """Workers started after the parent ran kernels on its thread pool (a forked child inherits the
    pool but not its threads) each compute the right value, and load the parent's kernel from the
    disk cache rather than compile it."""
    monkeypatch.setenv("DYNFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DYNFUSE_TIERS", "0")
    monkeypatch.setattr(config, "cache_dir", tmp_path)
    monkeypatch.setattr(registry, "backend", "cpu")
    replay.clear_kernels()
    assert worker_result(0)[2] >= 1  # compiled, and stored
    context = multiprocessing.get_context(start_method)
    with context.Pool(2) as pool:
        results = pool.map_async(worker_result, [1, 2, 3]).get(timeout=120)
    for seed, (value, _, disk_misses, fallbacks) in zip([1, 2, 3], results, strict=True):
        assert value == pytest.approx(expected_value(seed), rel=1e-12)
        assert fallbacks == 0
        assert disk_misses == 0  # from the disk, or from memory: a forked worker inherits the parent's
    if start_method == "spawn":  # fresh processes: the kernel came from the disk in each
        assert sum(hits for _, hits, _, _ in results) >= 1
    replay.clear_kernels()


def test_a_process_forked_while_another_thread_materializes(monkeypatch):
    """The lock that thread held is free in the child, where that thread does not exist."""
    monkeypatch.setattr(registry, "backend", "cpu")
    with held_by_another_thread(execute.lock), multiprocessing.get_context("fork").Pool(1) as pool:
        (result,) = pool.map_async(worker_result, [5]).get(timeout=120)
    assert result[0] == pytest.approx(expected_value(5), rel=1e-12)


# ---- the disk cache under faults ----------------------------------------------------------------


def test_an_entry_built_by_another_llvm_or_dynfuse_is_never_loaded(tmp_path, monkeypatch):
    """The key holds the versions and the CPU: another build's code is a miss, compiled afresh."""
    monkeypatch.setattr(config, "cache_dir", tmp_path)
    monkeypatch.setattr(registry, "backend", "cpu")
    data = inputs()
    replay.clear_kernels()
    assert_same(chain(dynfuse.asarray(data)), chain(data))
    assert dynfuse.stats()["disk_cache_writes"] == 1
    host = cpu._host()
    monkeypatch.setattr(host, "identity", (*host.identity[:-1], "another LLVM build"))
    replay.clear_kernels()
    dynfuse.reset_stats()
    assert_same(chain(dynfuse.asarray(data)), chain(data))
    counters = dynfuse.stats()
    assert (counters["disk_cache_hits"], counters["disk_cache_misses"]) == (0, 1)
    replay.clear_kernels()


def test_a_full_disk_loses_only_the_reuse(tmp_path, monkeypatch):
    """Writing fails with ENOSPC: one warning, no partial entry left, the kernel still runs."""
    monkeypatch.setattr(config, "cache_dir", tmp_path)
    monkeypatch.setattr(registry, "backend", "cpu")
    monkeypatch.setattr(disk_cache, "_warned", set())

    real_fdopen = os.fdopen

    class FullDisk:
        """A file opened for writing on a disk with no space left."""

        def __init__(self, file):
            self.file = file

        def __enter__(self):
            return self

        def __exit__(self, *exception):
            self.file.close()

        def fileno(self):
            return self.file.fileno()

        def write(self, data):
            raise OSError(28, "No space left on device")

    def fdopen(descriptor, mode="r", *args, **kwargs):
        file = real_fdopen(descriptor, mode, *args, **kwargs)
        return FullDisk(file) if "w" in mode else file

    monkeypatch.setattr(disk_cache.os, "fdopen", fdopen)
    replay.clear_kernels()
    data = inputs()
    with pytest.warns(RuntimeWarning, match="cannot write the disk cache .*No space left"):
        assert_same(chain(dynfuse.asarray(data)), chain(data))
        assert_same(np.exp(dynfuse.asarray(data)) * 3, np.exp(data) * 3)
    assert not list(tmp_path.rglob("*.bin*"))
    assert dynfuse.stats()["disk_cache_writes"] == 0
    replay.clear_kernels()


# ---- a long-running program ---------------------------------------------------------------------


def test_promotion_probes_stay_bounded(monkeypatch):
    """NEP 50 asks about a Python int beyond [0, 127] by value: a loop over such scalars must not
    grow the cache of promotion probes without end (``make soak`` runs this at length)."""
    from dynfuse import dtypes

    monkeypatch.setattr(dtypes._result_dtypes, "limit", 8)
    data = np.arange(5, dtype=np.int16)
    x = dynfuse.asarray(data)
    for value in range(1000, 1040):
        assert_same(x * value, data * value)
        assert len(dtypes._result_dtypes) <= 8
    with pytest.raises(OverflowError):
        x + 100_000  # still asked of NumPy after the cache was emptied


def test_a_loop_of_large_temporaries_does_not_grow():
    """Each iteration's fused result is dropped: memory in use returns to where it was."""
    data = inputs(size=1 << 20)
    x = dynfuse.asarray(data)
    in_use = []
    tracemalloc.start()
    try:
        for _ in range(12):
            y = chain(x) * 2
            assert float(y.sum()) == pytest.approx(float((chain(data) * 2).sum()), rel=1e-12)
            del y
            gc.collect()
            in_use.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert max(in_use[4:]) - min(in_use[4:]) < 1 << 20, in_use


def test_a_fused_chain_allocates_only_its_output():
    """Peak memory of a six-op chain over 8 MB: its output, not a temporary per op."""
    data = inputs(size=1 << 20)
    x = dynfuse.asarray(data)
    np.asarray(((x * 2 + 1) * x - 3) / (x * x + 1))  # compiled once, outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        result = np.asarray(((x * 2 + 1) * x - 3) / (x * x + 1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < result.nbytes * 1.1, (peak, result.nbytes)
    np.testing.assert_allclose(result, ((data * 2 + 1) * data - 3) / (data * data + 1), rtol=1e-15)
