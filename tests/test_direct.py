"""Direct execution: small work on computed arrays is NumPy's own call, at once.

With the tiers on (as users run), an op whose operands are computed host arrays below the backend's
direct size runs NumPy now (unless its site records): results, dtypes, scalars, warnings and errors
are NumPy's exactly, nothing is recorded, and writes keep NumPy's aliasing. Pending operands and
large work are recorded as before; which path an op takes depends only on the program.
"""

import contextlib
import dataclasses
import functools
import itertools
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import accelerate, config, direct, pressure, record, registry, tiers
from dynfuse.testing.compare import fresh
from dynfuse.testing.programs import cases

from .helpers import assert_same


@pytest.fixture(autouse=True)
def direct_on(monkeypatch):
    """As a user runs: tiers and direct execution on, the CPU backend (direct below 65,536 elements),
    every site of the program counting its runs afresh."""
    monkeypatch.setattr(config, "tiers", True)
    monkeypatch.setattr(config, "direct", True)
    monkeypatch.setattr(registry, "backend", "cpu")
    tiers.forget_sites()


@pytest.fixture
def direct_below_region_writes(monkeypatch):
    """The CPU backend running at once only what it would interpret anyway (below its tiny size),
    so that computed arrays too large to run directly and too small for a kernel to write a
    region exist, as on a backend whose direct size is below its ``in_place_elements``."""
    target = registry.BACKENDS["cpu"].target
    monkeypatch.setattr(
        registry.BACKENDS["cpu"], "target", dataclasses.replace(target, direct_elements=target.tiny_elements)
    )
    # The C recorder keeps the limit while the settings are the same objects: a new name for the
    # same backend has it read again (and again when the old one comes back)
    monkeypatch.setattr(registry, "backend", "".join(["c", "pu"]))


def same(actual, expected):
    """NumPy's result exactly: kind (array or scalar), dtype, shape and every bit of the values."""
    assert isinstance(actual, dynfuse.LazyArray) == isinstance(expected, np.ndarray), (actual, expected)
    if isinstance(expected, np.generic):
        assert type(actual) is type(expected)
    got = np.asarray(actual)
    assert got.dtype == expected.dtype and got.shape == np.shape(expected)
    np.testing.assert_array_equal(bits(got), bits(np.asarray(expected)))


def bits(values: np.ndarray) -> np.ndarray:
    """The bytes of each element, so -0.0 and NaN payloads compare too."""
    return np.ascontiguousarray(values).view(np.uint8)


def test_small_work_on_computed_arrays_is_numpys_call_and_records_nothing(recorder):
    values = np.linspace(-2, 2, 12).reshape(3, 4)
    x = dnp.asarray(values.copy())
    before = dynfuse.stats()
    results = [x * 2 + 1, np.sin(x), x.sum(axis=0), x.T @ x, x[1:, ::2], x.astype(np.float32)]
    results.append(x.reshape(4, 3))
    expected = [
        values * 2 + 1,
        np.sin(values),
        values.sum(axis=0),
        values.T @ values,
        values[1:, ::2],
        values.astype(np.float32),
        values.reshape(4, 3),
    ]
    for got, want in zip(results, expected, strict=True):
        same(got, want)
    after = dynfuse.stats()
    assert after["ops_recorded"] == before["ops_recorded"]
    assert after["materializations"] == before["materializations"]
    assert after["direct_ops"] - before["direct_ops"] >= len(results)


def test_scalar_code_gets_numpys_scalars(recorder):
    """An element of a computed array is NumPy's scalar at any size; scalar math is NumPy's."""
    values = np.arange(200 * 200, dtype=np.float64).reshape(200, 200)  # above the tiny size
    a = dnp.asarray(values.copy())
    same(a[3, 4], values[3, 4])
    same(a[np.int64(3), -1], values[3, -1])
    same(dnp.sin(a[1, 1]) * a[2, 2], np.sin(values[1, 1]) * values[2, 2])
    small = dnp.asarray(np.arange(6, dtype=np.int32))
    same(small.sum(), np.arange(6, dtype=np.int32).sum())
    same(small[2] + small[3], np.int32(5))
    with pytest.raises(IndexError, match="out of bounds"):
        a[200, 0]


def test_writes_are_numpys_and_seen_through_views(recorder):
    values = np.zeros((4, 5))
    a = dnp.asarray(values.copy())
    row = a[1]
    a[1, 2] = 7.0
    a[2] = np.arange(5.0)
    row += 1
    a[3, 1:4] = a[2, :3]
    expected = values.copy()
    expected_row = expected[1]
    expected[1, 2] = 7.0
    expected[2] = np.arange(5.0)
    expected_row += 1
    expected[3, 1:4] = expected[2, :3]
    same(a, expected)
    same(row, expected_row)
    with pytest.raises(ValueError, match="read-only"):
        dnp.broadcast_to(a[0], (3, 5))[0, 0] = 1.0
    same(a, expected)


def test_a_write_computes_the_pending_readers_first(recorder):
    """A pending trace over a large array that reads a small one sees the values before a write."""
    big = dnp.asarray(np.ones((300, 300)))
    small = dnp.asarray(np.arange(300.0))
    pending = big * small  # 90,000 elements: recorded
    assert pending._node.inputs
    small[0] = 100.0  # the element write happens at once
    same(pending, np.ones((300, 300)) * np.arange(300.0))
    same(small[0], np.float64(100.0))


def test_in_place_operators_write_the_buffer(recorder):
    values = np.arange(10.0)
    a = dnp.asarray(values.copy())
    view = a[2:5]
    a *= 2
    view -= 1
    expected = values * 2
    expected[2:5] -= 1
    same(a, expected)
    with pytest.raises(TypeError, match="Cannot cast ufunc"):  # NumPy's UFuncTypeError
        b = dnp.asarray(np.arange(4))
        b /= 2  # NumPy refuses float64 into int64, and changes nothing
    same(b, np.arange(4))


