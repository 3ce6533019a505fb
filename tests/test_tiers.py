"""The tier policy: tiny work interpreted unplanned unless it repeats; a kernel interpreted until
that has cost what getting its code would. And its background compiles: a kernel's first compiled
run is interpreted while it compiles on a thread of its own, later runs wait for it; which runs are
interpreted depends on the program, never on how long the compile takes; a compile that fails, or a
process forked while one is in flight, still gives every result right."""

import dataclasses
import multiprocessing
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import dynfuse
from dynfuse import config, registry, replay, tiers
from dynfuse.backends import cpu, groups
from dynfuse.kernel import Target

from .helpers import assert_same
from .test_replay import replayed
from .test_schedule import close, lazy


@pytest.fixture(autouse=True)
def tiers_in_a_fresh_process(monkeypatch):
    """Tiers on, on the group backend unless a test says otherwise, with a core to compile in the
    background; no kernel compiled or seen yet. Small work is recorded, not run at once (``direct``),
    as it is where its operands are pending."""
    monkeypatch.setattr(config, "tiers", True)
    monkeypatch.setattr(config, "direct", False)
    monkeypatch.setattr(registry, "backend", "groups")
    monkeypatch.setattr(config, "threads", 2)
    replay.clear_kernels()
    tiers._sightings.clear()
    yield
    replay.clear_kernels()


# ---- which tier a run takes ----------------------------------------------------------------------


def test_tiny_work_is_interpreted_without_a_plan():
    x = lazy(10)
    y = np.maximum(x * 2, 0) + 1
    dynfuse.evaluate(y)
    stats = dynfuse.stats()
    assert (
        stats["interpreted_ops"] == 3 and stats["plan_cache_misses"] == 0 and stats["kernels_launched"] == 0
    )


def test_a_reduction_of_a_large_input_is_not_tiny_work(monkeypatch):
    monkeypatch.setattr(groups.BACKEND, "target", Target("tiered", tiny_elements=100, first_sight_work=0))
    x = dynfuse.asarray(np.arange(400.0).reshape(20, 20))
    y = x.sum(axis=0)  # 20 results of 400 elements
    dynfuse.evaluate(y)
    assert dynfuse.stats()["kernels_launched"] == 1
    close(y, np.arange(400.0).reshape(20, 20).sum(axis=0))


@pytest.mark.parametrize(
    "program, dtype, compiled_at_once",
    [
        (lambda x: ((x * 2 + 1) * x - 3) * 0.5, np.float32, True),  # 5 ops over 40 elements: 200
        (lambda x: x * 2 + 1, np.float32, False),  # 2 ops over 40: 80
        (lambda x: x * 2 + 1, np.float64, True),  # 2 ops over 40 elements of 8 bytes: 160
        (lambda x: np.exp(x), np.float32, True),  # an exp is ten adds: 400
        (lambda x: (((x * 2 + 1) * x - 3) * 0.5)[7], np.float32, True),  # one element, but 200 to interpret
    ],
    ids=["long chain", "short chain", "short chain of float64", "exp", "one element of a long chain"],
)
def test_first_sight_is_decided_by_what_interpreting_would_cost(
    program, dtype, compiled_at_once, monkeypatch
):
    """Interpreting runs each op over its whole array; a kernel reading one element through an
    index map does one element's work, so the kernel's own size does not decide."""
    monkeypatch.setattr(groups.BACKEND, "target", Target("tiered", tiny_elements=10, first_sight_work=100))
    values = np.arange(40, dtype=dtype)
    y = program(dynfuse.asarray(values))
    dynfuse.evaluate(y)
    close(y, program(values))
    assert dynfuse.stats()["kernels_launched"] == int(compiled_at_once)


@pytest.mark.parametrize(
    "least, estimate, kept, launched",
    [(2000, None, False, [0, 0, 1, 2]), (100, 2000, False, [0, 0, 1, 2]), (100, 2000, True, [1, 2, 3, 4])],
    ids=["the target's one number", "the backend's estimate", "kept: only the least, a load"],
)
def test_a_kernel_runs_interpreted_until_that_has_cost_what_getting_its_code_would(
    least, estimate, kept, launched, monkeypatch
):
    """``exp(x) * 3`` over 37 float64 is 37 * (10 + 1) * 2 = 814 of work a run. A compile that
    costs 2000 (the group backend's estimate is its target's number): interpreted twice (1628),
    compiled on the third run (2442). Code the backend keeps costs the target's least, a load:
    launched from the first run."""
    monkeypatch.setattr(groups.BACKEND, "target", Target("tiered", tiny_elements=4, first_sight_work=least))
    if estimate is not None:
        monkeypatch.setattr(groups.BACKEND, "compile_work", lambda kernel: estimate)
    monkeypatch.setattr(groups.BACKEND, "cached", lambda kernel: kept)
    counts = []
    for _ in range(4):
        x = dynfuse.asarray(np.arange(37.0))
        y = np.exp(x) * 3
        dynfuse.evaluate(y)
        close(y, np.exp(np.arange(37.0)) * 3)
        counts.append(dynfuse.stats()["kernels_launched"])
    assert counts == launched


