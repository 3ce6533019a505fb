"""The scheduler: how many kernels named patterns become, and that every plan computes what NumPy does."""

import dataclasses
import warnings

import numpy as np
import pytest

import dynfuse
from dynfuse import config, execute, launch, registry, replay, schedule
from dynfuse.backends import groups
from dynfuse.kernel import Target
from dynfuse.schedule import KernelStep, LibraryStep
from dynfuse.trace import topological_order

from .helpers import assert_same, on_cpu_leaving_to_numpy


@pytest.fixture(autouse=True)
def plans_run_on_the_group_backend(monkeypatch):
    """The scheduler's tests read the group backend's Python source and inject faults into it."""
    monkeypatch.setattr(registry, "backend", "groups")


rng = np.random.default_rng(0)


def plan_of(*arrays, target=None):
    outputs = execute.wanted_nodes([array._node for array in arrays])
    trace = schedule.number_trace(topological_order(outputs), outputs)
    return trace.nodes, schedule.plan_for(trace, target or groups.BACKEND.target)


def kernels(*arrays, target=None):
    return plan_of(*arrays, target=target)[1].kernels


def arrays_read(*arrays):
    """Input arrays the plan's kernels read (0-d constants such as a mean's count not counted)."""
    nodes, plan = plan_of(*arrays)
    return {source.node for step in plan.kernels for source in step.loads if nodes[source.node].shape}


def lazy(*shape, dtype=np.float64):
    return dynfuse.asarray(rng.standard_normal(shape).astype(dtype))


def close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=1e-12, atol=1e-12)


LONG_ROWS = Target("long rows", persistent_row_elements=4)


# ---- elementwise and views ----------------------------------------------------------------------


def test_argmax_along_rows_is_numpys_loop_and_across_them_a_kernel(monkeypatch):
    """The CPU target leaves argmax and argmin that reduce their operand's last axis to NumPy's loop
    (the kernel's select of value and index keeps its loop over a row scalar), in rows long enough
    that NumPy's call a row costs less; across rows a kernel takes them in lanes. NaN first, ties at
    the first index, either way."""
    from dynfuse.backends import cpu

    monkeypatch.setattr(registry, "backend", "cpu")
    data = rng.standard_normal((40, 30))
    data[3, 7] = data[9, 2] = np.nan
    data[5, :] = 1.0
    cases = [
        (lambda a: (a * 2).argmax(axis=1), True),
        (lambda a: (a * 2).argmin(), True),
        (lambda a: (a * 2).argmin(axis=-1, keepdims=True), True),
        (lambda a: (a * 2).argmax(axis=0), False),
        (lambda a: (a[:, :8] * 2).argmax(axis=1), False),  # rows too short for NumPy's call a row
    ]
    for make, in_library in cases:
        result = make(dynfuse.asarray(data))
        _, plan = plan_of(result, target=cpu.BACKEND.target)
        assert any(isinstance(step, LibraryStep) for step in plan.steps) == in_library
        np.testing.assert_array_equal(np.asarray(result), make(data))


def test_relu_chain_is_one_kernel_moving_a_third_of_the_bytes():
    x = lazy(1000)
    y = np.maximum(x * 2, 0) + 1
    (step,) = kernels(y)
    assert len(step.loads) == 1 and len(step.kernel.outputs) == 1
    assert "memory traffic: 16.0 KB fused, 48.0 KB op by op (3.0x less)" in dynfuse.explain(y)
    assert_same(y, np.maximum(np.asarray(x) * 2, 0) + 1)


LAYOUTS_OF_ONE_SHAPE = {  # (4, 3) arrays of a dtype, laid out in memory in different ways
    "contiguous": lambda dtype: np.arange(12, dtype=dtype).reshape(4, 3),
    "broadcast rows": lambda dtype: np.broadcast_to(np.arange(3, dtype=dtype), (4, 3)),
    "broadcast columns": lambda dtype: np.broadcast_to(np.arange(4, dtype=dtype)[:, None], (4, 3)),
    "transposed": lambda dtype: np.arange(12, dtype=dtype).reshape(3, 4).T,
    "flipped": lambda dtype: np.arange(12, dtype=dtype).reshape(4, 3)[::-1],
}