def test_numpys_warnings_come_at_the_line(recorder):
    a = dnp.asarray(np.array([1.0, 0.0]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = 1.0 / a
    assert any("divide by zero" in str(warning.message) for warning in caught)
    same(result, np.array([1.0, np.inf]))


def test_pending_or_large_operands_are_recorded(recorder):
    large = dnp.asarray(np.ones(1 << 17))
    assert (large * 2)._node.inputs  # above the direct size
    small = dnp.asarray(np.ones(10))
    reduced = (large * 2).sum()  # pending, small
    assert (reduced + small)._node.inputs


def test_direct_execution_can_be_switched_off(recorder, monkeypatch):
    monkeypatch.setattr(config, "direct", False)
    a = dnp.asarray(np.arange(5.0))
    assert (a + 1)._node.inputs
    assert isinstance(a[2], dynfuse.LazyArray)


@settings(max_examples=120)
@given(case=cases(max_side=6))
def test_random_small_programs_give_numpys_results_bit_for_bit(case):
    """Small programs on computed inputs run NumPy's calls: the same outputs, bit for bit, or the
    same exception type."""
    program, arrays = case

    def inputs() -> list[np.ndarray]:  # each run its own inputs, laid out alike: programs write
        return [fresh(array) for array in arrays]

    with np.errstate(all="ignore"):
        try:
            expected = tuple(np.asarray(output) for output in program(np, *inputs()))
        except Exception as error:
            expected = type(error)
        try:
            lazy = [dnp.asarray(array) for array in inputs()]
            actual = tuple(np.asarray(output) for output in program(dnp, *lazy))
        except Exception as error:
            actual = type(error)
    if isinstance(expected, type) or isinstance(actual, type):
        assert actual is expected, program
        return
    for got, want in zip(actual, expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape, program
        np.testing.assert_array_equal(bits(got), bits(want), err_msg=str(program))


def test_gathers_and_masks_of_computed_arrays_are_numpys(recorder):
    values = np.arange(30.0).reshape(5, 6)
    a = dnp.asarray(values.copy())
    rows = dnp.asarray(np.array([4, 0, 4]))
    same(a[rows], values[[4, 0, 4]])
    same(a[a > 20], values[values > 20])
    same(a[1:, [0, 5]], values[1:, [0, 5]])
    with pytest.raises(IndexError, match="out of bounds"):
        a[dnp.asarray(np.array([5]))]


def test_a_large_gather_of_a_computed_array_is_recorded_for_its_consumer(recorder):
    """A gather of ``direct_elements`` or more is read by the kernel that consumes it, in place."""
    values = np.arange(900.0 * 3).reshape(900, 3)
    a = dnp.asarray(values.copy())
    first, second = np.triu_indices(900, k=1)
    pairs = [dnp.asarray(first), dnp.asarray(second)]
    differences = a[pairs[0]] - a[pairs[1]]
    assert differences._node.inputs  # pending: both gathers are in its kernel
    same(differences, values[first] - values[second])
    same(a[first[:10]], values[first[:10]])  # a small one is NumPy's indexing at once
    with pytest.raises(IndexError, match="index 900 is out of bounds for axis 0 with size 900"):
        a[dnp.asarray(np.append(first, 900))]


@pytest.mark.parametrize(
    ("index", "recorded"),
    [
        ((slice(None), np.arange(300)), True),
        ((Ellipsis, np.arange(10)), False),
        ((np.arange(300)[:, None], np.arange(300)), True),
        ((np.arange(300), 5), False),
        ((None, np.arange(300), slice(10, None, 2)), False),  # a new axis: NumPy's indexing
        ((np.arange(300), slice(10, None)), True),
        ((np.arange(300) % 2 == 0, slice(None)), False),  # a mask: NumPy's indexing at any size
        ((slice(None), np.array([[1, -1]] * 200)), True),
    ],
)
def test_a_gather_is_recorded_from_direct_elements_of_result(recorder, index, recorded):
    values = np.arange(300.0 * 300).reshape(300, 300)
    a = dnp.asarray(values.copy())
    got = a[index]
    assert bool(got._node.inputs) is recorded
    same(got, values[index])
    with pytest.raises(IndexError):
        a[np.arange(301), np.arange(301)]


def test_several_computed_index_arrays_read_and_write_as_numpys_indexing(recorder):
    """``p[rows, labels]``, read, written and updated in place (repeated pairs written once, the
    last value winning), by computed index arrays of several integer dtypes and Python ints."""
    values = np.arange(42.0).reshape(6, 7)
    a = dnp.asarray(values.copy())
    rows_values, labels_values = np.array([5, 0, 5, 2], np.int32), np.array([-1, 0, -1, 3], np.int16)
    rows, labels = dnp.asarray(rows_values), dnp.asarray(labels_values)
    gathered = a[rows, labels]
    assert not gathered._node.inputs  # small: NumPy's indexing at once
    same(gathered, values[rows_values, labels_values])
    same(a[rows[:, None], labels], values[rows_values[:, None], labels_values])
    same(a[2, labels], values[2, labels_values])
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 1 with size 7"):
        a[rows, dnp.asarray(np.array([7]))]
    with pytest.raises(IndexError, match="shape mismatch"):
        a[rows, np.arange(3)]
    pending = a + 1  # read before the writes: keeps the values from before them
    a[rows, labels] -= 1.0
    a[rows, dnp.asarray(np.array([2, 2, 4, 4]))] = dnp.asarray(np.array([10.0, 20.0, 30.0, 40.0]))
    expected = values.copy()
    expected[rows_values, labels_values] -= 1.0
    expected[rows_values, np.array([2, 2, 4, 4])] = np.array([10.0, 20.0, 30.0, 40.0])
    same(a, expected)
    same(pending, values + 1)


@pytest.mark.parametrize("shape", [(5, 6), (300, 300)])
def test_writes_through_masks_and_index_arrays_of_computed_arrays_are_numpys(recorder, shape):
    """At any size: NumPy writes through a mask or an index array in place either way."""
    values = np.arange(float(np.prod(shape))).reshape(shape)
    a = dnp.asarray(values.copy())
    pending = a * 2  # read before the writes: keeps the values from before them
    a[a > 20] = -1.0
    a[dnp.asarray(np.array([4, 0])), 1:3] = dnp.asarray(np.array([7.0, 8.0]))
    expected = values.copy()
    expected[expected > 20] = -1.0
    expected[np.array([4, 0]), 1:3] = np.array([7.0, 8.0])
    same(a, expected)
    same(pending, values * 2)
    with pytest.raises(IndexError, match="boolean index did not match"):
        a[dnp.asarray(np.ones(3, bool))] = 0.0
    same(a, expected)


def test_a_small_array_broadcast_to_a_large_shape_is_recorded(recorder):
    """The size that decides is the result's: a meshgrid of two small vectors stays lazy, so what
    reads it reads an index map, not a stride-0 buffer."""
    small = dnp.asarray(np.arange(2000.0))
    grid = dnp.broadcast_to(small, (50, 2000))
    assert grid._node.inputs
    same(grid + 1, np.broadcast_to(np.arange(2000.0), (50, 2000)) + 1)


def test_an_element_is_read_and_written_as_numpys_integer_indexing_does(recorder):
    """A full index of Python ints: NumPy's scalar, NumPy's casting and NumPy's errors."""
    values = np.arange(12, dtype=np.int64).reshape(3, 4)
    a = dnp.asarray(values.copy())
    same(a[1, 2], values[1, 2])
    same(a[-1, -4], values[-1, -4])
    same(a[2], values[2])  # not every axis: a view
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        a[3, 0]
    a[1, 2] = 7.9  # truncated, as NumPy casts a float into an int64 element
    a[0, -1] = np.float32(3.5)
    values[1, 2], values[0, -1] = 7.9, np.float32(3.5)
    same(a[...], values)
    small = dnp.zeros(3, dtype=np.uint8)
    with pytest.raises(OverflowError, match="out of bounds for uint8"):
        small[0] = -1
    same(small[...], np.zeros(3, dtype=np.uint8))  # nothing half-written
    flags = dnp.zeros(2, dtype=bool)
    flags[0] = 5
    same(flags[0], np.True_)


def _calls():
    """NumPy functions that ``dynfuse.numpy`` has (or falls through to), on small computed arrays."""
    x = np.linspace(-1, 2, 24).reshape(4, 6)
    y = np.cos(x)
    return (
        [
            ("concatenate", lambda np_, a, b: np_.concatenate([a, b], axis=1)),
            ("stack", lambda np_, a, b: np_.stack([a, b])),
            ("where", lambda np_, a, b: np_.where(a > 0.5, a, b)),
            ("clip", lambda np_, a, b: np_.clip(a, 0.0, 1.0)),
            ("cumsum", lambda np_, a, b: np_.cumsum(a, axis=1)),
            ("diff", lambda np_, a, b: np_.diff(a)),
            ("sort", lambda np_, a, b: np_.sort(b, axis=0)),
            ("norm", lambda np_, a, b: np_.linalg.norm(a)),
            ("outer", lambda np_, a, b: np_.outer(a[0], b[1])),
            ("split", lambda np_, a, b: tuple(np_.split(a, 2, axis=1))),
            ("zeros_like", lambda np_, a, b: np_.zeros_like(a, dtype=np.int32)),
            ("array", lambda np_, a, b: np_.array(a)),
        ],
        x,
        y,
    )


@pytest.mark.parametrize("name", [name for name, _ in _calls()[0]])
def test_numpy_functions_on_small_computed_arrays_are_numpys_calls(name, recorder):
    calls, x, y = _calls()
    function = dict(calls)[name]
    expected = function(np, x, y)
    a, b = dnp.asarray(x.copy()), dnp.asarray(y.copy())
    before = dynfuse.stats()
    got = function(dnp, a, b)
    if isinstance(expected, tuple):
        for part, want in zip(got, expected, strict=True):
            same(part, want)
    else:
        same(got, expected)
    after = dynfuse.stats()
    assert after["ops_recorded"] == before["ops_recorded"]
    assert after["direct_ops"] > before["direct_ops"]


@pytest.mark.parametrize(
    "call",
    [
        lambda np_, a: np_.searchsorted(np_.sort(a[0]), 0.5),
        lambda np_, a: np_.interp(0.25, np_.sort(a[1]), a[2]),
        lambda np_, a: np_.round(a, 2),
        lambda np_, a: np_.unique(np_.round(a, 1)),
        lambda np_, a: np_.count_nonzero(a > 0.5),
        lambda np_, a: np_.argsort(a, axis=1),
        lambda np_, a: np_.searchsorted(a[0], a[1]),  # unsorted: NumPy's answer all the same
    ],
)
def test_functions_dynfuse_does_not_record_run_at_once_on_small_computed_arrays(call, recorder):
    """A NumPy function that falls through to NumPy (``np.sort``, ``np.interp``...) is NumPy's call at
    once on small computed arrays, as any direct op: NumPy's result, and no fallback counted."""
    values = np.linspace(-1, 2, 24).reshape(4, 6) ** 2
    expected = call(np, values)
    before = dynfuse.stats()
    got = call(dnp, dnp.asarray(values.copy()))
    same(got, expected)
    after = dynfuse.stats()
    assert after["fallbacks"] == before["fallbacks"] and after["direct_ops"] > before["direct_ops"]


_VALUE_CALLS = {
    "x.item(3)": lambda x: x.item(3),
    "x.item(1, 2)": lambda x: x.item(1, 2),
    "x.item((2, 0))": lambda x: x.item((2, 0)),
    "x.item()": lambda x: x.item(),
    "x.item(99)": lambda x: x.item(99),
    "x.tolist()": lambda x: x.tolist(),
}


@pytest.mark.parametrize("name", sorted(_VALUE_CALLS))
def test_item_and_tolist_are_numpys(name, recorder):
    """Python values copied from the buffer, or NumPy's exception, for a computed or pending array."""
    call, values = _VALUE_CALLS[name], np.linspace(-1, 2, 12).reshape(3, 4)
    expected = _outcome(lambda: call(values))
    for lazy in (dnp.asarray(values.copy()), dnp.asarray(values.copy()) * 1.0):  # computed, pending
        got = _outcome(lambda lazy=lazy: call(lazy))
        assert got[1] == expected[1]
        assert got[0] == expected[0] and type(got[0]) is type(expected[0])


def test_a_function_giving_an_arguments_memory_gives_that_array_or_its_view(recorder):
    """``asarray`` of a lazy array is that array; ``ravel`` (NumPy's view) a view: a write through
    either is seen by the other, as in NumPy."""
    a = dnp.asarray(np.arange(6.0).reshape(2, 3))
    assert dnp.asarray(a) is a and dnp.atleast_1d(a) is a
    flat = dnp.ravel(a)
    assert flat.base is a
    flat[0] = -1.0
    assert a[0, 0] == -1.0
    a[1, 2] = 9.0
    assert flat[5] == 9.0
    wrapped = np.arange(4.0)
    ours = dnp.asarray(wrapped)  # an ndarray's own memory: shared, and written through
    ours[1] = 5.0
    assert wrapped[1] == 5.0


def test_numpy_calls_it_cannot_take_go_the_general_way(recorder):
    """A pending argument, a large result, a writing function and ``out=`` while a node is pending
    are not direct calls, and give NumPy's results all the same."""
    x = np.linspace(0, 1, 10)
    a = dnp.asarray(x.copy())
    before = dynfuse.stats()["ops_recorded"]
    pending = dnp.asarray(np.linspace(0, 1, 100000)) * 2  # large: recorded
    same(dnp.concatenate([a, pending[:5]]), np.concatenate([x, np.linspace(0, 1, 100000)[:5] * 2]))
    big = dnp.broadcast_to(a, (10000, 10))  # a large view: recorded
    assert dynfuse.stats()["ops_recorded"] >= before + 2
    same(big[...], np.broadcast_to(x, (10000, 10)).copy())
    target = dnp.zeros(10)
    dnp.copyto(target, a)
    same(target[...], x)
    out = dnp.zeros(10)
    dnp.clip(a, 0.2, 0.8, out=out)
    same(out[...], np.clip(x, 0.2, 0.8))


def test_a_large_result_of_numpy_arrays_alone_is_made_once(recorder, monkeypatch):
    """``zeros_like``, ``arange`` or ``full`` of a large size read no lazy array: NumPy's result is
    final, made once (not made, dropped and made again by the general path), counted as new memory
    toward the pending-memory check, and private to dynfuse; a view of an ndarray argument stays
    exposed (a write through it is seen by the ndarray)."""
    calls, noted = [], []
    monkeypatch.setattr(pressure, "note_new_memory", noted.append)

    def counted(*args, **kwargs):
        calls.append(args)
        return np.full(*args, **kwargs)

    made = direct.numpy_call(counted, ((300, 300), 2.5), {})
    assert len(calls) == 1 and noted == [300 * 300 * 8]
    assert type(made) is dynfuse.LazyArray and not made._node.exposed
    same(made[...], np.full((300, 300), 2.5))
    values = np.zeros(90000)
    view = direct.numpy_call(np.reshape, (values, (300, 300)), {})
    assert view._node.exposed and noted == [300 * 300 * 8, 0]
    view[1, 1] = 7.0
    assert values[301] == 7.0
    for created, expected in [
        (dnp.zeros_like(values), np.zeros_like(values)),
        (dnp.arange(100000.0), np.arange(100000.0)),
        (dnp.zeros_like(dnp.asarray(values) * 2, dtype=np.int32), np.zeros(90000, np.int32)),
    ]:
        same(created[...], expected)


def test_an_operator_on_a_view_of_a_pending_copy_runs_direct(recorder):
    """``q = q0.copy(); q[k] -= v`` computes the copy (the write needs its memory), then the small
    row's operator as on any array: NumPy's loop, not one plan of both. A whole-array operator on
    a copy nothing else sees stays pending, and fuses with it."""
    values = np.random.default_rng(3).random((80, 30, 30))
    q0 = dnp.asarray(values)
    for _ in range(3):  # the copy's replay, then its later runs
        before = dynfuse.stats()
        q = q0.copy()
        q[1] -= 1.0
        after = dynfuse.stats()
        assert after["materializations"] == before["materializations"] + 1  # the copy alone
        assert after["direct_ops"] == before["direct_ops"] + 1
        expected = values.copy()
        expected[1] -= 1.0
        same(q[...], expected)
    doubled = q0.copy()
    doubled *= 2.0
    assert doubled._node.inputs
    same(doubled[...], values * 2.0)


def test_a_numpy_call_into_out_is_direct_while_nothing_is_pending(recorder):
    """``np.clip(x, lo, hi, out=x)`` with nothing pending is NumPy's call into the buffer, returning
    ``out`` itself; while a node is pending, one that reads ``out`` keeps the values from before."""
    values = np.linspace(-2, 2, 12)
    x = dnp.asarray(values.copy())
    before = dynfuse.stats()
    returned = dnp.clip(x, -1.0, 1.0, out=x)
    after = dynfuse.stats()
    assert returned is x and after["ops_recorded"] == before["ops_recorded"]
    assert after["direct_ops"] == before["direct_ops"] + 1
    same(x[...], np.clip(values, -1.0, 1.0))
    reader = (dnp.asarray(np.ones(100000)) * 1.0)[:12] + x  # large work, so recorded: it reads x
    assert reader._node.inputs
    dnp.clip(x, -0.5, 0.5, out=x)
    same(reader[...], 1 + np.clip(values, -1.0, 1.0))
    same(x[...], np.clip(values, -0.5, 0.5))


def test_a_host_leaf_key_is_its_description_id_whatever_it_last_saw(recorder):
    """The C recorder keeps the keys of leaves it made; a view and a contiguous array of the same
    shape (a statement makes both) keep theirs apart, and both are the structure ids of their
    descriptions."""
    from dynfuse import trace

    grid = dnp.asarray(np.random.default_rng(0).random((50, 50)))
    for _ in range(3):
        view = grid[1:-1, :-2]
        total = view + grid[1:-1, 2:]
        for made in (view, total):
            buffer = made._node.buffer
            assert made._node.key == trace.structure_id(trace.buffer_key(buffer))
    assert view._node.key != total._node.key


def test_methods_run_in_c_and_switch_back_to_python():
    """The fast methods are C functions standing for the Python ones, and operators call them
    through LazyArray's slots; inside ``pure_python`` the Python methods run again."""
    if not accelerate.in_use():
        pytest.skip("the C recorder is not in use")
    method = dynfuse.LazyArray.__getitem__
    assert method.__name__ == "__getitem__" and callable(method.__wrapped__)
    x = dnp.asarray(np.arange(5.0))
    with accelerate.pure_python():
        assert dynfuse.LazyArray.__getitem__ is not method
        same(x[1:3] + x[2:4], np.arange(5.0)[1:3] + np.arange(5.0)[2:4])
    assert dynfuse.LazyArray.__getitem__ is method
    same(x[1:3] + x[2:4], np.arange(5.0)[1:3] + np.arange(5.0)[2:4])
    same(dnp.sin(0.5), np.sin(0.5))  # scalars alone: NumPy's scalar math
    assert dnp.sin.nin == 1 and dnp.sin.__name__ == "sin"


def test_operators_keep_pythons_protocol_for_a_subclass():
    """LazyArray's C slots leave a subclass's instances to Python's own lookup: its ``__add__``
    comes before LazyArray's ``__radd__``, as it would without the slots."""

    class Tagged(dynfuse.LazyArray):
        __slots__ = ()

        def __add__(self, other):
            return "tagged"

    x = dnp.asarray(np.arange(3.0))
    tagged = Tagged(x._node)
    assert tagged + x == "tagged" and tagged + 1.0 == "tagged"
    same((x + tagged)[...], np.arange(3.0) * 2)
    same((tagged - x)[...], np.zeros(3))
    assert len(tagged) == 3


def test_a_pending_write_into_an_array_with_a_numpy_view_is_seen_through_it(recorder):
    """A small view of a computed array is NumPy's view, which may not be registered with its base;
    a write of pending values into the base still writes its memory, so the view sees it."""
    values = np.arange(6.0)
    x = dnp.asarray(values.copy())
    view = x[1:4]
    large = dnp.asarray(np.ones((20000, 6)))
    x[...] = large.sum(axis=0)  # pending: a reduction of a large array
    same(view[...], np.full(3, 20000.0))
    same(x[...], np.full(6, 20000.0))
    alone = dnp.asarray(values.copy())
    alone[...] = large.sum(axis=0)  # nothing sees its memory: the write may stay lazy
    same(alone[...], np.full(6, 20000.0))


# NumPy functions as people call them, on small arrays: every one goes through direct execution (a
# dynfuse.numpy function at once, or a fall-through), and must give NumPy's result.
_MANY_CALLS = {
    "sort": lambda m, a, b, c: m.sort(a, axis=1),
    "argsort": lambda m, a, b, c: m.argsort(a),
    "unique": lambda m, a, b, c: m.unique(m.round(a, 1)),
    "flip": lambda m, a, b, c: m.flip(a, 0),
    "roll": lambda m, a, b, c: m.roll(a, 2),
    "tile": lambda m, a, b, c: m.tile(c, 2),
    "repeat": lambda m, a, b, c: m.repeat(c, 2),
    "ravel": lambda m, a, b, c: m.ravel(a),
    "squeeze": lambda m, a, b, c: m.squeeze(a[None]),
    "moveaxis": lambda m, a, b, c: m.moveaxis(a, 0, 1),
    "swapaxes": lambda m, a, b, c: m.swapaxes(a, 0, 1),
    "tril": lambda m, a, b, c: m.tril(a),
    "triu": lambda m, a, b, c: m.triu(a),
    "diag": lambda m, a, b, c: m.diag(c),
    "diagonal": lambda m, a, b, c: m.diagonal(a),
    "trace": lambda m, a, b, c: m.trace(a),
    "cross": lambda m, a, b, c: m.cross(a[:, :3], b[:, :3]),
    "kron": lambda m, a, b, c: m.kron(c, c),
    "inner": lambda m, a, b, c: m.inner(a, b),
    "tensordot": lambda m, a, b, c: m.tensordot(a, b.T, 1),
    "einsum": lambda m, a, b, c: m.einsum("ij,ij->i", a, b),
    "vstack": lambda m, a, b, c: m.vstack([a, b]),
    "hstack": lambda m, a, b, c: m.hstack([a, b]),
    "column_stack": lambda m, a, b, c: m.column_stack([c, c]),
    "split": lambda m, a, b, c: tuple(m.array_split(a, 3, axis=1)),
    "argwhere": lambda m, a, b, c: m.argwhere(a > 0.5),
    "nonzero": lambda m, a, b, c: m.nonzero(a > 0.5),
    "count_nonzero": lambda m, a, b, c: m.count_nonzero(a > 0.5),
    "searchsorted": lambda m, a, b, c: m.searchsorted(m.sort(c), 0.5),
    "interp": lambda m, a, b, c: m.interp(c, m.sort(c), c),
    "histogram": lambda m, a, b, c: m.histogram(a, bins=3),
    "bincount": lambda m, a, b, c: m.bincount(m.asarray([1, 2, 2])),
    "percentile": lambda m, a, b, c: m.percentile(a, 30),
    "median": lambda m, a, b, c: m.median(a, axis=0),
    "var": lambda m, a, b, c: m.var(a, axis=1, ddof=1),
    "std": lambda m, a, b, c: m.std(a),
    "average": lambda m, a, b, c: m.average(a, axis=0, weights=c[:4]),
    "ptp": lambda m, a, b, c: m.ptp(a, axis=1),
    "nanmean": lambda m, a, b, c: m.nanmean(a),
    "cumprod": lambda m, a, b, c: m.cumprod(a, axis=0),
    "gradient": lambda m, a, b, c: m.gradient(c),
    "convolve": lambda m, a, b, c: m.convolve(c, c[:3]),
    "polyval": lambda m, a, b, c: m.polyval(c, 0.3),
    "outer": lambda m, a, b, c: m.outer(c, c),
    "linalg.solve": lambda m, a, b, c: m.linalg.solve(a[:, :4] + 4 * m.eye(4), c[:4]),
    "linalg.inv": lambda m, a, b, c: m.linalg.inv(a[:, :4] + 4 * m.eye(4)),
    "linalg.det": lambda m, a, b, c: m.linalg.det(a[:, :4]),
    "linalg.eigh": lambda m, a, b, c: tuple(m.linalg.eigh(a[:, :4] @ a[:, :4].T)),
    "linalg.norm axis": lambda m, a, b, c: m.linalg.norm(a, axis=1),
    "linalg.qr": lambda m, a, b, c: tuple(m.linalg.qr(a)),
    "isclose": lambda m, a, b, c: m.isclose(a, b),
    "array_equal": lambda m, a, b, c: m.array_equal(a, a),
    "allclose": lambda m, a, b, c: m.allclose(a, b),
    "meshgrid": lambda m, a, b, c: tuple(m.meshgrid(c, c)),
    "broadcast_arrays": lambda m, a, b, c: tuple(m.broadcast_arrays(a, c)),
    "atleast_2d": lambda m, a, b, c: m.atleast_2d(c),
    "expand_dims": lambda m, a, b, c: m.expand_dims(c, 0),
    "take": lambda m, a, b, c: m.take(c, [0, 2]),
    "take_along_axis": lambda m, a, b, c: m.take_along_axis(a, m.argsort(a, axis=1), axis=1),
    "choose": lambda m, a, b, c: m.choose(m.asarray([0, 1, 0, 1, 1]), [c, c * 2]),
    "select": lambda m, a, b, c: m.select([c > 0.5], [c], 0.0),
    "piecewise": lambda m, a, b, c: m.piecewise(c, [c > 0.5], [1.0, 0.0]),
    "round": lambda m, a, b, c: m.round(a, 2),
    "floor": lambda m, a, b, c: m.floor(a * 10),
    "nan_to_num": lambda m, a, b, c: m.nan_to_num(a),
    "pad": lambda m, a, b, c: m.pad(a, 1),
    "resize": lambda m, a, b, c: m.resize(c, 7),
    "append": lambda m, a, b, c: m.append(c, 1.0),
    "insert": lambda m, a, b, c: m.insert(c, 1, 9.0),
    "delete": lambda m, a, b, c: m.delete(c, 1),
    "fliplr": lambda m, a, b, c: m.fliplr(a),
    "rot90": lambda m, a, b, c: m.rot90(a),
    "copy": lambda m, a, b, c: m.copy(a),
    "full_like": lambda m, a, b, c: m.full_like(a, 3),
    "empty_like shape": lambda m, a, b, c: m.empty_like(a).shape,
    "shape": lambda m, a, b, c: m.shape(a),
    "ndim": lambda m, a, b, c: m.ndim(a),
}


def _same_result(got, want) -> bool:
    if isinstance(want, Exception):
        return isinstance(got, type(want))
    if isinstance(want, tuple) and not hasattr(want, "dtype"):
        return len(got) == len(want) and all(map(_same_result, got, want))
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("name", sorted(_MANY_CALLS))
def test_many_numpy_functions_on_small_computed_arrays_give_numpys_results(name, recorder):
    call = _MANY_CALLS[name]
    rng = np.random.default_rng(7)
    x, y, v = rng.random((4, 5)), rng.random((4, 5)), rng.random(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = call(np, x, y, v)
        except Exception as error:  # dynfuse must raise what NumPy raises
            want = error
        try:
            got = call(dnp, dnp.asarray(x.copy()), dnp.asarray(y.copy()), dnp.asarray(v.copy()))
        except Exception as error:
            got = error
    assert _same_result(got, want), (got, want)


def statement(np, x):
    """Eight elementwise ops: a statement that pays for recording, replayed as one kernel."""
    return np.minimum(np.abs(np.maximum(x * 2 + 1, 0) * x - 0.5) / 3 + x, 4)


def runs_of(program, steps: int) -> list[str]:
    """How each run of ``program()`` (one site's statement, materialized) ran: "direct" (NumPy's
    calls), "replayed" (recorded, then a compiled replay) or "recorded" (recorded, then planned or
    interpreted)."""
    ways = []
    for _ in range(steps):
        before = dynfuse.stats()
        program()
        after = dynfuse.stats()
        if after["ops_recorded"] == before["ops_recorded"]:
            ways.append("direct")
        else:
            ways.append("replayed" if after["replays"] > before["replays"] else "recorded")
    return ways


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_a_statement_a_loop_runs_again_and_again_is_recorded_once_that_pays():
    """Run at once by NumPy until its site's trial; recorded from when its compiled replay pays
    (its kernel compiled from the runs counted, once they have cost what starting LLVM and the
    compile cost: some 8,000 runs), NumPy's results bit for bit all along."""
    values = np.random.default_rng(0).random(1000)
    x = dnp.asarray(values.copy())
    expected = statement(np, values)

    def program():
        same(statement(np, x), expected)

    ways = runs_of(program, 10_000)
    assert ways[: tiers.SITE_TRIAL_AT - 1] == ["direct"] * (tiers.SITE_TRIAL_AT - 1)
    assert ways[tiers.SITE_TRIAL_AT - 1] != "direct"  # the first trial
    assert ways[-500:] == ["replayed"] * 500
    # Before, trials of its nine sites, each after twice as many runs as its last
    settled = len(ways) - ways[::-1].index("direct")
    assert len(ways[:settled]) - ways[:settled].count("direct") < 100
    tiers.forget_sites()  # its kernel at hand, the site records from its first trial on
    at_hand = runs_of(program, 200)
    trial = tiers.SITE_TRIAL_AT - 1
    assert at_hand == ["direct"] * trial + ["replayed"] * (200 - trial)


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_a_statement_whose_recording_does_not_pay_runs_at_once():
    """One op, its value read at once: each trial is a materialization of one op, and the site
    runs at once again, its trials ever rarer."""
    values = np.arange(100.0)
    x = dnp.asarray(values.copy())

    def program():
        y = x * 3.0
        assert float(y[7]) == 21.0

    ways = runs_of(program, 2000)
    trials = [step for step, way in enumerate(ways) if way != "direct"]
    assert trials[0] == tiers.SITE_TRIAL_AT - 1
    assert len(trials) <= 6
    assert all(later - earlier >= 2 * tiers.SITE_TRIAL_AT for earlier, later in itertools.pairwise(trials))


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_a_statement_gathering_from_a_small_array_runs_at_once():
    """A chain that would pay for recording, then a gather: recording the gather (its indices
    checked at its line, in Python) costs more than the statement's NumPy calls, so the site's
    one trial finds it cannot pay and the site runs at once from then on."""
    values = np.random.default_rng(1).random((40, 40))
    x = dnp.asarray(values.copy())
    rows, columns = np.arange(40), np.arange(40)[::-1].copy()
    expected = float(((np.exp(values) * 2 + 1) / 3 - values)[rows, columns].sum())

    def program():
        y = ((np.exp(x) * 2 + 1) / 3 - x)[dnp.asarray(rows), dnp.asarray(columns)]
        assert float(y.sum()) == pytest.approx(expected, rel=1e-14)

    ways = runs_of(program, 2000)
    trials = [step for step, way in enumerate(ways) if way != "direct"]
    assert trials == [tiers.SITE_TRIAL_AT - 1]


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_a_short_statement_over_a_large_region_is_recorded_once_that_pays():
    """``ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])`` on 150x150 computed arrays, below the direct
    size: two recorded ops (the update writes the region as NumPy's operator), too few for
    recording to pay on small arrays, but each over 22,350 elements counts twice
    (``tiers.paying_ops``), so its site records once its replay is compiled (its trials' runs
    paying for the compile: some 4,000 runs). NumPy's values throughout."""
    rng = np.random.default_rng(5)
    ey, hz = rng.random((150, 150)), rng.random((150, 150))
    lazy_ey, lazy_hz = dnp.asarray(ey.copy()), dnp.asarray(hz.copy())

    def program():
        lazy_ey[1:, :] -= 0.5 * (lazy_hz[1:, :] - lazy_hz[:-1, :])
        dynfuse.evaluate(lazy_ey)

    ways = runs_of(program, 5000)
    for _ in range(5000):
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
    same(lazy_ey[...], ey)
    assert ways[: tiers.SITE_TRIAL_AT - 1] == ["direct"] * (tiers.SITE_TRIAL_AT - 1)
    assert ways[-500:] == ["replayed"] * 500


def carried_loop(runs: int) -> tuple[list[int], list[int]]:
    """``x = x + 0.1 * (x * x - 1)`` ``runs`` times, checked against NumPy: the ops recorded and the
    replays of each run."""
    values = np.linspace(-1, 1, 4000)
    x, expected = dnp.asarray(values.copy()), values.copy()
    recorded, replayed = [], []
    for _ in range(runs):
        before = dynfuse.stats()
        x = x + 0.1 * (x * x - 1)
        expected = expected + 0.1 * (expected * expected - 1)
        after = dynfuse.stats()
        recorded.append(after["ops_recorded"] - before["ops_recorded"])
        replayed.append(after["replays"] - before["replays"])
    np.testing.assert_allclose(np.asarray(x), expected, rtol=1e-12)
    return recorded, replayed


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_a_value_a_loop_carries_is_computed_as_the_loop_comes_back_and_each_run_replays():
    """Recorded at its sites' trial, ``x`` is pending as the loop comes back to them; computed
    there, each run is a trace of one structure, so the trace never grows past one run, and once
    its kernel is compiled (the trials' runs pay for it) each run is one replay launched in C, and
    the sites record from their trial on. NumPy's values throughout."""
    recorded, _ = carried_loop(3000)
    assert recorded.index(4) == tiers.SITE_TRIAL_AT - 1 and max(recorded) == 4
    tiers.forget_sites()  # its kernel at hand
    recorded, replayed = carried_loop(200)
    trial = tiers.SITE_TRIAL_AT - 1
    assert recorded == [0] * trial + [4] * (200 - trial)
    assert replayed == [0] * (trial + 1) + [1] * (199 - trial)  # each run, the last run's values
    sites = [site for site in tiers.sites() if site[0].co_name == "carried_loop"]
    assert len(sites) == 4 and all(state == "recording" for _, _, state, _, _ in sites)


def upwind_fluxes(xp, q0, w):
    """The flux through each level of a column model, upwind, level by level (``q`` a copy of
    ``q0``, as a time step starts)."""
    q = q0.copy()
    flux = xp.zeros_like(q)
    for k in range(1, q.shape[0]):
        flux[k] = xp.where(w[k] > 0, w[k] * q[k - 1], w[k] * q[k])
    return flux


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_the_sites_of_a_statement_that_count_apart_try_recording_together():
    """``q``'s copy is pending as each call starts (it is large), so at the first level the products
    record for it while the comparison runs at once and counts a run: the statement's four sites
    count their runs apart, one more each call. A site near its trial joins one that tries, so each
    trial records the whole statement (four ops, a float64 comparison counting as one), and once its
    kernel is compiled the sites record. NumPy's values throughout."""
    rng = np.random.default_rng(9)
    q0, w = rng.random((20, 60, 60)), rng.random((20, 60, 60)) - 0.5
    lazy_q0, lazy_w = dnp.asarray(q0), dnp.asarray(w)
    expected = upwind_fluxes(np, q0, w)
    for _ in range(600):  # until the trials' runs paid for its kernel, and a trial found it compiled
        same(upwind_fluxes(dnp, lazy_q0, lazy_w)[...], expected)
        sites = [site for site in tiers.sites() if site[0].co_name == "upwind_fluxes"]
        if sites and all(state == "recording" for _, _, state, _, _ in sites):
            break
    assert len(sites) == 4 and all(state == "recording" for _, _, state, _, _ in sites), sites
    same(upwind_fluxes(dnp, lazy_q0, lazy_w)[...], expected)


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_an_n_body_step_in_a_loop_replays_one_kernel_a_run():
    """A time loop over small arrays, each run several statements (pairwise differences, a power,
    row sums, the updates of four carried values) and ``**`` by NumPy's substitutes: every op's
    site records, each run is cut where the loop comes back, and is one kernel."""
    rng = np.random.default_rng(7)
    start = [rng.random(32), rng.random(32), np.zeros(32), np.zeros(32), rng.random(32) / 32]

    def run(xp, steps, ways=None):
        x, y, vx, vy, m = (xp.asarray(value.copy()) for value in start)
        for _ in range(steps):
            before = dynfuse.stats()
            dx, dy = x[:, None] - x[None, :], y[:, None] - y[None, :]
            inverse = (dx**2 + dy**2 + 0.01) ** -1.5
            vx = vx - 0.01 * (dx * inverse * m).sum(axis=1)
            vy = vy - 0.01 * (dy * inverse * m).sum(axis=1)
            x, y = x + 0.01 * vx, y + 0.01 * vy
            after = dynfuse.stats()
            if ways is not None:
                ways.append(tuple(after[name] - before[name] for name in ("replays", "kernels_launched")))
        return x, y

    for _ in range(8):  # until the trials' runs paid for its kernel, and a trial found it compiled
        run(dnp, 1000)
        if all(state == "recording" for _, _, state, _, _ in tiers.sites()):
            break
    tiers.forget_sites()
    ways: list[tuple[int, int]] = []
    before = dynfuse.stats()
    x, y = run(dnp, 100, ways)
    assert dynfuse.stats()["interpreted_ops"] == before["interpreted_ops"]
    assert ways[-50:] == [(1, 1)] * 50  # each run: one replay of one kernel, the last run's values
    for actual, wanted in zip((x, y), run(np, 100), strict=True):
        np.testing.assert_allclose(np.asarray(actual), wanted, rtol=1e-12)


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_a_loop_calling_a_helper_twice_a_run_replays_one_kernel_a_run():
    """Gray-Scott's step: a Laplacian by ``np.roll`` of each of two fields, a helper the loop calls
    twice a run. The helper's sites are told apart by where the loop calls it, so each counts the
    loop's runs and tries recording in the loop's run; the rolls ask their sites too, so each run,
    rolls read through index maps, is one kernel."""
    rng = np.random.default_rng(8)
    start = 1 - 0.5 * rng.random((24, 24)), 0.25 * rng.random((24, 24))

    def laplacian(xp, z):
        vertical = xp.roll(z, 1, axis=0) + xp.roll(z, -1, axis=0)
        return vertical + xp.roll(z, 1, axis=1) + xp.roll(z, -1, axis=1) - 4 * z

    def run(xp, steps, ways=None):
        u, v = (xp.asarray(value).copy() for value in start)
        for _ in range(steps):
            before = dynfuse.stats()
            uvv = u * v * v
            u += 0.16 * laplacian(xp, u) - uvv + 0.035 * (1 - u)
            v += 0.08 * laplacian(xp, v) + uvv - 0.1 * v
            after = dynfuse.stats()
            if ways is not None:
                counted = ("replays", "kernels_launched", "interpreted_ops")
                ways.append(tuple(after[name] - before[name] for name in counted))
        return u, v

    ways: list[tuple[int, int, int]] = []
    for _ in range(8):  # from one place: the loop's sites are told apart by where it is called from
        ways.clear()
        u, v = run(dnp, 500, ways)
        if ways[-50:] == [(1, 1, 0)] * 50:  # the trials' runs paid for its kernel, found compiled
            break
    assert ways[-50:] == [(1, 1, 0)] * 50  # each run: one replay of one kernel, the rolls fused in it
    for actual, wanted in zip((u, v), run(np, 500), strict=True):
        np.testing.assert_allclose(np.asarray(actual), wanted, rtol=1e-12)


# ---- NumPy's loop without NumPy's dispatch ---------------------------------------------------------

_SPECIAL = {
    "f": [-0.0, 0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, "max", "smallest_subnormal", 3.0, -7.0, 0.5],
    "i": [0, -1, 1, 7, -128, 127, 3, -3, 100, -100, 2, 5],
    "u": [0, 1, 7, 255, 3, 100, 2, 5, 254, 128, 9, 11],
    "b": [True, False, True, True, False, False, True, False, True, False, True, False],
    "c": [
        -0.0,
        0j,
        1.5 + 2j,
        -2.25 - 1j,
        np.inf,
        complex(0, -np.inf),
        np.nan,
        1e308 + 1e308j,
        0.5j,
        3.0,
        -7.0,
        0.5,
    ],
}
_BINARY = [
    "add",
    "subtract",
    "multiply",
    "true_divide",
    "floor_divide",
    "remainder",
    "power",
    "maximum",
    "fmin",
    "arctan2",
    "hypot",
    "less",
    "equal",
    "logical_and",
    "bitwise_and",
    "left_shift",
]
_UNARY = [
    "negative",
    "absolute",
    "sqrt",
    "exp",
    "log",
    "sin",
    "tanh",
    "floor",
    "isnan",
    "logical_not",
    "square",
    "reciprocal",
    "sign",
    "invert",
]


def _values(dtype: np.dtype, shift: int = 0) -> np.ndarray:
    """The kind's special values (a float dtype's largest and smallest by name), rolled by ``shift``."""
    values = [
        getattr(np.finfo(dtype), value) if isinstance(value, str) else value for value in _SPECIAL[dtype.kind]
    ]
    return np.roll(np.array(values, dtype), shift)


def _outcome(call):
    """What a call gives: its result or its exception's type, and the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = call()
        except Exception as error:
            result = type(error)
    return result, sorted((warning.category.__name__, str(warning.message)) for warning in caught)


def _same_outcome(actual, expected):
    assert actual[1] == expected[1]  # the same warnings, with NumPy's messages
    if isinstance(expected[0], type):
        assert actual[0] is expected[0]
    else:
        same(actual[0], expected[0])


def _operand_forms(dtype: np.dtype):
    """Operand pairs as programs make them, by a name: (NumPy's, a function making dynfuse's)."""
    first, second = _values(dtype), _values(dtype, 5)
    grid = first.reshape(3, 4)
    scalar = second[3]
    python = scalar.item()
    wide = np.concatenate([grid, grid[:, ::-1]], axis=1)  # (3, 8): a window of it is strided
    return {
        "arrays": ((first, second), lambda: (dnp.asarray(first.copy()), dnp.asarray(second.copy()))),
        "a 2-d window": (
            (wide[:, 1:5], grid),
            lambda: (dnp.asarray(wide.copy())[:, 1:5], dnp.asarray(grid.copy())),
        ),
        "every other column": (
            (wide[:, ::2], grid),
            lambda: (dnp.asarray(wide.copy())[:, ::2], dnp.asarray(grid.copy())),
        ),
        "transposed": (
            (grid.T, grid.T.copy()),
            lambda: (dnp.asarray(grid.copy()).T, dnp.asarray(grid.T.copy())),
        ),
        "2-d arrays": ((grid, grid.T.copy()), lambda: (dnp.asarray(grid.copy()), dnp.asarray(grid.T.copy()))),
        "strided view": (
            (first[::3], second[:4]),
            lambda: (dnp.asarray(first.copy())[::3], dnp.asarray(second.copy())[:4]),
        ),
        "python scalar": ((first, python), lambda: (dnp.asarray(first.copy()), python)),
        "numpy scalar first": ((scalar, first), lambda: (scalar, dnp.asarray(first.copy()))),
        "0-d array": (
            (np.array(scalar), first),
            lambda: (dnp.asarray(np.array(scalar)), dnp.asarray(first.copy())),
        ),
    }


@pytest.mark.parametrize("exponent", [2, -1, 0.5, 2.0, 3, -2, 0.25, np.float64(0.5), True, 2**70])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "complex128", "int64"])
def test_a_power_is_numpys_bit_for_bit_its_substitutes_included(dtype, exponent, recorder):
    """``x ** 2``, ``x ** -1`` and ``x ** 0.5`` of a float or complex array are NumPy's square,
    reciprocal and square root (its ``fast_scalar_power``), called by their loop here; any other
    exponent, dtype or operand is NumPy's power: NumPy's values, dtype and warnings each time."""
    for form, (numpy_operands, make_lazy) in _operand_forms(np.dtype(dtype)).items():
        expected = _outcome(lambda first=numpy_operands[0]: first**exponent)
        actual = _outcome(lambda make=make_lazy: make()[0] ** exponent)
        try:
            _same_outcome(actual, expected)
        except AssertionError as error:
            raise AssertionError(f"{form}: {error}") from None


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "int64", "uint8", "bool"])
@pytest.mark.parametrize("name", _BINARY + _UNARY)
def test_small_ufunc_calls_are_numpys_bit_for_bit_with_its_warnings_and_errors(name, dtype, recorder):
    """A small ufunc call on computed arrays (NumPy's loop called directly where the C recorder
    can) gives NumPy's result, dtype, warnings and exceptions, for every operand form."""
    ufunc, dtype = getattr(np, name), np.dtype(dtype)
    for form, (numpy_operands, make_lazy) in _operand_forms(dtype).items():
        expected = _outcome(functools.partial(ufunc, *numpy_operands[: ufunc.nin]))
        actual = _outcome(lambda make=make_lazy: ufunc(*make()[: ufunc.nin]))
        try:
            _same_outcome(actual, expected)
        except AssertionError as error:
            raise AssertionError(f"{name} on {form} of {dtype}: {error}") from None


def test_numpys_loop_runs_without_its_dispatch_where_it_can():
    """The common small calls take NumPy's loop directly (a product of two vectors NumPy's dot);
    what it must not take (a matrix product, a cast, broadcasting) goes through NumPy's call."""
    if not accelerate.in_use():
        pytest.skip("the C recorder is not in use")
    x, y = dnp.asarray(np.linspace(0, 1, 50)), dnp.asarray(np.linspace(1, 2, 50))
    grid = dnp.asarray(np.linspace(0, 1, 64).reshape(8, 8))
    counted = [
        lambda: x * 2.0,
        lambda: x - y,
        lambda: np.sin(x),
        lambda: np.float64(3) * x,
        lambda: x[::2] + y[:25],
        lambda: grid[1:4, 2:5] * grid[:3, :3],  # a window, walked a row at a time
        lambda: x @ y,
        lambda: grid[2, 1:6] @ grid[1:6, 3],
    ]
    for call in counted:
        before = dynfuse.stats()["direct_loops"]
        call()
        assert dynfuse.stats()["direct_loops"] == before + 1
    f32 = dnp.asarray(np.ones(50, np.float32))
    row = dnp.asarray(np.ones((3, 50)))
    not_counted = (
        lambda: grid @ grid,
        lambda: x @ x[:, None],
        lambda: f32 @ x,
        lambda: f32 * np.float64(2),
        lambda: row + x,
        lambda: x / 0.0,
        lambda: np.exp(grid[1:4, 2:5]),  # NumPy's loop over a strided walk may round otherwise
        lambda: grid.T * 2.0,  # NumPy's result is in the operand's order
    )
    for call in not_counted:
        before = dynfuse.stats()["direct_loops"]
        with np.errstate(all="ignore"):
            call()
        assert dynfuse.stats()["direct_loops"] == before


def test_one_element_broadcast_against_an_array_takes_numpys_loop_as_a_scalar_would():
    """``row + bias[i]`` with a bias of (n, 1): the one element is read at every element, as a 0-d
    array is, with NumPy's result, dtype and shape; written into an array it lies in, it is read
    before it is written (NumPy copies it first)."""
    if not accelerate.in_use():
        pytest.skip("the C recorder is not in use")
    values = np.linspace(-1, 1, 40)
    grid_values = values[:36].reshape(6, 6)
    calls = {
        "row + one": lambda m, x, g: x + m.asarray(np.array([0.5])),
        "one - row": lambda m, x, g: m.asarray(np.array([0.5])) - x,
        "grid * one of two axes": lambda m, x, g: g * m.asarray(np.full((1, 1), 3.0)),
        "window * one": lambda m, x, g: g[1:4, 2:5] * m.asarray(np.array([2.0])),
        "row + bias[i]": lambda m, x, g: x[:6] + g[:, :1][3],
        "float32": lambda m, x, g: m.asarray(np.arange(6, dtype=np.float32)) * m.asarray(np.ones(1, "f4")),
        "arctan2": lambda m, x, g: np.arctan2(m.asarray(np.array([0.25])), x),
    }
    for name, call in calls.items():
        before = dynfuse.stats()["direct_loops"]
        actual = call(dnp, dnp.asarray(values), dnp.asarray(grid_values))
        assert dynfuse.stats()["direct_loops"] == before + 1, name
        assert_same(actual, call(np, values, grid_values))
    for written in ("x += x[:1]", "x -= x[2:3]", "x *= x[-1:]"):
        expected, actual = values.copy(), dnp.asarray(values.copy())
        exec(written, {"x": expected})
        exec(written, {"x": actual})
        assert_same(actual, expected)


@pytest.mark.parametrize("setting", ["raise", "warn", "ignore", "call"])
def test_floating_point_errors_follow_numpys_error_state(setting, recorder):
    values = np.array([1.0, -2.0, 0.0, 4.0])
    seen = []

    def run(namespace):
        a = namespace.asarray(values.copy())
        with np.errstate(all=setting, call=seen.append if setting == "call" else None):
            outcome = _outcome(lambda: a / 0.0)
            in_place = _outcome(lambda: a.__itruediv__(0.0))
        return outcome, in_place, np.asarray(a).copy()

    expected = run(np)
    expected_calls, seen[:] = list(seen), []
    actual = run(dnp)
    for got, want in zip(actual[:2], expected[:2], strict=True):
        _same_outcome(got, want)
    np.testing.assert_array_equal(actual[2], expected[2])  # written as NumPy writes before raising
    assert seen == expected_calls


def test_python_scalars_numpy_checks_are_checked_as_numpy_does(recorder):
    small = np.array([1, 2, 250], np.uint8)
    singles = np.array([1.0, 2.0], np.float32)
    for numpy_operands, lazy in [
        ((small, 300), lambda: (dnp.asarray(small.copy()), 300)),
        ((small, -1), lambda: (dnp.asarray(small.copy()), -1)),
        ((singles, 1e300), lambda: (dnp.asarray(singles.copy()), 1e300)),
        ((singles, 1e-300), lambda: (dnp.asarray(singles.copy()), 1e-300)),
        ((singles, 2**40), lambda: (dnp.asarray(singles.copy()), 2**40)),
    ]:
        _same_outcome(
            _outcome(lambda lazy=lazy: np.multiply(*lazy())),
            _outcome(functools.partial(np.multiply, *numpy_operands)),
        )


def test_an_in_place_update_reading_what_it_writes_is_numpys(recorder):
    values = np.arange(12.0)
    for step in (
        lambda a: a[1:].__iadd__(a[:-1]),
        lambda a: a[:-1].__isub__(a[1:]),
        lambda a: a[::-1].__imul__(a),
        lambda a: a.__iadd__(a),
    ):
        expected, actual = values.copy(), dnp.asarray(values.copy())
        step(expected)
        step(actual)
        same(actual, expected)


def test_a_pending_value_written_by_an_operator_into_computed_memory_is_numpys_call(
    recorder, direct_below_region_writes
):
    """``ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])`` on arrays too large to run directly and too
    small for a kernel to write the region: the pending value is computed, then NumPy's operator
    writes the region itself, as NumPy does (no value of the whole update, no copy into the
    region). NumPy's answer bit for bit, its aliasing, its casting error, the lazy array itself
    returned."""
    rng = np.random.default_rng(3)
    ey, hz = rng.standard_normal((150, 150)), rng.standard_normal((150, 150))
    ey[7, 9], hz[3, 4] = -0.0, np.inf
    expected, expected_hz = ey.copy(), hz.copy()
    actual, actual_hz = dnp.asarray(ey).copy(), dnp.asarray(hz).copy()  # dynfuse's, not NumPy's, memory
    seen_before = actual[1:, :] * 1.0  # pending, made before the writes: keeps the values it read
    window = actual[2:, 1:]  # a view made before the writes sees them
    kept = expected[1:, :] * 1.0
    for _ in range(3):
        for a, h in ((expected, expected_hz), (actual, actual_hz)):
            region = a[1:, :]
            region -= 0.5 * (h[1:, :] - h[:-1, :])
            np.multiply(h[1:, :] + 1.0, 0.25, out=a[:-1, :])  # a ufunc's out= takes the same way
            a[:, 1:] += a[:, :-1] * 2.0  # the value reads the region it is written over
    before = dynfuse.stats()
    region = actual[1:, :]
    assert region.__isub__(0.5 * (actual_hz[1:, :] - actual_hz[:-1, :])) is region
    expected[1:, :] -= 0.5 * (expected_hz[1:, :] - expected_hz[:-1, :])
    done = {key: dynfuse.stats()[key] - before[key] for key in ("direct_ops", "writes_in_place")}
    assert done == {"direct_ops": 1, "writes_in_place": 0}
    same(actual, expected)
    same(window, expected[2:, 1:])
    same(seen_before, kept)
    integers = dnp.asarray(np.arange(150 * 150).reshape(150, 150)).copy()
    with pytest.raises(TypeError, match="Cannot cast ufunc 'subtract' output"):
        integers[1:, :] -= actual_hz[1:, :] * 0.5
    same(integers, np.arange(150 * 150).reshape(150, 150))


def steps_once_replayed(monkeypatch, python_path: str, step) -> tuple[list[int], list[tuple]]:
    """``step()`` (a loop body, run by dynfuse and by NumPy) run until its sites record and a step is
    one replay (the trials' runs paid for its kernel, and a trial found it compiled), then 20 steps
    more with ``record.<python_path>`` watched: the replays of each, and the calls of that path. A
    site is its place and its caller's: every step is called from one place here."""
    original = getattr(record, python_path)
    calls: list[tuple] = []
    ways = [0]
    for _ in range(41):
        watching = ways[-1] == 1
        if watching:
            monkeypatch.setattr(
                record, python_path, lambda *args, **kw: calls.append(args) or original(*args, **kw)
            )
        ways = []
        for _ in range(20 if watching else 500):
            before = dynfuse.stats()["replays"]
            step()
            ways.append(dynfuse.stats()["replays"] - before)
        if watching:
            break
    return ways, calls


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_a_statement_written_into_a_small_computed_grid_replays_and_is_written_in_c(monkeypatch):
    """``p[1:-1, 1:-1] = expression`` in a loop over small computed arrays: once its sites record,
    each step's value is its kept kernel's replay, copied into the region by NumPy's assignment, with
    no Python frame of ``record.setitem``; NumPy's values throughout, and a view taken before the
    writes sees them."""
    rng = np.random.default_rng(11)
    start, field = rng.random((60, 60)), rng.random((60, 60))
    grids = [(dnp.array(start), dnp.array(field)), (start.copy(), field)]
    row = grids[0][0][0]

    def step():
        for p, b in grids:  # a Jacobi-style update of the interior, then a boundary row copied
            p[1:-1, 1:-1] = (
                0.25 * (p[1:-1, 2:] + p[1:-1, :-2] + p[2:, 1:-1] + p[:-2, 1:-1]) - 0.1 * b[1:-1, 1:-1]
            )
            p[0, :] = p[-1, :]

    ways, calls = steps_once_replayed(monkeypatch, "setitem", step)
    assert ways == [1] * 20 and calls == []
    same(grids[0][0], grids[1][0])
    same(row, grids[1][0][0])


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_an_operator_through_a_view_of_a_small_computed_grid_by_a_statement_runs_in_c(monkeypatch):
    """``ey[1:, :] -= expression`` in a loop: once its sites record, each step's value is its kept
    kernel's replay, and NumPy's ufunc writes the region through the view, with no Python frame of
    ``record.elementwise``; NumPy's values throughout."""
    rng = np.random.default_rng(12)
    start, field = rng.random((60, 60)), rng.random((60, 60))
    fields = [(dnp.array(start), dnp.array(field)), (start.copy(), field.copy())]

    def step():
        for ey, hz in fields:  # an FDTD-style update by a statement of several ops
            ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :]) + 0.25 * (hz[1:, :] + hz[:-1, :])
            hz *= 0.999

    ways, calls = steps_once_replayed(monkeypatch, "elementwise", step)
    assert ways == [1] * 20 and calls == []
    same(fields[0][0], fields[1][0])
    same(fields[0][1], fields[1][1])


@pytest.mark.skipif(not accelerate.in_use(), reason="sites are the C recorder's")
def test_a_whole_arrays_operator_by_a_statement_rebinds_it_in_c(monkeypatch):
    """``x -= expression`` on a whole small array in a loop: once its sites record, the operator
    rebinds ``x`` to the recorded update (``record.can_rebind``) with no Python frame of
    ``record.elementwise``, and each step is one replay of the fused statement; NumPy's values
    throughout. Where something may observe ``x``'s memory (a view made before, the buffer handed
    to NumPy), the write is seen there, as NumPy's is."""
    rng = np.random.default_rng(13)
    start, gradient = rng.random((60, 60)), rng.random((60, 60))
    arrays = [(dnp.array(start), dnp.array(gradient)), (start.copy(), gradient.copy())]

    def step():
        for x, g in arrays:
            x -= 0.1 * g * (x - 0.5)

    ways, calls = steps_once_replayed(monkeypatch, "elementwise", step)
    assert ways == [1] * 20 and calls == []
    same(arrays[0][0], arrays[1][0])
    for observe in (lambda x: x[2:, :3], lambda x: np.asarray(x)):
        expected = start.copy()
        x = dnp.array(expected)
        seen, seen_expected = observe(x), observe(expected)
        for _ in range(3):
            x -= 0.1 * arrays[0][1] * (x - 0.5)
            expected -= 0.1 * gradient * (expected - 0.5)
        same(x, expected)
        np.testing.assert_array_equal(np.asarray(seen), seen_expected, strict=True)
    integers = dnp.array(np.arange(60 * 60).reshape(60, 60))
    with pytest.raises(TypeError, match="Cannot cast ufunc 'subtract' output"):
        integers -= arrays[0][1] * 0.5  # a pending float value into integers: NumPy's casting error
    same(integers, np.arange(60 * 60).reshape(60, 60))


@pytest.mark.parametrize("size", [50, 200_000])
def test_a_whole_arrays_operator_by_a_scalar_is_recorded_where_not_written_in_place(size, recorder):
    """``x op= scalar`` on a pending array, a large computed one, or a small one a pending value
    reads: ``x`` is rebound to the recorded update (no ufunc writes its memory), so a value made
    before keeps the old values; NumPy's values, dtypes and casting errors throughout."""
    values = np.linspace(-3.0, 3.0, size)
    for make in (lambda: dnp.asarray(values) * 2.0, lambda: dnp.array(values * 2.0)):
        x, expected = make(), values * 2.0
        before, expected_before = x + 0.0, expected + 0.0  # pending, reading x's memory
        x *= 3.0
        x -= 1
        x /= np.float64(4.0)
        expected *= 3.0
        expected -= 1
        expected /= np.float64(4.0)
        same(x, expected)
        same(before, expected_before)
    integers = dnp.asarray(np.arange(size)) * 2
    with pytest.raises(TypeError, match="Cannot cast ufunc 'multiply' output"):
        integers *= 0.5
    same(integers, np.arange(size) * 2)


def test_an_update_that_casts_a_small_read_array_runs_its_op_once(recorder):
    """``x op= y`` on a small computed array a pending value reads, where the result's dtype is
    not ``x``'s: NumPy's ufunc runs once, so a warning it raises comes once, and the cast as NumPy's."""
    x, expected = dnp.zeros(10, dtype=np.float32), np.zeros(10, dtype=np.float32)
    before = x * (dnp.asarray(np.ones(100_000, dtype=np.float32)) * 2)[:10]  # pending, reading x's memory
    assert before._node.inputs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x /= dnp.asarray(np.zeros(10))  # float64 into float32: NumPy's same-kind cast
    with np.errstate(invalid="ignore"):
        expected /= np.zeros(10)
    assert [str(warning.message) for warning in caught] == ["invalid value encountered in divide"]
    same(x, expected)
    same(before, np.zeros(10, dtype=np.float32))


_REDUCED_DTYPES = ["float64", "float32", "float16", "complex128", "int64", "int32", "int8", "uint64", "bool"]


@st.composite
def reduced_windows(draw):
    """A window of a small array as loops take one (a block, a strided or reversed slice, a
    transpose), of values that sum inexactly, with NaN, infinities and signed zeros now and then."""
    dtype = np.dtype(draw(st.sampled_from(_REDUCED_DTYPES)))
    shape = tuple(draw(st.lists(st.integers(1, 24), min_size=1, max_size=3)))
    values = np.random.default_rng(draw(st.integers(0, 2**16))).standard_normal(shape) * 50
    special = draw(st.sampled_from([None, np.nan, np.inf, -np.inf, -0.0, 1e300]))
    if special is not None:
        values.flat[draw(st.integers(0, values.size - 1))] = special
    with np.errstate(all="ignore"):
        base = values.astype(dtype)
    steps = st.sampled_from([1, 1, 2, -1])
    index = tuple(slice(draw(st.integers(0, extent - 1)), None, draw(steps)) for extent in shape)
    return base, index, draw(st.booleans())


@given(
    case=reduced_windows(),
    name=st.sampled_from(["sum", "prod", "max", "min", "mean", "var", "std"]),
    axis=st.sampled_from([None, 0, 1, -1, 2, -3]),
    keepdims=st.booleans(),
    by_position=st.booleans(),
    ddof=st.sampled_from([None, 0, 1, 3]),
)
@settings(max_examples=800, deadline=None)
def test_reductions_of_small_windows_are_numpys_bit_for_bit(case, name, axis, keepdims, by_position, ddof):
    """``window.sum()``, ``window.max(axis=0)``, ``window.mean(1)``, ``window.std(ddof=1)`` and the
    other reductions give NumPy's result exactly: its summation order (pairwise over the elements in
    its iterator's order), dtype, shape, warnings and errors (an axis out of range included)."""
    base, index, transposed = case
    expected_array, lazy = base[index], dnp.asarray(base.copy())[index]
    if transposed:
        expected_array, lazy = expected_array.T, lazy.T
    keywords = {} if axis is None and not keepdims else {"axis": axis, "keepdims": keepdims}
    positional = (keywords.pop("axis"),) if by_position and keywords else ()
    if ddof is not None and name in ("var", "std"):
        keywords["ddof"] = ddof
    _same_outcome(
        _outcome(lambda: getattr(lazy, name)(*positional, **keywords)),
        _outcome(lambda: getattr(expected_array, name)(*positional, **keywords)),
    )


@pytest.mark.parametrize("axis", [2**70, -(2**70), 5, True, (0,), 1.0, None])
def test_a_reduction_given_an_unusual_axis_is_numpys(axis, recorder):
    """An axis beyond a C long, a bool, a tuple, a float: NumPy's result or exception."""
    values = np.arange(12.0).reshape(3, 4)
    lazy = dnp.asarray(values.copy())
    for name in ("sum", "max", "mean"):
        expected = _outcome(lambda name=name: getattr(values, name)(axis=axis))
        _same_outcome(_outcome(lambda name=name: getattr(lazy, name)(axis=axis)), expected)


def test_a_small_window_is_reduced_by_numpys_loop_without_its_dispatch():
    """The sum, product, extremes and mean of a window of a small array of a dtype the reduction
    keeps, whole or along one of two axes, call NumPy's loop here; a reduction that casts or warns,
    or of more axes, goes through NumPy's call."""
    if not accelerate.in_use():
        pytest.skip("the C recorder is not in use")
    grid = dnp.asarray(np.linspace(-1, 1, 100).reshape(10, 10))
    counted = [
        lambda: grid[2:7, 3:8].sum(),
        lambda: grid[::2, 1::3].prod(),
        lambda: grid[4].max(),
        lambda: dnp.min(grid[1:, 1:]),
        lambda: grid[2:5, 2:5].astype(np.float32).mean(),
        lambda: grid[1:, 2:].sum(axis=0),
        lambda: grid[:, ::2].max(axis=1, keepdims=True),
        lambda: grid[None, 3:6].mean(axis=-1),
        lambda: dnp.sum(grid[2:], 1),  # the axis by position
        lambda: grid[2:7, 3:8].var(),
        lambda: grid[1].astype(np.float32).std(ddof=1),
    ]
    for call in counted:
        before = dynfuse.stats()["direct_loops"]
        call()
        assert dynfuse.stats()["direct_loops"] == before + 1
    huge, positive = dnp.asarray(np.full(4, 1e308)), grid > 0
    not_counted = (
        lambda: grid.T.sum(),  # NumPy walks it in memory order
        lambda: positive.sum(),  # a count: booleans summed as integers
        lambda: grid[None].sum(axis=0),  # over one element: NumPy's copy
        lambda: grid.reshape(2, 5, 10).sum(axis=1),  # three axes
        lambda: grid.var(axis=0),  # the moments along an axis: NumPy's
        lambda: grid[:1, :1].var(ddof=1),  # no degree of freedom: NumPy's warning
        lambda: grid.sum(ddof=0),  # not an argument of a sum: NumPy's TypeError
        lambda: huge.sum(),  # overflows: NumPy's warning
    )
    for call in not_counted:
        before = dynfuse.stats()["direct_loops"]
        with np.errstate(all="ignore"), warnings.catch_warnings(), contextlib.suppress(TypeError):
            warnings.simplefilter("ignore")
            call()
        assert dynfuse.stats()["direct_loops"] == before


# ---- basic indexing of computed arrays: NumPy's views, made without NumPy's parsing ------------


@st.composite
def laid_out_arrays(draw):
    """A small float64 or int32 array in any layout NumPy's slicing gives: steps, reversals,
    transposes, a read-only flag."""
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0, 5)) for _ in range(ndim))
    dtype = draw(st.sampled_from([np.float64, np.int32]))
    steps = tuple(draw(st.sampled_from([1, 2, -1])) for _ in range(ndim))
    spans = [extent * abs(step) for extent, step in zip(shape, steps, strict=True)]
    values = np.arange(np.prod(spans), dtype=dtype).reshape(spans)
    values = values[tuple(slice(None, None, step) for step in steps)]
    if draw(st.booleans()):
        values = values.transpose(draw(st.permutations(range(ndim))))
    if draw(st.booleans()):
        values = values.copy()
    values.flags.writeable = draw(st.booleans())
    return values


