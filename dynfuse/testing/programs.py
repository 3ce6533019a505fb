"""Random array programs as data: drawn by Hypothesis, run on any NumPy-like namespace, printed as
Python that a failing test can paste.

A program is a list of steps over named values: its inputs ``x0, x1, ...`` and one value ``v0, v1,
...`` per step. Steps are calls into the namespace (``xp.exp(x0)``), methods (``v1.sum(axis=0)``),
operators (``v2 * 0.5``) and basic indexing (``v3[::-1, None]``), so the one program exercises both
what NumPy's functions and what its operators do (Python scalars promote differently there). Writes
(``v2[1:, ::2] += v0``, ``x1[...] = 3``, ``v1[v4] = xp.add(v1[v4], x0[v4])`` through a boolean mask)
change a value in place, and with it every view of its memory, while results computed from it
before keep the values from before: NumPy's aliasing.

Each step is drawn against stand-ins of the values it reads (arrays of their shapes and dtypes), so
NumPy accepts every step for its shapes and dtypes; what depends on the data (an integer raised to
a negative power) is left to the comparison, which then expects the same error from dynfuse.

A float value is *reproducible* when every op it comes from gives NumPy's result bit for bit in any
correct implementation (``ops.Op.reproducible``). Ops whose result jumps (``ops.Op.jumps``: comparisons,
floor, argmax) and casts to integers read only reproducible floats: applied to a value that may differ
from NumPy's in its last bit, they could differ in every bit, and the difference would not be a bug.
"""

from __future__ import annotations

import dataclasses
import operator
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import dtypes, ops

FAMILIES = ("elementwise", "reduction", "view", "barrier", "write")
LAYOUTS = ("contiguous", "reversed", "strided")

