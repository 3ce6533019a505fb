"""A write's value computed straight into the written region: ``b[1:-1, 1:-1] = expression`` on
a large array launches a kernel whose output is that region (a strided output), with no temporary
and no copy, and gives NumPy's answer and NumPy's aliasing."""

import dataclasses
import warnings

import numpy as np
import pytest

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import cache, execute, launch, record, registry
from dynfuse.backends import cpu
from dynfuse.testing.fuzz import fuzz

from .helpers import assert_same

N = 400  # 398² elements in the region: past the CPU target's in_place_elements


@pytest.fixture
def given_outputs(monkeypatch):
    """The strided outputs kernels were launched with, as (shape, strides) pairs."""
    seen = []
    allocate = launch.allocate_outputs

    def spy(kernel, memory, given=None):
        if given is not None:
            seen.append((given[1].shape, given[1].strides))
        return allocate(kernel, memory, given)

    monkeypatch.setattr(launch, "allocate_outputs", spy)
    return seen


@pytest.fixture
def reading_in_place(monkeypatch):
    """The CPU target writing in place from fewer elements, so that values reading the region of
    these tests' arrays qualify too (``record.READING_REGION_FACTOR``)."""
    backend = registry.BACKENDS["cpu"]
    monkeypatch.setattr(backend, "target", dataclasses.replace(backend.target, in_place_elements=1 << 14))


def grids(seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((N, N)), np.zeros((N, N))


def jacobi(a, b):
    b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1] + a[:-2, 1:-1])


def test_a_stencil_statement_is_written_by_its_kernel_into_the_region(given_outputs):
    a, b = grids()
    da, db = dnp.asarray(a.copy()), dnp.asarray(b.copy())
    for _ in range(3):  # planned, then replayed
        jacobi(da, db)
        jacobi(db, da)
        jacobi(a, b)
        jacobi(b, a)
    assert_same(db, b)
    assert_same(da, a)
    assert given_outputs == [((N - 2, N - 2), (8 * N, 8))] * 6
    assert dynfuse.stats()["writes_in_place"] == 6
    assert dynfuse.stats()["replays"] >= 4


def test_the_value_stays_what_numpy_computed_when_the_program_holds_it(given_outputs):
    a, b = grids(1)
    da, db = dnp.asarray(a.copy()), dnp.asarray(b.copy())
    value, expected = da[1:-1, 1:-1] * 2 + 1, a[1:-1, 1:-1] * 2 + 1
    db[1:-1, 1:-1] = value
    b[1:-1, 1:-1] = expected
    assert given_outputs
    db[...] = -1.0  # the region changes; the held value does not
    da[...] = 7.0  # nor does it when what it was computed from changes
    assert_same(value, expected)
    assert_same(db, np.full((N, N), -1.0))


def test_a_value_that_reads_the_region_is_computed_first_as_numpy_does(given_outputs):
    rng = np.random.default_rng(2)
    u = rng.random((N, N))
    du = dnp.asarray(u.copy())
    for grid in (u, du):
        laplacian = grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2] + grid[1:-1, 2:] - 4 * grid[1:-1, 1:-1]
        grid[1:-1, 1:-1] = grid[1:-1, 1:-1] + 0.1 * laplacian
        grid[1:, :] = grid[:-1, :] + 1.0  # an overlapping shift
    assert_same(du, u)
    assert not given_outputs  # each read the memory it wrote: computed, then copied


def test_an_update_in_place_of_shifted_slices_materializes_its_value_alone(monkeypatch):
    """FDTD's ``ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])``: the target is a pending view of a
    computed array, taken as NumPy takes it (``execute.view_now``), so each statement materializes
    its value, and nothing else, with NumPy's results."""
    rng = np.random.default_rng(3)
    ey, hz = rng.random((N, N)), rng.random((N, N))
    dey, dhz = dnp.asarray(ey.copy()), dnp.asarray(hz.copy())
    taken, take = [], execute.view_now
    monkeypatch.setattr(execute, "view_now", lambda node: taken.append(node) or take(node))
    for _ in range(3):
        before = dynfuse.stats()["materializations"]
        dey[1:, :] -= 0.5 * (dhz[1:, :] - dhz[:-1, :])
        assert dynfuse.stats()["materializations"] == before + 1
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
    assert_same(dey, ey)
    assert [node.shape for node in taken].count((N - 1, N)) == 3  # the view, each statement