def basic_indices(ndim: int):
    whole = st.one_of(
        st.integers(-7, 7),
        st.integers(-7, 7).map(np.int64),
        st.integers(-7, 7).map(np.intp),
        st.builds(slice, *[st.none() | st.integers(-8, 8)] * 2, st.none() | st.integers(-3, 3)),
        st.just(None),
        st.just(Ellipsis),
    )
    return st.one_of(whole, st.lists(whole, max_size=ndim + 2).map(tuple))


def _result_or_raised(action):
    """What ``action`` gives, or the type and message of what it raises."""
    try:
        return action(), None
    except Exception as error:  # any error NumPy raises must be raised alike
        return None, (type(error), str(error))


@given(data=st.data())
@settings(max_examples=400, deadline=None)
def test_basic_indexing_gives_numpys_views_and_writes(data):
    values = data.draw(laid_out_arrays())
    index = data.draw(basic_indices(values.ndim))
    array = dnp.asarray(values)
    mirror = np.asarray(array)  # the array's buffer: dynfuse reads and writes this memory
    expected, raised = _result_or_raised(lambda: mirror[index])
    got, got_raised = _result_or_raised(lambda: array[index])
    assert got_raised == raised
    if raised is None:
        same(got, expected)
        if isinstance(expected, np.ndarray):  # a view: the same memory, layout and flags
            view = got._node.buffer
            assert view.strides == expected.strides and view.flags == expected.flags
            assert view.__array_interface__["data"] == expected.__array_interface__["data"]
            assert view.base is expected.base
    copy = mirror.copy()
    copy.flags.writeable = mirror.flags.writeable
    _, write_raised = _result_or_raised(lambda: copy.__setitem__(index, -3))
    _, got_write_raised = _result_or_raised(lambda: array.__setitem__(index, -3))
    assert got_write_raised == write_raised
    same(array[...], copy)


