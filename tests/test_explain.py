"""``dynfuse.explain``: the plan it prints, and the planner's reason for each kernel that did not join
the kernel before it (or the latest one over its iteration space) and for each value stored between
kernels. Each program here is built so that one reason decides, and checks that reason's line."""

import numpy as np
import pytest

import dynfuse
from dynfuse import execute, registry, schedule
from dynfuse.backends import groups
from dynfuse.kernel import Target
from dynfuse.schedule import Apart, Reasons, Stored, Why
from dynfuse.trace import topological_order

rng = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def plans_run_on_the_group_backend(monkeypatch):
    monkeypatch.setattr(registry, "backend", "groups")


@pytest.fixture
def long_rows(monkeypatch):
    """Rows longer than 4 elements take a kernel per pass."""
    monkeypatch.setattr(groups.BACKEND, "target", Target("long rows", persistent_row_elements=4))


def lazy(*shape):
    return dynfuse.asarray(rng.standard_normal(shape))


def trace_of(*arrays):
    outputs = execute.wanted_nodes([array._node for array in arrays])
    return schedule.number_trace(topological_order(outputs), outputs)


def plan_of(*arrays):
    return schedule.plan_for(trace_of(*arrays), groups.BACKEND.target)


def reasons(*arrays):
    """The lines explain adds under the plan: kernels not fused, values stored."""
    return [
        line
        for line in dynfuse.explain(*arrays).splitlines()
        if "not fused:" in line or " stored by " in line
    ]


# ---- kernels not fused --------------------------------------------------------------------------


def test_different_iteration_spaces():
    x = lazy(1000)
    assert reasons(x * 2, (x * 3).reshape(10, 100).sum(axis=1)) == [
        "kernel 0 | kernel 1: not fused: different iteration spaces (1000,) and (10, 100)"
    ]


def test_unrelated_work_of_one_shape():
    assert reasons(lazy(5) * 2, lazy(5) * 3) == [
        "kernel 0 | kernel 1: not fused: unrelated: no input or computed value in common, "
        "so joining them saves nothing"
    ]


def test_reductions_along_different_axes():
    x = lazy(4, 6)
    assert reasons(x.sum(axis=0), x.sum(axis=1)) == [
        "kernel 0 | kernel 1: not fused: different rows: kernel 0 runs along axes (0,), kernel 1 along (1,)"
    ]


def test_a_reduction_read_across_its_rows():
    x = lazy(5, 5)
    assert reasons(x * x.sum(axis=1)[None, :]) == [
        "kernel 0 | kernel 1: not fused: kernel 1 reads %1 (sum) per element, "
        "which kernel 0 has only once a row is done",
        "%1 stored by kernel 0: a reduction that a kernel over (5, 5) reads other than along its rows",
    ]


def test_a_barrier_in_between():
    x, w = lazy(4, 6), lazy(6, 3)
    text = dynfuse.explain(np.exp(x) @ w + 1)
    assert "library 1: matmul" in text
    assert (
        "kernel 0 | kernel 2: not fused: a barrier between them: kernel 2 reads %3 (matmul) from library 1"
        in (text)
    )


def test_a_kernel_in_between_computes_what_it_reads():
    x = lazy(4, 6)
    column_sums = x.sum(axis=0)
    scaled = np.exp(column_sums[::-1]) * 2  # reversed: not per row of the sums' kernel
    assert reasons(column_sums, scaled, x + scaled[None, :]) == [
        "kernel 0 | kernel 1: not fused: different iteration spaces (4, 6) and (6,)",
        "kernel 1 | kernel 2: not fused: different iteration spaces (6,) and (4, 6)",
        "kernel 0 | kernel 2: not fused: kernel 2 reads %5 (multiply) from kernel 1, which runs between them",
    ]


def test_values_computed_from_row_values_are_per_row_in_their_kernel():
    x = lazy(4, 6)
    column_sums = x.sum(axis=0)
    scaled = np.exp(column_sums) * 2
    assert reasons(column_sums, scaled, x + scaled[None, :]) == [
        "kernel 0 | kernel 1: not fused: kernel 1 reads %4 (multiply) per element, which kernel 0 has "
        "only once a row is done",
    ]


def test_a_stored_view_is_not_computed_inline():
    transposed = (lazy(3, 4) * 2).T
    assert reasons(transposed.reshape(2, 6).sum(axis=1), transposed + 1) == [
        "kernel 0 | kernel 1: not fused: different iteration spaces (4, 3) and (2, 6)",
        "kernel 1 | kernel 2: not fused: different iteration spaces (2, 6) and (4, 3)",
        "kernel 0 | kernel 2: not fused: kernel 2 reads %3 (transpose), a view that kernel 0 stores "
        "and it cannot compute inline",
        "%3 stored by kernel 0: a reshape from (4, 3) to (2, 6) that no index map expresses reads it",
    ]


def test_a_scan_read_along_other_rows():
    running = np.cumsum(lazy(4, 6), axis=0)
    assert reasons(running.sum(axis=1)) == [
        "kernel 0 | kernel 1: not fused: different rows: kernel 0 runs along axes (0,), kernel 1 along (1,)",
        "%1 stored by kernel 0: a scan along axes (0,) that a kernel over (4, 6) reads other than "
        "in order in its own pass",
    ]


def test_what_reads_a_node_out_of_its_order_keeps_out_of_the_kernel_computing_it():
    running = np.cumsum(lazy(4, 6), axis=0)
    assert reasons(running, running[::-1] + 1) == [
        "kernel 0 | kernel 1: not fused: kernel 1 reads %1 (cumsum) out of its order (shifted, or per row): "
        "kernel 0 computes it"
    ]


