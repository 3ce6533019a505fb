"""What every code generator reads the same way from a kernel description: the dtypes NumPy's loop
for each op computes in, how scalar parameters are converted, and how each reduction accumulates
(``REDUCTION_FACTS``); and the facts about an op's scalar code that both backends' tables share (the
C library's names, NumPy's constants). A backend's generator turns these into code; none of them
decides them on its own."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..float_errors import DIVIDE, INVALID, OVERFLOW, UNDERFLOW
from ..kernel import Instruction, Kernel
from ..ops import HALF_POWERS, SCAN_STEPS, OpKind

BOOL = np.dtype(bool)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
INT64 = np.dtype(np.int64)

COMPARISONS = {
    "equal": "==",
    "not_equal": "!=",
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
}
PYTHON_TYPES = {"bool": bool, "int": int, "float": float, "complex": complex}
# The C math library function of each transcendental that generators call from the library (a
# backend's generator may compute others itself, as LLVM's exp, log and tanh)
C_MATH = {
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "arctan2": "atan2",
    "sinh": "sinh",
    "cosh": "cosh",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
    "hypot": "hypot",
    "cbrt": "cbrt",
    "power": "pow",
}

# The C library's complex function of each op whose NumPy loop for complex64 and complex128 calls
# it (``cexpf`` and ``cexp``: NumPy's answers, special values included, are the C library's)
COMPLEX_C_MATH = {
    "exp": "cexp",
    "log": "clog",
    "sqrt": "csqrt",
    "sin": "csin",
    "cos": "ccos",
    "tan": "ctan",
    "sinh": "csinh",
    "cosh": "ccosh",
    "tanh": "ctanh",
    "arcsin": "casin",
    "arccos": "cacos",
    "arctan": "catan",
    "arcsinh": "casinh",
    "arccosh": "cacosh",
    "arctanh": "catanh",
}

# NumPy's constants (npy_math.h's NPY_LOG2E, NPY_LOG10E, NPY_LOGE2) of its complex log2, log10 and
# exp2, which scale the parts of clog's value or cexp's argument: rounded to the parts' dtype
LOG2_E, LOG10_E, LN_2 = (
    1.442695040888963407359924681001892137,
    0.434294481903251827651128918916605082,
    0.693147180559945309417232121458176568,
)

# What NumPy's loop raises for a function of one argument where a generator's own code for it
# (branch-free, its special cases selected) raises nothing, as tests of the argument: each (flags,
# test, bound), the tests ``"at_most"`` x <= bound, ``"under"`` x < bound, ``"beyond"`` bound < |x|
# < inf, ``"outside"`` |x| > bound, ``"from"`` |x| >= bound, ``"tiny"`` 0 < |x| < bound
# (``float_errors``' bits); a bound is one number, or float32's and float64's. The rest the
# hardware raises as the code computes: overflow and underflow as the exponentials scale their
# result. A test that holds where NumPy raises nothing costs a rerun by NumPy, never a wrong report.
# sin and cos underflow as NumPy's loops do: glibc's float64 sin at subnormal x, NumPy's own float32
# loops wherever their series underflows (|x| up to 2.66e-19, measured).
LIBM_RAISES: dict[str, tuple[tuple[int, str, float | tuple[float, float]], ...]] = {
    "log": ((DIVIDE | INVALID, "at_most", 0.0),),
    "log2": ((DIVIDE | INVALID, "at_most", 0.0),),
    "log10": ((DIVIDE | INVALID, "at_most", 0.0),),
    "log1p": ((DIVIDE | INVALID, "at_most", -1.0),),
    "arccosh": ((INVALID, "under", 1.0),),
    "arctanh": ((DIVIDE | INVALID, "from", 1.0),),
    "arcsin": ((INVALID, "outside", 1.0),),
    "arccos": ((INVALID, "outside", 1.0),),
    "sinh": ((OVERFLOW, "beyond", 710.4758600739439),),  # float64's largest finite sinh (float32's rounds)
    "sin": ((UNDERFLOW, "tiny", (2.6557422e-19, 2.2250738585072014e-308)),),
    "cos": ((UNDERFLOW, "tiny", (2.6557422e-19, 0.0)),),  # glibc's float64 cos raises none
}


def libm_bound(bound: float | tuple[float, float], double: bool) -> float:
    """A ``LIBM_RAISES`` bound for a float32 (or float16) loop or a float64 one."""
    return bound[double] if isinstance(bound, tuple) else bound


_CLIP = np._core.umath.clip


class OpLoop(NamedTuple):
    """What an op's scalar code reads besides its operands, on any backend."""

    dtype: np.dtype  # the dtype it computes in: float32 for a float16 loop
    half: bool = False  # a float16 loop: computed in float32, rounded to float16 after
    # clip's bounds are one value each: NumPy then runs another loop, which breaks ties between
    # signed zeros its own way
    scalar_bounds: bool = False
    # A reduction along the innermost axis: NumPy's loop then reads and writes its accumulator in
    # place, which its SIMD complex loops decline, so each product is rounded as C rounds it
    in_place: bool = False

    @classmethod
    def of(cls, dtype: np.dtype, scalar_bounds: bool = False) -> OpLoop:
        """The loop whose first input dtype is ``dtype``: float16 is computed in float32, as
        NumPy's half loops do."""
        half = dtype.kind == "f" and dtype.itemsize == 2
        return cls(FLOAT32 if half else dtype, half, scalar_bounds)

    def fuses_multiply_add(self) -> bool:
        """Whether a complex loop rounds ``a*b + c`` once, as NumPy's loops here do
        (``complex_loops_fuse``), but for a reduction's in-place loop, which rounds each product."""
        return complex_loops_fuse(self.dtype) and not self.in_place


