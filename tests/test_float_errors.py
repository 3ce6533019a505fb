"""NumPy's floating-point errors from lazy ops: every way of running them warns, raises, ignores or
calls as NumPy does, under the error state in force when each op was recorded."""

import sys
import warnings

import numpy as np
import pytest

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import float_errors, ops
from dynfuse.testing.compare import compiling

N = 64


def _floats(value, dtype=np.float64):
    return np.full(N, value, dtype)


# (name, program of a namespace and arrays, inputs): each raises one category in NumPy
CASES = [
    ("log of zero", lambda xp, x: xp.log(x * 1.0), [_floats(0.0)]),
    ("log of negative", lambda xp, x: xp.log(x + 0.0), [_floats(-1.0)]),
    ("log1p of -1", lambda xp, x: xp.log1p(x * 1.0), [_floats(-1.0)]),
    ("sqrt of negative", lambda xp, x: xp.sqrt(x + 0.0), [_floats(-2.0)]),
    ("exp overflow", lambda xp, x: xp.exp(x * 1.0), [_floats(1000.0)]),
    ("exp underflow", lambda xp, x: xp.exp(x * 1.0), [_floats(-1000.0)]),
    ("float32 exp overflow", lambda xp, x: xp.exp(x * 1.0), [_floats(100.0, np.float32)]),
    ("arcsin beyond 1", lambda xp, x: xp.arcsin(x * 1.0), [_floats(2.0)]),
    ("arctanh of 1", lambda xp, x: xp.arctanh(x * 1.0), [_floats(1.0)]),
    ("cosh overflow", lambda xp, x: xp.cosh(x * 1.0), [_floats(800.0)]),
    ("hypot overflow", lambda xp, x: xp.hypot(x * 1.0, x), [_floats(1.5e308)]),
    ("hypot underflow", lambda xp, x: xp.hypot(x * 1.0, x), [_floats(3e-320)]),
    ("sin of inf", lambda xp, x: xp.sin(x * 1.0), [_floats(np.inf)]),
    ("float32 cos of inf", lambda xp, x: xp.cos(x * 1.0), [_floats(np.inf, np.float32)]),
    ("sin of a subnormal", lambda xp, x: xp.sin(x * 1.0), [_floats(5e-324)]),
    ("float32 sin of a tiny number", lambda xp, x: xp.sin(x * 1.0), [_floats(1e-30, np.float32)]),
    ("float32 cos of a tiny number", lambda xp, x: xp.cos(x * 1.0), [_floats(-2e-19, np.float32)]),
    ("divide by zero", lambda xp, x, y: x / (y * 1.0), [_floats(1.0), _floats(0.0)]),
    ("zero by zero", lambda xp, x, y: x / (y * 1.0), [_floats(0.0), _floats(0.0)]),
    ("inf minus inf", lambda xp, x: (x * 1.0) - x, [_floats(np.inf)]),
    ("multiply overflow", lambda xp, x: x * 1e300, [_floats(1e300)]),
    ("float32 overflow", lambda xp, x: x * np.float32(10), [_floats(3e38, np.float32)]),
    ("multiply underflow", lambda xp, x: x * 1e-300, [_floats(1e-300)]),
    ("power of zero to -1", lambda xp, x: xp.power(x * 1.0, -1.0), [_floats(0.0)]),
    ("power overflow", lambda xp, x: (x * 1.0) ** 400.0, [_floats(10.0)]),
    ("reciprocal of zero", lambda xp, x: xp.reciprocal(x * 1.0), [_floats(0.0)]),
    ("sum overflow", lambda xp, x: (x * 1.0).sum(), [_floats(1e308)]),
    ("cast of nan to int", lambda xp, x: (x * 1.0).astype(np.int32), [_floats(np.nan)]),
    ("cast overflow to float32", lambda xp, x: (x * 1.0).astype(np.float32), [_floats(1e300)]),
    (
        "integer floor_divide by zero",
        lambda xp, x, y: x // (y + 0),
        [np.ones(N, np.int64), np.zeros(N, np.int64)],
    ),
    (
        "integer remainder by zero",
        lambda xp, x, y: x % (y + 0),
        [np.ones(N, np.int32), np.zeros(N, np.int32)],
    ),
    ("integer reciprocal of zero", lambda xp, x: xp.reciprocal(x + 0), [np.zeros(N, np.int64)]),
    ("lowest integer // -1", lambda xp, x, y: x // (y + 0), [np.full(N, -(2**63)), np.full(N, -1)]),
    ("float floor_divide by zero", lambda xp, x, y: x // (y + 0.0), [_floats(1.0), _floats(0.0)]),
    ("fmod by zero", lambda xp, x, y: xp.fmod(x, y + 0.0), [_floats(1.0), _floats(0.0)]),
    ("two categories", lambda xp, x, y: xp.log(x * 1.0) + x / (y * 1.0), [_floats(-1.0), _floats(0.0)]),
    ("float16 overflow", lambda xp, x: x * np.float16(100), [_floats(1000.0, np.float16)]),
    ("float16 sum overflow", lambda xp, x: (x * np.float16(1)).sum(), [_floats(60000.0, np.float16)]),
    ("row sums overflow", lambda xp, x: (x.reshape(8, 8) * 1.0).sum(axis=1), [_floats(1e308)]),
    ("mean overflow", lambda xp, x: (x * 1.0).mean(), [_floats(1e308)]),
    ("product overflow", lambda xp, x: (x * 1.0).prod(), [_floats(1e100)]),
    ("cumsum overflow", lambda xp, x: xp.cumsum(x * 1.0), [_floats(1e308)]),
    ("cumprod underflow", lambda xp, x: xp.cumprod(x * 1.0), [_floats(1e-200)]),
    ("cast of inf to int", lambda xp, x: (x * 1.0).astype(np.int64), [_floats(np.inf)]),
    ("logaddexp of nan", lambda xp, x: xp.logaddexp(x * 1.0, x), [_floats(np.nan)]),
    (
        "complex multiply overflow",
        lambda xp, x: x * (1e300 + 1e300j),
        [_floats(1e300 + 1e300j, np.complex128)],
    ),
    (
        "complex64 overflow",
        lambda xp, x: x * np.complex64(1e30 + 1e30j),
        [_floats(1e30 + 1e30j, np.complex64)],
    ),
    (
        "complex divide by zero",
        lambda xp, x, y: x / (y * 1),
        [_floats(1 + 1j, np.complex128), _floats(0j, np.complex128)],
    ),
    (
        "complex inf times zero",
        lambda xp, x, y: x * (y * 1),
        [_floats(np.inf + 0j, np.complex128), _floats(0j, np.complex128)],
    ),
    ("complex reciprocal of zero", lambda xp, x: xp.reciprocal(x * 1), [_floats(0j, np.complex128)]),
    ("complex sum overflow", lambda xp, x: (x * 1).sum(), [_floats(1e308 + 0j, np.complex128)]),
]
MODES = ["warn", "raise", "ignore"]


def _outcome(xp, program, inputs, mode):
    """What running ``program`` under ``np.errstate(all=mode)`` does: its values or its exception,
    and the messages of the RuntimeWarnings it gives."""
    arrays = [xp.asarray(value) for value in inputs]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(all=mode):
            try:
                result = np.asarray(program(xp, *arrays))
            except FloatingPointError as error:
                result = f"FloatingPointError: {error}"
    messages = sorted({str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)})
    return result, messages


def _assert_same_outcome(expected, actual):
    (want, want_messages), (got, got_messages) = expected, actual
    assert got_messages == want_messages
    if isinstance(want, str):
        assert got == want
    else:
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("backend", ["cpu", "numpy", "groups", "cuda-emulator"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("name", "program", "inputs"), CASES, ids=[case[0] for case in CASES])
def test_every_backend_reports_as_numpy(name, program, inputs, mode, backend):
    expected = _outcome(np, program, inputs, mode)
    assert expected[1] or isinstance(expected[0], str) or mode == "ignore", "the case raises nothing"
    with compiling(backend):
        _assert_same_outcome(expected, _outcome(dnp, program, inputs, mode))


@pytest.mark.parametrize("backend", ["cpu", "cuda-emulator"])
@pytest.mark.parametrize(("name", "program", "inputs"), CASES[:6], ids=[case[0] for case in CASES[:6]])
def test_call_and_log_modes_reach_the_handler(name, program, inputs, backend):
    calls, logged = [], []

    class Log:
        def write(self, message):
            logged.append(message)

    for xp in (np, dnp):
        arrays = [xp.asarray(value) for value in inputs]
        with (
            compiling(backend),
            np.errstate(
                all="call", call=lambda kind, flag, name=xp.__name__: calls.append((name, kind, flag))
            ),
        ):
            np.asarray(program(xp, *arrays))
        with compiling(backend), np.errstate(all="log", call=Log()):
            np.asarray(program(xp, *arrays))
    numpy_calls = [call[1:] for call in calls if call[0] == "numpy"]
    assert numpy_calls and numpy_calls == [call[1:] for call in calls if call[0] != "numpy"]
    assert len(logged) == 2 and logged[0] == logged[1]


@pytest.mark.parametrize("backend", ["cpu", "cuda-emulator"])
def test_complex_products_that_underflow_unseen_warn_nothing_numpy_does_not(backend):
    """A device judges a complex product's underflow from nothing (its value shows none): what it
    reports costs a rerun by NumPy, which warns of nothing here."""
    inputs = [_floats(1e-200 + 1j, np.complex128)]
    program = lambda xp, x: xp.abs(x * x)  # noqa: E731
    expected = _outcome(np, program, inputs, "warn")
    with compiling(backend):
        _assert_same_outcome(expected, _outcome(dnp, program, inputs, "warn"))
    assert dynfuse.stats()["kernels_launched"] >= 1


def test_the_state_when_recorded_decides_not_the_state_when_materialized():
    x = dnp.asarray(np.zeros(N))
    with np.errstate(divide="ignore"):
        quiet = dnp.log(x * 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.asarray(quiet + 1.0)  # computed here, outside the errstate: still quiet
    loud = dnp.log(x * 1.0)
    with (
        np.errstate(divide="ignore"),
        pytest.warns(RuntimeWarning, match="divide by zero encountered in log"),
    ):
        np.asarray(loud)
    raising = None
    with np.errstate(divide="raise"):
        raising = dnp.log(x * 1.0) * 2.0
    with pytest.raises(FloatingPointError, match="divide by zero encountered in log"):
        np.asarray(raising)
    with pytest.raises(FloatingPointError):  # the value stays uncomputed: asked again, it raises again
        np.asarray(raising)


def test_a_flag_each_op_ignores_costs_no_rerun():
    x = dnp.asarray(np.zeros(N))
    with np.errstate(all="ignore"):
        value = np.asarray(dnp.log(x * 1.0) + 1.0)
    assert np.all(value == -np.inf)
    counters = dynfuse.stats()
    assert counters["kernels_launched"] >= 1 and counters["float_error_reruns"] == 0


def test_clean_data_raises_no_flag():
    rng = np.random.default_rng(0)
    x, y = dnp.asarray(rng.standard_normal(4096)), dnp.asarray(rng.random(4096) + 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = [
            (x * y + 1.0) ** 2.0,
            dnp.exp(-(x**2.0)) / y,
            dnp.log(y) * dnp.sqrt(y) + dnp.tanh(x),
            dnp.where(x > 0, x, 0.5 * x).sum(),
            (x * 1000.0).astype(np.int16),
            (x * 1.0) // y,
            dnp.sin(x * 1e7) + dnp.cos(y * 1e-200),  # libm's sin past 2^20, a tiny cos
        ]
        for value in values:
            np.asarray(value)
    assert dynfuse.stats()["float_error_reruns"] == 0
    assert float_errors.take_flags() == 0


def test_a_repeated_statement_reports_the_run_that_raises():
    """A cached statement launched in C: the run whose data raises warns, the others do not."""
    caught_at = []
    for step in range(12):
        b = np.ones(N)
        b[step] = 0.0 if step == 9 else 2.0
        lazy_b = dnp.asarray(b)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            np.asarray(dnp.log(lazy_b * 2.0) + 1.0)
        if caught:
            caught_at.append((step, str(caught[0].message)))
    assert caught_at == [(9, "divide by zero encountered in log")]
    assert dynfuse.stats()["replays"] > 0


def test_flags_from_every_thread_of_a_launch(monkeypatch):
    monkeypatch.setattr(dynfuse.config, "threads", 2)
    values = np.ones(1 << 20)
    values[-1] = 0.0  # in the last thread's range only
    with pytest.warns(RuntimeWarning, match="divide by zero encountered in divide"):
        np.asarray(1.0 / (dnp.asarray(values) * 1.0))
    with np.errstate(over="raise"), pytest.raises(FloatingPointError, match="overflow encountered in reduce"):
        np.asarray((dnp.asarray(np.full(1 << 20, 1e304)) * 1.0).sum())


def test_a_warning_names_the_line_that_asked_for_the_value():
    value = dnp.log(dnp.asarray(np.zeros(N)) * 1.0)
    with pytest.warns(RuntimeWarning, match="divide by zero encountered in log") as caught:
        line = sys._getframe().f_lineno + 1
        np.asarray(value)
    assert [(warning.filename, warning.lineno) for warning in caught] == [(__file__, line)]


def test_nan_data_warns_nothing_numpy_does_not():
    """An x86 comparison signals on NaN where NumPy's does not: the rerun that costs stays quiet."""
    data = np.linspace(-2.0, 2.0, N)
    data[::7] = np.nan
    x = dnp.asarray(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = np.asarray(dnp.where(x > 0, dnp.maximum(x, 0.5), -x) + dnp.minimum(x, 1.0))
    with np.errstate(all="ignore"):
        expected = np.where(data > 0, np.maximum(data, 0.5), -data) + np.minimum(data, 1.0)
    np.testing.assert_array_equal(values, expected)


def test_comparisons_and_selects_on_nan_data_rerun_nothing():
    data = np.linspace(-2.0, 2.0, N)
    data[::5] = np.nan
    x = dnp.asarray(data)
    values = np.asarray(dnp.where(x > 0, dnp.maximum(x, 0.5), -x))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(values, np.where(data > 0, np.maximum(data, 0.5), -data))
    assert dynfuse.stats()["float_error_reruns"] == 0


SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, 1e300, -1e300, 1e-310, 0.5]


@pytest.mark.parametrize(
    "name", sorted(name for name, op in ops.ELEMENTWISE.items() if not op.reports_float_errors)
)
def test_an_op_said_never_to_report_never_does_in_numpy(name):
    """What the op table says of ``reports_float_errors`` is NumPy's behavior on every special value."""
    op = ops.ELEMENTWISE[name]
    arity = op.reference.nin if isinstance(op.reference, np.ufunc) else 3
    for dtype in (np.float64, np.float32, np.int64):
        with np.errstate(all="ignore"):
            values = np.array(SPECIAL, dtype=np.float64).astype(dtype)
        grid = np.meshgrid(*[values] * arity, indexing="ij")
        arguments = [axis.ravel() for axis in grid]
        if name == "where":
            arguments[0] = arguments[0] > 0
        with warnings.catch_warnings(), np.errstate(all="raise"):
            warnings.simplefilter("error")
            try:
                op.reference(*arguments)
            except TypeError:  # no loop for this dtype (a float bitwise op)
                continue


def test_counting_nan_data_reruns_nothing():
    """A comparison's flag on NaN, then an integer sum, which never reports: nothing to run again."""
    data = np.linspace(-2.0, 2.0, N)
    data[::3] = np.nan
    assert int((dnp.asarray(data) > 0).sum()) == int((data > 0).sum())
    assert dynfuse.stats()["float_error_reruns"] == 0