_UNARY = sorted(name for name, op in ops.ELEMENTWISE.items() if getattr(op.reference, "nin", 0) == 1)
_BINARY = sorted(name for name, op in ops.ELEMENTWISE.items() if getattr(op.reference, "nin", 0) == 2)
# Python's operators: the function each is, and the op it records (``_jumps`` reads the op).
_BINARY_OPERATORS = {
    "+": (operator.add, "add"),
    "-": (operator.sub, "subtract"),
    "*": (operator.mul, "multiply"),
    "/": (operator.truediv, "divide"),
    "//": (operator.floordiv, "floor_divide"),
    "%": (operator.mod, "remainder"),
    "**": (operator.pow, "power"),
    "&": (operator.and_, "bitwise_and"),
    "|": (operator.or_, "bitwise_or"),
    "^": (operator.xor, "bitwise_xor"),
    "<": (operator.lt, "less"),
    "<=": (operator.le, "less_equal"),
    "==": (operator.eq, "equal"),
    "!=": (operator.ne, "not_equal"),
    ">": (operator.gt, "greater"),
    ">=": (operator.ge, "greater_equal"),
    "@": (operator.matmul, "matmul"),
}
_UNARY_OPERATORS = {
    "-": (operator.neg, "negative"),
    "~": (operator.invert, "invert"),
    "abs": (abs, "absolute"),
}
# Writes: an assignment, or an augmented one (``a[key] += b`` is Python's ``a[key] = a[key].__iadd__(b)``),
# of ops that round correctly, so a write is reproducible where what it writes is
_WRITES = {"=": None, "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul}
_MASKED_UPDATES = ("add", "subtract", "multiply", "maximum")  # ``a[m] = xp.f(a[m], b[m])``
_REDUCTIONS = sorted(ops.REDUCTIONS)
_SCALARS = st.sampled_from([0, 1, 2, -1, 3, 0.5, -2.0, 1.5, 1e-3, 100.0, True, False])


@dataclass(frozen=True)
class Input:
    """An input array: its shape, dtype (a name) and memory layout."""

    shape: tuple[int, ...]
    dtype: str
    layout: str = "contiguous"  # or "reversed" (negative strides), "strided" (every other element)


@dataclass(frozen=True)
class Ref:
    """A named value of the program, as a step's argument."""

    name: str


@dataclass(frozen=True)
class Step:
    """``target = <form of name>(args, kwargs)``; ``reproducible``: see the module's docstring."""

    target: str  # a write's is the name of the value it writes into
    # "call": xp.name(...); "method": args[0].name(...); "operator"; "index": args[0][key];
    # "write": args[0][args[1]] name args[2], name one of ``_WRITES``; "masked":
    # args[0][args[1]] = xp.name(args[0][args[1]], args[2][args[1]]), args[1] a boolean mask
    form: str
    name: str
    args: tuple = ()
    kwargs: tuple[tuple[str, Any], ...] = ()
    reproducible: bool = True
    signed_zeros: bool = True  # ``ops.Op.signed_zeros``

    @property
    def writes(self) -> bool:
        """Whether it changes a value in place (its target) rather than making a new one."""
        return self.form in ("write", "masked")

    def apply(self, xp: Any, values: dict[str, Any]) -> Any:
        args = [values[arg.name] if isinstance(arg, Ref) else arg for arg in self.args]
        kwargs = dict(self.kwargs)
        if self.form == "call":
            return getattr(xp, self.name)(*args, **kwargs)
        if self.form == "method":
            return getattr(args[0], self.name)(*args[1:], **kwargs)
        if self.form == "index":
            return args[0][args[1]]
        if self.form == "write":
            target, key, value = args
            in_place = _WRITES[self.name]
            target[key] = value if in_place is None else in_place(target[key], value)
            return target
        if self.form == "masked":
            target, mask, value = args
            target[mask] = getattr(xp, self.name)(target[mask], value[mask])
            return target
        if len(args) == 1:
            return _UNARY_OPERATORS[self.name][0](args[0])
        return _BINARY_OPERATORS[self.name][0](*args)

    def source(self) -> str:
        args = [_literal(arg) for arg in self.args]
        keywords = [f"{key}={_literal(value)}" for key, value in self.kwargs]
        if self.form == "call":
            return f"{self.target} = xp.{self.name}({', '.join(args + keywords)})"
        if self.form == "method":
            return f"{self.target} = {args[0]}.{self.name}({', '.join(args[1:] + keywords)})"
        if self.form == "index":
            return f"{self.target} = {args[0]}[{_index_source(self.args[1])}]"
        if self.form == "write":
            return f"{args[0]}[{_index_source(self.args[1])}] {self.name} {args[2]}"
        if self.form == "masked":
            target, mask, value = args
            return f"{target}[{mask}] = xp.{self.name}({target}[{mask}], {value}[{mask}])"
        if len(args) == 1:
            return (
                f"{self.target} = abs({args[0]})"
                if self.name == "abs"
                else f"{self.target} = {self.name}{args[0]}"
            )
        return f"{self.target} = {args[0]} {self.name} {args[1]}"


@dataclass(frozen=True)
class Program:
    """A random array program: call it as ``program(xp, *arrays)`` with any NumPy-like namespace."""

    inputs: tuple[Input, ...]
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]

    def __call__(self, xp: Any, *arrays: Any) -> tuple:
        return self.run(xp, arrays)

    def run(self, xp: Any, arrays: Any, after_step: Any = None) -> tuple:
        """The outputs; ``after_step(step, value, values)``, if given, may replace each step's value."""
        values = {f"x{number}": array for number, array in enumerate(arrays)}
        for step in self.steps:
            value = step.apply(xp, values)
            values[step.target] = value if after_step is None else after_step(step, value, values)
        return tuple(values[name] for name in self.outputs)

    def reproducible(self, name: str) -> bool:
        """Whether the float value ``name`` is NumPy's bit for bit in any correct implementation."""
        return all(step.reproducible for step in self._ancestry(name))

    def signed_zeros(self, name: str) -> bool:
        """Whether the sign of a zero in the float value ``name`` is NumPy's in any correct
        implementation (``ops.Op.signed_zeros``)."""
        return all(step.signed_zeros for step in self._ancestry(name))

    def _ancestry(self, name: str) -> list[Step]:
        """The steps ``name``'s value may depend on: those it is computed from, and every write with
        what it writes (a write reaches every value sharing the memory it writes, which this does
        not follow: all of them count)."""
        by_target = {step.target: step for step in self.steps if not step.writes}
        writes = [step for step in self.steps if step.writes]
        found: dict[int, Step] = {}
        stack = [name, *(arg.name for step in writes for arg in step.args if isinstance(arg, Ref))]
        while stack:
            step = by_target.get(stack.pop())
            if step is not None and id(step) not in found:
                found[id(step)] = step
                stack.extend(arg.name for arg in step.args if isinstance(arg, Ref))
        return [*found.values(), *writes]

    def pruned(self) -> Program:
        """The program without the steps that no output reads (every write is kept)."""
        needed = {id(step) for name in self.outputs for step in self._ancestry(name)}
        return Program(self.inputs, tuple(step for step in self.steps if id(step) in needed), self.outputs)

    def source(self, name: str = "program") -> str:
        """The program as a Python function of a namespace and the inputs."""
        parameters = ", ".join(["xp", *(f"x{number}" for number in range(len(self.inputs)))])
        body = [f"    {step.source()}" for step in self.steps]
        body.append(f"    return {', '.join(self.outputs)}{',' if len(self.outputs) == 1 else ''}")
        return "\n".join([f"def {name}({parameters}):", *body])

    def __str__(self) -> str:
        return self.source()