def check_layouts_in_every_order(dtype, monkeypatch):
    """A plan reads broadcast axes and contiguity from the buffers it was made for: one made for a
    layout, then looked up for another of the same shape, gave wrong values."""
    monkeypatch.setattr(config, "tiers", False)
    for first in LAYOUTS_OF_ONE_SHAPE.values():
        replay.clear_plans()
        for then in LAYOUTS_OF_ONE_SHAPE.values():
            for values in (first(dtype), then(dtype)):
                np.testing.assert_array_equal(np.asarray(dynfuse.asarray(values) * 2 + 1), values * 2 + 1)


def test_buffers_of_one_shape_and_other_layouts_do_not_share_a_plan(monkeypatch):
    check_layouts_in_every_order(np.float64, monkeypatch)


def test_a_tree_over_broadcast_inputs_reads_each_input_once():
    a, b, c, d = lazy(3, 1), lazy(1, 4), lazy(4), lazy(3, 4)
    y = ((a + b) * c - d) / a + np.sqrt(np.abs(a))
    (step,) = kernels(y)
    assert sorted(source.node for source in step.loads) == sorted({source.node for source in step.loads})
    assert len(step.loads) == 4
    A, B, C, D = map(np.asarray, (a, b, c, d))
    close(y, ((A + B) * C - D) / A + np.sqrt(np.abs(A)))


VIEWS_OF_COMPUTED = {
    "transpose": lambda v: v.T,
    "swapaxes": lambda v: v.swapaxes(0, 2),
    "moveaxis": lambda v: (
        dynfuse.numpy.moveaxis(v, 0, -1) if isinstance(v, dynfuse.LazyArray) else np.moveaxis(v, 0, -1)
    ),
    "broadcast_to": lambda v: np.broadcast_to(v[:, :1], (2, 3, 4)),
    "expand_dims": lambda v: v[:, None, :, None],
    "squeeze": lambda v: v[:1].squeeze(0),
    "reshape regrouping axes": lambda v: v.reshape(6, 4),
    "reshape splitting an axis": lambda v: v.reshape(2, 3, 2, 2),
    "slices with steps": lambda v: v[::-1, 1::2, ::3],
    "flip": lambda v: np.flip(v, axis=1),
    "integer index": lambda v: v[1, :, 2],
    "ravel": lambda v: v.ravel(),
}


@pytest.mark.parametrize("name", sorted(VIEWS_OF_COMPUTED))
def test_views_of_computed_values_are_index_maps_not_copies(name):
    view = VIEWS_OF_COMPUTED[name]
    x = lazy(2, 3, 4)
    y = view(x * 2 + 1) - 3
    (step,) = kernels(y)
    assert len(step.loads) == 1
    close(y, view(np.asarray(x) * 2 + 1) - 3)


def test_flattening_a_transposed_value_iterates_over_its_axes():
    x = lazy(3, 4)
    y = (x * 2).T.reshape(12) + 1  # the kernel iterates over (4, 3) and writes 12 contiguous values
    (step,) = kernels(y)
    assert step.kernel.shape == (4, 3)
    close(y, (np.asarray(x) * 2).T.reshape(12) + 1)


def test_a_reshape_no_index_map_expresses_stores_its_input():
    x = lazy(3, 4)
    y = (x * 2).T.reshape(6, 2) + 1  # (4, 3) regrouped as (6, 2): an index carries between axes
    assert len(kernels(y)) == 2
    close(y, (np.asarray(x) * 2).T.reshape(6, 2) + 1)


def test_views_of_inputs_are_read_in_place():
    base = rng.standard_normal((6, 8))
    x = dynfuse.asarray(base)
    y = x[::-2, 1:].T * x.T[1:, ::-2]
    (step,) = kernels(y)
    assert len(step.loads) == 2  # two views of one input, each read in place
    close(y, base[::-2, 1:].T * base.T[1:, ::-2])


# ---- reductions ---------------------------------------------------------------------------------

REDUCTIONS = ["sum", "prod", "max", "min", "argmax", "argmin", "any", "all", "mean", "var", "std"]


REDUCTION_CASES = [
    (name, axis, keepdims)
    for name in REDUCTIONS
    for axis in [None, 0, 1, (0, 2), -1]
    for keepdims in [False, True]
    if name not in ("argmax", "argmin") or not (isinstance(axis, tuple) or keepdims)  # one axis, no keepdims
]


