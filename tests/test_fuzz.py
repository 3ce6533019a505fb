"""dynfuse.testing and ``dynfuse fuzz``: random programs checked against NumPy on every backend here.

With a fixed seed and a fresh one; that the checker catches wrong kernels; and the regressions the
fuzzer found, as the snippets it printed."""

import random
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import execute, ops, registry, replay
from dynfuse.__main__ import main
from dynfuse.testing import (
    FAMILIES,
    Input,
    Program,
    Ref,
    Step,
    assert_matches_numpy,
    cases,
    check_function,
    programs,
    snippet,
)
from dynfuse.testing.compare import compare
from dynfuse.testing.faults import injected_faults
from dynfuse.testing.fuzz import ROUND, fuzz

BACKENDS = [name for name in registry.BACKENDS if registry.unavailable_reason(name) is None]


@pytest.mark.parametrize("backend", BACKENDS)
def test_fuzzing_with_a_fixed_seed_finds_nothing(backend):
    report = fuzz(examples=150, seed_value=20261121, backend=backend)
    assert report.examples == 150
    assert not report.failures, report.summary()


@pytest.mark.parametrize("backend", BACKENDS)
def test_fuzzing_with_a_fresh_seed_finds_nothing(backend):
    fresh = random.randrange(1 << 32)
    print(f"fresh fuzz seed: {fresh}")  # shown by pytest with the failure
    report = fuzz(examples=100, seed_value=fresh, backend=backend)
    assert not report.failures, report.summary()
    assert report.examples == 100
    assert registry.BACKENDS[backend] is None or report.kernels_compiled > 0


COMPILING_BACKENDS = [name for name in BACKENDS if registry.BACKENDS[name] is not None]


@pytest.mark.parametrize("backend", COMPILING_BACKENDS)
def test_fuzzing_with_injected_faults_finds_nothing(backend):
    """Planning, compiles and launches failing a third of the time: every program still gives
    NumPy's result, through the reference executor, and the faults were there to recover from."""
    report = fuzz(examples=100, seed_value=20261122, backend=backend, faults=0.3)
    assert not report.failures, report.summary()
    assert set(report.faults_injected) == {"a compile", "a launch", "planning"}, report.summary()
    assert "faults injected at rate 0.3" in report.summary()


