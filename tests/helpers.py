"""Helpers shared by the tests: dtypes, comparisons with NumPy, the CPU backend's kernels, and a
lock held by another thread (for forks)."""

import contextlib
import dataclasses
import threading
from collections.abc import Iterable, Iterator

import numpy as np
import pytest

import dynfuse
from dynfuse import execute, registry, replay
from dynfuse.backends import cpu
from dynfuse.testing.compare import ulp_distance

DTYPES = list(dynfuse.dtypes.SUPPORTED_DTYPES)


def assert_same(actual, expected, max_ulp=4, zero_signs=True, atol=0.0):
    """Same type of result, shape, dtype and values; NaN where NumPy has NaN; the sign of zeros too.

    Bools and integers are exact. Floats may differ by ``max_ulp`` units in the last place, as
    C's libm and NumPy's own SIMD loops differ for transcendentals; infinities and zeros are exact.
    Floats within ``atol`` of NumPy's pass as they are (where the error bound is absolute). Complex
    numbers: each part as a float.
    """
    assert isinstance(actual, dynfuse.LazyArray), type(actual)
    value = np.asarray(actual)
    expected = np.asarray(expected)
    assert value.dtype == expected.dtype, (value.dtype, expected.dtype)
    assert value.shape == expected.shape, (value.shape, expected.shape)
    if expected.dtype.kind == "c":
        for part in ("real", "imag"):
            _same_floats(getattr(value, part), getattr(expected, part), max_ulp, zero_signs, atol)
    elif expected.dtype.kind == "f":
        _same_floats(value, expected, max_ulp, zero_signs, atol)
    else:
        np.testing.assert_array_equal(value, expected)


def _same_floats(value, expected, max_ulp, zero_signs, atol):
    np.testing.assert_array_equal(np.isnan(value), np.isnan(expected))
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.abs(value.astype(np.float64) - expected) <= atol if atol else np.zeros(expected.shape, bool)
    exact = (np.isinf(expected) | (expected == 0)) & ~near
    np.testing.assert_array_equal(value[exact], expected[exact])
    if zero_signs:
        np.testing.assert_array_equal(np.signbit(value[exact]), np.signbit(expected[exact]))
    finite = ~np.isnan(expected) & ~near
    distance = ulp_distance(value[finite], expected[finite])
    assert distance.size == 0 or distance.max() <= max_ulp, (value, expected, distance.max())


def outcome(function, *args):
    """What ``function(*args)`` gives, materialized: its result, or the type of the exception it raises.

    Errors that depend on the data inside arrays (an integer array raised to a negative power)
    can only appear when the values are computed, so a lazy result counts once it is materialized.
    """
    with np.errstate(all="ignore"):
        try:
            result = function(*args)
            if isinstance(result, dynfuse.LazyArray):
                dynfuse.evaluate(result)
            return result
        except Exception as error:
            return type(error)


@contextlib.contextmanager
def on_cpu_leaving_to_numpy(monkeypatch, library_ops: Iterable[tuple[str, str]]) -> Iterator[None]:
    """The CPU backend, its target's ``library_ops`` these: set on the backend itself (another test
    may have set its target there, over the class's), and the plans made meanwhile forgotten."""
    monkeypatch.setattr(registry, "backend", "cpu")
    target = dataclasses.replace(cpu.BACKEND.target, library_ops=frozenset(library_ops))
    monkeypatch.setattr(cpu.BACKEND, "target", target)
    replay.clear_plans()
    try:
        yield
    finally:
        replay.clear_plans()


@contextlib.contextmanager
def backend(name: str) -> Iterator[None]:
    """``name`` as the chosen backend inside the block; the test skipped where it cannot run here."""
    reason = registry.unavailable_reason(name)
    if reason is not None:
        pytest.skip(reason)
    saved = registry.backend
    dynfuse.set_backend(name)
    try:
        yield
    finally:
        dynfuse.set_backend(saved)


def kernel_of(array):
    """The one kernel the CPU backend's plan for ``array`` runs (nothing runs)."""
    _, plan = execute.explain_plan([array._node], cpu.BACKEND)
    (step,) = plan.kernels
    return step.kernel


@contextlib.contextmanager
def held_by_another_thread(lock) -> Iterator[None]:
    """``lock`` held by a thread of its own for the block, as a process forked then finds it."""
    holding, release = threading.Event(), threading.Event()

    def hold_the_lock():
        with lock:
            holding.set()
            release.wait(timeout=60)

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    holding.wait(timeout=60)
    try:
        yield
    finally:
        release.set()
        holder.join()
