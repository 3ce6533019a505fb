"""Differential tests with Hypothesis: lazy programs against the same programs run eagerly by NumPy.

Inputs cover 0-d arrays, size-0 and size-1 axes, broadcasting, every supported dtype, NaN, ±inf,
-0.0, subnormals and integer extremes (Hypothesis' defaults for NumPy dtypes), and strided and
negative-stride views.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dynfuse
from dynfuse import ops
from dynfuse.testing.programs import LAYOUTS
from dynfuse.testing.programs import laid_out as in_layout

from .helpers import DTYPES, assert_same, outcome

dnp = dynfuse.numpy
UFUNCS = {name: op.reference for name, op in ops.ELEMENTWISE.items() if isinstance(op.reference, np.ufunc)}


@st.composite
def laid_out(draw, dtype, shape):
    """An array of ``shape`` with edge values, contiguous, reversed or strided in memory."""
    return in_layout(draw(hnp.arrays(dtype, shape)), draw(st.sampled_from(LAYOUTS)))


@st.composite
def operands(draw, count, max_dims=3):
    shapes = draw(
        hnp.mutually_broadcastable_shapes(num_shapes=count, min_dims=0, max_dims=max_dims, max_side=4)
    )
    return [draw(laid_out(draw(st.sampled_from(DTYPES)), shape)) for shape in shapes.input_shapes]


def check(function, *values, zero_signs=True, max_ulp=4, atol=0.0):
    expected = outcome(function, *values)
    lazy = [dynfuse.asarray(value) if isinstance(value, np.ndarray) else value for value in values]
    actual = outcome(function, *lazy)
    if isinstance(expected, type):
        assert actual is expected, (actual, expected)
    else:
        with np.errstate(all="ignore"):
            assert_same(actual, expected, max_ulp=max_ulp, zero_signs=zero_signs, atol=atol)


@pytest.mark.parametrize("name", sorted(UFUNCS))
@settings(max_examples=25)
@given(data=st.data())
def test_elementwise_ufuncs(name, data):
    ufunc = UFUNCS[name]
    values = data.draw(operands(ufunc.nin))
    if ufunc.nin == 2 and data.draw(st.booleans()):
        scalar = data.draw(st.one_of(st.booleans(), st.integers(-300, 300), st.floats()))
        values[data.draw(st.integers(0, 1))] = scalar
    # Of +0.0 and -0.0, NumPy's min and max return the first or the second by the loop it picks for
    # the length (np.fmin(0.0, -0.0) is +0.0 for fewer than 4 elements, -0.0 from 4 on)
    ties_of_zeros = name in ("maximum", "minimum", "fmax", "fmin")
    check(ufunc, *values, zero_signs=not ties_of_zeros)


@settings(max_examples=60)
@given(values=operands(3), bounds=st.sampled_from(["both", "low", "high", "scalars"]))
def test_where_and_clip(values, bounds):
    condition, x, y = values
    check(np.where, condition, x, y)
    if bounds == "scalars":
        check(lambda a: np.clip(a, -1, 2.5), x)
    else:
        low = y if bounds != "high" else None
        high = condition if bounds != "low" else None
        # NumPy breaks ties between zeros of either sign by which loop it picks for the layout
        check(lambda a, lo, hi: np.clip(a, lo, hi), x, low, high, zero_signs=False)


@settings(max_examples=60)
@given(values=operands(1), to=st.sampled_from(DTYPES))
def test_astype(values, to):
    value = values[0]
    if value.dtype.kind == "f" and to.kind in "iu":
        # NumPy leaves a float outside the integer's range (and NaN, inf) undefined: its answer for
        # float64 2**32 -> uint32 is 4 from its scalar loop and 0 from its SIMD loop, by length
        limits, whole = np.iinfo(to), np.trunc(value)
        with np.errstate(invalid="ignore"):
            value[~((whole >= float(limits.min)) & (whole < float(limits.max) + 1))] = 0
    check(lambda a: a.astype(to), value)


REDUCTIONS = ["sum", "prod", "mean", "max", "min", "argmax", "argmin", "any", "all", "var", "std"]


@pytest.mark.parametrize("name", REDUCTIONS)
@settings(max_examples=40)
@given(data=st.data())
def test_reductions(name, data):
    dtype = data.draw(st.sampled_from(DTYPES))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    value = data.draw(laid_out(dtype, shape))
    if name == "prod" and dtype.kind == "c":
        # NumPy rounds a complex product by the loop its iterator picks for the layout (C's products
        # along the innermost axis in memory, its FMA loop across it), and where a part overflows that
        # rounding picks between inf and NaN: kernels round as NumPy does for C-contiguous data
        value = np.ascontiguousarray(value)
    ndim = len(shape)
    if name in ("argmax", "argmin"):
        axis = data.draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1))) if ndim else None
    else:
        single = [st.integers(-ndim, ndim - 1)] if ndim else []
        axis = data.draw(st.one_of(st.none(), hnp.valid_tuple_axes(ndim), *single))
    kwargs = {"axis": axis, "keepdims": data.draw(st.booleans())}
    if name in ("var", "std"):
        kwargs["ddof"] = data.draw(st.integers(0, 2))
    reduced = range(ndim) if axis is None else np.atleast_1d(axis)
    count = int(np.prod([shape[axis] for axis in reduced]))  # elements reduced into each result
    if name in ("sum", "prod", "mean", "var", "std") and data.draw(st.booleans()):
        # NumPy leaves a float cast to an integer undefined out of its range, NaN included: no integer
        # result from float data, nor from a mean or variance over fewer elements than ddof + 1 (NaN)
        defined = name in ("sum", "prod") or count > kwargs.get("ddof", 0)
        integers = [np.int64, np.uint32] if dtype.kind in "biu" and defined else []
        kwargs["dtype"] = data.draw(st.sampled_from([np.float64, np.float32, *integers]))
    # Float sums in another order than NumPy's (its pairwise blocks against our vector lanes) may
    # differ by up to about one rounding per element added: a bound that grows with the count
    max_ulp = max(4, count) if name in ("sum", "prod", "mean", "var", "std") else 4
    # summed in floats: float data, an integer mean, or integers summed as the dtype given says
    given = kwargs.get("dtype")
    inexact = value.dtype.kind in "fc" or name == "mean" if given is None else np.dtype(given).kind in "fc"
    if name in ("sum", "mean") and inexact:
        # ... ulps of its largest terms, not of its result: where terms cancel, that is as many more
        # ulps of the result as the sum's condition number, sum(|x|) / |sum(x)| (int32 values of
        # 1.8e9 summed as float32 to -3.4e7: 5 ulps of the result apart, 107 of them its condition)
        wide = value.astype(np.complex128 if value.dtype.kind == "c" else np.float64)
        with np.errstate(all="ignore"):
            condition = np.abs(wide).sum(axis=axis) / np.abs(wide.sum(axis=axis))
        condition = np.atleast_1d(condition)[np.isfinite(np.atleast_1d(condition))]
        max_ulp = int(np.ceil(max_ulp * max(1.0, condition.max(initial=1.0))))
    atol = 0.0
    result = (
        outcome(lambda: np.asarray(getattr(np, name)(value, **kwargs))) if name in ("var", "std") else None
    )
    if isinstance(result, np.ndarray) and result.dtype.kind == "f" and value.size:
        # Each implementation subtracts a mean it rounded its own way, off by up to a rounding per
        # element added, d = count * eps * max|x|; that adds up to count * d**2 to a variance. Where
        # the values are all but equal, it is the whole variance (NumPy's float32 variance of six
        # equal values of 3.1e7 is 4.0; the exact one is 0): a bound in absolute terms.
        off = count * np.finfo(result.dtype).eps * float(np.abs(value.astype(np.float64)).max())
        variance_off = count * off * off
        if variance_off > np.finfo(result.dtype).max:
            # Deviations that large overflow when squared: the variance is inf or finite by how each
            # implementation rounded its mean (NumPy's std of 64 equal values of 2.9e289 is inf)
            variance_off = math.inf
        atol = variance_off if name == "var" else math.sqrt(variance_off)
    # Of zeros of both signs, NumPy's max and min give the one the layout of its SIMD lanes picks
    signs = np.signbit(value) if value.dtype.kind == "f" else np.zeros(value.shape, bool)
    zeros = value == 0 if value.dtype.kind == "f" else np.zeros(value.shape, bool)
    both_zeros = (zeros & signs).any() and (zeros & ~signs).any()
    zero_signs = not (name in ("max", "min") and both_zeros)
    check(lambda a: getattr(np, name)(a, **kwargs), value, max_ulp=max_ulp, atol=atol, zero_signs=zero_signs)
    check(lambda a: getattr(a, name)(**kwargs), value, max_ulp=max_ulp, atol=atol, zero_signs=zero_signs)


VIEW_STEPS = st.sampled_from(
    ["transpose", "slice", "reverse", "expand", "squeeze", "reshape", "broadcast", "swap", "move"]
)


def apply_view(step, array, xp, draw):
    """One random view step; ``draw`` makes the same choices for NumPy and dynfuse."""
    ndim = array.ndim
    if step == "transpose":
        return xp.transpose(array, draw(st.permutations(range(ndim))))
    if step == "slice" and ndim:
        axis = draw(st.integers(0, ndim - 1))
        index = [slice(None)] * ndim
        index[axis] = slice(
            draw(st.integers(-5, 5)), draw(st.integers(-5, 5)), draw(st.sampled_from([1, 2, -1, -2, 3]))
        )
        return array[tuple(index)]
    if step == "reverse":
        return xp.flip(array, axis=draw(st.one_of(st.none(), st.integers(0, ndim - 1))) if ndim else None)
    if step == "expand":
        return xp.expand_dims(array, draw(st.integers(0, ndim)))
    if step == "squeeze":
        return xp.squeeze(array)
    if step == "reshape":
        return array.reshape(-1)
    if step == "broadcast":
        return xp.broadcast_to(array, (2, *array.shape))
    if step == "swap" and ndim >= 2:
        return xp.swapaxes(array, 0, -1)
    if step == "move" and ndim >= 2:
        return xp.moveaxis(array, 0, -1)
    return array[...]


@settings(max_examples=150)
@given(data=st.data(), steps=st.lists(VIEW_STEPS, max_size=5))
def test_view_chains_and_writes_through_them(data, steps):
    """A chain of views gives NumPy's values, and a later write to the base reaches it as in NumPy."""
    dtype = data.draw(st.sampled_from(DTYPES))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    source = data.draw(hnp.arrays(dtype, shape))
    expected_base = source.copy()  # an array even when 0-d, so a write changes it in place
    lazy_base = dynfuse.array(source).copy()
    # Same choices for both: draw each step's arguments once, replay them.
    choices: list = []

    def recording(strategy):
        choices.append(data.draw(strategy))
        return choices[-1]

    def replaying(_strategy):
        return choices.pop(0)

    expected, actual = expected_base, lazy_base
    for step in steps:
        expected = apply_view(step, expected, np, recording)
        actual = apply_view(step, actual, dnp, replaying)
    assert_same(actual, expected)
    expected_base += expected_base.dtype.type(1)
    lazy_base += lazy_base.dtype.type(1)
    assert_same(actual, expected)


