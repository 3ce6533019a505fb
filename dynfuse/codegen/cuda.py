"""CUDA C for a kernel description: ``extern "C" __global__`` functions, one module per kernel.

The same description the LLVM generator reads, and the same semantics: every value is computed in
the dtypes NumPy's own loop for the op uses (``common.loop_dtypes``), with NumPy's rules for the
cases C leaves open, written once as device functions in ``cuda_prelude.cu``; no fast math and no
FMA contraction (``COMPILE_OPTIONS``). float16 is stored as its bits and computed in float, rounded
to float16 after every op, as NumPy's half loops do. A complex value is the prelude's pair of floats
(``df_complex``), computed as the LLVM generator computes it, and the complex functions NumPy takes
from the C library as device code with its special values; what has no complex code (``expm1``,
``log1p``, orderings) makes ``supports`` decline the kernel.

The kernel's shape is compiled in; strides are compiled in where the description knows them
(contiguous loads, broadcast axes, outputs) and passed at launch for the other loads, so one kernel
serves every stride of a layout. Arguments, in order (see ``Layout``): each input's pointer, each
output's pointer, the strides (in elements, one per axis) of the strided inputs, then each use of a
scalar parameter converted to its loop's dtype (and, for an int compared exactly, an ``int`` flag:
-1 or 1 when it lies below or above the dtype's range).

- An elementwise kernel is a grid-stride loop over the elements in C order, with 64-bit indices
  only when the element count needs them; any grid size is correct. Where every load is contiguous
  (or one value), each thread first takes packs of ``Layout.pack`` elements, loading and storing
  each array's pack in vector words of up to 16 bytes (``df_pack``), when every array is aligned to
  its word (checked in the kernel: a view may start anywhere); the rest goes one element at a time.
- A reducing kernel gives each row (one index of the kept axes) a group of ``threads_per_row``
  threads (a warp, or a block of up to 1024: from the row length, at code generation), several rows
  to a block when they are short. Each pass walks the row with the group's threads, accumulates in
  registers, and combines the threads' states with warp shuffles (and shared memory across the
  warps of a long row's block); per-row values are then known to every thread of the row, for the
  next pass, which reads the elements the thread loaded from registers where they fit
  (``CACHED_WORDS``). Reductions along leading axes of many columns run in column tiles
  (``COLUMN_ROWS``): a warp takes 32 adjacent rows, which are columns of the array, and warps share
  each one's elements. A grid-stride loop over groups of rows lets any grid cover any count of rows.
  That is ``ENTRY``. A scan (cumsum), a float product and a float16 sum rounded at every step have one
  thread per row, going along it in NumPy's order: a product in another order may overflow or
  underflow where NumPy's does not.
- Rows too few to fill the device (a whole-array sum has one) are shared between blocks, where the
  kernel makes one pass: ``PARTIAL``'s blocks each reduce a chunk of ``CHUNK_PER_THREAD`` elements a
  thread into a state per reduction (in a scratch array the launcher allocates), and write the
  chunk's elementwise outputs; ``FINISH`` combines each row's states and computes and writes what
  follows. Chunks are fixed by the code, not the grid, so the result does not depend on the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..kernel import Instruction, Kernel, Output
from ..ops import COMPUTING, HALF_POWERS, OpKind
from .common import (
    BOOL,
    C_MATH,
    COMPARISONS,
    LIBM_RAISES,
    LN_2,
    LOG2_E,
    LOG10_E,
    REDUCTION_FACTS,
    KernelFacts,
    OpLoop,
    ParamUse,
    accumulation,
    angle_factor,
    c_strides,
    generator_supports,
    integer_reciprocal_of_zero,
    libm_bound,
    part_dtype,
    scan_identity,
    scan_step,
)

ENTRY = "dynfuse_kernel"
PARTIAL = f"{ENTRY}_partial"
FINISH = f"{ENTRY}_finish"
# NVRTC options: exact IEEE arithmetic, each op rounded on its own, as NumPy's loops
COMPILE_OPTIONS = ("--std=c++17", "--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false")
BLOCK_THREADS = 256  # threads of an elementwise block, and of a block of short rows
MAX_ROW_THREADS = 1024
WARP = 32
# Elements each thread of a split reduction's block accumulates in one chunk of a row: a row's value
# is then a tree over sums of this many, as accurate as NumPy's pairwise sum, on any grid.
CHUNK_PER_THREAD = 32
# A reduction along leading axes whose kept (trailing) axes have at least this many rows lays its
# threads out in column tiles: rows are then columns of the array, a warp takes 32 adjacent ones and
# reads them at once, and the warps of a block share each column's elements (at least
# COLUMN_ELEMENTS_PER_THREAD each), where a group of threads along one column would read 32
# elements a row apart.
COLUMN_ROWS = 1024
COLUMN_ELEMENTS_PER_THREAD = 8
# A kernel of several passes over rows its threads can hold keeps each element it loads in registers
# (at most this many 32-bit words a thread), so later passes read registers, not memory.
CACHED_WORDS = 16
SHARED_BYTES = 48 * 1024  # static shared memory a block may declare

PRELUDE = (Path(__file__).with_name("cuda_prelude.cu")).read_text()

_C_TYPES = {
    ("b", 1): "bool",
    ("i", 1): "df_i8",
    ("u", 1): "df_u8",
    ("i", 2): "df_i16",
    ("u", 2): "df_u16",
    ("i", 4): "df_i32",
    ("u", 4): "df_u32",
    ("i", 8): "df_i64",
    ("u", 8): "df_u64",
    ("f", 2): "float",  # a float16 value is held in a float, rounded to float16
    ("f", 4): "float",
    ("f", 8): "double",
    ("c", 8): "df_c64",  # the prelude's df_complex: real part, then imaginary, as in memory
    ("c", 16): "df_c128",
}


def register_type(dtype: np.dtype) -> str:
    return _C_TYPES[dtype.kind, dtype.itemsize]


def register_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of ``register_type``'s values in memory: float16 is held in a float."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def register_value(value: np.generic) -> np.generic:
    """A by-value argument as the kernel declares it (``register_type``): float16 held in a float."""
    return register_dtype(value.dtype).type(value)


def storage_type(dtype: np.dtype) -> str:
    """How an array of ``dtype`` is laid out in memory: bools as bytes, float16 as its bits."""
    if dtype.kind == "b":
        return "df_u8"
    if dtype.kind == "f" and dtype.itemsize == 2:
        return "df_u16"
    return register_type(dtype)


@dataclass(frozen=True)
class Layout:
    """What a launcher passes, in order (``_Generator.arguments``), and how it sizes the grid."""

    loads: tuple[int, ...]  # the input slot of each pointer argument that is read; the outputs' follow
    strided: tuple[int, ...]  # input slots whose strides (in elements, every axis) follow
    param_uses: tuple[ParamUse, ...]  # then each use of a scalar parameter (and its range flag)
    elements: int  # elementwise: the element count; reducing: rows
    row_elements: int  # 0 for an elementwise kernel
    threads_per_row: int
    block_threads: int
    # A one-pass reduction of long rows can also run in two stages: PARTIAL's blocks each reduce one
    # of a row's ``chunks`` into a state per reduction (``states``: their dtypes, each array holding
    # rows * chunks), then FINISH combines each row's states. 0 where it cannot.
    chunks: int = 0
    states: tuple[np.dtype, ...] = ()
    pack: int = 0  # elementwise: elements a thread takes at once where arrays are aligned (0: one)
    # Each function's last argument (before a split reduction's states) is the 8-byte word its
    # threads OR their floating-point errors into (``float_errors``' bits), where an op can report one
    reports: bool = False

    def param_arguments(self, params: list) -> list[np.generic]:
        """The by-value arguments of the parameter uses: each Python scalar converted by NumPy to
        its use's dtype (a float beyond float32's range becomes inf), and after a compared int its
        range flag (an int32; the value is then 0)."""
        values: list[np.generic] = []
        with np.errstate(all="ignore"):
            for use in self.param_uses:
                value = params[use.slot]
                if use.compared:
                    flag = use.range_flag(value)
                    values += [use.dtype.type(0 if flag else value), np.int32(flag)]
                else:
                    values.append(np.array(value, use.dtype)[()])
        return values


def literal(dtype: np.dtype, value: float | int | bool) -> str:
    """A C literal of ``dtype``'s register type."""
    kind = dtype.kind
    if kind == "b":
        return "true" if value else "false"
    if kind == "c":
        part, value = part_dtype(dtype), complex(value)
        return f"{register_type(dtype)}{{{literal(part, value.real)}, {literal(part, value.imag)}}}"
    if kind == "f":
        value = float(dtype.type(value))
        if np.isnan(value):
            text = (
                "__int_as_float(0x7fc00000)"
                if dtype.itemsize < 8
                else "__longlong_as_double(0x7ff8000000000000LL)"
            )
            return text
        if np.isinf(value):
            sign = "-" if value < 0 else ""
            return (
                f"({sign}__int_as_float(0x7f800000))"
                if dtype.itemsize < 8
                else f"({sign}__longlong_as_double(0x7ff0000000000000LL))"
            )
        text = repr(value)
        return f"{text}f" if dtype.itemsize < 8 else text
    value = int(value)
    if dtype.itemsize == 8:
        if kind == "u":
            return f"{value}ULL"
        return "(-9223372036854775807LL - 1)" if value == -(1 << 63) else f"{value}LL"
    return f"(({register_type(dtype)}){value})" if value >= 0 else f"(({register_type(dtype)})({value}))"


