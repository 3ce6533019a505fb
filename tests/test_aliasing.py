"""NumPy's aliasing semantics: writes are seen through every alias and view, and only through them."""

import threading

import numpy as np
import pytest

import dynfuse

from .helpers import assert_same

dnp = dynfuse.numpy


def owned(values):
    """A lazy array that nothing else aliases: computed, never handed to NumPy."""
    return dynfuse.array(np.asarray(values)) * 1


def wrapped(values):
    """A lazy array sharing memory with a NumPy array."""
    return dynfuse.asarray(np.array(values))


MAKERS = [owned, wrapped, dynfuse.array]


@pytest.mark.parametrize("make", MAKERS)
def test_view_sees_in_place_update_of_its_base(make):
    x = make(np.arange(6.0))
    v = x[1:]
    w = x[::-2]
    x += 1
    assert_same(v, np.arange(6.0)[1:] + 1)
    assert_same(w, (np.arange(6.0) + 1)[::-2])
    assert v.base is x and w.base is x


@pytest.mark.parametrize("make", MAKERS)
def test_base_sees_in_place_update_of_a_view(make):
    x = make(np.arange(12.0).reshape(3, 4))
    v = x[1:, ::2]
    v *= 10
    expected = np.arange(12.0).reshape(3, 4)
    expected[1:, ::2] *= 10
    assert_same(x, expected)
    t = x.T
    t[0] = -1
    expected.T[0] = -1
    assert_same(x, expected)


@pytest.mark.parametrize("make", MAKERS)
def test_slice_and_mask_assignment_seen_through_views(make):
    x = make(np.arange(8))
    reversed_view = x[::-1]
    x[1:3] = 0
    mask = x > 4
    x[mask] = dynfuse.asarray(np.array([50, 60, 70]))
    expected = np.arange(8)
    expected[1:3] = 0
    expected[expected > 4] = [50, 60, 70]
    assert_same(x, expected)
    assert_same(reversed_view, expected[::-1])


@pytest.mark.parametrize("make", MAKERS)
def test_pending_results_keep_the_values_from_before_a_write(make):
    x = make(np.arange(5.0))
    doubled = x * 2
    total = x.sum()
    row = x[2]  # an int index gives a scalar copy in NumPy, not a view
    x[0] = 100
    x += 1
    assert_same(doubled, np.arange(5.0) * 2)
    assert_same(total, np.arange(5.0).sum())
    assert float(row) == 2.0
    assert_same(x, np.array([101.0, 2, 3, 4, 5]))