@given(
    length=st.integers(1, 40),
    dtype=st.sampled_from([np.float64, np.float32]),
    steps=st.tuples(st.sampled_from([1, 2, -1]), st.sampled_from([1, 3, -2])),
    special=st.sampled_from([None, np.inf, np.nan, 1e300]),
    product=st.sampled_from(["a @ b", "np.dot(a, b)", "a.dot(b)"]),
    data=st.data(),
)
@settings(max_examples=300, deadline=None)
def test_a_product_of_two_vectors_is_numpys_bit_for_bit_with_its_warnings(
    length, dtype, steps, special, product, data
):
    """A row times a column (``L[i, :i] @ x[:i]``, ``np.dot``, the ``dot`` method) calls the dot
    NumPy's matmul and dot call: NumPy's scalar, bit for bit, whatever the strides, and NumPy's
    warning where a flag is raised."""
    multiply = {
        "a @ b": lambda m, a, b: a @ b,
        "np.dot(a, b)": lambda m, a, b: m.dot(a, b),
        "a.dot(b)": lambda m, a, b: a.dot(b),
    }[product]
    seed = data.draw(st.integers(0, 2**16))
    values = [np.random.default_rng(seed + k).standard_normal(length * 3).astype(dtype) for k in range(2)]
    if special is not None:
        values[0][data.draw(st.integers(0, length - 1))] = special
    operands = [
        whole[:: abs(step)][:length][:: np.sign(step)] for whole, step in zip(values, steps, strict=True)
    ]
    lazy = [dnp.asarray(operand) for operand in operands]
    before = dynfuse.stats()["direct_loops"]
    actual, expected = _outcome(lambda: multiply(dnp, *lazy)), _outcome(lambda: multiply(np, *operands))
    same(actual[0], expected[0])
    assert actual[1] == expected[1]
    negative = min(steps) < 0  # np.dot copies such a vector before BLAS's dot, which then walks it otherwise
    if not expected[1] and accelerate.in_use() and not (negative and product != "a @ b"):
        assert dynfuse.stats()["direct_loops"] == before + 1  # NumPy's own loop, called directly