def _literal(value: Any) -> str:
    if isinstance(value, Ref):
        return value.name
    if isinstance(value, float) and not np.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


def _index_source(key: tuple) -> str:
    items = []
    for item in key:
        if item is None:
            items.append("None")
        elif item is Ellipsis:
            items.append("...")
        elif isinstance(item, slice):
            parts = ["" if part is None else str(part) for part in (item.start, item.stop, item.step)]
            items.append(":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else ""))
        else:
            items.append(str(item))
    return ", ".join(items) + ("," if len(items) == 1 else "")


# ---- drawing programs --------------------------------------------------------------------------


@dataclass
class _Value:
    name: str
    stand_in: np.ndarray  # zeros of the value's shape and dtype: what NumPy checks a step against
    reproducible: bool
    writable: bool = False  # an array NumPy lets a program write into (no scalar, no broadcast view)

    @property
    def float_like(self) -> bool:
        return self.stand_in.dtype.kind in "fc"


def _stand_in(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.zeros(shape, dtype)


def programs(
    max_depth: int = 8,
    dtypes: list | None = None,
    max_rank: int = 3,
    max_side: int = 5,
    families: tuple[str, ...] = FAMILIES,
    max_inputs: int = 3,
) -> st.SearchStrategy[Program]:
    """Random programs: up to ``max_depth`` steps over 1 to ``max_inputs`` inputs of up to ``max_rank``
    axes of 0 to ``max_side`` elements (mutually broadcastable), of ``dtypes`` (default: all that
    dynfuse supports), with steps from ``families`` (``FAMILIES``: elementwise, reduction, view,
    barrier). Draw its inputs with ``inputs(program)``."""
    unknown = set(families) - set(FAMILIES)
    if unknown or not families:
        raise ValueError(f"programs: families must be some of {FAMILIES}, not {sorted(unknown) or families}")
    chosen = [np.dtype(dtype) for dtype in (dtypes or _default_dtypes())]
    return _programs(max_depth, chosen, max_rank, max_side, tuple(families), max_inputs)


def _default_dtypes() -> list[np.dtype]:
    return list(dtypes.SUPPORTED_DTYPES)


@st.composite
def _programs(draw, max_depth, dtype_choices, max_rank, max_side, families, max_inputs) -> Program:
    count = draw(st.integers(1, max_inputs))
    shapes = draw(
        hnp.mutually_broadcastable_shapes(
            num_shapes=count, min_dims=0, max_dims=max_rank, min_side=0, max_side=max_side
        )
    ).input_shapes
    program_inputs = tuple(
        Input(tuple(shape), draw(st.sampled_from(dtype_choices)).name, draw(st.sampled_from(LAYOUTS)))
        for shape in shapes
    )
    values = [
        _Value(f"x{number}", _stand_in(spec.shape, np.dtype(spec.dtype)), True, writable=True)
        for number, spec in enumerate(program_inputs)
    ]
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, max_depth))):
        family = draw(st.sampled_from(families))
        candidate = _DRAWERS[family](draw, values, f"v{len(steps)}")
        if candidate is None:
            continue
        step, reads = candidate
        if any(value.float_like and not value.reproducible for value in reads) and (
            _jumps(step) or _casts_to_integer(step)
        ):
            continue
        probed = _probe(step, values)
        if probed is None:
            continue
        stand_in, is_array = probed
        if step.reproducible and not _reproducible_on(step, [value.stand_in.dtype for value in reads]):
            step = dataclasses.replace(step, reproducible=False)
        reproducible = step.reproducible and all(value.reproducible for value in reads)
        steps.append(step)
        if step.writes:
            if not reproducible:  # what shares the written memory is not known here: every value
                for value in values:
                    value.reproducible = False
            continue
        # A view writes where its base does (a broadcast view nowhere); a new array anywhere
        writable = (
            is_array
            and step.name != "broadcast_to"
            and (family != "view" or reads[0].writable)
            and not (step.name == "imag" and reads[0].stand_in.dtype.kind != "c")  # NumPy's zeros
        )
        values.append(_Value(step.target, stand_in, reproducible, writable))
    input_names = {value.name for value in values[: len(program_inputs)]}
    written_inputs = {step.target for step in steps if step.writes and step.target in input_names}
    computed = [value.name for value in values[len(program_inputs) :]] + sorted(written_inputs)
    if not computed:
        return Program(program_inputs, (), ("x0",))
    outputs = draw(st.lists(st.sampled_from(computed), min_size=1, max_size=3, unique=True))
    if computed[-1] not in outputs:
        outputs.append(computed[-1])
    return Program(program_inputs, tuple(steps), tuple(outputs))


