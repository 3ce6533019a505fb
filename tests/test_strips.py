"""Strips: an interpreted step of NumPy ufuncs run a block at a time by NumPy's own loops
(``interpret.Recipe``'s ``strips``, ``_recorder.run_strips``), against NumPy's op-by-op calls: the
same values bit for bit, the same dtypes and layouts, the same warnings and errors."""

import threading
import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import dynfuse
from dynfuse import config, interpret, registry
from dynfuse.trace import topological_order

pytestmark = pytest.mark.skipif(interpret.run_strips is None, reason="the C recorder is not built")


def strip_runs() -> int:
    return dynfuse.stats()["strip_runs"]


def computed(outputs, strips):
    """The values of lazy ``outputs`` by the reference executor's recipe, with or without strips,
    and the warnings it gave."""
    nodes = [output._node for output in outputs]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = interpret.run(topological_order(nodes), nodes, strips=strips)
    return [np.asarray(values[node]) for node in nodes], sorted(str(warning.message) for warning in caught)


def assert_identical(actual, expected):
    """Same dtype, shape, strides and values: NaNs where NumPy's are (their sign bits are the
    loop's accident, as NumPy's own differ between its vector and scalar paths), every other
    value to the bit, zeros of NumPy's signs."""
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.strides == expected.strides
    np.testing.assert_array_equal(actual, expected)
    if expected.dtype.kind == "f":
        numbers = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(actual[numbers]), np.signbit(expected[numbers]))


def stencil(np, a):
    return 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1] + a[:-2, 1:-1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.uint8])
@pytest.mark.parametrize("shape", [(7,), (3000,), (40, 50), (5, 2100), (6, 7, 8)])
def test_a_chain_runs_in_strips_as_numpy_computes_it(dtype, shape):
    rng = np.random.default_rng(1)
    x = (rng.random(shape) * 50).astype(dtype)
    y = (rng.random(shape) * 50 + 1).astype(dtype)
    divide = np.floor_divide if dtype != np.float64 else np.divide
    expected = divide((x + y) * x - y, 3)
    lazy_x, lazy_y = dynfuse.asarray(x), dynfuse.asarray(y)
    lazy = divide((lazy_x + lazy_y) * lazy_x - lazy_y, 3)
    before = strip_runs()
    (value,), _ = computed([lazy], strips=True)
    assert strip_runs() == before + 1
    assert_identical(value, expected)


def test_views_broadcasts_and_scalars_are_read_where_numpy_reads_them():
    rng = np.random.default_rng(2)
    base = rng.random((30, 1200))
    row, column = rng.random(1198), rng.random((28, 1))
    lazy_base = dynfuse.asarray(base)
    outputs = [
        stencil(dynfuse.numpy, lazy_base) * row - column,
        (lazy_base[::-1, ::2] + np.float64(0.5)) * 3 - lazy_base[:, :600] / 7,
        lazy_base[5] * lazy_base[:, None, 7] + np.array(1.5) - 2,
    ]
    expected = [
        stencil(np, base) * row - column,
        (base[::-1, ::2] + np.float64(0.5)) * 3 - base[:, :600] / 7,
        base[5] * base[:, None, 7] + np.array(1.5) - 2,
    ]
    before = strip_runs()
    for output, wanted in zip(outputs, expected, strict=True):
        (value,), _ = computed([output], strips=True)
        assert_identical(value, wanted)
    assert strip_runs() == before + 3


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.bool_])
def test_a_select_copies_what_numpy_s_where_copies(dtype):
    """``where`` of two values, an array and a Python number, or a NumPy scalar of another dtype
    (which NumPy casts): in strips where NumPy casts nothing (a bool compared with an int is
    compared as ints)."""
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((20, 1100)) * 8).astype(dtype)
    lazy = dynfuse.asarray(x)
    numbers = dtype is not np.bool_
    choices = [
        (lambda m, a: m.where(a > 0, a, a * a), numbers),
        (lambda m, a: m.where(a == 0, 1, a), numbers),
        (lambda m, a: m.where(a != 1, a, np.float64(2.5)), dtype is np.float64),
    ]
    for choose, in_strips in choices:
        before = strip_runs()
        (value,), _ = computed([choose(dynfuse.numpy, lazy)], strips=True)
        assert_identical(value, choose(np, x))
        assert strip_runs() == before + in_strips


