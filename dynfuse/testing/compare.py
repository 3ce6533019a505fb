"""Differential checking: a program run lazily through dynfuse against the same program run op by op
through NumPy.

Bools and integers must be equal, and so must floats that every correct implementation computes bit
for bit (``Program.reproducible``), the sign of zeros included, but for a max or min reduction's,
which NumPy's own loops choose by their vector width (``Program.signed_zeros``). A float that comes
from an op whose last bit varies between implementations (exp, a float sum) may differ, but only as
far as such differences can carry: the reference program is run again with the result of each such
op moved by ``max_ulp`` units in the last place (a sum or a product by its rounding-error bound),
upwards, downwards and in random directions per element, and once from the values dynfuse gave
such ops that are outputs (a function the spread's ends do not bound, ``abs`` of a sum that may be
either sign, is then NumPy's from dynfuse's own value); dynfuse's value must lie within the spread
those runs give, or within ``max_ulp`` of NumPy's. NaN where NumPy has NaN; shapes and dtypes
equal; an exception of the type NumPy raises where NumPy raises one.
"""

from __future__ import annotations

import contextlib
import inspect
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .. import config, registry
from .faults import MARK as FAULT_MARK
from .programs import Program, input_source

_RANDOM_RUNS = 2


class UndefinedCast(Exception):
    """The program casts a float NumPy cannot represent in the target type (NaN, inf, out of range):
    NumPy leaves the result undefined, so there is nothing to compare."""


def snippet(program: Program, arrays: Sequence[np.ndarray]) -> str:
    """A failing case as Python a test can paste: the program, its inputs, and the check."""
    lines = [
        "import numpy as np",
        "from dynfuse.testing import assert_matches_numpy",
        "",
        "",
        program.source(),
        "",
    ]
    lines += [
        input_source(f"x{n}", array, spec.layout)
        for n, (array, spec) in enumerate(zip(arrays, program.inputs, strict=True))
    ]
    names = ", ".join(f"x{n}" for n in range(len(arrays)))
    lines.append(f"assert_matches_numpy(program, [{names}])")
    return "\n".join(lines)


@contextlib.contextmanager
def compiling(backend: str | None = None) -> Iterator[None]:
    """Every kernel compiled, however small its arrays (the tier policy would interpret test-sized
    ones), on ``backend`` if given; the configuration is restored after."""
    saved = registry.backend, config.tiers
    try:
        if backend is not None:
            registry.set_backend(backend)
        config.tiers = False
        yield
    finally:
        registry.backend, config.tiers = saved


def assert_matches_numpy(
    program: Program | Callable[..., Any],
    inputs: Sequence[Any],
    backend: str | None = None,
    max_ulp: int = 4,
) -> None:
    """Run ``program(xp, *inputs)`` with ``xp`` dynfuse.numpy on lazy arrays and with ``xp`` NumPy,
    and raise AssertionError, with a runnable snippet, where they differ (see the module docstring).

    ``program`` is a ``Program`` (from ``programs()``) or any function of a namespace and arrays.
    A plain function's ops cannot be replayed with their rounding moved: its floats may differ by
    ``max_ulp`` units in the last place, or by ``max_ulp`` roundings of the largest finite value
    among its float inputs and result (what cancellation leaves). A kernel that falls back to NumPy
    is a failure too: it is a fault inside dynfuse."""
    arrays = [np.asarray(value) if isinstance(value, np.ndarray | np.generic) else value for value in inputs]
    problem = _problem(program, arrays, backend, max_ulp)
    if problem is None:
        return
    if not isinstance(program, Program):
        raise AssertionError(problem)
    pruned = program.pruned()
    if pruned != program:  # the same failure without the steps no output reads, if it still fails
        problem_when_pruned = _problem(pruned, arrays, backend, max_ulp)
        if problem_when_pruned is not None:
            program, problem = pruned, problem_when_pruned
    raise AssertionError(f"{problem}\n\n{snippet(program, arrays)}")