def part_dtype(dtype: np.dtype) -> np.dtype:
    """The float dtype of a complex dtype's parts (a real dtype is its own)."""
    return np.dtype(f"f{dtype.itemsize // 2}") if dtype.kind == "c" else dtype


@functools.cache
def complex_loops_fuse(dtype: np.dtype) -> bool:
    """Whether NumPy's loops for complex ``dtype`` here round ``a*b + c`` once (a fused multiply-add),
    as its SIMD loops do where the CPU has FMA (multiply's real part is ``fma(ar, br, -(ai*bi))``,
    absolute's root ``sqrt(fma(r, r, 1))``), or twice, as its plain C loops do: asked of NumPy with
    a product whose real part tells them apart."""
    tiny = 2.0 ** -(12 if dtype.itemsize == 8 else 30)  # 2**-11 + 2**-24 fused, 2**-11 unfused (float32)
    z = np.full(4, complex(1 + tiny, 1), dtype)
    return bool((z * z).real[0] != 2 * part_dtype(dtype).type(tiny))


def angle_factor(dtype: np.dtype, to_radians: bool) -> float:
    """What deg2rad (``to_radians``) and rad2deg multiply by in ``dtype``, as NumPy's loops: float32
    divides float32's pi, float64 takes the double quotient."""
    if dtype == FLOAT32:
        pi = np.float32(np.pi)
        return pi / np.float32(180) if to_radians else np.float32(180) / pi
    return (np.pi / 180.0) if to_radians else (180.0 / np.pi)


def integer_reciprocal_of_zero(dtype: np.dtype) -> int:
    """``1 // 0`` as NumPy's integer reciprocal loop gives it (C leaves it undefined)."""
    with np.errstate(all="ignore"):
        return int(np.reciprocal(np.zeros(1, dtype))[0])


@functools.lru_cache(maxsize=4096)
def loop_dtypes(name: str, reference: object, operands: tuple, params: tuple, result: np.dtype) -> tuple:
    """The dtypes NumPy's loop for this op casts its operands to: (inputs..., output)."""
    if name in ("astype", "cube", "squared_magnitude", "real", "imag") or name in HALF_POWERS.values():
        return (*operands, result)
    if name == "where":
        return (BOOL, result, result, result)
    ufunc = _CLIP if name == "clip" else reference
    described = tuple(BOOL if operand is bool else operand for operand in operands)
    given = dict(params)
    options = {"casting": given.get("casting", "same_kind")}
    if "dtype" in given:
        options["signature"] = (None,) * len(operands) + (given["dtype"],)
    resolved = ufunc.resolve_dtypes((*described, None), **options)
    return tuple(np.dtype(dtype) for dtype in resolved)


def loop_of(instructions: tuple[Instruction, ...], inst: Instruction) -> tuple:
    """``loop_dtypes`` of an elementwise instruction, its weak scalars described by Python type."""
    operands = []
    for arg in inst.args:
        operand = instructions[arg]
        operands.append(
            PYTHON_TYPES[dict(operand.params)["type"]] if operand.dtype is None else operand.dtype
        )
    if inst.op.name == "astype":
        operands = [inst.dtype if not isinstance(o, np.dtype) else o for o in operands]
    return loop_dtypes(inst.op.name, inst.op.reference, tuple(operands), inst.params, inst.dtype)