def test_several_outputs_and_intermediates_they_share():
    x = np.random.default_rng(3).random((50, 60))
    lazy = dynfuse.asarray(x)
    shared = lazy * 2 - 1
    first, second = shared * shared + lazy, (shared > 0) & (lazy < 0.5)
    before = strip_runs()
    (one, two, kept), _ = computed([first, second, shared], strips=True)
    assert strip_runs() == before + 1
    shared_values = x * 2 - 1
    assert_identical(one, shared_values * shared_values + x)
    assert_identical(two, (shared_values > 0) & (x < 0.5))
    assert_identical(kept, shared_values)


def test_what_numpy_would_cast_or_lay_out_otherwise_runs_op_by_op():
    """A float32 array with a float64 one (NumPy casts), a float beyond float32's range (NumPy
    converts it with a check), a transposed operand (NumPy's result follows its layout): NumPy's
    calls, NumPy's answers and warnings."""
    rng = np.random.default_rng(4)
    x32, x64 = rng.random((40, 40), dtype=np.float32), rng.random((40, 40))
    before = strip_runs()
    (value,), _ = computed([(dynfuse.asarray(x32) + 1) * dynfuse.asarray(x64)], strips=True)
    assert_identical(value, (x32 + 1) * x64)
    (value,), _ = computed([(dynfuse.asarray(x64).T + 1) * 2], strips=True)
    assert_identical(value, (x64.T + 1) * 2)
    lazy = (dynfuse.asarray(x32) + 1) * 1e300
    (value,), messages = computed([lazy], strips=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = (x32 + 1) * 1e300
    assert_identical(value, expected)
    assert messages == sorted(str(warning.message) for warning in caught)
    assert strip_runs() == before


@pytest.mark.parametrize("mode", ["warn", "raise", "ignore"])
def test_floating_point_errors_are_numpys(mode):
    x = np.array([[1.0, 0.0, -1.0] * 400] * 3)
    y = np.array([[0.0, 0.0, 2.0] * 400] * 3)
    big = np.full(x.shape, 1e308)
    with np.errstate(all=mode):
        lazy = (dynfuse.asarray(x) / dynfuse.asarray(y)) * 2 + dynfuse.asarray(big) * 10
    if mode == "raise":
        with pytest.raises(FloatingPointError, match="divide by zero encountered in divide"):
            computed([lazy], strips=True)
        return
    (value,), messages = computed([lazy], strips=True)
    with warnings.catch_warnings(record=True) as caught, np.errstate(all=mode):
        warnings.simplefilter("always")
        expected = (x / y) * 2 + big * 10
    assert_identical(value, expected)
    assert messages == sorted(str(warning.message) for warning in caught)
    assert messages or mode == "ignore"


def test_a_write_s_value_is_computed_into_its_region(monkeypatch):
    """With the tiers on, a Jacobi sweep's statements on 400² grids run interpreted in strips,
    their values written straight into the other grid's interior."""
    monkeypatch.setattr(config, "tiers", True)
    grid = np.random.default_rng(5).random((400, 400))
    a, b = grid.copy(), grid.copy()
    lazy_a, lazy_b = dynfuse.asarray(grid.copy()), dynfuse.asarray(grid.copy())
    before = strip_runs()
    for _ in range(3):
        lazy_b[1:-1, 1:-1] = stencil(dynfuse.numpy, lazy_a)
        b[1:-1, 1:-1] = stencil(np, a)
        lazy_a, lazy_b, a, b = lazy_b, lazy_a, b, a
    np.testing.assert_array_equal(np.asarray(lazy_a), a)
    np.testing.assert_array_equal(np.asarray(lazy_b), b)
    assert strip_runs() > before


def test_the_reference_executor_and_a_tiny_first_sight_run_op_by_op(monkeypatch):
    """The oracle stays NumPy's calls; a tiny trace interpreted unplanned, whose recipe is made at
    each run, does not pay for a strip program's making."""
    x = np.random.default_rng(7).random((300, 300))
    monkeypatch.setattr(registry, "backend", "numpy")
    before = strip_runs()
    np.testing.assert_array_equal(np.asarray((dynfuse.asarray(x) + 1) * 2), (x + 1) * 2)
    assert strip_runs() == before
    monkeypatch.setattr(registry, "backend", "cpu")
    monkeypatch.setattr(config, "tiers", True)
    monkeypatch.setattr(config, "direct", False)  # recorded, then interpreted unplanned
    small = x[:10, :10].copy()
    interpreted = dynfuse.stats()["interpreted_ops"]
    lazy = (dynfuse.asarray(small) + 1) * 2 - small
    np.testing.assert_array_equal(np.asarray(lazy), (small + 1) * 2 - small)
    assert dynfuse.stats()["interpreted_ops"] == interpreted + 3
    assert strip_runs() == before


def test_threads_recording_while_a_strip_program_runs():
    """A strip program runs without the GIL: other threads record and compute meanwhile."""
    x = np.random.default_rng(8).random((200, 2000))
    lazy = dynfuse.asarray(x)
    results: dict[int, np.ndarray] = {}

    def work(seed: int) -> None:
        for _ in range(5):
            (value,), _ = computed([(lazy * seed + 1) * lazy - seed], strips=True)
            results[seed] = value

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for seed, value in results.items():
        assert_identical(value, (x * seed + 1) * x - seed)


# ---- random programs --------------------------------------------------------------------------

BINARY = [np.add, np.subtract, np.multiply, np.divide, np.floor_divide, np.less, np.equal, np.greater_equal]
BINARY += [np.logical_and, np.bitwise_xor, np.bitwise_or]
UNARY = [np.negative, np.absolute, np.square, np.logical_not, np.sqrt]
SELECTS = [np.where]
DTYPES = [np.float64, np.float32, np.int64, np.int32, np.int8, np.uint8, np.bool_]


@st.composite
def operands(draw):
    """Arrays of one of a few shapes and layouts (slices, steps, reversals, broadcasts), NumPy
    scalars, 0-d arrays and Python numbers, as (NumPy's, dynfuse's) pairs."""
    rows, cols = draw(st.integers(1, 6)), draw(st.sampled_from([1, 3, 17, 1030]))
    found = []
    for seed in range(draw(st.integers(1, 4))):
        dtype = np.dtype(draw(st.sampled_from(DTYPES)))
        rng = np.random.default_rng(seed)
        values = rng.integers(-20, 20, (rows + 2, 2 * cols + 1)).astype(dtype)
        if dtype.kind == "f":
            values = values / 4
            values[rng.random(values.shape) < 0.05] = np.nan
        layout = draw(st.sampled_from(["whole", "slice", "step", "reversed", "row", "column", "lazy view"]))
        view = {
            "whole": lambda a: a[:rows, :cols],
            "slice": lambda a: a[1 : rows + 1, 1 : cols + 1],
            "step": lambda a: a[:rows, ::2][:, :cols],
            "reversed": lambda a: a[rows - 1 :: -1, :cols],
            "row": lambda a: a[0, :cols],
            "column": lambda a: a[:rows, :1],
            "lazy view": lambda a: a[1 : rows + 1, : 2 * cols : 2],
        }[layout]
        if layout == "lazy view":  # a view recorded over a leaf
            found.append((view(values), view(dynfuse.asarray(values))))
        else:
            found.append((view(values), dynfuse.asarray(view(values))))
    scalars = st.sampled_from([0.5, 3, -2, np.float32(1.5), np.int8(3), np.array(2.0)])
    found.extend((scalar, scalar) for scalar in draw(st.lists(scalars, max_size=2)))
    return found


# A program: each step a choice of op and of two values made before (the operands first)
INDEX = st.integers(0, 10)
STEPS = st.lists(st.tuples(st.integers(0, 20), INDEX, INDEX, INDEX), min_size=2, max_size=8)


@given(operands(), STEPS)
def test_random_programs_in_strips_are_numpy_s(found, program):
    """Values, dtypes, layouts and the warnings each op gives, as NumPy's op by op."""
    values = list(found)
    with np.errstate(all="warn"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for choice, *chosen in program:
            ops = UNARY + BINARY + SELECTS
            function = ops[choice % len(ops)]
            operand_count = 3 if function is np.where else function.nin
            arguments = [values[which % len(values)] for which in chosen][:operand_count]
            try:
                expected = function(*(numpy_value for numpy_value, _ in arguments))
            except (TypeError, OverflowError):
                continue
            if np.ndim(expected) == 0:
                continue
            values.append((expected, function(*(lazy_value for _, lazy_value in arguments))))
    results = values[len(found) :]
    assume(len(results) >= 2)
    outputs = [results[-1], results[len(results) // 2]]
    lazy = [value for _, value in outputs]
    stripped, messages = computed(lazy, strips=True)
    reference, reference_messages = computed(lazy, strips=False)
    assert messages == reference_messages
    for actual, by_numpy, (expected, _) in zip(stripped, reference, outputs, strict=True):
        assert_identical(actual, by_numpy)
        assert_identical(actual, np.asarray(expected))
