"""LLVM IR for a kernel description, built with ``llvmlite.ir``: one module per kernel.

The kernel's shape is compiled in; strides are compiled in where the description knows them
(contiguous loads, broadcast axes, fresh outputs) and read at launch for the other loads and for
strided outputs, so one module serves every stride of a layout. Every value is computed in the
dtypes NumPy's own loop for the op uses (``ufunc.resolve_dtypes``), with NumPy's rules for the cases
C leaves open (integer division by zero, shifts past the width, NaN in min/max, float16 arithmetic
rounded from float32).

The module exports up to three functions, all taking ``cells``: an array of 8-byte cells holding
input pointers, output pointers, the strides (in elements) of the inputs and outputs that need
them, and the parameters converted to their loop dtypes (see ``Layout``); and ``scratch``: memory
of the call's own, ``Layout.scratch_bytes`` aligned to ``SCRATCH_ALIGNMENT`` (null where that is
0), that calls running at the same time must not share.

- ``ENTRY(cells, scratch, begin, end)`` runs elements ``[begin, end)`` of an elementwise kernel in
  C order, or rows ``[begin, end)`` of a reducing kernel (a row: one index of the kept axes), each
  in all its passes.
- For a one-pass reducing kernel, ``PARTIAL(cells, scratch, first, last, begin, end, state)``
  accumulates elements ``[begin, end)`` of rows ``[first, last)`` into ``state`` (a state per
  row), and ``FINISH(cells, scratch, first, last, states, count)`` combines ``count`` such states,
  in order, and writes the rows: so threads can share long rows. They are a module of their own
  (``generate(kernel, split=True)``), built only when a launch shares rows: they are two thirds of
  a reduction's compile time, and most reductions never need them. In rows mode FINISH combines
  the states of fewer rows than threads: it is compiled for size, not vectorized.

Each function ORs the floating-point flags its call raised (NumPy's bits: on x86 MXCSR's, cleared
at entry and put back at exit, and what ``_Scalars.report`` reports where the code raises nothing
though NumPy's loop would) into the external 8-byte word ``float_errors.FLAGS_SYMBOL``, atomically,
at its end: the launcher takes it after the launch.

A reducing kernel works in one of two modes, with the same code:

- *Rows*: one row at a time, each pass walking the row's elements in the inner loop (its
  accumulators in registers, vectorized where an op allows reassociation, as a float sum's block).
  A row's scans run in order, a block of the row at a time, into a buffer that the rest of the
  block's work then reads in a loop of its own, which vectorizes (``_Bodies``).
- *Columns*, when the innermost axis is kept, memory runs along it and it holds enough columns
  (``reads_columns``: a C-contiguous ``x.sum(axis=0)``, or axis 1 of a 3-d array): a row would be
  read with a stride, so the kernel takes a chunk of adjacent rows ("columns") at once, holds each
  per-row value and accumulator per column in an array in the scratch (a lane each: hundreds of
  KiB for a wide chunk, more than some threads' stacks hold), and walks the reduced axes in the
  outer loop and the chunk's columns in the inner one, which vectorizes across columns and reads
  memory in order. A chunk spans whole rows of memory where its lanes fit in ``COLUMN_BYTES``
  (``chunk_columns``); a kernel of several passes (a variance) makes each pass over the chunk
  before the next. Threads split the columns between them, or the reduced axes (``PARTIAL`` over
  all the columns) when the columns are too few to share or fit in one chunk: each thread then
  reads whole rows of memory, in order.

Float sums are as accurate as NumPy's pairwise summation: each block of ``BLOCK`` elements is summed
in vector lanes (the accumulator alone may be reassociated), and block sums are added pairwise, by
row or by column (NumPy itself adds an axis-0 sum's rows one after the other, less accurately).
"""

from __future__ import annotations

import math
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from llvmlite import ir

from .. import float_errors
from ..kernel import Instruction, Kernel, Output
from ..ops import COMPUTING, HALF_POWERS, OpKind
from . import llvm_math
from .common import (
    BOOL,
    C_MATH,
    COMPARISONS,
    COMPLEX_C_MATH,
    INT64,
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
PARTIAL = "dynfuse_partial"
FINISH = "dynfuse_finish"
BLOCK = 128  # elements summed in lanes before a pairwise step, as NumPy's pairwise sum
# Column mode reduces chunks of at most this many columns, holding at most this many bytes per
# chunk (accumulators and per-row values) in the scratch. A chunk as wide as a C-contiguous array's
# rows reads memory in order; a narrower one jumps from row to row, which the prefetchers follow
# less well.
COLUMN_LANES = 8192
COLUMN_BYTES = 1 << 19
SCRATCH_ALIGNMENT = 64  # each array of lanes starts a cache line of the scratch
LINE_COLUMNS = 64  # a narrower chunk holds a multiple of this many columns
# Fewer columns than these run row by row: a loop over so few columns is scalar code, while LLVM
# reads the strided rows as interleaved vectors. Measured on 2^24 elements, one thread: 4 float32
# columns 13.9 ms by rows, 17.7 by columns; 5, 16.1 and 13.6; 2 float64, 13.2 and 32.7; 8 int8,
# 5.3 and 6.9; 16 int8, 10.9 and 3.9.
MIN_COLUMNS = 16
MIN_COLUMN_BYTES = 20
# A per-element value that a later pass over a row reads again is kept from the pass that computes
# it, in a row of its own in the call's scratch (at most this many bytes in all), where computing it again
# costs at least ``ROW_KEPT_COST`` (an exp: softmax's divide reads the sum's exponentials); a store
# and a load from L1 cost about 2.
ROW_KEPT_BYTES = 1 << 16
ROW_KEPT_COST = 8

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()
CELLS = I64.as_pointer()
SCRATCH = I8.as_pointer()

# Whether kernels read the hardware's floating-point flags (MXCSR's low six bits, SSE's); elsewhere
# only what the code reports itself (``_Scalars.report``)
_X86 = platform.machine().lower() in ("x86_64", "amd64")
_MXCSR_FLAGS = 0x3F


def _mxcsr(module: ir.Module, name: str) -> ir.Function:
    """``llvm.x86.sse.stmxcsr`` or ``ldmxcsr``: MXCSR stored to, or loaded from, 4 bytes at a pointer."""
    symbol = f"llvm.x86.sse.{name}"
    function = module.globals.get(symbol)
    if function is None:
        function = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8.as_pointer()]), symbol)
    return function


# What an element of a math function's code costs here, for a float32 result and a float64 one, in
# units of a cheap float32 op (an add: the op table's cost 1), measured on one thread by
# ``perf/bench_functions.py --costs``: the branch-free functions of ``llvm_math`` and the libm calls
# cost from 17 to 370 adds, where the op table says 10 for all. Other ops cost what the table says.
FUNCTION_COSTS: dict[str, tuple[float, float]] = {
    "exp": (17, 20), "expm1": (24, 25), "log": (24, 24), "log1p": (29, 30), "tanh": (26, 28),
    "sinh": (49, 56), "cosh": (42, 50), "arcsinh": (75, 75), "arccosh": (94, 94), "arctanh": (72, 75),
    "arcsin": (65, 62), "arccos": (66, 61), "arctan": (45, 41), "arctan2": (45, 42), "cbrt": (69, 85),
    "power": (68, 95), "sin": (65, 60), "cos": (73, 80), "tan": (72, 100), "hypot": (46, 40),
}  # fmt: skip


def element_cost(inst: Instruction) -> float:
    """What one element of ``inst`` costs here (``FUNCTION_COSTS``, else the op table's cost)."""
    costs = FUNCTION_COSTS.get(inst.op.name)
    itemsize = 0 if inst.dtype is None else inst.dtype.itemsize
    return inst.op.cost if costs is None or itemsize not in (4, 8) else costs[itemsize == 8]


@dataclass(frozen=True)
class Layout:
    """What the launcher must pass, and how the work may be split."""

    inputs: int
    outputs: int
    # inputs by slot, then outputs numbered after them, whose strides (in elements, one per axis)
    # follow the pointers
    strided: tuple[int, ...]
    ndim: int
    param_uses: tuple[ParamUse, ...]
    extent: int  # what ENTRY iterates over: elements, or rows of a reducing kernel
    row_elements: int
    splittable: bool  # PARTIAL and FINISH can be built (``generate(kernel, split=True)``)
    state_cells: int  # cells of one row's PARTIAL state
    columns: bool  # column mode: rows are reduced in chunks of adjacent ones (see the module's doc)
    lanes: int  # rows reduced together: a chunk of columns, or 1
    scratch_bytes: int  # the scratch each call of the module needs, a multiple of SCRATCH_ALIGNMENT; 0: none
    element_cost: float  # what its ops cost for one element (``element_cost``): how dear its work is

    @property
    def param_cell(self) -> int:
        return self.inputs + self.outputs + len(self.strided) * self.ndim


class Value(NamedTuple):
    ir: ir.Value
    dtype: np.dtype