@dataclass(frozen=True)
class ParamUse:
    """A Python scalar as one op's loop converts it: NumPy's own conversion, done at launch."""

    slot: int
    dtype: np.dtype
    # An int compared exactly (NumPy 2 allows ints outside the dtype): a second cell holds -1 or 1
    # when the value lies below or above the dtype's range, and the comparison is decided by that.
    compared: bool

    @property
    def cells(self) -> int:
        """The 8-byte cells it takes: its value (a complex128 two), then its range flag if compared."""
        return -(-self.dtype.itemsize // 8) + self.compared

    def range_flag(self, value: int) -> int:
        """A compared int's range flag: -1 or 1 when ``value`` lies below or above the dtype, else 0."""
        limits = np.iinfo(self.dtype)
        return -1 if value < limits.min else 1 if value > limits.max else 0


def param_uses(kernel: Kernel, loops: dict[int, tuple]) -> tuple[list[ParamUse], dict[tuple[int, int], int]]:
    """Each use of a weak scalar by an op, converted to that op's loop dtype, in the order of the
    parameter slots (so that where each is used once, the uses are the parameters as they come,
    which a launch passes without reordering); and which use is (instruction, operand position).
    A real scalar in a complex loop is passed as its real part, which the op's code widens."""
    instructions = kernel.instructions
    found: list[tuple[ParamUse, tuple[int, int]]] = []
    for number, inst in enumerate(instructions):
        for position, arg in enumerate(inst.args):
            if instructions[arg].op.kind is OpKind.SCALAR:
                dtype = loops[number][position]
                if dict(instructions[arg].params)["type"] != "complex":
                    dtype = part_dtype(dtype)
                compared = inst.op.name in COMPARISONS and dtype.kind in "iu"
                compared = compared and dict(instructions[arg].params)["type"] == "int"
                found.append((ParamUse(instructions[arg].slot, dtype, compared), (number, position)))
    found.sort(key=lambda pair: pair[0].slot)  # stable: a slot's uses in instruction order
    return [use for use, _ in found], {where: number for number, (_, where) in enumerate(found)}


@dataclass(frozen=True)
class Reduction:
    """How a reduction accumulates, the same on every backend. What combines a value into its
    accumulator is each generator's ``REDUCTION_CODE``, keyed by the same name."""

    # The accumulator's identity: "zero", "one", or its dtype's "lowest" or "highest" value
    start: str
    # NumPy's add or multiply loop (sum, prod): accumulates in the result's dtype, float16 in float32
    # where NumPy's loop does (``accumulation``)
    arithmetic: bool = False
    # A sum: a float one starts at +0.0 (a sum of -0.0s is +0.0) and adds pairwise, as NumPy's; a sum
    # of no elements is 0
    additive: bool = False
    logical: bool = False  # any, all: accumulates in bool
    # argmax, argmin: keeps the index of the value it holds, -1 until it takes the first element,
    # whatever its start
    indexed: bool = False

    def identity(self, dtype: np.dtype) -> float | int:
        """The accumulator's starting value in ``dtype``."""
        if self.start in ("zero", "one"):
            return int(self.start == "one")
        highest = self.start == "highest"
        if dtype.kind == "f":
            return np.inf if highest else -np.inf
        if dtype.kind == "b":
            return int(highest)
        info = np.iinfo(dtype)
        return info.max if highest else info.min


# Each reduction a kernel computes (the composite mean, var and std are recorded as sums)
REDUCTION_FACTS = {
    "sum": Reduction("zero", arithmetic=True, additive=True),
    "prod": Reduction("one", arithmetic=True),
    "max": Reduction("lowest"),
    "min": Reduction("highest"),
    "argmax": Reduction("zero", indexed=True),
    "argmin": Reduction("zero", indexed=True),
    "any": Reduction("zero", logical=True),
    "all": Reduction("one", logical=True),
}


def accumulation(inst: Instruction, operand: np.dtype, innermost_reduced: bool) -> tuple[np.dtype, bool]:
    """The dtype a reduction accumulates in, and whether it sums pairwise: where the kernel's
    innermost axis is reduced, as NumPy's reduce loop along it does; across a kept innermost axis
    NumPy adds each row of elements to the row of sums in turn, so each sum is in order.

    A float16 sum accumulates in float32. A float16 product follows NumPy's
    loops: where the kernel's innermost axis is reduced, NumPy's inner loop runs along it in float32
    and rounds once (a product may pass 65504 on the way and come back); where it is kept, the
    inner loop runs across the kept axis and every step is rounded to float16."""
    facts = REDUCTION_FACTS[inst.op.name]
    if facts.arithmetic:
        wide = inst.dtype == np.float16 and (facts.additive or innermost_reduced)
        dtype = FLOAT32 if wide else inst.dtype
    elif facts.logical:
        dtype = BOOL
    else:
        dtype = operand
    return dtype, facts.additive and dtype.kind in "fc" and innermost_reduced


def scan_step(inst: Instruction) -> str:
    """The elementwise op a scan combines its last value and the next operand with."""
    return SCAN_STEPS[inst.op.name]


def scan_identity(inst: Instruction) -> float | int:
    """Where a scan starts each row: a value that changes no first element. NumPy's accumulate starts
    from the first element itself, so a float sum starts from -0.0 (a -0.0 stays -0.0)."""
    if scan_step(inst) == "multiply":
        return 1
    return -0.0 if inst.dtype.kind == "f" else 0


def c_strides(shape: tuple[int, ...]) -> list[int]:
    """A C-contiguous array's strides in elements; 0 along axes of extent 1 (never stepped)."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step if extent > 1 else 0)
        step *= extent
    return strides[::-1]


class KernelFacts:
    """What every generator derives from a kernel before it writes code: its axes, its loads and
    which of them need strides at launch, each op's loop dtypes and the scalar parameter uses."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.instructions = kernel.instructions
        self.shape = kernel.shape
        self.reduce_axes = list(kernel.reduce_axes)
        # Whether NumPy's inner loop would reduce: it runs along the innermost axis of extent > 1
        stepped = [axis for axis, extent in enumerate(self.shape) if extent > 1]
        self.innermost_reduced = bool(stepped) and stepped[-1] in self.reduce_axes
        self.kept_axes = [axis for axis in range(len(self.shape)) if axis not in kernel.reduce_axes]
        self.loads = kernel.inputs
        # The operands whose strides the launch gives: loads by slot, then outputs by position
        # after the loads (``Output.strided``)
        self.strided = tuple(
            inst.slot
            for inst in self.loads
            if not dict(inst.params)["contiguous"] and not dict(inst.params)["zero_dim"]
        ) + tuple(len(self.loads) + position for position, out in enumerate(kernel.outputs) if out.strided)
        self.loops = {
            number: loop_of(kernel.instructions, inst)
            for number, inst in enumerate(self.instructions)
            if inst.op.kind is OpKind.ELEMENTWISE
        }
        self.param_uses, self.use_of = param_uses(kernel, self.loops)
        self.row_elements = int(np.prod([self.shape[axis] for axis in self.reduce_axes], dtype=np.int64))
        self.reductions = [n for n, inst in enumerate(self.instructions) if inst.op.kind is OpKind.REDUCTION]
        self.scans = [n for n, inst in enumerate(self.instructions) if inst.op.kind is OpKind.SCAN]

    def is_one_value(self, number: int) -> bool:
        """A weak scalar or a 0-d load: one value for the whole kernel."""
        inst = self.instructions[number]
        return inst.op.kind is OpKind.SCALAR or (
            inst.op.kind is OpKind.BUFFER and dict(inst.params)["zero_dim"]
        )

    def code_choice(self, number: int) -> tuple[str, bool]:
        """The op whose code computes elementwise instruction ``number``, and whether its bounds are
        one value each (clip). NumPy runs other loops where an operand is one value: float32/64
        power by one exponent (its sqrt, square and reciprocal cases, ``power_by_one_value``), and
        clip by one-value bounds (which breaks ties between signed zeros its own way)."""
        inst = self.instructions[number]
        name = inst.op.name
        float_loop = self.loops[number][0] in (FLOAT32, FLOAT64)
        if name == "power" and float_loop and self.is_one_value(inst.args[1]):
            return "power_by_one_value", False
        return name, name == "clip" and all(self.is_one_value(arg) for arg in inst.args[1:])


def generator_supports(kernel: Kernel, complex_names: frozenset[str]) -> bool:
    """Whether a generator has code for every op of ``kernel``: complex values only in the
    elementwise ops it names (``complex_names``), sums, products and logical reductions (not in
    orderings nor scans)."""
    facts = KernelFacts(kernel)
    for number, inst in enumerate(kernel.instructions):
        if inst.op.kind is OpKind.ELEMENTWISE:
            on_complex = any(dtype.kind == "c" for dtype in facts.loops[number])
            if on_complex and facts.code_choice(number)[0] not in complex_names:
                return False
        elif inst.op.kind in (OpKind.REDUCTION, OpKind.SCAN):
            operand = kernel.instructions[inst.args[0]].dtype
            reduction = REDUCTION_FACTS.get(inst.op.name) if inst.op.kind is OpKind.REDUCTION else None
            takes_complex = reduction is not None and (reduction.logical or reduction.arithmetic)
            if not takes_complex and "c" in (inst.dtype.kind, operand.kind if operand else ""):
                return False
    return True