def _op_of(step: Step) -> ops.Op | None:
    """The op a step records: an operator's, an augmented write's, or the one it names; None for
    a plain assignment, an index or a method the op table does not know."""
    if step.form == "operator":
        name = (_UNARY_OPERATORS if len(step.args) == 1 else _BINARY_OPERATORS)[step.name][1]
    elif step.form == "write":
        name = {"+=": "add", "-=": "subtract", "*=": "multiply"}.get(step.name, "")
    else:
        name = step.name
    return ops.OPS.get(name)


def _reproducible_on(step: Step, dtypes: list[np.dtype]) -> bool:
    """Whether the step's op gives NumPy's result bit for bit on operands of these dtypes
    (``ops.Op.reproducible_on``: complex ones change which ops do)."""
    op = _op_of(step)
    return op is None or op.reproducible_on(dtypes)


def _jumps(step: Step) -> bool:
    op = _op_of(step)
    return op is not None and op.jumps


def _casts_to_integer(step: Step) -> bool:
    return step.name == "astype" and np.dtype(step.args[1]).kind in "biu"


def _probe(step: Step, values: list[_Value]) -> tuple[np.ndarray, bool] | None:
    """The step's result on stand-ins (copies: a write changes its own), as an array of its shape and
    dtype, and whether NumPy gives an array rather than a scalar; None if NumPy refuses the step."""
    stand_ins = {value.name: value.stand_in.copy() for value in values}
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = step.apply(np, stand_ins)
    except Exception:
        return None
    if not isinstance(result, np.ndarray | np.generic):
        return None
    is_array = isinstance(result, np.ndarray)
    result = np.asarray(result)
    return (_stand_in(result.shape, result.dtype), is_array) if result.dtype.kind in "biuf" else None


def _pick(draw, values: list[_Value]) -> _Value:
    """Any value, the latest first: programs grow chains, and shrink towards them."""
    return values[len(values) - 1 - draw(st.integers(0, len(values) - 1))]


