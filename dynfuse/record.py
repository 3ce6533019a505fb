"""Recording: each array operation becomes a node, checked now, computed later.

Every function here validates its operands at once (shapes, axes, dtypes, weak-scalar ranges)
and raises NumPy's exception type at the caller's line, then returns a lazy array over a new node.
What cannot be recorded (an unsupported dtype, function or argument) falls back to NumPy on
materialized inputs, counted by name.

Writes (in-place operators, ``out=``, item assignment) keep NumPy's aliasing semantics:
- an array that nothing else can observe (no live views, memory not shared with NumPy) is simply
  rebound to a new node, so in-place code stays lazy and fusable;
- otherwise the write is eager: the target's base, its views and every pending node that reads the
  overlapping memory are materialized first (so they keep the values from before the write, or
  share the memory, exactly as NumPy decided when it took the view), then the buffer is written.
"""

from __future__ import annotations

import functools
import math
import operator
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from . import (
    config,
    devices,
    direct,
    dtypes,
    execute,
    float_errors,
    ops,
    pressure,
    registry,
    stats,
    tiers,
    views,
)
from .devices import HOST
from .ops import OpKind
from .tiers import direct_elements
from .trace import (
    Node,
    dependent_sinks,
    held_outside,
    mixed_devices,
    pending_readers,
    read_by_pending,
    references_within,
    topological_order,
)

# NumPy function -> the dynfuse function that records it; filled in by ``dynfuse.numpy``.
HANDLED_FUNCTIONS: dict[Callable, Callable] = {}
# The class of lazy arrays, which the functions here take and return: ``array`` defines it (its
# methods call these functions, so it sits above this module) and sets it here as it is imported.
LazyArray: Any = None


def is_lazy(value: Any) -> bool:
    return isinstance(value, LazyArray)


def is_scalar(value: Any) -> bool:
    """Whether NumPy holds ``value`` as a scalar (``LazyArray._scalar``)."""
    return value._scalar if isinstance(value, LazyArray) else isinstance(value, np.generic)


def array_node(value: Any) -> Node:
    """``value`` as an array's node: a Python scalar too (not weak then, as NumPy converts it; it
    goes with any device, as a weak one does)."""
    if dtypes.is_weak_scalar(value):
        return pressure.new_leaf(np.asarray(value), exposed=False, device=None)
    return as_node(value)


def as_node(value: Any) -> Node:
    """``value`` as a node: a host array as one of host memory, a device's array (CuPy's) as one of
    its device, a NumPy scalar as one that goes with any device, as CuPy takes one."""
    if is_lazy(value):
        return value._node
    if dtypes.is_weak_scalar(value):
        return Node.scalar(value)
    if isinstance(value, np.ndarray):
        return pressure.new_leaf(value, exposed=True)
    if isinstance(value, np.generic):
        return pressure.new_leaf(np.asarray(value), exposed=False, device=None)
    owner = registry.owner(value)
    if owner is not None:
        return pressure.new_leaf(value, exposed=True, device=owner)
    return pressure.new_leaf(np.asarray(value), exposed=False)


def defers_to(value: Any) -> bool:
    """Whether ``value`` is another library's array that takes part in NumPy's protocols (a Dask or
    CuPy array, a pandas Series): as ndarray does (NEP 13), a lazy array's operator or ufunc then
    leaves the operation to it, rather than converting it (computing a whole Dask array here)."""
    kind = type(value)
    return (
        hasattr(kind, "__array_ufunc__")
        and not issubclass(kind, (np.ndarray, np.generic, LazyArray))
        and registry.owner(value) is None  # a device's array is one dynfuse takes as its own
    )


# Argument types that are never another library's array: skipped at once.
_PLAIN = frozenset({int, float, bool, complex, str, type(None), np.ndarray})


def foreign(args: tuple) -> bool:
    """Whether a positional argument, or an item of a list or tuple argument, defers to its own
    library (``defers_to``)."""
    for value in args:
        kind = type(value)
        if kind in _PLAIN or kind is LazyArray:
            continue
        if kind in (list, tuple):
            if any(map(defers_to, value)):
                return True
        elif defers_to(value):
            return True
    return False


def bound_depth(array: Any) -> Any:
    """Materialize ``array`` if its trace has reached DYNFUSE_MAX_DEPTH, so traces stay bounded."""
    if array._node.depth >= config.max_depth:
        materialize_arrays([array])
    return array


def new_array(node: Node, scalar: bool | None = None) -> Any:
    """A lazy array over a computed node: 0-d, a scalar as NumPy gives it, unless told otherwise."""
    return bound_depth(LazyArray(node, scalar=not node.shape if scalar is None else scalar))


def _describe(nodes: Iterable[Node]) -> list[tuple[np.dtype | None, Any]]:
    """Operands as the dtype probes take them: (dtype, None) for arrays, (None, value) for weak scalars."""
    return [(None, node.buffer) if node.op is ops.SCALAR else (node.dtype, None) for node in nodes]


def _unsupported(nodes: Iterable[Node]) -> bool:
    return any(node.dtype is not None and not dtypes.is_supported(node.dtype) for node in nodes)


def _unrecorded(nodes: Iterable[Node], out: Any = None) -> str:
    """Why a call over ``nodes`` (and ``out``) is not recorded: the dtypes it does not take, or ``out``."""
    found = sorted(
        {str(node.dtype) for node in nodes if node.dtype is not None and not dtypes.is_supported(node.dtype)}
    )
    if found:
        return f"dtype {', '.join(found)} is not recorded"
    return (
        "its out= is not a dynfuse array"
        if out is not None and not is_lazy(out)
        else "its arguments are not recorded"
    )


# (op, dtype or scalar type of each operand) -> result dtype, or False where the common case below
# does not apply (an unsupported dtype, an op that checks values).
_common_dtypes: dict[tuple, np.dtype | bool] = {}


def record_common(op: ops.Op, first: Any, *rest: Any) -> Any:
    """The common case, recorded in as few steps as Python allows (it runs for every operator): one
    to three operands (``where``'s), lazy arrays of shapes that broadcast and supported dtypes or
    Python floats, complex numbers, bools and small ints, no keywords. None when anything else is
    involved: the general path then records it. Computed operands of few elements run at once
    instead (``direct``): NumPy scalars among them."""
    lazy = LazyArray
    operands = (first, *rest)
    array = None  # the node whose shape the result has
    computed = True  # every lazy operand holds a host buffer
    numpy_scalars = False  # NumPy scalars among the operands: only run at once
    shapes = []  # of the lazy operands: recorded here only where they agree
    key: tuple = (op,)
    for operand in operands:
        kind = type(operand)
        if kind is lazy:
            node = operand._node
            shapes.append(node.shape)
            array = node
            computed = computed and not node.inputs and node.device is HOST
            key += (node.dtype,)
        elif kind is float or kind is bool or kind is complex or (kind is int and 0 <= operand <= 127):
            key += (kind,)
        elif isinstance(operand, np.generic):
            numpy_scalars = True
        else:
            return None
    if array is None:
        return None
    if computed and direct.broadcast_size(shapes) < direct_elements():
        return direct.result(op.reference(*map(direct.host_value, operands)))
    if numpy_scalars:
        return None
    try:
        same = all(shape == shapes[0] for shape in shapes)
        shape = array.shape if same else views.broadcast_shapes(op.name, *shapes)
    except ValueError:  # the general path raises it
        return None
    if 0 in shape:  # empty: the general path probes the empty operands
        return None
    inputs = tuple(operand._node if type(operand) is lazy else Node.scalar(operand) for operand in operands)
    dtype = _common_dtypes.get(key)
    if dtype is None:
        dtype = _common_dtypes[key] = _common_result(op, inputs)
    if dtype is False:
        return None
    return new_array(Node(op, inputs, (), shape, dtype), scalar=None if op.scalar_results else False)


def _common_result(op: ops.Op, nodes: tuple[Node, ...]) -> np.dtype | bool:
    if op.value_check is not None or _unsupported(nodes):
        return False
    dtype = dtypes.result_dtype(op, _describe(nodes), ())
    return dtype if dtypes.is_supported(dtype) else False


def elementwise(op: ops.Op, operands: tuple, out: Any = None, params: tuple = ()) -> Any:
    if out is None and not params and 1 <= len(operands) <= 3:
        recorded = record_common(op, *operands)
        if recorded is not None:
            return recorded
    if out is None:
        made = direct.call(op.reference, operands, dict(params), tiers.site_records)
    elif is_lazy(out):
        made = direct.call_into(op.reference, operands, out, dict(params))
        if made is direct.DECLINED and _made_written_memory(out):
            made = direct.call_into(op.reference, operands, out, dict(params))
        if made is direct.DECLINED:
            made = _into_computed_region(op, operands, out, params)
    else:
        made = direct.DECLINED
    if made is not direct.DECLINED:
        return made
    nodes = [as_node(value) for value in operands]
    kwargs = dict(params) if out is None else {**dict(params), "out": out}
    if _unsupported(nodes) or (out is not None and not is_lazy(out)):
        return fallback(op.name, op.reference, operands, kwargs, _unrecorded(nodes, out))
    shape = views.broadcast_shapes(op.name, *(node.shape for node in nodes))
    described = _describe(nodes)
    if out is not None:
        with_output = views.broadcast_shapes(op.name, shape, out.shape)
        if with_output != out.shape:
            raise ValueError(
                f"{op.name}: non-broadcastable output operand with shape {out.shape} "
                f"doesn't match the broadcast shape {with_output}"
            )
        # NumPy checks the output cast before anything the loop itself raises.
        dtypes.check_output_cast(op, described, params, out.dtype)
    dtype = dtypes.result_dtype(op, described, params, empty=0 in shape)
    if not dtypes.is_supported(dtype):
        return fallback(
            op.name, op.reference, operands, kwargs, f"its result's dtype {dtype} is not recorded"
        )
    if op.value_check is not None:
        op.value_check(dtype, nodes, host_value)
    node = Node(op, tuple(nodes), params, shape, dtype)
    tiers.note_recorded(node)
    if out is None:
        return new_array(node, scalar=None if op.scalar_results else False)
    assign(out, node)
    return out


