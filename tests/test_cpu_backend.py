"""The CPU backend's own promises: split functions built when a launch calls them, threads, compile
estimates, the disk cache across processes, the C kernel call. (The code it generates:
test_llvm_codegen.py.)

Its fallback on a failing kernel is tested with the group backend's, in test_schedule.py.
"""

import ctypes
import itertools
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import dynfuse
from dynfuse import cache, config, execute, launch, pools, registry, replay, tiers
from dynfuse.backends import cpu
from dynfuse.codegen import llvm
from dynfuse.devices import HOST

from .helpers import kernel_of
from .test_schedule import check_layouts_in_every_order


@pytest.fixture(autouse=True)
def on_the_cpu_backend(monkeypatch):
    monkeypatch.setattr(registry, "backend", "cpu")


def test_a_reduction_builds_its_split_functions_only_when_threads_share_its_rows(monkeypatch):
    """PARTIAL and FINISH are two thirds of a reduction's compile time: built the first time a
    launch shares rows between threads, and then kept."""
    data = np.random.default_rng(4).standard_normal(1 << 12)
    total = dynfuse.asarray(data) * 2
    kernel = kernel_of(total.sum())
    launcher = cache.compiled_kernel(cpu.BACKEND, kernel)
    np.testing.assert_allclose(float((dynfuse.asarray(data) * 2).sum()), (data * 2).sum())
    assert launcher.layout.splittable and launcher.partial is None
    monkeypatch.setattr(config, "threads", 2)
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 0)  # split however small the work
    for _ in range(2):
        np.testing.assert_allclose(float((dynfuse.asarray(data) * 2).sum()), (data * 2).sum())
        assert launcher.partial is not None and launcher.finish is not None
    assert cache.compiled_kernel(cpu.BACKEND, kernel) is launcher


def test_dear_elements_split_across_threads_sooner(monkeypatch):
    """A kernel's work counts its elements by what its ops cost (the generator's measured costs of
    math functions, else the op table's): an exp chain's elements weigh several cheap chains', so it
    splits across threads from that many times fewer elements."""
    monkeypatch.setattr(config, "threads", 2)
    x = dynfuse.asarray(np.random.default_rng(6).uniform(0.1, 0.9, 1 << 12))
    cheap = cache.compiled_kernel(cpu.BACKEND, kernel_of(np.maximum(x * 2, 0) + 1))
    dear = cache.compiled_kernel(cpu.BACKEND, kernel_of(np.exp(x) * 2 + 1))
    exp_cost = llvm.FUNCTION_COSTS["exp"][1]  # a float64 result's
    assert (cheap.layout.element_cost, dear.layout.element_cost) == (3.0, 2 + exp_cost)
    assert (cheap.work, dear.work) == (1 << 12, int((1 << 12) * (2 + exp_cost) / 3))
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 1 << 13)
    assert not cheap.shares_rows(2) and cheap.work < cpu.PARALLEL_ELEMENTS <= dear.work
    np.testing.assert_allclose(np.asarray(np.exp(x) * 2 + 1), np.exp(np.asarray(x)) * 2 + 1, rtol=1e-15)


def test_a_reduction_whose_rows_threads_share_builds_its_entry_only_when_called(monkeypatch):
    monkeypatch.setattr(config, "threads", 2)
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 0)
    data = np.random.default_rng(5).standard_normal(1 << 12)
    kernel = kernel_of((dynfuse.asarray(data) - 1).max())
    launcher = cache.compiled_kernel(cpu.BACKEND, kernel)
    assert launcher.partial is not None and launcher.entry is None
    assert float((dynfuse.asarray(data) - 1).max()) == (data - 1).max()
    monkeypatch.setattr(config, "threads", 1)
    assert float((dynfuse.asarray(data) - 1).max()) == (data - 1).max()
    assert launcher.entry is not None