@pytest.mark.parametrize("how", ["errstate", "warnings", "this warning"])
def test_a_write_whose_value_raises_leaves_the_array_unchanged(how, given_outputs):
    a, b = grids(3)
    a[5, 7] = -1.0
    da, db = dnp.asarray(a), dnp.asarray(b.copy())
    error = FloatingPointError if how == "errstate" else RuntimeWarning
    with np.errstate(all="raise" if how == "errstate" else "warn"), warnings.catch_warnings():
        if how == "warnings":
            warnings.simplefilter("error", RuntimeWarning)
        elif how == "this warning":
            warnings.filterwarnings("error", message="invalid value encountered in sqrt")
        with pytest.raises(error):
            db[1:-1, 1:-1] = dnp.sqrt(da[1:-1, 1:-1]) + 1
    assert_same(db, b)
    assert not given_outputs and dynfuse.stats()["writes_in_place"] == 0


def test_a_warning_filter_for_other_messages_leaves_writes_in_place(given_outputs):
    a, b = grids(3)
    da, db = dnp.asarray(a), dnp.asarray(b.copy())
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="overflow encountered in exp")
        db[1:-1, 1:-1] = dnp.sqrt(da[1:-1, 1:-1]) + 1
    b[1:-1, 1:-1] = np.sqrt(a[1:-1, 1:-1]) + 1
    assert_same(db, b)
    assert given_outputs


@pytest.mark.parametrize("tiers", [False, True])
def test_other_dtypes_regions_and_interpreted_kernels_get_numpys_answer(tiers, monkeypatch, given_outputs):
    monkeypatch.setattr(dynfuse.config, "tiers", tiers)  # with tiers, interpreted before compiled
    rng = np.random.default_rng(4)
    x, y = rng.random((2 * N, N)), np.zeros((2 * N, N))
    dx, dy = dnp.asarray(x.copy()), dnp.asarray(y.copy())
    for a, b in ((x, y), (dx, dy)):
        for _ in range(3):
            b[1:-1, 1:-1] = a[1:-1, 1:-1].astype(np.float32) * 3  # cast on assignment
            b[::2, :] = a[::2, :] - 1  # a strided region
            b[:, 5] = a.sum(axis=1)  # a short one: copied in
            b[1:-1, 2:-2] = (a[1:-1, 2:-2] * 0.5).T.T  # a view of the value: copied in
    assert_same(dy, y)
    if not tiers:
        assert given_outputs == [((N, N), (16 * N, 8))] * 3


def test_a_reduction_kept_per_row_is_written_into_the_region(given_outputs):
    rng = np.random.default_rng(5)
    x = rng.random((3, 1 << 17))
    out = np.zeros((4, 1 << 17))
    dx, dout = dnp.asarray(x), dnp.asarray(out.copy())
    for a, o in ((x, out), (dx, dout)):
        o[1:2, :] = (a * a).sum(axis=0, keepdims=True)
        o[3, :] = a.max(axis=0)  # per row, held in another shape than the region's: copied in
    assert_same(dout, out)
    assert given_outputs == [((1, 1 << 17), (8 << 17, 8))]