def test_a_tiny_kernel_of_a_replayed_trace_takes_the_rule_too(monkeypatch):
    """A large kernel and a tiny one after it (each row's element at its label, summed): planned the
    first time, the tiny kernel is interpreted; once the trace replays (a repeated trace, as a tiny
    trace repeated ``tiny_repeats`` times is) it compiles when its interpreted work has paid for its
    code, here at once, and the whole plan runs compiled."""
    monkeypatch.setattr(groups.BACKEND, "target", Target("tiered", tiny_elements=100, first_sight_work=0))
    monkeypatch.setattr(groups.BACKEND, "compile_work", lambda kernel: 1)
    rows, labels = np.arange(5), np.array([3, 0, 7, 7, 1])
    launched, interpreted = [], []
    for _ in range(3):
        values = np.arange(160.0).reshape(20, 8)
        x = dynfuse.asarray(values)
        p = np.exp(x / 100)
        picked = np.log(p[dynfuse.asarray(rows), dynfuse.asarray(labels)]).sum()
        dynfuse.evaluate(picked, p)
        close(picked, np.log(np.exp(values / 100)[rows, labels]).sum())
        launched.append(dynfuse.stats()["kernels_launched"])
        interpreted.append(dynfuse.stats()["interpreted_ops"])
    assert launched == [1, 3, 5]
    assert interpreted[0] == interpreted[-1] > 0


def test_climbing_runs_count_the_interpreted_runs_on_their_way_to_a_compile(monkeypatch):
    """``exp(x) * 3`` over 37 float64, 814 of work a run against a compile's 2000: the first run
    unplanned, the second planned and interpreted on its way to the compile (credited with both
    runs, 1628), the third compiled, none after; tiny work, which never compiles, none."""
    monkeypatch.setattr(groups.BACKEND, "target", Target("tiered", tiny_elements=4, first_sight_work=2000))
    monkeypatch.setattr(groups.BACKEND, "cached", lambda kernel: False)
    monkeypatch.setattr(config, "threads", 1)  # compiled in the foreground, on the run that pays
    climbing = []
    for _ in range(4):
        before = tiers.climbing_runs()
        dynfuse.evaluate(np.exp(dynfuse.asarray(np.arange(37.0))) * 3)
        climbing.append(tiers.climbing_runs() - before)
    assert climbing == [0, 1, 0, 0]
    before = tiers.climbing_runs()
    dynfuse.evaluate(np.exp(dynfuse.asarray(np.arange(3.0))) * 3)
    assert tiers.climbing_runs() == before


def test_a_trace_whose_work_cannot_pay_any_code_runs_unplanned_the_first_time(monkeypatch):
    """``exp(x) * 3`` over 37 float64 is 814 of work a run, under a compile's 2000: its first run is
    interpreted unplanned, as NumPy would run it (a long trace's planning is milliseconds a one-off
    run never gets back); its second is planned, credited with both runs' work (1628), and kept;
    its third reaches the compile's cost (2442), as if the first had been planned. Work that can
    pay on first sight is planned at once."""
    monkeypatch.setattr(groups.BACKEND, "target", Target("tiered", tiny_elements=4, first_sight_work=2000))
    monkeypatch.setattr(groups.BACKEND, "cached", lambda kernel: False)
    planned, replays, launched = [], [], []
    for _ in range(4):
        y = np.exp(dynfuse.asarray(np.arange(37.0))) * 3
        dynfuse.evaluate(y)
        close(y, np.exp(np.arange(37.0)) * 3)
        stats = dynfuse.stats()
        planned.append(stats["kernels_planned"])
        replays.append(stats["replays"])
        launched.append(stats["kernels_launched"])
    assert planned[:2] == [0, 1]
    assert replays == [0, 0, 1, 2]
    assert launched == [0, 0, 1, 2]
    dynfuse.reset_stats()
    y = np.exp(dynfuse.asarray(np.arange(370.0))) * 3  # 8140 of work: could pay at once
    dynfuse.evaluate(y)
    close(y, np.exp(np.arange(370.0)) * 3)
    assert dynfuse.stats()["kernels_planned"] == 1