class _Scalars:
    """NumPy's scalar semantics as C expressions over values in their loop dtypes: the casts, and
    each op's code looked up in the tables below this class."""

    def cast(self, expression: str, source: np.dtype, to: np.dtype) -> str:
        if source == to:
            return expression
        if "c" in (source.kind, to.kind):
            return self.complex_cast(expression, source, to)
        if to.kind == "b":
            return f"({expression} != 0)"
        target = register_type(to)
        if source.kind in "biu":
            if to.kind == "f" and to.itemsize == 2:
                return f"df_round_half((float)({expression}))"  # exact below 2**24; inf above 65504
            return f"(({target})({expression}))"
        if to.kind == "f":  # from a float
            if to.itemsize == 2:
                return f"df_round_half({expression})"
            return f"(({target})({expression}))"
        # float -> int: x86's truncating conversions, as NumPy's loops on the CPU give
        wide = f"(double)({expression})"
        if to.itemsize == 8 and to.kind == "u":
            return f"df_truncate_u64({wide})"
        if to.itemsize == 8 or (to.kind == "u" and to.itemsize == 4):
            return f"(({target})df_truncate64({wide}))"
        return f"(({target})df_truncate32({wide}))"

    def complex_cast(self, expression: str, source: np.dtype, to: np.dtype) -> str:
        """Part by part: a real value is the real part (its imaginary part +0.0); a complex value cast
        to a real dtype is its real part (NumPy warns, at recording), to bool whether a part is nonzero."""
        if source.kind != "c":
            part = part_dtype(to)
            return f"{register_type(to)}{{{self.cast(expression, source, part)}, {literal(part, 0.0)}}}"
        if to.kind == "b":
            return f"df_nonzero({expression})"
        part = part_dtype(source)
        if to.kind != "c":
            return self.cast(f"({expression}).re", part, to)
        real, imaginary = (self.cast(f"({expression}).{name}", part, part_dtype(to)) for name in ("re", "im"))
        return f"{register_type(to)}{{{real}, {imaginary}}}"

    def apply(
        self,
        name: str,
        args: list[tuple[str, np.dtype]],
        loop: tuple,
        result: np.dtype,
        scalar_bounds: bool = False,
    ) -> tuple[str, np.dtype]:
        """``name`` on ``args`` cast to the loop's input dtypes; the expression, of dtype ``result``.

        ``scalar_bounds``: clip's bounds are one value each (see ``OpLoop``).
        """
        ins, out = loop[:-1], loop[-1]
        a = [self.cast(expression, dtype, to) for (expression, dtype), to in zip(args, ins, strict=True)]
        on_values = ANY_DTYPE_CODE.get(name)
        if on_values is not None:
            value, dtype = on_values(self, a, ins, out)
        elif ins[0].kind == "c":
            value, dtype = COMPLEX_CODE[name](a, OpLoop.of(ins[0])), out
        elif ins[0].kind == "f":
            op_loop = OpLoop.of(ins[0], scalar_bounds)
            value, dtype = FLOAT_CODE[name](a, op_loop), op_loop.dtype
            if out.kind == "b":  # a float test
                dtype = out
            elif op_loop.half:
                value, dtype = f"df_round_half({value})", out
        else:
            code = BOOL_CODE if ins[0].kind == "b" else INTEGER_CODE
            value, dtype = code[name](a, OpLoop.of(ins[0])), out
        return self.cast(value, dtype, result), result


# An op's code: its C expression over operands in the loop's dtype (float16 held in a float).
Code = Callable[[list[str], OpLoop], str]
# The code of an op that reads its operands' dtypes itself, on any loop: (scalars, operands, the
# loop's input dtypes, its output dtype) -> (expression, its dtype).
ValueCode = Callable[[_Scalars, list[str], tuple, np.dtype], tuple[str, np.dtype]]


def _comparison(name: str) -> ValueCode:
    symbol = COMPARISONS[name]

    def code(s: _Scalars, a: list[str], ins: tuple, out: np.dtype) -> tuple[str, np.dtype]:
        left, right = ins
        if left.kind != right.kind and {left.kind, right.kind} == {"i", "u"}:
            # NumPy compares int64 with uint64 exactly: a negative int is below every unsigned one
            signed = a[0] if left.kind == "i" else a[1]
            below = symbol in ("<", "<=", "!=") if left.kind == "i" else symbol in (">", ">=", "!=")
            exact = f"((df_u64){a[0]} {symbol} (df_u64){a[1]})"
            return f"({signed} < 0 ? {'true' if below else 'false'} : {exact})", BOOL
        return f"({a[0]} {symbol} {a[1]})", BOOL

    return code


def _logical(template: str) -> ValueCode:
    """NumPy's logical loops test each operand against zero."""

    def code(s: _Scalars, a: list[str], ins: tuple, out: np.dtype) -> tuple[str, np.dtype]:
        truths = [s.cast(expression, dtype, BOOL) for expression, dtype in zip(a, ins, strict=True)]
        return template.format(*truths), BOOL

    return code


def _part(imaginary: bool) -> ValueCode:
    """A complex value's real or imaginary part; of a real value, NumPy's: the value, or zero."""

    def code(s: _Scalars, a: list[str], ins: tuple, out: np.dtype) -> tuple[str, np.dtype]:
        if ins[0].kind == "c":
            return f"({a[0]}).{'im' if imaginary else 're'}", out
        return (literal(out, 0), out) if imaginary else (a[0], ins[0])

    return code


ANY_DTYPE_CODE: dict[str, ValueCode] = {
    "where": lambda s, a, ins, out: (f"({a[0]} ? {a[1]} : {a[2]})", out),
    "astype": lambda s, a, ins, out: (a[0], ins[0]),
    "real": _part(imaginary=False),
    "imag": _part(imaginary=True),
    **{name: _comparison(name) for name in COMPARISONS},
    "logical_and": _logical("({0} && {1})"),
    "logical_or": _logical("({0} || {1})"),
    "logical_xor": _logical("({0} != {1})"),
    "logical_not": _logical("(!{0})"),
}


# -- integer code (signed and unsigned; bools where ``BOOL_CODE`` does not say otherwise)


def _ctype(c: OpLoop) -> str:
    return register_type(c.dtype)


def _signed(c: OpLoop) -> str:
    return "true" if c.dtype.kind == "i" else "false"


def _wrapping(function: str) -> Code:
    """The prelude's integer arithmetic that wraps, as NumPy's (signed overflow is undefined in C)."""
    return lambda a, c: f"{function}<{_ctype(c)}>({a[0]}, {a[1]})"


def _bitwise(operator: str) -> Code:
    return lambda a, c: f"(({_ctype(c)})({a[0]} {operator} {a[1]}))"


def _unchanged(a: list[str], c: OpLoop) -> str:
    return a[0]


def _int_absolute(a: list[str], c: OpLoop) -> str:
    return f"({a[0]} < 0 ? df_wrap_neg<{_ctype(c)}>({a[0]}) : {a[0]})" if c.dtype.kind == "i" else a[0]


def _int_sign(a: list[str], c: OpLoop) -> str:
    if c.dtype.kind == "u":
        return f"(({_ctype(c)})({a[0]} > 0))"
    return f"(({_ctype(c)})(({a[0]} > 0) - ({a[0]} < 0)))"


def _int_extremum(operator: str) -> Code:
    return lambda a, c: f"({a[0]} {operator} {a[1]} ? {a[0]} : {a[1]})"


def _int_clip(a: list[str], c: OpLoop) -> str:
    low = f"({a[0]} > {a[1]} ? {a[0]} : {a[1]})"
    return f"({low} < {a[2]} ? {low} : {a[2]})"


def _int_division(function: str) -> Code:
    """The prelude's NumPy 2 integer division: by zero gives 0; MIN // -1 wraps to MIN."""
    return lambda a, c: f"{function}<{_ctype(c)}>({a[0]}, {a[1]}, {_signed(c)})"


