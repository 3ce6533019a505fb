"""What dynfuse does not record lazily runs through NumPy on materialized inputs, counted by name."""

import numpy as np
import pytest

import dynfuse

from .helpers import assert_same

dnp = dynfuse.numpy


UNRECORDED_FUNCTION = "a NumPy function dynfuse does not record"
ADVANCED_INDEX = "an index of masks, new axes, or arrays that are not integers, is not recorded"


@pytest.mark.parametrize(
    ("name", "why", "function"),
    [
        ("sort", UNRECORDED_FUNCTION, lambda a: np.sort(a, axis=-1)),
        ("getitem", ADVANCED_INDEX, lambda a: a[a[:, 0] > 0.5]),  # a mask of rows
        ("linalg.pinv", UNRECORDED_FUNCTION, lambda a: np.linalg.pinv(a)),
        ("argsort", UNRECORDED_FUNCTION, lambda a: np.argsort(a, axis=-1)),
        (
            "add.accumulate",
            "a ufunc method or keywords dynfuse does not record",
            lambda a: np.add.accumulate(a, axis=0),
        ),
        ("unique", UNRECORDED_FUNCTION, lambda a: np.unique(a)),
        ("round", UNRECORDED_FUNCTION, lambda a: np.round(a, 1)),
    ],
)
def test_fallbacks_are_correct_counted_and_say_why(name, why, function):
    values = np.arange(6.0).reshape(2, 3) / 2
    expected = function(values)
    actual = function(dynfuse.asarray(values))
    assert dynfuse.stats()["fallback_names"] == {name: 1}
    assert dynfuse.stats()["fallback_reasons"] == {name: why}
    if isinstance(expected, tuple):
        for got, want in zip(actual, expected, strict=True):
            assert_same(got, want)
    else:
        assert_same(actual, expected)


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize == 8, reason="long double is float64 here")
def test_an_unrecorded_dtype_falls_back_and_says_so():
    values = (np.arange(6.0).reshape(2, 3) / 2).astype(np.longdouble)
    actual = np.sin(dynfuse.asarray(values))
    np.testing.assert_array_equal(np.asarray(actual), np.sin(values))
    why = f"dtype {np.dtype(np.longdouble)} is not recorded"
    assert dynfuse.stats()["fallback_reasons"] == {"sin": why}


def test_ufunc_out_to_a_numpy_array_writes_it():
    target = np.zeros(3)
    result = np.add(dynfuse.asarray(np.ones(3)), 2, out=target)
    assert result is target
    np.testing.assert_array_equal(target, [3.0, 3.0, 3.0])


def test_array_function_keeps_recorded_functions_lazy():
    x = dynfuse.asarray(np.arange(6.0).reshape(2, 3))
    results = [
        np.where(x > 2, x, -x),
        np.sum(x, axis=0),
        np.clip(x, 1, 4),
        np.broadcast_to(x, (2, 2, 3)),
        np.transpose(x),
        np.mean(x),
        np.max(x, axis=1, keepdims=True),
        np.squeeze(x[None]),
        np.flip(x),
        np.moveaxis(x, 0, 1),
        np.expand_dims(x, 0),
        np.reshape(x, (3, 2)),
        np.ravel(x),
        np.shape(x),
    ]
    assert dynfuse.stats()["materializations"] == 0 and dynfuse.stats()["fallbacks"] == 0
    assert all(isinstance(result, dynfuse.LazyArray) for result in results[:-1])
    assert results[-1] == (2, 3)


def test_matmul_is_a_recorded_barrier_through_every_spelling():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2)
    for function in (np.matmul, dnp.matmul, lambda x, y: x @ y):
        result = function(dynfuse.asarray(a), dynfuse.asarray(b))
        assert "matmul" in dynfuse.explain(result) and "[barrier]" in dynfuse.explain(result)
        assert_same(result, a @ b)
    assert_same(np.ones(3) @ dynfuse.asarray(b), np.ones(3) @ b)
    assert dynfuse.stats()["fallbacks"] == 0