def test_injected_faults_leave_nothing_behind():
    """After the block, kernels and plans run as before: none made inside fails later."""
    x = dynfuse.asarray(np.arange(10.0))
    with injected_faults(1.0) as injected, pytest.warns(RuntimeWarning, match="injected fault"):
        np.testing.assert_array_equal(np.asarray(np.exp(x) + 1), np.exp(np.arange(10.0)) + 1)
    assert injected["planning"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(np.asarray(np.exp(x) + 1), np.exp(np.arange(10.0)) + 1, rtol=1e-15)
    assert dynfuse.stats()["kernels_compiled"] == 1
    with pytest.raises(ValueError, match="rate"), injected_faults(1.5):
        pass


def test_injected_faults_do_not_hide_a_wrong_kernel(wrong_kernels):
    report = fuzz(examples=100, seed_value=5, faults=0.2)
    assert report.failures and sum(report.faults_injected.values()) > 0


@pytest.fixture
def wrong_kernels(monkeypatch):
    """Every compiled kernel's outputs wrong in their first element: a number off by one, a bool
    flipped (every output, so that whichever programs the seed draws, one meets it)."""
    original = execute.launch

    def wrong(*arguments, **keywords):
        results = original(*arguments, **keywords)
        for result in results:
            if result.size:
                first = (0,) * result.ndim
                result[first] = ~result[first] if result.dtype.kind == "b" else result[first] + 1
        return results

    monkeypatch.setattr(execute, "launch", wrong)
    monkeypatch.setattr(replay, "launch", wrong)
    monkeypatch.setattr(replay, "launch_replay", None)  # C's launch of a replay: launched above instead
    monkeypatch.setattr(replay, "replay_now", None)


def test_the_checker_catches_a_wrong_kernel_and_prints_a_runnable_snippet(wrong_kernels):
    # One round: Hypothesis shrinks its failure over hundreds of programs, most of the time here
    report = fuzz(examples=ROUND, seed_value=1)
    assert report.failures
    failure = report.failures[0]
    assert "def program(xp" in failure and "assert_matches_numpy(program" in failure
    code = failure[failure.index("import numpy") :]
    with pytest.raises(AssertionError, match="differ from NumPy"):
        exec(code, {})


def test_a_snippet_runs_and_passes_where_dynfuse_is_right():
    program = Program(
        inputs=(Input((2, 3), "float32", "reversed"),),
        steps=(
            Step("v0", "call", "exp", (Ref("x0"),), reproducible=False),
            Step("v1", "method", "sum", (Ref("v0"),), (("axis", -1),), False),
        ),
        outputs=("v1",),
    )
    x0 = np.flip(np.array([[1.0, np.nan, -0.0], [np.inf, 2.5, -3.0]], np.float32))
    text = snippet(program, [x0])
    namespace: dict = {}
    exec(text, namespace)  # runs assert_matches_numpy
    assert np.array_equal(namespace["x0"], x0, equal_nan=True) and namespace["x0"].strides[0] < 0


@settings(max_examples=60, deadline=None)
@given(cases(max_depth=6, dtypes=["float32", "int16"], families=("elementwise", "reduction")))
def test_the_strategies_keep_to_their_parameters(case):
    program, arrays = case
    assert all(array.dtype.name in ("float32", "int16") for array in arrays)
    assert all(array.ndim <= 3 and max(array.shape, default=0) <= 5 for array in arrays)
    assert all(
        step.form != "index" and step.name not in ("einsum", "cumsum", "sort") for step in program.steps
    )
    assert len(program.steps) <= 6
    assert_matches_numpy(program, arrays)


def test_unknown_families_are_refused():
    with pytest.raises(ValueError, match="families must be some of"):
        programs(families=("elementwise", "loops"))
    assert set(FAMILIES) == {"elementwise", "reduction", "view", "barrier", "write"}


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=60, deadline=None)
@given(case=cases(max_depth=8, families=("elementwise", "view", "write")))
def test_programs_that_write_keep_numpys_aliasing(backend, case):
    """Writes into inputs, new arrays and views of either, with views made before and results
    computed before read after: NumPy's values, on every backend."""
    program, arrays = case
    assert_matches_numpy(program, arrays, backend=backend)


def test_a_written_program_prints_as_python_that_runs_it():
    program = Program(
        inputs=(Input((2, 3), "float64"),),
        steps=(
            Step("v0", "call", "transpose", (Ref("x0"), (1, 0))),
            Step("v1", "operator", "*", (Ref("x0"), 2.0)),
            Step("x0", "write", "+=", (Ref("x0"), (slice(None, None, -1), Ellipsis), Ref("v1"))),
        ),
        outputs=("v0", "v1", "x0"),
    )
    assert "    x0[::-1, ...] += v1" in program.source()
    x0 = np.arange(6.0).reshape(2, 3)
    expected = x0.copy()
    outputs = program(np, x0)
    assert outputs[0].base is not None and not np.shares_memory(outputs[1], x0)
    expected[::-1, ...] += expected * 2
    np.testing.assert_array_equal(outputs[2], expected)
    assert_matches_numpy(program, [np.arange(6.0).reshape(2, 3)])


def softmax(x):
    shifted = x - dnp.max(x, axis=-1, keepdims=True)
    exponentials = dnp.exp(shifted)
    return exponentials / dnp.sum(exponentials, axis=-1, keepdims=True)


def test_check_function_runs_a_users_function_on_both():
    floats = hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2), elements=st.floats(-50, 50))
    check_function(softmax, floats, max_examples=30)


def test_check_function_reports_a_difference(wrong_kernels):
    floats = hnp.arrays(np.float64, st.just((4, 3)), elements=st.floats(-50, 50))
    with pytest.raises(AssertionError, match="differ from NumPy"):
        check_function(softmax, floats, max_examples=10)