def _left_shift(a: list[str], c: OpLoop) -> str:
    return f"df_left_shift<{_ctype(c)}>({a[0]}, {a[1]}, {8 * c.dtype.itemsize})"


def _right_shift(a: list[str], c: OpLoop) -> str:
    return f"df_right_shift<{_ctype(c)}>({a[0]}, {a[1]}, {8 * c.dtype.itemsize}, {_signed(c)})"


def _int_reciprocal(a: list[str], c: OpLoop) -> str:
    """1 / x in C: 0 but for 1 and -1; 1 / 0 is what NumPy's loop gives."""
    t, x = _ctype(c), a[0]
    by_zero = literal(c.dtype, integer_reciprocal_of_zero(c.dtype))
    minus_one = f" : {x} == ({t})-1 ? ({t})-1" if c.dtype.kind == "i" else ""
    return f"({x} == 0 ? {by_zero} : {x} == 1 ? ({t})1{minus_one} : ({t})0)"


def _answer(value: bool) -> Code:
    """A float test on an integer, answered by the dtype."""
    return lambda a, c: "true" if value else "false"


INTEGER_CODE: dict[str, Code] = {
    "add": _wrapping("df_wrap_add"),
    "subtract": _wrapping("df_wrap_sub"),
    "multiply": _wrapping("df_wrap_mul"),
    "bitwise_and": _bitwise("&"),
    "bitwise_or": _bitwise("|"),
    "bitwise_xor": _bitwise("^"),
    "invert": lambda a, c: f"(({_ctype(c)})~{a[0]})",
    "negative": lambda a, c: f"df_wrap_neg<{_ctype(c)}>({a[0]})",
    "positive": _unchanged,
    "conjugate": _unchanged,
    "floor": _unchanged,
    "ceil": _unchanged,
    "trunc": _unchanged,
    "absolute": _int_absolute,
    "square": lambda a, c: f"df_wrap_mul<{_ctype(c)}>({a[0]}, {a[0]})",
    "squared_magnitude": lambda a, c: f"df_wrap_mul<{_ctype(c)}>({a[0]}, {a[0]})",
    "sign": _int_sign,
    "maximum": _int_extremum(">"),
    "fmax": _int_extremum(">"),
    "minimum": _int_extremum("<"),
    "fmin": _int_extremum("<"),
    "clip": _int_clip,
    "floor_divide": _int_division("df_int_floor_divide"),
    "remainder": _int_division("df_int_remainder"),
    "fmod": _int_division("df_int_fmod"),
    "left_shift": _left_shift,
    "right_shift": _right_shift,
    "power": lambda a, c: f"df_int_power<{_ctype(c)}>({a[0]}, {a[1]})",
    "reciprocal": _int_reciprocal,
    "isnan": _answer(False),
    "isinf": _answer(False),
    "isfinite": _answer(True),
}
# Bools: a sum or a maximum is an or, a product or a minimum an and
BOOL_CODE: dict[str, Code] = {
    **INTEGER_CODE,
    "add": _bitwise("|"),
    "multiply": _bitwise("&"),
    "square": _unchanged,
    "maximum": _bitwise("|"),
    "fmax": _bitwise("|"),
    "minimum": _bitwise("&"),
    "fmin": _bitwise("&"),
    "invert": lambda a, c: f"(!{a[0]})",
}


# -- float code (float16 computed in a float, rounded to float16 by ``_Scalars.apply``)


def _math(function: str) -> Code:
    """CUDA's math library, float32 with an ``f`` suffix; without fast math, within a few ulp."""
    return lambda a, c: f"{function}{'f' if c.dtype.itemsize == 4 else ''}({', '.join(a)})"


def _arithmetic(operator: str) -> Code:
    return lambda a, c: f"({a[0]} {operator} {a[1]})"


def _half_aware(function: str) -> Code:
    """A prelude template told whether the loop is float16's (whose ties NumPy breaks its own way)."""
    return lambda a, c: f"{function}<{_ctype(c)}>({a[0]}, {a[1]}, {'true' if c.half else 'false'})"


def _float_clip(a: list[str], c: OpLoop) -> str:
    half, bounds = ("true" if flag else "false" for flag in (c.half, c.scalar_bounds))
    return f"df_clip<{_ctype(c)}>({a[0]}, {a[1]}, {a[2]}, {half}, {bounds})"


def _templated(function: str) -> Code:
    """NumPy's rules for a float op, as a prelude template over the register type."""
    return lambda a, c: f"{function}<{_ctype(c)}>({', '.join(a)})"


def _prelude(function: str) -> Code:
    """A prelude function overloaded for float and double."""
    return lambda a, c: f"{function}({', '.join(a)})"


def _half_power(exponent: float) -> Code:
    """x ** exponent for -0.5, 1.5 and -1.5 (``ops.HALF_POWERS``), from a square root."""
    return lambda a, c: f"df_half_power({a[0]}, {exponent!r})"


def _scaled(to_radians: bool) -> Code:
    """deg2rad and rad2deg: one multiplication by NumPy's factor, in the loop's own precision."""
    return lambda a, c: f"({a[0]} * {literal(c.dtype, angle_factor(c.dtype, to_radians))})"


def _infinite(operator: str) -> Code:
    """isinf (==) and isfinite (<, false for NaN): the magnitude against infinity."""

    def code(a: list[str], c: OpLoop) -> str:
        return f"({_math('fabs')(a, c)} {operator} {literal(c.dtype, np.inf)})"

    return code


FLOAT_CODE: dict[str, Code] = {
    "add": _arithmetic("+"),
    "subtract": _arithmetic("-"),
    "multiply": _arithmetic("*"),
    "divide": _arithmetic("/"),
    **{name: _math(function) for name, function in C_MATH.items()},
    "sqrt": _math("sqrt"),
    "absolute": _math("fabs"),
    "fabs": _math("fabs"),
    "floor": _math("floor"),
    "ceil": _math("ceil"),
    "trunc": _math("trunc"),
    "rint": _math("rint"),
    "copysign": _math("copysign"),
    "fmod": _math("fmod"),
    "exp": _math("exp"),
    "exp2": _math("exp2"),
    "expm1": _math("expm1"),
    "log": _math("log"),
    "log2": _math("log2"),
    "log10": _math("log10"),
    "log1p": _math("log1p"),
    "tanh": _math("tanh"),
    "float_power": _math("pow"),
    "maximum": _half_aware("df_maximum"),
    "minimum": _half_aware("df_minimum"),
    "fmax": _half_aware("df_fmax"),
    "fmin": _half_aware("df_fmin"),
    "clip": _float_clip,
    "negative": lambda a, c: f"(-{a[0]})",
    "positive": _unchanged,
    "conjugate": _unchanged,
    "square": lambda a, c: f"({a[0]} * {a[0]})",
    "squared_magnitude": lambda a, c: f"({a[0]} * {a[0]})",
    "reciprocal": lambda a, c: f"(({_ctype(c)})1 / {a[0]})",
    "sign": _templated("df_sign"),
    "heaviside": _templated("df_heaviside"),
    "floor_divide": _templated("df_float_floor_divide"),
    "remainder": _templated("df_float_remainder"),
    "deg2rad": _scaled(to_radians=True),
    "rad2deg": _scaled(to_radians=False),
    "cube": _prelude("df_cube"),
    **{name: _half_power(exponent) for exponent, name in HALF_POWERS.items()},
    "hypot": _prelude("df_hypot"),
    "logaddexp": _prelude("df_logaddexp"),
    "logaddexp2": _prelude("df_logaddexp2"),
    "power_by_one_value": _prelude("df_power_by_one_value"),
    "isnan": _prelude("df_isnan"),
    "isinf": _infinite("=="),
    "isfinite": _infinite("<"),
    "signbit": _prelude("df_signbit"),
}


# -- complex code: the prelude's df_complex functions, as NumPy's complex loops compute


def _complex(function: str, fused: bool = False) -> Code:
    """A prelude function of complex operands, told where it has products whether ``a*b + c``
    rounds once (``OpLoop.fuses_multiply_add``)."""

    def code(a: list[str], c: OpLoop) -> str:
        told = ["true" if c.fuses_multiply_add() else "false"] if fused else []
        return f"{function}({', '.join([*a, *told])})"

    return code


