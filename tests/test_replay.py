"""Replays: a repeated trace runs its one compiled kernel on its own leaves, without planning; what
a replay matches (the structure recorded with a node), and what it must not replay."""

import numpy as np
import pytest

import dynfuse
from dynfuse import execute, replay, trace
from dynfuse.backends import cpu

from .helpers import assert_same


@pytest.fixture(autouse=True)
def no_replays_from_other_tests():
    replay.clear_plans()


def replayed(make, *values):
    """Materialize ``make`` over fresh lazy arrays of ``values``; whether it was replayed."""
    before = dynfuse.stats()["replays"]
    result = make(*(dynfuse.asarray(value) for value in values))
    assert_same(result, make(*values))
    return dynfuse.stats()["replays"] > before


def test_a_repeated_trace_is_replayed_with_its_own_leaves_and_scalars(monkeypatch):
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    rng = np.random.default_rng(0)
    for scale in (0.5, 2.0, -3.0):
        values = rng.standard_normal(100)
        was_replayed = replayed(lambda x, scale=scale: np.maximum(x * scale, 0) + x / 3, values)
        assert was_replayed == (scale != 0.5)


def test_leaves_read_twice_are_part_of_what_a_replay_matches(monkeypatch):
    """``x * 2 + x`` and ``x * 2 + y`` have one structure; only the leaves they share differ."""
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    x, y = np.arange(5.0), np.arange(5.0, 10.0)
    for _ in range(2):
        replayed(lambda a: a * 2 + a, x)
        replayed(lambda a, b: a * 2 + b, x, y)
    assert dynfuse.stats()["replays"] == 2


def test_structure_ids_are_never_reused(monkeypatch):
    """When the table of structures starts afresh (it is full), a structure seen again gets a new
    id, a replay miss; another structure interned in the same order must not get an old id."""
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    x = np.arange(6.0)
    trace._structure_ids.clear()
    replayed(lambda a: a * 2 + 1, x)
    assert replayed(lambda a: a * 2 + 1, x)
    trace._structure_ids.clear()
    assert not replayed(lambda a: a * 2 - 1, x)
    assert replayed(lambda a: a * 2 - 1, x)


def test_the_table_of_structures_is_bounded(monkeypatch):
    monkeypatch.setattr(trace, "STRUCTURE_TABLE_LIMIT", 8)
    for size in range(1, 20):
        values = np.arange(float(size))
        assert_same(dynfuse.asarray(values) - 3, values - 3)
        assert len(trace._structure_ids) <= 8


def test_no_replay_once_an_intermediate_was_materialized(monkeypatch):
    """The replay would compute ``u`` from ``x`` again, after ``x`` changed: NumPy's ``u`` comes from
    the ``t`` computed before."""
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    replayed(lambda x: x * 2 + 1, np.ones(4))
    base = np.ones(4)
    t = dynfuse.asarray(base) * 2
    u = t + 1
    dynfuse.evaluate(t)
    base[:] = 5
    assert_same(u, np.full(4, 3.0))
    assert dynfuse.stats()["replays"] == 0


def test_a_failing_replay_runs_the_planned_path(monkeypatch):
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    replayed(lambda x: x * 2 + 1, np.ones(4))
    with monkeypatch.context() as patch:
        launch, failures = cpu._Launcher.__call__, [RuntimeError("injected replay failure")]

        def failing_once(*args):
            if failures:
                raise failures.pop()
            return launch(*args)

        patch.setattr(cpu._Launcher, "__call__", failing_once)
        assert not replayed(lambda x: x * 2 + 1, np.ones(4))
    assert replayed(lambda x: x * 2 + 1, np.ones(4))  # the planned path kept a replay again
    assert dynfuse.stats()["fallbacks"] == 0


def test_a_cached_small_trace_is_launched_in_c_and_a_declined_call_in_python(monkeypatch):
    """Once a replay's launch in Python has found its results' keys, C launches it; where the
    kernel's C call declines (it packs only the plain case), nothing changed and Python launches it."""
    if replay.launch_replay is None:
        pytest.skip("the C recorder is not in use")
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")

    def chain(x):
        return np.abs(x * 2 - 1) + x

    rng = np.random.default_rng(4)
    assert not replayed(chain, rng.random(16))  # planned and compiled
    assert replayed(chain, rng.random(16))  # launched in Python: the keys of its results found
    (kept,) = [run for structure in replay._replays.values() for run in structure.runs.values()]
    assert kept.launch_plan is not None
    for _ in range(3):
        assert replayed(chain, rng.random(16))
    ((positions, loads, _, *step),), *rest = kept.launch_plan
    declined = []
    kept.launch_plan = (((positions, loads, lambda *arrays: declined.append(arrays) or False, *step),), *rest)
    launched = dynfuse.stats()["kernels_launched"]
    assert replayed(chain, rng.random(16))
    assert declined and dynfuse.stats()["kernels_launched"] == launched + 1