def test_results_recorded_in_other_threads_keep_the_values_from_before_a_write():
    """Each thread keeps its own list of pending nodes: a write must find them all."""
    base = np.arange(5.0)
    x = dynfuse.asarray(base)
    results = {}

    def record(name, scale):
        results[name] = x * scale

    threads = [threading.Thread(target=record, args=(f"times {scale}", scale)) for scale in (2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    x[0] = 100
    assert_same(results["times 2"], np.arange(5.0) * 2)
    assert_same(results["times 3"], np.arange(5.0) * 3)


def test_reshape_copy_or_view_follows_numpy():
    x = wrapped(np.arange(6.0).reshape(2, 3))
    copied = x.T.reshape(-1)  # not contiguous: NumPy copies
    viewed = x.reshape(-1)  # contiguous: NumPy gives a view
    x += 1
    base = np.arange(6.0).reshape(2, 3)
    assert_same(copied, base.T.reshape(-1))
    assert_same(viewed, (base + 1).reshape(-1))


def test_ufunc_out_writes_through_view():
    x = owned(np.zeros((2, 3)))
    row = x[1]
    np.add(dynfuse.asarray(np.ones(3)), 5, out=row)
    dnp.multiply(row, 2, out=row)
    assert_same(x, np.array([[0.0, 0, 0], [12, 12, 12]]))
    assert np.add(x, 1, out=x) is x


def test_numpy_asarray_of_a_lazy_array_shares_memory():
    x = owned(np.arange(4.0))
    exported = np.asarray(x)
    x += 1
    np.testing.assert_array_equal(exported, np.arange(4.0) + 1)
    exported[0] = -5
    assert float(x[0]) == -5


def test_asarray_wraps_without_copy_and_array_copies():
    source = np.arange(4.0)
    shared = dynfuse.asarray(source)
    copied = dynfuse.array(source)
    pending = shared * 2
    source[0] = 10  # written before `pending` is materialized: it reads the new value
    assert_same(pending, np.array([20.0, 2, 4, 6]))
    assert_same(copied, np.arange(4.0))
    done = dynfuse.evaluate(shared + 0)
    source[1] = 99  # written after: materialized results keep their values
    assert_same(done, np.array([10.0, 1, 2, 3]))
    shared += 1  # an in-place update of a wrapped array writes into the NumPy array
    np.testing.assert_array_equal(source, [11.0, 100, 3, 4])


def test_broadcast_view_is_read_only():
    x = owned(np.arange(3.0))
    b = dnp.broadcast_to(x, (2, 3))
    with pytest.raises(ValueError, match="read-only"):
        b += 1
    with pytest.raises(ValueError, match="read-only"):
        b[0, 0] = 1
    assert_same(x, np.arange(3.0))


def test_overlapping_assignment_matches_numpy():
    x = owned(np.arange(6))
    x[1:] = x[:-1]
    expected = np.arange(6)
    expected[1:] = expected[:-1]
    assert_same(x, expected)
    y = owned(np.arange(6.0))
    y += y[::-1]
    assert_same(y, np.arange(6.0) + np.arange(6.0)[::-1])


def test_iterating_rows_gives_views():
    x = owned(np.zeros((3, 2)))
    for row in x:
        row += 1
    assert_same(x, np.ones((3, 2)))


def test_fallback_result_aliases_like_numpy():
    x = owned(np.arange(4.0))
    real = np.real(x)  # NumPy returns the array itself for real input
    real += 1
    assert_same(x, np.arange(4.0) + 1)


def test_scalar_index_is_a_copy_but_ellipsis_is_a_view():
    x = owned(np.arange(3.0))
    copy = x[1]
    view = x[1, ...]
    x[1] = 7
    assert float(copy) == 1.0
    assert float(view) == 7.0


def test_matmul_in_place():
    a = owned(np.arange(4.0).reshape(2, 2))
    b = owned(np.eye(2) * 2)
    view = a[0]
    a @= b
    assert_same(a, np.arange(4.0).reshape(2, 2) @ (np.eye(2) * 2))
    assert_same(view, np.array([0.0, 2.0]))


# A scalar is immutable: ``t += 1`` rebinds ``t``, at any size and whatever computed it.
SCALAR_SOURCES = {
    "a reduction": lambda x: x.sum(),
    "an element": lambda x: x[3],
    "an element of an element": lambda x: x[3][()],
    "a ufunc of a scalar": lambda x: dnp.sqrt(x.max()),
    "a cast scalar": lambda x: x.min().astype(np.float32),
    "a dot product": lambda x: x.dot(x),
}


@pytest.mark.parametrize("size", [8, 1 << 16])
@pytest.mark.parametrize("source", sorted(SCALAR_SOURCES))
def test_in_place_operators_rebind_a_scalar(source, size, recorder):
    values = np.arange(size, dtype=np.float64)
    x = owned(values)
    scalar = SCALAR_SOURCES[source](x)
    expected = SCALAR_SOURCES[source](values)
    assert isinstance(expected, np.generic)
    alias = scalar
    scalar += 1
    scalar *= 2
    assert float(alias) == float(expected)
    assert float(scalar) == float((expected + 1) * 2)
    assert_same(x, values)


@pytest.mark.parametrize("make", [wrapped, dynfuse.array])
def test_in_place_operators_write_a_0d_array(make):
    """A 0-d array, unlike a scalar, is written in place, as are its views."""
    x = make(np.array(2.0))
    alias = x
    view = x[...]
    x += 1
    view *= 2
    assert float(alias) == 6.0
    assert alias is x


@pytest.mark.parametrize("size", [8, 1 << 16])
def test_power_of_a_scalar_is_the_ufunc_and_of_a_0d_array_the_operator(size, recorder):
    """NumPy's ``a ** 2`` on an array is ``square`` (int8 for bools); on a scalar it is ``power``
    (the default int for bools)."""
    values = np.ones(size, dtype=bool)
    x = ~dynfuse.array(~values)
    assert_same(x.all() ** 2, np.asarray(values.all() ** 2))
    assert_same(x[1] ** 2, np.asarray(values[1] ** 2))
    assert_same(x[1, ...] ** 2, values[1, ...] ** 2)
    assert_same(dnp.transpose(x.any(), ()) ** 2, np.asarray(np.transpose(values.any(), ()) ** 2))
    # np.where gives a 0-d array, not a scalar, even of scalars
    assert_same(dnp.where(x.all(), x[0], x[1]) ** 2, np.where(values.all(), values[0], values[1]) ** 2)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_write_computes_what_reads_the_old_values_whole_not_reader_by_reader(backend, monkeypatch):
    """The pending sums over a grid's shifted views, before a write into the grid: one computation
    of what the program holds (the sums fused, each reader inline), keeping the old values."""
    monkeypatch.setattr(dynfuse.registry, "backend", backend)
    values = np.arange(40.0).reshape(5, 8)
    grid = dynfuse.array(values)
    total = (grid[:-2] + grid[1:-1] + grid[2:]) * 2
    middle = grid[1:-1] == 9.0  # held by the program too: computed before the write as well
    before = dynfuse.stats()["materializations"]
    grid[...] = 0.0
    assert dynfuse.stats()["materializations"] - before == 1
    assert_same(total, (values[:-2] + values[1:-1] + values[2:]) * 2)
    assert_same(middle, values[1:-1] == 9.0)
    assert_same(grid, np.zeros((5, 8)))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_a_scalars_half_power_is_cs_pow_and_an_arrays_is_sqrt(dtype, recorder):
    """NumPy's scalar ``s ** 0.5`` is pow (0.0 at -0.0, inf at -inf); an array's is sqrt."""
    values = np.array([-np.inf, -0.0, 2.0, -1.0, np.nan], dtype)
    x = dynfuse.array(values)
    with np.errstate(invalid="ignore"):
        for reduce in (np.min, np.max):
            assert_same(reduce(x) ** 0.5, np.asarray(reduce(values) ** 0.5))
        for position in range(len(values)):
            assert_same(x[position] ** 0.5, np.asarray(values[position] ** 0.5))
        assert_same(x**0.5, values**0.5)
        assert_same(x[1:2].reshape(()) ** 0.5, values[1:2].reshape(()) ** 0.5)  # a 0-d array


@pytest.mark.parametrize("shape", [(3, 4), -1, (2, -1), (5,), (2, 2, 3)])
@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.arange(12.0),
        lambda m: m.arange(12.0) * 2,
        lambda m: m.arange(24.0)[::2],
        lambda m: m.arange(12.0).reshape(3, 4).T,
    ],
    ids=["computed", "pending", "strided view", "transposed"],
)
def test_setting_shape_reshapes_in_place_as_numpy_does(make, shape, recorder):
    """``a.shape = s`` makes ``a`` a view of its memory in ``s``: writes through it reach its base
    and its earlier views; where that needs a copy, NumPy's error, and the array is unchanged."""

    def run(namespace):
        a = make(namespace)
        earlier = a[2:5] if a.ndim == 1 else a[1]
        try:
            a.shape = shape
        except (AttributeError, ValueError) as error:
            return type(error), np.asarray(a).shape
        a.reshape(-1)[3] = -1.0
        return a.shape, np.asarray(a).tolist(), np.asarray(earlier).tolist()

    assert run(dnp) == run(np)


def test_a_scalars_shape_cannot_be_set_as_numpys():
    element = dnp.asarray(np.arange(3.0)).sum()
    with pytest.raises(AttributeError, match="not writable"):
        element.shape = (1,)