COMPLEX_CODE: dict[str, Code] = {
    "add": _complex("df_cadd"),
    "subtract": _complex("df_csub"),
    "negative": _complex("df_cneg"),
    "positive": _unchanged,
    "conjugate": _complex("df_cconj"),
    "multiply": _complex("df_cmul", fused=True),
    "divide": _complex("df_cdiv"),
    "square": _complex("df_csquare", fused=True),
    "reciprocal": _complex("df_creciprocal"),
    "absolute": _complex("df_cabs", fused=True),
    "squared_magnitude": _complex("df_csquared_magnitude"),
    "isnan": _complex("df_isnan"),
    "isinf": _complex("df_isinf"),
    "isfinite": _complex("df_isfinite"),
    # the C library's functions, as the prelude computes them (``df_cexp`` ...)
    **{
        name: _complex(f"df_c{name}")
        for name in (
            *("exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh"),
            *("arcsin", "arccos", "arcsinh", "arccosh"),
        )
    },
    "arctan": _complex("df_catan"),
    "arctanh": _complex("df_catanh"),
    "power": _complex("df_cpow"),
    "log2": lambda a, c: f"df_cscale(df_clog({a[0]}), {LOG2_E!r})",
    "log10": lambda a, c: f"df_cscale(df_clog({a[0]}), {LOG10_E!r})",
    "exp2": lambda a, c: f"df_cexp(df_cscale({a[0]}, {LN_2!r}))",
}
# What else takes complex values here: on any dtype (``ANY_DTYPE_CODE``), except order
COMPLEX_NAMES = frozenset(COMPLEX_CODE) | (
    frozenset(ANY_DTYPE_CODE) - {"less", "less_equal", "greater", "greater_equal"}
)


def supports(kernel: Kernel) -> bool:
    """Whether this generator has code for every op of ``kernel`` (``common.generator_supports``)."""
    return generator_supports(kernel, COMPLEX_NAMES)


# -- reduction code

# A reduction's code: its accumulator combined with a value (``[acc, value]``), in the accumulator's
# dtype (float16 held in a float), on the loop of that dtype (``in_place`` where the innermost axis is
# reduced); an indexed reduction's, whether the value at an index takes the accumulator's place
# (``[acc, acc_index, value, index]``).
ReductionCode = Callable[[list[str], OpLoop], str]


def _logical_reduction(operator: str) -> ReductionCode:
    return lambda a, loop: f"({a[0]} {operator} {a[1]})"


def _arithmetic_reduction(name: str, logical: str) -> ReductionCode:
    """NumPy's add or multiply loop on the accumulator's dtype: wrapping integers, a float16 rounded
    at every step, complex values as NumPy's reduce loop computes them; bools by ``logical``."""

    def code(a: list[str], loop: OpLoop) -> str:
        kind = loop.dtype.kind
        if kind == "b":
            return _logical_reduction(logical)(a, loop)
        if kind in "iu":
            return INTEGER_CODE[name](a, loop)
        if kind == "c":
            return COMPLEX_CODE[name](a, loop)
        half = OpLoop.of(loop.dtype)
        value = FLOAT_CODE[name](a, half)
        return f"df_round_half({value})" if half.half else value

    return code


def _extremum_reduction(name: str, logical: str) -> ReductionCode:
    """The elementwise maximum or minimum, NaN and signed zeros included; bools by ``logical``."""

    def code(a: list[str], loop: OpLoop) -> str:
        if loop.dtype.kind == "b":
            return _logical_reduction(logical)(a, loop)
        if loop.dtype.kind == "f":
            return FLOAT_CODE[name](a, OpLoop.of(loop.dtype))
        return INTEGER_CODE[name](a[::-1], loop)  # the value first: (v > acc ? v : acc)

    return code


def _arg_takes(is_max: str) -> ReductionCode:
    return lambda a, loop: f"df_arg_takes<{register_type(loop.dtype)}>({', '.join(a)}, {is_max})"


REDUCTION_CODE: dict[str, ReductionCode] = {
    "sum": _arithmetic_reduction("add", "||"),
    "prod": _arithmetic_reduction("multiply", "&&"),
    "max": _extremum_reduction("maximum", "||"),
    "min": _extremum_reduction("minimum", "&&"),
    "argmax": _arg_takes("true"),
    "argmin": _arg_takes("false"),
    "any": _logical_reduction("||"),
    "all": _logical_reduction("&&"),
}


class _Accumulator:
    """A reduction's running state in registers: its value, and its index for argmax/argmin."""

    def __init__(self, generator: _Generator, number: int) -> None:
        inst = generator.instructions[number]
        self.number = number
        self.facts = REDUCTION_FACTS[inst.op.name]
        self.code = REDUCTION_CODE[inst.op.name]
        self.result = inst.dtype
        operand = generator.instructions[inst.args[0]].dtype
        self.dtype, _ = accumulation(inst, operand, generator.innermost_reduced)
        self.loop = OpLoop(self.dtype, in_place=generator.innermost_reduced)
        self.type = register_type(self.dtype)
        self.arg = self.facts.indexed
        self.value = f"acc{number}"
        self.index = f"acc{number}_index"

    def identity(self) -> str:
        return literal(self.dtype, self.facts.identity(self.dtype))

    def declare(self) -> list[str]:
        lines = [f"{self.type} {self.value} = {self.identity()};"]
        if self.arg:
            lines.append(f"df_i64 {self.index} = -1;")
        return lines

    def update(self, value: str, index: str) -> list[str]:
        """``value`` (at ``index``, for argmax/argmin) combined into the accumulator."""
        if self.arg:
            takes = self.code([self.value, self.index, value, index], self.loop)
            return [f"if ({takes}) {{ {self.value} = {value}; {self.index} = {index}; }}"]
        updated = f"{self.value} = {self.code([self.value, value], self.loop)};"
        if not (self.facts.arithmetic and self.dtype.kind in "fc"):
            return [updated]
        was = f"{self.value}_was"
        read = [(was, self.dtype), (value, self.dtype)]
        raised = _raised(self.value, self.dtype, read, self.facts.additive)
        return [f"{{ const {self.type} {was} = {self.value};", f"  {updated}", f"  df_flags |= {raised}; }}"]


