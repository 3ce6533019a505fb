"""Materialization: what triggers it, what it computes once, what it releases, and bounded traces."""

import dataclasses
import gc
import pickle
import sys
import tracemalloc
import weakref

import numpy as np
import pytest

import dynfuse
from dynfuse import cache, execute, trace
from dynfuse.backends import cpu
from dynfuse.trace import topological_order

from .helpers import assert_same

dnp = dynfuse.numpy


def lazy_chain():
    x = dynfuse.asarray(np.arange(6.0).reshape(2, 3))
    return x, np.maximum(x * 2, 0) + 1


def test_metadata_needs_no_computation():
    _, y = lazy_chain()
    assert (y.shape, y.dtype, y.ndim, y.size, y.nbytes, len(y)) == ((2, 3), np.float64, 2, 6, 48, 2)
    assert y.T.shape == (3, 2) and y.sum(axis=0).shape == (3,) and y[None, ..., ::2].shape == (1, 2, 2)
    assert dynfuse.stats()["materializations"] == 0
    assert dynfuse.stats()["ops_recorded"] > 0


@pytest.mark.parametrize(
    "trigger",
    [
        np.asarray,
        lambda y: y.numpy(),
        lambda y: y.tolist(),
        repr,
        str,
        list,
        lambda y: y[0, 0].item(),
        lambda y: float(y[0, 0]),
        lambda y: int(y[0, 0]),
        lambda y: bool(y[0, 0]),
        lambda y: f"{y[1, 1]:.2f}",
        lambda y: dynfuse.evaluate(y),
        lambda y: pickle.loads(pickle.dumps(y)),
        lambda y: range(10)[y[0, 0].astype(int)],
    ],
)
def test_each_trigger_materializes_the_right_values(trigger):
    _, y = lazy_chain()
    result = trigger(y)
    assert dynfuse.stats()["materializations"] >= 1
    expected = np.maximum(np.arange(6.0).reshape(2, 3) * 2, 0) + 1
    assert_same(y, expected)
    assert result is not None


def test_repr_str_and_iteration_look_like_numpy():
    x = dynfuse.asarray(np.array([1.5, 2.0], np.float32))
    assert repr(x) == "LazyArray([1.5, 2. ], dtype=float32)"
    assert str(x) == str(np.array([1.5, 2.0], np.float32))
    assert list(x) == [np.float32(1.5), np.float32(2.0)]
    assert x.tolist() == [1.5, 2.0]


@pytest.mark.parametrize("backend", ["numpy", "groups", "cpu"])
def test_evaluate_runs_shared_work_once_in_one_plan(backend, monkeypatch):
    monkeypatch.setattr(dynfuse.registry, "backend", backend)
    x = dynfuse.asarray(np.arange(4.0))
    shared = np.exp(x) * 3
    a, b = shared + 1, shared.sum()
    result = dynfuse.evaluate(a, b)
    assert result[0] is a and result[1] is b
    stats = dynfuse.stats()
    assert stats["materializations"] == 1
    # exp, multiply (shared, once), add, sum: op by op, or as one kernel with two outputs
    counted = "interpreted_ops" if backend == "numpy" else "fused_ops"
    assert stats[counted] == 4
    assert stats["kernels_launched"] == (backend != "numpy")
    assert_same(a, np.exp(np.arange(4.0)) * 3 + 1)
    assert_same(b, (np.exp(np.arange(4.0)) * 3).sum())


def test_materialized_node_releases_the_graph_above_it():
    source = dynfuse.array(np.arange(1000.0))
    intermediate = source * 2
    watch = weakref.ref(intermediate._node)
    result = intermediate + 1
    del intermediate
    dynfuse.evaluate(result)
    gc.collect()
    assert watch() is None
    assert result._node.inputs == ()