def test_a_trace_too_long_for_a_replay_key_is_known_again_by_its_signature(monkeypatch):
    """A chain of 150 ops (past ``trace.REPLAY_KEY_LIMIT``: no replay key) over 37 float64, whose
    work cannot pay for planning it (``plan_node_work`` a node) and the least code: its first run
    is unplanned, its second planned, as a trace with a replay key; each run NumPy's values."""
    target = Target("tiered", tiny_elements=4, first_sight_work=1000, plan_node_work=100)
    monkeypatch.setattr(groups.BACKEND, "target", target)
    values = np.linspace(0.0, 1.0, 37)
    expected = values.copy()
    for step in range(75):
        expected = expected * 0.5 + step
    planned = []
    for _ in range(3):
        y = dynfuse.asarray(values)
        for step in range(75):
            y = y * 0.5 + step
        assert y._node.key is None  # too long for a replay key
        dynfuse.evaluate(y)
        close(y, expected)
        planned.append(dynfuse.stats()["plan_cache_misses"] + dynfuse.stats()["plan_cache_hits"])
    assert planned == [0, 1, 2]
    monkeypatch.setattr(groups.BACKEND, "target", dataclasses.replace(target, plan_node_work=0))
    tiers._sightings.clear()
    dynfuse.reset_stats()
    y = dynfuse.asarray(values)
    for step in range(75):
        y = y * 0.5 + step
    dynfuse.evaluate(y)  # 150 ops of 37 elements, 3700 of work or more: planning counted free pays
    assert dynfuse.stats()["plan_cache_misses"] + dynfuse.stats()["plan_cache_hits"] == 1


def test_the_first_compile_of_a_process_costs_starting_the_compiler_too(monkeypatch):
    """``exp(x) * 3`` over 37 float64 is 814 of work a run, a compile 1000, starting the compiler
    2000 more: the first kernel is interpreted three times (2442) and compiled on the fourth (3256);
    the compiler started, a second kernel compiles on its second run (1628), as it would have."""
    target = Target("tiered", tiny_elements=4, first_sight_work=0, start_work=2000)
    monkeypatch.setattr(groups.BACKEND, "target", target)
    monkeypatch.setattr(groups.BACKEND, "compile_work", lambda kernel: 1000)
    monkeypatch.setattr(groups.BACKEND, "cached", lambda kernel: False)
    kernels = [(lambda x: np.exp(x) * 3, [0, 0, 0, 1, 1]), (lambda x: np.exp(x) + 3, [0, 1, 1])]
    for expression, launched in kernels:  # the kernels launched by each run
        counts = []
        for _ in launched:
            before = dynfuse.stats()["kernels_launched"]
            y = expression(dynfuse.asarray(np.arange(37.0)))
            dynfuse.evaluate(y)
            close(y, expression(np.arange(37.0)))
            counts.append(dynfuse.stats()["kernels_launched"] - before)
        assert counts == launched


@pytest.mark.parametrize("kept_anywhere, asked_at", [(False, 3), (True, 1)])
def test_the_backend_is_asked_a_kernels_cost_once_a_compile_could_pay(kept_anywhere, asked_at, monkeypatch):
    """With no code kept and the compiler not started, any compile costs at least the least plus
    starting the compiler, so the backend (whose first answer runs its code generator) is not asked
    before the kernel's work reaches that: 814 a run, 2000 to start, asked on the third run (2442),
    and a short program never asks. Where code may be kept, at first sight. The runs that compile
    are the same either way."""
    target = Target("tiered", tiny_elements=4, first_sight_work=0, start_work=2000)
    monkeypatch.setattr(groups.BACKEND, "target", target)
    run, asked = [0], []
    monkeypatch.setattr(groups.BACKEND, "compile_work", lambda kernel: asked.append(run[0]) or 1000)
    monkeypatch.setattr(groups.BACKEND, "cached", lambda kernel: False)
    monkeypatch.setattr(groups.BACKEND, "keeps_code", lambda: kept_anywhere)
    counts = []
    for run[0] in range(1, 6):
        before = dynfuse.stats()["kernels_launched"]
        y = np.exp(dynfuse.asarray(np.arange(37.0))) * 3
        dynfuse.evaluate(y)
        close(y, np.exp(np.arange(37.0)) * 3)
        counts.append(dynfuse.stats()["kernels_launched"] - before)
    assert asked == [asked_at] and counts == [0, 0, 0, 1, 1]


def test_a_reduction_costs_the_elements_of_its_operand_to_interpret(monkeypatch):
    """NumPy's pass for a sum reads all 1000 elements, however few its results: 1000 of work."""
    monkeypatch.setattr(groups.BACKEND, "target", Target("tiered", tiny_elements=4, first_sight_work=900))
    values = np.arange(1000, dtype=np.float32)
    y = dynfuse.asarray(values).sum()
    dynfuse.evaluate(y)
    assert dynfuse.stats()["kernels_launched"] == 1
    close(y, values.sum())


def plans_looked_up():
    stats = dynfuse.stats()
    return stats["plan_cache_hits"] + stats["plan_cache_misses"]


