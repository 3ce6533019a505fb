"""dtypes: NEP 50 promotion and casting give NumPy's dtypes and values, or raise NumPy's exceptions."""

import operator

import numpy as np
import pytest

import dynfuse
from dynfuse import dtypes, ops

from .helpers import DTYPES, assert_same, outcome

BINARY = sorted(
    name
    for name, op in ops.ELEMENTWISE.items()
    if isinstance(op.reference, np.ufunc) and op.reference.nin == 2
)
UNARY = sorted(
    name
    for name, op in ops.ELEMENTWISE.items()
    if isinstance(op.reference, np.ufunc) and op.reference.nin == 1
)
WEAK_SCALARS = [
    True,
    False,
    0,
    1,
    3,
    -1,
    127,
    128,
    255,
    256,
    300,
    -129,
    2**31,
    2**63 - 1,
    2**64,
    0.5,
    -0.0,
    float("inf"),
    float("nan"),
    1e300,
    1 + 2j,
]


def sample(dtype):
    """A few values of each dtype, with signs and zero where the dtype has them."""
    if dtype.kind == "b":
        return np.array([True, False, True, False, True])
    if dtype.kind == "u":
        return np.array([3, 0, np.iinfo(dtype).max, 1, 7], dtype)
    if dtype.kind == "i":
        return np.array([3, -2, np.iinfo(dtype).min, np.iinfo(dtype).max, -1], dtype)
    return np.array([2.5, -0.0, np.nan, -np.inf, 0.0], dtype)


def check(function, *operands):
    """``function`` on lazy operands against ``function`` on the NumPy ones."""
    expected = outcome(function, *operands)
    lazy = [dynfuse.asarray(value) if isinstance(value, np.ndarray) else value for value in operands]
    actual = outcome(function, *lazy)
    if isinstance(expected, type):
        assert actual is expected, (function, operands, actual, expected)
    else:
        # Which zero fmax/fmin return for equal zeros depends on NumPy's SIMD lanes (the array's
        # length), not on anything a compiled loop could follow.
        with np.errstate(all="ignore"):
            assert_same(actual, expected, zero_signs=function not in (np.fmax, np.fmin))


@pytest.mark.parametrize("name", BINARY)
def test_binary_promotion_table(name):
    ufunc = getattr(np, name)
    for left in DTYPES:
        for right in DTYPES:
            check(ufunc, sample(left), sample(right)[::-1])


@pytest.mark.parametrize("name", BINARY)
def test_binary_weak_scalars_on_either_side(name):
    ufunc = getattr(np, name)
    for dtype in DTYPES:
        for scalar in WEAK_SCALARS:
            check(ufunc, sample(dtype), scalar)
            check(ufunc, scalar, sample(dtype))


@pytest.mark.parametrize("name", BINARY)
def test_numpy_scalars_are_strong(name):
    ufunc = getattr(np, name)
    for dtype in DTYPES:
        for scalar in (np.float32(1.5), np.int8(3), np.uint64(7), np.bool_(True), np.float64(-0.0)):
            check(ufunc, sample(dtype), scalar)


@pytest.mark.parametrize("name", UNARY)
def test_unary_every_dtype(name):
    ufunc = getattr(np, name)
    for dtype in DTYPES:
        check(ufunc, sample(dtype))


OPERATORS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "**": lambda a, b: a**b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
    "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


@pytest.mark.parametrize("symbol", sorted(OPERATORS))
def test_operators_with_python_scalars_on_both_sides(symbol):
    function = OPERATORS[symbol]
    for dtype in DTYPES:
        for scalar in (True, 2, -1, -3, 300, 0.5, 2.0, 1.5, float("nan")):
            check(function, sample(dtype), scalar)
            check(function, scalar, sample(dtype))
        check(function, sample(dtype), sample(np.dtype(np.int16)))


@pytest.mark.parametrize("symbol", ["-", "+", "~", "abs"])
def test_unary_operators(symbol):
    function = {"-": lambda a: -a, "+": lambda a: +a, "~": lambda a: ~a, "abs": abs}[symbol]
    for dtype in DTYPES:
        check(function, sample(dtype))


def test_uint8_plus_300_raises_like_numpy():
    with pytest.raises(OverflowError, match="300"):
        dynfuse.asarray(np.zeros(3, np.uint8)) + 300