@pytest.mark.parametrize(("name", "axis", "keepdims"), REDUCTION_CASES)
def test_a_reduction_takes_its_producers_into_its_kernel(name, axis, keepdims):
    a, b = lazy(3, 4, 5), lazy(3, 4, 5)
    kwargs = {"axis": axis, **({"keepdims": True} if keepdims else {})}
    y = getattr(a * b, name)(**kwargs)
    (step,) = kernels(y)
    assert len(arrays_read(y)) == 2 and len(step.stores) == 1  # no temporary for a * b
    assert step.kernel.passes == (2 if name in ("var", "std") else 1)
    expected = getattr(np.asarray(a) * np.asarray(b), name)(**kwargs)
    close(y, expected)
    assert np.asarray(y).dtype == expected.dtype


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x):
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)


def centered(x):
    return x - x.mean(axis=-1, keepdims=True)


@pytest.mark.parametrize(
    ("pattern", "short_rows", "long_rows"),
    [
        # (kernels, passes of each) when a row fits the persistent limit, and when it does not
        (softmax, [3], [1, 1, 1]),
        (layernorm, [3], [1, 1, 1]),
        (centered, [2], [1, 1]),
    ],
)
def test_row_patterns_in_the_stated_passes(pattern, short_rows, long_rows):
    x = lazy(8, 6)
    y = pattern(x)
    assert [step.kernel.passes for step in kernels(y)] == short_rows
    assert [step.kernel.passes for step in kernels(y, target=LONG_ROWS)] == long_rows
    expected = pattern(np.asarray(x))
    close(y, expected)
    with config_target(LONG_ROWS):
        close(pattern(x), expected)


def pairwise_forces(x, y, m):
    """A step of an n-body integrator: per-row sums, then per-body updates of what they give."""
    dx, dy = x[:, None] - x[None, :], y[:, None] - y[None, :]
    inverse = (dx**2 + dy**2 + 0.01) ** -1.5
    vx = 0.5 - 0.01 * (dx * inverse * m).sum(axis=1)
    vy = 0.25 - 0.01 * (dy * inverse * m).sum(axis=1)
    return x + 0.01 * vx, y + 0.01 * vy, vx, vy


def normalized_columns(x, y):
    """Column sums, values computed from them alone, and a per-element use of those."""
    sums = x.sum(axis=0)
    scaled = np.exp(sums / 10) * y
    return sums, scaled, x / scaled


def row_extremes(x, y):
    """A keepdims reduction and a two-pass one, each with values per row after it."""
    top = x.max(axis=1, keepdims=True)
    spread = np.sqrt(x.var(axis=1)) + y
    return np.log1p(np.abs(top)) * 2, spread, spread * top[:, 0]


@pytest.mark.parametrize("backend", ["groups", "cpu", "cuda-emulator"])
def test_a_reduction_over_no_elements_reads_each_rows_own_values(backend, monkeypatch):
    """A reduction over an empty axis still reads its per-row values, each row its own: the empty
    layout NumPy calls contiguous must not make every row read the first row's value."""
    monkeypatch.setattr(registry, "backend", backend)
    empty = np.ones((3, 0))
    tens, mask = np.arange(3.0).reshape(3, 1) * 10, np.array([True, False, True])
    programs = [
        lambda np_, x, r, m: x.sum(axis=1, keepdims=True) + r,
        lambda np_, x, r, m: np_.all(x > 0, axis=1) & m,
        lambda np_, x, r, m: np_.triu(np_.all(x, axis=-1, keepdims=True)),
    ]
    for program in programs:
        expected = program(np, empty, tens, mask)
        actual = program(dynfuse.numpy, *map(dynfuse.asarray, (empty, tens, mask)))
        np.testing.assert_array_equal(np.asarray(actual), expected)