def test_check_function_passes_xp_to_a_function_that_takes_it():
    def normalized(x, xp):
        return (x - x.mean()) / xp.sqrt(x.var() + 1.0)

    check_function(
        normalized, hnp.arrays(np.float32, (3, 4), elements=st.floats(-9, 9, width=32)), max_examples=20
    )


def test_the_command_line_reports_and_sets_the_exit_status(capsys, wrong_kernels):
    assert main(["fuzz", "--examples", "50", "--seed", "3"]) == 1
    output = capsys.readouterr().out
    assert "failures:" in output and "def program(xp" in output
    with pytest.raises(SystemExit):
        main(["fuzz", "--faults", "2"])
    assert "a rate lies in [0, 1]" in capsys.readouterr().err


def test_the_command_line_passes_on_a_clean_run():
    finished = subprocess.run(
        [sys.executable, "-m", "dynfuse", "fuzz", "--examples", "30", "--seed", "5", "--max-depth", "4"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "30 examples on the cpu backend" in finished.stdout and "failures: 0" in finished.stdout


# ---- regressions the fuzzer found ---------------------------------------------------------------


def test_clip_of_an_unsigned_array_to_a_negative_python_int():
    """Found by ``dynfuse fuzz --seed 2``: the kernel could not take -1 as a uint8 bound and fell
    back; NumPy drops a Python int bound beyond the array's range."""

    def program(xp, x0):
        v0 = x0 @ x0
        v5 = xp.clip(v0, -1, 0)
        return v0, v5

    x0 = np.array([3, 200], dtype=np.uint8)
    assert_matches_numpy(program, [x0])
    assert_matches_numpy(lambda xp, x: (xp.clip(x, -1, 300), xp.clip(x, None, 7)), [x0])
    for bounds in [(300, None), (None, -1)]:
        with pytest.raises(OverflowError):
            np.clip(x0, *bounds)
        with pytest.raises(OverflowError):
            dynfuse.evaluate(dnp.clip(dynfuse.asarray(x0), *bounds))


def test_a_function_of_a_sum_that_may_take_either_sign_is_judged_from_dynfuses_sum():
    """A mean of int64 sums huge values that cancel: its rounding bound spans zero, and
    ``abs`` maps that interval's ends away from the value dynfuse's own order gives. The checker
    runs NumPy from dynfuse's mean too (it is an output, judged by its own bound), and a plain
    function's tolerance counts the integers' magnitude."""
    program = Program(
        inputs=(Input((16,), "int64", "contiguous"),),
        steps=(
            Step("v0", "call", "mean", (Ref("x0"),), reproducible=ops.REDUCTIONS["mean"].reproducible),
            Step("v1", "call", "absolute", (Ref("v0"),)),
        ),
        outputs=("v0", "v1"),
    )
    x0 = np.array([-9223372036854621107, 9223372036854479351, -132874] + [23637] * 13, np.int64)
    for backend in BACKENDS:
        assert_matches_numpy(program, [x0], backend=backend)
        assert_matches_numpy(lambda xp, x: (xp.mean(x), xp.abs(xp.mean(x))), [x0], backend=backend)


def test_the_zero_a_max_or_min_reduction_keeps_may_have_either_sign():
    """Of equal 0.0 and -0.0, NumPy's own max and min loops keep one by their vector width, so its
    sign is no implementation's to match; every other zero's sign is compared."""
    program = Program(
        inputs=(Input((3,), "float16", "contiguous"),),
        steps=(Step("v0", "call", "min", (Ref("x0"),), signed_zeros=ops.REDUCTIONS["min"].signed_zeros),),
        outputs=("v0",),
    )
    x0 = np.array([1.0, 0.0, -0.0], np.float16)
    for backend in BACKENDS:
        assert_matches_numpy(program, [x0], backend=backend)
    assert compare(np.array(-0.0), np.array(0.0), zero_signs=False) is None
    assert "differ from NumPy" in compare(np.array(-0.0), np.array(0.0))
    assert "at (): np.int64(3) for np.int64(1)" in compare(np.array(3), np.array(1))  # 0-d, reported
    assert "at (): np.float64(0.0)" in compare(np.array(0.0), np.array(np.nan), exact=False)