def test_a_compile_is_estimated_by_the_lines_of_the_module_a_launch_calls(monkeypatch):
    """A longer chain costs more to compile; a reduction whose rows threads share compiles PARTIAL
    and FINISH, not ENTRY: its estimate follows the threads configured."""
    x = dynfuse.asarray(np.ones(4096, np.float32))
    short, long = (kernel_of(chain) for chain in (x * 2, np.tanh(np.exp(x * 2) - 1) / 3 + x))
    least, per_line = cpu.BACKEND.target.first_sight_work, cpu.COMPILE_WORK_PER_LINE
    for kernel in (short, long):
        lines = cpu._module(kernel, split=False).text.count("\n")
        assert cpu.BACKEND.compile_work(kernel) == least + per_line * lines
    assert cpu.BACKEND.compile_work(long) > 2 * cpu.BACKEND.compile_work(short)
    total = kernel_of((x * 2).sum())
    monkeypatch.setattr(config, "threads", 2)
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 0)
    lines = cpu._module(total, split=True).text.count("\n")
    assert cpu.BACKEND.compile_work(total) == least + per_line * lines


def test_the_least_a_compile_costs_is_said_without_code_and_under_what_it_costs(monkeypatch):
    """``least_compile_work`` reads the kernel's instructions alone (the code generator is not run,
    here made to fail) and is at most ``compile_work``, for short and long chains, weak scalars,
    strided views and a reduction, on one thread or split."""
    x = dynfuse.asarray(np.ones((64, 64), np.float32))
    kernels = [
        kernel_of(chain)
        for chain in (
            x * 2,
            np.tanh(np.exp(x * 2) - 1) / 3 + x,
            0.25 * (x[1:-1, :-2] + x[1:-1, 2:] + x[:-2, 1:-1] + x[2:, 1:-1]),
            (x * 2).sum(axis=0),
            ((x - x.mean()) ** 2).sum(),
        )
    ]
    for threads in (1, 2):
        monkeypatch.setattr(config, "threads", threads)
        monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 0)
        cpu._modules.clear()
        with monkeypatch.context() as patched:
            patched.setattr(cpu, "_module", None)  # generating code would raise TypeError
            least = [cpu.BACKEND.least_compile_work(kernel) for kernel in kernels]
        for kernel, bound in zip(kernels, least, strict=True):
            assert cpu.BACKEND.target.first_sight_work < bound <= cpu.BACKEND.compile_work(kernel)


def test_a_kernel_is_not_asked_its_cost_before_its_work_reaches_the_least_compile(monkeypatch, tmp_path):
    """With no code kept, the tier policy asks ``compile_work`` (which generates the code) only once
    a kernel's interpreted work reaches ``least_compile_work`` and starting the compiler: a program
    that ends before that never generates it."""
    monkeypatch.setattr(config, "tiers", True)
    monkeypatch.setattr(config, "cache_dir", tmp_path)
    monkeypatch.setattr(registry, "backend", "cpu")
    monkeypatch.setattr(tiers, "_sightings", {})
    replay.clear_kernels()  # a kernel this process compiled would be launched without asking
    x = dynfuse.asarray(np.ones(1 << 17))
    kernel = kernel_of(np.exp(x) * 3)
    key = (cpu.BACKEND.name, kernel.signature)
    least = cpu.BACKEND.least_compile_work(kernel) + cpu.BACKEND.target.start_work
    seen, asked = [0.0], []

    def ask(self, kernel):
        asked.append(tiers._sightings[key])
        return 1e30

    monkeypatch.setattr(cpu.CpuBackend, "compile_work", ask)
    compiled = dynfuse.stats()["kernels_compiled"]
    for _ in range(10_000):
        np.testing.assert_allclose(np.asarray(np.exp(x) * 3), np.exp(np.ones(1 << 17)) * 3)
        seen.append(tiers._sightings.get(key, 0.0))
        if asked:
            break
    assert seen[-2] < least <= asked[0] == seen[-1]
    assert dynfuse.stats()["kernels_compiled"] == compiled


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


def test_a_thread_that_starts_late_leaves_its_ranges_to_the_others(monkeypatch):
    """A split launch is cut into more ranges than threads, each taken by whichever thread is free:
    run here one thread after the other (the Python pool's path, where the C launcher is not
    built), the first takes every range, the second finds none, and every element is computed once."""
    monkeypatch.setattr(cpu, "run_ranges", None)
    monkeypatch.setattr(config, "threads", 2)
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 0)
    monkeypatch.setattr(cpu, "PIECE_WORK", 1)
    monkeypatch.setattr(pools.WORKERS, "run_all", lambda calls: [call() for call in calls])
    taken_by: list[list[tuple[int, int]]] = []
    take_ranges = cpu._take_ranges

    def noted(entry, address, scratch, ranges, taken):
        mine: list[tuple[int, int]] = []
        taken_by.append(mine)

        def run(*arguments):
            mine.append(arguments[2:])
            entry(*arguments)

        take_ranges(run, address, scratch, ranges, taken)

    monkeypatch.setattr(cpu, "_take_ranges", noted)
    data = np.random.default_rng(3).standard_normal(1 << 16).astype(np.float32)
    result = np.asarray(np.maximum(dynfuse.asarray(data) * 2, 0) + 1)
    np.testing.assert_array_equal(result, np.maximum(data * 2, 0) + 1)
    first, second = taken_by
    assert len(first) == 2 * cpu.PIECES_PER_THREAD and second == []
    assert [start for start, _ in first] == [0] + [stop for _, stop in first[:-1]]
    assert first[-1][1] == data.size