def test_a_write_is_numpys_at_once_while_what_is_pending_reads_other_memory(recorder):
    """A small write while large work is pending: NumPy's assignment at once where no pending node
    reads the written array; a pending node that reads it is computed first, with the values from
    before the write."""
    grid, other = np.zeros((30, 30)), np.zeros((30, 30))
    lazy_grid, lazy_other = dnp.asarray(grid.copy()), dnp.asarray(other.copy())
    big = dnp.asarray(np.ones(100000)) * 2.0  # large: recorded, pending
    reading = big[:900].reshape(30, 30) + lazy_grid  # pending, reads the grid
    lazy_other[0, :] = 5.0
    assert big._node.inputs and reading._node.inputs  # nothing computed for a write elsewhere
    lazy_grid[1, :] = 7.0
    assert not reading._node.inputs  # computed before the write
    other[0, :] = 5.0
    grid[1, :] = 7.0
    same(lazy_other[...], other)
    same(lazy_grid[...], grid)
    same(reading[...], np.full((30, 30), 2.0))


def test_a_write_into_a_large_array_computes_only_what_reads_the_memory_written(recorder):
    """A sweep writing rows of a large computed array, while a pending value reads the row before
    (``cp[i] = c[i] / (b[i] - a[i] * cp[i - 1])``): a write elsewhere leaves the value pending; a
    write into the row it reads computes it first, from the values before the write."""
    grid = np.arange(90000.0).reshape(300, 300)
    lazy = dnp.asarray(grid.copy())
    big = dnp.asarray(np.ones(100000)) * 2.0  # large: recorded, pending
    reading = lazy[3] + big[:300]  # pending, reads row 3 alone (a small row is NumPy's view)
    assert reading._node.inputs
    lazy[4] = np.full(300, 5.0)
    lazy[5, 7] = -1.0
    lazy[6:8, :3] = 8.0
    assert reading._node.inputs  # nothing read the memory written
    lazy[3, 299] = 0.5
    assert not reading._node.inputs
    expected = grid.copy()
    expected[4] = 5.0
    expected[5, 7] = -1.0
    expected[6:8, :3] = 8.0
    same(reading[...], grid[3] + 2.0)
    expected[3, 299] = 0.5
    same(lazy[...], expected)