def test_a_stencil_of_a_stencil_is_stored():
    x = lazy(8, 8)
    step = x * 0.5 + 1.0
    for _ in range(2):
        step = np.roll(step, 1, 0) + np.roll(step, -1, 0) + np.roll(step, 1, 1) + np.roll(step, -1, 1) - step
    assert reasons(step) == [
        "kernel 0 | kernel 1: not fused: kernel 1 reads %4 (add) out of its order (shifted, or per row): "
        "kernel 0 computes it",
        "kernel 1 | kernel 2: not fused: kernel 2 reads %12 (subtract) out of its order "
        "(shifted, or per row): kernel 1 computes it",
        "%4 stored by kernel 0: a kernel reads it at more than 9 places around each element "
        "(a stencil of a stencil)",
        "%12 stored by kernel 1: computing it in each of 5 kernels costs 1280, storing it once 640 "
        "(in element loads)",
    ]


# ---- values stored between kernels --------------------------------------------------------------


def test_the_cost_model_says_its_numbers():
    shared = np.exp(np.sin(lazy(1000)))
    # Recomputed: sin and exp (cost 10 each) over 1000 elements in each of 2 kernels, 20 * 2000;
    # stored: computed once, 20 * 1000, written once and read back twice, 1000 + 2000.
    assert reasons(shared + 1, shared.reshape(10, 100).sum(axis=1)) == [
        "kernel 0 | kernel 1: not fused: different iteration spaces (1000,) and (10, 100)",
        "%2 stored by kernel 0: computing it in each of 2 kernels costs 40000, storing it once 23000 "
        "(in element loads)",
    ]


def test_rows_too_long_for_another_pass(long_rows):
    x = lazy(3, 8)
    centered = x - x.mean(axis=1, keepdims=True)
    assert reasons(centered) == [
        "kernel 0 | kernel 1: not fused: kernel 1 reads %1 (sum) per element, "
        "which kernel 0 has only once a row is done",
        "%1 stored by kernel 0: its readers need another pass over rows of 8 elements, "
        "more than the 4 one kernel makes",
    ]
    assert len(plan_of(x - x.mean(axis=1, keepdims=True)).kernels) == 2
    groups.BACKEND.target = Target("short rows")
    assert reasons(x - x.mean(axis=1, keepdims=True)) == []


def test_a_reduction_two_kernels_would_compute_is_computed_once(long_rows):
    x = lazy(3, 4)
    smallest = x.min(axis=1, keepdims=True)
    scale = np.exp(smallest)
    total = (x * scale).sum()  # a kernel after the one scale joins, which the hypot reads
    assert reasons(scale, np.hypot(smallest, total)) == [
        "kernel 0 | kernel 1: not fused: different rows: kernel 0 runs along axes (1,), "
        "kernel 1 along (0, 1)",
        "kernel 1 | kernel 2: not fused: different iteration spaces (3, 4) and (3, 1)",
        "%1 stored by kernel 0: a min that 2 kernels would each compute, each reading its whole operand: "
        "computed once",
        "%4 stored by kernel 1: a reduction that a kernel over (3, 4) reads other than along its rows",
    ]


# ---- the reasons, from the planner ------------------------------------------------------------


def test_one_kernel_has_no_reasons():
    x = lazy(6, 7)
    text = dynfuse.explain(np.exp(x - x.max(axis=1, keepdims=True)))
    assert "not fused" not in text and "stored by" not in text


def test_reasons_are_the_planners_own_and_shown_for_a_cached_plan():
    def program(x):
        return x * 2, (x * 3).reshape(10, 100).sum(axis=1)

    assert schedule.reasons(trace_of(*program(lazy(1000))), groups.BACKEND.target) == Reasons(
        (Apart(0, 1, Why.SHAPES, None, ((1000,), (10, 100))),), ()
    )
    dynfuse.evaluate(*program(lazy(1000)))
    before = dynfuse.stats()
    text = dynfuse.explain(*program(lazy(1000)))  # the plan the evaluation left in the cache
    assert dynfuse.stats()["plan_cache_hits"] == before["plan_cache_hits"] + 1
    assert dynfuse.stats()["plan_cache_misses"] == before["plan_cache_misses"]
    assert "kernel 0 | kernel 1: not fused: different iteration spaces (1000,) and (10, 100)" in text


def test_a_stored_reason_names_a_node_a_kernel_stores():
    shared = np.exp(np.sin(lazy(1000)))
    outputs = shared + 1, shared.reshape(10, 100).sum(axis=1)
    (stored,) = schedule.reasons(trace_of(*outputs), groups.BACKEND.target).stored
    assert stored == Stored(2, Why.COST, (2, 40000.0, 23000.0))
    assert stored.node in plan_of(*outputs).kernels[0].stores


def test_planning_for_a_run_notes_no_refusals(monkeypatch):
    noted = []
    monkeypatch.setattr(schedule, "Apart", lambda *args: noted.append(args) or Apart(*args))
    x, y = lazy(1000), lazy(1000)
    outputs = x * 2, (x * 3).reshape(10, 100).sum(axis=1), y * 2
    assert len(schedule._Planner(trace_of(*outputs), groups.BACKEND.target).plan().kernels) == 3
    assert noted == []
    assert len(schedule.reasons(trace_of(*outputs), groups.BACKEND.target).apart) == 3
    assert [args[2] for args in noted] == [Why.SHAPES, Why.SHAPES, Why.UNRELATED]