RANGE_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def ranges_run(takers: int, bounds: list[int]) -> list[tuple[int, int, int, int]]:
    """``run_ranges`` with an entry that notes (cells, scratch, start, stop) of each call."""
    noted = []
    entry = RANGE_ENTRY(lambda cells, scratch, start, stop: noted.append((cells, scratch, start, stop)))
    scratch = [1000 * (taker + 1) for taker in range(takers)]
    cpu.run_ranges(ctypes.cast(entry, ctypes.c_void_p).value, 77, scratch, bounds)
    return noted


@pytest.mark.skipif(cpu.run_ranges is None, reason="the C launcher's threads are not built here")
@pytest.mark.parametrize("takers", [1, 2, 3])
def test_the_c_launchers_threads_run_every_range_once_each_with_its_own_scratch(takers):
    """Ranges taken in turn by the calling thread and the pool's, launch after launch (the pool's
    threads spin between launches, then sleep): each range run once, with the cells given and a
    scratch that is one taker's."""
    for number in range(200):
        bounds = sorted({0, 1000, *np.random.default_rng(number).integers(1, 1000, 40).tolist()})
        noted = ranges_run(takers, bounds)
        assert sorted((start, stop) for _, _, start, stop in noted) == list(itertools.pairwise(bounds))
        assert {cells for cells, *_ in noted} == {77}
        assert {scratch for _, scratch, *_ in noted} <= {1000 * (taker + 1) for taker in range(takers)}
        if number % 50 == 49:
            time.sleep(0.002)  # long enough for the pool's threads to sleep: they are woken