def host_value(node: Node) -> np.ndarray:
    """A node's values, computed, in host memory: its buffer itself, or a copy of a device's (for a
    check that depends on values, printing, ``item``)."""
    if node.inputs:
        execute.materialize((node,))
    return devices.move(node.buffer, node.memory, HOST)


def single_out(out: Any) -> Any:
    """NumPy passes ``out`` as a tuple to ``__array_ufunc__``; one output is the common case."""
    return out[0] if isinstance(out, tuple) and len(out) == 1 else out


def ufunc_call(op: ops.Op, inputs: tuple, out: Any, kwargs: dict) -> Any:
    """A ufunc called with NumPy's keywords: ``dtype`` and ``casting`` are recorded, the rest fall back."""
    out = single_out(out)
    given = {key: value for key, value in kwargs.items() if value is not None}
    if set(given) <= {"dtype", "casting"} and not isinstance(out, tuple):
        if "dtype" in given:
            given["dtype"] = np.dtype(given["dtype"])
        return elementwise(op, inputs, out=out, params=tuple(sorted(given.items())))
    unrecorded = (
        ", ".join(f"{key}=" for key in sorted(set(given) - {"dtype", "casting"})) or "several outputs"
    )
    why = f"{unrecorded} not recorded"
    return fallback(op.name, op.reference, inputs, kwargs if out is None else {**kwargs, "out": out}, why)


def astype(value: Any, dtype: Any, casting: str = "unsafe", copy: bool = True) -> Any:
    node = as_node(value)
    dtype = np.dtype(dtype)
    dtypes.check_cast(node.dtype, dtype, casting)
    if not copy and dtype == node.dtype and is_lazy(value):
        return value
    if ops.discards_imaginary(node.dtype, dtype):  # NumPy's warning, at the caller's line
        message = "Casting complex values to real discards the imaginary part"
        warnings.warn(message, np.exceptions.ComplexWarning, stacklevel=3)
    # The cast's reference: the casting rule is checked, and a complex value's real part is cast
    made = direct.call(functools.partial(ops.ELEMENTWISE["astype"].reference, dtype=dtype), (value,))
    if made is not direct.DECLINED:
        return made
    if _unsupported([node]) or not dtypes.is_supported(dtype):
        why = _unrecorded([node]) if _unsupported([node]) else f"dtype {dtype} is not recorded"
        return fallback("astype", ops.ELEMENTWISE["astype"].reference, (value, dtype), {}, why)
    return new_array(_cast_node(node, dtype), scalar=is_scalar(value))


# (source dtype, dtype as given to astype) -> the cast's params, or False where astype's common case
# (supported dtypes, the default casting and copy) does not apply; filled by ``_common_cast`` for
# the C recorder, which records ``x.astype(dtype)`` by this table.
_common_casts: dict[tuple, tuple | bool] = {}


def _common_cast(source: np.dtype, given: Any) -> tuple | bool:
    dtype = np.dtype(given)
    dtypes.check_cast(source, dtype, "unsafe")
    if (
        not dtypes.is_supported(source)
        or not dtypes.is_supported(dtype)
        or ops.discards_imaginary(source, dtype)  # warned of by ``astype`` each time
    ):
        return False
    return (("dtype", dtype),)


def _cast_node(node: Node, dtype: np.dtype) -> Node:
    return Node(ops.ELEMENTWISE["astype"], (node,), (("dtype", dtype),), node.shape, dtype)


def reduction(
    name: str,
    value: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    ddof: Any = None,
    **unsupported_kwargs: Any,
) -> Any:
    op = ops.REDUCTIONS[name]
    expansion = None
    masked = type(value) is LazyArray and out is None and not unsupported_kwargs
    if masked and _reads_through_a_mask(value._node):
        made = _masked_reduction(op, value._node, axis, dtype, keepdims, ddof)
        if made is not None:
            return made
    if out is None and not unsupported_kwargs:
        made = direct.reduce(op, value, axis, dtype, keepdims, ddof)
        if made is not direct.DECLINED:
            return made
        if op.expand is not None and type(value) is LazyArray:
            expansion = _expansion_key(name, value._node, axis, dtype, keepdims, ddof)
            program = _EXPANSIONS.get(expansion) if expansion is not None else None
            if program is not None:
                return new_array(_replayed_expansion(program, value._node))
    node = as_node(value)
    given = {
        "axis": axis,
        "dtype": dtype,
        "out": out,
        "keepdims": keepdims,
        "ddof": ddof,
        **unsupported_kwargs,
    }
    kwargs = {key: given[key] for key in given if given[key] is not None and given[key] is not False}
    if (
        out is not None
        or unsupported_kwargs
        or node.op is ops.SCALAR
        or _unsupported([node])
        or (dtype is not None and not dtypes.is_supported(np.dtype(dtype)))
    ):
        if _unsupported([node]):
            why = _unrecorded([node])
        elif out is not None or unsupported_kwargs:
            keywords = ("out", *unsupported_kwargs)[out is None :]
            why = f"{', '.join(f'{key}=' for key in keywords)} not recorded"
        elif node.op is ops.SCALAR:
            why = "a Python scalar's reduction is not recorded"
        else:
            why = f"dtype {np.dtype(dtype)} is not recorded"
        return fallback(name, op.reference, (value,), kwargs, why)
    ndim = len(node.shape)
    if ndim == 0 and _integer(axis) in (0, -1):
        if name in ops.SINGLE_AXIS_REDUCTIONS:
            node, ndim, keepdims = as_node(getitem(value, None)), 1, False  # NumPy's result: 0-d
        elif name in ops.UFUNC_REDUCTIONS:
            axis = ()
    params: list[tuple[str, Any]] = []
    if name in ops.SINGLE_AXIS_REDUCTIONS:
        single = views.single_axis(name, axis, ndim)
        axes = tuple(range(ndim)) if single is None else (single,)
        params.append(("axis", single))
    else:
        axes = views.reduction_axes(name, axis, ndim)
        params.append(("axis", axes))
    if dtype is not None:
        if name not in ops.REDUCTIONS_WITH_DTYPE:
            raise TypeError(f"{name}() got an unexpected keyword argument 'dtype'")
        dtype = np.dtype(dtype)
        params.append(("dtype", dtype))
    if ddof is not None:
        if name not in ops.REDUCTIONS_WITH_DDOF:
            raise TypeError(f"{name}() got an unexpected keyword argument 'ddof'")
        params.append(("ddof", ddof))
    params.append(("keepdims", bool(keepdims)))
    result_dtype = dtypes.reduction_dtype(op, node.dtype, node.shape, tuple(params))
    if not dtypes.is_supported(result_dtype):
        return fallback(
            name, op.reference, (value,), kwargs, f"its result's dtype {result_dtype} is not recorded"
        )
    if op.expand is not None:
        warned = Emitter.warnings
        result = op.expand(Emitter, node, axes, bool(keepdims), dtype, ddof)
        assert result.dtype == result_dtype, (name, result.dtype, result_dtype)
        if expansion is not None and Emitter.warnings == warned:  # a warning is given each time
            _keep_expansion(expansion, result, node)
    else:
        result = _reduction_node(op, node, tuple(params), axes, bool(keepdims), result_dtype)
    return new_array(result)


# (op, operand dtype, rank, params) -> the result dtype, or False where the common case (a
# primitive reduction of a supported dtype to one) does not apply; filled by
# ``_common_reduction`` for the C recorder, which records ``x.sum(axis)`` by this table.
_common_reductions: dict[tuple, np.dtype | bool] = {}


def _common_reduction(op: ops.Op, dtype: np.dtype, shape: tuple[int, ...], params: tuple) -> np.dtype | bool:
    if op.expand is not None or not dtypes.is_supported(dtype):
        return False
    result = dtypes.reduction_dtype(op, dtype, shape, params)
    return result if dtypes.is_supported(result) else False


def _integer(value: Any) -> int | None:
    """``value`` as NumPy takes an int (``operator.index``); None where it is not one."""
    try:
        return None if isinstance(value, (bool, np.bool_)) else operator.index(value)
    except TypeError:
        return None


def _reduction_node(
    op: ops.Op, node: Node, params: tuple, axes: tuple[int, ...], keepdims: bool, dtype: np.dtype
) -> Node:
    return Node(op, (node,), params, views.reduced_shape(node.shape, axes, keepdims), dtype)