PROGRAM_STEPS = st.sampled_from(["unary", "binary", "scalar", "where", "reduce", "view", "cast"])
UNARY_NAMES = sorted(name for name, ufunc in UFUNCS.items() if ufunc.nin == 1)
BINARY_NAMES = sorted(name for name, ufunc in UFUNCS.items() if ufunc.nin == 2)


def undefined_cast(value: np.ndarray, to: np.dtype) -> bool:
    """A float outside the integer's range (NaN, inf): NumPy flags it invalid and its answer depends
    on the loop it picks (4 elements of float32 -inf give uint32 2**31, one gives 0)."""
    with np.errstate(all="ignore", invalid="raise"):
        try:
            value.astype(to)
        except FloatingPointError:
            return True
    return False


# A power of a base a few ulps off NumPy's is off by its exponent times as many
_POWERS = frozenset({"power", "float_power"})


@settings(max_examples=120)
@given(data=st.data(), steps=st.lists(PROGRAM_STEPS, min_size=1, max_size=12))
def test_random_programs_with_shared_subexpressions(data, steps):
    """A random DAG whose values are reused by later steps; all of them are evaluated in one plan."""
    inputs = data.draw(operands(data.draw(st.integers(1, 3))))
    expected, actual = list(inputs), [dynfuse.asarray(value) for value in inputs]
    signed_zeros = [True] * len(inputs)  # False where a max or min chose between 0.0 and -0.0
    exact = [True] * len(inputs)  # False where a float may be a few ulps off NumPy's (``reproducible``)

    def pick():
        return data.draw(st.integers(0, len(expected) - 1))

    with np.errstate(all="ignore"):
        for step in steps:
            i, j, k = pick(), pick(), pick()
            op = None
            if step == "unary":
                function = UFUNCS[data.draw(st.sampled_from(UNARY_NAMES))]
                op = ops.ELEMENTWISE[function.__name__]
                arguments = (i,)
            elif step in ("binary", "scalar"):
                function = UFUNCS[data.draw(st.sampled_from(BINARY_NAMES))]
                op = ops.ELEMENTWISE[function.__name__]
                if step == "scalar":
                    scalar = data.draw(st.one_of(st.integers(-3, 3), st.floats(-4, 4)))
                    ufunc = function

                    def function(a, ufunc=ufunc, scalar=scalar):
                        return ufunc(a, scalar)

                    arguments = (i,)
                else:
                    arguments = (i, j)
                    if function is np.copysign and np.isnan(expected[j]).any():
                        continue  # a NaN's sign is the implementation's: NumPy's SIMD loops and libm differ
            elif step == "where":
                function, arguments = np.where, (i, j, k)
            elif step == "reduce":
                name = data.draw(st.sampled_from(["sum", "max", "mean", "any", "prod"]))
                op = ops.REDUCTIONS[name]

                def function(a, name=name):
                    return (
                        getattr(np, name)(a, axis=-1, keepdims=True) if np.ndim(a) else getattr(np, name)(a)
                    )

                arguments = (i,)
            elif step == "view":
                function, arguments = (lambda a: a[..., ::-1] if np.ndim(a) else a.T), (i,)
            else:
                to = data.draw(st.sampled_from(DTYPES))
                if undefined_cast(expected[i], to) or (not exact[i] and np.dtype(to).kind not in "fc"):
                    continue  # a float a few ulps off NumPy's may cast to another integer
                function, arguments = (lambda a, to=to: a.astype(to)), (i,)
            inexact = [not exact[n] and expected[n].dtype.kind in "fc" for n in arguments]
            if op is not None and (op.jumps or op.name in _POWERS) and any(inexact):
                continue  # a float a few ulps off NumPy's may jump to another result (``Op.jumps``),
                # or a power multiply its error by the exponent
            want = outcome(function, *(expected[n] for n in arguments))
            if isinstance(want, type):
                continue  # an op NumPy refuses is checked elsewhere; the program goes on without it
            expected.append(np.asarray(want))
            actual.append(function(*(actual[n] for n in arguments)))
            signed = op is None or op.signed_zeros
            signed_zeros.append(signed and all(signed_zeros[n] for n in arguments))
            exact.append((op is None or op.reproducible) and not any(inexact))
    dynfuse.evaluate(*actual)
    # A transcendental's float32 or float16 result, within a few of its own ulps of NumPy's, keeps
    # that error when a later step widens it (``where`` of float32 and int32 is float64): floats
    # are compared in the ulps of the coarsest float the program computed.
    coarsest = max((np.finfo(value.dtype).eps for value in expected if value.dtype.kind == "f"), default=0.0)
    for got, want, signed in zip(actual, expected, signed_zeros, strict=True):
        widened = coarsest / np.finfo(want.dtype).eps if want.dtype.kind == "f" else 1
        assert_same(got, want, max_ulp=4 * int(widened), zero_signs=signed)