def test_a_small_repeated_trace_is_planned_after_the_target_s_repeats_then_compiles_by_its_work(
    monkeypatch,
):
    """Three ops over 7 float64, each call worth 1000 and its elements a few dozen: a run is worth
    about 3100. Interpreted unplanned twice; planned on the third sight (then replayed, never
    planned again), its kernel interpreted until its runs' work reaches the least code costs (7000:
    the fifth sight), then compiled, then launched by its replay."""
    target = Target(
        "repeats", tiny_elements=100, first_sight_work=7000, tiny_repeats=3, interpreted_op_work=1000
    )
    monkeypatch.setattr(groups.BACKEND, "target", target)
    launched, looked_up = [], []
    for _ in range(6):
        replayed(lambda x: np.sqrt(x) * 3 - 1, np.arange(7.0))
        launched.append(dynfuse.stats()["kernels_launched"])
        looked_up.append(plans_looked_up())
    assert launched == [0, 0, 0, 0, 1, 2]
    assert looked_up == [0, 0, 1, 1, 1, 1]
    assert dynfuse.stats()["replays"] == 3


def test_a_background_compile_is_waited_for_once_as_much_work_again_is_interpreted(monkeypatch):
    """``x * 2 + 1`` over 100 float64 is 400 of work a run, a compile 1000: interpreted twice, the
    third run (1200) starts the compile and is interpreted, the fourth too (400 since the start),
    the fifth (800 since) waits for it: which run launches depends on the work alone."""
    target = Target("window", tiny_elements=4, first_sight_work=0, background_work=1 << 20)
    monkeypatch.setattr(groups.BACKEND, "target", target)
    monkeypatch.setattr(groups.BACKEND, "compile_work", lambda kernel: 1000)
    launched = []
    for _ in range(6):
        values = np.arange(100.0)
        result = chain(values)
        dynfuse.evaluate(result)
        assert_same(result, values * 2 + 1)
        launched.append(dynfuse.stats()["kernels_launched"])
    assert launched == [0, 0, 0, 0, 1, 2]
    assert dynfuse.stats()["kernels_compiled"] == 1


# ---- background compiles -------------------------------------------------------------------------

# ``x * 2 + 1`` over 100 float64 is 100 * 2 * 2 = 400 of work: below this, a first sighting is
# interpreted while its kernel compiles; no run is tiny, and every run would compile.
BACKGROUND = Target("background", tiny_elements=4, first_sight_work=0, background_work=1000)


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
    waited = 0.0
    while not threads and waited < 30:  # the compile thread takes it up when it gets the GIL
        time.sleep(0.01)
        waited += 0.01
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
            replay.clear_kernels()
        result = chain(values)
        dynfuse.evaluate(result)
        assert_same(result, values * 2 + 1)
        launched.append(dynfuse.stats()["kernels_launched"])
    assert launched == [0, 1, 2]
    assert dynfuse.stats()["disk_cache_hits"] == 1


@pytest.mark.parametrize(
    ("kernels", "fused", "interpreted", "verdict"),
    [
        (0, 0, 0, 0),  # nothing planned
        (1, 3, 0, -1),  # too few ops to pay, compiled or not
        (1, 0, 3, -1),
        (1, 4, 0, 1),  # a kernel of enough ops, compiled
        (1, 0, 8, 0),  # its compile not yet paid for
        (3, 3, 0, -1),  # three kernels of one op each
        (2, 8, 0, 1),
        # one kernel of 8 ops beside four of 2 (an outer loop's values, left pending, computed with
        # an inner loop's trial): it may pay, so not yet, and a later trial without them decides
        (5, 16, 0, 0),
        (5, 8, 8, 0),
    ],
)
def test_a_recording_pays_where_its_kernels_fuse_enough_ops_and_cannot_where_none_may(
    kernels, fused, interpreted, verdict
):
    assert tiers.recording_verdict(kernels, fused, interpreted) == verdict


def test_an_op_of_the_tiny_size_or_more_counts_twice_toward_what_recording_pays(monkeypatch):
    """What fusing an op saves grows with its elements, what recording it costs does not: from the
    backend's tiny size an op counts twice, an op on bools a quarter of that (a comparison of
    floats, which reads them, as much as an op on floats), a view nothing."""
    monkeypatch.setattr(registry, "backend", "cpu")
    tiny = registry.BACKENDS["cpu"].target.tiny_elements
    for elements, weight in ((tiny - 1, 1), (tiny, 2)):
        x = dynfuse.asarray(np.ones(elements))
        chain = (x[::1] - 1.0) * 0.5
        mask = chain > 0.25
        both = mask & (chain < 0.75)
        nodes = [chain._node, chain._node.inputs[0], chain._node.inputs[0].inputs[0]]  # the view too
        assert tiers.paying_ops(nodes) == 2 * weight
        assert tiers.paying_ops([mask._node]) == weight
        assert tiers.paying_ops([both._node]) == weight / 4