# Composite reductions (mean, var, std) by their arguments: the primitives their expansion records,
# as steps that make the same nodes again without validating and expanding (their structure
# depends on these arguments alone; recording them anew costs what recording ten primitives does).
# A step is a weak scalar's value, or (op, positions of its inputs, params, shape, dtype), where
# position 0 is the operand and position k the k-th step's node.
_EXPANSIONS: dict[tuple, tuple] = {}
_EXPANSIONS_KEPT = 256


def _expansion_key(name: str, node: Node, axis: Any, dtype: Any, keepdims: Any, ddof: Any) -> tuple | None:
    """The arguments as a key, where they are plain (1.0 would equal 1 as a key, where NumPy refuses a
    float axis); None where they are not, or the operand is a scalar."""
    axes = axis if type(axis) is tuple else (axis,)
    plain = (
        all(item is None or type(item) is int for item in axes)
        and (ddof is None or type(ddof) is int)
        and type(keepdims) is bool
        and (dtype is None or isinstance(dtype, (np.dtype, type, str)))
    )
    if not plain or node.op is ops.SCALAR:
        return None
    return (name, node.shape, node.dtype, node.device, axis, dtype, keepdims, ddof)


def _keep_expansion(key: tuple, result: Node, operand: Node) -> None:
    positions = {id(operand): 0}
    steps: list = []
    stack = [(result, False)]
    while stack:  # inputs before the nodes that read them, each once
        node, ready = stack.pop()
        if id(node) in positions:
            continue
        if ready:
            if node.op is ops.SCALAR:
                steps.append(node.buffer)
            else:
                inputs = tuple(positions[id(source)] for source in node.inputs)
                steps.append((node.op, inputs, node.params, node.shape, node.dtype))
            positions[id(node)] = len(steps)
            continue
        if not node.inputs and node.op is not ops.SCALAR:
            return  # a buffer the expansion made (not the operand): kept out
        stack.append((node, True))
        stack.extend((source, False) for source in node.inputs if id(source) not in positions)
    if len(_EXPANSIONS) >= _EXPANSIONS_KEPT:
        _EXPANSIONS.clear()
    _EXPANSIONS[key] = tuple(steps)


def _replayed_expansion(steps: tuple, operand: Node) -> Node:
    nodes = [operand]
    for step in steps:
        if type(step) is tuple:
            op, inputs, params, shape, dtype = step
            nodes.append(Node(op, tuple(nodes[position] for position in inputs), params, shape, dtype))
        else:
            nodes.append(Node.scalar(step))
    return nodes[-1]


class Emitter:
    """What a composite op's ``expand`` records its primitives with (inputs already validated)."""

    warnings = 0  # how many it gave: an expansion that warns is recorded anew each time

    @staticmethod
    def reduce(name: str, node: Node, axes: tuple[int, ...], keepdims: bool, dtype: np.dtype | None) -> Node:
        op = ops.REDUCTIONS[name]
        params = (("axis", axes), *((("dtype", dtype),) if dtype is not None else ()), ("keepdims", keepdims))
        result_dtype = dtypes.reduction_dtype(op, node.dtype, node.shape, params)
        return _reduction_node(op, node, params, axes, keepdims, result_dtype)

    @staticmethod
    def apply(name: str, *operands: Any) -> Node:
        op = ops.ELEMENTWISE[name]
        nodes = [operand if isinstance(operand, Node) else as_node(operand) for operand in operands]
        shape = views.broadcast_shapes(op.name, *(node.shape for node in nodes))
        return Node(op, tuple(nodes), (), shape, dtypes.result_dtype(op, _describe(nodes), ()))

    @staticmethod
    def cast(node: Node, dtype: np.dtype) -> Node:
        if node.dtype == dtype:
            return node
        return _cast_node(node, dtype)

    @staticmethod
    def warn(message: str) -> None:
        Emitter.warnings += 1
        warnings.warn(message, RuntimeWarning, stacklevel=5)


def _reads_through_a_mask(node: Node) -> bool:
    """Whether a pending node reads through a boolean mask (``_masked_select``); the C recorder
    leaves such a node's reductions to ``reduction`` by the same test."""
    select = ops.BARRIERS["masked_select"]
    return node.op is select or any(ancestor.op is select for ancestor in node.ancestors)


class _NotWhole(Exception):
    """An expansion's operand that is not an elementwise function of reads through its mask."""


class _WholeArrayEmitter(Emitter):
    """An expansion's primitives over a value read through ``mask``, on the whole arrays: each
    reduction's operand, where the mask is false, a value that leaves it unchanged; a variance's
    deviations there zero."""

    def __init__(self, mask: LazyArray) -> None:
        self.mask = mask

    def read(self, node: Node) -> Node | None:
        """The array ``node`` reads through the mask, where it is such a read alone."""
        select = ops.BARRIERS["masked_select"]
        return node.inputs[0] if node.op is select and node.inputs[1] is self.mask._node else None

    def apply(self, name: str, *operands: Any) -> Node:
        """A deviation from one value (a variance's, ``x - mean``) on the whole array, the value
        itself where the mask is false: zero there, and nothing raised NumPy's would not."""
        if name != "subtract" or not all(isinstance(operand, Node) for operand in operands):
            return Emitter.apply(name, *operands)
        array, center = self.read(operands[0]), operands[1]
        if array is None or math.prod(center.shape) != 1:
            return Emitter.apply(name, *operands)
        centred = elementwise(ops.ELEMENTWISE["where"], (self.mask, new_array(array), new_array(center)))
        return Emitter.apply(name, as_node(centred), center)

    def reduce(self, name: str, node: Node, axes: tuple, keepdims: bool, dtype: np.dtype | None) -> Node:
        if node.shape == self.mask.shape:  # ``apply``'s deviations, squared (zero where the mask is
            # false), or a selection of every element of a 1-d array
            kept = node
        else:
            neutral = _NEUTRAL.get(name, lambda dtype: None)(node.dtype)
            # A read alone computes nothing where the mask is false: no element need stand there
            computed = self.read(node) or _on_whole_arrays(node, self.mask) if neutral is not None else None
            if computed is None:
                raise _NotWhole
            unchanged, where = np.array(neutral, node.dtype)[()], ops.ELEMENTWISE["where"]
            kept = as_node(elementwise(where, (self.mask, new_array(computed, scalar=False), unchanged)))
        result = Emitter.reduce(name, kept, tuple(range(self.mask.ndim)), False, dtype)
        if keepdims:  # the (count,) value's kept axis
            result = Node(ops.VIEWS["reshape"], (result,), (("shape", (1,)),), (1,), result.dtype)
        return result


def _extreme(largest: bool) -> Callable[[np.dtype], Any]:
    """What a max (``largest``) or min leaves unchanged: None for complex, which NumPy orders by parts."""

    def value(dtype: np.dtype) -> Any:
        if dtype.kind == "f":
            return -np.inf if largest else np.inf
        if dtype.kind == "b":
            return not largest
        if dtype.kind in "iu":
            return np.iinfo(dtype).min if largest else np.iinfo(dtype).max
        return None

    return value


# By reduction: what it leaves unchanged (a sum -0.0, since -0.0 + x is x for every x, +0.0 too)
_NEUTRAL: dict[str, Callable[[np.dtype], Any]] = {
    "sum": lambda dtype: -0.0 if dtype.kind in "fc" else 0,
    "prod": lambda dtype: 1,
    "any": lambda dtype: False,
    "all": lambda dtype: True,
    "max": _extreme(largest=True),
    "min": _extreme(largest=False),
}


def _masked_reduction(op: ops.Op, node: Node, axis: Any, dtype: Any, keepdims: Any, ddof: Any) -> Any:
    """A reduction of a value read through a mask (``x[m].sum()``, ``(x[m] ** 2).mean()``), computed
    on whole arrays: the value where the mask holds, and where it does not what leaves the reduction
    unchanged. No compaction is made, and the structure does not depend on the mask's count, so a
    loop whose count changes replays. Sums add in another order than over the compacted values
    (within rounding). None where it does not apply: another axis or rank, a count below 2 (NumPy's
    empty and one-element cases), an argmax, a ddof of no degrees of freedom left."""
    count = node.shape[0] if len(node.shape) == 1 else 0
    if count < 2 or op.name in ops.SINGLE_AXIS_REDUCTIONS or keepdims not in (True, False):
        return None
    try:
        if views.reduction_axes(op.name, axis, 1) != (0,):
            return None
    except (TypeError, ValueError, np.exceptions.AxisError):
        return None  # NumPy's error, by the general path
    takes_dtype = op.name in ops.REDUCTIONS_WITH_DTYPE
    if dtype is not None and not (takes_dtype and dtypes.is_supported(np.dtype(dtype))):
        return None
    degrees = None if ddof is None else _integer(ddof)
    if ddof is not None and (op.name not in ops.REDUCTIONS_WITH_DDOF or degrees is None or degrees >= count):
        return None
    select = ops.BARRIERS["masked_select"]
    mask = next(each.inputs[1] for each in (node, *node.ancestors) if each.op is select)
    emit = _WholeArrayEmitter(new_array(mask, scalar=False))
    dtype = None if dtype is None else np.dtype(dtype)
    try:
        if op.expand is not None:
            result = op.expand(emit, node, (0,), keepdims, dtype, ddof)
        else:
            result = emit.reduce(op.name, node, (0,), keepdims, dtype)
    except _NotWhole:
        return None
    return new_array(result)


