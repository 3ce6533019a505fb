"""Memory pressure: deep intermediates the program holds are kept rather than computed again, and
pending traces that alone hold too much memory are materialized early."""

import gc

import numpy as np
import pytest

import dynfuse
from dynfuse import execute, replay, trace

dnp = dynfuse.numpy


@pytest.fixture(autouse=True)
def no_replays_from_other_tests():
    """A replay computes its node alone, without looking for intermediates to keep."""
    replay.clear_plans()


def stored_with(result, monkeypatch):
    """The nodes a materialization of ``result`` computes and keeps besides it."""
    kept = []
    held_intermediates = execute.held_intermediates

    def spy(order, outputs, group=None):
        kept.extend(held_intermediates(order, outputs, group))
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