@pytest.mark.parametrize(
    ("program", "shapes", "expected_kernels"),
    [
        (pairwise_forces, [(64,), (64,), (64,)], 1),
        (normalized_columns, [(5, 7), (7,)], 2),  # x / scaled reads the sums per element
        (row_extremes, [(6, 9), (6,)], 1),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
@pytest.mark.parametrize("backend", ["groups", "cpu"])
@pytest.mark.parametrize("threads", [1, 2])
def test_values_computed_from_a_kernels_row_values_are_per_row_in_it(
    program, shapes, expected_kernels, backend, threads, monkeypatch
):
    """An elementwise value of a reduction's result (and of leaves of its shape) is computed once a
    row is done, in the reduction's kernel, and stored as one more per-row output; two threads
    share the rows (by ranges of them, or each row, as PARTIAL and FINISH)."""
    from dynfuse.backends import cpu

    monkeypatch.setattr(registry, "backend", backend)
    monkeypatch.setattr(config, "threads", threads)
    monkeypatch.setattr(cpu, "PARALLEL_ELEMENTS", 0)  # split however small the work
    values = [rng.standard_normal(shape) for shape in shapes]
    expected = program(*values)
    lazy_results = program(*map(dynfuse.asarray, values))
    assert len(kernels(*lazy_results)) == expected_kernels
    dynfuse.evaluate(*lazy_results)
    for actual, wanted in zip(lazy_results, expected, strict=True):
        close(actual, wanted)


def test_rows_too_long_for_a_second_pass_store_every_node_of_one_sum():
    """``x.var()`` and ``x.mean()`` sum ``x`` once (one instruction, dims kept or not): where a
    row is too long for the variance's second pass, both nodes of that sum are stored."""
    x = lazy(8)
    variance, mean = x.var(), -x.mean()
    assert [step.kernel.passes for step in kernels(variance, mean, target=LONG_ROWS)] == [1, 1]
    with config_target(LONG_ROWS):
        dynfuse.evaluate(variance, mean)
    close(variance, np.asarray(x).var())
    close(mean, -np.asarray(x).mean())


class config_target:
    """Run with the group backend planning for another target."""

    def __init__(self, target):
        self.target = target

    def __enter__(self):
        self.saved = groups.BACKEND.target
        groups.BACKEND.target = self.target

    def __exit__(self, *exc):
        groups.BACKEND.target = self.saved


# ---- scans --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_a_scan_fuses_with_its_producers_and_consumers(name, axis):
    """A running total along a row is computed in order within the pass over it: what it reads, it and
    what reads it per element (or reduces it along the same axis) are one kernel. Without an axis it
    runs along the flattened array, which an index map over a computed 2-d value cannot express: that
    value is stored first (a buffer's flattening is a view)."""
    a = lazy(6, 9)
    y = np.exp(getattr(np, name)(a * 0.5 + 1, axis=axis) * 0.25)
    assert len(kernels(y)) == 2 if axis is None else len(kernels(y)) == len(arrays_read(y)) == 1
    assert len(kernels(np.exp(getattr(np, name)(a, axis=axis) * 0.25))) == 1
    expected = np.exp(getattr(np, name)(np.asarray(a) * 0.5 + 1, axis=axis) * 0.25)
    close(y, expected)


def test_a_scan_and_a_reduction_along_its_axis_share_a_kernel_and_a_view_of_it_is_stored():
    """The Monte-Carlo pattern: prices from summed log-returns, averaged along each path (one kernel,
    one pass), and the last price of each path, a column of the scan read by a kernel of its own."""
    log_returns = lazy(40, 25)
    prices = 100 * np.exp(np.cumsum(0.01 + 0.2 * log_returns, axis=1))
    asian, european = np.maximum(prices.mean(axis=1) - 100, 0), np.maximum(prices[:, -1] - 100, 0)
    nodes, plan = plan_of(asian, european)
    first, second = plan.kernels
    assert first.kernel.passes == 1 and [nodes[n].op.name for n in first.stores] == ["cumsum", "maximum"]
    assert second.kernel.shape == (40,)
    expected = 100 * np.exp(np.cumsum(0.01 + 0.2 * np.asarray(log_returns), axis=1))
    close(asian, np.maximum(expected.mean(axis=1) - 100, 0))
    close(european, np.maximum(expected[:, -1] - 100, 0))


def test_scans_along_other_axes_than_a_kernels_are_stored():
    a = lazy(5, 7)
    y = np.cumsum(np.cumsum(a, axis=0) * 2, axis=1)
    z = np.cumsum(a, axis=1).sum(axis=0)
    assert len(kernels(y)) == 2 and len(kernels(z)) == 2
    close(y, np.cumsum(np.cumsum(np.asarray(a), axis=0) * 2, axis=1))
    close(z, np.cumsum(np.asarray(a), axis=1).sum(axis=0))


# ---- several outputs, barriers ------------------------------------------------------------------


def test_outputs_that_share_inputs_come_out_of_one_kernel():
    x = lazy(5, 7)
    a, b = x + 1, x * 2
    (step,) = kernels(a, b)
    assert len(step.loads) == 1 and len(step.stores) == 2
    mean, var = x.mean(), x.var()
    (step,) = kernels(mean, var)
    assert len(arrays_read(mean, var)) == 1 and len(step.stores) == 2
    rows, doubled = x.sum(axis=1), x * 2
    (step,) = kernels(rows, doubled)
    dynfuse.evaluate(a, b, mean, var, rows, doubled)
    X = np.asarray(x)
    for got, want in [(a, X + 1), (b, X * 2), (mean, X.mean()), (var, X.var()), (rows, X.sum(1))]:
        close(got, want)


def test_unrelated_work_of_one_shape_stays_in_its_own_kernels():
    """Joined, unrelated kernels would save no traffic, and each grouping a plan happened to make
    (a loop's iterations materialized two or three at a time) would be one more signature."""
    first, second = lazy(5, 7), lazy(5, 7)
    a, b = np.exp(first).sum(axis=1), np.exp(second).sum(axis=1)
    steps = kernels(a, b)
    assert len(steps) == 2
    assert steps[0].kernel.signature == steps[1].kernel.signature
    assert kernels(a)[0].kernel.signature == steps[0].kernel.signature
    dynfuse.evaluate(a, b)
    close(a, np.exp(np.asarray(first)).sum(axis=1))
    close(b, np.exp(np.asarray(second)).sum(axis=1))


def test_an_output_that_reads_another_is_computed_inline():
    x = lazy(5, 7)
    y = x * 2
    z = y + 1
    (step,) = kernels(y, z)
    assert len(step.stores) == 2
    dynfuse.evaluate(y, z)
    close(z, np.asarray(x) * 2 + 1)


def test_matmul_is_a_barrier_with_fusion_on_each_side():
    x, w, bias = lazy(4, 6), lazy(6, 3), lazy(3)
    y = np.maximum(x @ w + bias, 0)
    assert [type(step) for step in plan_of(y)[1].steps] == [LibraryStep, KernelStep]
    z = np.maximum((x * 2 - 1) @ w + bias, 0)
    assert [type(step) for step in plan_of(z)[1].steps] == [KernelStep, LibraryStep, KernelStep]
    X, W, B = map(np.asarray, (x, w, bias))
    close(y, np.maximum(X @ W + B, 0))
    close(z, np.maximum((X * 2 - 1) @ W + B, 0))


def test_an_op_the_target_leaves_to_numpy_is_a_library_step_between_kernels():
    """An elementwise op in ``Target.library_ops`` (one whose NumPy loop beats the backend's code)
    runs as NumPy's call on stored operands, with fusion on each side: the result is NumPy's."""
    x = lazy(40, 50)
    y = np.tan(x * 2 - 1) * 3 + np.abs(x)
    library_ops = frozenset({("tan", "d")})
    target = dataclasses.replace(groups.BACKEND.target, name="numpy-tan", library_ops=library_ops)
    steps = plan_of(y, target=target)[1].steps
    assert [type(step) for step in steps] == [KernelStep, LibraryStep, KernelStep]
    assert [type(step) for step in plan_of(y)[1].steps] == [KernelStep]  # fused where not listed
    X = np.asarray(x)
    close(y, np.tan(X * 2 - 1) * 3 + np.abs(X))


def test_the_cpu_backend_runs_by_numpy_what_libm_computes_slower(monkeypatch):
    """tan, and float32 sin and cos, are what the LLVM generator leaves to libm where NumPy's loop
    is vectorized; float64 sin stays fused (glibc's is the faster there). Where NumPy has its SVML
    loops, the dearer float32 functions run them too; float64 ones, and exp, stay fused."""
    monkeypatch.setattr(registry, "backend", "cpu")
    values = rng.uniform(-0.4, 0.4, 1000)
    svml = np._core._multiarray_umath.__cpu_features__.get("AVX512_SKX", False)
    for function, dtype, library in [
        (np.tan, np.float64, True),
        (np.sin, np.float32, True),
        (np.sin, np.float64, False),
        (np.arcsin, np.float32, svml),
        (np.arcsin, np.float64, False),
        (np.exp, np.float32, False),
    ]:
        data = values.astype(dtype)
        y = function(dynfuse.asarray(data) * 2) + 1
        assert (f"library 1: {function.__name__}" in dynfuse.explain(y)) == library
        np.testing.assert_allclose(
            np.asarray(y), function(data * 2) + 1, atol=1e-6 if dtype == np.float32 else 1e-14
        )


def test_an_op_left_to_numpy_splits_across_threads_with_numpy_results(monkeypatch):
    """A large elementwise library step runs NumPy's loop on ranges of rows, one a thread, each
    starting where the whole call's vector loop steps: what the whole call gives, bit for bit, with
    broadcast operands and a Python scalar's weak dtype."""
    monkeypatch.setattr(config, "threads", 3)
    monkeypatch.setattr(launch, "SPLIT_ELEMENTS", 0)
    with on_cpu_leaving_to_numpy(monkeypatch, {("arctan2", "d"), ("arctan2", "f"), ("arcsin", "d")}):
        a, b = rng.standard_normal((300, 1)), rng.standard_normal(500).astype(np.float32)
        y = np.arctan2(dynfuse.asarray(a) * 2, dynfuse.asarray(b)) + 1
        z = np.arctan2(dynfuse.asarray(b) * 2, 0.5) + 1  # float32: the scalar stays weak
        assert "library 1: arctan2" in dynfuse.explain(y)
        np.testing.assert_array_equal(np.asarray(y), np.arctan2(a * 2, b) + 1)
        np.testing.assert_array_equal(np.asarray(z), np.arctan2(b * 2, 0.5) + 1)
        assert np.asarray(z).dtype == np.float32
        # every part keeps the caller's errstate, a context variable that threads do not share
        twos = dynfuse.asarray(np.full(600, 2.0))
        with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
            np.asarray(np.arcsin(twos * 1.5) + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(all="ignore"):
                assert np.isnan(np.asarray(np.arcsin(twos * 1.5) + 1)).all()


def test_a_fallback_is_a_barrier_with_fusion_on_each_side():
    x = lazy(50)
    y = np.sort(x * 2 + 1)  # not recorded: its input is materialized in one plan, then NumPy sorts
    z = y * 3 - 1
    dynfuse.evaluate(z)
    stats = dynfuse.stats()
    assert stats["fallback_names"] == {"sort": 1}
    assert stats["kernels_launched"] == 2 and stats["fused_ops"] == 4
    close(z, np.sort(np.asarray(x) * 2 + 1) * 3 - 1)


# ---- decisions on shared nodes ------------------------------------------------------------------


def test_cheap_shared_work_is_recomputed_in_each_kernel():
    x = lazy(6, 7)
    shared = x + 1
    by_rows, by_columns = shared.sum(axis=1), shared.sum(axis=0)
    nodes, plan = plan_of(by_rows, by_columns)
    assert len(plan.kernels) == 2
    assert all(nodes[n] is not shared._node for step in plan.kernels for n in step.stores)


def test_expensive_shared_work_is_stored_once():
    x = lazy(6, 7)
    shared = np.exp(np.sin(x) * np.log1p(np.abs(x)))
    by_rows, by_columns = shared.sum(axis=1), shared.sum(axis=0)
    nodes, plan = plan_of(by_rows, by_columns)
    stored = [nodes[n] for step in plan.kernels for n in step.stores]
    assert any(node is shared._node for node in stored)
    dynfuse.evaluate(by_rows, by_columns)
    S = np.exp(np.sin(np.asarray(x)) * np.log1p(np.abs(np.asarray(x))))
    close(by_rows, S.sum(axis=1))
    close(by_columns, S.sum(axis=0))


def test_expensive_work_read_through_a_small_view_is_computed_again_there():
    """A Monte-Carlo pricer's paths: their row means, and their last column. Storing the paths for
    the column would write all of them; the column's kernel computes its 6 elements instead."""
    x = lazy(6, 200)
    paths = np.exp(np.sin(x) * np.log1p(np.abs(x)))
    means, last = paths.mean(axis=1), paths[:, -1] - 1
    nodes, plan = plan_of(means, last)
    assert all(nodes[n] is not paths._node for step in plan.kernels for n in step.stores)
    dynfuse.evaluate(means, last)
    P = np.exp(np.sin(np.asarray(x)) * np.log1p(np.abs(np.asarray(x))))
    close(means, P.mean(axis=1))
    close(last, P[:, -1] - 1)


def test_a_deep_shared_dag_plans_in_linear_work(monkeypatch):
    """200 levels of ``x = x + x*0.5``, both operands shared: 2**200 paths, 400 values."""
    monkeypatch.setattr(config, "max_depth", 10_000)
    expansions = 0
    expand = schedule._KernelBuilder._expand

    def counting(self, *args):
        nonlocal expansions
        expansions += 1
        return expand(self, *args)

    monkeypatch.setattr(schedule._KernelBuilder, "_expand", counting)
    start = np.linspace(0, 1, 16)
    x, expected = dynfuse.asarray(start), start
    for _ in range(200):
        x = x + x * 0.5
        expected = expected + expected * 0.5
    (step,) = kernels(x)
    assert len(step.kernel.instructions) == 1 + 200 * 3  # the load, then per level: param, multiply, add
    assert expansions <= 2 * (1 + 200 * 3)
    close(x, expected)


def test_a_changing_scalar_reuses_the_plan_and_the_kernel():
    x = dynfuse.asarray(np.arange(10.0))
    for scale in [0.5, 1.5, 2.5, 3, 200, 10**6]:
        y = x * scale + scale / 2
        close(y, np.arange(10.0) * scale + scale / 2)
    stats = dynfuse.stats()
    # float scalars and int scalars differ in type: two signatures, each planned and compiled once,
    # then replayed without a plan lookup
    assert stats["plan_cache_misses"] == 2 and stats["replays"] == 4 and stats["plan_cache_hits"] == 0
    assert stats["kernels_compiled"] == 2


def test_the_kernel_signature_is_structural():
    """Ops, dtypes, shapes and layouts make the signature; scalar values do not."""
    x = lazy(6, 8)
    times_two, times_three = kernels(x * 2 + 1)[0].kernel, kernels(x * 3 + 5)[0].kernel
    assert times_two.signature == times_three.signature
    flipped = kernels(x[::-1] * 2 + 1)[0].kernel
    broadcast = kernels(x[:1] * 2 + 1 + x)[0].kernel
    float32 = kernels(lazy(6, 8, dtype=np.float32) * 2 + 1)[0].kernel
    signatures = {times_two.signature, flipped.signature, broadcast.signature, float32.signature}
    assert len(signatures) == 4
    (load,) = times_two.inputs
    assert dict(load.params) == {
        "slot": 0,
        "broadcast": (),
        "contiguous": True,
        "zero_dim": False,
        "fastest": 1,
        "wraps": (),
    }
    assert dict(flipped.inputs[0].params)["contiguous"] is False
    rolled = kernels(np.roll(x, 3, 1) * 2)[0].kernel
    assert dict(rolled.inputs[0].params)["wraps"] == ((1, 5, 8),)  # read at (i + 5) % 8 along axis 1
    assert dict(rolled.inputs[0].params)["contiguous"] is False
    assert dict(kernels(x.T * 2)[0].kernel.inputs[0].params)["fastest"] == 0
    assert {dict(inst.params)["broadcast"] for inst in broadcast.inputs} == {(), (0,)}


# ---- faults -------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["groups", "cpu"])
@pytest.mark.parametrize("fault", ["compile", "launch"])
def test_a_failing_kernel_falls_back_with_a_warning(backend, fault, monkeypatch):
    monkeypatch.setattr(registry, "backend", backend)
    replay.clear_kernels()

    def broken_compile(kernel):
        raise RuntimeError("injected compiler failure")

    def broken_kernel(kernel):
        def run(inputs, params, outputs):
            raise RuntimeError("injected launch failure")

        return run

    monkeypatch.setattr(
        registry.BACKENDS[backend], "compile", broken_compile if fault == "compile" else broken_kernel
    )
    assert_runs_op_by_op_after_a_fault(f"{backend} kernel failed .*injected", f"kernel:{backend}")
    replay.clear_kernels()


def assert_runs_op_by_op_after_a_fault(warning, counted_as):
    """An injected fault warns, is counted under ``counted_as``, and the result is still right."""
    x = lazy(20)
    y = np.exp(x) + 1
    with pytest.warns(RuntimeWarning, match=warning):
        dynfuse.evaluate(y)
    close(y, np.exp(np.asarray(x)) + 1)
    assert dynfuse.stats()["fallback_names"] == {counted_as: 1}


def test_a_planning_fault_runs_the_trace_op_by_op(monkeypatch):
    def broken_plan(self):
        raise RuntimeError("injected planner failure")

    monkeypatch.setattr(schedule._Planner, "plan", broken_plan)
    replay.clear_plans()
    assert_runs_op_by_op_after_a_fault("planning failed .*injected planner failure", "plan")


# ---- introspection ------------------------------------------------------------------------------


def test_explain_lists_kernels_and_sources_without_computing():
    x, w = lazy(4, 6), lazy(6, 3)
    y = softmax(np.maximum(x @ w, 0))
    text = dynfuse.explain(y, source=True)
    for expected in (
        "library 0: matmul",
        "kernel 1: over (4, 3), reducing axes (1,) in 3 pass(es)",
        "def kernel",
    ):
        assert expected in text, text
    sources = dynfuse.kernel_sources(y)
    assert len(sources) == 1 and all(line in text for line in sources[0].splitlines())
    assert "op by op" in dynfuse.explain(y, backend="numpy") and "kernel 0" not in dynfuse.explain(
        y, backend="numpy"
    )
    with pytest.raises(ValueError, match="reference backend"):
        dynfuse.kernel_sources(y, backend="numpy")
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        dynfuse.explain(y, backend="tpu")
    assert dynfuse.stats()["materializations"] == 0


def test_stats_count_planned_kernels_and_fused_ops():
    x = lazy(30)
    y = np.maximum(x * 2, 0) + 1
    z = (x * x).sum()
    dynfuse.evaluate(y, z)
    stats = dynfuse.stats()
    assert stats["kernels_planned"] == 1 and stats["kernels_launched"] == 1
    assert stats["fused_ops"] == 5 and stats["plan_cache_misses"] == 1


def test_generated_kernels_warn_as_numpy_does():
    x = dynfuse.asarray(np.array([-1.0, 4.0]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = np.asarray(np.sqrt(x) + 1)
    assert any("invalid value" in str(warning.message) for warning in caught)
    assert np.isnan(y[0]) and y[1] == 3.0


def test_targets_are_part_of_the_plan_key():
    x = lazy(8, 6)
    y = softmax(x)
    assert len(kernels(y)) == 1
    assert len(kernels(y, target=dataclasses.replace(LONG_ROWS, name="other"))) == 3


def test_a_round_of_planning_rebuilds_only_the_kernels_whose_stored_reads_changed(monkeypatch):
    """Planning a long trace takes rounds, each storing a few nodes more; a kernel whose group came
    out the same, and none of whose nodes was stored since, is kept from the round before. The plan
    is the one that building every kernel afresh each round gives."""
    u, v = lazy(40, 40), lazy(40, 40)
    for _ in range(4):  # Gray-Scott's steps: periodic Laplacians by np.roll
        lap_u = np.roll(u, 1, 0) + np.roll(u, -1, 0) + np.roll(u, 1, 1) + np.roll(u, -1, 1) - 4 * u
        lap_v = np.roll(v, 1, 0) + np.roll(v, -1, 0) + np.roll(v, 1, 1) + np.roll(v, -1, 1) - 4 * v
        uvv = u * v * v
        u, v = u + 0.2 * lap_u - uvv + 0.03 * (1 - u), v + 0.1 * lap_v + uvv - 0.09 * v
    outputs = [u._node, v._node]
    trace = schedule.number_trace(topological_order(outputs), outputs)
    target = registry.BACKENDS["cpu"].target
    built = []
    build = schedule._KernelBuilder.__init__

    def counted(self, *arguments):
        built.append(1)
        build(self, *arguments)

    monkeypatch.setattr(schedule._KernelBuilder, "__init__", counted)
    kept = schedule._Planner(trace, target).plan()
    with_reuse = len(built)

    def afresh(self, group, _):
        return schedule._KernelBuilder(self, group)

    monkeypatch.setattr(schedule._Planner, "_builder", afresh)
    built.clear()
    assert schedule._Planner(trace, target).plan() == kept
    assert with_reuse < len(built)