def _elementwise(draw, values: list[_Value], target: str):
    a = _pick(draw, values)
    kind = draw(st.sampled_from(["unary", "binary", "scalar", "operator", "where", "clip", "astype"]))
    if kind == "unary":
        name = draw(st.sampled_from(_UNARY))
        if draw(st.booleans()) and name == "negative":
            return Step(target, "operator", "-", (Ref(a.name),)), [a]
        return Step(target, "call", name, (Ref(a.name),), reproducible=ops.ELEMENTWISE[name].reproducible), [
            a
        ]
    if kind == "binary":
        name = draw(st.sampled_from(_BINARY))
        b = _pick(draw, values)
        op = ops.ELEMENTWISE[name]
        step = Step(target, "call", name, (Ref(a.name), Ref(b.name)), (), op.reproducible, op.signed_zeros)
        return step, [a, b]
    if kind in ("scalar", "operator"):
        symbol = draw(st.sampled_from(sorted(set(_BINARY_OPERATORS) - {"@"})))
        other = draw(_SCALARS) if kind == "scalar" else Ref(_pick(draw, values).name)
        operands = (Ref(a.name), other) if draw(st.booleans()) else (other, Ref(a.name))
        reads = [value for value in values if Ref(value.name) in operands]
        return Step(target, "operator", symbol, operands, reproducible=symbol != "**"), reads
    if kind == "where":
        if a.float_like and not a.reproducible:  # a condition that jumps where the float crosses 0
            return None
        b, c = _pick(draw, values), _pick(draw, values)
        return Step(target, "call", "where", (Ref(a.name), Ref(b.name), Ref(c.name))), [a, b, c]
    if kind == "clip":
        low, high = sorted([draw(_SCALARS), draw(_SCALARS)], key=float)
        signed_zeros = ops.ELEMENTWISE["clip"].signed_zeros
        return Step(target, "call", "clip", (Ref(a.name), low, high), signed_zeros=signed_zeros), [a]
    dtype = draw(st.sampled_from(sorted({d.name for d in _default_dtypes()})))
    return Step(target, "method", "astype", (Ref(a.name), dtype)), [a]


def _reduction(draw, values: list[_Value], target: str):
    a = _pick(draw, values)
    name = draw(st.sampled_from(_REDUCTIONS))
    ndim = a.stand_in.ndim
    kwargs: dict[str, Any] = {}
    if ndim:
        if name in ops.SINGLE_AXIS_REDUCTIONS:
            kwargs["axis"] = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1)))
        else:
            axes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
            kwargs["axis"] = None if not axes else axes[0] - ndim if len(axes) == 1 else tuple(axes)
            kwargs["keepdims"] = draw(st.booleans())
    if name in ops.REDUCTIONS_WITH_DDOF and draw(st.booleans()):
        kwargs["ddof"] = 1
    form = draw(st.sampled_from(["call", "method"]))
    op = ops.REDUCTIONS[name]
    step = Step(target, form, name, (Ref(a.name),), tuple(kwargs.items()), op.reproducible, op.signed_zeros)
    return step, [a]


def _view(draw, values: list[_Value], target: str):
    a = _pick(draw, values)
    ndim = a.stand_in.ndim
    kind = draw(
        st.sampled_from(
            [
                "index",
                "transpose",
                "flip",
                "expand_dims",
                "squeeze",
                "reshape",
                "broadcast_to",
                "swapaxes",
                "moveaxis",
                "diagonal",
                "triu",
                "tril",
                "roll",
                "gather",
                "take",
                "real",
                "imag",
            ]
        )
    )
    if kind in ("real", "imag"):  # a complex value's parts, views; of a real one, itself or zeros
        return Step(target, "call", kind, (Ref(a.name),)), [a]
    if kind == "index":
        key = tuple(_index_item(draw, side) for side in a.stand_in.shape[: draw(st.integers(0, ndim))])
        key = key + ((None,) if draw(st.booleans()) else ())
        return Step(target, "index", "getitem", (Ref(a.name), key or (Ellipsis,))), [a]
    if kind == "gather":  # integer arrays (nested tuples) mixed with slices and integers
        shape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
        key = tuple(
            _positions(draw, shape, side) if side and draw(st.booleans()) else _index_item(draw, side)
            for side in a.stand_in.shape[: draw(st.integers(1, max(ndim, 1)))]
        )
        if not any(isinstance(item, tuple) for item in key):
            return None
        return Step(target, "index", "getitem", (Ref(a.name), key)), [a]
    if kind == "take":
        if not a.stand_in.size:
            return None
        axis = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1))) if ndim else None
        side = a.stand_in.size if axis is None else a.stand_in.shape[axis]
        if not side:
            return None
        positions = _positions(draw, tuple(draw(st.lists(st.integers(0, 3), max_size=2))), side)
        return Step(target, "call", "take", (Ref(a.name), positions), (("axis", axis),)), [a]
    if kind == "transpose":
        axes = tuple(draw(st.permutations(range(ndim))))
        return Step(target, "call", "transpose", (Ref(a.name), axes)), [a]
    if kind == "flip":
        axis = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1))) if ndim else None
        return Step(target, "call", "flip", (Ref(a.name),), (("axis", axis),)), [a]
    if kind == "roll":  # elements moved around axes, a copy, read through a map that wraps
        if ndim and draw(st.booleans()):
            axes = tuple(draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=2)))
            shifts = tuple(draw(st.integers(-5, 5)) for _ in axes)
            return Step(target, "call", "roll", (Ref(a.name), shifts, axes)), [a]
        return Step(target, "call", "roll", (Ref(a.name), draw(st.integers(-5, 5)))), [a]
    if kind == "expand_dims":
        return Step(target, "call", "expand_dims", (Ref(a.name), draw(st.integers(0, ndim)))), [a]
    if kind == "squeeze":
        return Step(target, "call", "squeeze", (Ref(a.name),)), [a]
    if kind == "reshape":
        return Step(target, "method", "reshape", (Ref(a.name), -1)), [a]
    if kind == "broadcast_to":
        return Step(target, "call", "broadcast_to", (Ref(a.name), (2, *a.stand_in.shape))), [a]
    if kind in ("triu", "tril"):  # index-built: a select through a mask of two aranges
        k = draw(st.integers(-2, 2))
        return (Step(target, "call", kind, (Ref(a.name),), (("k", k),)), [a]) if ndim else None
    if ndim < 2:
        return None
    if kind == "diagonal":
        return Step(target, "call", kind, (Ref(a.name), draw(st.integers(-2, 2)), 0, -1)), [a]
    return Step(target, "call", kind, (Ref(a.name), 0, -1)), [a]


