"""The op table: the single place that knows what an op means.

Each op is one entry: its kind, which tells the scheduler how it may fuse, and its NumPy reference,
which is at once the semantics of the op (the reference executor runs it), the rule for its result
dtype and errors (``dtypes`` probes it), and the oracle every backend is tested against; and what else
holds for it on every backend: its cost, whether it is reproducible, whether its result jumps.
Each code generator keeps its scalar code for an elementwise op, and the code that combines a
reduction's accumulator with a value (``REDUCTION_CODE``), in tables keyed by the op's name
(``codegen.llvm``, ``codegen.cuda``); how each reduction accumulates, the same on every backend, is
``codegen.common.REDUCTION_FACTS``. ``tests/test_op_table.py`` checks them against this table.
"""

from __future__ import annotations

import enum
import functools
import math
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import views


class OpKind(enum.Enum):
    BUFFER = "buffer"  # a leaf holding a materialized ndarray
    SCALAR = "scalar"  # a leaf holding a weak Python scalar (a kernel parameter, not data)
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    SCAN = "scan"  # a running reduction along one axis (cumsum): per element, in order along the axis
    VIEW = "view"  # a new index map over the same data: no arithmetic, no copy
    # Elements moved to other places (``np.roll``): a new array of its own, fused as an index map
    # over its input, as a view is
    MOVE = "move"
    # Elements read at positions integer arrays give (``x[idx]``, ``take``): a new array, read
    # inside kernels by a load whose position the index arrays' values move
    GATHER = "gather"
    BARRIER = "barrier"  # a library call (matmul, concatenate): not fusable, its neighbours still are


COMPUTING = (OpKind.ELEMENTWISE, OpKind.REDUCTION, OpKind.SCAN)  # the kinds that do arithmetic


@dataclass(frozen=True, eq=False)
class Op:
    name: str
    kind: OpKind
    reference: Callable[..., Any] | None = None
    # For the rare error that depends on the values inside an array operand, raised where the op is
    # written: ``value_check(result_dtype, operand_nodes, value_of)``, where ``value_of(node)``
    # materializes one operand (so only an op that can fail this way pays for it).
    value_check: Callable[..., None] | None = None
    # Relative cost of computing one element, in units of one element's load or store: what the
    # scheduler weighs against memory traffic when it decides to recompute a shared node.
    cost: float = 1.0
    # A composite reduction (mean, var, std) is recorded as the primitives it is made of:
    # ``expand(emit, operand, axes, keepdims, dtype, ddof)`` -> node (see ``record.Emitter``).
    expand: Callable[..., Any] | None = None
    # A barrier's result shape, ``shape_rule(*operand_shapes, **params)``, raising NumPy's errors.
    # None for a barrier that only moves elements: NumPy's own call on zero-byte stand-ins gives
    # it (``views.shape_by_reference``). A barrier's dtype is always its reference's, probed.
    shape_rule: Callable[..., tuple[int, ...]] | None = None
    # Whether every correct implementation gives NumPy's float results bit for bit: IEEE's correctly
    # rounded operations and exact ones. Not libm-style functions (their last bit varies between
    # libraries) nor float sums and products (their rounding depends on the order of the terms).
    # What a differential test may compare exactly, and feed to a comparison or a floor.
    reproducible: bool = True
    # Whether every correct implementation gives a zero result NumPy's sign. Not a max or min, as a
    # reduction or elementwise (and clip): which of equal 0.0 and -0.0 it keeps, NumPy's own loops
    # decide by their vector width and the element's place in the array.
    signed_zeros: bool = True
    # Whether NumPy gives a 0-d result as a scalar, as every ufunc does; ``where`` gives a 0-d array.
    scalar_results: bool = True
    # Whether the result jumps where a float operand crosses a value (a comparison, a floor, an
    # argmax): fed a float one ulp away from NumPy's, it may differ in every bit, and not by a bug.
    jumps: bool = False
    # ``bind(**params)``: the reference with these params, as one quick call of its operand, where
    # the params take work to turn into the reference's (a getitem's index): what a replay applies
    # to each new leaf. Without it, the reference is partially applied.
    bind: Callable[..., Callable[[Any], Any]] | None = None
    # Whether its reference, not a ufunc, takes ``out``: a fresh C-contiguous array of the result's
    # shape and dtype, which it fills (the reference executor gives it one of the host's pool).
    fills_out: bool = False

    def __repr__(self) -> str:
        return self.name

    @functools.cached_property
    def computes_into(self) -> bool:
        """Whether its reference is a ufunc of one result, which writes it into an array given as
        ``out`` (the reference executor's reuse of memory)."""
        return isinstance(self.reference, np.ufunc) and self.reference.nout == 1

    @property
    def reports_float_errors(self) -> bool:
        """Whether NumPy's loop for it can report a floating-point error (divide by zero, overflow,
        underflow, invalid): what a compiled kernel's flag makes NumPy run again (``interpret``)."""
        return self.kind in COMPUTING and self.name not in _QUIET

    def reports_float_errors_on(self, dtypes: Iterable[np.dtype | None]) -> bool:
        """``reports_float_errors`` for a loop of these operand and result dtypes: one that computes
        in floats (a cast to float16 overflows), or an integer division (by zero); integer
        arithmetic otherwise wraps without a word."""
        if not self.reports_float_errors:
            return False
        return self.name in _DIVISION or any(dtype is not None and dtype.kind in "fc" for dtype in dtypes)

    def reproducible_on(self, dtypes: Iterable[np.dtype | None]) -> bool:
        """``reproducible`` for operands of these dtypes. Of complex ones, an elementwise op's result
        is only where it is computed part by part, selects or tests: NumPy rounds a product, a
        quotient or a magnitude by the loop it picks for the operands' layout (its SIMD loops' fused
        multiply-adds, or C's products and ``hypot`` in its scalar ones)."""
        complex_operands = any(dtype is not None and dtype.kind == "c" for dtype in dtypes)
        if self.kind is OpKind.ELEMENTWISE and complex_operands:
            return self.reproducible and self.name in _EXACT_ON_COMPLEX
        return self.reproducible

    def bound(self, params: tuple) -> Callable[[Any], Any]:
        """The reference with ``params`` (a node's), as a call of its one operand."""
        if self.bind is not None:
            return self.bind(**dict(params))
        return functools.partial(self.reference, **dict(params))