def aligned(size: int) -> int:
    """``size`` bytes rounded up to a multiple of ``SCRATCH_ALIGNMENT``."""
    return -(-size // SCRATCH_ALIGNMENT) * SCRATCH_ALIGNMENT


def storage_type(dtype: np.dtype) -> ir.Type:
    """A complex element is a pair of floats, as in memory: real part, then imaginary."""
    if dtype.kind == "b":
        return I8
    if dtype.kind in "iu":
        return ir.IntType(8 * dtype.itemsize)
    if dtype.kind == "c":
        return ir.LiteralStructType([storage_type(part_dtype(dtype))] * 2)
    return {2: HALF, 4: FLOAT, 8: DOUBLE}[dtype.itemsize]


def register_type(dtype: np.dtype) -> ir.Type:
    return I1 if dtype.kind == "b" else storage_type(dtype)


# -- scalar semantics -----------------------------------------------------------------------------


class _Scalars:
    """NumPy's scalar semantics in LLVM IR, on values already in their loop dtypes: the casts, and
    each op's code looked up in the tables below this class."""

    def __init__(self, builder: ir.IRBuilder, module: ir.Module) -> None:
        self.b = builder
        self.module = module
        # Whether each set of floating-point flags was reported (``report``): an i1 variable of the
        # function's by flags, made by ``new_flag``; None where no function watches flags
        self.reported: dict[int, ir.Value] | None = None
        self.new_flag: Callable[[], ir.Value] | None = None

    def report(self, condition: ir.Value, bits: int) -> None:
        """Raise ``bits`` (``float_errors``' flags) where ``condition`` holds: for what NumPy would
        report but this code computes without the hardware raising it (branch-free math, integer
        division, guarded casts). An OR reduction of i1, which the loop vectorizer keeps in lanes."""
        if self.reported is None:
            return
        variable = self.reported.get(bits)
        if variable is None:
            variable = self.reported[bits] = self.new_flag()
        self.b.store(self.b.or_(self.b.load(variable), condition), variable)

    def report_libm(self, name: str, x: ir.Value) -> None:
        """What libm raises for ``name`` of one argument where this code does not (``LIBM_RAISES``)."""
        b, t = self.b, x.type
        magnitude = b.call(self.intrinsic("llvm.fabs", t, 1), [x])
        inf = ir.Constant(t, math.inf)
        tests = {
            "at_most": lambda bound: b.fcmp_ordered("<=", x, bound),
            "under": lambda bound: b.fcmp_ordered("<", x, bound),
            "beyond": lambda bound: b.and_(
                b.fcmp_ordered(">", magnitude, bound), b.fcmp_ordered("<", magnitude, inf)
            ),
            "outside": lambda bound: b.fcmp_ordered(">", magnitude, bound),
            "from": lambda bound: b.fcmp_ordered(">=", magnitude, bound),
            "tiny": lambda bound: b.and_(
                b.fcmp_ordered("<", magnitude, bound), b.fcmp_ordered(">", magnitude, ir.Constant(t, 0.0))
            ),
        }
        for flags, test, bound in LIBM_RAISES.get(name, ()):
            self.report(tests[test](ir.Constant(t, libm_bound(bound, t == DOUBLE))), flags)

    def report_result(self, args: list[ir.Value], result: ir.Value) -> None:
        """What a libm function of several arguments would raise, judged from its result: NaN or an
        infinity from finite numbers is invalid, a pole or an overflow; a subnormal, or a zero from
        nonzero finite numbers, an underflow."""
        b, t = self.b, result.type
        finite = nonzero = ir.Constant(I1, 1)
        for arg in args:
            magnitude = b.call(self.intrinsic("llvm.fabs", arg.type, 1), [arg])
            finite = b.and_(finite, b.fcmp_ordered("<", magnitude, ir.Constant(arg.type, math.inf)))
            nonzero = b.and_(nonzero, b.fcmp_ordered("!=", arg, ir.Constant(arg.type, 0.0)))
        magnitude = b.call(self.intrinsic("llvm.fabs", t, 1), [result])
        not_finite = b.fcmp_unordered(">=", magnitude, ir.Constant(t, math.inf))
        self.report(
            b.and_(finite, not_finite), float_errors.INVALID | float_errors.DIVIDE | float_errors.OVERFLOW
        )
        smallest = float(np.finfo(np.float32 if t == FLOAT else np.float64).tiny)
        tiny = b.fcmp_ordered("<", magnitude, ir.Constant(t, smallest))
        self.report(b.and_(b.and_(finite, nonzero), tiny), float_errors.UNDERFLOW)

    def intrinsic(self, name: str, value_type: ir.Type, arity: int) -> ir.Function:
        return self.module.declare_intrinsic(
            name, [value_type], ir.FunctionType(value_type, [value_type] * arity)
        )

    def libm(self, name: str, value_type: ir.Type, arity: int) -> ir.Function:
        symbol = name + ("f" if value_type == FLOAT else "")
        return self.function(symbol, value_type, [value_type] * arity)

    def function(self, symbol: str, result: ir.Type, arguments: list[ir.Type]) -> ir.Function:
        """An external function of the process (the C library's), declared once per module."""
        function = self.module.globals.get(symbol)
        if function is None:
            function = ir.Function(self.module, ir.FunctionType(result, arguments), symbol)
        return function

    def const(self, dtype: np.dtype, value: float | int) -> ir.Constant:
        if dtype.kind == "c":  # ``value`` + 0j
            part = self.const(part_dtype(dtype), value)
            return ir.Constant(storage_type(dtype), [part, ir.Constant(part.type, 0.0)])
        if dtype.kind == "f":
            return ir.Constant(register_type(dtype), float(dtype.type(value)))
        return ir.Constant(register_type(dtype), int(value))

    # casts, as NumPy's ``astype``
    def cast(self, value: Value, to: np.dtype) -> Value:
        b, source = self.b, value.dtype
        if source == to:
            return value
        if "c" in (source.kind, to.kind):
            return self.complex_cast(value, to)
        v = value.ir
        if to.kind == "b":
            if source.kind == "f":
                wide = self.widen(v, source)
                return Value(b.fcmp_unordered("!=", wide, ir.Constant(wide.type, 0.0)), to)
            return Value(b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)), to)
        target = register_type(to)
        if source.kind in "biu":
            signed = source.kind == "i"
            if to.kind in "iu":
                if target.width < v.type.width:
                    return Value(b.trunc(v, target), to)
                return Value((b.sext if signed else b.zext)(v, target), to)
            through = FLOAT if to.itemsize == 2 else target  # int -> half via float is exact
            converted = (b.sitofp if signed else b.uitofp)(v, through)
            return Value(b.fptrunc(converted, HALF) if to.itemsize == 2 else converted, to)
        # from a float
        if to.kind == "f":
            if to.itemsize == 2:
                return Value(self.to_half(v, source), to)
            wide = self.widen(v, source)
            if wide.type == target:
                return Value(wide, to)
            if to.itemsize > source.itemsize:
                return Value(b.fpext(wide, target), to)
            return Value(b.fptrunc(wide, target), to)
        # float -> int: C leaves values out of range undefined; NumPy's loops give what x86's
        # truncating conversions give (the lowest integer of 32 or 64 bits), and so does this
        wide = self.widen(v, source)
        if to.itemsize == 8 and to.kind == "u":
            low = self.truncate(wide, 64)
            high = b.xor(
                self.truncate(b.fsub(wide, ir.Constant(wide.type, 2.0**63)), 64), ir.Constant(I64, 1 << 63)
            )
            return Value(b.select(b.fcmp_ordered(">=", wide, ir.Constant(wide.type, 2.0**63)), high, low), to)
        bits = 64 if to.itemsize == 8 or (to.kind == "u" and to.itemsize == 4) else 32
        result = self.truncate(wide, bits)
        return Value(b.trunc(result, target) if target.width < bits else result, to)

    def complex_cast(self, value: Value, to: np.dtype) -> Value:
        """Casts from and to complex, part by part: a real value is the real part (its imaginary
        part +0.0), a complex value cast to a real dtype is its real part (NumPy warns, at recording),
        to bool whether either part is nonzero."""
        source = value.dtype
        if source.kind != "c":
            part = part_dtype(to)
            return Value(self.complex_of(self.cast(value, part).ir, self.const(part, 0.0)), to)
        real, imaginary = self.parts(value.ir)
        if to.kind == "b":
            zero = ir.Constant(real.type, 0.0)
            tests = [self.b.fcmp_unordered("!=", v, zero) for v in (real, imaginary)]
            return Value(self.b.or_(*tests), to)
        part = part_dtype(source)
        if to.kind != "c":
            return self.cast(Value(real, part), to)
        target = part_dtype(to)
        real, imaginary = (self.cast(Value(v, part), target).ir for v in (real, imaginary))
        return Value(self.complex_of(real, imaginary), to)

    def add(self, x: ir.Value, y: ir.Value, flags: tuple[str, ...] = ()) -> ir.Value:
        """Float or complex addition (part by part)."""
        if isinstance(x.type, ir.LiteralStructType):
            pairs = zip(self.parts(x), self.parts(y), strict=True)
            return self.complex_of(*(self.b.fadd(*pair, flags=flags) for pair in pairs))
        return self.b.fadd(x, y, flags=flags)

    def parts(self, value: ir.Value) -> tuple[ir.Value, ir.Value]:
        return self.b.extract_value(value, 0), self.b.extract_value(value, 1)

    def complex_of(self, real: ir.Value, imaginary: ir.Value) -> ir.Value:
        pair = ir.Constant(ir.LiteralStructType([real.type] * 2), ir.Undefined)
        return self.b.insert_value(self.b.insert_value(pair, real, 0), imaginary, 1)

    def truncate(self, v: ir.Value, bits: int) -> ir.Value:
        """x86's cvtt*2si: toward zero, and the lowest integer for NaN or anything out of range."""
        b = self.b
        integer = ir.IntType(bits)
        bound = ir.Constant(v.type, 2.0 ** (bits - 1))
        inside = b.and_(b.fcmp_ordered(">=", v, b.fneg(bound)), b.fcmp_ordered("<", v, bound))
        self.report(b.not_(inside), float_errors.INVALID)
        safe = b.select(inside, v, ir.Constant(v.type, 0.0))
        return b.select(inside, b.fptosi(safe, integer), ir.Constant(integer, -(1 << (bits - 1))))

    def widen(self, v: ir.Value, dtype: np.dtype) -> ir.Value:
        """float16 is computed in float32, as NumPy's half loops do."""
        return self.b.fpext(v, FLOAT) if dtype.itemsize == 2 and dtype.kind == "f" else v

    def to_half(self, v: ir.Value, source: np.dtype) -> ir.Value:
        """Round to float16 once: a double goes through float rounded to odd, which is exact."""
        b = self.b
        if source.itemsize == 2:
            return v
        if source.itemsize == 4:
            return b.fptrunc(v, HALF)
        nearest = b.fptrunc(v, FLOAT)
        back = b.fpext(nearest, DOUBLE)
        inexact = b.fcmp_unordered("!=", back, v)
        fabs = self.intrinsic("llvm.fabs", DOUBLE, 1)
        overshoot = b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [v]))
        bits = b.bitcast(nearest, I32)
        toward_zero = b.select(overshoot, b.sub(bits, ir.Constant(I32, 1)), bits)
        odd = b.select(inexact, b.or_(toward_zero, ir.Constant(I32, 1)), toward_zero)
        is_nan = b.fcmp_unordered("uno", v, v)
        single = b.select(is_nan, nearest, b.bitcast(odd, FLOAT))
        return b.fptrunc(single, HALF)

    def apply(
        self, name: str, args: list[Value], loop: tuple, result: np.dtype, scalar_bounds: bool = False
    ) -> Value:
        """``name`` on ``args`` cast to the loop's input dtypes; the result cast to ``result``.

        ``scalar_bounds``: clip's bounds are one value each (see ``OpLoop``).
        """
        ins, out = loop[:-1], loop[-1]
        args = [self.cast(arg, dtype) for arg, dtype in zip(args, ins, strict=True)]
        on_values = ANY_DTYPE_CODE.get(name)
        if on_values is not None:
            value = on_values(self, args, out)
        elif ins[0].kind == "c":
            value = Value(COMPLEX_CODE[name](self, [arg.ir for arg in args], OpLoop.of(ins[0])), out)
        elif ins[0].kind == "f":
            op_loop = OpLoop.of(ins[0], scalar_bounds)
            raw = FLOAT_CODE[name](self, [self.widen(arg.ir, arg.dtype) for arg in args], op_loop)
            value = Value(raw, BOOL if raw.type == I1 else op_loop.dtype)
        else:
            code = BOOL_CODE if ins[0].kind == "b" else INTEGER_CODE
            value = Value(code[name](self, [arg.ir for arg in args], OpLoop.of(ins[0])), out)
        return self.cast(value, result)

    def compare(self, name: str, args: list[Value]) -> ir.Value:
        b = self.b
        left, right = args
        op = COMPARISONS[name]
        if left.dtype.kind == "c":  # equality only (``COMPLEX_CODE``'s ops): both parts equal
            tests = [
                b.fcmp_unordered(op, *pair) if op == "!=" else b.fcmp_ordered(op, *pair)
                for pair in zip(self.parts(left.ir), self.parts(right.ir), strict=True)
            ]
            return (b.or_ if op == "!=" else b.and_)(*tests)
        if left.dtype.kind == "f":
            lhs, rhs = self.widen(left.ir, left.dtype), self.widen(right.ir, right.dtype)
            return b.fcmp_unordered(op, lhs, rhs) if op == "!=" else b.fcmp_ordered(op, lhs, rhs)
        if left.dtype.kind != right.dtype.kind and {left.dtype.kind, right.dtype.kind} == {"i", "u"}:
            wide = ir.IntType(65)  # NumPy compares int64 with uint64 exactly
            lhs = (b.sext if left.dtype.kind == "i" else b.zext)(left.ir, wide)
            rhs = (b.sext if right.dtype.kind == "i" else b.zext)(right.ir, wide)
            return b.icmp_signed(op, lhs, rhs)
        if left.dtype.kind == "i":
            return b.icmp_signed(op, left.ir, right.ir)
        return b.icmp_unsigned(op, left.ir, right.ir)


# An op's code: its IR on operands in the loop's dtype, from ``_Scalars`` (the builder and module).
Code = Callable[[_Scalars, list[ir.Value], OpLoop], ir.Value]
# The code of an op that reads its operands' dtypes itself, on any loop: (scalars, operands, out).
ValueCode = Callable[[_Scalars, list[Value], np.dtype], Value]


def _comparison(name: str) -> ValueCode:
    return lambda s, a, out: Value(s.compare(name, a), BOOL)


def _logical(method: str) -> ValueCode:
    """NumPy's logical loops test each operand against zero."""

    def code(s: _Scalars, a: list[Value], out: np.dtype) -> Value:
        truths = [s.cast(arg, BOOL).ir for arg in a]
        return Value(getattr(s.b, method)(*truths), BOOL)

    return code


def _part(imaginary: bool) -> ValueCode:
    """A complex value's real or imaginary part; of a real value, NumPy's: the value, or zero."""

    def code(s: _Scalars, a: list[Value], out: np.dtype) -> Value:
        if a[0].dtype.kind == "c":
            return Value(s.parts(a[0].ir)[imaginary], out)
        return Value(ir.Constant(register_type(out), 0), out) if imaginary else a[0]

    return code


ANY_DTYPE_CODE: dict[str, ValueCode] = {
    "where": lambda s, a, out: Value(s.b.select(a[0].ir, a[1].ir, a[2].ir), out),
    "astype": lambda s, a, out: a[0],
    "real": _part(imaginary=False),
    "imag": _part(imaginary=True),
    **{name: _comparison(name) for name in COMPARISONS},
    "logical_and": _logical("and_"),
    "logical_or": _logical("or_"),
    "logical_xor": _logical("xor"),
    "logical_not": _logical("not_"),
}


# -- integer code (signed and unsigned; bools where ``BOOL_CODE`` does not say otherwise)


def _signed(c: OpLoop) -> bool:
    return c.dtype.kind == "i"


def _int_compare(s: _Scalars, c: OpLoop) -> Callable[..., ir.Value]:
    return s.b.icmp_signed if _signed(c) else s.b.icmp_unsigned


def _int_extremum(larger: bool) -> Code:
    return lambda s, a, c: s.b.select(_int_compare(s, c)(">" if larger else "<", a[0], a[1]), a[0], a[1])


def _int_absolute(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    b, x = s.b, a[0]
    zero = ir.Constant(x.type, 0)
    return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x) if _signed(c) else x