def test_an_operator_through_a_view_of_a_large_array_by_a_pending_value_is_numpys(
    recorder, direct_below_region_writes, monkeypatch
):
    """``ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])`` on a grid below the size at which the value's
    kernel writes the region: the value replayed, then NumPy's ufunc writes the region; where the
    value's launch is kept, the C operator does it all, without record's Python path."""
    rng = np.random.default_rng(12)
    e, h = rng.random((200, 200)), rng.random((200, 200))
    de, dh = dnp.asarray(e.copy()), dnp.asarray(h.copy())
    monkeypatch.setattr(config, "tiers", False)  # the values' kernels compiled, their launches kept
    np.asarray(0.5 * (dh[1:, :] - dh[:-1, :]))
    np.asarray(0.25 * (de[1:, :] - de[:-1, :]))
    monkeypatch.setattr(config, "tiers", True)
    python_paths = []
    into = record._into_computed_region
    monkeypatch.setattr(record, "_into_computed_region", lambda *args: python_paths.append(1) or into(*args))
    for _ in range(3):
        for a, b in ((e, h), (de, dh)):
            a[1:, :] -= 0.5 * (b[1:, :] - b[:-1, :])
            b[:-1, :] += 0.25 * (a[1:, :] - a[:-1, :])
    same(de[...], e)
    same(dh[...], h)
    assert bool(python_paths) == (not accelerate.in_use())


def test_a_write_computes_first_what_another_thread_left_pending_reading_it(recorder):
    """The search for pending readers before a write covers every thread's recordings, an ended
    thread's too: its pending value keeps the values from before the write."""
    lazy_grid = dnp.asarray(np.zeros((30, 30)))
    recorded = []

    def record() -> None:
        big = dnp.asarray(np.ones(100000)) * 2.0  # large: recorded, pending
        recorded.append(big[:900].reshape(30, 30) + lazy_grid)

    thread = threading.Thread(target=record)
    thread.start()
    thread.join()
    assert recorded[0]._node.inputs
    lazy_grid[1, :] = 7.0
    assert not recorded[0]._node.inputs
    same(recorded[0][...], np.full((30, 30), 2.0))
    expected = np.zeros((30, 30))
    expected[1, :] = 7.0
    same(lazy_grid[...], expected)