def _index_item(draw, side: int) -> Any:
    if side and draw(st.booleans()):
        return draw(st.integers(-side, side - 1))
    start = draw(st.one_of(st.none(), st.integers(-side - 1, side + 1)))
    stop = draw(st.one_of(st.none(), st.integers(-side - 1, side + 1)))
    return slice(start, stop, draw(st.sampled_from([None, 2, -1, -2, 3])))


def _positions(draw, shape: tuple[int, ...], side: int) -> Any:
    """Positions along an axis of ``side`` elements (negative ones too), in ``shape``, as nested
    tuples: an index of integer arrays as a program writes it literally."""
    values = draw(hnp.arrays(np.int64, shape, elements=st.integers(-side, side - 1)))

    def nested(value: Any) -> Any:
        return tuple(nested(item) for item in value) if isinstance(value, list) else value

    positions = nested(values.tolist())
    return positions if isinstance(positions, tuple) else (positions,)


def _barrier(draw, values: list[_Value], target: str):
    a = _pick(draw, values)
    kind = draw(st.sampled_from(["matmul", "cumsum", "concatenate", "sort"]))
    if kind == "matmul":  # a with itself: a 1-d dot product, or each matrix times its transpose
        if a.stand_in.ndim < 2:
            return Step(target, "operator", "@", (Ref(a.name), Ref(a.name)), reproducible=not a.float_like), [
                a
            ]
        arguments = ("...ij,...kj->...ik", Ref(a.name), Ref(a.name))
        return Step(target, "call", "einsum", arguments, reproducible=not a.float_like), [a]
    if kind == "cumsum":
        axis = draw(st.integers(-a.stand_in.ndim, a.stand_in.ndim - 1)) if a.stand_in.ndim else None
        return Step(
            target, "call", "cumsum", (Ref(a.name),), (("axis", axis),), reproducible=not a.float_like
        ), [a]
    if kind == "sort":
        if not a.stand_in.ndim or (a.float_like and not a.reproducible):
            return None
        return Step(target, "call", "sort", (Ref(a.name),), (("axis", -1),)), [a]
    b = _pick(draw, values)
    axis = draw(st.integers(0, max(a.stand_in.ndim - 1, 0)))
    return Step(target, "call", "concatenate", ((Ref(a.name), Ref(b.name)),), (("axis", axis),)), [a, b]