def test_a_launch_in_c_takes_its_large_outputs_from_the_pool(monkeypatch):
    """A kept launch in C writes an output of ``host_pool.MIN_BYTES`` or more into a block of the
    pool, mapped already, as a launch in Python does: one pool hit a launch, once one is free."""
    if replay.launch_replay is None:
        pytest.skip("the C recorder is not in use")
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    monkeypatch.setattr(dynfuse.config, "pool_memory", 64 << 20)

    def chain(x):
        return np.abs(x * 2 - 1) + x

    rng = np.random.default_rng(5)
    values = [rng.random(300_000) for _ in range(6)]  # 2.4 MB outputs
    for value in values[:3]:
        replayed(chain, value)
    (kept,) = [run for structure in replay._replays.values() for run in structure.runs.values()]
    assert kept.launch_plan is not None
    hits = dynfuse.stats()["pool_hits"]
    for value in values[3:]:
        assert replayed(chain, value)
    assert dynfuse.stats()["pool_hits"] == hits + 3


def plans_looked_up():
    stats = dynfuse.stats()
    return stats["plan_cache_hits"] + stats["plan_cache_misses"]


def test_a_kernel_reading_views_of_its_leaves_is_replayed_by_a_launch(monkeypatch):
    """A stencil reads one leaf through four slices: launched on the slices of each new leaf."""
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")

    def stencil(a):
        return 0.25 * (a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1])

    rng = np.random.default_rng(1)
    replayed(stencil, rng.random((9, 7)))
    looked_up = plans_looked_up()
    for _ in range(3):
        assert replayed(stencil, rng.random((9, 7)))
    assert plans_looked_up() == looked_up
    assert dynfuse.stats()["kernels_launched"] == 4


@pytest.mark.parametrize(
    ("program", "layout"),
    [
        (lambda a: 0.25 * (a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1]), np.ascontiguousarray),
        (lambda a: a[::-1, 1:] * 2 - a[:, :-1].T.T, np.asfortranarray),  # backwards; a strided leaf
        (lambda a: (a[:, None, :] * a[None, :, :]).sum(axis=2) + a[:, 0], np.ascontiguousarray),
    ],
    ids=["stencil", "backwards", "per-row"],
)
def test_a_kernel_reading_views_of_its_leaves_is_launched_in_c(program, layout, monkeypatch):
    """Each view a load reads lies in its leaf's bytes where the structure puts it: C launches the
    kernel on views it places there, with per-row outputs made in their nodes' shapes, and Python's
    launch is not called again."""
    if replay.launch_replay is None:
        pytest.skip("the C recorder is not in use")
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    rng = np.random.default_rng(5)
    assert not replayed(program, layout(rng.random((6, 5))))  # planned and compiled
    assert replayed(program, layout(rng.random((6, 5))))  # launched in Python: the plan in C made
    (kept,) = [run for structure in replay._replays.values() for run in structure.runs.values()]
    ((*_, placements),) = kept.launch_plan[0]
    assert placements is not None and any(placements)

    def not_in_python(*args):
        raise AssertionError("launched in Python")

    monkeypatch.setattr(replay, "launch", not_in_python)
    for _ in range(3):
        assert replayed(program, layout(rng.random((6, 5))))


def assert_launched_in_c(run_once, kernels: int, monkeypatch) -> None:
    """``run_once`` (a program, checked against NumPy) planned and compiled, then replayed as a plan
    whose launch in C is found: from then on C launches its ``kernels`` kernels in turn, and no plan
    runs in Python again."""
    run_once()
    run_once()
    (kept,) = [run for structure in replay._replays.values() for run in structure.runs.values()]
    assert isinstance(kept, replay.PlanReplay) and len(kept.launch_plan[0]) == kernels

    def not_in_python(*args, **kwargs):
        raise AssertionError("run as a plan in Python")

    monkeypatch.setattr(execute, "run_plan", not_in_python)
    launched = dynfuse.stats()["kernels_launched"]
    for _ in range(3):
        run_once()
    assert dynfuse.stats()["kernels_launched"] == launched + 3 * kernels


def relaxation(p, b):
    """A pressure iteration as a cavity solver writes it: the copy it reads is held, so the plan
    has a kernel for the copy (all of ``p``) beside the stencil's (its interior)."""
    pn = p.copy()
    return pn, 0.25 * (pn[1:-1, 2:] + pn[1:-1, :-2] + pn[2:, 1:-1] + pn[:-2, 1:-1]) - 0.1 * b[1:-1, 1:-1]