def _problem(program: Any, arrays: list, backend: str | None, max_ulp: int) -> str | None:
    """How dynfuse's run of ``program`` differs from NumPy's, or None."""
    described = program if isinstance(program, Program) else None
    try:
        expected = _reference(program, arrays)
    except UndefinedCast:
        return None
    actual, faults = _lazy(program, arrays, backend)
    if faults:
        return f"dynfuse fell back to NumPy after a fault of its own: {faults}"
    if isinstance(expected, type) or isinstance(actual, type):
        if expected is not actual:
            return f"NumPy gives {_outcome_name(expected)}, dynfuse {_outcome_name(actual)}"
        return None
    if len(actual) != len(expected):
        return f"{len(expected)} outputs from NumPy, {len(actual)} from dynfuse"
    spreads = _spreads(described, arrays, max_ulp, actual) if described is not None else None
    for number, (got, want) in enumerate(zip(actual, expected, strict=True)):
        name = described.outputs[number] if described is not None else f"output {number}"
        exact = described is not None and described.reproducible(name)
        zero_signs = described is None or described.signed_zeros(name)
        spread = spreads[number] if spreads is not None else None
        scale = 0.0 if described is not None else _scale(arrays, want)
        problem = compare(
            got, want, exact=exact, max_ulp=max_ulp, spread=spread, scale=scale, zero_signs=zero_signs
        )
        if problem:
            return f"{name}: {problem}"
    return None


def _outcome_name(outcome: Any) -> str:
    return outcome.__name__ if isinstance(outcome, type) else "a result"


def _reference(program: Any, arrays: list, after_step: Any = None) -> tuple | type:
    """NumPy's outputs (as arrays), or the type of the exception it raises."""
    hook = after_step or _undefined_casts_raise
    arrays = [fresh(value) for value in arrays]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            outputs = program.run(np, arrays, hook) if isinstance(program, Program) else program(np, *arrays)
        except UndefinedCast:
            raise
        except Exception as error:
            return type(error)
    return tuple(np.asarray(output) for output in _as_tuple(outputs))


def _undefined_casts_raise(step: Any, value: Any, values: dict) -> Any:
    if step.name == "astype" and np.dtype(step.args[1]).kind in "biu":
        source = np.asarray(values[step.args[0].name])
        if source.dtype.kind == "f":
            with np.errstate(invalid="raise"):
                try:
                    source.astype(step.args[1])
                except FloatingPointError as error:
                    raise UndefinedCast(step.source()) from error
    return value


