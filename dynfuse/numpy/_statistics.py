"""Reductions and statistics.

Recorded lazily where NumPy computes them from elementwise ops and reductions (``nansum`` is a sum
of the array with NaN replaced by 0, ``ptp`` a max minus a min, ``average`` a weighted sum over a
sum of weights): the scheduler fuses them like any other. The rest are library calls (barriers):
running totals (``cumsum``), order statistics (``median``, ``percentile``), and the NaN-ignoring
statistics whose warnings about all-NaN slices depend on the data.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from .. import ops, record
from ..array import LazyArray

__all__ = [
    "all",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "average",
    "count_nonzero",
    "cumprod",
    "cumsum",
    "max",
    "mean",
    "median",
    "min",
    "nancumprod",
    "nancumsum",
    "nanmax",
    "nanmean",
    "nanmedian",
    "nanmin",
    "nanpercentile",
    "nanprod",
    "nanquantile",
    "nanstd",
    "nansum",
    "nanvar",
    "percentile",
    "prod",
    "ptp",
    "quantile",
    "std",
    "sum",
    "var",
]

sum = LazyArray.sum
prod = LazyArray.prod
mean = LazyArray.mean
var = LazyArray.var
std = LazyArray.std
max = amax = LazyArray.max
min = amin = LazyArray.min
any = LazyArray.any
all = LazyArray.all
argmax = LazyArray.argmax
argmin = LazyArray.argmin
cumsum = LazyArray.cumsum
cumprod = LazyArray.cumprod


def _given(**arguments: Any) -> dict[str, Any]:
    """The keyword arguments a caller gave (NumPy's ``_NoValue`` marks the others)."""
    return {key: value for key, value in arguments.items() if value is not np._NoValue}


def _without_nan(a: Any, value: int) -> Any:
    """NumPy's ``_replace_nan``: floating arrays with NaN replaced by ``value``; others as they are."""
    a = record.lazy(a)
    if a.dtype.kind not in "fc":
        return a
    isnan = record.elementwise(ops.ELEMENTWISE["isnan"], (a,))
    return record.elementwise(ops.ELEMENTWISE["where"], (isnan, value, a))


def _ignoring_nan(name: str, total: Callable, neutral: int) -> Callable:
    """``numpy.<name>`` as NumPy computes it: ``total`` of the array with NaN replaced by ``neutral``."""

    @functools.wraps(getattr(np, name))
    def ignoring_nan(a: Any, *args: Any, **kwargs: Any) -> Any:
        return total(_without_nan(a, neutral), *args, **kwargs)

    return ignoring_nan


nansum = _ignoring_nan("nansum", sum, 0)
nanprod = _ignoring_nan("nanprod", prod, 1)
nancumsum = _ignoring_nan("nancumsum", cumsum, 0)
nancumprod = _ignoring_nan("nancumprod", cumprod, 1)


def count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Any:
    """The elements that are not zero, as NumPy counts them: each cast to bool, summed in intp
    (NaN counts, -0.0 does not). One reduction, fused with what computes ``a``."""
    a = record.lazy(a)
    if a.dtype.kind not in "biufc":  # strings, objects, dates: NumPy's own
        arguments = {"axis": axis, "keepdims": keepdims}
        return record.fallback(
            "count_nonzero", np.count_nonzero, (a,), arguments, f"dtype {a.dtype} is not recorded"
        )
    if axis is not None and a.ndim:  # NumPy's errors, which name no other function (a 0-d
        axis = normalize_axis_tuple(axis, a.ndim)  # array's axis 0 or -1 is the sum's quirk)
    truth = a if a.dtype == np.bool_ else a.astype(np.bool_)
    return sum(truth, axis=axis, dtype=np.intp, keepdims=keepdims)


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: Any = np._NoValue) -> Any:
    """The range, as NumPy's ``_ptp`` computes it: max minus min (so booleans raise, as there)."""
    given = _given(keepdims=keepdims)
    largest = max(a, axis=axis, **given)
    return record.elementwise(ops.ELEMENTWISE["subtract"], (largest, min(a, axis=axis, **given)), out=out)


