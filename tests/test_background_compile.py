"""The tier policy's background compiles: a kernel's first compiled run is interpreted while it
compiles on a thread of its own, later runs wait for it; which runs are interpreted depends on the
program, never on how long the compile takes; a compile that fails, or a process forked while one is
in flight, still gives every result right."""

import multiprocessing
import sys
import threading
import warnings

import numpy as np
import pytest

import dynfuse
from dynfuse import cache, config, registry
from dynfuse.backends import cpu, groups
from dynfuse.kernel import Target

from .helpers import assert_same

# ``x * 2 + 1`` over 100 float64 is 100 * 2 * 2 = 400 of work: below this, a first sighting is
# interpreted while its kernel compiles; no run is tiny, and every run would compile.
BACKGROUND = Target("background", tiny_elements=4, first_sight_work=0, background_work=1000)


@pytest.fixture(autouse=True)
def tiers_with_background_compiles(monkeypatch):
    monkeypatch.setattr(config, "tiers", True)
    monkeypatch.setattr(config, "threads", 2)
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def held_compiles(monkeypatch):
    """The group backend with BACKGROUND's numbers, whose compiles wait for ``release`` and note the
    thread they ran on."""
    monkeypatch.setattr(registry, "backend", "groups")
    monkeypatch.setattr(groups.BACKEND, "target", BACKGROUND)
    compile_kernel = groups.BACKEND.compile
    release = threading.Event()
    threads = []

    def held_compile(kernel):
        threads.append(threading.current_thread())
        if not release.wait(30):
            raise TimeoutError("the test never released the compile")
        return compile_kernel(kernel)

    monkeypatch.setattr(groups.BACKEND, "compile", held_compile)
    return release, threads


def chain(values):
    return dynfuse.asarray(values) * 2 + 1


def test_the_first_run_is_interpreted_while_the_kernel_compiles_and_the_next_waits_for_it(held_compiles):
    release, threads = held_compiles
    values = np.arange(100.0)
    first = chain(values)
    dynfuse.evaluate(first)  # returns with the compile still held
    assert_same(first, values * 2 + 1)
    stats = dynfuse.stats()
    assert stats["kernels_launched"] == 0 and stats["interpreted_ops"] == 2
    assert threads and threads[0] is not threading.current_thread()

    threading.Timer(0.2, release.set).start()
    second = chain(values)
    dynfuse.evaluate(second)  # waits for the compile, then launches it
    assert_same(second, values * 2 + 1)
    stats = dynfuse.stats()
    assert stats["kernels_launched"] == 1 and stats["kernels_compiled"] == 1 and len(threads) == 1


@pytest.mark.parametrize(
    "elements, threads",
    [(1000, 2), (100, 1)],
    ids=["work past background_work", "one thread configured"],
)
def test_a_kernel_compiles_at_once_without_the_work_or_a_core_to_hide_its_compile_behind(
    elements, threads, monkeypatch
):
    monkeypatch.setattr(registry, "backend", "groups")
    monkeypatch.setattr(groups.BACKEND, "target", BACKGROUND)
    monkeypatch.setattr(config, "threads", threads)
    values = np.arange(float(elements))
    result = chain(values)
    dynfuse.evaluate(result)
    assert_same(result, values * 2 + 1)
    assert dynfuse.stats()["kernels_launched"] == 1


def test_a_failed_background_compile_falls_back_where_its_kernel_is_next_run(monkeypatch):
    """Met where the kernel is next run, the failure warns and is forgotten there, as one on the
    spot would be: the run after that is a first compiled run again. When the compile failed
    makes no difference."""
    monkeypatch.setattr(registry, "backend", "groups")
    monkeypatch.setattr(groups.BACKEND, "target", BACKGROUND)

    def broken_compile(kernel):
        raise RuntimeError("injected compiler failure")

    monkeypatch.setattr(groups.BACKEND, "compile", broken_compile)
    values = np.arange(100.0)
    warned = []
    for _ in range(4):
        result = chain(values)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dynfuse.evaluate(result)
        assert_same(result, values * 2 + 1)
        warned.append(any("injected compiler failure" in str(warning.message) for warning in caught))
    assert warned == [False, True, False, True]
    stats = dynfuse.stats()
    assert stats["kernels_launched"] == 0 and stats["fallbacks"] == 2


def _run_twice_in_forked_child(release, results):
    release.set()  # the child's own copy: its compiles go ahead
    values = np.arange(100.0)
    outputs = []
    for _ in range(2):
        result = chain(values)
        dynfuse.evaluate(result)
        outputs.append(result)
    results.put(([np.asarray(output) for output in outputs], dynfuse.stats()["kernels_launched"]))


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_a_process_forked_during_a_background_compile_compiles_on_its_own(held_compiles):
    """The parent's compile thread does not exist in the child: waiting for its compile would hang."""
    release, _ = held_compiles
    values = np.arange(100.0)
    dynfuse.evaluate(chain(values))  # the compile is now in flight, held
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_run_twice_in_forked_child, args=(release, results))
    child.start()
    outputs, launched = results.get(timeout=60)
    child.join(timeout=60)
    release.set()
    assert child.exitcode == 0
    for output in outputs:
        np.testing.assert_array_equal(output, values * 2 + 1)
    assert launched == 1  # interpreted while compiling in the child, then launched


def test_a_kernel_kept_on_disk_is_loaded_at_once_rather_than_compiled_in_the_background(
    monkeypatch, tmp_path
):
    """On the CPU backend, with a disk cache of its own: a new kernel's first run is interpreted;
    once its code is on disk, a fresh process (here: empty memory caches) launches it at once."""
    monkeypatch.setattr(registry, "backend", "cpu")
    monkeypatch.setattr(config, "cache_dir", tmp_path)
    monkeypatch.setattr(cpu.BACKEND, "target", BACKGROUND)
    monkeypatch.setattr(cpu, "COMPILE_WORK_PER_LINE", 0)  # a compile costs BACKGROUND's nothing too
    values = np.linspace(-3.0, 3.0, 100)
    launched = []
    for clear_memory in (False, False, True):
        if clear_memory:
            cache.clear()
        result = chain(values)
        dynfuse.evaluate(result)
        assert_same(result, values * 2 + 1)
        launched.append(dynfuse.stats()["kernels_launched"])
    assert launched == [0, 1, 2]
    assert dynfuse.stats()["disk_cache_hits"] == 1