def _write(draw, values: list[_Value], target: str):
    """A write into a value NumPy lets a program write (an input, a new array, a view of either):
    part of it (a basic index) or all of it, by another value or a scalar. A plain assignment casts
    as NumPy's does only where that is defined for every value (no float into an integer: NaN)."""
    writable = [value for value in values if value.writable]
    if not writable:
        return None
    a = _pick(draw, writable)
    shape = a.stand_in.shape
    masks = [value for value in values if value.stand_in.dtype == np.bool_ and value.stand_in.shape == shape]
    if shape and masks and draw(st.booleans()):
        return _masked_write(draw, values, a, _pick(draw, masks))
    key = tuple(_index_item(draw, side) for side in a.stand_in.shape[: draw(st.integers(0, a.stand_in.ndim))])
    name = draw(st.sampled_from(sorted(_WRITES)))
    if draw(st.booleans()):
        written: Any = draw(_SCALARS)
        reads = [a]
    else:
        b = _pick(draw, values)
        written, reads = Ref(b.name), [a, b]
        if name == "=" and not np.can_cast(b.stand_in.dtype, a.stand_in.dtype, "same_kind"):
            return None
        if b.float_like and not b.reproducible and a.stand_in.dtype.kind in "biu":
            return None  # a float that may differ in its last bit, cast to an integer: any bit may differ
    return Step(a.name, "write", name, (Ref(a.name), key or (Ellipsis,), written)), reads


def _masked_write(draw, values: list[_Value], a: _Value, mask: _Value):
    """``a[mask] = xp.f(a[mask], b[mask])``: an update of the elements a boolean mask of ``a``'s shape
    selects, by an op that rounds correctly, whose result casts to ``a``'s dtype as NumPy's
    assignment allows for every value."""
    b = _pick(draw, [value for value in values if value.stand_in.shape == a.stand_in.shape])
    name = draw(st.sampled_from(_MASKED_UPDATES))
    try:
        with np.errstate(all="ignore"):
            result = getattr(np, name)(a.stand_in, b.stand_in).dtype
    except TypeError:  # no loop for these dtypes (bools subtracted)
        return None
    if not np.can_cast(result, a.stand_in.dtype, "same_kind"):
        return None
    if b.float_like and not b.reproducible and a.stand_in.dtype.kind in "biu":
        return None
    op = ops.ELEMENTWISE[name]
    step = Step(a.name, "masked", name, (Ref(a.name), Ref(mask.name), Ref(b.name)), (), True, op.signed_zeros)
    return step, [a, mask, b]


_DRAWERS = {
    "elementwise": _elementwise,
    "reduction": _reduction,
    "view": _view,
    "barrier": _barrier,
    "write": _write,
}


# ---- drawing inputs ----------------------------------------------------------------------------


@st.composite
def inputs(draw, program: Program) -> list[np.ndarray]:
    """Arrays for ``program``'s inputs, with Hypothesis' edge values for each dtype (NaN, ±inf,
    -0.0, subnormals, integer extremes) laid out in memory as each input says."""
    return [
        laid_out(draw(hnp.arrays(np.dtype(spec.dtype), spec.shape)), spec.layout) for spec in program.inputs
    ]


def laid_out(values: np.ndarray, layout: str) -> np.ndarray:
    """``values`` in memory laid out as ``layout`` says (one of ``LAYOUTS``)."""
    if not values.ndim or layout == "contiguous":
        return values
    if layout == "reversed":
        return np.flip(np.ascontiguousarray(np.flip(values)))
    spread = np.zeros((*values.shape[:-1], 2 * values.shape[-1]), values.dtype)
    spread[..., ::2] = values
    return spread[..., ::2]


def input_source(name: str, array: np.ndarray, layout: str) -> str:
    """A line of Python that rebuilds ``array`` as input ``name``, in its layout."""
    dtype = f"np.{array.dtype.name}"
    if not array.ndim or layout == "contiguous":
        return f"{name} = np.array({_values_source(array)}, dtype={dtype})"
    if layout == "reversed":
        return f"{name} = np.flip(np.array({_values_source(np.flip(array))}, dtype={dtype}))"
    return f"{name} = np.repeat(np.array({_values_source(array)}, dtype={dtype}), 2, axis=-1)[..., ::2]"


def _values_source(array: np.ndarray) -> str:
    if array.dtype.kind != "f":
        return repr(array.tolist())
    text = repr(array.astype(np.float64).tolist())
    return text.replace("nan", "float('nan')").replace("inf", "float('inf')")


def cases(**options: Any) -> st.SearchStrategy[tuple[Program, list[np.ndarray]]]:
    """``(program, arrays)`` pairs: ``programs(**options)`` with ``inputs`` drawn for each."""
    return programs(**options).flatmap(lambda program: st.tuples(st.just(program), inputs(program)))
