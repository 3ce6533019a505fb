"""Helpers shared by the tests: dtypes, and comparisons with NumPy."""

import numpy as np

import dynfuse

DTYPES = list(dynfuse.dtypes.SUPPORTED_DTYPES)


def assert_same(actual, expected):
    """Same type of result, shape, dtype and values; NaN where NumPy has NaN; the sign of zeros too."""
    assert isinstance(actual, dynfuse.LazyArray), type(actual)
    value = np.asarray(actual)
    expected = np.asarray(expected)
    assert value.dtype == expected.dtype, (value.dtype, expected.dtype)
    assert value.shape == expected.shape, (value.shape, expected.shape)
    np.testing.assert_array_equal(value, expected)
    if expected.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(value), np.signbit(expected))


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