def test_comparison_with_out_of_range_python_int_is_exact():
    values = np.array([0, 200, 255], np.uint8)
    assert_same(dynfuse.asarray(values) < 300, values < 300)
    assert_same(dynfuse.asarray(values) == -1, values == -1)


IN_PLACE = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
}


@pytest.mark.parametrize("symbol", sorted(IN_PLACE))
def test_in_place_operators_cast_like_numpy(symbol):
    """``x op= y`` computes in the promoted dtype and casts back with 'same_kind', or raises as NumPy does."""
    function = IN_PLACE[symbol]
    for dtype in DTYPES:
        for other in [2, -1, 300, 0.5, *(sample(d)[::-1] for d in DTYPES)]:
            target = sample(dtype)
            expected = outcome(function, target.copy(), other)
            lazy_target = dynfuse.array(sample(dtype))
            lazy_other = dynfuse.asarray(other) if isinstance(other, np.ndarray) else other
            actual = outcome(function, lazy_target, lazy_other)
            if isinstance(expected, type):
                assert actual is expected, (symbol, dtype, other, actual, expected)
                assert_same(lazy_target, sample(dtype))  # unchanged by the failed operation
            else:
                assert actual is lazy_target
                assert_same(actual, expected)


# ---- the probes themselves ----------------------------------------------------------------------


def test_python_scalars_are_weak_and_numpy_scalars_strong():
    for value in (True, 3, 2.5, 1j):
        assert dtypes.is_weak_scalar(value)
    for value in (np.float64(2.5), np.int8(3), np.bool_(True), np.ones(1), "3"):
        assert not dtypes.is_weak_scalar(value)


def test_only_a_python_int_that_may_not_fit_is_keyed_by_its_value():
    assert dtypes.scalar_key(0) is int and dtypes.scalar_key(127) is int
    assert dtypes.scalar_key(128) == (int, 128) and dtypes.scalar_key(-1) == (int, -1)
    assert dtypes.scalar_key(1e300) is float and dtypes.scalar_key(True) is bool


def test_probes_give_a_ufuncs_own_loop_and_weak_scalars_their_rule():
    def dtype_of(name, *operands):
        return dtypes.result_dtype(ops.elementwise_op(name), list(operands), ())

    assert dtype_of("sqrt", (np.dtype(np.int8), None)) == np.float16
    assert dtype_of("add", (np.dtype(np.uint8), None), (None, 2.5)) == np.float64
    assert dtype_of("add", (np.dtype(np.float32), None), (None, 2.5)) == np.float32
    assert dtype_of("less", (np.dtype(np.uint8), None), (None, 300)) == np.bool_
    with pytest.raises(OverflowError):
        dtype_of("add", (np.dtype(np.uint8), None), (None, 300))


def test_reductions_of_empty_arrays_raise_as_numpys_do_for_their_shape():
    maximum = ops.REDUCTIONS["max"]
    float64 = np.dtype(np.float64)
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        dtypes.reduction_dtype(maximum, float64, (0, 3), (("axis", (0,)), ("keepdims", False)))
    assert dtypes.reduction_dtype(maximum, float64, (0, 3), (("axis", (1,)), ("keepdims", False))) == float64


def test_output_casts_raise_numpys_exception():
    add = ops.elementwise_op("add")
    operands = [(np.dtype(np.float64), None), (None, 1)]
    with pytest.raises(TypeError) as numpys:
        np.add(np.ones(1), 1, out=np.ones(1, np.int64))
    with pytest.raises(TypeError) as ours:
        dtypes.check_output_cast(add, operands, (), np.dtype(np.int64))
    assert (type(ours.value), str(ours.value)) == (type(numpys.value), str(numpys.value))
    dtypes.check_output_cast(add, operands, (), np.dtype(np.float32))  # same_kind allows it


def test_library_call_dtypes_and_their_output_casts():
    matmul = ops.BARRIERS["matmul"]
    assert dtypes.barrier_dtype(matmul, [(np.dtype(np.int8), 2), (np.dtype(np.float32), 2)], ()) == np.float32
    with pytest.raises(TypeError, match="Cannot cast ufunc 'matmul' output"):
        dtypes.barrier_dtype(matmul, [(np.dtype(np.float64), 2)] * 2, (), np.dtype(np.int32))


def test_the_probe_cache_empties_when_full():
    cache = dtypes._BoundedCache(limit=2)
    cache["a"], cache["b"] = 1, 2
    cache["c"] = 3
    assert cache == {"c": 3}