def test_interpreter_frees_intermediates_at_last_use():
    """A chain of 20 ops over 8 MB holds a few buffers at a time, not 20."""
    x = dynfuse.array(np.ones(1_000_000))
    y = x
    for _ in range(20):
        y = y * 1.0
    tracemalloc.start()
    dynfuse.evaluate(y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 * 8_000_000, peak


def test_long_loop_has_bounded_depth_and_memory():
    x = dynfuse.array(np.ones(8))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # nothing in dynfuse may recurse with the trace
    try:
        tracemalloc.start()
        for _ in range(20_000):
            x = x * 1.0001
        _, peak_20k = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for _ in range(20_000):
            x = x * 1.0001
        _, peak_40k = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        sys.setrecursionlimit(limit)
    assert x._node.depth <= dynfuse.config.max_depth
    assert len(topological_order([x._node])) <= dynfuse.config.max_depth
    assert peak_40k < 1.5 * peak_20k + 100_000, (peak_20k, peak_40k)
    np.testing.assert_allclose(np.asarray(x), np.ones(8) * 1.0001**40_000, rtol=1e-9)


@pytest.mark.slow
def test_a_million_iterations():
    x = dynfuse.array(np.ones(4))
    for _ in range(10**6):
        x = x * 1.0001
    np.testing.assert_allclose(np.asarray(x), np.ones(4) * 1.0001**1_000_000, rtol=1e-6)


def test_explain_shows_the_trace_without_computing():
    x = dynfuse.asarray(np.ones((2, 3), np.float32))
    y = (x * 2).sum(axis=1)
    text = dynfuse.explain(y)
    assert isinstance(text, str) and repr(text) == str(text)
    for expected in ("multiply", "sum", "axis=(1,)", "float32[2, 3]", "parameter 2 (weak int)", "outputs"):
        assert expected in text, text
    assert dynfuse.stats()["materializations"] == 0


def test_stats_and_reset():
    stats = dynfuse.stats()
    for key in (
        "kernels_compiled",
        "kernels_launched",
        "cache_hits",
        "cache_misses",
        "disk_cache_hits",
        "interpreted_ops",
        "fallbacks",
        "compile_seconds",
        "fallback_names",
    ):
        assert key in stats
    np.sort(dynfuse.asarray(np.ones(3)))
    assert dynfuse.stats()["fallbacks"] == 1
    dynfuse.reset_stats()
    assert dynfuse.stats()["fallbacks"] == 0 and dynfuse.stats()["fallback_names"] == {}


# ---- replays: a repeated trace runs its kernel without planning -----------------------------------


@pytest.fixture(autouse=True)
def no_replays_from_other_tests():
    cache.clear_replays()


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


def test_a_small_repeated_trace_compiles_after_the_target_s_repeats(monkeypatch):
    from dynfuse.backends import cpu

    monkeypatch.setattr(dynfuse.config, "tiers", True)
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    monkeypatch.setattr(
        cpu.BACKEND, "target", dataclasses.replace(cpu.BACKEND.target, name="repeats", tiny_repeats=3)
    )
    launched = []
    for _ in range(5):
        replayed(lambda x: np.sqrt(x) * 3 - 1, np.arange(7.0))
        launched.append(dynfuse.stats()["kernels_launched"])
    assert launched == [0, 0, 1, 2, 3]  # interpreted twice, compiled on the third sight, then replayed
    assert dynfuse.stats()["replays"] == 2


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


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_results_are_freed_when_dropped_without_waiting_for_the_garbage_collector(backend, monkeypatch):
    """No node may sit in a reference cycle: a large result would then live until a GC pass."""
    monkeypatch.setattr(dynfuse.registry, "backend", backend)
    gc.disable()
    try:
        for _ in range(3):  # the second and third run replay the first's kernel
            x = dynfuse.asarray(np.ones(1000))
            y = np.maximum(x * 2, 0) + 1
            dynfuse.evaluate(y)
            buffer, leaf = weakref.ref(y._node), weakref.ref(x._node)
            del x, y
            assert buffer() is None and leaf() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("backend", ["numpy", "groups", "cpu"])
def test_a_library_result_is_kept_for_what_is_recorded_over_it(backend, monkeypatch):
    """``y = x @ w`` then two reductions of ``y``, each materialized alone: the second reads the
    product the first computed (a layer's output read by its statistics, then by the next layer)."""
    monkeypatch.setattr(dynfuse.registry, "backend", backend)
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((64, 32)), rng.standard_normal((32, 48))
    y = (dynfuse.asarray(x) @ dynfuse.asarray(w)) + 1
    product = y._node.inputs[0]
    assert product.op.name == "matmul"
    np.testing.assert_allclose(float(y.sum()), (x @ w + 1).sum())
    assert product.is_materialized and product.inputs == ()
    np.testing.assert_allclose(np.asarray(y.max(axis=0)), (x @ w + 1).max(axis=0))
    del y
    assert sys.getrefcount(product) == 2  # only ``product`` here: the kept result goes with the graph


def stored_with(result, monkeypatch):
    """The nodes a materialization of ``result`` computes and keeps besides it."""
    kept = []
    held_intermediates = execute.held_intermediates

    def spy(order, outputs):
        kept.extend(held_intermediates(order, outputs))
        return kept

    monkeypatch.setattr(execute, "held_intermediates", spy)
    dynfuse.evaluate(result)
    return kept


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_deep_intermediate_the_program_holds_is_kept(backend, monkeypatch):
    """``h`` is still held when its statistic is asked for: computed then, it is kept, so reading
    it again (as the next step of a loop does) computes nothing."""
    monkeypatch.setattr(dynfuse.registry, "backend", backend)
    values = np.arange(1000.0)
    x = dynfuse.asarray(values)
    h = (((x * 2 + 1) * x - 3) * 0.5) + 1
    total = (h * h).sum()
    assert stored_with(total, monkeypatch) == [h._node]
    expected = (((values * 2 + 1) * values - 3) * 0.5) + 1
    assert float(total) == (expected * expected).sum()
    assert h._node.is_materialized
    launched = dynfuse.stats()["kernels_launched"] + dynfuse.stats()["interpreted_ops"]
    np.testing.assert_array_equal(np.asarray(h), expected)
    assert dynfuse.stats()["kernels_launched"] + dynfuse.stats()["interpreted_ops"] == launched


@pytest.mark.parametrize("case", ["dropped", "shallow", "through a view"])
def test_what_the_program_dropped_or_is_cheap_to_recompute_is_not_kept(case, monkeypatch):
    """(Each result is made outside the ``assert``: pytest keeps the parts of an asserted
    expression alive, to explain a failure.)"""
    x = dynfuse.asarray(np.arange(1000.0))
    if case == "dropped":
        total, kept = ((((x * 2 + 1) * x - 3) * 0.5 + 1) ** 2).sum(), []
    elif case == "shallow":
        y = x * 2  # held, but one op: computing it again costs less than storing it
        total, kept = (y + 1).sum(), []
    else:
        deep = (((x * 2 + 1) * x - 3) * 0.5) + 1
        view = deep[::2]  # held through a view: what it views is kept
        total, kept = view.sum() + deep.max(), [deep._node]
    assert stored_with(total, monkeypatch) == kept


MiB = 1 << 20


def test_only_arrays_that_pending_traces_alone_hold_are_counted():
    gc.collect()
    before, _ = trace.pending_memory()
    held_by_the_program = np.ones(MiB // 8)
    on_held = dynfuse.asarray(held_by_the_program) * 2
    on_dropped = dnp.ones(MiB // 8) * 2  # the array ``ones`` made is referenced by the trace alone
    held, sinks = trace.pending_memory()
    assert held - before == MiB
    assert {id(on_held._node), id(on_dropped._node)} <= set(map(id, sinks))


def test_pending_traces_that_alone_hold_too_much_are_materialized(monkeypatch):
    """A loop of ``f(rng.standard_normal(n))`` whose results are only collected: NumPy frees each
    draw after ``f``; dynfuse materializes the pending results once the draws they alone keep
    alive pass DYNFUSE_PENDING_MEMORY, rather than keep every draw until the end."""
    monkeypatch.setattr(dynfuse.config, "pending_memory", 4 * MiB)
    rng, numpy_rng = dnp.random.default_rng(0), np.random.default_rng(0)
    means, expected = [], []
    for _ in range(20):
        means.append((dnp.exp(rng.standard_normal(MiB // 8)) * 2).mean())
        expected.append((np.exp(numpy_rng.standard_normal(MiB // 8)) * 2).mean())
        assert trace.pending_memory()[0] <= 5 * MiB
    assert sum(mean._node.is_materialized for mean in means) >= 15
    np.testing.assert_allclose([float(mean) for mean in means], expected, rtol=1e-12)


@pytest.mark.parametrize("reduced", [True, False])
def test_traces_that_reduce_what_they_alone_hold_are_materialized_early(monkeypatch, reduced):
    """Row means of each draw of a loop (a Monte-Carlo pricer's batches): the results are far
    smaller than the draws, so the traces are materialized at a quarter of the bound already, and
    no more than two draws are alive at once. Results as large as the draws wait for the bound."""
    monkeypatch.setattr(dynfuse.config, "pending_memory", 8 * MiB)
    rng, numpy_rng = dnp.random.default_rng(1), np.random.default_rng(1)
    results, expected, most_held = [], [], 0
    for _ in range(12):
        draw, numpy_draw = rng.standard_normal((2048, 128)), numpy_rng.standard_normal((2048, 128))
        if reduced:
            results.append(np.exp(draw).mean(axis=1))
            expected.append(np.exp(numpy_draw).mean(axis=1))
        else:
            results.append(np.exp(draw) + 1)
            expected.append(np.exp(numpy_draw) + 1)
        del draw
        most_held = max(most_held, trace.pending_memory()[0])
    assert most_held <= (4 * MiB if reduced else 10 * MiB)
    assert most_held > (2 * MiB if reduced else 4 * MiB)
    for result, value in zip(results, expected, strict=True):
        np.testing.assert_allclose(np.asarray(result), value, rtol=1e-12)


def test_arrays_the_program_holds_never_force_a_materialization(monkeypatch):
    monkeypatch.setattr(dynfuse.config, "pending_memory", MiB)
    data = [np.full(MiB // 8, float(value)) for value in range(10)]
    doubled = [dynfuse.asarray(values) * 2 for values in data]
    assert not any(array._node.is_materialized for array in doubled)