def _int_sign(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    b, x = s.b, a[0]
    zero = ir.Constant(x.type, 0)
    positive = b.zext(b.icmp_signed(">", x, zero) if _signed(c) else b.icmp_unsigned(">", x, zero), x.type)
    if not _signed(c):
        return positive
    return b.sub(positive, b.zext(b.icmp_signed("<", x, zero), x.type))


def _int_clip(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    b, compare = s.b, _int_compare(s, c)
    low = b.select(compare(">", a[0], a[1]), a[0], a[1])
    return b.select(compare("<", low, a[2]), low, a[2])


def _int_division(floor: bool, quotient: bool) -> Code:
    """NumPy 2: division by zero gives 0; MIN // -1 wraps to MIN. ``floor``: Python's floor semantics
    (//, %), else C's (fmod); ``quotient``: the quotient, else the remainder."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        b, (x, y) = s.b, a
        zero, one = ir.Constant(x.type, 0), ir.Constant(x.type, 1)
        by_zero = b.icmp_unsigned("==", y, zero)
        s.report(by_zero, float_errors.DIVIDE)
        if not _signed(c):
            safe = b.select(by_zero, one, y)
            value = b.udiv(x, safe) if quotient else b.urem(x, safe)
            return b.select(by_zero, zero, value)
        minus_one = b.icmp_signed("==", y, ir.Constant(x.type, -1))
        lowest = ir.Constant(x.type, -(1 << (x.type.width - 1)))
        s.report(b.and_(minus_one, b.icmp_signed("==", x, lowest)), float_errors.OVERFLOW)
        safe = b.select(b.or_(by_zero, minus_one), one, y)
        truncated = b.select(minus_one, b.sub(zero, x), b.sdiv(x, safe))
        rest = b.select(minus_one, zero, b.srem(x, safe))
        if not floor:
            return b.select(by_zero, zero, rest)
        signs_differ = b.icmp_signed("<", b.xor(rest, y), zero)
        adjust = b.and_(b.icmp_unsigned("!=", rest, zero), signs_differ)
        if quotient:
            value = b.sub(truncated, b.zext(adjust, x.type))
        else:
            value = b.select(adjust, b.add(rest, y), rest)
        return b.select(by_zero, zero, value)

    return code


def _shift_safely(s: _Scalars, a: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
    """Whether the count is below the width (a negative one is not, as in NumPy), and a count that is."""
    b, (x, y) = s.b, a
    in_range = b.icmp_unsigned("<", y, ir.Constant(x.type, x.type.width))
    return in_range, b.select(in_range, y, ir.Constant(x.type, 0))


def _left_shift(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    in_range, safe = _shift_safely(s, a)
    return s.b.select(in_range, s.b.shl(a[0], safe), ir.Constant(a[0].type, 0))


def _right_shift(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    b, x = s.b, a[0]
    zero = ir.Constant(x.type, 0)
    in_range, safe = _shift_safely(s, a)
    if _signed(c):
        beyond = b.select(b.icmp_signed("<", x, zero), ir.Constant(x.type, -1), zero)
        return b.select(in_range, b.ashr(x, safe), beyond)
    return b.select(in_range, b.lshr(x, safe), zero)


def _int_power(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    """Square and multiply, wrapping, as NumPy's integer power (negative exponents were refused)."""
    b, (base, exponent) = s.b, a
    function = b.function
    start = b.block
    loop = function.append_basic_block("power.loop")
    done = function.append_basic_block("power.done")
    one = ir.Constant(base.type, 1)
    b.branch(loop)
    b.position_at_end(loop)
    result = b.phi(base.type)
    factor = b.phi(base.type)
    remaining = b.phi(base.type)
    odd = b.icmp_unsigned("!=", b.and_(remaining, one), ir.Constant(base.type, 0))
    next_result = b.select(odd, b.mul(result, factor), result)
    next_factor = b.mul(factor, factor)
    next_remaining = b.lshr(remaining, one)
    result.add_incoming(one, start)
    factor.add_incoming(base, start)
    remaining.add_incoming(exponent, start)
    result.add_incoming(next_result, loop)
    factor.add_incoming(next_factor, loop)
    remaining.add_incoming(next_remaining, loop)
    b.cbranch(b.icmp_unsigned("!=", next_remaining, ir.Constant(base.type, 0)), loop, done)
    b.position_at_end(done)
    return next_result


def _int_reciprocal(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    """1 / x in C: 0 but for 1 and -1; 1 / 0 is what NumPy's loop gives."""
    b, x = s.b, a[0]
    zero, one = ir.Constant(x.type, 0), ir.Constant(x.type, 1)
    by_zero = ir.Constant(x.type, integer_reciprocal_of_zero(c.dtype))
    s.report(b.icmp_unsigned("==", x, zero), float_errors.DIVIDE | float_errors.INVALID)  # as NumPy's loop
    result = b.select(b.icmp_unsigned("==", x, zero), by_zero, zero)
    result = b.select(b.icmp_unsigned("==", x, one), one, result)
    if _signed(c):
        minus_one = ir.Constant(x.type, -1)
        result = b.select(b.icmp_unsigned("==", x, minus_one), minus_one, result)
    return result


def _unchanged(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    return a[0]


def _answer(value: bool) -> Code:
    """A float test on an integer, answered by the dtype."""
    return lambda s, a, c: ir.Constant(I1, int(value))


INTEGER_CODE: dict[str, Code] = {
    "add": lambda s, a, c: s.b.add(*a),
    "subtract": lambda s, a, c: s.b.sub(*a),
    "multiply": lambda s, a, c: s.b.mul(*a),
    "bitwise_and": lambda s, a, c: s.b.and_(*a),
    "bitwise_or": lambda s, a, c: s.b.or_(*a),
    "bitwise_xor": lambda s, a, c: s.b.xor(*a),
    "invert": lambda s, a, c: s.b.not_(a[0]),
    "negative": lambda s, a, c: s.b.sub(ir.Constant(a[0].type, 0), a[0]),
    "positive": _unchanged,
    "conjugate": _unchanged,
    "floor": _unchanged,
    "ceil": _unchanged,
    "trunc": _unchanged,
    "absolute": _int_absolute,
    "square": lambda s, a, c: s.b.mul(a[0], a[0]),
    "squared_magnitude": lambda s, a, c: s.b.mul(a[0], a[0]),
    "sign": _int_sign,
    "maximum": _int_extremum(larger=True),
    "fmax": _int_extremum(larger=True),
    "minimum": _int_extremum(larger=False),
    "fmin": _int_extremum(larger=False),
    "clip": _int_clip,
    "floor_divide": _int_division(floor=True, quotient=True),
    "remainder": _int_division(floor=True, quotient=False),
    "fmod": _int_division(floor=False, quotient=False),
    "left_shift": _left_shift,
    "right_shift": _right_shift,
    "power": _int_power,
    "reciprocal": _int_reciprocal,
    "isnan": _answer(False),
    "isinf": _answer(False),
    "isfinite": _answer(True),
}
# Bools: a sum is an or, a product an and
BOOL_CODE: dict[str, Code] = {
    **INTEGER_CODE,
    "add": lambda s, a, c: s.b.or_(*a),
    "multiply": lambda s, a, c: s.b.and_(*a),
    "square": lambda s, a, c: s.b.and_(a[0], a[0]),
}


# -- float code (float16 computed in float32; ``t`` below is the compute dtype's IR type)


def _intrinsic(name: str, arity: int = 1) -> Code:
    return lambda s, a, c: s.b.call(s.intrinsic(name, register_type(c.dtype), arity), a)


def _inline_math(name: str) -> Code:
    """The backend's own branch-free exp, log, tanh and pow (``llvm_math``), reporting what libm's
    would raise (``_Scalars.report_libm``; ``report_result`` for several arguments)."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        result = llvm_math.call(s.module, s.b, name, *a, for_half=c.half)
        if len(a) == 1:
            s.report_libm(name, a[0])
        else:
            s.report_result(a, result)
        return result

    return code


def _libm(symbol: str) -> Code:
    """The C library, as NumPy's own scalar loops call it."""
    return lambda s, a, c: s.b.call(s.libm(symbol, register_type(c.dtype), len(a)), a)


def _cube(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    """x**3 within half an ulp and a hair, as pow gives it. A float32 square is exact in
    double, so its cube rounds there once, then to float32. In float64, x*x splits into its
    rounded value and the exact error (an fma), and the cube is one fma of the two parts;
    where x*x overflows, that split would give inf - inf, and the cube is x*x*x (±inf)."""
    b, x, t = s.b, a[0], register_type(c.dtype)
    if t == FLOAT:
        wide = b.fpext(x, DOUBLE)
        return b.fptrunc(b.fmul(b.fmul(wide, wide), wide), t)
    fma = s.intrinsic("llvm.fma", t, 3)
    square = b.fmul(x, x)
    error = b.call(fma, [x, x, b.fneg(square)])
    cube = b.call(fma, [square, x, b.fmul(error, x)])
    magnitude = b.call(s.intrinsic("llvm.fabs", t, 1), [square])
    finite = b.fcmp_ordered("!=", magnitude, ir.Constant(t, float("inf")))
    return b.select(finite, cube, b.fmul(square, x))


def _half_power(exponent: float) -> Code:
    """x ** exponent for -0.5, 1.5 and -1.5 (``ops.HALF_POWERS``) as pow gives it: 1/sqrt(x),
    x*sqrt(x) and (1/x)/sqrt(x), which neither overflow nor lose bits to a subnormal where the
    result does not (float64: within two ulp of pow; float32 in double, rounded once: within one),
    and pow's values where those differ: +inf at -0.0 for -0.5, and at -inf (whose root is NaN) +inf
    or +0. The hardware raises what pow would (and invalid at -inf: a rerun)."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        if register_type(c.dtype) == FLOAT:
            wide = c._replace(dtype=np.dtype(np.float64))
            return s.b.fptrunc(code(s, [s.b.fpext(a[0], DOUBLE)], wide), FLOAT)
        b, x, t = s.b, a[0], register_type(c.dtype)
        one = ir.Constant(t, 1.0)
        root = b.call(s.intrinsic("llvm.sqrt", t, 1), [x])
        if exponent == 1.5:
            result = b.fmul(x, root)
        elif exponent == -0.5:
            result = b.fdiv(one, root)
            result = b.select(b.fcmp_ordered("==", x, ir.Constant(t, 0.0)), ir.Constant(t, math.inf), result)
        else:
            result = b.fdiv(b.fdiv(one, x), root)
        at_minus_infinity = ir.Constant(t, math.inf if exponent > 0 else 0.0)
        return b.select(b.fcmp_ordered("==", x, ir.Constant(t, -math.inf)), at_minus_infinity, result)

    return code


def _float_extremum(larger: bool, propagate_nan: bool) -> Code:
    """maximum/minimum propagate NaN, fmax/fmin ignore it; of two equal operands (zeros of either
    sign) NumPy's float16 loops give the first, its float32/64 loops the second."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        b, (x, y) = s.b, a
        pred = (">" if larger else "<") + ("=" if c.half else "")
        nan_side = x if propagate_nan else y
        first = b.or_(b.fcmp_ordered(pred, x, y), b.fcmp_unordered("uno", nan_side, nan_side))
        return b.select(first, x, y)

    return code


def _float_clip(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    """max(x, low) then min(., high), NaN-propagating. Ties between zeros: float16 keeps x;
    float32/64 take the bound, but with one-value bounds keep x against the low bound and give
    -0.0 against the high one (NumPy's SIMD loop)."""
    b, (x, low_bound, high_bound) = s.b, a
    low_tie = ">=" if c.half or c.scalar_bounds else ">"
    above = b.or_(b.fcmp_ordered(low_tie, x, low_bound), b.fcmp_unordered("uno", x, x))
    low = b.select(above, x, low_bound)
    below = b.fcmp_ordered("<=" if c.half else "<", low, high_bound)
    if c.scalar_bounds and not c.half:
        tie = b.fcmp_ordered("==", low, high_bound)
        bits_type = I32 if low.type == FLOAT else I64
        negative = b.icmp_signed("<", b.bitcast(low, bits_type), ir.Constant(bits_type, 0))
        below = b.or_(below, b.and_(tie, negative))
    return b.select(b.or_(below, b.fcmp_unordered("uno", low, low)), low, high_bound)


def _float_sign(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    b, x, t = s.b, a[0], register_type(c.dtype)
    zero, one = ir.Constant(t, 0.0), ir.Constant(t, 1.0)
    positive = b.select(b.fcmp_ordered(">", x, zero), one, zero)
    negative = b.select(b.fcmp_ordered("<", x, zero), ir.Constant(t, -1.0), positive)
    return b.select(b.fcmp_unordered("uno", x, x), x, negative)


def _float_divmod(quotient: bool) -> Code:
    """NumPy's ``npy_divmod``: Python's floor semantics, with its own rules for zeros and NaN;
    ``quotient``: floor_divide, else remainder."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        b, (x, y), t = s.b, a, register_type(c.dtype)
        zero = ir.Constant(t, 0.0)
        copysign = s.intrinsic("llvm.copysign", t, 2)
        mod = b.frem(x, y)
        by_zero = b.fcmp_ordered("==", y, zero)
        div = b.fdiv(b.fsub(x, mod), y)
        fix = b.and_(
            b.fcmp_unordered("!=", mod, zero),
            b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero)),
        )
        mod_fixed = b.select(fix, b.fadd(mod, y), mod)
        div_fixed = b.select(fix, b.fsub(div, ir.Constant(t, 1.0)), div)
        if not quotient:
            nonzero = b.select(b.fcmp_unordered("!=", mod, zero), mod_fixed, b.call(copysign, [zero, y]))
            return b.select(by_zero, mod, nonzero)
        floor = b.call(s.intrinsic("llvm.floor", t, 1), [div_fixed])
        rounded = b.select(
            b.fcmp_ordered(">", b.fsub(div_fixed, floor), ir.Constant(t, 0.5)),
            b.fadd(floor, ir.Constant(t, 1.0)),
            floor,
        )
        result = b.select(
            b.fcmp_unordered("!=", div_fixed, zero), rounded, b.call(copysign, [zero, b.fdiv(x, y)])
        )
        return b.select(by_zero, b.fdiv(x, y), result)

    return code


def _heaviside(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    b, (x, y), t = s.b, a, register_type(c.dtype)
    zero, one = ir.Constant(t, 0.0), ir.Constant(t, 1.0)
    result = b.select(b.fcmp_ordered("<", x, zero), zero, one)
    result = b.select(b.fcmp_ordered("==", x, zero), y, result)
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


def _scaled(to_radians: bool) -> Code:
    """deg2rad and rad2deg: one multiplication by NumPy's factor, in the loop's own precision."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        factor = float(c.dtype.type(angle_factor(c.dtype, to_radians)))
        return s.b.fmul(a[0], ir.Constant(register_type(c.dtype), factor))

    return code


def _logaddexp(base2: bool) -> Code:
    """NumPy's ``npy_logaddexp``/``npy_logaddexp2``, branch for branch."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        b, (x, y), t = s.b, a, register_type(c.dtype)
        same = b.fadd(x, ir.Constant(t, 1.0 if base2 else float(np.log(2.0))))
        difference = b.fsub(x, y)

        def log_one_plus_exp(value: ir.Value) -> ir.Value:
            exp = llvm_math.call(s.module, b, "exp2" if base2 else "exp", value, for_half=c.half)
            result = llvm_math.call(s.module, b, "log1p", exp, for_half=c.half)
            return b.fmul(result, ir.Constant(t, float(np.log2(np.e)))) if base2 else result

        positive = b.fadd(x, log_one_plus_exp(b.fneg(difference)))
        not_positive = b.fadd(y, log_one_plus_exp(difference))
        result = b.select(b.fcmp_ordered("<=", difference, ir.Constant(t, 0.0)), not_positive, difference)
        result = b.select(b.fcmp_ordered(">", difference, ir.Constant(t, 0.0)), positive, result)
        s.report(b.fcmp_unordered("uno", x, y), float_errors.INVALID)  # NumPy's loop compares a NaN
        return b.select(b.fcmp_ordered("==", x, y), same, result)

    return code


def _infinite(finite: bool) -> Code:
    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        t = register_type(c.dtype)
        magnitude = s.b.call(s.intrinsic("llvm.fabs", t, 1), [a[0]])
        return s.b.fcmp_ordered("!=" if finite else "==", magnitude, ir.Constant(t, float("inf")))

    return code


def _signbit(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    bits = s.b.bitcast(a[0], I32 if register_type(c.dtype) == FLOAT else I64)
    return s.b.icmp_signed("<", bits, ir.Constant(bits.type, 0))


def _report_power(s: _Scalars, result: ir.Value) -> None:
    """What C's pow raises that the exponential's scaling does not (its overflow and underflow), as
    judged from the result: an infinity or NaN is the pole of 0 to a negative power or a negative x
    to a non-integer power, or else came from one (an infinite or NaN operand), which costs a rerun."""
    b, t = s.b, result.type
    magnitude = b.call(s.intrinsic("llvm.fabs", t, 1), [result])
    s.report(
        b.fcmp_unordered(">=", magnitude, ir.Constant(t, math.inf)),
        float_errors.DIVIDE | float_errors.INVALID,
    )


def _inline_power(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    result = llvm_math.call(s.module, s.b, "power", *a, for_half=c.half)
    _report_power(s, result)
    return result


def _power_by_one_value(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    """NumPy's float32/64 power by one value: 0.5, 2 and -1 are sqrt, square and reciprocal."""
    b, (x, y), t = s.b, a, register_type(c.dtype)
    one = ir.Constant(t, 1.0)
    result = llvm_math.call(s.module, b, "power", x, y, for_half=c.half)
    # Each special case computed on x where it applies, elsewhere on |y| + 1, which raises no flag:
    # not a constant, or LLVM would move the division or root back onto x for every power, and of
    # the call's one y, computed once, so a case costs a select
    harmless = b.fadd(b.call(s.intrinsic("llvm.fabs", t, 1), [y]), one)
    reciprocal = b.fcmp_ordered("==", y, ir.Constant(t, -1.0))
    result = b.select(reciprocal, b.fdiv(one, b.select(reciprocal, x, harmless)), result)
    result = b.select(b.fcmp_ordered("==", y, ir.Constant(t, 2.0)), b.fmul(x, x), result)
    root = b.fcmp_ordered("==", y, ir.Constant(t, 0.5))
    result = b.select(root, b.call(s.intrinsic("llvm.sqrt", t, 1), [b.select(root, x, harmless)]), result)
    _report_power(s, result)
    return result


FLOAT_CODE: dict[str, Code] = {
    "add": lambda s, a, c: s.b.fadd(*a),
    "subtract": lambda s, a, c: s.b.fsub(*a),
    "multiply": lambda s, a, c: s.b.fmul(*a),
    "divide": lambda s, a, c: s.b.fdiv(*a),
    "sqrt": _intrinsic("llvm.sqrt"),
    "absolute": _intrinsic("llvm.fabs"),
    "fabs": _intrinsic("llvm.fabs"),
    "floor": _intrinsic("llvm.floor"),
    "ceil": _intrinsic("llvm.ceil"),
    "trunc": _intrinsic("llvm.trunc"),
    "rint": _intrinsic("llvm.roundeven"),
    "copysign": _intrinsic("llvm.copysign", 2),
    **{name: _libm(symbol) for name, symbol in C_MATH.items() if name not in llvm_math.INLINE},
    **{name: _inline_math(name) for name in sorted(llvm_math.INLINE)},
    "power": _inline_power,
    "negative": lambda s, a, c: s.b.fneg(a[0]),
    "positive": _unchanged,
    "conjugate": _unchanged,
    "square": lambda s, a, c: s.b.fmul(a[0], a[0]),
    "squared_magnitude": lambda s, a, c: s.b.fmul(a[0], a[0]),
    "cube": _cube,
    **{name: _half_power(exponent) for exponent, name in HALF_POWERS.items()},
    "reciprocal": lambda s, a, c: s.b.fdiv(ir.Constant(register_type(c.dtype), 1.0), a[0]),
    "maximum": _float_extremum(larger=True, propagate_nan=True),
    "minimum": _float_extremum(larger=False, propagate_nan=True),
    "fmax": _float_extremum(larger=True, propagate_nan=False),
    "fmin": _float_extremum(larger=False, propagate_nan=False),
    "clip": _float_clip,
    "sign": _float_sign,
    "floor_divide": _float_divmod(quotient=True),
    "remainder": _float_divmod(quotient=False),
    "fmod": lambda s, a, c: s.b.frem(*a),
    "heaviside": _heaviside,
    "deg2rad": _scaled(to_radians=True),
    "rad2deg": _scaled(to_radians=False),
    "logaddexp": _logaddexp(base2=False),
    "logaddexp2": _logaddexp(base2=True),
    "isnan": lambda s, a, c: s.b.fcmp_unordered("uno", a[0], a[0]),
    "isinf": _infinite(finite=False),
    "isfinite": _infinite(finite=True),
    "signbit": _signbit,
    "power_by_one_value": _power_by_one_value,
    "float_power": _inline_power,
}


# -- complex code: on pairs of floats (``_Scalars.parts``), as NumPy's complex loops compute them


def _multiply_add(s: _Scalars, c: OpLoop) -> Callable[[ir.Value, ir.Value, ir.Value], ir.Value]:
    """``a*b + c`` rounded as NumPy's complex loops here round it (``complex_loops_fuse``), or as C
    rounds it in a reduction along the innermost axis."""
    if c.fuses_multiply_add():
        fma = s.intrinsic("llvm.fma", register_type(part_dtype(c.dtype)), 3)
        return lambda x, y, z: s.b.call(fma, [x, y, z])
    return lambda x, y, z: s.b.fadd(s.b.fmul(x, y), z)


def _complex_parts(method: str) -> Code:
    """An op done part by part (subtract, negative; add is ``_Scalars.add``)."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        parts = zip(*(s.parts(v) for v in a), strict=True)
        return s.complex_of(*(getattr(s.b, method)(*pair) for pair in parts))

    return code


def _complex_multiply(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    (ar, ai), (br, bi) = s.parts(a[0]), s.parts(a[1])
    fused = _multiply_add(s, c)
    return s.complex_of(fused(ar, br, s.b.fneg(s.b.fmul(ai, bi))), fused(ar, bi, s.b.fmul(ai, br)))


def _complex_divide(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    """Smith's division, as NumPy's loop: scaled by the divisor's larger part; by zero, each part
    divided by +0.0. Branch-free, each branch's divisions given harmless operands where it is not
    taken, so no flag is raised that NumPy's would not."""
    b = s.b
    (ar, ai), (br, bi) = s.parts(a[0]), s.parts(a[1])
    fabs = s.intrinsic("llvm.fabs", br.type, 1)
    one, zero = ir.Constant(br.type, 1.0), ir.Constant(br.type, 0.0)
    real_larger = b.fcmp_ordered(">=", b.call(fabs, [br]), b.call(fabs, [bi]))  # false with a NaN
    by_zero = b.and_(b.fcmp_ordered("==", br, zero), b.fcmp_ordered("==", bi, zero))
    larger, smaller = b.select(real_larger, br, bi), b.select(real_larger, bi, br)
    ratio = b.fdiv(smaller, b.select(by_zero, one, larger))
    scale = b.fdiv(one, b.select(by_zero, one, b.fadd(larger, b.fmul(smaller, ratio))))
    first, second = b.select(real_larger, ar, ai), b.select(real_larger, ai, ar)
    real = b.fmul(b.fadd(first, b.fmul(second, ratio)), scale)
    imaginary = b.fmul(
        b.select(real_larger, b.fsub(ai, b.fmul(ar, ratio)), b.fsub(b.fmul(ai, ratio), ar)), scale
    )
    divisor = b.select(by_zero, b.call(fabs, [br]), one)
    return s.complex_of(
        b.select(by_zero, b.fdiv(ar, divisor), real), b.select(by_zero, b.fdiv(ai, divisor), imaginary)
    )


def _complex_reciprocal(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    """NumPy's loop: scaled by the larger part (the real one where they tie), as its two branches
    compute it (both divide 1 and the ratio by the same denominator)."""
    b = s.b
    real, imaginary = s.parts(a[0])
    fabs = s.intrinsic("llvm.fabs", real.type, 1)
    real_larger = b.fcmp_ordered("<=", b.call(fabs, [imaginary]), b.call(fabs, [real]))  # false with a NaN
    larger, smaller = b.select(real_larger, real, imaginary), b.select(real_larger, imaginary, real)
    ratio = b.fdiv(smaller, larger)
    denominator = b.fadd(larger, b.fmul(smaller, ratio))
    one_over, ratio_over = b.fdiv(ir.Constant(real.type, 1.0), denominator), b.fdiv(ratio, denominator)
    return s.complex_of(
        b.select(real_larger, one_over, ratio_over), b.fneg(b.select(real_larger, ratio_over, one_over))
    )


def _complex_square(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    real, imaginary = s.parts(a[0])
    cross = s.b.fmul(real, imaginary)
    return s.complex_of(
        _multiply_add(s, c)(real, real, s.b.fneg(s.b.fmul(imaginary, imaginary))), s.b.fadd(cross, cross)
    )


def _complex_absolute(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    """NumPy's SIMD loop: the larger part times sqrt(1 + r*r), r the ratio of the smaller to it; an
    infinite part gives inf, else a NaN part NaN."""
    b = s.b
    t = register_type(part_dtype(c.dtype))
    fabs = s.intrinsic("llvm.fabs", t, 1)
    inf, nan = ir.Constant(t, math.inf), ir.Constant(t, math.nan)
    one, zero = ir.Constant(t, 1.0), ir.Constant(t, 0.0)
    real, imaginary = (b.call(fabs, [part]) for part in s.parts(a[0]))
    real_inf, imaginary_inf = b.fcmp_ordered("==", real, inf), b.fcmp_ordered("==", imaginary, inf)
    real, imaginary = b.select(imaginary_inf, inf, real), b.select(real_inf, inf, imaginary)
    real_nan, imaginary_nan = (b.fcmp_unordered("uno", v, v) for v in (real, imaginary))
    real, imaginary = b.select(imaginary_nan, nan, real), b.select(real_nan, nan, imaginary)
    real_larger = b.fcmp_ordered(">=", real, imaginary)
    larger, smaller = b.select(real_larger, real, imaginary), b.select(real_larger, imaginary, real)
    divides = b.not_(b.or_(b.fcmp_ordered("==", larger, zero), b.fcmp_ordered("==", larger, inf)))
    ratio = b.select(divides, b.fdiv(smaller, b.select(divides, larger, one)), zero)
    root = b.call(s.intrinsic("llvm.sqrt", t, 1), [_multiply_add(s, c)(ratio, ratio, one)])
    return b.fmul(root, larger)


def _complex_squared_magnitude(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    real, imaginary = s.parts(a[0])
    return s.b.fadd(s.b.fmul(real, real), s.b.fmul(imaginary, imaginary))


def _complex_libm(symbol: str) -> Code:
    """The C library's complex function, as NumPy's loop calls it, by x86-64's calling convention:
    each complex128 passed and returned as two doubles, each complex64 as a vector of two floats."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        b = s.b
        if s.parts(a[0])[0].type == DOUBLE:
            pair = ir.LiteralStructType([DOUBLE, DOUBLE])
            arguments = [part for value in a for part in s.parts(value)]
            return b.call(s.function(symbol, pair, [DOUBLE] * len(arguments)), arguments)
        packed_type = ir.VectorType(FLOAT, 2)
        packed = []
        for value in a:
            vector = ir.Constant(packed_type, ir.Undefined)
            for i, part in enumerate(s.parts(value)):
                vector = b.insert_element(vector, part, ir.Constant(I32, i))
            packed.append(vector)
        result = b.call(s.function(symbol + "f", packed_type, [packed_type] * len(a)), packed)
        return s.complex_of(*(b.extract_element(result, ir.Constant(I32, i)) for i in (0, 1)))

    return code


def _scaled_parts(s: _Scalars, z: ir.Value, factor: float) -> ir.Value:
    """Each part times a real constant rounded to the part's precision."""
    real, imaginary = s.parts(z)
    constant = ir.Constant(real.type, float(np.float32(factor)) if real.type == FLOAT else factor)
    return s.complex_of(s.b.fmul(real, constant), s.b.fmul(imaginary, constant))


def _complex_logarithm(factor: float) -> Code:
    """NumPy's log2 and log10 of a complex number: the natural one's parts times log2(e), log10(e)."""
    return lambda s, a, c: _scaled_parts(s, _complex_libm("clog")(s, a, c), factor)


def _complex_exp2(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    """NumPy's: the exponential of the parts times ln 2."""
    return _complex_libm("cexp")(s, [_scaled_parts(s, a[0], LN_2)], c)


def _complex_product(s: _Scalars, x: ir.Value, y: ir.Value) -> ir.Value:
    """The product as C computes it, each product rounded (NumPy's scalar ``cmul``)."""
    b, (xr, xi), (yr, yi) = s.b, s.parts(x), s.parts(y)
    return s.complex_of(b.fsub(b.fmul(xr, yr), b.fmul(xi, yi)), b.fadd(b.fmul(xr, yi), b.fmul(xi, yr)))


def _complex_power(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    """NumPy's complex power: 1 for a zero exponent; 0 for zero to a power of positive real part,
    else NaN (invalid); an integral exponent below 100 in magnitude by C's products (1, 2 and 3
    unrolled, others by binary powers from 1, a negative one divided into 1 by NumPy's division);
    the C library's ``cpow`` otherwise. The integral and the ``cpow`` cases are branches (an
    exponent is mostly one value); within the integral one, products a case does not take are of
    harmless operands, so no flag is raised that NumPy's would not."""
    b = s.b
    (ar, ai), (br, bi) = s.parts(a[0]), s.parts(a[1])
    t = ar.type
    zero, one, nan = ir.Constant(t, 0.0), ir.Constant(t, 1.0), ir.Constant(t, math.nan)
    unit = s.complex_of(one, zero)

    def is_zero(x: ir.Value, y: ir.Value) -> ir.Value:
        return b.and_(b.fcmp_ordered("==", x, zero), b.fcmp_ordered("==", y, zero))

    whole = b.fcmp_ordered("==", br, b.call(s.intrinsic("llvm.trunc", t, 1), [br]))
    below = b.and_(
        b.fcmp_ordered(">", br, ir.Constant(t, -100.0)), b.fcmp_ordered("<", br, ir.Constant(t, 100.0))
    )
    integral = b.and_(b.and_(b.fcmp_ordered("==", bi, zero), whole), below)
    with b.if_else(integral) as (by_products, by_library):
        with by_products:
            exponent = b.fptosi(br, I64)
            negative = b.icmp_signed("<", exponent, ir.Constant(I64, 0))
            count = b.select(negative, b.neg(exponent), exponent)
            power, base = unit, a[0]
            for bit in range(7):  # |n| < 128
                taken = b.icmp_unsigned("!=", b.and_(count, ir.Constant(I64, 1 << bit)), ir.Constant(I64, 0))
                power = b.select(taken, _complex_product(s, power, b.select(taken, base, unit)), power)
                more = b.icmp_signed(">=", count, ir.Constant(I64, 2 << bit))
                squared = b.select(more, base, unit)
                base = b.select(more, _complex_product(s, squared, squared), base)
            square = _complex_product(s, a[0], a[0])
            for n, unrolled in ((1, a[0]), (2, square), (3, _complex_product(s, a[0], square))):
                power = b.select(b.icmp_signed("==", exponent, ir.Constant(I64, n)), unrolled, power)
            inverse = _complex_divide(s, [unit, b.select(negative, power, unit)], c)
            integer_power, integer_block = b.select(negative, inverse, power), b.block
        with by_library:
            library_power, library_block = _complex_libm("cpow")(s, a, c), b.block
    result = b.phi(integer_power.type)
    result.add_incoming(integer_power, integer_block)
    result.add_incoming(library_power, library_block)
    base_zero = is_zero(ar, ai)
    positive_real = b.fcmp_ordered(">", br, zero)
    s.report(b.and_(base_zero, b.not_(b.or_(positive_real, is_zero(br, bi)))), float_errors.INVALID)
    zero_power = b.select(positive_real, s.complex_of(zero, zero), s.complex_of(nan, nan))
    return b.select(is_zero(br, bi), unit, b.select(base_zero, zero_power, result))


def _complex_test(name: str, any_part: bool) -> Code:
    """A float test of both parts (``FLOAT_CODE``'s), either part's or both parts' answer."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        part = OpLoop.of(part_dtype(c.dtype))
        tests = [FLOAT_CODE[name](s, [v], part) for v in s.parts(a[0])]
        return (s.b.or_ if any_part else s.b.and_)(*tests)

    return code


COMPLEX_CODE: dict[str, Code] = {
    "add": lambda s, a, c: s.add(*a),
    "subtract": _complex_parts("fsub"),
    "negative": _complex_parts("fneg"),
    "positive": _unchanged,
    "conjugate": lambda s, a, c: s.complex_of(s.parts(a[0])[0], s.b.fneg(s.parts(a[0])[1])),
    "multiply": _complex_multiply,
    "divide": _complex_divide,
    "square": _complex_square,
    "reciprocal": _complex_reciprocal,
    "absolute": _complex_absolute,
    "squared_magnitude": _complex_squared_magnitude,
    "isnan": _complex_test("isnan", any_part=True),
    "isinf": _complex_test("isinf", any_part=True),
    "isfinite": _complex_test("isfinite", any_part=False),
    **({name: _complex_libm(symbol) for name, symbol in COMPLEX_C_MATH.items()} if _X86 else {}),
    **(
        {
            "power": _complex_power,
            "log2": _complex_logarithm(LOG2_E),
            "log10": _complex_logarithm(LOG10_E),
            "exp2": _complex_exp2,
        }
        if _X86
        else {}
    ),
}
# What else takes complex values here: on any dtype (``ANY_DTYPE_CODE``), except order
COMPLEX_NAMES = frozenset(COMPLEX_CODE) | (
    frozenset(ANY_DTYPE_CODE) - {"less", "less_equal", "greater", "greater_equal"}
)


def supports(kernel: Kernel) -> bool:
    """Whether this generator has code for every op of ``kernel`` (``common.generator_supports``)."""
    return generator_supports(kernel, COMPLEX_NAMES)


# -- reduction code

# A reduction's code: its accumulator combined with a value (``[acc, value]``, in the accumulator's
# dtype, the loop's); an indexed reduction's, whether the value is better than the accumulator (an i1).
ReductionCode = Callable[[_Scalars, list[ir.Value], OpLoop], ir.Value]


def _arithmetic_reduction(name: str) -> ReductionCode:
    """NumPy's add or multiply loop on the accumulator's dtype: wrapping integers, or and and on bools."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        return (BOOL_CODE if c.dtype.kind == "b" else INTEGER_CODE)[name](s, a, c)

    return code


def _sum(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    if c.dtype.kind in "fc":  # in lanes within a block (pairwise between them)
        return s.add(*a, flags=("reassoc",))
    return _arithmetic_reduction("add")(s, a, c)


def _prod(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
    dtype = c.dtype
    if dtype == np.float16:  # rounded at every step, as NumPy's half loop across a kept innermost axis
        return s.b.fptrunc(s.b.fmul(s.b.fpext(a[0], FLOAT), s.b.fpext(a[1], FLOAT)), HALF)
    if dtype.kind == "f":  # in order, as NumPy: where a product overflows is order-dependent
        return s.b.fmul(*a)
    if dtype.kind == "c":
        return _complex_multiply(s, a, c)
    return _arithmetic_reduction("multiply")(s, a, c)


def _extremum_reduction(name: str) -> ReductionCode:
    """The elementwise maximum or minimum, NaN and signed zeros included. A float32/64 one is LLVM's
    ``llvm.maximum``/``minimum`` (NaN wins, -0.0 below +0.0), which the loop vectorizer knows as a
    reduction: NumPy's own reduction keeps whichever zero its vector layout meets, so either sign
    of an equal zero is its answer too (``Op.signed_zeros``)."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        dtype = c.dtype
        if dtype.kind == "f" and dtype.itemsize in (4, 8):
            return s.b.call(s.intrinsic(f"llvm.{name}", register_type(dtype), 2), a)
        return s.apply(name, [Value(value, dtype) for value in a], (dtype, dtype, dtype), dtype).ir

    return code


def _better(comparison: str) -> ReductionCode:
    """Whether the value beats the accumulator: by ``comparison``, or as a NaN (the first one stays)."""

    def code(s: _Scalars, a: list[ir.Value], c: OpLoop) -> ir.Value:
        b, (acc, v), dtype = s.b, a, c.dtype
        better = s.compare(comparison, [Value(v, dtype), Value(acc, dtype)])
        if dtype.kind == "f":
            better = b.or_(better, b.and_(b.fcmp_unordered("uno", v, v), b.fcmp_ordered("ord", acc, acc)))
        return better

    return code


REDUCTION_CODE: dict[str, ReductionCode] = {
    "sum": _sum,
    "prod": _prod,
    "max": _extremum_reduction("maximum"),
    "min": _extremum_reduction("minimum"),
    "argmax": _better("greater"),
    "argmin": _better("less"),
    "any": lambda s, a, c: s.b.or_(*a),
    "all": lambda s, a, c: s.b.and_(*a),
}
# -- the kernel's loops ---------------------------------------------------------------------------

Stride = int | ir.Value  # in elements: known when the module is built, or read at launch
Wrap = tuple[int, int] | None  # a rolled read along an axis: (start, modulus); None: read in order


@dataclass
class _Operand:
    """An array the kernel reads or writes: its typed pointer, a stride per axis, and a wrap per
    axis (``Wrap``: a load that reads axis k at (i + start) % modulus)."""

    pointer: ir.Value
    dtype: np.dtype
    strides: list[Stride]
    wraps: Sequence[Wrap]


@dataclass(frozen=True)
class _Group:
    """Adjacent axes that every operand steps through as one: an extent, one stride each, and one
    wrap each (only a group of one axis wraps)."""

    extent: int
    strides: tuple[Stride | None, ...]
    wraps: tuple[Wrap, ...]


def coalesce(
    axes: list[int],
    shape: tuple[int, ...],
    operand_strides: Sequence[Sequence[Stride | None]],
    operand_wraps: Sequence[Sequence[Wrap]],
) -> list[_Group]:
    """Merge axes wherever every operand's stride is known and C-ordered across them and none wraps
    along them; drop extent-1 axes. A stride is known where it is an int (None: one read at launch,
    not yet loaded)."""
    groups: list[_Group] = []
    for axis in axes:
        if shape[axis] == 1:
            continue
        strides = tuple(operand[axis] for operand in operand_strides)
        wraps = tuple(operand[axis] for operand in operand_wraps)
        if groups and not any(wraps):
            last = groups[-1]
            if not any(last.wraps) and all(
                isinstance(outer, int) and isinstance(inner, int) and outer == inner * shape[axis]
                for outer, inner in zip(last.strides, strides, strict=True)
            ):
                groups[-1] = _Group(last.extent * shape[axis], strides, wraps)
                continue
        groups.append(_Group(shape[axis], strides, wraps))
    return groups


def from_memory(b: ir.IRBuilder, raw: ir.Value, dtype: np.dtype) -> ir.Value:
    """A value as registers hold it: a bool is a byte in memory and an i1 in registers."""
    return b.icmp_unsigned("!=", raw, ir.Constant(I8, 0)) if dtype.kind == "b" else raw


def to_memory(b: ir.IRBuilder, value: ir.Value, dtype: np.dtype) -> ir.Value:
    return b.zext(value, I8) if dtype.kind == "b" else value


@dataclass(frozen=True)
class _Unit:
    """Kept elements that a reducing kernel reduces together: one row, or a chunk of adjacent
    columns, whose per-row values (accumulators included) are then held per lane, one per column."""

    first: ir.Value  # the kept index (the row number) of its first element
    bases: list[ir.Value]  # each operand's offset there
    count: ir.Value | None = None  # columns: how many, at most ``lanes``; None for one row
    strides: tuple[Stride, ...] = ()  # columns: each operand's step from one column to the next


class _Bodies(NamedTuple):
    """A pass's work at one element (``rest``), and, for a row with scans, the scans' part, split
    off so that only it runs in order: each block of a row runs ``scanning`` over its elements first,
    leaving the scans' values in a buffer, then ``rest``, which reads them and vectorizes (a
    transcendental of a running sum, as a Monte-Carlo path's ``exp(cumsum(...))``). Each takes (the
    reduced index, the operands' offsets, the element's slot in its block)."""

    scanning: Callable | None
    rest: Callable


class _Accumulator:
    """A reduction's running state, per lane: allocas that LLVM promotes to registers (a row), or
    arrays in the scratch that the loop over a chunk of columns reads and writes in vectors."""

    def __init__(self, function: _KernelFunction, number: int) -> None:
        facts = function.module
        inst = facts.instructions[number]
        self.function = function
        self.number = number
        self.facts = REDUCTION_FACTS[inst.op.name]
        self.code = REDUCTION_CODE[inst.op.name]
        self.result = inst.dtype
        operand = facts.instructions[inst.args[0]].dtype
        self.dtype, self.pairwise = accumulation(inst, operand, facts.innermost_reduced)
        self.loop = OpLoop(self.dtype, in_place=facts.innermost_reduced)
        self.value = function.lane_variable(self.dtype)
        self.index = function.lane_variable(INT64) if self.facts.indexed else None
        if self.pairwise:
            self.block = function.lane_variable(self.dtype)
            self.levels = function.lane_variable(self.dtype, facts.pairwise_levels)
            self.blocks = function.variable(I64)  # blocks summed so far: one count for every lane

    @staticmethod
    def lane_bytes(inst: Instruction, operand: np.dtype, levels: int, innermost_reduced: bool) -> int:
        """The bytes it takes per lane."""
        dtype, pairwise = accumulation(inst, operand, innermost_reduced)
        index = 8 if REDUCTION_FACTS[inst.op.name].indexed else 0
        return dtype.itemsize * (1 + (1 + levels if pairwise else 0)) + index

    def identity(self) -> ir.Constant:
        return self.function.scalars.const(self.dtype, self.facts.identity(self.dtype))

    def get(self, pointer: ir.Value) -> ir.Value:
        return from_memory(self.function.b, self.function.lane_load(pointer), self.dtype)

    def put(self, value: ir.Value, pointer: ir.Value) -> None:
        self.function.b.store(to_memory(self.function.b, value, self.dtype), pointer)

    def start(self, unit: _Unit) -> None:
        function, b = self.function, self.function.b
        if self.pairwise:
            b.store(ir.Constant(I64, 0), self.blocks)

        def lane(j: ir.Value | None) -> None:
            self.put(self.identity(), function.at(self.value, j))
            if self.index is not None:
                b.store(ir.Constant(I64, -1), function.at(self.index, j))

        function.each_lane(unit, lane)

    def start_block(self, unit: _Unit | None) -> None:
        if self.pairwise:
            self.function.each_lane(
                unit, lambda j: self.put(self.identity(), self.function.at(self.block, j))
            )

    def update(self, value: Value, index: ir.Value, lane: ir.Value | None) -> None:
        value = self.function.scalars.cast(value, self.dtype)
        self.combine(
            self.function.at(self.block if self.pairwise else self.value, lane), value.ir, index, lane
        )

    def combine(self, target: ir.Value, v: ir.Value, index: ir.Value | None, lane: ir.Value | None) -> None:
        """``target`` <- ``target`` combined with ``v`` (at ``index``, for argmax/argmin)."""
        b, scalars = self.function.b, self.function.scalars
        acc = self.get(target)
        if self.index is None:
            self.put(self.code(scalars, [acc, v], self.loop), target)
            return
        best_index = self.function.at(self.index, lane)
        best = self.function.lane_load(best_index)
        better = self.code(scalars, [acc, v], self.loop)
        take = b.or_(b.icmp_signed("<", best, ir.Constant(I64, 0)), better)
        if index is not None and index.type != I64:
            index = b.sext(index, I64)
        take = b.and_(take, b.icmp_signed(">=", index, ir.Constant(I64, 0)))
        self.put(b.select(take, v, acc), target)
        b.store(b.select(take, index, best), best_index)

    def end_block(self, unit: _Unit | None) -> None:
        """Pairwise: the block's sum joins a binary counter of partial sums (one per lane), merging
        with as many levels as the count of blocks so far ends in ones."""
        if not self.pairwise:
            return
        function, b = self.function, self.function.b
        blocks = b.load(self.blocks)
        trailing_zeros = function.module.module.declare_intrinsic("llvm.cttz", [I64, I1])
        merges = b.call(trailing_zeros, [b.xor(blocks, ir.Constant(I64, -1)), ir.Constant(I1, 0)])

        def merge(level: ir.Value) -> None:
            def lane(j: ir.Value | None) -> None:
                carry = function.at(self.block, j)
                added = function.scalars.add(self.get(function.at(self.levels, j, level)), self.get(carry))
                self.put(added, carry)

            function.each_lane(unit, lane)

        counted_loop(b, ir.Constant(I64, 0), merges, merge)
        function.each_lane(
            unit,
            lambda j: self.put(self.get(function.at(self.block, j)), function.at(self.levels, j, merges)),
        )
        b.store(b.add(blocks, ir.Constant(I64, 1)), self.blocks)

    def finish(self, unit: _Unit) -> None:
        """Pairwise: collapse the counter into ``value`` (earlier blocks on the left)."""
        if not self.pairwise:
            return
        function, b = self.function, self.function.b
        level = function.variable(I64)
        rest = function.variable(I64)
        b.store(ir.Constant(I64, 0), level)
        b.store(b.load(self.blocks), rest)

        def more() -> ir.Value:
            return b.icmp_unsigned("!=", b.load(rest), ir.Constant(I64, 0))

        def add_level() -> None:
            present = b.icmp_unsigned("!=", b.and_(b.load(rest), ir.Constant(I64, 1)), ir.Constant(I64, 0))
            current = b.load(level)

            def lane(j: ir.Value | None) -> None:
                total = self.get(function.at(self.value, j))
                added = function.scalars.add(self.get(function.at(self.levels, j, current)), total)
                self.put(b.select(present, added, total), function.at(self.value, j))

            function.each_lane(unit, lane)
            b.store(b.add(current, ir.Constant(I64, 1)), level)
            b.store(b.lshr(b.load(rest), ir.Constant(I64, 1)), rest)

        while_loop(b, more, add_level)

    def result_value(self, lane: ir.Value | None) -> Value:
        function, b = self.function, self.function.b
        if self.index is not None:
            return Value(b.load(function.at(self.index, lane)), self.result)
        if self.facts.additive and function.module.row_elements == 0:
            return Value(function.scalars.const(self.result, 0), self.result)
        return function.scalars.cast(Value(self.get(function.at(self.value, lane)), self.dtype), self.result)


def while_loop(b: ir.IRBuilder, condition: Callable[[], ir.Value], body: Callable[[], None]) -> None:
    function = b.function
    header = function.append_basic_block("while.test")
    inside = function.append_basic_block("while.body")
    after = function.append_basic_block("while.end")
    b.branch(header)
    b.position_at_end(header)
    b.cbranch(condition(), inside, after)
    b.position_at_end(inside)
    body()
    b.branch(header)
    b.position_at_end(after)


def counted_loop(b: ir.IRBuilder, begin: ir.Value, end: ir.Value, body: Callable[[ir.Value], None]) -> None:
    """``for i in range(begin, end): body(i)`` as a canonical counted loop, which LLVM vectorizes."""
    function = b.function
    before = b.block
    header = function.append_basic_block("for.test")
    inside = function.append_basic_block("for.body")
    after = function.append_basic_block("for.end")
    b.branch(header)
    b.position_at_end(header)
    index = b.phi(I64)
    index.add_incoming(begin, before)
    b.cbranch(b.icmp_signed("<", index, end), inside, after)
    b.position_at_end(inside)
    body(index)
    index.add_incoming(b.add(index, ir.Constant(I64, 1), flags=("nsw",)), b.block)
    b.branch(header)
    b.position_at_end(after)


class _KernelModule(KernelFacts):
    """Builds the module for one kernel: its entry, and for one-pass reductions PARTIAL and FINISH,
    each by a ``_KernelFunction`` of its own. It holds what lives as long as the module, which its
    functions share: the kernel's facts, the operands' strides known when the module is built, the
    columns a unit holds, the outputs' alias scopes, and the most scratch a function takes."""

    def __init__(self, kernel: Kernel) -> None:
        KernelFacts.__init__(self, kernel)
        self.module = ir.Module(name="dynfuse")
        # Threads may share a one-pass kernel's rows, but not a scan's: it runs along each in order.
        self.splittable = bool(self.reduce_axes) and kernel.passes == 1 and not self.scans
        self.columns = reads_columns(kernel)
        self.scratch_bytes = 0  # the most any function's lanes take (``_KernelFunction.lane_variable``)
        # levels of a pairwise sum's binary counter: a bit of the count of blocks each
        self.pairwise_levels = self.blocks_at_most().bit_length()
        self.operand_strides = self.known_strides()
        self.operand_wraps = self.known_wraps()
        self.lanes = self.chunk_columns() if self.columns else 1  # rows reduced together
        self.kept_in_row = self.values_kept_in_row()
        domain = self.module.add_metadata([ir.MetaDataString(self.module, "dynfuse.outputs")])
        self.scopes = [
            self.module.add_metadata([ir.MetaDataString(self.module, f"out{position}"), domain])
            for position in range(len(kernel.outputs))
        ]

    def layout(self) -> Layout:
        return Layout(
            inputs=len(self.loads),
            outputs=len(self.kernel.outputs),
            strided=self.strided,
            ndim=len(self.shape),
            param_uses=tuple(self.param_uses),
            extent=self.extent,
            row_elements=self.row_elements,
            splittable=self.splittable,
            state_cells=self.state_cells,
            columns=self.columns,
            lanes=self.lanes,
            scratch_bytes=self.scratch_bytes,
            element_cost=self.element_cost(),
        )

    def element_cost(self) -> float:
        """What the ops cost for one element, each as often as a pass computes it: a softmax's
        shifted value in each of its three passes, its exponential once where the row keeps it."""
        passes = self.kernel.passes
        computed = self.instructions
        if passes > 1:
            numbers = [n for stage in range(passes) for n in self.needed(stage)] + self.reductions
            computed = [self.instructions[n] for n in numbers]
        return sum(element_cost(inst) for inst in computed if inst.op.kind in COMPUTING)

    def blocks_at_most(self) -> int:
        """Pairwise blocks in one pass: each segment of the reduce loop (the last reduced axis, or
        longer where axes merge) is cut into blocks, and a PARTIAL range may cut two more."""
        reduced = [self.shape[axis] for axis in self.reduce_axes if self.shape[axis] > 1]
        segment = reduced[-1] if reduced else 1
        return self.row_elements // segment * -(-segment // BLOCK) + 2

    def known_strides(self) -> list[Sequence[int | None]]:
        """Each operand's strides in elements (loads by slot, then outputs); None where a load's is
        read from the cells at launch (``stride_cell``)."""
        strides: list[Sequence[int | None]] = []
        for inst in self.loads:
            params = dict(inst.params)
            if params["zero_dim"]:
                strides.append([0] * len(self.shape))
            elif params["contiguous"]:
                strides.append(c_strides(self.shape))
            else:
                strides.append(
                    [
                        0 if axis in params["broadcast"] or extent == 1 else None
                        for axis, extent in enumerate(self.shape)
                    ]
                )
        for output in self.kernel.outputs:
            shape = self.kernel.output_shape(output)
            if output.strided:
                strides.append([0 if extent == 1 else None for extent in shape])
            else:
                strides.append(c_strides(shape))
        return strides

    def known_wraps(self) -> list[list[Wrap]]:
        """Each operand's wrap per axis (loads by slot, then outputs, which never wrap); none along
        an axis it does not step along."""
        wraps: list[list[Wrap]] = []
        for inst, strides in zip(self.loads, self.operand_strides, strict=False):
            along = [None] * len(self.shape)
            for axis, start, modulus in dict(inst.params).get("wraps", ()):
                if strides[axis] != 0:
                    along[axis] = (start, modulus)
            wraps.append(along)
        return wraps + [[None] * len(self.shape) for _ in self.kernel.outputs]

    def stride_cell(self, operand: int, axis: int) -> int:
        """The cell of a strided operand's stride along ``axis`` (loads by slot, then outputs)."""
        first = len(self.loads) + len(self.kernel.outputs) + self.strided.index(operand) * len(self.shape)
        return first + axis

    def chunk_columns(self) -> int:
        """Column mode's chunk: a whole segment of the kept axes when it fits, else as many columns
        as fit, in whole cache lines."""
        segment = coalesce(self.kept_axes, self.shape, self.operand_strides, self.operand_wraps)[-1].extent
        fit = min(COLUMN_LANES, COLUMN_BYTES // self.lane_bytes())
        return segment if segment <= fit else max(fit - fit % LINE_COLUMNS, 1)

    def lane_bytes(self) -> int:
        """Bytes per lane of all a function holds per lane: accumulators and per-row values."""
        total = sum(
            _Accumulator.lane_bytes(
                inst, self.instructions[inst.args[0]].dtype, self.pairwise_levels, self.innermost_reduced
            )
            for inst in (self.instructions[number] for number in self.reductions)
        )
        return total + sum(
            inst.dtype.itemsize
            for inst in self.instructions
            if (inst.row and inst.dtype is not None) or inst.op.kind is OpKind.SCAN
        )

    @property
    def state_cells(self) -> int:
        return 2 * len(self.reductions)

    @property
    def extent(self) -> int:
        return int(np.prod([self.shape[axis] for axis in self.kept_axes], dtype=np.int64))

    def build(self, split: bool) -> ir.Module:
        if split:
            assert self.splittable, "PARTIAL and FINISH of a kernel that cannot share its rows"
            _KernelFunction(self, PARTIAL, [I64, I64, I64, I64, CELLS]).partial()
            # In rows mode a launch shares rows only when they are fewer than its threads: then
            # FINISH combines a few states, and vectorizing its loops cost up to half the split
            # module's compile (perf/RESULTS.md), for a call of microseconds. In columns mode it
            # combines every lane's.
            _KernelFunction(self, FINISH, [I64, I64, CELLS, I64], small=not self.columns).finish()
        else:
            _KernelFunction(self, ENTRY, [I64, I64]).entry()
        llvm_math.prepare_for_vectorizer(self.module)
        return self.module

    def per_element(self, output: Output) -> bool:
        """Written in the element loop: a kernel that reduces over no axes has no rows."""
        return not output.row or not self.reduce_axes

    def needed(self, stage: int | None) -> list[int]:
        """Per-element instructions a pass computes, or reads from where an earlier pass kept them
        (``kept_in_row``): what its reductions and outputs read."""
        return self.reading(self._pass_roots(stage), self.kept_before(stage))

    def reading(self, roots: list[int], known: frozenset[int] = frozenset()) -> list[int]:
        """``roots`` and the per-element instructions they read, in order (per-row ones are known,
        and so are the arguments of ``known`` ones)."""
        wanted: set[int] = set()
        roots = list(roots)
        while roots:
            number = roots.pop()
            inst = self.instructions[number]
            if number in wanted or (inst.row and self.reduce_axes) or inst.op.kind is OpKind.SCALAR:
                continue
            wanted.add(number)
            if number not in known:
                roots.extend(inst.args)
        return sorted(wanted)

    def kept_before(self, stage: int | None) -> frozenset[int]:
        """The values pass ``stage`` reads from where an earlier pass kept them."""
        if stage is None:
            return frozenset()
        return frozenset(n for n in self.kept_in_row if self.instructions[n].stage < stage)

    def values_kept_in_row(self) -> dict[int, int]:
        """Per-element values a pass computes that a later pass reads again, where computing them
        again costs ``ROW_KEPT_COST`` or more: kept in a row of their own (by number: its bytes).
        Only row by row (no columns, no scans) and where the rows fit ``ROW_KEPT_BYTES``."""
        passes = self.kernel.passes
        if not self.reduce_axes or self.columns or self.scans or passes < 2:
            return {}
        computed = {stage: set(self.reading(self._pass_roots(stage))) for stage in range(passes)}
        kept: dict[int, int] = {}
        for number in sorted(computed[0].union(*computed.values()), key=self._cost, reverse=True):
            inst = self.instructions[number]
            if inst.op.kind is not OpKind.ELEMENTWISE or self._cost(number) < ROW_KEPT_COST:
                continue
            later = any(number in computed[stage] for stage in range(inst.stage + 1, passes))
            size = self.row_elements * inst.dtype.itemsize
            if (
                number in computed.get(inst.stage, ())
                and later
                and sum(kept.values()) + size <= ROW_KEPT_BYTES
            ):
                kept[number] = size
        return kept

    def _pass_roots(self, stage: int | None) -> list[int]:
        """What a pass writes and accumulates (every pass: ``None``)."""
        roots = [out.value for out in self.kernel.outputs if self.per_element(out)]
        roots = [n for n in roots if stage is None or self.instructions[n].stage == stage]
        return roots + [self.instructions[n].args[0] for n in self.accumulating(stage)]

    def _cost(self, number: int) -> float:
        """What computing per-element value ``number`` again costs: its op and the per-element ops
        under it (loads and per-row values are at hand)."""
        total, stack, seen = 0.0, [number], set()
        while stack:
            at = stack.pop()
            inst = self.instructions[at]
            if at in seen or inst.row or inst.op.kind is not OpKind.ELEMENTWISE:
                continue
            seen.add(at)
            total += element_cost(inst)
            stack.extend(inst.args)
        return total

    def accumulating(self, stage: int | None) -> list[int]:
        return [n for n in self.reductions if self.instructions[self.instructions[n].args[0]].stage == stage]


class _KernelFunction:
    """Builds one function of a kernel's module (ENTRY, PARTIAL or FINISH), from its signature to
    its return. It holds what lives as long as the function: the IR builder, the arguments, the
    operands and parameters read from the cells, and the lane storage of its per-row values.

    A reducing kernel works on *units* of kept elements: one row at a time, or, in column mode
    (``reads_columns``), chunks of up to ``lanes`` adjacent columns, each pass walking the reduced
    axes outside a loop over the chunk's columns. The two share all code: a per-row value or
    accumulator is held per lane (one alloca for a row, an array of ``lanes`` in the scratch for
    columns), and ``each_lane`` runs a piece of code once for a row, or in a loop over the chunk's
    columns.
    """

    def __init__(
        self, module: _KernelModule, name: str, arguments: list[ir.Type], small: bool = False
    ) -> None:
        """``small``: code that does little work a launch (FINISH: a few rows' states), compiled for
        size, which keeps LLVM from vectorizing it."""
        self.module = module
        function_type = ir.FunctionType(ir.VoidType(), [CELLS, SCRATCH, *arguments])
        function = ir.Function(module.module, function_type, name)
        function.attributes.add("nounwind")
        if small:
            function.attributes.add("minsize")
            function.attributes.add("optsize")
        # The scratch is this call's own: LLVM may vectorize over lanes without checking whether
        # they overlap the arrays the kernel reads and writes.
        self.scratch = function.args[1]
        for attribute in ("noalias", "captures(none)"):
            self.scratch.add_attribute(attribute)
        self.scratch.attributes.align = SCRATCH_ALIGNMENT
        self.scratch_used = 0
        self.lane_arrays: list[ir.Value] = []
        self.entry_block = function.append_basic_block("entry")
        body = function.append_basic_block("body")
        self.b = ir.IRBuilder(body)
        self.scalars = _Scalars(self.b, module.module)
        self.watch_flags()
        self.cells = function.args[0]
        self.arguments = list(function.args[2:])
        self.operands = self.memory_operands()
        self.params = self.load_params()
        self.kept: dict[int, tuple[ir.Value, np.dtype]] = {}  # per-row values, by number: lane storage
        self.running: dict[int, ir.Value] = {}  # each scan's running value: lane storage
        self.rows_kept: dict[int, ir.Value] = {}  # per-element values kept between passes: a row each

    def watch_flags(self) -> None:
        """Start counting floating-point flags: the ones ``_Scalars.report`` raises, and on x86 the
        ones the hardware raises (MXCSR's, cleared here, the caller's put back at the end)."""

        def new_flag() -> ir.Value:
            variable = self.variable(I1)
            ir.IRBuilder(self.entry_block).store(ir.Constant(I1, 0), variable)
            return variable

        self.scalars.reported, self.scalars.new_flag = {}, new_flag
        if not _X86:
            return
        self.control, control = self.variable(I32), self.variable(I32)
        self.b.call(_mxcsr(self.module.module, "stmxcsr"), [self.b.bitcast(self.control, I8.as_pointer())])
        self.b.store(self.b.and_(self.b.load(self.control), ir.Constant(I32, ~_MXCSR_FLAGS)), control)
        self.b.call(_mxcsr(self.module.module, "ldmxcsr"), [self.b.bitcast(control, I8.as_pointer())])

    def report_flags(self) -> None:
        """OR the flags raised into ``float_errors.FLAGS``, where any was."""
        b, module = self.b, self.module.module
        raised = ir.Constant(I32, 0)
        for bits, variable in self.scalars.reported.items():
            raised = b.or_(raised, b.select(b.load(variable), ir.Constant(I32, bits), ir.Constant(I32, 0)))
        if _X86:
            status = self.variable(I32)
            b.call(_mxcsr(module, "stmxcsr"), [b.bitcast(status, I8.as_pointer())])
            hardware = b.load(status)
            # MXCSR's invalid (bit 0), divide (2), overflow (3) and underflow (4), as NumPy's bits
            numpy_bits = b.or_(
                b.and_(b.lshr(hardware, ir.Constant(I32, 2)), ir.Constant(I32, 7)),
                b.shl(b.and_(hardware, ir.Constant(I32, 1)), ir.Constant(I32, 3)),
            )
            raised = b.or_(raised, numpy_bits)
            b.call(_mxcsr(module, "ldmxcsr"), [b.bitcast(self.control, I8.as_pointer())])
        word = module.globals.get(float_errors.FLAGS_SYMBOL)
        if word is None:
            word = ir.GlobalVariable(module, I64, float_errors.FLAGS_SYMBOL)
        with b.if_then(b.icmp_unsigned("!=", raised, ir.Constant(I32, 0)), likely=False):
            b.atomic_rmw("or", word, b.zext(raised, I64), "monotonic")

    def end_function(self) -> None:
        self.report_flags()
        self.b.ret_void()
        ir.IRBuilder(self.entry_block).branch(self.entry_block.function.blocks[1])
        self.module.scratch_bytes = max(self.module.scratch_bytes, aligned(self.scratch_used))
        self.separate_lane_arrays()

    def separate_lane_arrays(self) -> None:
        """Alias scopes that tell LLVM what separate allocas would: a lane array overlaps no other,
        nor any memory the kernel reads or writes. On its own, LLVM cannot tell arrays at offsets
        of one scratch apart (nor, in some loops, the scratch from the inputs), and vectorizes loops
        that read one and write another only behind runtime overlap checks."""
        if not self.lane_arrays:
            return
        module = self.module.module
        domain = module.add_metadata([ir.MetaDataString(module, "dynfuse.lanes")])
        scopes = {
            array: module.add_metadata([ir.MetaDataString(module, f"lanes{number}"), domain])
            for number, array in enumerate(self.lane_arrays)
        }
        for block in self.entry_block.function.blocks:
            for instruction in block.instructions:
                if not isinstance(instruction, ir.LoadInstr | ir.StoreInstr):
                    continue
                pointer = instruction.operands[-1]  # a lane array, or an element of one (``at``)
                scope = scopes.get(pointer.pointer if isinstance(pointer, ir.GEPInstr) else pointer)
                if scope is None:
                    excluded = instruction.metadata.get("noalias")
                    others = [*(excluded.operands if excluded else ()), *scopes.values()]
                else:
                    instruction.set_metadata("alias.scope", module.add_metadata([scope]))
                    others = [other for other in scopes.values() if other is not scope]
                if others:
                    instruction.set_metadata("noalias", module.add_metadata(others))

    def in_row(self, number: int, index: ir.Value) -> ir.Value:
        """Where value ``number`` of the row's element ``index`` is kept between passes."""
        if number not in self.rows_kept:
            row = ir.ArrayType(storage_type(self.module.instructions[number].dtype), self.module.row_elements)
            self.rows_kept[number] = self.scratch_array(row, self.module.kept_in_row[number])
        return self.b.gep(self.rows_kept[number], [ir.Constant(I64, 0), index])

    def variable(self, value_type: ir.Type) -> ir.Value:
        """An alloca in the entry block, where LLVM promotes it to registers."""
        return ir.IRBuilder(self.entry_block).alloca(value_type)

    def lane_variable(self, dtype: np.dtype, levels: int | None = None) -> ir.Value:
        """A value per lane, or ``levels`` of them: for a row, a variable; for columns, an array of
        ``lanes`` in the scratch (a chunk's lanes may not fit a thread's stack)."""
        value_type = storage_type(dtype)
        if not self.module.columns:
            return self.variable(value_type if levels is None else ir.ArrayType(value_type, levels))
        array_type = ir.ArrayType(value_type, self.module.lanes)
        if levels is not None:
            array_type = ir.ArrayType(array_type, levels)
        return self.scratch_array(array_type, dtype.itemsize * self.module.lanes * (levels or 1))

    def scratch_array(self, array_type: ir.Type, size: int) -> ir.Value:
        """An array of ``size`` bytes in the call's scratch, in a scope of its own."""
        offset = aligned(self.scratch_used)
        self.scratch_used = offset + size
        builder = ir.IRBuilder(self.entry_block)
        start = builder.gep(self.scratch, [ir.Constant(I64, offset)])
        self.lane_arrays.append(builder.bitcast(start, array_type.as_pointer()))
        return self.lane_arrays[-1]

    def lane_load(self, pointer: ir.Value) -> ir.Value:
        """An accumulator's value, to update in place. For columns it goes through LLVM's ``freeze``
        (which llvmlite's builder lacks): a store of ``select(c, old, new)`` back where ``old`` was
        loaded would become a masked store, which x86's backend makes of it and some CPUs run many
        times slower than a plain one (max, argmax)."""
        value = self.b.load(pointer)
        if not self.module.columns:
            return value
        frozen = ir.Instruction(self.b.block, value.type, "freeze", [value])
        self.b._insert(frozen)
        return frozen

    def at(self, storage: ir.Value, lane: ir.Value | None, level: ir.Value | None = None) -> ir.Value:
        """The address of ``lane``'s value (at ``level``) in storage from ``lane_variable``."""
        indices = [index for index in (level, lane) if index is not None]
        return self.b.gep(storage, [ir.Constant(I64, 0), *indices]) if indices else storage

    def cell(self, index: int, value_type: ir.Type) -> ir.Value:
        pointer = self.b.gep(self.cells, [ir.Constant(I64, index)])
        return self.b.load(self.b.bitcast(pointer, value_type.as_pointer()))

    def memory_operands(self) -> list[_Operand]:
        """Loads by slot, then outputs: pointers and strides (known, or read from the cells)."""
        b, module = self.b, self.module
        dtypes = [inst.dtype for inst in module.loads] + [out.dtype for out in module.kernel.outputs]
        operands = []
        for number, dtype in enumerate(dtypes):  # a load's number is its slot
            pointer = b.inttoptr(self.cell(number, I64), storage_type(dtype).as_pointer())
            strides: list[Stride] = [
                self.cell(module.stride_cell(number, axis), I64) if stride is None else stride
                for axis, stride in enumerate(module.operand_strides[number])
            ]
            operands.append(_Operand(pointer, dtype, strides, module.operand_wraps[number]))
        return operands

    def load_params(self) -> list[tuple[Value, ir.Value | None]]:
        module = self.module
        params, cell = (
            [],
            len(module.loads) + len(module.kernel.outputs) + len(module.strided) * len(module.shape),
        )
        for use in module.param_uses:
            raw = self.cell(cell, storage_type(use.dtype))
            value = Value(self.b.trunc(raw, I1) if use.dtype.kind == "b" else raw, use.dtype)
            flag = self.cell(cell + 1, I64) if use.compared else None
            params.append((value, flag))
            cell += use.cells
        return params

    # -- values --

    def load(self, operand: _Operand, offset: ir.Value) -> Value:
        instruction = self.b.load(self.b.gep(operand.pointer, [offset]))
        scopes = self.module.scopes
        if scopes:
            instruction.set_metadata("noalias", self.module.module.add_metadata(scopes))
        return Value(from_memory(self.b, instruction, operand.dtype), operand.dtype)

    def position(self, index: Value, extent: int) -> ir.Value:
        """An index value as a position along an axis of ``extent``: negative ones from the end. An
        index is checked where it is written; one that memory NumPy can see changed since (its
        bounds checked no more) reads the first element, never outside the array."""
        value = index.ir
        if value.type.width < 64:
            value = (self.b.sext if index.dtype.kind == "i" else self.b.zext)(value, I64)
        bound = ir.Constant(I64, extent)
        if index.dtype.kind == "i":
            negative = self.b.icmp_signed("<", value, ir.Constant(I64, 0))
            value = self.b.select(negative, self.b.add(value, bound), value)
        return self.b.select(self.b.icmp_unsigned("<", value, bound), value, ir.Constant(I64, 0))

    def store(self, position: int, value: Value, offset: ir.Value) -> None:
        module, scopes = self.module.module, self.module.scopes
        operand = self.operands[len(self.module.loads) + position]
        value = self.scalars.cast(value, operand.dtype)
        instruction = self.b.store(
            to_memory(self.b, value.ir, operand.dtype), self.b.gep(operand.pointer, [offset])
        )
        others = [scope for other, scope in enumerate(scopes) if other != position]
        instruction.set_metadata("alias.scope", module.add_metadata([scopes[position]]))
        if others:
            instruction.set_metadata("noalias", module.add_metadata(others))

    def compute(
        self, number: int, values: dict[int, Value], offsets: list[ir.Value], lane: ir.Value | None = None
    ) -> Value:
        """The value of instruction ``number``, its arguments already in ``values``; a scan's, in
        ``lane``, the next of its row."""
        module = self.module
        inst = module.instructions[number]
        kind = inst.op.kind
        if kind is OpKind.BUFFER:
            offset = offsets[inst.slot]
            for arg, (stride, extent) in zip(inst.args, dict(inst.params).get("gather", ()), strict=True):
                moved = self.b.mul(self.position(values[arg], extent), ir.Constant(I64, stride))
                offset = self.b.add(offset, moved)
            return self.load(self.operands[inst.slot], offset)
        if kind is OpKind.SCAN:  # NumPy's accumulate: the operand cast, combined with the last value
            running = self.at(self.running[number], lane)
            last = Value(from_memory(self.b, self.b.load(running), inst.dtype), inst.dtype)
            operands = [last, values[inst.args[0]]]
            value = self.scalars.apply(scan_step(inst), operands, (inst.dtype,) * 3, inst.dtype)
            self.b.store(to_memory(self.b, value.ir, inst.dtype), running)
            return value
        if kind is OpKind.REDUCTION:  # over no axes (of a 0-d value): each row is one element
            operand = values[inst.args[0]]
            facts = REDUCTION_FACTS[inst.op.name]
            if facts.indexed:
                return Value(ir.Constant(I64, 0), inst.dtype)
            value = self.scalars.cast(operand, BOOL if facts.logical else inst.dtype)
            if facts.additive and value.dtype.kind in "fc":  # added to +0.0, as any NumPy sum
                value = Value(self.scalars.add(value.ir, self.scalars.const(value.dtype, 0.0)), value.dtype)
            elif facts.arithmetic and value.dtype.kind == "c":  # 1 times it, as NumPy's product
                one = self.scalars.const(value.dtype, 1.0)
                value = Value(
                    _complex_multiply(self.scalars, [one, value.ir], OpLoop.of(value.dtype)), value.dtype
                )
            return self.scalars.cast(value, inst.dtype)
        assert kind is OpKind.ELEMENTWISE, inst
        args, flag, param_position = [], None, None
        for position, arg in enumerate(inst.args):
            if (number, position) in module.use_of:
                value, use_flag = self.params[module.use_of[number, position]]
                if use_flag is not None:
                    flag, param_position = use_flag, position
                args.append(value)
            else:
                args.append(values[arg])
        name, scalar_bounds = module.code_choice(number)
        result = self.scalars.apply(name, args, module.loops[number], inst.dtype, scalar_bounds)
        if flag is None:
            return result
        # an int outside the dtype's range: the comparison is decided by which side it lies on
        sides = [flag if position == param_position else ir.Constant(I64, 0) for position in range(2)]
        decided = self.b.icmp_signed(COMPARISONS[inst.op.name], *sides)
        outside = self.b.icmp_signed("!=", flag, ir.Constant(I64, 0))
        return Value(self.b.select(outside, decided, result.ir), result.dtype)

    # -- lanes --

    def each_lane(self, unit: _Unit | None, body: Callable[[ir.Value | None], None]) -> None:
        """``body(lane)`` for each column of a chunk; once, with no lane, for a row or an element."""
        if unit is None or unit.count is None:
            body(None)
        else:
            counted_loop(self.b, ir.Constant(I64, 0), unit.count, body)

    def lane_offsets(
        self, unit: _Unit | None, lane: ir.Value | None, offsets: list[ir.Value]
    ) -> list[ir.Value]:
        if lane is None:
            return offsets
        return [
            self.advance(offset, lane, stride) for offset, stride in zip(offsets, unit.strides, strict=True)
        ]

    def keep(self, number: int, value: Value, lane: ir.Value | None) -> None:
        """Hold a per-row value in its lane, for the passes and values that read it later."""
        if number not in self.kept:
            self.kept[number] = (self.lane_variable(value.dtype), value.dtype)
        self.b.store(to_memory(self.b, value.ir, value.dtype), self.at(self.kept[number][0], lane))

    def row_values(self, lane: ir.Value | None) -> dict[int, Value]:
        """The per-row values held so far, in ``lane`` (LLVM drops the loads nothing uses)."""
        return {
            number: Value(from_memory(self.b, self.b.load(self.at(storage, lane)), dtype), dtype)
            for number, (storage, dtype) in self.kept.items()
        }

    def element_body(
        self, stage: int | None, accumulators: list[_Accumulator], unit: _Unit | None
    ) -> _Bodies:
        """What a pass does at one reduced index (or one element): for each lane, compute, accumulate
        and write per-element outputs. A row's scans are split off (``_Bodies``)."""
        module = self.module
        wanted = module.needed(stage)
        outputs = [
            (position, out.value)
            for position, out in enumerate(module.kernel.outputs)
            if module.per_element(out) and (stage is None or module.instructions[out.value].stage == stage)
        ]
        one_row = unit is not None and unit.count is None  # columns vectorize across lanes already
        scans = [n for n in wanted if module.instructions[n].op.kind is OpKind.SCAN] if one_row else []
        before_scans = module.reading(scans)
        buffers: dict[int, ir.Value] = {}  # each scan's values of a block, by the element's slot in it

        def buffered(number: int, slot: ir.Value) -> ir.Value:
            return self.b.gep(buffers[number], [ir.Constant(I64, 0), slot])

        def scanning(index: ir.Value, offsets: list[ir.Value], slot: ir.Value) -> None:
            values = self.row_values(None)
            for number in before_scans:
                values[number] = self.compute(number, values, offsets)
            for number in scans:
                if number not in buffers:
                    buffers[number] = self.variable(ir.ArrayType(values[number].ir.type, BLOCK))
                self.b.store(values[number].ir, buffered(number, slot))

        reading_kept = sorted(module.kept_before(stage).intersection(wanted))
        keeping = [n for n in wanted if n in module.kept_in_row and module.instructions[n].stage == stage]

        def body(index: ir.Value, offsets: list[ir.Value], slot: ir.Value) -> None:
            def lane(j: ir.Value | None) -> None:
                values = self.row_values(j)
                for number in scans:
                    values[number] = Value(
                        self.b.load(buffered(number, slot)), module.instructions[number].dtype
                    )
                for number in reading_kept:
                    dtype = module.instructions[number].dtype
                    values[number] = Value(
                        from_memory(self.b, self.b.load(self.in_row(number, index)), dtype), dtype
                    )
                lane_offsets = self.lane_offsets(unit, j, offsets)
                for number in wanted:
                    if number not in values:
                        values[number] = self.compute(number, values, lane_offsets, j)
                for number in keeping:
                    stored = to_memory(self.b, values[number].ir, values[number].dtype)
                    self.b.store(stored, self.in_row(number, index))
                for accumulator in accumulators:
                    accumulator.update(values[module.instructions[accumulator.number].args[0]], index, j)
                for position, value in outputs:
                    self.store(position, values[value], lane_offsets[len(module.loads) + position])

            self.each_lane(unit, lane)

        return _Bodies(scanning if scans else None, body)

    # -- loops --

    def range_loop(
        self, groups: list[_Group], bases: list[ir.Value], begin: ir.Value, end: ir.Value, segment: Callable
    ) -> None:
        """Elements ``[begin, end)`` (C order over ``groups``), in segments along the last group:
        ``segment(inner group, bases, index of the segment's start, first, last)`` runs each."""
        b = self.b
        if not groups:
            groups = [_Group(1, (0,) * len(self.operands), (None,) * len(self.operands))]
        inner, outer = groups[-1], groups[:-1]
        if not outer:
            segment(inner, bases, ir.Constant(I64, 0), begin, end)
            return
        length = ir.Constant(I64, inner.extent)
        position = self.variable(I64)
        b.store(begin, position)

        def one_segment() -> None:
            start = b.load(position)
            segment_number = b.udiv(start, length)
            segment_start = b.mul(segment_number, length)
            first = b.sub(start, segment_start)
            last = b.add(first, b.sub(end, start))
            last = b.select(b.icmp_signed("<", last, length), last, length)
            rest, segment_bases = segment_number, list(bases)
            for group in reversed(outer):
                extent = ir.Constant(I64, group.extent)
                index = b.urem(rest, extent)
                rest = b.udiv(rest, extent)
                segment_bases = [
                    self.advance(base, index, stride, wrap)
                    for base, stride, wrap in zip(segment_bases, group.strides, group.wraps, strict=True)
                ]
            segment(inner, segment_bases, segment_start, first, last)
            b.store(b.add(start, b.sub(last, first)), position)

        while_loop(b, lambda: b.icmp_signed("<", b.load(position), end), one_segment)

    def advance(self, base: ir.Value, index: ir.Value, stride: Stride, wrap: Wrap = None) -> ir.Value:
        """The offset ``index`` steps of ``stride`` past ``base``; with a wrap, past the position
        the index wraps to (an index below the modulus: one compare)."""
        b = self.b
        if wrap is not None:
            start, modulus = wrap
            index = b.add(index, ir.Constant(I64, start))
            past = b.icmp_signed(">=", index, ir.Constant(I64, modulus))
            index = b.select(past, b.sub(index, ir.Constant(I64, modulus)), index)
        if isinstance(stride, int):
            return base if stride == 0 else b.add(base, b.mul(index, ir.Constant(I64, stride)))
        return b.add(base, b.mul(index, stride))

    def segment_loop(
        self,
        inner: _Group,
        bases: list[ir.Value],
        first: ir.Value,
        last: ir.Value,
        element: Callable[[ir.Value, list[ir.Value]], None],
    ) -> None:
        """``element(k, offsets)`` for elements ``[first, last)`` along ``inner``. Where an operand
        wraps along it, in runs between the points where one wraps: each run's offsets step
        evenly, so its loop vectorizes as any other."""
        b = self.b

        def run(lower: ir.Value, upper: ir.Value, run_bases: list[ir.Value]) -> None:
            def at(k: ir.Value) -> None:
                element(
                    k,
                    [
                        self.advance(base, k, stride)
                        for base, stride in zip(run_bases, inner.strides, strict=True)
                    ],
                )

            counted_loop(b, lower, upper, at)

        if not any(inner.wraps):
            run(first, last, bases)
            return
        points = sorted({modulus - start for start, modulus in filter(None, inner.wraps)})
        cursor = self.variable(I64)
        b.store(first, cursor)

        def next_run() -> None:
            lower = b.load(cursor)
            upper = last
            for point in (ir.Constant(I64, point) for point in points):
                inside = b.and_(b.icmp_signed("<", lower, point), b.icmp_signed("<", point, upper))
                upper = b.select(inside, point, upper)
            run_bases = []
            for base, stride, wrap in zip(bases, inner.strides, inner.wraps, strict=True):
                if wrap is None:
                    run_bases.append(base)
                    continue
                start, modulus = wrap  # the run lies before its wrap point or after it
                past = b.icmp_signed(">=", lower, ir.Constant(I64, modulus - start))
                shift = b.select(past, ir.Constant(I64, start - modulus), ir.Constant(I64, start))
                run_bases.append(self.advance(base, shift, stride))
            run(lower, upper, run_bases)
            b.store(upper, cursor)

        while_loop(b, lambda: b.icmp_signed("<", b.load(cursor), last), next_run)

    def elements(self, bodies: _Bodies, accumulators: list[_Accumulator], unit: _Unit | None) -> Callable:
        """A segment of ``range_loop`` run element by element, in blocks where a sum is pairwise or a
        row has scans (then two loops over each block: the scans, then the rest)."""
        b = self.b

        def segment(inner: _Group, bases: list[ir.Value], start: ir.Value, first: ir.Value, last: ir.Value):
            def elementwise(body: Callable, lower: ir.Value) -> Callable[[ir.Value, list[ir.Value]], None]:
                def element(k: ir.Value, offsets: list[ir.Value]) -> None:
                    body(b.add(start, k), offsets, b.sub(k, lower))

                return element

            if bodies.scanning is None and not any(accumulator.pairwise for accumulator in accumulators):
                self.segment_loop(inner, bases, first, last, elementwise(bodies.rest, first))
                return
            block_start = self.variable(I64)
            b.store(first, block_start)

            def block() -> None:
                lower = b.load(block_start)
                upper = b.add(lower, ir.Constant(I64, BLOCK))
                upper = b.select(b.icmp_signed("<", upper, last), upper, last)
                if bodies.scanning is not None:
                    self.segment_loop(inner, bases, lower, upper, elementwise(bodies.scanning, lower))
                for accumulator in accumulators:
                    accumulator.start_block(unit)
                self.segment_loop(inner, bases, lower, upper, elementwise(bodies.rest, lower))
                for accumulator in accumulators:
                    accumulator.end_block(unit)
                b.store(upper, block_start)

            while_loop(b, lambda: b.icmp_signed("<", b.load(block_start), last), block)

        return segment

    # -- units: rows, or chunks of columns --

    def groups(self, axes: list[int]) -> list[_Group]:
        operands = self.operands
        return coalesce(
            axes, self.module.shape, [operand.strides for operand in operands], [o.wraps for o in operands]
        )

    def row_bases(self, row: ir.Value) -> list[ir.Value]:
        bases = [ir.Constant(I64, 0)] * len(self.operands)
        rest = row
        for axis in reversed(self.module.kept_axes):
            extent = self.module.shape[axis]
            if extent == 1:
                continue
            index = self.b.urem(rest, ir.Constant(I64, extent))
            rest = self.b.udiv(rest, ir.Constant(I64, extent))
            bases = [
                self.advance(base, index, operand.strides[axis], operand.wraps[axis])
                for base, operand in zip(bases, self.operands, strict=True)
            ]
        return bases

    def each_unit(self, begin: ir.Value, end: ir.Value, work: Callable[[_Unit], None]) -> None:
        """Kept elements ``[begin, end)``, a unit at a time: row by row, or in chunks of columns."""
        if not self.module.columns:
            counted_loop(self.b, begin, end, lambda row: work(_Unit(row, self.row_bases(row))))
            return
        b = self.b
        chunk_start = self.variable(I64)

        def segment(inner: _Group, bases: list[ir.Value], start: ir.Value, first: ir.Value, last: ir.Value):
            b.store(first, chunk_start)

            def chunk() -> None:
                lower = b.load(chunk_start)
                upper = b.add(lower, ir.Constant(I64, self.module.lanes))
                upper = b.select(b.icmp_signed("<", upper, last), upper, last)
                chunk_bases = [
                    self.advance(base, lower, stride)
                    for base, stride in zip(bases, inner.strides, strict=True)
                ]
                work(_Unit(b.add(start, lower), chunk_bases, b.sub(upper, lower), inner.strides))
                b.store(upper, chunk_start)

            while_loop(b, lambda: b.icmp_signed("<", b.load(chunk_start), last), chunk)

        zeros = [ir.Constant(I64, 0)] * len(self.operands)
        self.range_loop(self.groups(self.module.kept_axes), zeros, begin, end, segment)

    def settle(self, unit: _Unit, stage: int, accumulators: list[_Accumulator]) -> None:
        """Between passes, per lane: hold the results of the reductions that ended, compute the row
        values of ``stage``, and after the last pass write the row outputs."""
        numbers = [
            number
            for number, inst in enumerate(self.module.instructions)
            if inst.row and inst.stage == stage and inst.op.kind in (OpKind.BUFFER, OpKind.ELEMENTWISE)
        ]
        writes = stage == self.module.kernel.passes
        if not (accumulators or numbers or writes):
            return

        def lane(j: ir.Value | None) -> None:
            values = self.row_values(j)
            offsets = self.lane_offsets(unit, j, unit.bases)
            for accumulator in accumulators:
                values[accumulator.number] = accumulator.result_value(j)
                self.keep(accumulator.number, values[accumulator.number], j)
            for number in numbers:
                values[number] = self.compute(number, values, offsets)
                self.keep(number, values[number], j)
            for position, out in enumerate(self.module.kernel.outputs):
                if writes and out.row:
                    self.store(position, values[out.value], offsets[len(self.module.loads) + position])

        self.each_lane(unit, lane)

    def accumulators(self, stage: int) -> list[_Accumulator]:
        return [_Accumulator(self, number) for number in self.module.accumulating(stage)]

    def run_pass(self, stage: int, unit: _Unit, begin: ir.Value, end: ir.Value) -> list[_Accumulator]:
        """Reduced elements ``[begin, end)`` of a unit's rows, in pass ``stage``."""
        accumulators = self.accumulators(stage)
        for accumulator in accumulators:
            accumulator.start(unit)
        self.start_scans(stage, unit)
        body = self.element_body(stage, accumulators, unit)
        self.range_loop(
            self.groups(self.module.reduce_axes),
            unit.bases,
            begin,
            end,
            self.elements(body, accumulators, unit),
        )
        for accumulator in accumulators:
            accumulator.finish(unit)
        return accumulators

    def start_scans(self, stage: int, unit: _Unit) -> None:
        """Each scan computed in pass ``stage`` starts each row from its op's identity: its own
        stage's pass, and a later pass that computes it again (a scan's values read after a
        reduction of them: ``std(cumsum(x))``)."""
        computed = set(self.module.needed(stage))
        for number in self.module.scans:
            inst = self.module.instructions[number]
            if number not in computed:
                continue
            if number not in self.running:
                self.running[number] = self.lane_variable(inst.dtype)
            identity = self.scalars.const(inst.dtype, scan_identity(inst))
            start = to_memory(self.b, identity, inst.dtype)
            self.each_lane(
                unit,
                lambda j, number=number, start=start: self.b.store(start, self.at(self.running[number], j)),
            )

    def entry(self) -> None:
        begin, end = self.arguments
        if not self.module.reduce_axes:
            groups = self.groups(list(range(len(self.module.shape))))
            body = self.element_body(None, [], None)
            zeros = [ir.Constant(I64, 0)] * len(self.operands)
            self.range_loop(groups, zeros, begin, end, self.elements(body, [], None))
            self.end_function()
            return
        everything = ir.Constant(I64, self.module.row_elements)

        def work(unit: _Unit) -> None:
            self.settle(unit, 0, [])
            for stage in range(self.module.kernel.passes):
                self.settle(unit, stage + 1, self.run_pass(stage, unit, ir.Constant(I64, 0), everything))

        self.each_unit(begin, end, work)
        self.end_function()

    def state_cell(self, states: ir.Value, index: ir.Value, value_type: ir.Type) -> ir.Value:
        return self.b.bitcast(self.b.gep(states, [index]), value_type.as_pointer())

    def first_state_cell(self, unit: _Unit, lane: ir.Value | None, first: ir.Value) -> ir.Value:
        """Where the state of a lane's row starts, in states of rows from ``first`` on."""
        row = unit.first if lane is None else self.b.add(unit.first, lane)
        return self.b.mul(self.b.sub(row, first), ir.Constant(I64, self.module.state_cells))

    def partial(self) -> None:
        first, last, begin, end, states = self.arguments
        b = self.b

        def work(unit: _Unit) -> None:
            self.settle(unit, 0, [])
            accumulators = self.run_pass(0, unit, begin, end)

            def save(lane: ir.Value | None) -> None:
                cell = self.first_state_cell(unit, lane, first)
                for position, accumulator in enumerate(accumulators):
                    value_cell = b.add(cell, ir.Constant(I64, 2 * position))
                    value_type = storage_type(accumulator.dtype)
                    b.store(
                        b.load(self.at(accumulator.value, lane)),
                        self.state_cell(states, value_cell, value_type),
                    )
                    if accumulator.index is not None:
                        index_cell = b.add(value_cell, ir.Constant(I64, 1))
                        b.store(
                            b.load(self.at(accumulator.index, lane)), self.state_cell(states, index_cell, I64)
                        )

            self.each_lane(unit, save)

        self.each_unit(first, last, work)
        self.end_function()

    def finish(self) -> None:
        first, last, states, count = self.arguments
        b = self.b
        part_cells = b.mul(b.sub(last, first), ir.Constant(I64, self.module.state_cells))

        def work(unit: _Unit) -> None:
            self.settle(unit, 0, [])
            accumulators = self.accumulators(0)

            def combine(lane: ir.Value | None) -> None:
                cell = self.first_state_cell(unit, lane, first)

                def state(part: ir.Value, position: int) -> tuple[ir.Value, ir.Value | None]:
                    value_cell = b.add(b.add(b.mul(part, part_cells), cell), ir.Constant(I64, 2 * position))
                    value_type = storage_type(accumulators[position].dtype)
                    value = b.load(self.state_cell(states, value_cell, value_type))
                    if accumulators[position].index is None:
                        return value, None
                    index_cell = b.add(value_cell, ir.Constant(I64, 1))
                    return value, b.load(self.state_cell(states, index_cell, I64))

                for position, accumulator in enumerate(accumulators):
                    value, index = state(ir.Constant(I64, 0), position)
                    b.store(value, self.at(accumulator.value, lane))
                    if index is not None:
                        b.store(index, self.at(accumulator.index, lane))

                def combine_part(part: ir.Value) -> None:
                    for position, accumulator in enumerate(accumulators):
                        value, index = state(part, position)
                        target = self.at(accumulator.value, lane)
                        accumulator.combine(target, from_memory(b, value, accumulator.dtype), index, lane)

                counted_loop(b, ir.Constant(I64, 1), count, combine_part)

            self.each_lane(unit, combine)
            self.settle(unit, 1, accumulators)

        self.each_unit(first, last, work)
        self.end_function()


def reads_columns(kernel: Kernel) -> bool:
    """Whether a reducing kernel runs in column mode: its innermost axis (of extent above 1) is
    kept, no load steps through memory fastest along a reduced axis, and the kept axes inside the
    reduced ones hold enough columns (``MIN_COLUMNS``, or ``MIN_COLUMN_BYTES`` of the widest load).
    Then memory is read in order by walking the reduced axes outside and the columns inside, as
    NumPy's axis-0 sum does; row by row, each row would be read with a stride."""
    moving = [axis for axis, extent in enumerate(kernel.shape) if extent > 1]
    if not kernel.reduce_axes or not moving or moving[-1] in kernel.reduce_axes:
        return False
    if any(dict(inst.params)["fastest"] in kernel.reduce_axes for inst in kernel.inputs):
        return False
    if any(dict(inst.params).get("wraps") for inst in kernel.inputs):  # a column's lanes step evenly
        return False
    if any(out.strided for out in kernel.outputs):  # its rows' lanes are stored a chunk at a time
        return False
    columns = int(np.prod(kernel.shape[max(kernel.reduce_axes) + 1 :]))
    widest = max((inst.dtype.itemsize for inst in kernel.inputs), default=1)
    return columns >= MIN_COLUMNS or columns * widest >= MIN_COLUMN_BYTES


def generate(kernel: Kernel, split: bool = False) -> tuple[ir.Module, Layout]:
    """The LLVM module of ``kernel`` (its ENTRY; with ``split``, its PARTIAL and FINISH) and what
    its launcher must pass."""
    builder = _KernelModule(kernel)
    module = builder.build(split)
    return module, builder.layout()