# ---- library calls ---------------------------------------------------------------------------------


def static_params(params: dict[str, Any]) -> tuple | None:
    """``params`` as a node holds them: sorted and hashable (they are part of the trace's structure),
    sequences as tuples. None if one is data (an array): that call is not recorded."""
    try:
        return tuple((key, _static(value)) for key, value in sorted(params.items()))
    except TypeError:  # unhashable: an array (lazy arrays too), a dict
        return None


def _static(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(map(_static, value))
    hash(value)
    return value


def barrier(
    op: ops.Op, operands: Sequence[Any], params: dict[str, Any] | None = None, out: Any = None
) -> Any:
    """A library call (``ops.BARRIERS``) or a scan recorded as one node, checked now.

    A param that is data (an array), an unsupported dtype, or an ``out`` that is not lazy: NumPy runs
    the call, counted as a fallback.
    """
    params = params or {}
    static = static_params(params)
    if out is None and static is not None:
        made = direct.library_call(op, operands, params)
        if made is not direct.DECLINED:
            return made
    nodes = [array_node(value) for value in operands]
    node = None
    if static is not None and not _unsupported(nodes) and (out is None or is_lazy(out)):
        node = _barrier_node(op, nodes, static, out)
    if node is None:
        kwargs = params if out is None else {**params, "out": out}
        why = "an argument given as an array is not recorded" if static is None else _unrecorded(nodes, out)
        return fallback(op.name, op.reference, tuple(operands), kwargs, why)
    if out is None:
        return new_array(node)
    if out.shape != node.shape:
        raise ValueError(
            f"{op.name}: output operand has shape {out.shape}, but the result has shape {node.shape}"
        )
    assign(out, node)
    return out


def scan(op: ops.Op, value: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """``cumsum``, ``cumprod`` (``ops.SCANS``), recorded along one axis, normalized: without one (or
    on a 0-d array) NumPy runs along the flattened array."""
    array = lazy(value)
    dtype = None if dtype is None else np.dtype(dtype)
    if axis is None or array.ndim == 0:
        if axis is not None:
            views.normalize_axis_index(operator.index(axis), 1, op.name)
        array, axis = reshape(array, (-1,)), 0
    else:
        axis = views.normalize_axis_index(operator.index(axis), array.ndim, op.name)
    return barrier(op, (array,), {"axis": axis, "dtype": dtype}, out=out)


def _barrier_node(op: ops.Op, nodes: list[Node], static: tuple, out: Any) -> Node | None:
    """The node, checked now: its shape by the op's shape rule (or NumPy on zero-byte stand-ins), its
    dtype and errors by its reference on one-element probes. None for a dtype dynfuse lacks."""
    shapes = [node.shape for node in nodes]
    if op.shape_rule is None:
        shape = views.shape_by_reference(op.reference, shapes, dict(static))
    else:
        shape = op.shape_rule(*shapes, **dict(static))
    described = [(node.dtype, len(node.shape)) for node in nodes]
    dtype = dtypes.barrier_dtype(op, described, static, None if out is None else out.dtype)
    if not dtypes.is_supported(dtype):
        return None
    if op.value_check is not None:
        op.value_check(dtype, nodes, host_value)
    return Node(op, tuple(nodes), static, shape, dtype)


def matmul(a: Any, b: Any, out: Any = None) -> Any:
    return barrier(ops.BARRIERS["matmul"], (a, b), out=out)


# ---- views -------------------------------------------------------------------------------------


def view(
    array: Any,
    op_name: str,
    params: tuple,
    shape: tuple[int, ...],
    is_view: bool = True,
    dtype: np.dtype | None = None,
) -> Any:
    """A lazy array over ``array`` through a view op (of another ``dtype``: a complex array's part);
    ``is_view=False`` gives NumPy's copy semantics, an element read: a scalar. A scalar's 0-d view
    is a scalar, as its methods give (``s.T``); one with axes (``reshape(1, 1)``, keepdims) is an
    array, and so is NumPy's ``s[...]``."""
    node = Node(ops.VIEWS[op_name], (array._node,), params, shape, array.dtype if dtype is None else dtype)
    if not is_view:
        return new_array(_cast_node(node, array.dtype), scalar=True)
    base = array._base if array._base is not None else array
    result = LazyArray(node, base, array._scalar and not shape and op_name != "getitem")
    base._add_view(result)
    return bound_depth(result)


def roll(value: Any, shift: Any, axis: Any = None) -> Any:
    """``np.roll``: its elements moved around the given axes, as a node (``ops.MOVES``) that a kernel
    reads through an index map that wraps, so no shifted copy is made. Shifts and axes as NumPy
    takes them: broadcast together, an axis named twice moving by the sum; with no axis, the
    flattened array's elements move. A shift given as a lazy array is NumPy's to run."""
    if is_lazy(shift) or is_lazy(axis):
        return fallback("roll", np.roll, (value, shift, axis), {}, "a shift or axis given as a lazy array")
    array = lazy(value)
    if axis is None and array.ndim == 0:
        return roll(array, shift, ())
    flat = axis is None and array.ndim != 1  # the flattened array's elements move
    shape = (array.size,) if flat else array.shape
    shifts = _roll_shifts(shape, shift, 0 if axis is None else axis)
    op = ops.MOVES["roll"]
    # Run at once where the program's place does not record it: a loop whose body records (a
    # Laplacian by rolls) reads its rolls through index maps in the body's kernel
    buffer = direct.host_value(array)
    small = buffer is not direct.DECLINED and array.size < tiers.direct_elements()
    if small and not tiers.site_records():
        moved = op.reference(buffer.reshape(shape), shifts)
        return direct.result(moved.reshape(array.shape))
    source = reshape(array, (-1,)) if flat else array
    node = Node(op, (source._node,), (("shifts", shifts),), shape, array.dtype)
    tiers.note_recorded(node)
    rolled = new_array(node, scalar=False)
    return reshape(rolled, array.shape) if flat else rolled


def _roll_shifts(shape: tuple[int, ...], shift: Any, axis: Any) -> tuple[tuple[int, int], ...]:
    """``roll``'s moves, (axis, elements) for each axis that moves, as NumPy takes ``shift`` and
    ``axis``: one int each (a stencil's common case, at once), or broadcast together."""
    if type(shift) is int and type(axis) is int and -len(shape) <= axis < len(shape):
        along = axis % len(shape)
        moved = shift % shape[along] if shape[along] else 0
        return ((along, moved),) if moved else ()
    axes = views.normalize_axis_tuple(axis, len(shape), allow_duplicate=True)
    pairs = np.broadcast(shift, axes)
    if pairs.ndim > 1:
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    totals = dict.fromkeys(range(len(shape)), 0)
    for amount, along in pairs:
        totals[along] += int(amount)
    moves = ((along, amount % shape[along]) for along, amount in totals.items() if shape[along])
    return tuple((along, moved) for along, moved in moves if moved)


def lazy(value: Any) -> Any:
    """``value`` as a lazy array; a Python scalar becomes a 0-d array, as NumPy's functions make it."""
    return value if is_lazy(value) else LazyArray(array_node(value))


def reshape(value: Any, shape: Any) -> Any:
    array = lazy(value)
    made = direct.view_op(array, np.ndarray.reshape, shape)  # NumPy checks the shape itself
    if made is not direct.DECLINED:
        return made
    newshape = views.reshape_shape(array.shape, shape)
    return view(array, "reshape", (("shape", newshape),), newshape)


def transpose(value: Any, axes: Any = None) -> Any:
    array = lazy(value)
    made = direct.view_op(array, np.ndarray.transpose, axes)
    if made is not direct.DECLINED:
        return made
    return permute(array, views.transpose_axes(axes, array.ndim))


def permute(array: Any, axes: tuple[int, ...]) -> Any:
    made = direct.view_op(array, np.ndarray.transpose, axes)
    if made is not direct.DECLINED:
        return made
    return view(array, "transpose", (("axes", axes),), tuple(array.shape[axis] for axis in axes))


def expand_dims(value: Any, axis: Any) -> Any:
    array = lazy(value)
    made = direct.view_op(array, np.expand_dims, axis)  # NumPy's view, checks and errors
    if made is not direct.DECLINED:
        return made
    return reshape(array, np.expand_dims(views.shape_stand_in(array.shape), axis).shape)


def diagonal(value: Any, offset: Any = 0, axis1: Any = 0, axis2: Any = 1) -> Any:
    """NumPy's diagonal: a view (read-only, as NumPy's), whose index map steps both axes at once."""
    array = lazy(value)
    stand_in = views.shape_stand_in(array.shape)
    shape = np.diagonal(stand_in, offset, axis1, axis2).shape  # NumPy's checks and errors
    made = direct.view_op(array, np.diagonal, offset, axis1, axis2)
    if made is not direct.DECLINED:
        return made
    first, second = (views.normalize_axis_index(axis, array.ndim) for axis in (axis1, axis2))
    params = (("offset", operator.index(offset)), ("axis1", first), ("axis2", second))
    return view(array, "diagonal", params, shape)


def complex_part(value: Any, name: str) -> Any:
    """``value.real`` or ``value.imag`` (``name``), as NumPy gives them: of a complex array, a view of
    that part of each element, through which a write changes the array; of a real one, the array
    itself, or a read-only array of zeros."""
    array = lazy(value)
    if array.dtype.kind != "c":
        if name == "real":
            return array
        zero = as_node(array.dtype.type(0))
        return new_array(zero, scalar=True) if array._scalar else broadcast_to(LazyArray(zero), array.shape)
    made = direct.view_op(array, ops.VIEWS[name].reference)
    if made is not direct.DECLINED:
        return made
    return view(array, name, (), array.shape, dtype=np.finfo(array.dtype).dtype)


def broadcast_to(value: Any, shape: Any) -> Any:
    array = lazy(value)
    shape = views.normalize_shape("broadcast_to", shape)
    result_shape = np.broadcast_to(views.shape_stand_in(array.shape), shape).shape
    made = direct.view_op(array, np.broadcast_to, result_shape)
    if made is not direct.DECLINED:
        return made
    return view(array, "broadcast_to", (("shape", result_shape),), result_shape)


def getitem(value: Any, index: Any) -> Any:
    array = lazy(value)
    if type(index) is LazyArray and _is_whole_mask(array, index):
        return _masked_select(array, index)
    made = direct.getitem(array, index)
    if made is not direct.DECLINED:
        return made
    if not views.is_basic_index(index):
        made = _gather_by_index(array, index)
        if made is not direct.DECLINED:
            return made
        why = "an index of masks, new axes, or arrays that are not integers, is not recorded"
        return fallback("getitem", operator.getitem, (array, index), {}, why)
    normalized, shape, is_view = views.basic_index(array.shape, index)
    return view(array, "getitem", (("index", normalized),), shape, is_view)


def _is_whole_mask(array: Any, mask: LazyArray) -> bool:
    """Whether ``mask`` is a lazy boolean mask of ``array``'s shape, in host memory with it, over
    enough elements to record (a smaller one is NumPy's indexing at once, ``direct.getitem``)."""
    return (
        mask.dtype == np.bool_
        and mask.shape == array.shape
        and array.ndim > 0
        and array.size >= direct_elements()
        and array._node.memory is HOST
        and mask._node.memory is HOST
    )


def _masked_select(array: Any, mask: LazyArray) -> Any:
    """``array[mask]``: a library call whose length, the mask's count, is counted here, as NumPy's
    result's shape is known at its line. Recorded rather than run, so that a masked update of what
    it selects (``z[m] = z[m]**2 + c[m]``, ``_masked_update``) computes on whole arrays instead."""
    count = int(np.count_nonzero(host_value(mask._node)))
    node = _selected(array._node, mask._node, count)
    return new_array(node, scalar=False)


def _selected(array: Node, mask: Node, count: int) -> Node:
    return Node(ops.BARRIERS["masked_select"], (array, mask), (("count", count),), (count,), array.dtype)


# ---- gathers -----------------------------------------------------------------------------------


def _gather_by_index(array: Any, index: Any) -> Any:
    """``array[index]`` for an index of integer arrays, integers and slices (NumPy's advanced
    indexing): the slices taken first as a view, then a gather (``gather``) whose result axes are
    laid out as NumPy lays them: the index arrays' broadcast axes in place of the indexed axes
    where those are adjacent, else first. DECLINED for anything else (a mask, a new axis, an index
    NumPy refuses), which NumPy's indexing then answers."""
    items = list(index) if type(index) is tuple else [index]
    if sum(item is Ellipsis for item in items) > 1 or any(item is None for item in items):
        return direct.DECLINED
    if any(item is Ellipsis for item in items):
        at = next(at for at, item in enumerate(items) if item is Ellipsis)
        items[at : at + 1] = [slice(None)] * (array.ndim - len(items) + 1)
    if len(items) > array.ndim:
        return direct.DECLINED
    items += [slice(None)] * (array.ndim - len(items))
    indices: dict[int, Any] = {}
    for axis, item in enumerate(items):
        if type(item) is slice:
            continue
        if type(item) is int or isinstance(item, np.integer):
            item = np.asarray(item, np.intp)
        elif not is_lazy(item):
            item = np.asarray(item)
        if item.dtype.kind not in "iu" or (is_lazy(item) and item._node.memory is not array._node.memory):
            return direct.DECLINED
        indices[axis] = item
    try:
        shape = views.broadcast_shapes("getitem", *(item.shape for item in indices.values()))
    except ValueError:
        return direct.DECLINED
    if not array._node.inputs:  # computed data: NumPy's indexing at once, the indices computed
        computed = tuple(host_value(item._node) if is_lazy(item) else item for item in items)
        made = direct.getitem(array, computed)
        if made is not direct.DECLINED:
            return made
    sliced = tuple(slice(None) if axis in indices else item for axis, item in enumerate(items))
    if any(item != slice(None) for item in sliced):
        array = getitem(array, sliced)  # basic: a view of the axes the indices leave
    indexed = sorted(indices)
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    first = indexed[0] if adjacent else 0
    followed = [axis for axis in range(array.ndim) if axis not in indices]
    before = [axis for axis in followed if axis < first] if adjacent else []
    result_shape = (
        tuple(array.shape[axis] for axis in before)
        + shape
        + tuple(array.shape[axis] for axis in followed[len(before) :])
    )
    sources = [0] * array.ndim
    for position, axis in enumerate(followed):
        sources[axis] = position if position < len(before) else position + len(shape)
    for number, axis in enumerate(indexed):
        sources[axis] = -1 - number
    placed = [(indices[axis], len(before) + len(shape)) for axis in indexed]  # each ends where its axes end
    return gather(array, placed, tuple(sources), result_shape)


def take_along_axis(arr: Any, indices: Any, axis: Any) -> Any:
    """``np.take_along_axis``: each result element is ``arr``'s at the index ``indices`` gives along
    ``axis``, the other axes broadcast together as NumPy's."""
    array, index = lazy(arr), lazy(indices)
    if not array._node.inputs and array._node.memory is HOST and index._node.memory is HOST:
        return direct.result(np.take_along_axis(array._node.buffer, host_value(index._node), axis))
    if axis is None:
        if index.ndim != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        return take_along_axis(reshape(array, -1), index, 0)
    axis = views.normalize_axis_index(axis, array.ndim)
    if index.ndim != array.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    if index.dtype.kind not in "iu":
        raise IndexError("`indices` must be an integer array")
    others = [(extent if at != axis else 1) for at, extent in enumerate(array.shape)]
    index_others = [(extent if at != axis else 1) for at, extent in enumerate(index.shape)]
    broadcast = views.broadcast_shapes("take_along_axis", tuple(others), tuple(index_others))
    data_shape = tuple(array.shape[axis] if at == axis else extent for at, extent in enumerate(broadcast))
    if data_shape != array.shape:
        array = broadcast_to(array, data_shape)
    result_shape = tuple(index.shape[axis] if at == axis else extent for at, extent in enumerate(broadcast))
    sources = tuple(-1 if at == axis else at for at in range(array.ndim))
    return gather(array, [(index, array.ndim)], sources, result_shape)


def selected_now(function: Callable, value: Any) -> Any:
    """``function`` (``nonzero``, ``argwhere``) of ``value`` computed here, NumPy's on its buffer:
    how many elements it gives depends on the values, as the length of the positions a selection
    (``extract``, ``compress``) gathers. ``value``'s kernel is what fuses; NumPy's errors (a 0-d
    array's ``nonzero``) at the line. Another memory's arrays are NumPy's to run on host copies."""
    array = lazy(value)
    if array._node.memory is not HOST:
        why = "positions of nonzero values on a device"
        return fallback(function.__name__, function, (value,), {}, why)
    made = function(host_value(array._node))
    return tuple(direct.result(part) for part in made) if isinstance(made, tuple) else direct.result(made)


def gather(array: Any, indices: list[tuple[Any, int]], sources: tuple[int, ...], shape: tuple) -> Any:
    """Elements of ``array`` at the positions ``ops._gather``'s ``sources`` describe, each index
    array given with the result axis its own last axis lands before. The indices are computed here
    and checked against their axes' extents, so an index out of bounds raises NumPy's IndexError
    at its line; the data is recorded, read by the kernel that consumes the result at the
    positions the indices give."""
    memory = array._node.memory
    nodes = []
    axis_of = {-1 - source: axis for axis, source in enumerate(sources) if source < 0}
    for number, (index, end) in enumerate(indices):
        axis = axis_of[number]
        node = array_node(index) if not is_lazy(index) else index._node
        values = host_value(node)
        extent = array.shape[axis]
        if values.size and (values.max() >= extent or values.min() < -extent):
            bad = values[(values >= extent) | (values < -extent)].flat[0]
            raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {extent}")
        if node.memory is not memory:
            if node.memory is not HOST:
                mixed_devices("getitem", (array._node, node))
            node = pressure.new_leaf(devices.move(values, HOST, memory), exposed=False, device=memory)
        placed = (1,) * (end - len(node.shape)) + node.shape + (1,) * (len(shape) - end)
        if placed != node.shape:
            node = Node(ops.VIEWS["reshape"], (node,), (("shape", placed),), placed, node.dtype)
        nodes.append(node)
    gathered = Node(ops.GATHERS["gather"], (array._node, *nodes), (("sources", sources),), shape, array.dtype)
    return new_array(gathered)


# ---- writes ------------------------------------------------------------------------------------


def can_rebind(target: Any) -> bool:
    """True when no alias can observe ``target``'s memory, so a write may just replace its node."""
    node = target._node
    if target._base is not None or target._has_views():
        return False
    return node.op is not ops.BUFFER or not (node.exposed or direct.viewed_by_numpy(node))


def assign(target: Any, value: Node) -> None:
    """Make ``value`` (broadcastable to ``target``) the new contents of ``target``, cast to its dtype."""
    if value.shape != target.shape:
        value = Node(
            ops.VIEWS["broadcast_to"], (value,), (("shape", target.shape),), target.shape, value.dtype
        )
    if value.device is not None and value.device is not target._node.memory:
        mixed_devices("assignment", (target._node, value))
    if value.dtype != target.dtype or value.op.kind is OpKind.VIEW:
        value = _cast_node(value, target.dtype)  # a fresh, writable array of the target's dtype
    with execute.lock:
        if can_rebind(target):
            target._node = value
            bound_depth(target)
            return
        if target._node.memory is HOST and _write_in_place(target, None, value):
            return
        buffer = prepare_write(target, [value])
        np.copyto(buffer, devices.move(value.buffer, value.memory, target._node.memory))


def _into_computed_region(op: ops.Op, operands: tuple, out: Any, params: tuple) -> Any:
    """``op(*operands, out=out)`` where ``out`` is a view (or an array something else sees) of memory
    computed already, and the write would run at its line and not in place by the value's kernel
    (``_write_in_place``: below ``Target.in_place_elements``, or ``READING_REGION_FACTOR`` times as
    many for an in-place operator, which reads its region): the pending operands are computed
    (their replay, in C where kept), then NumPy's ufunc writes the region, as NumPy's own operator
    does. Recording the op too cost its value's temporary, a copy into the region and the write's
    bookkeeping in Python: ``ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])`` took 70 µs at 150² and
    156 at 300², this way 50 and 114 (NumPy 28 and 102). ``DECLINED`` where not, or where ops do
    not run directly (``direct_elements``)."""
    node = out._node
    if not direct_elements() or node.device is not HOST or execute.viewed(node).inputs or can_rebind(out):
        return direct.DECLINED
    arrays = [value._node for value in operands if type(value) is LazyArray]
    pending = [member for member in arrays if execute.viewed(member).inputs]  # computed values
    if not pending or any(member.device is not HOST for member in arrays):
        return direct.DECLINED
    limit = operator_into_region_limit() if operands[0] is out else _host_target().in_place_elements
    if views.size_of(node.shape) >= limit:
        return direct.DECLINED
    with execute.lock:
        execute.materialize(pending)
        for member in (node, *arrays):  # views of computed memory: taken, as NumPy took them
            execute.view_now(member)
        return direct.call_into(op.reference, operands, out, dict(params), any_size=True)


def _host_target() -> Any:
    """The configured backend's target, where ops run directly (a host backend's)."""
    return registry.BACKENDS[registry.backend].target


def operator_into_region_limit() -> int:
    """An in-place operator through a view of computed host memory, over fewer elements than this,
    is NumPy's ufunc into the region once its pending operand is computed (``_into_computed_region``,
    and the C operator's path that does the same); at and above it the value's kernel writes the
    region (``_write_in_place``). 0 where ops do not run directly."""
    return _host_target().in_place_elements * READING_REGION_FACTOR if direct_elements() else 0


def _made_written_memory(target: Any) -> bool:
    """Where a write into ``target`` must compute the memory under it anyway (a view of a pending
    computed array: ``q = q0.copy(); q[k] -= v``), that memory, now: the operator's value is then
    computed as on any array (directly, where small) rather than recorded over a pending one. Whether
    it made it. An array the write may replace (``y = x.copy(); y *= 2``) stays pending, and fuses."""
    node = target._node
    if not execute.viewed(node).inputs or node.memory is not HOST or can_rebind(target):
        return False
    with execute.lock:
        prepare_write(target)
    return True


def prepare_write(target: Any, also: Iterable[Node] = ()) -> Any:
    """Materialize what a write into ``target`` must not disturb; return the buffer to write.
    Where the target's memory exists already (a buffer, or views of one), what is written is
    computed alone: a statement repeated in a loop then replays its kernel."""
    node, also = target._node, list(also)
    memory = execute.viewed(node)
    if memory.inputs and also and all(other.shape == memory.shape for other in also):
        execute.materialize([node, *also])  # one plan: an update and the mask it is written by fuse
    else:
        if memory.inputs:
            # The target's memory first, alone, by its own replay, then a view of it taken: one plan
            # of the view and its memory, or of a value of another shape with them (``q = q0.copy();
            # q[k] = q[k] - v``), would run in Python every time
            execute.materialize([memory])
        execute.materialize(also)
        if node.inputs and node.memory is HOST:  # views of a computed node: taken, no plan
            execute.view_now(node)
        elif node.inputs:
            execute.materialize([node])
    buffer = target._node.buffer
    execute.materialize_readers(buffer, target._node.memory)
    return buffer


def setitem(target: Any, index: Any, value: Any) -> None:
    """``target[index] = value``; on a device, host values (NumPy arrays, lists) are copied there,
    lazy arrays must be on it."""
    if target._scalar:
        raise TypeError(f"'numpy.{target.dtype.type.__name__}' object does not support item assignment")
    if type(value) is LazyArray and value._scalar and value.dtype.kind in "iuf" and target.dtype.kind in "iu":
        # NumPy writes a number scalar into integers through Python's int(): OverflowError out of
        # range, ValueError for NaN, where a 0-d array's values are cast as they are
        value = host_value(value._node)[()]
    if direct.setitem(target, index, value):
        return
    if (
        type(index) is LazyArray
        and target.size >= direct.direct_elements()
        and (_masked_fill(target, index, value) or _masked_update(target, index, value))
    ):
        return
    memory = target._node.memory
    if type(value) is LazyArray and memory is HOST and views.index_key(index) is not None:
        # The common case (``b[1:-1, 1:-1] = expression``), without looking for lazy arrays inside
        # the index: its value, replayed where it can be, written into the region by its kernel or
        # copied in by NumPy.
        node = value._node
        if node.device not in (None, memory):
            mixed_devices("setitem", (target._node, node))
        with execute.lock:
            if _is_region(target, index, node):
                return  # a view's operator written back (``a[i] += v``): in place already
            if not _write_in_place(target, index, node):
                buffer = prepare_write(target, [node])
                buffer[index] = node.buffer
        return
    write_now("setitem", target, (index, value), operator.setitem)


def write_now(name: str, target: Any, parts: tuple, write: Callable[..., None]) -> None:
    """``write(buffer, *parts)`` into ``target``'s memory at its line, ``parts`` computed (host
    arrays among them copied to the target's device), after what reads that memory is computed:
    NumPy's assignment through an index array or a mask, or a ufunc's ``at``."""
    memory = target._node.memory
    lazy_parts = [item for item in flatten(parts) if is_lazy(item)]
    elsewhere = [item._node for item in lazy_parts if item._node.device not in (None, memory)]
    if elsewhere:
        mixed_devices(name, (target._node, *elsewhere))
    with execute.lock:
        buffer = prepare_write(target, [item._node for item in lazy_parts])
        concrete = _concrete(parts)
        write(buffer, *(concrete if memory is HOST else _on_device(concrete, memory)))


def _is_region(target: Any, index: Any, node: Node) -> bool:
    """Whether ``node`` is a view of ``target``'s computed host memory at exactly ``target[index]``:
    then writing it there changes nothing (NumPy skips that copy too). Python writes an augmented
    assignment's result back: ``ey[1:, :] -= v`` is ``ey[1:, :] = ey[1:, :].__isub__(v)``."""
    under = target._node
    if node.op.kind is not OpKind.VIEW or under.inputs or under.memory is not HOST:
        return False
    if execute.viewed(node) is not under:
        return False
    execute.view_now(node)
    region = under.buffer[index]
    return type(region) is np.ndarray and views.place(region) == views.place(node.buffer)


def _masked_fill(target: Any, mask: LazyArray, value: Any) -> bool:
    """``target[mask] = value`` for a boolean mask of the target's shape and one value: the
    elementwise ``where(mask, value, target)``, written as any value is (recorded, and fused with
    what computes the target and the mask where no alias can see the target: ``x[x < 0] = 0`` in
    a loop stays lazy). The value is converted as NumPy's assignment converts it, with its errors
    and warnings, here (``np.array(value, target.dtype)``); a lazy value of another dtype or of
    more than one element, or another library's, is left to NumPy's assignment, as is a small
    target (``setitem``), whose statements in a loop would be recorded for less than NumPy's
    assignment costs. Whether it wrote."""
    if (
        mask.dtype != np.bool_
        or mask.shape != target.shape
        or mask._node.device not in (None, target._node.memory)
    ):
        return False
    if is_lazy(value):
        if (
            value.shape != ()
            or value.dtype != target.dtype
            or value._node.device not in (None, target._node.memory)
        ):
            return False
        fill = value
    elif type(value) in (bool, int, float, complex) or isinstance(value, (np.generic, np.ndarray)):
        if isinstance(value, np.ndarray) and value.size != 1:
            return False
        fill = np.array(value, dtype=target.dtype).reshape(())[()]  # a NumPy scalar: any device's
    else:
        return False
    assign(target, as_node(elementwise(ops.ELEMENTWISE["where"], (mask, fill, target))))
    return True


def _masked_update(target: Any, mask: LazyArray, value: Any) -> bool:
    """``target[mask] = value`` where the value is computed elementwise from arrays read through the
    same mask, and from 0-d values (``z[m] = z[m]**2 + c[m]``): ``where(mask, f(z, c), target)``,
    recorded as any value is, so the update fuses with what computes the mask and the arrays, and
    nothing is compacted. Its values are those of NumPy's assignment, cast as it casts them (a cast
    that warns, complex to real, is left to it). Whether it wrote."""
    if type(value) is not LazyArray or not value.size or not value._node.inputs:
        return False  # an empty one: no element computed, none to give the lanes
    if not np.can_cast(value.dtype, target.dtype, "same_kind") or not _is_whole_mask(target, mask):
        return False
    computed = _on_whole_arrays(value._node, mask)
    if computed is None:
        return False
    if _errors_may_stop(computed) or not can_rebind(target):
        # Written in place, after what reads the target's memory is computed: the value too, held by
        # the statement itself. Computed on whole arrays now (its error, if one stops the program,
        # raised here, the target as it was), the value selects from that instead
        execute.materialize((computed,))
        value._node = _selected(computed, mask._node, value.size)
    if computed.dtype != target.dtype:  # cast once, as NumPy's assignment casts
        computed = _cast_node(computed, target.dtype)
    where = ops.ELEMENTWISE["where"]
    assign(target, as_node(elementwise(where, (mask, new_array(computed, scalar=False), target))))
    return True


def _on_whole_arrays(value: Node, mask: LazyArray) -> Node | None:
    """``value``, a function of arrays read through ``mask``, computed on the whole arrays; None where
    it is not an elementwise one. Where the mask is false, each array is given its element at the
    mask's first true position: those lanes compute what NumPy computes there, so they raise no
    floating-point error NumPy's would not."""
    reads = _read_through(value, mask._node)
    if not reads:
        return None
    shape = mask.shape
    first = np.unravel_index(int(np.argmax(host_value(mask._node).reshape(-1))), shape)
    where = ops.ELEMENTWISE["where"]
    whole: dict[Node, Node] = {}
    for read in reads:
        array = read.inputs[0]
        whole[read] = as_node(elementwise(where, (mask, new_array(array), host_value(array)[first])))
    return _rebuilt(value, whole, value.shape, shape)


def _rebuilt(node: Node, whole: dict[Node, Node], selected: tuple[int, ...], shape: tuple[int, ...]) -> Node:
    """An elementwise ``node`` of the ``selected`` shape (``_read_through``) over ``shape``, its
    reads replaced as ``whole`` says (the nodes made so far, the reads through the mask first); a
    value of one element (0-d, or a kept axis's reduction) as it is."""
    if node.shape != selected:
        return node
    if node not in whole:
        inputs = tuple(_rebuilt(child, whole, selected, shape) for child in node.inputs)
        whole[node] = Node(node.op, inputs, node.params, shape, node.dtype)
        whole[node].errstate = node.errstate
    return whole[node]


def _errors_may_stop(node: Node) -> bool:
    """Whether a floating-point error of ``node``'s ops could stop the program, so that nothing may be
    written before its kernel's flags are heeded (``float_errors.may_interrupt``)."""
    nodes = (node, *node.ancestors)
    states = [each.errstate for each in nodes]
    return float_errors.may_interrupt(states, lambda: [each.op.name for each in nodes])


def _read_through(node: Node, mask: Node) -> set[Node] | None:
    """The reads through ``mask`` (``masked_select``) of which ``node`` is an elementwise function,
    all of its shape (values of one element aside, which broadcast); None where it is not one. A read
    through another mask of the same values counts (``x[x < 0] -= y[x < 0]`` makes the mask twice):
    a pending read's mask holds the values it was counted with, as a write into it computes its
    readers first."""
    reads: set[Node] = set()
    shape, pending = node.shape, [node]
    seen: set[Node] = set()
    same = {mask: True}  # each mask read through: whether it holds ``mask``'s values
    while pending:
        node = pending.pop()
        if node in seen or not node.shape:
            continue
        seen.add(node)
        if node.shape != shape:
            if math.prod(node.shape) == 1:  # a (1,) value broadcasts as a 0-d one does
                continue
            return None
        if node.op is ops.BARRIERS["masked_select"]:
            under = node.inputs[1]
            if under not in same:
                same[under] = np.array_equal(host_value(under), host_value(mask))
            if not same[under]:
                return None
            reads.add(node)
        elif node.op.kind is OpKind.ELEMENTWISE:
            pending.extend(node.inputs)
        else:
            return None
    return reads


# A value whose trace reads the region's memory costs about as much again to check (its trace
# walked, the views it reads made again by NumPy), so it is written in place from this many times
# ``Target.in_place_elements``: an FDTD update (``ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])``),
# in place against copied, took 126 against 127 µs at 400², 176 against 243 at 600², 432 against
# 1073 at 1000².
READING_REGION_FACTOR = 4


def _write_in_place(target: Any, index: Any, node: Node) -> bool:
    """``target[index] = value`` (``node``; ``index`` None: all of ``target``, a view's in-place
    operator) with the value's kernel writing the region itself, no temporary and no copy
    (``execute.materialize_into``), where that is what NumPy's assignment computes: the value is
    pending, of the target's dtype and the region's shape, over enough elements
    (``Target.in_place_elements``: a smaller one replays in C, and is copied in;
    ``READING_REGION_FACTOR`` times as many where it reads the region), its trace reads
    the region's memory only where each element is written (``_reading_in_step``), through nodes
    nothing else holds, and its floating-point errors cannot stop the program once the region is
    written (NumPy raises before it assigns). What else reads the region is computed first, as
    before any write. Whether it wrote."""
    backend = registry.BACKENDS[registry.backend]
    limit = 0 if backend is None or backend.memory is not HOST else backend.target.in_place_elements
    size = math.prod(node.shape)
    if (
        not limit  # the common case first: a small statement, which costs this much more
        or size < limit
        or not node.inputs
        or node.op.kind is OpKind.VIEW
        or node.dtype != target.dtype
        or node.key is None
        or _errors_may_stop(node)
    ):
        return False
    # The target's memory: its buffer, or a pending view's NumPy view of the buffer under it, made
    # here (materializing the view would end the value's replays: it is one of its ancestors)
    region = _RegionReads(None).memory_of(target._node)
    if region is None or region is _ELSEWHERE:
        return False
    region = region if index is None else region[index]
    if type(region) is not np.ndarray or region.shape != node.shape or not region.flags.writeable:
        return False
    own: set[int] = set()  # the trace's nodes, where a leaf shares the region's memory
    in_step: set[int] | None = set()
    if not _reads_only_elsewhere([node], region):
        if size < READING_REGION_FACTOR * limit:
            return False
        operator = node.inputs[0] if node.op is ops.ELEMENTWISE["astype"] else node
        if (
            index is None
            and operator.op.kind is OpKind.ELEMENTWISE
            and operator.inputs[0] is target._node
            and _reads_only_elsewhere(operator.inputs[1:], region)
        ):
            # An operator in place (``ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])``): its first
            # operand, the region, is all its trace reads of that memory, each element where it is
            # written. Computed from the region, the op under a cast may not be held, nor the value
            # read by a pending graph (``np.copyto(view, y)`` of a ``y = view + 1`` something read)
            candidates = [] if operator is node else [operator]
            if held_outside(candidates, references_within([node]), listed=1) or read_by_pending(node):
                return False
            del candidates
            in_step = {id(node), id(operator)}
            own = {*in_step, *map(id, node.ancestors)}
        else:
            order = topological_order([node])
            in_step = _reading_in_step(order, region)
            if in_step is None:
                return False
            if in_step:  # computed from the region: none may be held to be read after the write, and
                # the value, which then stands for a copy of the region, may not be read by a graph
                # whose structure holds its graph as it was (a replay of it would compute that again)
                candidates = [member for member in order if id(member) in in_step and member is not node]
                if held_outside(candidates, references_within(order), listed=1) or read_by_pending(node):
                    return False
                del candidates
            own = set(map(id, order))
            del order  # what the program holds is read from reference counts: the materialization's own
    while readers := [reader for reader in pending_readers(region) if id(reader) not in own]:
        sinks = dependent_sinks(readers)
        del readers  # the next search must not find these alive through this list
        execute.materialize(sinks)
    if not node.inputs:  # computed with what read the region
        return False
    execute.materialize_into(node, region, bool(in_step))
    return True


def _reads_only_elsewhere(nodes: Iterable[Node], region: np.ndarray) -> bool:
    """Whether the traces of ``nodes`` read no memory that ``region`` may share (NumPy's bounds
    test of each leaf, once however often it is read); False where a pending node keeps no leaves
    (a structure too large)."""
    leaves: dict[int, Node] = {}
    for node in nodes:
        if node.inputs and node.key is None:
            return False
        leaves.update((id(leaf), leaf) for leaf in (node.leaves if node.inputs else (node,)))
    return not any(
        leaf.op is ops.BUFFER and np.may_share_memory(leaf.buffer, region) for leaf in leaves.values()
    )


def _reading_in_step(order: list[Node], region: np.ndarray) -> set[int] | None:
    """The nodes of a value's trace (``order``) computed from memory ``region`` shares, by id, where
    each reads it only as ``region`` itself, through elementwise ops of its shape: then the kernel
    that writes the region reads each element where it writes it, before it does
    (``u[1:-1] += dt * f(v)``), and gets NumPy's answer. None where one reads it otherwise: a
    stencil, a reduction or a roll of it would read an element another iteration has written."""
    reads = _RegionReads(region)
    for member in order:
        if member.op.kind is OpKind.VIEW and execute.viewed(member).op is ops.BUFFER:
            continue  # a view of a leaf: judged where it is read
        found = [reads.of(child) for child in member.inputs]
        if None in found:
            return None
        if any(found):
            if member.op.kind is not OpKind.ELEMENTWISE or member.shape != region.shape:
                return None
            reads.in_step.add(id(member))
    return reads.in_step


class _RegionReads:
    """What the nodes of a trace read of a region's memory (``_reading_in_step``). Views of leaves
    are taken again, by NumPy, to compare their memory with the region's."""

    def __init__(self, region: np.ndarray | None) -> None:
        self.region = region  # None: only views of leaves are made (``memory_of``)
        self.place = None if region is None else views.place(region)
        self.memory: dict[int, Any] = {}  # what a leaf or a view of one reads: an array, or None
        self.in_step: set[int] = set()  # nodes computed from the region where they are written

    def of(self, node: Node) -> bool | None:
        """Whether ``node``'s value depends on the region, element by element where it is written;
        None where it reads the region's memory otherwise."""
        if id(node) in self.in_step:
            return True
        if node.inputs and node.op.kind is not OpKind.VIEW:
            return False  # a computed value that does not depend on the region
        value = self.memory_of(node)
        if value is None or (value is not _ELSEWHERE and not np.may_share_memory(value, self.region)):
            return False
        if value is _ELSEWHERE:
            return None
        return views.place(value) == self.place or None

    def memory_of(self, node: Node) -> Any:
        """The array a leaf, or a view of leaves, reads; None for a scalar or a computed value, and
        ``_ELSEWHERE`` for a view that copies (one that matters to the region, if there is one)."""
        known = self.memory.get(id(node), _UNKNOWN)
        if known is not _UNKNOWN:
            return known
        if not node.inputs:
            value = node.buffer if node.op is ops.BUFFER else None
        elif node.op.kind is not OpKind.VIEW:
            value = None  # computed: its own memory
        else:
            under = self.memory_of(node.inputs[0])
            value = under
            if under is not None and under is not _ELSEWHERE:
                value = node.op.reference(under, **dict(node.params))
                if not np.may_share_memory(value, under):  # a copying reshape: where it reads
                    region = self.region
                    value = _ELSEWHERE if region is None or np.may_share_memory(under, region) else None
        self.memory[id(node)] = value
        return value


_ELSEWHERE = object()  # a view of a leaf that copies it (a reshape): where it reads is not known
_UNKNOWN = object()


def _on_device(value: Any, memory: devices.Memory) -> Any:
    """Host arrays (inside tuples) as copies on ``memory``; the rest as it is."""
    if isinstance(value, (np.ndarray, list)):
        return memory.from_host(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_on_device(item, memory) for item in value)
    return value


# ---- materialization and fallback ----------------------------------------------------------------


def materialize_arrays(arrays: Iterable[Any]) -> None:
    execute.materialize([array._node for array in arrays])


def flatten(value: Any) -> Iterable[Any]:
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from flatten(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from flatten(item)
    else:
        yield value


def _concrete(value: Any, host_copies: dict[int, np.ndarray] | None = None) -> Any:
    """Replace lazy arrays (already materialized) by their buffers, inside lists, tuples and dicts;
    with ``host_copies``, a device's buffer by a host copy, kept there by its node's id."""
    if is_lazy(value):
        node = value._node
        if host_copies is not None and node.memory is not HOST:
            if id(node) not in host_copies:
                host_copies[id(node)] = node.device.to_host(node.buffer)
            return host_copies[id(node)]
        node.exposed = True  # NumPy may return this very memory, or a view of it
        return node.buffer
    if isinstance(value, (list, tuple)):
        return type(value)(_concrete(item, host_copies) for item in value)
    if isinstance(value, dict):
        return {key: _concrete(item, host_copies) for key, item in value.items()}
    return value


def _wrap(result: Any, outs: tuple, out_buffers: tuple, exposed: bool, device: devices.Memory = HOST) -> Any:
    """NumPy's results as lazy arrays of ``device`` (copied there from the host)."""
    for out, buffer in zip(outs, out_buffers, strict=True):
        if result is buffer:
            return out
    scalar = isinstance(result, np.generic)  # a lazy 0-d array that keeps a scalar's semantics
    if scalar:
        result, exposed = np.asarray(result), False
    if isinstance(result, np.ndarray):
        if device is not HOST:
            return LazyArray(pressure.new_leaf(device.from_host(result), False, device), scalar=scalar)
        return LazyArray(pressure.new_leaf(result, exposed=exposed), scalar=scalar)
    if isinstance(result, (list, tuple)) and not hasattr(result, "_fields"):
        return type(result)(_wrap(item, outs, out_buffers, exposed, device) for item in result)
    return result


def function_name(function: Any) -> str:
    module = getattr(function, "__module__", None) or ""
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or repr(function)
    if module.startswith("numpy.") and not module.startswith("numpy._"):
        return f"{module.removeprefix('numpy.')}.{name}"
    return name


def _written_by(function: Callable, args: tuple) -> tuple:
    ufunc_at = getattr(function, "__name__", None) == "at" and isinstance(
        getattr(function, "__self__", None), np.ufunc
    )
    return args[:1] if ufunc_at or function in direct.WRITES_FIRST_ARGUMENT else ()


def call_numpy(
    function: Callable, args: tuple, kwargs: dict, written: tuple = (), fresh: bool = False
) -> Any:
    """Run ``function`` with NumPy on materialized inputs; its array results come back lazy.

    ``written``: arrays it writes into besides ``out=``; what reads their memory is materialized
    first, as for any write. ``fresh``: its array results are new memory (creation, random draws),
    shared with nobody, so writes into them may stay lazy. Arrays on a device are given to NumPy as
    host copies; its results, and what it wrote, are copied back to the device.
    """
    out = kwargs.get("out")
    outs = tuple(out) if isinstance(out, tuple) else (out,) if out is not None else ()
    inputs = [
        item for item in flatten((args, {k: v for k, v in kwargs.items() if k != "out"})) if is_lazy(item)
    ]
    lazy_outs = [item for item in outs if is_lazy(item)]
    device = _one_device(function, inputs + lazy_outs)
    host_copies = None if device is HOST else {}
    with execute.lock:
        materialize_arrays(inputs + lazy_outs)
        out_buffers = tuple(prepare_write(item) if is_lazy(item) else item for item in outs)
        for target in written:
            if is_lazy(target):
                prepare_write(target)
        if host_copies is not None:
            out_buffers = tuple(_concrete(item, host_copies) if is_lazy(item) else item for item in outs)
        call_kwargs = _concrete({k: v for k, v in kwargs.items() if k != "out"}, host_copies)
        if outs:
            call_kwargs["out"] = out_buffers if isinstance(out, tuple) else out_buffers[0]
        result = function(*_concrete(args, host_copies), **call_kwargs)
        for target in [*lazy_outs, *filter(is_lazy, written)] if host_copies else ():
            if id(target._node) in host_copies:  # what NumPy wrote, back where it lives
                target._node.buffer[...] = device.from_host(host_copies[id(target._node)])
    return _wrap(result, outs, out_buffers, not fresh, device)


def _one_device(function: Callable, arrays: list[Any]) -> devices.Memory:
    """The memory of ``arrays`` (host memory if none is on a device); TypeError if they are in two."""
    found = {node.device for node in (array._node for array in arrays)} - {None}
    if len(found) > 1:
        nodes = [array._node for array in arrays if array._node.device is not None]
        mixed_devices(function_name(function), tuple(nodes))
    return found.pop() if found else HOST


def fallback(name: str, function: Callable, args: tuple, kwargs: dict, why: str) -> Any:
    """What dynfuse does not record: NumPy runs it on materialized inputs, counted by name, with
    ``why`` (``stats()['fallback_reasons']``, a profile's fallbacks); on small
    computed arrays NumPy's call at once, as any direct op, which is no fallback (nothing there is
    recorded, whichever op it is)."""
    result = direct.numpy_call(function, args, kwargs)
    if result is not direct.DECLINED:
        return result
    result = call_numpy(function, args, kwargs, _written_by(function, args))
    stats.count_fallback(name, why)
    return result


def evaluate(*arrays: Any) -> Any:
    """Materialize ``arrays`` in one plan, so work they share is done once; returns them."""
    materialize_arrays([array for array in arrays if is_lazy(array)])
    return arrays[0] if len(arrays) == 1 else arrays