class _Generator(KernelFacts):
    def __init__(self, kernel: Kernel) -> None:
        KernelFacts.__init__(self, kernel)
        self.ndim = len(kernel.shape)
        self.rows = int(np.prod([self.shape[axis] for axis in self.kept_axes], dtype=np.int64))
        self.elements = int(np.prod(self.shape, dtype=np.int64))
        self.scalars = _Scalars()
        # 32-bit indices are faster; 64-bit ones once an index plus a grid's threads could pass 2**31
        self.index_type = "df_i64" if self.elements >= 1 << 30 else "df_i32"
        self.accumulators = {number: _Accumulator(self, number) for number in self.reductions}
        # A scan runs along its row in order; so does a float product, which overflows or underflows
        # or not by the order of its factors (then inf * 0 is NaN, where another order gives 0), and a
        # float16 sum rounded at every step (``accumulation``): one thread takes each row.
        in_order = any(
            acc.dtype.kind in "fc"
            and acc.facts.arithmetic
            and (acc.dtype == np.float16 or not acc.facts.additive)
            for acc in self.accumulators.values()
        )
        ordered = in_order or bool(self.scans)
        columns = bool(self.kept_axes) and max(self.reduce_axes, default=0) < min(self.kept_axes, default=0)
        self.column_tiles = bool(self.reduce_axes) and not ordered and columns and self.rows >= COLUMN_ROWS
        if not self.reduce_axes:
            self.threads_per_row = 0
        elif ordered:
            self.threads_per_row = 1
        elif self.column_tiles:
            per_column = -(-self.row_elements // COLUMN_ELEMENTS_PER_THREAD)
            threads = min(WARP, 1 << max(per_column - 1, 0).bit_length())
            # each thread's states in shared memory: as many threads as a block's static share holds
            state_bytes = sum(
                register_dtype(a.dtype).itemsize + 8 * a.arg for a in self.accumulators.values()
            )
            while threads > 1 and max(BLOCK_THREADS, WARP * threads) * state_bytes > SHARED_BYTES:
                threads //= 2
            self.threads_per_row = threads
        else:
            wanted = 1 << max(self.row_elements - 1, 1).bit_length()
            self.threads_per_row = min(MAX_ROW_THREADS, max(WARP, wanted))
        self.block_threads = max(
            BLOCK_THREADS, WARP * self.threads_per_row if self.column_tiles else self.threads_per_row
        )
        self.rows_per_block = self.block_threads // self.threads_per_row if self.threads_per_row else 0
        # The row's threads combine their states through shared memory: across the warps of a long
        # row, or of a column tile.
        self.shares_memory = self.threads_per_row > (1 if self.column_tiles else WARP)
        # A one-pass kernel whose rows are longer than a chunk can share each row between blocks.
        chunk = self.threads_per_row * CHUNK_PER_THREAD
        splittable = (
            self.threads_per_row > 1
            and not self.column_tiles
            and kernel.passes == 1
            and self.row_elements > chunk
        )
        self.chunks = -(-self.row_elements // chunk) if splittable else 0
        # Packs of 16 bytes of the narrowest array (8 elements at most, for registers' sake)
        self.packed_loads = [inst for inst in self.loads if not dict(inst.params)["zero_dim"]]
        narrowest = min((value.dtype.itemsize for value in [*self.packed_loads, *kernel.outputs]), default=16)
        self.pack = 0 if self.reduce_axes or self.strided else min(8, 16 // narrowest)
        # Each pass over a reducing kernel's rows: its reductions, elementwise outputs and values
        self.pass_plans = (
            [self.pass_work(stage) for stage in range(kernel.passes)] if self.reduce_axes else []
        )
        self.cached_loads, self.cached_per_thread = self.row_cache()
        self.reports = any(self.reports_on(number) for number in range(len(self.instructions)))

    # -- arguments --

    def arguments(self) -> list[tuple[str, str]]:
        """(C declaration type, name) in launch order, as ``Layout`` describes it."""
        arguments: list[tuple[str, str]] = []
        for inst in self.loads:
            arguments.append((f"const {storage_type(inst.dtype)}* __restrict__", f"in{inst.slot}"))
        for position, output in enumerate(self.kernel.outputs):
            arguments.append((f"{storage_type(output.dtype)}* __restrict__", f"out{position}"))
        for slot in self.strided:
            for axis in range(self.ndim):
                arguments.append(("df_i64", f"stride{slot}_{axis}"))
        for position, use in enumerate(self.param_uses):
            arguments.append((register_type(use.dtype), f"p{position}"))
            if use.compared:
                arguments.append(("df_i32", f"p{position}_side"))
        if self.reports:
            arguments.append(("df_u64* __restrict__", "float_flags"))
        return arguments

    def strides(self, inst: Instruction) -> list[str]:
        """Each axis's stride of a load, in elements: a constant where the description knows it."""
        params = dict(inst.params)
        if params["zero_dim"]:
            return ["0"] * self.ndim
        if params["contiguous"]:
            return [str(stride) for stride in c_strides(self.shape)]
        return [
            "0" if axis in params["broadcast"] or extent == 1 else f"stride{inst.slot}_{axis}"
            for axis, extent in enumerate(self.shape)
        ]

    def position(self, number: int, extent: int) -> str:
        """Index value ``v{number}`` as a position along an axis of ``extent`` (``df_position``)."""
        return f"df_position((df_i64)v{number}, {extent})"

    @staticmethod
    def offset(coordinates: dict[int, str], strides: list[str], wraps: tuple = ()) -> str:
        """An element's offset from its coordinates; along a wrapped axis (a rolled load's
        (axis, start, modulus)), from where the coordinate wraps to."""
        moved = {
            axis: f"df_wrap({coordinates[axis]}, {start}, {modulus})"
            for axis, start, modulus in wraps
            if axis in coordinates
        }
        terms = [
            f"{moved.get(axis, coordinates[axis])} * (df_i64){stride}"
            for axis, stride in enumerate(strides)
            if axis in coordinates and stride != "0"
        ]
        return " + ".join(terms) if terms else "0"

    def coordinates(self, index: str, axes: list[int], prefix: str) -> tuple[list[str], dict[int, str]]:
        """Statements that split ``index`` into coordinates along ``axes`` (C order), by constants."""
        lines, names = [], {}
        rest = index
        for position in range(len(axes) - 1, -1, -1):
            axis = axes[position]
            extent = self.shape[axis]
            name = f"{prefix}{axis}"
            names[axis] = name
            if extent == 1:
                lines.append(f"const df_i64 {name} = 0;")
                continue
            if position == 0:
                lines.append(f"const df_i64 {name} = {rest};")
            else:
                lines.append(f"const df_i64 {name} = {rest} % {extent};")
                lines.append(f"const df_i64 {prefix}rest{axis} = {rest} / {extent};")
                rest = f"{prefix}rest{axis}"
        return lines, names

    # -- values --

    def compute(
        self, number: int, element: str | None, coordinates: dict[int, str], lane: str | None = None
    ) -> list[str]:
        """The statement defining ``v{number}``; with ``lane``, the element of that lane of the packs."""
        inst = self.instructions[number]
        kind = inst.op.kind
        t = register_type(inst.dtype) if inst.dtype is not None else None
        if kind is OpKind.BUFFER:
            params = dict(inst.params)
            if params["zero_dim"]:
                raw = f"in{inst.slot}[0]"
            elif lane is not None:
                raw = f"in_pack{inst.slot}.e[{lane}]"
            elif params["contiguous"] and element is not None:
                raw = f"in{inst.slot}[{element}]"
            else:
                offset = self.offset(coordinates, self.strides(inst), params.get("wraps", ()))
                for arg, (stride, extent) in zip(inst.args, params.get("gather", ()), strict=True):
                    offset += f" + {self.position(arg, extent)} * {stride}"
                raw = f"in{inst.slot}[{offset}]"
            return [f"const {t} v{number} = {from_memory(raw, inst.dtype)};"]
        if kind is OpKind.SCAN:  # NumPy's accumulate: the operand cast, combined with the last value
            operand = (f"v{inst.args[0]}", self.instructions[inst.args[0]].dtype)
            step = scan_step(inst)
            running = (f"scan{number}", inst.dtype)
            value, _ = self.scalars.apply(step, [running, operand], (inst.dtype,) * 3, inst.dtype)
            lines = [f"scan{number} = {value};", f"const {t} v{number} = scan{number};"]
            if not self.reports_on(number):
                return lines
            read = [(f"scan{number}_was", inst.dtype), operand]
            return [f"const {t} scan{number}_was = scan{number};", *lines, *self.raised(number, read, step)]
        if kind is OpKind.REDUCTION:  # over no axes (of a 0-d value): each row is one element
            operand = inst.args[0]
            source = self.instructions[operand].dtype
            facts = REDUCTION_FACTS[inst.op.name]
            if facts.indexed:
                return [f"const {t} v{number} = 0;"]
            if facts.logical:
                value = self.scalars.cast(f"v{operand}", source, np.dtype(bool))
                return [f"const {t} v{number} = {self.scalars.cast(value, np.dtype(bool), inst.dtype)};"]
            value = self.scalars.cast(f"v{operand}", source, inst.dtype)
            if facts.additive and inst.dtype.kind == "c":  # added to +0.0, as any NumPy sum
                value = COMPLEX_CODE["add"]([value, literal(inst.dtype, 0)], OpLoop.of(inst.dtype))
            elif facts.additive and inst.dtype.kind == "f":
                value = f"({value} + {literal(inst.dtype, 0)})"
                if inst.dtype.itemsize == 2:
                    value = f"df_round_half({value})"
            elif facts.arithmetic and inst.dtype.kind == "c":  # 1 times it, as NumPy's product
                value = COMPLEX_CODE["multiply"]([literal(inst.dtype, 1), value], OpLoop.of(inst.dtype))
            cast = self.raised(number, [(f"v{operand}", source)], "astype")
            return [f"const {t} v{number} = {value};", *cast]
        assert kind is OpKind.ELEMENTWISE, inst
        args: list[tuple[str, np.dtype]] = []
        side = None
        for position, arg in enumerate(inst.args):
            if (number, position) in self.use_of:
                use = self.use_of[number, position]
                args.append((f"p{use}", self.param_uses[use].dtype))
                if self.param_uses[use].compared:
                    side = (position, f"p{use}_side")
            else:
                args.append((f"v{arg}", self.instructions[arg].dtype))
        name, scalar_bounds = self.code_choice(number)
        value, _ = self.scalars.apply(name, args, self.loops[number], inst.dtype, scalar_bounds)
        if side is not None:
            # an int outside the dtype's range: the comparison is decided by which side it lies on
            position, flag = side
            sides = [flag if index == position else "0" for index in range(2)]
            decided = f"({sides[0]} {COMPARISONS[inst.op.name]} {sides[1]})"
            value = f"({flag} != 0 ? {decided} : {value})"
        return [f"const {t} v{number} = {value};", *self.raised(number, args, name)]

    def reports_on(self, number: int) -> bool:
        """Whether NumPy's loop for instruction ``number`` can report a floating-point error."""
        inst = self.instructions[number]
        dtypes = [inst.dtype, *(self.instructions[arg].dtype for arg in inst.args)]
        return inst.op.kind in COMPUTING and inst.op.reports_float_errors_on(dtypes)

    def raised(self, number: int, operands: list[tuple[str, np.dtype]], name: str) -> list[str]:
        """The statements that OR into ``df_flags`` what NumPy's loop of op ``name`` computing
        ``v{number}`` from ``operands`` (expressions and dtypes) could report: an integer division by
        zero or of the lowest integer by -1, a float cast to integers out of their range, a float
        value as ``df_raised`` judges it."""
        if not self.reports_on(number):
            return []
        inst = self.instructions[number]
        loop = self.loops.get(number)
        if loop is not None and loop[0].kind in "iu" and name in _INTEGER_DIVISION:
            values = [self.scalars.cast(e, d, to) for (e, d), to in zip(operands, loop[:-1], strict=True)]
            if name == "reciprocal":
                return [f"if ({values[0]} == 0) df_flags |= DF_DIVIDE | DF_INVALID;"]
            x, y = values
            lines = [f"if ({y} == 0) df_flags |= DF_DIVIDE;"]
            if loop[0].kind == "i":
                lowest = literal(loop[0], np.iinfo(loop[0]).min)
                lines.append(f"if ({x} == {lowest} && {y} == -1) df_flags |= DF_OVERFLOW;")
            return lines
        if inst.dtype.kind in "iu" and operands[0][1].kind in "fc":  # NumPy's cast checks the range
            source, expression = operands[0][1], operands[0][0]
            info = np.iinfo(inst.dtype)
            x = f"(double)(({expression}).re)" if source.kind == "c" else f"(double)({expression})"
            inside = f"{x} >= {float(info.min)!r} && {x} < {float(info.max) + 1.0!r}"
            return [f"if (!({inside})) df_flags |= DF_INVALID;"]
        if inst.dtype.kind not in "fc":
            return []
        raised = _raised(f"v{number}", inst.dtype, operands, name in _EXACT)
        if name in _NAN_INVALID:
            raised += f" | ({_any_nan(operands)} ? DF_INVALID : 0u)"
        if inst.dtype.kind == "f":
            raised += _underflows_by_argument(name, operands[0][0], inst.dtype)
        return [f"df_flags |= {raised};"]

    def store(self, position: int, output: Output, address: str, lane: str | None = None) -> str:
        value = self.scalars.cast(f"v{output.value}", self.instructions[output.value].dtype, output.dtype)
        target = f"out{position}[{address}]" if lane is None else f"out_pack{position}.e[{lane}]"
        return f"{target} = {to_memory(value, output.dtype)};"

    def needed(self, stage: int | None, roots: list[int]) -> list[int]:
        """The per-element instructions that ``roots`` read, in order (per-row ones are known)."""
        wanted: set[int] = set()
        while roots:
            number = roots.pop()
            inst = self.instructions[number]
            if number in wanted or inst.op.kind is OpKind.SCALAR or (inst.row and self.reduce_axes):
                continue
            wanted.add(number)
            roots.extend(inst.args)
        return sorted(wanted)

    # -- kernels --

    def source(self) -> str:
        parameters = self.arguments()
        if not self.reduce_axes:
            functions = [self.function(ENTRY, parameters, self.elementwise_body())]
        else:
            functions = [self.function(ENTRY, parameters, self.rows_body())]
            if self.chunks:
                with_states = parameters + self.state_arguments()
                functions.append(self.function(PARTIAL, with_states, self.partial_body()))
                functions.append(self.function(FINISH, with_states, self.finish_body()))
        comment = f"// {self.kernel.text().replace(chr(10), chr(10) + '// ')}"
        return "\n".join([PRELUDE, comment, *functions, ""])

    def function(self, name: str, parameters: list[tuple[str, str]], body: list[str]) -> str:
        declarations = ",\n    ".join(f"{ctype} {parameter}" for ctype, parameter in parameters)
        if self.reports:  # each thread's errors, reported once at its end
            report = "if (df_flags != 0) atomicOr(float_flags, (df_u64)df_flags);"
            body = ["unsigned df_flags = 0;", *body, report]
        return "\n".join(
            [
                f'extern "C" __global__ void __launch_bounds__({self.block_threads}) {name}(',
                f"    {declarations}) {{",
                *("  " + line for line in body),
                "}",
            ]
        )

    def states(self) -> list[tuple[str, np.dtype]]:
        """A split reduction's state arrays, in argument order (``Layout.states``): each accumulator's
        value (and index), one per chunk of each row."""
        states = []
        for accumulator in self.accumulators.values():
            states.append((f"state{accumulator.number}", register_dtype(accumulator.dtype)))
            if accumulator.arg:
                states.append((f"state{accumulator.number}_index", np.dtype(np.int64)))
        return states

    def state_arguments(self) -> list[tuple[str, str]]:
        return [(f"{register_type(dtype)}* __restrict__", name) for name, dtype in self.states()]

    def elementwise_body(self) -> list[str]:
        i = self.index_type
        lines = [
            f"const {i} count = {self.elements};",
            f"const {i} step = ({i})gridDim.x * blockDim.x;",
            f"const {i} thread = ({i})blockIdx.x * blockDim.x + threadIdx.x;",
        ]
        first = "thread"
        if self.pack:
            lines += self.packed_loop()
            first = f"packs * {self.pack} + thread"
        body: list[str] = []
        coordinates: dict[int, str] = {}
        if self.strided:
            split, coordinates = self.coordinates("element", list(range(self.ndim)), "c")
            body += split
        roots = [output.value for output in self.kernel.outputs]
        for number in self.needed(None, roots):
            body += self.compute(number, "element", coordinates)
        for position, output in enumerate(self.kernel.outputs):
            body.append(self.store(position, output, "element"))
        loop = f"for ({i} element = {first}; element < count; element += step) {{"
        return [*lines, loop, *("  " + line for line in body), "}"]

    def packed_loop(self) -> list[str]:
        """Each thread's packs, while every array is aligned to its pack's word; ``packs`` of them
        are done after it (none where an array is not aligned)."""
        i, size = self.index_type, self.pack
        inputs = [(f"in{inst.slot}", f"in_pack{inst.slot}", inst.dtype) for inst in self.packed_loads]
        outputs = [
            (f"out{position}", f"out_pack{position}", output.dtype)
            for position, output in enumerate(self.kernel.outputs)
        ]
        pack_type = {name: f"df_pack<{storage_type(dtype)}, {size}>" for _, name, dtype in inputs + outputs}
        aligned = " && ".join(f"{pack_type[name]}::aligned({array})" for array, name, _ in inputs + outputs)
        lanes: list[str] = []
        roots = [output.value for output in self.kernel.outputs]
        for number in self.needed(None, roots):
            lanes += self.compute(number, None, {}, lane="lane")
        for position, output in enumerate(self.kernel.outputs):
            lanes.append(self.store(position, output, "", lane="lane"))
        loads = [
            f"{pack_type[name]} {name}; {name}.load({array} + group * {size});" for array, name, _ in inputs
        ]
        results = [f"{pack_type[name]} {name};" for _, name, _ in outputs]
        stores = [f"{name}.store({array} + group * {size});" for array, name, _ in outputs]
        return [
            f"const {i} packs = ({aligned}) ? count / {size} : 0;",
            f"for ({i} group = thread; group < packs; group += step) {{",
            *("  " + line for line in loads + results),
            "#pragma unroll",
            f"  for (int lane = 0; lane < {size}; ++lane) {{",
            *("    " + line for line in lanes),
            "  }",
            *("  " + line for line in stores),
            "}",
        ]

    # -- reducing kernels: ENTRY walks whole rows; PARTIAL and FINISH share each row between blocks --

    def pass_work(self, stage: int) -> tuple[list[int], list[tuple[int, Output]], list[int]]:
        """Pass ``stage``'s reductions, its elementwise outputs (with their positions), and the
        per-element values it computes for them."""
        accumulating = [
            n for n in self.reductions if self.instructions[self.instructions[n].args[0]].stage == stage
        ]
        outputs = [
            (position, output)
            for position, output in enumerate(self.kernel.outputs)
            if not output.row and self.instructions[output.value].stage == stage
        ]
        roots = [self.instructions[n].args[0] for n in accumulating] + [o.value for _, o in outputs]
        return accumulating, outputs, self.needed(stage, roots)

    def row_cache(self) -> tuple[frozenset[int], int]:
        """The loads that more than one pass reads, kept in registers by a thread for the elements of
        the row it takes, and how many elements those are; none where they exceed CACHED_WORDS."""
        if self.kernel.passes < 2 or not self.threads_per_row or not self.row_elements:
            return frozenset(), 0
        per_thread = -(-self.row_elements // self.threads_per_row)
        read: set[int] = set()
        reread: set[int] = set()
        for _, _, computed in self.pass_plans:
            for number in computed:
                inst = self.instructions[number]
                if inst.op.kind is OpKind.BUFFER and not dict(inst.params)["zero_dim"]:
                    (reread if number in read else read).add(number)
        words = per_thread * sum(-(-register_dtype(self.instructions[n].dtype).itemsize // 4) for n in reread)
        return (frozenset(reread), per_thread) if reread and words <= CACHED_WORDS else (frozenset(), 0)

    def rows_body(self) -> list[str]:
        """Each group of threads takes rows, and makes every pass over each."""
        body, row_coordinates = self.row_header(chunked=False)
        body += self.scan_declarations()
        body += [
            f"{register_type(self.instructions[n].dtype)} cache{n}[{self.cached_per_thread}];"
            for n in sorted(self.cached_loads)
        ]
        done: set[int] = set()
        cached: set[int] = set()
        for stage in range(self.kernel.passes):
            body += self.row_values(stage, done, row_coordinates)
            accumulating = self.pass_plans[stage][0]
            body += self.element_pass(stage, row_coordinates, "lane", str(self.row_elements), cached)
            for number in accumulating:
                body += self.reduce_across_threads(self.accumulators[number])
                body += self.reduction_result(self.accumulators[number])
                done.add(number)
        body += self.row_values(self.kernel.passes, done, row_coordinates)
        return self.row_loop(body + self.row_stores(row_coordinates), chunked=False)

    def partial_body(self) -> list[str]:
        """Each block takes chunks of a row (a one-pass kernel's), writes their elementwise outputs,
        and leaves each reduction's state of the chunk for FINISH."""
        body, row_coordinates = self.row_header(chunked=True)
        body += self.scan_declarations()
        body += self.row_values(0, set(), row_coordinates)
        chunk = self.threads_per_row * CHUNK_PER_THREAD
        body.append(f"const df_i64 chunk_end = chunk * {chunk} + {chunk};")
        end = f"(chunk_end < {self.row_elements} ? chunk_end : {self.row_elements})"
        body += self.element_pass(0, row_coordinates, f"chunk * {chunk} + lane", end, set())
        for accumulator in self.accumulators.values():
            body += self.reduce_across_threads(accumulator)
            number = accumulator.number
            body.append(f"if (lane == 0) state{number}[unit] = {accumulator.value};")
            if accumulator.arg:
                body.append(f"if (lane == 0) state{number}_index[unit] = {accumulator.index};")
        return self.row_loop(body, chunked=True)

    def finish_body(self) -> list[str]:
        """Each group of threads takes rows, combines the states PARTIAL left for each of its chunks,
        and computes and writes what follows the reductions."""
        body, row_coordinates = self.row_header(chunked=False)
        done: set[int] = set()
        body += self.row_values(0, done, row_coordinates)
        for accumulator in self.accumulators.values():
            body += accumulator.declare()
        body.append(f"for (df_i64 c = lane; c < {self.chunks}; c += {self.threads_per_row}) {{")
        body += ["  if (!valid) break;", f"  const df_i64 chunk_unit = row * {self.chunks} + c;"]
        for accumulator in self.accumulators.values():
            state = f"state{accumulator.number}"
            body += [
                "  " + line
                for line in accumulator.update(f"{state}[chunk_unit]", f"{state}_index[chunk_unit]")
            ]
        body.append("}")
        for accumulator in self.accumulators.values():
            body += self.reduce_across_threads(accumulator)
            body += self.reduction_result(accumulator)
            done.add(accumulator.number)
        body += self.row_values(1, done, row_coordinates)
        return self.row_loop(body + self.row_stores(row_coordinates), chunked=False)

    def row_header(self, chunked: bool) -> tuple[list[str], dict[int, str]]:
        """The first statements of a row's work: which row (and chunk) this thread works on, whether
        it is one, and its coordinates along the kept axes."""
        if chunked:  # a block of one row: a unit is a chunk of a row
            lines = [
                f"const df_i64 row = unit / {self.chunks};",
                f"const df_i64 chunk = unit % {self.chunks};",
                "const bool valid = true;",
                "const df_i64 row_index = row;",
            ]
        else:
            lines = [
                f"const df_i64 row = unit * {self.rows_per_block} + row_in_block;",
                f"const bool valid = row < {self.rows};",
                "const df_i64 row_index = valid ? row : 0;  // rows past the end read row 0",
            ]
        split, row_coordinates = self.coordinates("row_index", self.kept_axes, "k")
        return lines + split, row_coordinates

    def row_loop(self, body: list[str], chunked: bool) -> list[str]:
        """``body`` in a grid-stride loop over units of work: chunks of rows, or groups of rows."""
        threads = self.threads_per_row
        units = self.rows * self.chunks if chunked else -(-self.rows // self.rows_per_block)
        # ``lane``: this thread's place in its row's group. A column tile's warp takes adjacent rows
        # (columns), so that its threads read adjacent elements.
        if self.column_tiles:
            lines = [
                f"const int lane = threadIdx.x / {self.rows_per_block};",
                f"const int row_in_block = threadIdx.x % {self.rows_per_block};",
            ]
        else:
            lines = [
                f"const int lane = threadIdx.x % {threads};",
                f"const int row_in_block = threadIdx.x / {threads};",
            ]
        if self.shares_memory:
            slots = self.block_threads if self.column_tiles else self.block_threads // WARP
            for accumulator in self.accumulators.values():
                lines.append(f"__shared__ {accumulator.type} shared{accumulator.number}[{slots}];")
                if accumulator.arg:
                    lines.append(f"__shared__ df_i64 shared{accumulator.number}_index[{slots}];")
        lines.append(f"for (df_i64 unit = blockIdx.x; unit < {units}; unit += gridDim.x) {{")
        return lines + ["  " + line for line in body] + ["}"]

    def row_values(self, stage: int, done: set[int], row_coordinates: dict[int, str]) -> list[str]:
        """The per-row values that exist before pass ``stage`` (every thread of the row computes them)."""
        lines = []
        for number, inst in enumerate(self.instructions):
            computed = inst.op.kind not in (OpKind.REDUCTION, OpKind.SCALAR)
            if inst.row and inst.stage == stage and number not in done and computed:
                lines += self.compute(number, None, row_coordinates)
                done.add(number)
        return lines

    def scan_declarations(self) -> list[str]:
        """Each scan's running value, which every pass that computes the scan starts afresh."""
        return [f"{register_type(self.instructions[n].dtype)} scan{n};" for n in self.scans]

    def element_pass(
        self, stage: int, row_coordinates: dict[int, str], begin: str, end: str, cached: set[int]
    ) -> list[str]:
        """One pass of the row's threads over elements ``[begin, end)`` of the row: accumulating the
        reductions of this stage's values, and writing the elementwise outputs of this stage. Loads
        in ``cached`` are read from registers, where an earlier pass left them; this pass's first
        reads of ``cached_loads`` are left there (and added to ``cached``)."""
        accumulating, outputs, computed = self.pass_plans[stage]
        if not accumulating and not outputs:
            return []
        lines = [line for number in accumulating for line in self.accumulators[number].declare()]
        for number in self.scans:  # each scan this pass computes starts each row from its identity
            if number in computed:
                inst = self.instructions[number]
                lines.append(f"scan{number} = {literal(inst.dtype, scan_identity(inst))};")
        if self.cached_per_thread:  # unrolled, so that each ``cache[k]`` is a register
            lines += ["#pragma unroll", f"for (int k = 0; k < {self.cached_per_thread}; ++k) {{"]
            inner = [
                f"const df_i64 e = {begin} + (df_i64)k * {self.threads_per_row};",
                f"if (!valid || e >= {end}) continue;",
            ]
        else:
            if self.column_tiles:  # a column's thread walks many elements: loads of several in flight
                lines.append("#pragma unroll 4")
            lines.append(f"for (df_i64 e = {begin}; e < {end}; e += {self.threads_per_row}) {{")
            inner = ["if (!valid) break;"]
        split, element_coordinates = self.coordinates("e", self.reduce_axes, "r")
        inner += split
        coordinates = {**row_coordinates, **element_coordinates}
        for number in computed:
            if number in cached:
                inner.append(
                    f"const {register_type(self.instructions[number].dtype)} v{number} = cache{number}[k];"
                )
                continue
            inner += self.compute(number, None, coordinates)
            if number in self.cached_loads:
                inner.append(f"cache{number}[k] = v{number};")
        cached.update(self.cached_loads.intersection(computed))
        for number in accumulating:
            accumulator = self.accumulators[number]
            operand = self.instructions[number].args[0]
            value = self.scalars.cast(f"v{operand}", self.instructions[operand].dtype, accumulator.dtype)
            inner += accumulator.update(value, "e")
        if outputs:
            address = self.offset(coordinates, [str(s) for s in c_strides(self.shape)])
            for position, output in outputs:
                inner.append(self.store(position, output, address))
        return lines + ["  " + line for line in inner] + ["}"]

    def row_stores(self, row_coordinates: dict[int, str]) -> list[str]:
        """The row's per-row outputs, written by its first thread."""
        row_outputs = [(p, o) for p, o in enumerate(self.kernel.outputs) if o.row]
        lines = []
        if row_outputs:
            address = self.offset(row_coordinates, [str(s) for s in c_strides(self.kernel.row_shape)])
            lines.append("if (valid && lane == 0) {")
            lines += ["  " + self.store(position, output, address) for position, output in row_outputs]
            lines.append("}")
        if self.shares_memory:
            lines.append("__syncthreads();  // the shared states are free for the next unit of work")
        return lines

    def reduce_across_threads(self, accumulator: _Accumulator) -> list[str]:
        """Combine the states of the row's threads; every thread of the row ends with the result."""
        threads = self.threads_per_row
        if threads == 1:
            return []
        if self.column_tiles:
            return self.reduce_across_warps(accumulator)
        value, index = accumulator.value, accumulator.index
        lines = [f"for (int offset = {WARP // 2}; offset > 0; offset /= 2) {{"]
        lines += ["  " + line for line in self.combine_shuffled(accumulator, "offset")]
        lines.append("}")
        warps = threads // WARP
        if warps > 1:
            number = accumulator.number
            first = f"row_in_block * {warps}"
            lines += [
                f"if (threadIdx.x % {WARP} == 0) {{",
                f"  shared{number}[{first} + lane / {WARP}] = {value};",
                *([f"  shared{number}_index[{first} + lane / {WARP}] = {index};"] if accumulator.arg else []),
                "}",
                "__syncthreads();",
                f"{value} = lane < {warps} ? shared{number}[{first} + lane] : {accumulator.identity()};",
                *(
                    [f"{index} = lane < {warps} ? shared{number}_index[{first} + lane] : -1;"]
                    if accumulator.arg
                    else []
                ),
                f"for (int offset = {WARP // 2}; offset > 0; offset /= 2) {{",
                *("  " + line for line in self.combine_shuffled(accumulator, "offset")),
                "}",
                "__syncthreads();",
                f"if (lane == 0) shared{number}[{first}] = {value};",
                *([f"if (lane == 0) shared{number}_index[{first}] = {index};"] if accumulator.arg else []),
                "__syncthreads();",
                f"{value} = shared{number}[{first}];",
                *([f"{index} = shared{number}_index[{first}];"] if accumulator.arg else []),
                "__syncthreads();",
            ]
        else:
            lines.append(f"{value} = df_shuffle_from({value}, 0);")
            if accumulator.arg:
                lines.append(f"{index} = df_shuffle_from({index}, 0);")
        return lines

    def reduce_across_warps(self, accumulator: _Accumulator) -> list[str]:
        """A column tile's combine: the row's threads are in different warps, so their states meet in
        shared memory, halved in a tree; every thread of the row ends with the result."""
        number, value, index, t = accumulator.number, accumulator.value, accumulator.index, accumulator.type
        rows = self.rows_per_block
        slot = f"lane * {rows} + row_in_block"
        other = f"(lane + half) * {rows} + row_in_block"
        stores = [f"shared{number}[{slot}] = {value};"]
        reads = [f"const {t} other = shared{number}[{other}];"]
        results = [f"{value} = shared{number}[row_in_block];"]
        if accumulator.arg:
            stores.append(f"shared{number}_index[{slot}] = {index};")
            reads.append(f"const df_i64 other_index = shared{number}_index[{other}];")
            results.append(f"{index} = shared{number}_index[row_in_block];")
        return [
            *stores,
            "__syncthreads();",
            f"for (int half = {self.threads_per_row // 2}; half > 0; half /= 2) {{",
            "  if (lane < half) {",
            *("    " + line for line in [*reads, *accumulator.update("other", "other_index"), *stores]),
            "  }",
            "  __syncthreads();",
            "}",
            *results,
            "__syncthreads();",
        ]

    @staticmethod
    def combine_shuffled(accumulator: _Accumulator, offset: str) -> list[str]:
        value, index, t = accumulator.value, accumulator.index, accumulator.type
        # Every thread of the warp shuffles, once each: never inside an expression that may skip it
        lines = [f"const {t} other = df_shuffle_down({value}, {offset});"]
        if accumulator.arg:
            lines.append(f"const df_i64 other_index = __shfl_down_sync(0xffffffffu, {index}, {offset});")
        return [*lines, *accumulator.update("other", "other_index")]

    def reduction_result(self, accumulator: _Accumulator) -> list[str]:
        inst = self.instructions[accumulator.number]
        t = register_type(inst.dtype)
        if accumulator.arg:
            value = f"({t}){accumulator.index}"
        elif accumulator.facts.additive and self.row_elements == 0:
            value = literal(inst.dtype, 0)
        else:
            value = self.scalars.cast(accumulator.value, accumulator.dtype, inst.dtype)
            if accumulator.facts.arithmetic and accumulator.dtype != inst.dtype:  # a cast may overflow
                read = [(accumulator.value, accumulator.dtype)]
                cast = self.raised(accumulator.number, read, "astype")
                return [f"const {t} v{accumulator.number} = {value};", *cast]
        return [f"const {t} v{accumulator.number} = {value};"]

    def layout(self) -> Layout:
        loads = tuple(inst.slot for inst in self.loads)
        facts = (loads, self.strided, tuple(self.param_uses))
        if not self.reduce_axes:
            return Layout(*facts, self.elements, 0, 0, BLOCK_THREADS, pack=self.pack, reports=self.reports)
        shape = (self.rows, self.row_elements, self.threads_per_row, self.block_threads)
        states = tuple(dtype for _, dtype in self.states())
        return Layout(*facts, *shape, self.chunks, states, reports=self.reports)


# Integer ops that report: a division by zero, the lowest integer divided by -1
_INTEGER_DIVISION = frozenset({"floor_divide", "remainder", "fmod", "reciprocal"})
# Float ops whose values are exact where tiny: they never underflow
_EXACT = frozenset({"add", "subtract", "fmod", "remainder"})
# Float ops whose NumPy loop compares its operands first, which a NaN makes invalid
_NAN_INVALID = frozenset({"logaddexp", "logaddexp2"})


def _any_nan(operands: list[tuple[str, np.dtype | None]]) -> str:
    tests = [f"df_isnan({value})" for value, dtype in operands if dtype is not None and dtype.kind in "fc"]
    return " || ".join(tests) or "false"


def _underflows_by_argument(name: str, x: str, dtype: np.dtype) -> str:
    """The underflows NumPy's loop of ``name`` raises for tiny nonzero ``x`` (``LIBM_RAISES``),
    which the value does not show: sin x is x there, no subnormal."""
    tests = ""
    for flags, test, bound in LIBM_RAISES.get(name, ()):
        if test == "tiny":
            bound = libm_bound(bound, dtype.itemsize == 8)
            tests += f" | (fabs((double)({x})) < {float(bound)!r} && {x} != 0 ? {flags}u : 0u)"
    return tests


def _raised(value: str, dtype: np.dtype, operands: list[tuple[str, np.dtype | None]], exact: bool) -> str:
    """``df_raised`` of float ``value`` (of ``dtype``) computed from ``operands``: integers are finite
    numbers. An inexact op on complex values computes products and ratios that may underflow with
    no trace in its value: it reports an underflow wherever it read finite numbers."""
    floats = [operand for operand, kind in operands if kind is not None and kind.kind in "fc"]
    finite = " && ".join(f"df_isfinite({operand})" for operand in floats) or "true"
    nan = _any_nan(operands)
    if dtype.kind == "c":
        return f"df_complex_raised({value}, {nan}, {finite}, {'false' if exact else 'true'})"
    nonzero = " && ".join(f"df_nonzero({operand})" for operand, _ in operands) or "true"
    tiny = literal(dtype, 0 if exact else np.finfo(dtype).tiny)
    raised = f"df_raised<{register_type(dtype)}>({value}, {tiny}, {nan}, {finite}, {nonzero})"
    if not exact and any(kind is not None and kind.kind == "c" for _, kind in operands):
        raised += f" | (({finite}) ? DF_UNDERFLOW : 0u)"
    return raised


def from_memory(raw: str, dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return f"({raw} != 0)"
    if dtype.kind == "f" and dtype.itemsize == 2:
        return f"df_half_to_float({raw})"
    return raw


def to_memory(value: str, dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return f"(df_u8)({value})"
    if dtype.kind == "f" and dtype.itemsize == 2:
        return f"df_float_to_half({value})"
    return value


def generate(kernel: Kernel) -> tuple[str, Layout]:
    """The CUDA C source of ``kernel`` and how to launch it."""
    generator = _Generator(kernel)
    return generator.source(), generator.layout()