def _lazy(program: Any, arrays: list, backend: str | None) -> tuple[tuple | type, list[str]]:
    """dynfuse's outputs, materialized in one plan, or the type of the exception it raises; and the
    warnings of any fault inside dynfuse (a kernel that failed and fell back to NumPy)."""
    import dynfuse

    copies = [fresh(value) for value in arrays]
    with compiling(backend), np.errstate(all="ignore"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            lazy = [dynfuse.asarray(value) if isinstance(value, np.ndarray) else value for value in copies]
            outputs = _as_tuple(program(dynfuse.numpy, *lazy))
            dynfuse.evaluate(*[output for output in outputs if isinstance(output, dynfuse.LazyArray)])
            result: tuple | type = tuple(np.asarray(output) for output in outputs)
        except Exception as error:
            result = type(error)
    faults = [
        message
        for message in map(str, (warning.message for warning in caught))
        if message.startswith("dynfuse:") and FAULT_MARK not in message  # injected ones are expected
    ]
    return result, faults


def fresh(value: Any) -> Any:
    """An input array for one run, laid out in memory as it is (the same strides, so views and
    copies are made as for the original), in memory of its own: a program that writes into its
    inputs changes neither the caller's arrays nor the next run's. Other values as they are."""
    if not isinstance(value, np.ndarray):
        return value
    if not value.size:
        return value.copy()
    offsets = [(extent - 1) * stride for extent, stride in zip(value.shape, value.strides, strict=True)]
    low = sum(offset for offset in offsets if offset < 0)
    high = sum(offset for offset in offsets if offset > 0)
    memory = np.empty((high - low) // value.itemsize + 1, value.dtype)
    fresh = np.lib.stride_tricks.as_strided(memory[-low // value.itemsize :], value.shape, value.strides)
    fresh[...] = value
    return fresh


def _as_tuple(outputs: Any) -> tuple:
    return tuple(outputs) if isinstance(outputs, tuple | list) else (outputs,)


# ---- how far rounding can carry ----------------------------------------------------------------


def _spreads(
    program: Program, arrays: list, max_ulp: int, actual: tuple
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
    """Per output, the lowest and highest value (NaN ignored) and where any is NaN, over reference
    runs with each irreproducible float op's result moved within its rounding, and one run from
    the values dynfuse gave the irreproducible ops that are outputs (``actual``, each checked
    against its own spread); None if the program has no such op."""
    if all(step.reproducible for step in program.steps):
        return None
    generator = np.random.default_rng(0)
    directions: list[Any] = [1.0, -1.0, *(generator for _ in range(_RANDOM_RUNS))]
    runs = []
    for direction in directions:
        outcome = _reference(program, arrays, _moving(direction, max_ulp))
        if isinstance(outcome, type):
            return None  # moved this far, the program fails: there is no spread to speak of
        runs.append(outcome)
    given = _reference(program, arrays, _taking(dict(zip(program.outputs, actual, strict=True))))
    if not isinstance(given, type):
        runs.append(given)
    spreads = []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for values in zip(*runs, strict=True):
            stacked = np.stack(
                [np.asarray(value, np.float64) if value.dtype.kind != "c" else value for value in values]
            )
            nan = np.isnan(stacked) if stacked.dtype.kind in "fc" else np.zeros(stacked.shape, bool)
            if stacked.dtype.kind == "c":  # each part's own ends
                low, high = (
                    np.nanmin(stacked.real, axis=0) + 1j * np.nanmin(stacked.imag, axis=0),
                    np.nanmax(stacked.real, axis=0) + 1j * np.nanmax(stacked.imag, axis=0),
                )
            else:
                low, high = np.nanmin(stacked, axis=0), np.nanmax(stacked, axis=0)
            spreads.append((low, high, nan.any(axis=0)))
    return spreads


def _moving(direction: Any, max_ulp: int) -> Callable[..., Any]:
    """A hook that moves each irreproducible float result by its rounding, in ``direction`` (+1, -1,
    or a random generator: a random sign per element)."""

    def move(step: Any, value: Any, values: dict) -> Any:
        _undefined_casts_raise(step, value, values)
        if step.reproducible or np.asarray(value).dtype.kind not in "fc" or not np.size(value):
            return value  # itself: a view stays a view of its base, a scalar a scalar
        array = np.asarray(value)

        def sign() -> Any:
            if isinstance(direction, np.random.Generator):
                return direction.choice([-1.0, 1.0], size=array.shape)
            return direction

        rounding = _rounding(step, array, values, max_ulp)
        # a complex value's parts each moved by the rounding of its magnitude
        offset = sign() * rounding + (1j * sign() * rounding if array.dtype.kind == "c" else 0)
        moved = (array + offset).astype(array.dtype)
        return moved[()] if isinstance(value, np.generic) else moved

    return move


def _taking(actual: dict[str, np.ndarray]) -> Callable[..., Any]:
    """A hook that gives each irreproducible float op that is an output the value dynfuse gave it:
    what is computed from it through a function its spread's ends do not bound (``abs`` of a sum
    that may be either sign, a square) is then NumPy's from dynfuse's own value."""

    def take(step: Any, value: Any, values: dict) -> Any:
        _undefined_casts_raise(step, value, values)
        given = actual.get(step.target)
        if step.reproducible or step.writes or given is None:
            return value
        array = np.asarray(value)
        if array.dtype.kind not in "fc" or given.shape != array.shape or given.dtype != array.dtype:
            return value
        return given[()] if isinstance(value, np.generic) else given.copy()

    return take


def _rounding(step: Any, value: np.ndarray, values: dict, max_ulp: int) -> np.ndarray:
    """How far an implementation's result may lie from NumPy's: ``max_ulp`` units in the last place
    for a function; for a sum, ``n · eps · Σ|x|`` (the classic bound, whatever the order); for a
    product, ``n · eps · |result|``."""
    eps = np.finfo(value.dtype).eps
    magnitude = np.abs(value)
    kwargs = dict(step.kwargs)
    if step.name not in ("sum", "mean", "var", "std", "prod", "cumsum", "einsum", "@"):
        return max_ulp * np.spacing(magnitude.astype(np.finfo(value.dtype).dtype))
    operand = np.asarray(values[step.args[1 if step.name == "einsum" else 0].name])
    if step.name in ("einsum", "@"):
        terms = operand.shape[-1] if operand.ndim else 1
    elif step.name == "cumsum":
        axis = kwargs.get("axis")
        terms = operand.size if axis is None else operand.shape[axis]
    else:
        terms = operand.size // max(value.size, 1)
    terms = max(terms, 1)
    if step.name == "prod":
        return 2 * terms * eps * magnitude
    absolute = np.abs(operand).astype(np.float64)
    if step.name in ("var", "std"):
        second_moment = np.mean(
            absolute * absolute, axis=kwargs.get("axis"), keepdims=kwargs.get("keepdims", False)
        )
        variance_error = 4 * terms * eps * second_moment * (1 + kwargs.get("ddof", 0))
        if step.name == "var":
            return variance_error
        return np.sqrt(magnitude.astype(np.float64) ** 2 + variance_error) - magnitude
    if step.name == "einsum":
        bound = np.einsum(step.args[0], absolute, absolute)
    elif step.name == "@":
        bound = absolute @ absolute
    else:
        bound = getattr(np, step.name)(absolute, **kwargs)
    return 2 * terms * eps * np.asarray(bound)


# ---- comparing one output ----------------------------------------------------------------------


def compare(
    actual: np.ndarray,
    expected: np.ndarray,
    exact: bool = True,
    max_ulp: int = 4,
    spread: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    scale: float = 0.0,
    zero_signs: bool = True,
) -> str | None:
    """What is wrong with ``actual`` as a result for ``expected``, or None: see the module docstring.
    ``zero_signs=False``: an exact result's zeros may have either sign (``ops.Op.signed_zeros``)."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        given = f"shape {actual.shape} and dtype {actual.dtype}"
        return f"{given}, where NumPy gives shape {expected.shape} and dtype {expected.dtype}"
    if expected.dtype.kind == "c":  # each part as a float, within its part of the spread
        wrong = np.zeros(expected.shape, bool)
        for part in ("real", "imag"):
            ends = None if spread is None else (*(getattr(end, part) for end in spread[:2]), spread[2])
            pair = (getattr(actual, part), getattr(expected, part))
            wrong |= _float_mismatches(*pair, exact, max_ulp, ends, zero_signs)
    elif expected.dtype.kind == "f":
        wrong = _float_mismatches(actual, expected, exact, max_ulp, spread, zero_signs)
    else:
        wrong = actual != expected
    if scale and expected.dtype.kind in "fc":  # what cancellation leaves of values of this size
        with np.errstate(all="ignore"):
            allowed = max_ulp * np.finfo(expected.dtype).eps * scale
            wide = actual.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
            wrong &= ~(np.abs(wide - expected) <= allowed)
    if not np.any(wrong):
        return None
    where = np.argwhere(wrong)[:3] if wrong.ndim else [()]  # argwhere gives 0-d an axis
    shown = ", ".join(
        f"at {tuple(int(i) for i in index)}: {actual[tuple(index)]!r} for {expected[tuple(index)]!r}"
        for index in where
    )
    return f"{int(np.count_nonzero(wrong))} of {expected.size} elements differ from NumPy's ({shown})"


def _scale(arrays: list, expected: np.ndarray) -> float:
    """The largest finite magnitude among a plain function's integer and float inputs and its
    result: the size of the values whose roundings a result may carry, however much of them
    cancelled (integers too: a mean of int64 sums them as float64)."""
    values = [np.asarray(value) for value in [*arrays, expected]]
    finite = [
        np.abs(value[np.isfinite(value)].astype(np.float64))
        for value in values
        if value.dtype.kind in "iuf" and value.size
    ]
    return float(max((value.max() for value in finite if value.size), default=0.0))


def _float_mismatches(actual, expected, exact, max_ulp, spread, zero_signs) -> np.ndarray:
    both_nan = np.isnan(actual) & np.isnan(expected)
    same = (actual == expected) | both_nan
    if exact:
        zeros = (expected == 0) & zero_signs
        return ~same | (zeros & (np.signbit(actual) != np.signbit(expected)))
    with np.errstate(all="ignore"):
        close = same | (ulp_distance(actual, expected) <= max_ulp) & ~np.isnan(actual) & ~np.isnan(expected)
        if spread is not None:
            low, high, any_nan = spread
            width = np.where(np.isfinite(high - low), high - low, 0)
            value = actual.astype(np.float64)
            inside = (value >= low - width) & (value <= high + width)
            close |= inside | (np.isnan(actual) & any_nan)
    return ~close


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """How many representable floats lie between the two (0 for equal values, both zeros included)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[expected.dtype.itemsize]

    def ordered(values: np.ndarray) -> np.ndarray:
        raw = np.ascontiguousarray(values).view(bits).astype(np.int64).reshape(values.shape)  # 0-d too
        return np.where(raw < 0, np.iinfo(bits).min - raw, raw)

    return np.abs(ordered(actual) - ordered(expected))


# ---- a user's own function ---------------------------------------------------------------------


def check_function(
    function: Callable[..., Any],
    *strategies: Any,
    max_examples: int = 100,
    backend: str | None = None,
    max_ulp: int = 4,
) -> None:
    """Check ``function``, written against ``dynfuse.numpy``, against the same function on NumPy, on
    arguments drawn from ``strategies`` (Hypothesis strategies of arrays or scalars).

    A function with an ``xp`` parameter is given ``xp=dynfuse.numpy`` and ``xp=numpy``; otherwise the
    NumPy run is a copy of the function whose module globals that name ``dynfuse.numpy`` (or its
    ``linalg``, ``fft``, ``random`` or one of its functions) name NumPy's instead. Floats may differ
    by ``max_ulp``; the rest must be equal, errors included. Raises Hypothesis' shrunk failure."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    on_numpy = _on_numpy(function)
    takes_namespace = "xp" in inspect.signature(function).parameters

    def dynfuse_call(xp: Any, *arguments: Any) -> Any:
        return function(*arguments, xp=xp) if takes_namespace else function(*arguments)

    def numpy_call(xp: Any, *arguments: Any) -> Any:
        if xp is np:
            return function(*arguments, xp=np) if takes_namespace else on_numpy(*arguments)
        return dynfuse_call(xp, *arguments)

    numpy_call.__name__ = getattr(function, "__name__", "function")

    @settings(max_examples=max_examples, deadline=None, database=None)
    @given(st.tuples(*strategies))
    def check(arguments: tuple) -> None:
        assert_matches_numpy(numpy_call, list(arguments), backend=backend, max_ulp=max_ulp)

    check()


def _on_numpy(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with the dynfuse.numpy names of its globals bound to NumPy's."""
    if not isinstance(function, types.FunctionType):
        return function
    rebound = {name: _numpy_twin(value) for name, value in function.__globals__.items()}
    return types.FunctionType(
        function.__code__, rebound, function.__name__, function.__defaults__, function.__closure__
    )


def _numpy_twin(value: Any) -> Any:
    import dynfuse.numpy as dnp

    modules = {dnp: np, dnp.linalg: np.linalg, dnp.fft: np.fft, dnp.random: np.random}
    if isinstance(value, types.ModuleType):
        return modules.get(value, value)
    module = getattr(value, "__module__", None) or ""
    if module.startswith("dynfuse.numpy") and hasattr(np, getattr(value, "__name__", "")):
        return getattr(np, value.__name__)
    return value