def discards_imaginary(source: np.dtype | None, dtype: np.dtype) -> bool:
    """A cast NumPy warns of (``ComplexWarning``): complex values to a real dtype other than bool."""
    return source is not None and source.kind == "c" and np.dtype(dtype).kind not in "cb"


def _astype(a: Any, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
    """A complex value cast to a real dtype is its real part: NumPy's warning of it was given where
    the cast was written."""
    a = np.asarray(a)
    if discards_imaginary(a.dtype, dtype):
        a = a.real
    if out is not None:  # an array of the cast's shape and dtype (the reference executor's)
        np.copyto(out, a, casting="unsafe")
        return out
    return a.astype(dtype)


def _to_numpy_index(index: tuple) -> tuple:
    """Turn a normalized basic index (see ``views.basic_index``) back into a NumPy index.

    The trailing Ellipsis makes NumPy return a 0-d view where a bare int index would give a scalar
    copy: a getitem node is always a view, and a copy is a separate node.
    """
    items = []
    for item in index:
        if isinstance(item, tuple):
            start, step, length = item
            stop = start + length * step
            items.append(slice(start, stop if stop >= 0 else None, step))
        else:
            items.append(item)
    return (*items, Ellipsis)


def _reshape(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The array's own method, for every array type: CuPy's function names the shape ``newshape``."""
    return a.reshape(shape)


def _getitem(a: np.ndarray, index: tuple) -> np.ndarray:
    return a[_to_numpy_index(index)]


def _bind_getitem(index: tuple) -> Callable[[np.ndarray], np.ndarray]:
    return operator.itemgetter(_to_numpy_index(index))


BUFFER = Op("buffer", OpKind.BUFFER)
SCALAR = Op("scalar", OpKind.SCALAR)

# Elementwise ops that are NumPy ufuncs: the ufunc is the reference.
UFUNC_NAMES = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "floor_divide",
    "remainder",
    "fmod",
    "power",
    "float_power",
    "negative",
    "positive",
    "conjugate",
    "absolute",
    "fabs",
    "sign",
    "sqrt",
    "cbrt",
    "square",
    "reciprocal",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "arctan2",
    "sinh",
    "cosh",
    "tanh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "hypot",
    "floor",
    "ceil",
    "trunc",
    "rint",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "invert",
    "left_shift",
    "right_shift",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "isnan",
    "isinf",
    "isfinite",
    "signbit",
    "copysign",
    "heaviside",
    "deg2rad",
    "rad2deg",
    "logaddexp",
    "logaddexp2",
]


def _check_integer_power(result_dtype: np.dtype, operands: list, value_of: Callable) -> None:
    """NumPy refuses negative exponents of integers (a scalar exponent is refused by the dtype probe),
    as its loop meets them: never where the result is empty."""
    exponent = operands[1]
    signed_exponent = exponent.dtype is not None and exponent.dtype.kind == "i"
    if result_dtype.kind not in "iu" or not signed_exponent:
        return
    if 0 in np.broadcast_shapes(*(operand.shape for operand in operands)):
        return
    if (value_of(exponent) < 0).any():
        raise ValueError("Integers to negative integer powers are not allowed.")


# The few ufuncs whose errors depend on the values inside an array operand.
_VALUE_CHECKS = {"power": _check_integer_power}

# Ufuncs that call into libm (or an equally long polynomial): about an order of magnitude dearer
# per element than an add, so recomputing them in several kernels can cost more than storing them.
_TRANSCENDENTAL_NAMES = (
    "power float_power cbrt exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan "
    "arctan2 sinh cosh tanh arcsinh arccosh arctanh hypot logaddexp logaddexp2"
)
_TRANSCENDENTAL = frozenset(_TRANSCENDENTAL_NAMES.split())
# Division is slower than the other arithmetic, and integer division slower still.
_DIVISION = frozenset({"divide", "floor_divide", "remainder", "fmod", "reciprocal"})


# Ufuncs whose result jumps (``Op.jumps``).
_JUMPING_NAMES = (
    "floor ceil trunc rint sign floor_divide remainder fmod equal not_equal less less_equal greater "
    "greater_equal logical_and logical_or logical_xor logical_not isfinite isinf isnan signbit heaviside"
)
_JUMPING = frozenset(_JUMPING_NAMES.split())
_TIES_OF_ZEROS = frozenset({"maximum", "minimum", "fmax", "fmin"})  # ``Op.signed_zeros``
# Ops whose NumPy loops never report a floating-point error (``Op.reports_float_errors``): they
# compare, test, select, change a sign or round, and make no NaN of numbers
_QUIET_NAMES = (
    "equal not_equal less less_equal greater greater_equal logical_and logical_or logical_xor "
    "logical_not bitwise_and bitwise_or bitwise_xor invert left_shift right_shift isnan isinf isfinite "
    "signbit maximum minimum fmax fmin clip where absolute fabs negative positive copysign sign floor "
    "ceil trunc rint heaviside max min argmax argmin any all real imag"
)
_QUIET = frozenset(_QUIET_NAMES.split())
# Ops whose complex results are exact in any correct implementation (``Op.reproducible_on``)
_EXACT_ON_COMPLEX_NAMES = (
    "add subtract negative positive conjugate equal not_equal less less_equal greater greater_equal "
    "maximum minimum fmax fmin logical_and logical_or logical_xor logical_not isnan isinf isfinite "
    "where astype real imag"
)
_EXACT_ON_COMPLEX = frozenset(_EXACT_ON_COMPLEX_NAMES.split())


def _cost(name: str) -> float:
    return 10.0 if name in _TRANSCENDENTAL else 4.0 if name in _DIVISION else 1.0


ELEMENTWISE: dict[str, Op] = {
    name: Op(
        name,
        OpKind.ELEMENTWISE,
        getattr(np, name),
        value_check=_VALUE_CHECKS.get(name),
        cost=_cost(name),
        reproducible=name not in _TRANSCENDENTAL,
        jumps=name in _JUMPING,
        signed_zeros=name not in _TIES_OF_ZEROS,
    )
    for name in UFUNC_NAMES
}


def _cube(a: Any) -> Any:
    """``a ** 3`` of a float array: NumPy's operator calls the power ufunc (powf, pow) for it.
    Backends compute it without pow, as exactly (``array._fast_power_op`` records it)."""
    return np.power(a, 3)


ELEMENTWISE["cube"] = Op("cube", OpKind.ELEMENTWISE, _cube, cost=2.0, reproducible=False)

# ``a ** e`` of a float array for these half-integer ``e`` (a distance's ``r ** -1.5``, ``r ** 1.5``,
# ``x ** -0.5``): NumPy's operator calls pow; backends compute it from a square root, within two
# ulp of pow, with pow's values at ±0, ±inf and NaN (``array._fast_power_op`` records it).
HALF_POWERS = {-0.5: "reciprocal_sqrt", 1.5: "sqrt_cube", -1.5: "reciprocal_sqrt_cube"}


def _power_by(exponent: float) -> Callable[[Any], Any]:
    def power(a: Any) -> Any:
        return np.power(a, exponent)

    power.__doc__ = f"``a ** {exponent}`` of a float array, NumPy's pow"
    return power


for _exponent, _name in HALF_POWERS.items():
    ELEMENTWISE[_name] = Op(_name, OpKind.ELEMENTWISE, _power_by(_exponent), cost=3.0, reproducible=False)


def _squared_magnitude(a: Any) -> Any:
    """``|a|**2`` as NumPy's variance squares deviations: a float's square; a complex number's real
    part squared plus its imaginary part squared, each rounded."""
    a = np.asarray(a)
    if a.dtype.kind != "c":
        return np.multiply(a, a)
    return np.add(np.multiply(a.real, a.real), np.multiply(a.imag, a.imag))


ELEMENTWISE["squared_magnitude"] = Op("squared_magnitude", OpKind.ELEMENTWISE, _squared_magnitude)
ELEMENTWISE["clip"] = Op("clip", OpKind.ELEMENTWISE, np.clip, signed_zeros=False)
ELEMENTWISE["where"] = Op("where", OpKind.ELEMENTWISE, np.where, scalar_results=False)
ELEMENTWISE["astype"] = Op("astype", OpKind.ELEMENTWISE, _astype, fills_out=True)

# Elementwise ops that are never recorded: a kernel computes one in place of a recorded op where it
# knows more than the trace (a view of a value it computes: ``COMPUTED_VIEWS``).
# ``power_by_one_value`` is a float32/64 power whose exponent is one value for the whole kernel:
# NumPy's loop then takes 0.5, 2 and -1 as sqrt, square and reciprocal.
INTERNAL: dict[str, Op] = {
    "power_by_one_value": Op(
        "power_by_one_value", OpKind.ELEMENTWISE, np.power, cost=10.0, reproducible=False
    )
}

# Other names NumPy gives the same ufuncs.
ALIASES = {
    "radians": "deg2rad",  # ufuncs of their own in NumPy, with the same loops
    "degrees": "rad2deg",
    "true_divide": "divide",
    "mod": "remainder",
    "abs": "absolute",
    "conj": "conjugate",
    "bitwise_not": "invert",
    "bitwise_invert": "invert",
    "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift",
    "pow": "power",
    "acos": "arccos",
    "asin": "arcsin",
    "atan": "arctan",
    "atan2": "arctan2",
    "acosh": "arccosh",
    "asinh": "arcsinh",
    "atanh": "arctanh",
}


def _mean_dtype(dtype: np.dtype, requested: np.dtype | None) -> np.dtype | None:
    """The accumulator NumPy's ``mean`` sums in: float64 for integers and bools, float32 for float16."""
    if requested is not None:
        return requested
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    return np.dtype(np.float32) if dtype == np.float16 else None


def _divide_by_count(emit: Any, total: Any, count: Any) -> Any:
    """``true_divide(total, count, out=total, casting='unsafe')``, as NumPy's ``_methods`` do it: in
    the dtype the NumPy count promotes the total to, the count given as a weak float (exact to 2**53)
    so that kernels take it as a parameter, where a 0-d array would be put on a device at each call."""
    promoted = emit.cast(total, np.result_type(total.dtype, count))
    return emit.cast(emit.apply("divide", promoted, float(count)), total.dtype)


def _count(operand: Any, axes: tuple[int, ...]) -> np.intp:
    count = 1
    for axis in axes:
        count *= operand.shape[axis]
    return np.intp(count)  # a NumPy int, not a weak one: float32 sums are divided in float64


def _expand_mean(emit: Any, operand: Any, axes: tuple, keepdims: bool, dtype: Any, ddof: Any) -> Any:
    count = _count(operand, axes)
    if count == 0:
        emit.warn("Mean of empty slice")
    total = emit.reduce("sum", operand, axes, keepdims, _mean_dtype(operand.dtype, dtype))
    mean = _divide_by_count(emit, total, count)
    float16_result = dtype is None and operand.dtype == np.float16
    return emit.cast(mean, operand.dtype) if float16_result else mean


def _expand_var(emit: Any, operand: Any, axes: tuple, keepdims: bool, dtype: Any, ddof: Any) -> Any:
    """Two passes, as NumPy's ``_var``: the mean, then the sum of squared deviations from it."""
    count = _count(operand, axes)
    ddof = 0 if ddof is None else ddof
    if ddof >= count:
        emit.warn("Degrees of freedom <= 0 for slice")
    if dtype is None and operand.dtype.kind in "biu":
        dtype = np.dtype(np.float64)
    mean = _divide_by_count(emit, emit.reduce("sum", operand, axes, True, dtype), count)
    squares = emit.apply("squared_magnitude", emit.apply("subtract", operand, mean))
    total = emit.reduce("sum", squares, axes, keepdims, dtype)
    return _divide_by_count(emit, total, np.maximum(count - ddof, 0))


def _expand_std(emit: Any, operand: Any, axes: tuple, keepdims: bool, dtype: Any, ddof: Any) -> Any:
    variance = _expand_var(emit, operand, axes, keepdims, dtype, ddof)
    return emit.cast(emit.apply("sqrt", variance), variance.dtype)


_EXPANSIONS = {"mean": _expand_mean, "var": _expand_var, "std": _expand_std}
_ACCUMULATING = frozenset({"sum", "prod", "mean", "var", "std"})
REDUCTIONS: dict[str, Op] = {
    name: Op(
        name,
        OpKind.REDUCTION,
        getattr(np, name),
        expand=_EXPANSIONS.get(name),
        reproducible=name not in _ACCUMULATING,
        signed_zeros=name not in ("max", "min"),
        jumps=name in ("argmax", "argmin", "any", "all"),
    )
    for name in ["sum", "prod", "mean", "max", "min", "argmax", "argmin", "any", "all", "var", "std"]
}
# Reductions that accept ``dtype=`` and ``ddof=``, as their NumPy references do.
REDUCTIONS_WITH_DTYPE = frozenset({"sum", "prod", "mean", "var", "std"})
REDUCTIONS_WITH_DDOF = frozenset({"var", "std"})
# Reductions that take one axis (or None), not a tuple of axes. Like NumPy's, they see a 0-d
# array as its one element in one axis.
SINGLE_AXIS_REDUCTIONS = frozenset({"argmax", "argmin"})
# The reductions NumPy runs as a ufunc's ``reduce``, which takes axis 0 or -1 (an int) of a 0-d
# array as no axis at all: the element, in the reduction's dtype.
UFUNC_REDUCTIONS = frozenset({"sum", "prod", "max", "min", "any", "all"})

# Running totals and products, recorded along one axis (``record.scan``; without one, of the
# flattened array). Each is NumPy's accumulate of its step, an elementwise op, in order, so fused
# it is exact.
SCAN_STEPS = {"cumsum": "add", "cumprod": "multiply"}
SCANS: dict[str, Op] = {
    name: Op(name, OpKind.SCAN, getattr(np, name), shape_rule=views.cumulative_shape, reproducible=False)
    for name in SCAN_STEPS
}

VIEWS: dict[str, Op] = {
    "reshape": Op("reshape", OpKind.VIEW, _reshape),
    "transpose": Op("transpose", OpKind.VIEW, np.transpose),
    "broadcast_to": Op("broadcast_to", OpKind.VIEW, np.broadcast_to),
    "getitem": Op("getitem", OpKind.VIEW, _getitem, bind=_bind_getitem),
    "diagonal": Op("diagonal", OpKind.VIEW, np.diagonal),
}

# A complex array's parts (``a.real``, ``a.imag``): views of the same elements in the part's dtype,
# which NumPy's writes through change. A kernel loads a part of a buffer through its strides; of a
# value it computes, it takes the part as an elementwise op (``COMPUTED_VIEWS``), which on a real
# value is NumPy's too (the value, or zero).
COMPUTED_VIEWS: dict[str, Op] = {}
for _name in ("real", "imag"):
    VIEWS[_name] = Op(_name, OpKind.VIEW, getattr(np, _name))
    COMPUTED_VIEWS[_name] = INTERNAL[_name] = Op(_name, OpKind.ELEMENTWISE, getattr(np, _name))


def _roll(
    array: np.ndarray, shifts: tuple[tuple[int, int], ...], out: np.ndarray | None = None
) -> np.ndarray:
    """``numpy.roll`` by normalized params: (axis, shift) pairs, each axis once, 0 < shift < extent.
    Its blocks copied into an array of the operand's layout (or ``out``), as NumPy's does, without
    the work NumPy's Python function does first to normalize what it is given (most of its time on
    small arrays)."""
    array = np.asarray(array)
    result = np.empty_like(array) if out is None else out
    moves = dict(shifts)
    pieces: list[tuple[tuple[slice, ...], tuple[slice, ...]]] = [((), ())]
    for axis in range(max(moves, default=-1) + 1):  # the axes after the last that moves: whole
        moved = moves.get(axis, 0)
        halves = [(slice(None), slice(None))]
        if moved:
            halves = [(slice(None, -moved), slice(moved, None)), (slice(-moved, None), slice(None, moved))]
        pieces = [((*source, s), (*target, t)) for source, target in pieces for s, t in halves]
    for source, target in pieces:
        result[target] = array[source]
    return result


MOVES: dict[str, Op] = {"roll": Op("roll", OpKind.MOVE, _roll, fills_out=True)}


def _gather(data: np.ndarray, *indices: np.ndarray, sources: tuple[int, ...]) -> np.ndarray:
    """Elements of ``data`` at computed positions. Along data axis ``d``, the position is the
    result's index along axis ``sources[d]`` where that is >= 0, else the value of index array
    ``-1 - sources[d]`` (negative from the end, as NumPy's); the index arrays have the result's
    number of axes, each of extent 1 or the result's. Run as NumPy's indexing: where the indexed
    axes are adjacent and the others keep their order around the indices' axes (``x[idx]``,
    ``x[:, rows, cols]``, ``take``), by that index (one axis: NumPy's ``take``); else by open
    ranges along the followed axes."""
    indexed = [axis for axis, source in enumerate(sources) if source < 0]
    first, count = indexed[0], len(indexed)
    block = indices[0].ndim - (data.ndim - count)  # the indices' own axes
    own = slice(first, first + block)
    natural = (
        indexed == list(range(first, first + count))
        and all(
            source == (axis if axis < first else axis - count + block)
            for axis, source in enumerate(sources)
            if source >= 0
        )
        and all(math.prod(index.shape) == math.prod(index.shape[own]) for index in indices)
    )
    if natural:
        index: list[Any] = [slice(None)] * first
        for axis in indexed:
            positions = indices[-1 - sources[axis]]
            index.append(positions.reshape(positions.shape[own]))
        if count == 1:  # NumPy's take: its indexing copies each element apart (8x slower on rows of 3)
            return np.take(data, index[-1], axis=first)
        return data[tuple(index)]
    ndim = indices[0].ndim
    index = []
    for axis, source in enumerate(sources):
        if source >= 0:
            along = [1] * ndim
            along[source] = data.shape[axis]
            index.append(np.arange(data.shape[axis]).reshape(along))
        else:
            index.append(indices[-1 - source])
    return data[tuple(index)]


GATHERS: dict[str, Op] = {"gather": Op("gather", OpKind.GATHER, _gather)}


def _concatenate(*arrays: np.ndarray, **params: Any) -> np.ndarray:
    """``numpy.concatenate`` with each array an operand, as a node's inputs are."""
    return np.concatenate(arrays, **params)


def _einsum(*operands: np.ndarray, subscripts: str, **params: Any) -> np.ndarray:
    """``numpy.einsum`` with its subscripts a param. NumPy returns a view of an operand where it can
    ('ii->i'); here a result owns its memory, as every library call's does (no aliasing to track)."""
    result = np.einsum(subscripts, *operands, **params)
    if "out" not in params and any(np.may_share_memory(result, operand) for operand in operands):
        return result.copy()
    return result


def _check_quantiles(reference: Callable[..., Any]) -> Callable[..., None]:
    """NumPy refuses quantiles out of range at the call. Given as Python numbers they are a param,
    checked by the dtype probe; given as an array (the second operand), by its values here."""

    def check(result_dtype: np.dtype, operands: list, value_of: Callable) -> None:
        if len(operands) > 1:
            reference(np.zeros(1), value_of(operands[1]))

    return check


def _masked_select(array: np.ndarray, mask: np.ndarray, count: int) -> np.ndarray:
    """``array[mask]``, a mask of the array's shape: its elements where the mask is true, in order.
    ``count``, the mask's, is a param because the result's length is part of a trace's structure,
    which the operands' shapes alone do not fix."""
    return array[mask]


def _barrier(name: str, shape_rule: Callable | None = None, reference: Callable | None = None) -> Op:
    reference = reference or getattr(np, name)
    check = _check_quantiles(reference) if name in _QUANTILES else None
    return Op(name, OpKind.BARRIER, reference, value_check=check, shape_rule=shape_rule)


_QUANTILES = frozenset({"percentile", "quantile", "nanpercentile", "nanquantile"})
# Statistics whose NumPy code sorts, or warns or raises about NaN in the data: library calls.
_STATISTICS = ("median", "nanmedian", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin", *sorted(_QUANTILES))

# Library calls: each runs its NumPy reference on buffers, in a plan step of its own (``schedule``).
BARRIERS: dict[str, Op] = {
    op.name: op
    for op in [
        _barrier("matmul", views.matmul_shape),
        _barrier("dot", views.dot_shape),
        _barrier("inner", views.inner_shape),
        _barrier("einsum", views.einsum_shape, _einsum),
        _barrier("concatenate", reference=_concatenate),
        _barrier("tile"),
        _barrier("repeat"),
        _barrier("pad", views.pad_shape),
        *(_barrier(name, views.statistic_shape) for name in _STATISTICS),
        # Its length is the mask's count, known where it is recorded (``record.getitem``)
        Op("masked_select", OpKind.BARRIER, _masked_select),
    ]
}

OPS: dict[str, Op] = {
    op.name: op
    for table in (ELEMENTWISE, REDUCTIONS, SCANS, VIEWS, MOVES, GATHERS, BARRIERS)
    for op in table.values()
}

# Elementwise NumPy ufuncs that ``__array_ufunc__`` records, and the op each one is (matmul, a gufunc,
# has its own branch: it is recorded as the barrier it is).
UFUNC_OPS: dict[np.ufunc, Op] = {
    op.reference: op for op in ELEMENTWISE.values() if isinstance(op.reference, np.ufunc)
} | {np.radians: ELEMENTWISE["deg2rad"], np.degrees: ELEMENTWISE["rad2deg"]}

# Elementwise ops each of whose NumPy loops gives every element its exact or correctly rounded value
# (no SIMD approximation of a function, no tie between signed zeros, which the vector and scalar
# loops of maximum and fmin break differently), so NumPy's result does not depend on how a loop walks
# the elements: the C recorder may call their loop a row at a time where NumPy's iterator would walk
# a strided operand (``_recorder.c``, ``walk_rows``).
WALK_INDEPENDENT_UFUNCS = frozenset(
    op.reference
    for name, op in ELEMENTWISE.items()
    if isinstance(op.reference, np.ufunc)
    and name not in _TRANSCENDENTAL | _TIES_OF_ZEROS
    # a constant's product and a select, exact too, but not yet checked against NumPy's strided walk
    and name not in {"deg2rad", "rad2deg", "heaviside"}
)

# ``ufunc.reduce`` methods that are one of our reductions.
UFUNC_REDUCE_OPS: dict[np.ufunc, Op] = {
    np.add: REDUCTIONS["sum"],
    np.multiply: REDUCTIONS["prod"],
    np.maximum: REDUCTIONS["max"],
    np.minimum: REDUCTIONS["min"],
}


def elementwise_op(name: str) -> Op:
    return ELEMENTWISE[ALIASES.get(name, name)]