def softmax_rows(x):
    """Rows too long to stay in cache between passes: three kernels, the row values and the
    exponentials passed from one to the next."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True),)


@pytest.mark.parametrize(
    ("program", "shapes", "kernels"),
    [(relaxation, [(7, 6), (7, 6)], 2), (softmax_rows, [(2, 100_000)], 3)],
    ids=["held copy and stencil", "values passed between kernels"],
)
def test_a_plan_of_several_compiled_kernels_is_launched_in_c(program, shapes, kernels, monkeypatch):
    """Once a plan's kernels alone ran, all compiled, C launches them in turn, each reading leaves
    and what the kernels before it made, and makes the plan's outputs leaves: no plan is run in
    Python again, and the values are NumPy's."""
    if replay.launch_replay is None:
        pytest.skip("the C recorder is not in use")
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    rng = np.random.default_rng(6)

    def run_once():
        values = [rng.random(shape, dtype=np.float32) for shape in shapes]
        results = program(*(dynfuse.asarray(value) for value in values))
        np.asarray(results[-1])  # while the program holds the others
        expected = program(*values)
        for result, wanted in zip(results, expected, strict=True):
            assert_same(result, wanted)

    assert_launched_in_c(run_once, kernels, monkeypatch)


def test_a_floating_point_flag_raised_in_a_launch_in_c_is_heeded_as_numpy_does(monkeypatch):
    """The kernels' outputs are dropped and the plan runs again in Python, which warns as NumPy
    warns (log of a negative number)."""
    if replay.launch_replay is None:
        pytest.skip("the C recorder is not in use")
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")

    def program(p):
        pn = p.copy()
        return pn, np.log(pn[1:, :] - pn[:-1, :] + 2.0)

    rng = np.random.default_rng(7)
    for _ in range(3):
        pn, logged = program(dynfuse.asarray(rng.random((5, 4))))
        np.asarray(logged)  # while the program holds the copy
    (kept,) = [run for structure in replay._replays.values() for run in structure.runs.values()]
    assert kept.launch_plan is not None
    values = rng.random((5, 4))
    values[3, 2] = 9.0  # log(-6.x) below it
    with pytest.warns(RuntimeWarning, match="invalid value encountered in log"):
        pn, logged = program(dynfuse.asarray(values))
        with np.errstate(invalid="ignore"):
            expected = np.log(values[1:, :] - values[:-1, :] + 2.0)
        assert_same(logged, expected)
    assert_same(pn, values)


def test_a_plan_of_several_steps_is_replayed_without_numbering_or_looking_it_up(monkeypatch):
    """A library call and the kernels around it, a reduction read across rows: the plan runs again
    over each new trace's own nodes."""
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")

    def layer(x, w):
        h = np.maximum(x @ w + 1, 0)
        return h - h.sum(axis=1)[:, None] / 3

    rng = np.random.default_rng(2)
    replayed(layer, rng.random((5, 4)), rng.random((4, 6)))
    looked_up, launched = plans_looked_up(), dynfuse.stats()["kernels_launched"]
    for _ in range(3):
        assert replayed(layer, rng.random((5, 4)), rng.random((4, 6)))
    assert plans_looked_up() == looked_up
    assert dynfuse.stats()["kernels_launched"] == 4 * launched


def test_held_intermediates_are_computed_by_the_replay_too(monkeypatch):
    """``t`` is deep and the program holds it: each replay keeps it, as the planned path does; a
    trace of the same structure whose ``t`` nothing holds replays without keeping it."""
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    rng = np.random.default_rng(3)
    for step in range(6):
        values = rng.random(8)
        x = dynfuse.asarray(values)
        t = np.abs(np.maximum(x * 2 - 1, 0) - 0.5) / 3
        expected_t = np.abs(np.maximum(values * 2 - 1, 0) - 0.5) / 3
        if step % 2:
            y = t * 2 + 1
            assert_same(y, expected_t * 2 + 1)
            assert t._node.is_materialized  # held: computed with ``y``
            assert_same(t, expected_t)
        else:
            y = np.abs(np.maximum(x * 2 - 1, 0) - 0.5) / 3 * 2 + 1
            del t
            assert_same(y, expected_t * 2 + 1)
    assert dynfuse.stats()["replays"] == 4


@pytest.mark.parametrize("backend", ["cpu", "groups"])
def test_traces_of_one_structure_that_share_intermediates_otherwise_each_run_their_own_plan(
    backend, monkeypatch
):
    """``t + t`` with ``t = x @ w`` and ``(x @ w) + (x @ w)`` have one structure and one leaf
    pattern, but one matmul against two: neither's plan may run the other."""
    monkeypatch.setattr(dynfuse.registry, "backend", backend)
    rng = np.random.default_rng(4)
    for step in range(6):
        x, w = rng.random((3, 4)), rng.random((4, 2))
        if step % 2:
            assert_same(_shared(dynfuse.asarray(x), dynfuse.asarray(w)), _shared(x, w))
        else:
            assert_same(_unshared(dynfuse.asarray(x), dynfuse.asarray(w)), _unshared(x, w))