@pytest.mark.skipif(cpu.run_ranges is None, reason="the C launcher's threads are not built here")
def test_launches_from_several_python_threads_share_the_c_pool_safely():
    """One launch at a time has the pool: another runs its ranges on its own thread."""
    bounds = list(range(0, 601, 5))
    wrong = []

    def launches():
        for _ in range(50):
            noted = ranges_run(2, bounds)
            if sorted((start, stop) for _, _, start, stop in noted) != list(itertools.pairwise(bounds)):
                wrong.append(noted)

    threads = [threading.Thread(target=launches) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


@pytest.mark.skipif(
    cpu.run_ranges is None or not hasattr(os, "fork"), reason="the C launcher's threads are not built here"
)
def test_a_forked_child_starts_its_own_pool_threads(monkeypatch):
    """The parent's pool threads do not exist in a forked child: its split launches start new ones."""
    monkeypatch.setattr(config, "threads", 2)
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 0)
    data = np.random.default_rng(8).standard_normal(1 << 16)
    expected = np.tanh(data) * 2
    np.testing.assert_allclose(np.asarray(np.tanh(dynfuse.asarray(data)) * 2), expected, rtol=1e-15)
    assert len(ranges_run(2, [0, 5, 10, 15])) == 3  # the parent's pool is started
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # forking a process with threads
        child = os.fork()
    if child == 0:
        try:
            same = np.allclose(np.asarray(np.tanh(dynfuse.asarray(data)) * 2), expected, rtol=1e-15)
            os._exit(0 if same and len(ranges_run(2, [0, 5, 10, 15])) == 3 else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_float32_sums_are_as_accurate_as_numpy():
    data = np.random.default_rng(2).random(10**7, dtype=np.float32)
    exact = data.astype(np.float64).sum()
    ours = float(np.asarray(dynfuse.asarray(data).sum()))
    assert abs(ours - exact) <= 2 * abs(float(data.sum()) - exact) + np.spacing(np.float32(exact))


def test_a_scan_computed_again_in_a_later_pass_starts_each_row_afresh():
    """``std(cumsum(x))`` with the scan an output too: its pass stores it, the variance's pass
    computes it again from the identity, not from where the first pass left it."""
    x = np.arange(1, 61, dtype=np.int8).reshape(3, 20) % 3
    lazy = dynfuse.asarray(x)
    running = np.cumsum(lazy, axis=1)
    spread = np.std(running, axis=1)
    dynfuse.evaluate(running, spread)
    np.testing.assert_array_equal(np.asarray(running), np.cumsum(x, axis=1))
    np.testing.assert_allclose(np.asarray(spread), np.std(np.cumsum(x, axis=1), axis=1), rtol=1e-12)
    assert dynfuse.stats()["kernels_launched"] == 1


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


# The C kernel call (dynfuse/_launch.c) against the Python packing it stands in for.

needs_kernel_call = pytest.mark.skipif(
    cpu.KernelCall is None, reason="dynfuse._launch is not built or is off"
)


def launch_both_ways(array):
    """The kernel of ``array``'s trace launched by the C call and by the Python packing, on the
    same inputs: the outputs of each, and the launcher."""
    nodes, plan = execute.explain_plan([array._node], cpu.BACKEND)
    (step,) = plan.kernels
    kernel = step.kernel
    inputs = [
        launch.read(launch.leaf_value(nodes[load.node]), load, kernel.shape, HOST) for load in step.loads
    ]
    params = [nodes[number].buffer for number in step.params]
    launcher = cpu.BACKEND.compile(kernel)
    assert launcher.native is not None
    native = launch.launch(kernel, launcher, inputs, params)
    launcher.native = None
    python = launch.launch(kernel, launcher, inputs, params)
    return native, python


@pytest.mark.skipif(config.pure_python, reason="DYNFUSE_PURE_PYTHON=1 switches the C extensions off")
def test_the_c_kernel_call_is_built_and_in_use():
    """``make test`` builds dynfuse._launch: if it stops doing so, this fails rather than skips."""
    assert cpu.KernelCall is not None
    x = dynfuse.asarray(np.ones(4096, np.float32))
    assert cpu.BACKEND.compile(kernel_of(x * 2 + 1)).native is not None


def parameter_programs():
    """A program per parameter dtype the C call packs, over contiguous and strided inputs."""
    rng = np.random.default_rng(5)
    for dtype in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        values = rng.integers(0, 100, (6, 10)).astype(dtype)
        yield dtype, values, lambda x: (x * 3 + 7) // 2 - 1
    for dtype in ("float32", "float64"):
        values = rng.standard_normal((6, 10)).astype(dtype)
        values[0, :3] = (np.nan, -0.0, np.inf)
        yield dtype, values, lambda x: np.maximum(x * 1.5 - 0.1, -0.25) / 3.0
    yield "bool", rng.integers(0, 2, (6, 10)).astype(bool), lambda x: (x & True) | (x ^ False)


@needs_kernel_call
@pytest.mark.parametrize("name, values, program", list(parameter_programs()))
@pytest.mark.parametrize("view", ["contiguous", "strided"])
def test_the_c_kernel_call_packs_as_the_python_packing_does(name, values, program, view, monkeypatch):
    monkeypatch.setattr(config, "tiers", False)
    operand = values if view == "contiguous" else values.T[::-2]
    native, python = launch_both_ways(program(dynfuse.asarray(operand)))
    expected = program(operand)
    for ours, theirs in zip(native, python, strict=True):
        assert ours.dtype == theirs.dtype == expected.dtype
        assert ours.tobytes() == theirs.tobytes()
    np.testing.assert_array_equal(native[0], expected)


@needs_kernel_call
def test_the_c_kernel_call_declines_what_it_would_pack_otherwise(monkeypatch):
    """A parameter struct cannot pack (a float beyond float32's range), or an input that is not an
    array: nothing runs, False comes back, and the Python packing then gives NumPy's answer."""
    monkeypatch.setattr(config, "tiers", False)
    values = np.array([1.0, -2.0, 0.0], np.float32)
    x = dynfuse.asarray(values)
    launcher = cpu.BACKEND.compile(kernel_of(x * 2.5))
    output = np.full(3, 7.0, np.float32)
    assert launcher.native.run([values], [1e300], [output]) is False
    assert launcher.native.run([list(values)], [2.5], [output]) is False
    np.testing.assert_array_equal(output, 7.0)
    assert launcher.native.run([values], [2.5], [output]) is True
    np.testing.assert_array_equal(output, values * 2.5)
    with np.errstate(over="ignore", invalid="ignore"):
        np.testing.assert_array_equal(np.asarray(x * 1e300), values * 1e300)


@needs_kernel_call
def test_a_malformed_kernel_call_raises_rather_than_crashes():
    x = dynfuse.asarray(np.ones(5, np.float32))
    launcher = cpu.BACKEND.compile(kernel_of(x * 2 + 1))
    with pytest.raises(TypeError, match="inputs"):
        launcher.native.run([], [2.0, 1.0], [np.empty(5, np.float32)])
    with pytest.raises(TypeError, match="list or tuple"):
        launcher.native.run(np.ones(5), [2.0, 1.0], [np.empty(5, np.float32)])
    with pytest.raises(TypeError):
        launcher.native.run([np.ones(5, np.float32)])
    layout = dict(entry=0, inputs=1, outputs=1, strided=(), ndim=1, param_cell=2, cell_count=3, rows=5)
    with pytest.raises(ValueError, match="parameter code"):
        cpu.KernelCall(**layout, param_codes="z")
    with pytest.raises(ValueError, match="does not add up"):
        cpu.KernelCall(**{**layout, "param_cell": 3}, param_codes="f")
    with pytest.raises(ValueError, match="not an input or output"):
        cpu.KernelCall(**{**layout, "strided": (2,), "param_cell": 3, "cell_count": 4}, param_codes="f")


@pytest.mark.parametrize(
    "setting, warned",
    [
        ("sys.modules['dynfuse._launch'] = types.SimpleNamespace(INTERFACE_VERSION=0)", True),
        ("os.environ['DYNFUSE_PURE_PYTHON'] = '1'", False),
    ],
    ids=["stale build", "switched off"],
)
def test_without_the_c_kernel_call_kernels_launch_through_ctypes(setting, warned):
    code = f"""
import os, sys, types, warnings
{setting}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import dynfuse, numpy as np
from dynfuse.backends import cpu
dynfuse.config.tiers = False
print(cpu.KernelCall, [str(warning.message) for warning in caught])
print(np.asarray(dynfuse.asarray(np.arange(3.0)) * 2 + 1).tolist(), dynfuse.stats()["kernels_launched"])
"""
    environment = {key: value for key, value in os.environ.items() if key != "DYNFUSE_PURE_PYTHON"}
    printed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=environment
    ).stdout
    assert printed.startswith("None") and ("the C kernel launcher is not used" in printed) == warned
    assert printed.endswith("[1.0, 3.0, 5.0] 1\n")