def average(
    a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *, keepdims: Any = np._NoValue
) -> Any:
    """A mean, or with weights the sum of ``a * weights`` over the sum of weights, in NumPy's dtype.

    Weights that sum to zero raise NumPy's ZeroDivisionError here, so their sum is computed now.
    """
    a = record.lazy(a)
    if axis is not None:
        axis = normalize_axis_tuple(axis, a.ndim, argname="axis")
    given = _given(keepdims=keepdims)
    if weights is None:
        result = mean(a, axis, **given)
        scale = record.lazy(result.dtype.type(a.size / result.size))
    else:
        weights = _weights_along(record.lazy(weights), a, axis)
        wider = (np.float64,) if a.dtype.kind in "biu" else ()
        dtype = np.result_type(a.dtype, weights.dtype, *wider)
        scale = sum(weights, axis=axis, dtype=dtype, **given)
        if (np.asarray(scale) == 0.0).any():
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        products = record.ufunc_call(ops.ELEMENTWISE["multiply"], (a, weights), None, {"dtype": dtype})
        result = sum(products, axis, **given) / scale
    if not returned:
        return result
    if scale.shape != result.shape:
        scale = record.broadcast_to(scale, result.shape).copy()
    return result, scale


def _weights_along(weights: Any, a: Any, axis: tuple[int, ...] | None) -> Any:
    """NumPy's ``_weights_are_valid``: weights of ``a``'s shape, or of its extents along ``axis``,
    set up to broadcast against ``a``."""
    if weights.shape == a.shape:
        return weights
    if axis is None:
        raise TypeError("Axis must be specified when shapes of a and weights differ.")
    if weights.shape != tuple(a.shape[position] for position in axis):
        raise ValueError(
            f"average: shape of weights {weights.shape} must be consistent with shape of a {a.shape} "
            f"along axis {axis}"
        )
    weights = record.transpose(weights, tuple(np.argsort(axis)))
    return record.reshape(weights, tuple(extent if ax in axis else 1 for ax, extent in enumerate(a.shape)))


def _statistic(name: str) -> Callable:
    """A statistic NumPy computes in a library call, with NumPy's signature: ``a`` is its operand,
    and so is ``q`` when given as an array (NumPy's dtype rules treat Python numbers for ``q``
    apart: those are a param); any other argument is a param.

    NumPy runs it at once (a fallback) where its shapes follow special cases of NumPy's code rather
    than a rule: ``a`` 0-d (an axis check that takes it for 1-d, or not) or empty (NaN statistics
    that ignore the shape of ``q``), or ``q`` of two or more dimensions (placed among the kept axes
    by ``nanpercentile``)."""
    numpy_function = getattr(np, name)
    signature = inspect.signature(numpy_function)
    op = ops.BARRIERS[name]

    @functools.wraps(numpy_function)
    def statistic(*args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(*args, **kwargs).arguments
        if np.ndim(arguments["a"]) == 0 or 0 in np.shape(arguments["a"]) or np.ndim(arguments.get("q")) > 1:
            why = "a 0-d or empty array, or q of more than one dimension, is not recorded"
            return record.fallback(name, numpy_function, args, kwargs, why)
        out = arguments.pop("out", None)
        operands = [arguments.pop("a")]
        if isinstance(arguments.get("q"), (LazyArray, np.ndarray, np.generic)):
            operands.append(arguments.pop("q"))
        return record.barrier(op, operands, arguments, out=out)

    return statistic


median = _statistic("median")
nanmedian = _statistic("nanmedian")
percentile = _statistic("percentile")
nanpercentile = _statistic("nanpercentile")
quantile = _statistic("quantile")
nanquantile = _statistic("nanquantile")
nanmean = _statistic("nanmean")
nanvar = _statistic("nanvar")
nanstd = _statistic("nanstd")
nanmax = _statistic("nanmax")
nanmin = _statistic("nanmin")