def _shared(x, w):
    t = x @ w
    return np.exp(t + t)


def _unshared(x, w):
    return np.exp(x @ w + x @ w)


def test_a_statement_writing_into_an_array_replays_its_value(monkeypatch):
    """``ey[1:] -= ...`` (and ``a[...] = ...``) in a loop: the value is computed alone, replayed from
    the second step on, then written; the result is NumPy's. (Views recorded, as large ones are.)"""
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    monkeypatch.setattr(dynfuse.config, "direct", False)
    rng = np.random.default_rng(1)
    ey_host, hz_host = rng.standard_normal((2, 30, 20))
    ey, hz = dynfuse.array(ey_host), dynfuse.asarray(hz_host)
    for step in range(4):
        before = dynfuse.stats()["replays"]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        assert (dynfuse.stats()["replays"] > before) == (step > 0)
        ey_host[1:, :] -= 0.5 * (hz_host[1:, :] - hz_host[:-1, :])
        ey[0] = ey[1] * 2
        ey_host[0] = ey_host[1] * 2
    assert_same(ey, ey_host)


def test_outputs_materialized_together_are_replayed_as_a_group(monkeypatch):
    """A masked write into an array a view sees materializes the updated array and the written
    values together; from the second step on, their one kernel is launched again (in C where the
    recorder is), planned no more (the view, computed before the write as any pending reader is,
    finds its plan in the cache)."""
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    monkeypatch.setattr(dynfuse.config, "direct", False)
    rng = np.random.default_rng(2)
    host, gradient_host = rng.standard_normal((2, 20, 30))
    x, gradient = dynfuse.array(host), dynfuse.asarray(gradient_host)
    for step in range(5):
        before, planned = dynfuse.stats()["replays"], dynfuse.stats()["plan_cache_misses"]
        x -= 0.1 * gradient * (x - 0.5)
        row = x[0]  # sees the write: x cannot just take the new values' node
        x[x < -0.9] = 0.0
        assert (dynfuse.stats()["replays"] > before) == (step > 0)
        assert (dynfuse.stats()["plan_cache_misses"] > planned) == (step == 0)
        host -= 0.1 * gradient_host * (host - 0.5)
        host[host < -0.9] = 0.0
        assert_same(row, host[0])
        del row
    assert_same(x, host)


@pytest.mark.parametrize("backend", ["cpu", "groups"])
def test_a_group_replays_only_what_shares_its_members_as_it_did(backend, monkeypatch):
    """``v`` and ``x + v`` (a member another member reads) against ``v`` and ``x + v'`` with ``v'``
    a copy of ``v``'s structure: the same structures, but a kernel that computes both members of
    one would leave the other's ``v`` uncomputed. Each materializes what it was asked for."""
    monkeypatch.setattr(dynfuse.registry, "backend", backend)
    monkeypatch.setattr(dynfuse.config, "direct", False)
    rng = np.random.default_rng(5)
    for step in range(6):
        x, w = rng.random(8), rng.random(8)
        lx, lw = dynfuse.asarray(x), dynfuse.asarray(w)
        v = lw * 2.0 - lx
        other = lw * 2.0 - lx if step % 2 else v
        moved = lx + other
        dynfuse.evaluate(moved, v)  # the reader first: ``v`` is then first met among its ancestors
        assert v._node.inputs == () and moved._node.inputs == ()
        assert_same(v, w * 2.0 - x)
        assert_same(moved, x + (w * 2.0 - x))


def test_a_kernel_split_across_threads_is_launched_in_c(monkeypatch):
    """A training step's softmax over rows, split across the pool's threads, and the gather of each
    row's label after it: C launches both, as it launches kernels on one thread, and the values are
    NumPy's."""
    if replay.launch_replay is None or cpu.run_ranges is None:
        pytest.skip("the C recorder or the C launcher is not in use")
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    monkeypatch.setattr(dynfuse.config, "threads", 3)
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 1 << 12)  # the softmax's work splits, the gather's not
    rng = np.random.default_rng(8)
    rows, labels = np.arange(200), rng.integers(0, 100, 200)

    def step(logits, rows, labels):
        probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities = probabilities / probabilities.sum(axis=1, keepdims=True)
        return probabilities, -np.log(probabilities[rows, labels]).mean()

    def run_once() -> None:
        logits = rng.standard_normal((200, 100))
        probabilities, loss = step(*map(dynfuse.asarray, (logits, rows, labels)))
        np.asarray(loss)  # while the program holds the probabilities
        wanted, wanted_loss = step(logits, rows, labels)
        assert_same(probabilities, wanted, max_ulp=16)  # each row summed in another order than NumPy's
        assert_same(loss, wanted_loss, max_ulp=16)

    assert_launched_in_c(run_once, 2, monkeypatch)