REGIONS = {
    "every other column": (lambda: np.zeros((600, 1400)), lambda base: base[:, ::2]),
    "transposed": (lambda: np.zeros((700, 600)), lambda base: base.T),
    "every other row, backwards": (lambda: np.zeros((1200, 700)), lambda base: base[::-2]),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("region", REGIONS)
def test_a_compiled_kernel_writes_the_strides_it_is_given_and_nothing_else(region, threads, monkeypatch):
    monkeypatch.setattr(dynfuse.config, "threads", threads)
    x = np.random.default_rng(6).random((600, 700))
    value = dnp.asarray(x) * 2.0 - 1.0
    backend = cpu.CpuBackend()
    nodes, plan = execute.explain_plan([value._node], backend)
    step = plan.kernels[0]
    kernel = step.kernel.storing_into(0)
    assert kernel.outputs[0].strided and kernel.signature != step.kernel.signature
    compiled = cache.compiled_kernel(backend, kernel)
    make, view = REGIONS[region]
    base, expected = make(), make()
    view(expected)[...] = x * 2.0 - 1.0
    params = [nodes[number].buffer for number in step.params]
    (written,) = launch.launch(kernel, compiled, [x], params, given=(0, view(base)))
    assert np.shares_memory(written, base)
    np.testing.assert_array_equal(base, expected)


def test_an_update_in_place_reads_each_element_where_it_writes_it(reading_in_place, given_outputs):
    rng = np.random.default_rng(7)
    e, h = rng.random((N, N)), rng.random((N, N))
    de, dh = dnp.asarray(e.copy()), dnp.asarray(h.copy())
    for a, b in ((e, h), (de, dh)):
        for _ in range(2):
            a[1:, :] -= 0.5 * (b[1:, :] - b[:-1, :])  # an FDTD update: the region, read in step
            b[:, :-1] += np.sqrt(a[:, :-1] * a[:, :-1])
            a[:, 1:-1] = a[:, 1:-1] * 2 + a[:, 1:-1]  # the region, read twice
            a[1:-1, :] = a[1:-1, :][::-1] + 1  # read backwards: computed, then copied
            a[:, 1:] = np.cumsum(a[:, 1:], axis=1)  # read along a row: computed, then copied
            b[...] = b * 0.5 + a.T  # the whole array
    assert_same(de, e)
    assert_same(dh, h)
    assert len(given_outputs) == 8


def test_values_read_from_the_region_keep_numpys_values_when_held(reading_in_place, given_outputs):
    rng = np.random.default_rng(8)
    a, b = rng.random((N, N)), rng.random((N, N))
    da, db = dnp.asarray(a.copy()), dnp.asarray(b.copy())
    results = []
    for x, y in ((a, b), (da, db)):
        doubled = x[1:, :] * 2  # held, and read by the value: the write is computed, then copied
        x[1:, :] = doubled + 1
        value = y[:-1, :] * 3  # the value itself, held: it stays what was written
        y[:-1, :] = value
        y[1:-1, :] = y[0:1, :] * 2 + x[1:-1, :]  # reads a row of the target beside the region
        x[...] = -1.0
        y[...] = -2.0
        results.append((doubled, value))
    (numpy_doubled, numpy_value), (lazy_doubled, lazy_value) = results
    assert_same(lazy_doubled, numpy_doubled)
    assert_same(lazy_value, numpy_value)
    assert_same(da, a)
    assert len(given_outputs) == 2


def test_random_programs_that_write_agree_with_numpy_when_every_write_may_be_in_place(
    monkeypatch, given_outputs
):
    """The fuzzer's programs (views, writes, in-place operators, reads of pending values) on small
    arrays, with every write that may be in place written so."""
    backend = registry.BACKENDS["cpu"]
    monkeypatch.setattr(backend, "target", dataclasses.replace(backend.target, in_place_elements=1))
    report = fuzz(examples=200, seed_value=20261127, backend="cpu")
    assert not report.failures, report.summary()
    assert given_outputs  # some were


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [1, 3])
def test_a_reduction_writes_its_rows_through_the_strides_it_is_given(rows, threads, monkeypatch):
    """Per-row outputs written through strides, by ENTRY and, where threads share long rows (one row
    on two threads), by PARTIAL and FINISH."""
    monkeypatch.setattr(dynfuse.config, "threads", threads)
    x = np.random.default_rng(9).random((rows, 600_000))
    value = (dnp.asarray(x) * 2.0).sum(axis=1, keepdims=True)
    backend = cpu.CpuBackend()
    nodes, plan = execute.explain_plan([value._node], backend)
    step = plan.kernels[0]
    (position,) = [n for n, out in enumerate(step.kernel.outputs) if out.row]
    kernel = step.kernel.storing_into(position)
    compiled = cache.compiled_kernel(backend, kernel)
    base = np.zeros((rows, 5))
    params = [nodes[number].buffer for number in step.params]
    launch.launch(kernel, compiled, [x], params, given=(position, base[:, 1:2]))
    expected = np.zeros((rows, 5))
    expected[:, 1:2] = (x * 2.0).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(base, expected, rtol=1e-12)
    assert not base[:, [0, 2, 3, 4]].any()