def test_llvm_is_set_up_only_when_a_kernel_is_compiled_or_loaded(tmp_path):
    """llvmlite's binding (45 ms of import) waits for the first kernel a process compiles or loads:
    a script whose work stays interpreted never imports it."""
    code = (
        "import sys, numpy, dynfuse; small = dynfuse.asarray(numpy.arange(10.0)); "
        "print(float((small * 2).sum()), 'llvmlite.binding' in sys.modules); "
        "dynfuse.config.tiers = False; print(float((small * 3).sum()), 'llvmlite.binding' in sys.modules)"
    )
    environment = {
        **os.environ,
        "DYNFUSE_BACKEND": "cpu",
        "DYNFUSE_TIERS": "1",
        "DYNFUSE_CACHE_DIR": str(tmp_path),
    }
    result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["90.0", "False", "135.0", "True"]


def test_an_empty_disk_cache_is_seen_without_starting_llvm(tmp_path):
    """Whether a kernel's code is on disk: with nothing there, LLVM (20 ms) is not started for the
    key, so the first compile starts it, on a thread of its own where a core is free."""
    code = (
        "import numpy, dynfuse\n"
        "from dynfuse.backends import cpu\n"
        "from tests.helpers import kernel_of\n"
        "kernel = kernel_of(dynfuse.asarray(numpy.ones(64)) * 2 + 1)\n"
        "print(cpu.BACKEND.cached(kernel), cpu._llvm is None)\n"
    )
    environment = {**os.environ, "DYNFUSE_CACHE_DIR": str(tmp_path / "cache"), "DYNFUSE_TIERS": "0"}
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["False", "True"], done.stderr
