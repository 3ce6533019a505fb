"""Materialization: what triggers it, what it computes once, what it releases, and bounded traces."""

import gc
import pickle
import sys
import tracemalloc
import weakref

import numpy as np
import pytest

import dynfuse
from dynfuse import interpret
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


def evaluated_chain():
    """A chain of 20 ops over 8 MB, evaluated: its result, and the most memory held meanwhile."""
    y = dynfuse.array(np.ones(1_000_000))
    for _ in range(20):
        y = y * 2.0
    tracemalloc.start()
    dynfuse.evaluate(y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert_same(y, np.full(1_000_000, 2.0**20))
    return peak


def test_interpreter_frees_intermediates_at_last_use():
    """A chain of 20 ops over 8 MB holds a few buffers at a time, not 20."""
    peak = evaluated_chain()
    assert peak < 4 * 8_000_000, peak


def test_interpreter_computes_into_an_intermediate_only_the_op_reads(monkeypatch):
    """As NumPy's own var squares in place: the chain, interpreted, computes into one buffer (a
    fresh one a step would cost its page faults again at each run)."""
    monkeypatch.setattr(dynfuse.registry, "backend", "numpy")
    peak = evaluated_chain()
    assert peak < 1.5 * 8_000_000, peak


def test_interpreter_computes_into_the_pools_blocks_too(monkeypatch):
    """A large intermediate comes from the host's pool; the op that reads it last computes into
    it, so the chain takes one block, not one an op (each a fresh 1.3 MB to stream through)."""
    monkeypatch.setattr(dynfuse.registry, "backend", "numpy")
    values = np.linspace(0.0, 1.0, 160_000)
    y = dynfuse.asarray(values)
    for _ in range(10):
        y = y * 1.5 + 0.25
    expected = values.copy()
    for _ in range(10):
        expected = expected * 1.5 + 0.25
    dynfuse.reset_stats()
    assert_same(y, expected)
    taken = dynfuse.stats()
    assert taken["pool_hits"] + taken["pool_misses"] == 1, taken


def test_a_plan_step_interpreted_again_keeps_its_recipe_and_no_node(monkeypatch):
    """A replayed plan's step, interpreted at each run over new nodes, is worked out once
    (``interpret.step_recipe``); what it keeps holds none of the nodes it first ran on."""
    monkeypatch.setattr(dynfuse.config, "tiers", True)
    monkeypatch.setattr(dynfuse.registry, "backend", "cpu")
    interpret._step_recipes.clear()
    values = np.linspace(0.0, 1.0, 300 * 300).reshape(300, 300)  # above the direct size
    a = dynfuse.asarray(values)
    expected = (values[1:-1, 1:-1] + values[:-2, 1:-1]) * 0.5 - values[2:, 1:-1] / 3.0
    dynfuse.reset_stats()
    gc.disable()
    try:
        dropped = []
        for _ in range(6):
            y = (a[1:-1, 1:-1] + a[:-2, 1:-1]) * 0.5 - a[2:, 1:-1] / 3.0
            assert_same(y, expected)
            dropped.append(weakref.ref(y._node))
            del y
        assert all(node() is None for node in dropped)
    finally:
        gc.enable()
    taken = dynfuse.stats()
    assert taken["kernels_launched"] == 0 and taken["replays"] >= 4, taken
    ((_, recipe),) = interpret._step_recipes.values()
    assert recipe.externals == []  # read by number from each run's nodes


def test_interpreter_never_computes_into_what_a_view_or_an_output_holds(monkeypatch):
    """An intermediate that a view reads, or an output, keeps its values whatever reads it last."""
    monkeypatch.setattr(dynfuse.registry, "backend", "numpy")
    values = np.arange(12.0).reshape(3, 4)
    x = dynfuse.asarray(values)
    viewed = x - 1
    flipped = viewed.T
    squared = viewed * viewed
    kept = x + 1
    doubled = kept * 2
    dynfuse.evaluate(flipped, squared, kept, doubled)
    assert_same(flipped, (values - 1).T)
    assert_same(squared, (values - 1) ** 2)
    assert_same(kept, values + 1)
    assert_same(doubled, (values + 1) * 2)
    np.testing.assert_array_equal(values, np.arange(12.0).reshape(3, 4))


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


@pytest.mark.parametrize("backend", ["numpy", "groups", "cpu"])
def test_an_array_the_program_reads_row_by_row_is_computed_once(backend, monkeypatch):
    """``w = a - 0.5`` read a row at a time in a loop: the first row's trace keeps ``w`` (a held
    intermediate read through a view), so each later row is a view of it, not ``w`` again."""
    monkeypatch.setattr(dynfuse.registry, "backend", backend)
    a = np.random.default_rng(4).random((30, 900))
    w = dynfuse.asarray(a) - 0.5
    rows = [w[k] * 2 for k in range(3)]
    first = np.asarray(rows[0])
    assert w._node.inputs == ()  # computed with the first row, and kept
    before = dynfuse.stats()["materializations"]
    for k, row in enumerate(rows):
        assert_same(row, (a[k] - 0.5) * 2)
    assert dynfuse.stats()["materializations"] - before <= 2  # rows 1 and 2 only, from w's buffer
    assert_same(dynfuse.asarray(first), (a[0] - 0.5) * 2)


def test_library_results_of_a_long_trace_are_freed_after_their_last_reader():
    """Twenty steps of a time loop that each concatenate (a roll by hand), materialized at once: each
    library call's result lives until the step that reads it, not to the end of the run (1 MiB
    each); one the program holds is kept."""

    def rolled(y):
        return np.concatenate([y[-1:], y[:-1]], axis=0)

    x = dynfuse.asarray(np.random.default_rng(0).random((256, 512)))
    y = x * 1.0
    held = rolled(y)
    y = held * 1.0
    for _ in range(20):
        y = rolled(y) * 1.0
    tracemalloc.start()
    try:
        value = np.asarray(y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 * 2**20, peak
    np.testing.assert_array_equal(value, np.roll(np.asarray(x), 21, axis=0))
    assert held._node.inputs == ()  # kept: the program holds it