def test_a_value_a_pending_graph_reads_keeps_numpys_values_through_replays(reading_in_place, given_outputs):
    rng = np.random.default_rng(10)
    e = rng.random((N, N))
    de = dnp.asarray(e.copy())
    for x in (e, de):
        results = []
        for _ in range(3):  # replayed: the graph over the value keeps its structure
            doubled = x[1:, :] * 2
            later = doubled + 1  # recorded over the value before the write
            x[1:, :] = doubled
            x[1:, :] = x[1:, :] - 0.5  # in place: reads only the region
            results.append(later)
        if x is e:
            expected = results
    for got, want in zip(results, expected, strict=True):
        assert_same(got, want)
    assert_same(de, e)
    assert len(given_outputs) == 3  # the second write of each round


def test_an_operator_in_place_whose_operands_read_other_memory_writes_the_region(
    reading_in_place, given_outputs, monkeypatch
):
    """``view op= value`` where only the view reads the region: the kernel of ``op(view, value)``
    writes the region without the trace's analysis; what reads the region is computed first, from
    the values before; a value that reads the region elsewhere is analysed, computed, then copied.
    A cast into another dtype's memory gets NumPy's values either way."""
    analysed = []
    analyse = record._reading_in_step
    monkeypatch.setattr(record, "_reading_in_step", lambda *args: analysed.append(1) or analyse(*args))
    rng = np.random.default_rng(11)
    e, h = rng.random((N, N)), rng.random((N, N))
    single = rng.random((N, N)).astype(np.float32)
    de, dh, dsingle = dnp.asarray(e.copy()), dnp.asarray(h.copy()), dnp.asarray(single.copy())
    held = []
    for a, b, s in ((e, h, single), (de, dh, dsingle)):
        before = a[2:, :] * 1.0  # pending, reads the region: computed first
        a[1:, :] -= 0.5 * (b[1:, :] - b[:-1, :])
        s[:, 1:] += np.sqrt(b[:, 1:])  # float64 values cast into float32 memory
        a[1:, :] -= 0.25 * a[:-1, :]  # reads the row above each row: not in place
        held.append(before)
    assert_same(held[1], held[0])
    assert_same(de, e)
    assert_same(dsingle, single)
    assert given_outputs[0] == ((N - 1, N), (N * 8, 8))  # the first update's region, in place
    assert len(analysed) == 1  # the stencil's alone


def test_writing_a_view_back_into_its_own_place_computes_nothing():
    """Python writes an augmented assignment's result back (``a[1:] = a[1:].__iadd__(v)``); a view
    written into its own place changes nothing, so what reads the array stays pending."""
    a = dnp.asarray(np.arange(float(N * N)).reshape(N, N))
    reader = dnp.asarray(np.ones(N * N)).reshape(N, N) * 2.0 + a  # large: recorded, reads a
    view = a[1:, :]
    a[1:, :] = view
    assert reader._node.inputs
    expected = np.arange(float(N * N)).reshape(N, N)
    assert_same(reader, expected + 2.0)
    assert_same(a, expected)


def test_a_value_of_the_region_that_a_pending_graph_reads_is_copied_in(reading_in_place, given_outputs):
    """``np.copyto(view, y)`` of ``y = view + 1``, which ``z`` was recorded over before the write:
    written in place, ``y`` would stand for a copy of the region, and ``z``'s replay would compute
    ``y``'s old graph from the new values; it is computed, then copied, as NumPy's values are."""
    rng = np.random.default_rng(13)
    e = rng.random((N, N))
    de = dnp.asarray(e.copy())
    results = []
    for x, xp in ((e, np), (de, dnp)):
        for _ in range(2):  # the second time replayed
            view = x[1:, :]
            y = view + 1
            z = y * 2
            xp.copyto(view, y)
            results.append((y, z))
    for (want_y, want_z), (got_y, got_z) in zip(results[:2], results[2:], strict=True):
        assert_same(got_y, want_y)
        assert_same(got_z, want_z)
    assert_same(de, e)
