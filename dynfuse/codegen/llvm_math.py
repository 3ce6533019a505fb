"""exp, log, tanh and pow families as branch-free LLVM IR, so the loop vectorizer can widen them.

A call to libm inside a loop keeps the loop scalar, and LLVM's vector math libraries are not
reachable through llvmlite's pass builder. Here each function is built from arithmetic, bit
operations and selects: the classic range reductions (``x = n·ln2 + r`` for the exponentials,
``x = 2^k·m`` for the logarithms) and Taylor series on the reduced argument, long enough for the
precision asked for. Everything is computed in double: float32 results are double results rounded
once, so they are correctly rounded but for rare ties (as glibc's ``expf``/``logf`` are), and float64
results stay within about an ulp. NaN, ±inf, -0.0, overflow, underflow to subnormals and domain
errors give what C's libm gives.

pow(x, y) is exp(y·log|x|), with C99's cases around it (``pow(x, 0)`` and ``pow(1, y)`` are 1 even
for NaN, odd integer powers keep the sign of x, negative x to a non-integer power is NaN). For
float64 the logarithm must hold about 64 bits, since y·log|x| up to 709 scales its error into the
result: its leading terms and every rounding's error are carried as double-double (exact products
and sums by fused multiply-add and TwoSum), and the product's error joins exp's reduced argument.
float32 needs none of it: the double exp and log are far more precise than its result.

Each function is defined once per module as an internal ``alwaysinline`` function, so a kernel's
loop sees only arithmetic after inlining.

sin, cos and tan are guarded: their core reduces x by multiples of pi/2 held to 152 bits, exact enough
below |x| = 2^20, where the remainder of a double never cancels past 2^-61 of x; beyond it (and at
infinities) the reduction needs a table of 2/pi's bits indexed by the exponent (Payne and Hanek),
which would keep a loop scalar, so libm computes those. A branch per element keeps a loop scalar
too, so each is a function LLVM does not inline, with vector variants that its loop vectorizer
calls in the function's stead (LLVM's vector function ABI: the scalar function's
``vector-function-abi-variant`` attribute names them): a variant computes the core on every lane and
branches to libm only when some lane needs it, which real data almost never asks for.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from decimal import Context, Decimal, getcontext, localcontext

import numpy as np
from llvmlite import ir

from .common import LOG2_E, LOG10_E

I32, I64 = ir.IntType(32), ir.IntType(64)
FLOAT, DOUBLE = ir.FloatType(), ir.DoubleType()

FUNCTIONS = frozenset(
    {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sinh", "cosh"}
    | {"arcsinh", "arccosh", "arctanh", "cbrt", "arctan", "arcsin", "arccos"}
)
BINARY_FUNCTIONS = frozenset({"power", "arctan2", "hypot"})
GUARDED = frozenset({"sin", "cos", "tan"})  # the core where it serves, libm's past it
INLINE = FUNCTIONS | BINARY_FUNCTIONS | GUARDED  # every op the generator computes here
# The vector widths LLVM's loop vectorizer may choose for a loop calling a guarded function: each
# gets its variant (a width without one would call the scalar function lane by lane)
VARIANT_LANES = (4, 8)
_VARIANT_NAME = re.compile(r"dynfuse\.\w+\.f(32|64)\.v\d+")
_FUNCTION_NAME = re.compile(r"dynfuse\.\w+\.f(32|64)(\.half)?")


def _split(value: Decimal) -> tuple[float, float]:
    """``value`` as hi + lo, hi with 24 trailing zero bits so that hi times any |n| < 2^24 is exact."""
    rounded = np.float64(float(value))
    hi = float((rounded.view(np.int64) & ~np.int64((1 << 24) - 1)).view(np.float64))
    return hi, float(value - Decimal(hi))


# In a context of its own: this module is imported by the first kernel generated, on whichever
# thread, and that thread's decimal context is the program's.
with localcontext(Context(prec=50)):
    _LN2 = Decimal(2).ln()
    LN2_HI, LN2_LO = _split(_LN2)
    LOG10_2_HI, LOG10_2_LO = _split(_LN2 / Decimal(10).ln())
SQRT_HALF_BITS = int(np.float64(math.sqrt(0.5)).view(np.int64))
ROUNDING_SHIFTER = 1.5 * 2.0**52  # adding it rounds a double below 2^51 to an integer, in the low bits


def _pair(value: Decimal) -> tuple[float, float]:
    """``value`` as a double and the double nearest what that leaves."""
    high = float(value)
    return high, float(value - Decimal(high))


# pow's float64 logarithm, log(m) = 2s + (2/3)s^3 + s^5·(2/5 + 2s^2/7 + ...) with s = (m-1)/(m+1):
# 2/3 as hi + lo, and the tail's terms, enough for 2^-66 of log(m) where |s| <= 0.1716.
with localcontext(Context(prec=50)):
    TWO_THIRDS_HI, TWO_THIRDS_LO = _pair(Decimal(2) / 3)
_ATANH_TAIL = [2.0 / (2 * j + 1) for j in range(2, 13)]


def _decimal_arctan(value: Decimal) -> Decimal:
    """arctan in the context's precision: halved twice (arctan v = 2·arctan(v / (1 + sqrt(1 + v^2))))
    so that the series converges in a few dozen terms."""
    if value > Decimal("0.2"):
        return 2 * _decimal_arctan(value / (1 + (1 + value * value).sqrt()))
    total, power, square, k = Decimal(0), value, value * value, 0
    while True:
        term = power / (2 * k + 1)
        if abs(term) < Decimal(10) ** -(getcontext().prec + 5):
            return total
        total += -term if k % 2 else term
        power *= square
        k += 1


# arctan's reduction: |t| <= 1 is split at the nearest c of 1/4, ..., 1 (0 below 1/4), and arctan t
# is arctan c + arctan((t - c)/(1 + t·c)), whose argument is at most 1/4. Per c: arctan c, and
# pi/2 - arctan c (where the argument was inverted), each as hi + lo; pi as hi + lo.
with localcontext(Context(prec=50)):
    _QUARTER_PI = _decimal_arctan(Decimal(1))
    PI = _pair(4 * _QUARTER_PI)
    ARCTAN_CENTERS = [k / 4 for k in range(5)]
    ARCTAN_OF_CENTERS = [_pair(_decimal_arctan(Decimal(c))) for c in ARCTAN_CENTERS]
    COMPLEMENTS_OF_CENTERS = [_pair(2 * _QUARTER_PI - _decimal_arctan(Decimal(c))) for c in ARCTAN_CENTERS]


def _parts(value: Decimal, widths: Sequence[int]) -> list[float]:
    """``value`` as a sum of doubles of ``widths`` significant bits each, the largest first."""
    parts = []
    for width in widths:
        exponent = math.frexp(float(value))[1]
        scaled = (value * Decimal(2) ** (width - exponent)).to_integral_value()
        parts.append(math.ldexp(float(scaled), exponent - width))  # exact: fewer than 54 bits
        value -= Decimal(parts[-1])
    return parts


# sin, cos and tan: x = n·pi/2 + r, pi/2 as four parts whose first three have 33 bits, so that n·part is
# exact for |n| < 2^20 (x below TRIG_LIMIT), the fourth the 53 bits after them. Below TRIG_TINY,
# sin x is x and cos x is 1 to the last bit. Series to x^17 and x^18: 2^-62 of the result at pi/4.
with localcontext(Context(prec=60)):
    _HALF_PI = 2 * _decimal_arctan(Decimal(1))
    HALF_PI_PARTS = _parts(_HALF_PI, (33, 33, 33, 53))
    TWO_OVER_PI = float(1 / _HALF_PI)
TRIG_LIMIT, TRIG_TINY = 2.0**20, 2.0**-27
with localcontext(Context(prec=50)):
    MINUS_SIXTH = _pair(Decimal(-1) / 6)
_SINE_SERIES = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(2, 9)]  # x^5/5!, ..., x^17/17!
_COSINE_SERIES = [(-1.0) ** k / math.factorial(2 * k) for k in range(2, 10)]  # x^4/4!, ..., x^18/18!
_SINH_SERIES = [1.0 / math.factorial(2 * j + 1) for j in range(1, 10)]  # x^3/3!, ...: 2^-56 of x below 1
_ARCTAN_SERIES = [(-1.0) ** j / (2 * j + 1) for j in range(1, 15)]  # t^3, t^5, ...: 2^-56 of t at 1/4

# Terms of the series, per result precision: enough that the truncation error stays below 2^-54
# of the result for float64 and below 2^-35 for float32 (whose result is one rounding of the double).
_EXPM1_DEGREE = {FLOAT: 9, DOUBLE: 13}  # expm1(r) = r + r^2/2! + ... on |r| <= ln2/2
_ATANH_TERMS = {FLOAT: 7, DOUBLE: 9}  # log(1+f) = 2 atanh(s) = 2s + 2s^3/3 + ... on |s| <= 0.1716

# Below and above these, exp (and exp2, expm1) is 0 (or -1) and inf at the precision: clamping the
# argument there keeps the reduction's integers small without changing any result.
_EXP_RANGE = {FLOAT: (-104.0, 89.0), DOUBLE: (-746.0, 710.0)}
_EXP2_RANGE = {FLOAT: (-151.0, 129.0), DOUBLE: (-1076.0, 1025.0)}


def call(
    module: ir.Module, builder: ir.IRBuilder, name: str, *arguments: ir.Value, for_half: bool = False
) -> ir.Value:
    """``name(*arguments)`` for float or double arguments, through the module's definition of it.

    ``for_half``: the float result will be rounded again, to float16. LLVM's instruction selection
    would merge the two roundings into one call to ``__truncdfhf2``, which the JIT cannot resolve
    (and which rounds once where NumPy rounds twice); a fence keeps them apart, at the cost of
    vectorizing, which float16 loops do not get anyway.
    """
    value_type = arguments[0].type
    symbol = f"dynfuse.{name}.{'f32' if value_type == FLOAT else 'f64'}{'.half' if for_half else ''}"
    function = module.globals.get(symbol)
    if function is None:
        if name in GUARDED and not for_half:
            variants = [
                _define(module, f"{symbol}.v{lanes}", name, ir.VectorType(value_type, lanes))
                for lanes in VARIANT_LANES
            ]
            function = _define(module, symbol, name, value_type, variants)
        else:
            function = _define(module, symbol, name, value_type, for_half=for_half)
            function.attributes.add("alwaysinline")
    return builder.call(function, list(arguments))


class _Attributes(ir.FunctionAttributes):
    """llvmlite's function attributes, with LLVM's string attributes (``"key"="value"``), which
    llvmlite does not write."""

    def __init__(self, strings: dict[str, str]) -> None:
        super().__init__()
        self.strings = strings

    def _to_list(self, ret_type: ir.Type) -> list[str]:
        return [*super()._to_list(ret_type), *(f'"{key}"="{value}"' for key, value in self.strings.items())]


def _define(
    module: ir.Module,
    symbol: str,
    name: str,
    value_type: ir.Type,
    variants: Sequence[ir.Function] = (),
    for_half: bool = False,
) -> ir.Function:
    """The internal function ``symbol`` computing ``name`` on ``value_type``: a float or a double,
    or a vector of them (a guarded function's vector variant, which LLVM inlines once its loop
    vectorizer has called it). ``variants``: those the loop vectorizer calls in this function's
    stead, which LLVM must therefore not inline."""
    lanes = getattr(value_type, "count", None)
    precision = getattr(value_type, "element", value_type)
    arity = 2 if name in BINARY_FUNCTIONS else 1
    function = ir.Function(module, ir.FunctionType(value_type, [value_type] * arity), symbol)
    function.linkage = "internal"
    if variants:
        mangled = ",".join(f"_ZGV_LLVM_N{v.ftype.return_type.count}v_{symbol}({v.name})" for v in variants)
        function.attributes = _Attributes({"vector-function-abi-variant": mangled})
        function.attributes.add("noinline")
    elif lanes is not None:
        function.attributes.add("alwaysinline")
    function.attributes.add("nounwind")
    if variants or lanes is not None:
        function.attributes.add("readnone")  # libm's errno aside, which nothing reads
    wide_type = DOUBLE if lanes is None else ir.VectorType(DOUBLE, lanes)
    body = ir.IRBuilder(function.append_basic_block("entry"))
    wide = [
        argument if precision == DOUBLE else body.fpext(argument, wide_type) for argument in function.args
    ]
    result = getattr(_Emitter(module, body, precision, lanes), name)(*wide)
    if precision == FLOAT:
        result = body.fptrunc(result, value_type)
        if for_half:
            signature = ir.FunctionType(FLOAT, [FLOAT])
            result = body.call(
                module.declare_intrinsic("llvm.arithmetic.fence", [FLOAT], signature), [result]
            )
    body.ret(result)
    return function


def prepare_for_vectorizer(module: ir.Module) -> None:
    """Keep the module's vector variants to the loop vectorizer: nothing calls them before it does,
    and unused internal functions are deleted first (``llvm.compiler.used`` keeps them). Where the
    module computes a function defined here, its entry points prefer the widest vectors: LLVM's
    cost model keeps to 256 bits on CPUs with AVX-512, but a function's work is arithmetic on
    registers, which 512 bits do twice as much of a cycle (float64 cos took 5.5 ns an element in
    256-bit vectors, 4.1 in 512; exp 2.9 and 1.6, one thread; where the CPU has no wider vectors,
    nothing changes). A kernel of cheap ops is bound by memory either way, and keeps LLVM's choice."""
    variants = [f for f in module.functions if _VARIANT_NAME.fullmatch(f.name)]
    if variants:
        pointer = ir.IntType(8).as_pointer()
        kept = ir.GlobalVariable(module, ir.ArrayType(pointer, len(variants)), "llvm.compiler.used")
        kept.linkage = "appending"
        kept.section = "llvm.metadata"
        kept.initializer = ir.Constant(kept.value_type, variants)
    if any(_FUNCTION_NAME.fullmatch(f.name) for f in module.functions):
        for function in module.functions:
            if function.linkage != "internal" and function.blocks:  # the kernel's entry points
                attributes = _Attributes({"prefer-vector-width": "512"})
                for attribute in function.attributes:
                    attributes.add(attribute)
                function.attributes = attributes


def _bits(value: float) -> int:
    """A double's bits as an integer."""
    return int(np.float64(value).view(np.int64))


def stand_in(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """A float of magnitude in [1, 2) made of x's sign and mantissa bits, for the lanes of a case the
    code selects away to compute on in x's stead, raising no floating-point flag. Not a constant,
    nor of a known sign: LLVM would then move the arithmetic back onto x through the select, for
    every lane."""
    exponent = {32: 8, 64: 11, 16: 5}
    element = getattr(x.type, "element", x.type)  # of a vector, or the scalar type
    width = 32 if element == FLOAT else 64 if element == DOUBLE else 16
    mantissa = width - 1 - exponent[width]
    integer = ir.IntType(width) if element is x.type else ir.VectorType(ir.IntType(width), x.type.count)
    kept = ir.Constant(integer, (1 << (width - 1)) | ((1 << mantissa) - 1))
    one = ir.Constant(integer, ((1 << (exponent[width] - 1)) - 1) << mantissa)
    return b.bitcast(b.or_(b.and_(b.bitcast(x, integer), kept), one), x.type)


class _Emitter:
    """Builds one function's body in double, with the series lengths of the result's precision; on
    vectors of ``lanes`` doubles where given (the guarded functions' vector variants)."""

    def __init__(
        self, module: ir.Module, builder: ir.IRBuilder, precision: ir.Type, lanes: int | None = None
    ) -> None:
        self.module = module
        self.b = builder
        self.precision = precision
        self.lanes = lanes
        self.double = DOUBLE if lanes is None else ir.VectorType(DOUBLE, lanes)
        self.int64 = I64 if lanes is None else ir.VectorType(I64, lanes)

    # -- small pieces --

    def const(self, value: float) -> ir.Constant:
        return ir.Constant(self.double, value)

    def integer(self, value: int) -> ir.Constant:
        return ir.Constant(self.int64, value)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        symbol = f"{name}.{'f64' if self.lanes is None else f'v{self.lanes}f64'}"  # llvmlite names no vectors
        function = self.module.globals.get(symbol) or ir.Function(
            self.module, ir.FunctionType(self.double, [self.double] * len(args)), symbol
        )
        return self.b.call(function, list(args))

    def multiply_add(self, a: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        """a·x + y, fused where the CPU has FMA (the series are accurate either way)."""
        return self.intrinsic("llvm.fmuladd", a, x, y)

    def horner(self, x: ir.Value, coefficients: list[float]) -> ir.Value:
        """c0 + c1·x + c2·x^2 + ..., coefficients lowest first."""
        result = self.const(coefficients[-1])
        for coefficient in reversed(coefficients[:-1]):
            result = self.multiply_add(result, x, self.const(coefficient))
        return result

    def clamp(self, x: ir.Value, low: float, high: float) -> ir.Value:
        """NaN passes through (both comparisons are false)."""
        b = self.b
        x = b.select(b.fcmp_ordered("<", x, self.const(low)), self.const(low), x)
        return b.select(b.fcmp_ordered(">", x, self.const(high)), self.const(high), x)

    def power_of_two(self, n: ir.Value) -> ir.Value:
        """2^n for an integer n in the normal range of double."""
        return self.b.bitcast(self.b.shl(self.b.add(n, self.integer(1023)), self.integer(52)), DOUBLE)

    def scale(self, y: ir.Value, n: ir.Value) -> ir.Value:
        """y·2^n in two steps, so that results that overflow or fall to subnormals round once."""
        b = self.b
        half = b.sub(b.lshr(b.add(n, self.integer(2048)), self.integer(1)), self.integer(1024))
        return b.fmul(b.fmul(y, self.power_of_two(half)), self.power_of_two(b.sub(n, half)))

    def special(self, x: ir.Value, cases: list[tuple[ir.Value, ir.Value]], result: ir.Value) -> ir.Value:
        """The first case whose condition holds, else ``result``; NaN arguments give themselves."""
        b = self.b
        for condition, value in reversed(cases):
            result = b.select(condition, value, result)
        return b.select(b.fcmp_unordered("uno", x, x), x, result)

    # -- the exponentials --

    def reduce(self, x: ir.Value, base_two: bool) -> tuple[ir.Value, ir.Value]:
        """n (i64) and r with x = n + r/ln2 (base two) or x = n·ln2 + r, |r| <= ln2/2 (or a hair more)."""
        b = self.b
        low, high = (_EXP2_RANGE if base_two else _EXP_RANGE)[self.precision]
        x = self.clamp(x, low, high)
        shifter = self.const(ROUNDING_SHIFTER)
        scaled = x if base_two else b.fmul(x, self.const(LOG2_E))
        shifted = b.fadd(scaled, shifter)
        n = b.sub(b.bitcast(shifted, I64), b.bitcast(shifter, I64))
        nearest = b.fsub(shifted, shifter)
        if base_two:
            return n, b.fmul(b.fsub(x, nearest), self.const(float(_LN2)))
        reduced = b.fsub(x, b.fmul(nearest, self.const(LN2_HI)))  # exact: n·LN2_HI is
        return n, self.multiply_add(b.fneg(nearest), self.const(LN2_LO), reduced)

    def expm1_series(self, r: ir.Value) -> ir.Value:
        """expm1(r) = r + r^2·(1/2! + r/3! + ...), accurate relative to r."""
        degree = _EXPM1_DEGREE[self.precision]
        tail = self.horner(r, [1.0 / math.factorial(k) for k in range(2, degree + 1)])
        return self.multiply_add(self.b.fmul(r, r), tail, r)

    def exponential(self, x: ir.Value, base_two: bool) -> ir.Value:
        n, r = self.reduce(x, base_two)
        result = self.scale(self.b.fadd(self.const(1.0), self.expm1_series(r)), n)
        return self.special(x, [], result)

    def exp(self, x: ir.Value) -> ir.Value:
        return self.exponential(x, base_two=False)

    def exp_of_sum(self, high: ir.Value, low: ir.Value) -> ir.Value:
        """exp(high + low) for |low| far below an ulp of high: low joins the reduced argument."""
        n, r = self.reduce(high, base_two=False)
        return self.scale(self.b.fadd(self.const(1.0), self.expm1_series(self.b.fadd(r, low))), n)

    def exp2(self, x: ir.Value) -> ir.Value:
        return self.exponential(x, base_two=True)

    def expm1(self, x: ir.Value, never_positive: bool = False) -> ir.Value:
        """2^n·(p + 1 - 2^-n) for n > 0, 2^n·p + (2^n - 1) otherwise, p = expm1(r): each exact but
        for the last addition. ``never_positive``: x <= 0 is known, so n > 0 needs no code."""
        b = self.b
        n, r = self.reduce(x, base_two=False)
        p = self.expm1_series(r)
        one = self.const(1.0)
        result = b.fadd(self.scale(p, n), b.fsub(self.scale(one, n), one))
        if not never_positive:
            above = self.scale(b.fadd(p, b.fsub(one, self.scale(one, b.neg(n)))), n)
            result = b.select(b.icmp_signed(">", n, self.integer(0)), above, result)
        zero = b.fcmp_ordered("==", x, self.const(0.0))  # expm1(-0.0) is -0.0
        return self.special(x, [(zero, x)], result)

    def tanh(self, x: ir.Value) -> ir.Value:
        """tanh|x| = -t/(t + 2) with t = expm1(-2|x|), which stays in [-1, 0]; the sign of x."""
        b = self.b
        t = self.expm1(b.fmul(self.intrinsic("llvm.fabs", x), self.const(-2.0)), never_positive=True)
        magnitude = b.fdiv(b.fneg(t), b.fadd(t, self.const(2.0)))
        return self.special(x, [], self.intrinsic("llvm.copysign", magnitude, x))

    # -- the logarithms --

    def reduce_to_mantissa(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """k (as a double) and m, for positive finite x = 2^k·m with m in [sqrt(1/2), sqrt(2))."""
        b = self.b
        subnormal = b.fcmp_ordered("<", x, self.const(2.0**-1022))
        x = b.select(subnormal, b.fmul(x, self.const(2.0**54)), x)
        bits = b.bitcast(x, I64)
        k = b.ashr(b.sub(bits, self.integer(SQRT_HALF_BITS)), self.integer(52))
        m = b.bitcast(b.sub(bits, b.shl(k, self.integer(52))), DOUBLE)
        k = b.sub(k, b.select(subnormal, self.integer(54), self.integer(0)))
        return b.sitofp(b.trunc(k, I32), DOUBLE), m

    def log_parts(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """k (as a double) and log(m), for positive finite x = 2^k·m with m in [sqrt(1/2), sqrt(2))."""
        b = self.b
        k, m = self.reduce_to_mantissa(x)
        f = b.fsub(m, self.const(1.0))  # exact
        s = b.fdiv(f, b.fadd(f, self.const(2.0)))
        z = b.fmul(s, s)
        terms = _ATANH_TERMS[self.precision]
        series = b.fmul(z, self.horner(z, [2.0 / (2 * j + 1) for j in range(1, terms + 1)]))
        # log(1+f) = 2s + s·series, and 2s = f - s·f
        log_m = b.fsub(f, b.fmul(s, b.fsub(f, series)))
        return k, log_m

    def logarithm(self, x: ir.Value, result: ir.Value) -> ir.Value:
        """The domain's edges around ``result``: NaN below zero, -inf at zero, inf at inf."""
        b = self.b
        zero, infinity = self.const(0.0), self.const(math.inf)
        return self.special(
            x,
            [
                (b.fcmp_ordered("<", x, zero), self.const(math.nan)),
                (b.fcmp_ordered("==", x, zero), self.const(-math.inf)),
                (b.fcmp_ordered("==", x, infinity), infinity),
            ],
            result,
        )

    def log_of_positive(self, x: ir.Value) -> ir.Value:
        """log(x) for positive finite x: k·ln2 + log(m), without the domain's edges."""
        k, log_m = self.log_parts(x)
        b = self.b
        return b.fadd(b.fmul(k, self.const(LN2_HI)), self.multiply_add(k, self.const(LN2_LO), log_m))

    def log(self, x: ir.Value) -> ir.Value:
        return self.logarithm(x, self.log_of_positive(x))

    def log2(self, x: ir.Value) -> ir.Value:
        k, log_m = self.log_parts(x)
        return self.logarithm(x, self.b.fadd(k, self.b.fmul(log_m, self.const(LOG2_E))))

    def log10(self, x: ir.Value) -> ir.Value:
        k, log_m = self.log_parts(x)
        b = self.b
        low = self.multiply_add(k, self.const(LOG10_2_LO), b.fmul(log_m, self.const(LOG10_E)))
        return self.logarithm(x, b.fadd(b.fmul(k, self.const(LOG10_2_HI)), low))

    def log1p(self, x: ir.Value) -> ir.Value:
        """log(u) + (x - (u - 1))/u with u = 1 + x rounded: the correction restores what rounding lost."""
        b = self.b
        one = self.const(1.0)
        u = b.fadd(one, x)
        correction = b.fdiv(b.fsub(x, b.fsub(u, one)), u)
        result = self.log(u)
        inside = b.and_(b.fcmp_ordered(">", u, self.const(0.0)), b.fcmp_ordered("<", u, self.const(math.inf)))
        result = b.select(inside, b.fadd(result, correction), result)
        # log1p(-0.0) is -0.0
        return self.special(x, [(b.fcmp_ordered("==", x, self.const(0.0)), x)], result)

    # -- hyperbolic functions and their inverses, from exp and log --

    def hyperbolic(self, x: ir.Value, odd: bool) -> ir.Value:
        """sinh (``odd``) or cosh. Below |x| = 22, from t = expm1|x| (sinh below 1 by its series):
        sinh|x| = (t + t/(t+1))/2 and
        cosh x = 1 + t^2/(2(t+1)), neither cancelling; above, e^|x|/2 = (t+1)/2, and past exp's
        range (e^(|x|/2)/2)·e^(|x|/2), finite as sinh and cosh are (to |x| = 710.47; 89.4 for
        float32)."""
        b = self.b
        magnitude = self.intrinsic("llvm.fabs", x)
        t = self.expm1(magnitude)
        one, half = self.const(1.0), self.const(0.5)
        if odd:  # below 1 the series, free of expm1's and the division's roundings
            near = b.fmul(b.fadd(t, b.fdiv(t, b.fadd(t, one))), half)
            square = b.fmul(magnitude, magnitude)
            series = self.multiply_add(
                b.fmul(magnitude, square), self.horner(square, _SINH_SERIES), magnitude
            )
            near = b.select(b.fcmp_ordered("<", magnitude, one), series, near)
        else:
            near = b.fadd(one, b.fdiv(b.fmul(t, t), b.fmul(b.fadd(t, one), self.const(2.0))))
        halfway = self.exp(b.fmul(magnitude, half))
        beyond = b.fmul(b.fmul(halfway, half), halfway)  # finite where e^|x| is not
        far = beyond
        if self.precision == DOUBLE:  # float's t is clamped short of its overflow: beyond serves
            infinite = b.fcmp_ordered("==", t, self.const(math.inf))
            far = b.select(infinite, beyond, b.fmul(b.fadd(t, one), half))
        result = b.select(b.fcmp_ordered("<", magnitude, self.const(22.0)), near, far)
        return self.special(x, [], self.intrinsic("llvm.copysign", result, x) if odd else result)

    def sinh(self, x: ir.Value) -> ir.Value:
        return self.hyperbolic(x, odd=True)

    def cosh(self, x: ir.Value) -> ir.Value:
        return self.hyperbolic(x, odd=False)

    def arcsinh(self, x: ir.Value) -> ir.Value:
        """log1p(a + a^2/(1 + sqrt(1 + a^2))) for a = |x| (no cancellation near 0), log(a) + ln2
        where a^2 would lose 1 entirely; the sign of x."""
        b = self.b
        a = self.intrinsic("llvm.fabs", x)
        square = b.fmul(a, a)
        root = self.intrinsic("llvm.sqrt", b.fadd(self.const(1.0), square))
        near = self.log1p(b.fadd(a, b.fdiv(square, b.fadd(self.const(1.0), root))))
        far = b.fadd(self.log(a), self.const(float(_LN2)))
        result = b.select(b.fcmp_ordered("<", a, self.const(2.0**28)), near, far)
        return self.special(x, [], self.intrinsic("llvm.copysign", result, x))

    def arccosh(self, x: ir.Value) -> ir.Value:
        """log1p(t + sqrt(2t + t^2)) with t = x - 1 (exact) below 2; log(2x - 1/(x + sqrt(x^2 - 1)))
        up to 2^28; log(x) + ln2 past it; NaN below 1."""
        b = self.b
        one, two = self.const(1.0), self.const(2.0)
        t = b.fsub(x, one)
        near = self.log1p(b.fadd(t, self.intrinsic("llvm.sqrt", self.multiply_add(t, t, b.fmul(t, two)))))
        root = self.intrinsic("llvm.sqrt", b.fsub(b.fmul(x, x), one))
        far = b.fcmp_ordered(">=", x, self.const(2.0**28))
        middle = b.fsub(b.fmul(x, two), b.fdiv(one, b.fadd(x, root)))
        result = self.log(b.select(far, x, middle))  # one log serves both
        result = b.fadd(result, b.select(far, self.const(float(_LN2)), self.const(0.0)))
        result = b.select(b.fcmp_ordered("<", x, two), near, result)
        return self.special(x, [(b.fcmp_ordered("<", x, one), self.const(math.nan))], result)

    def arctanh(self, x: ir.Value) -> ir.Value:
        """log1p(2a/(1 - a))/2 for a = |x|, below 1/2 as log1p(2a + 2a·a/(1 - a))/2 (1 - a is
        exact above it); ±inf at ±1, NaN past it."""
        b = self.b
        one, half = self.const(1.0), self.const(0.5)
        a = self.intrinsic("llvm.fabs", x)
        twice = b.fadd(a, a)
        rest = b.fsub(one, a)
        near = self.log1p(b.fadd(twice, b.fdiv(b.fmul(twice, a), rest)))
        far = self.log1p(b.fdiv(twice, rest))
        result = b.fmul(b.select(b.fcmp_ordered("<", a, half), near, far), half)
        result = b.select(b.fcmp_ordered("==", a, one), self.const(math.inf), result)
        result = b.select(b.fcmp_ordered(">", a, one), self.const(math.nan), result)
        return self.special(x, [], self.intrinsic("llvm.copysign", result, x))

    def cbrt(self, x: ir.Value) -> ir.Value:
        """exp(log|x|/3), then for float64 one Newton step y - (y^3 - a)/(3y^2), which squares its
        relative error: what the first guess lost to rounding (|log x|/3 up to 248) is gone; the
        sign of x."""
        b = self.b
        a = self.intrinsic("llvm.fabs", x)
        edge = b.or_(b.fcmp_ordered("==", a, self.const(0.0)), b.fcmp_ordered("==", a, self.const(math.inf)))
        # a subnormal |x| is scaled by 2^54 (its root by 2^18): y^3 - a would be subnormal too
        subnormal = b.fcmp_ordered("<", a, self.const(2.0**-1022))
        scaled = b.select(subnormal, b.fmul(a, self.const(2.0**54)), a)
        scaled = b.select(edge, stand_in(b, a), scaled)  # 0 and inf are themselves: no 0/0, no inf - inf
        result = self.exp(b.fmul(self.log(scaled), self.const(1.0 / 3.0)))
        if self.precision == DOUBLE:  # float32's result is far coarser than the guess's error
            excess = self.fma(b.fmul(result, result), result, b.fneg(scaled))
            result = b.fsub(result, b.fdiv(excess, b.fmul(b.fmul(result, result), self.const(3.0))))
        result = b.fmul(result, b.select(subnormal, self.const(2.0**-18), self.const(1.0)))
        return self.special(x, [(edge, x)], self.intrinsic("llvm.copysign", result, x))

    # -- sin, cos and tan: a core below TRIG_LIMIT, libm past it --

    def quarter_turns(self, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """n (i64) and r as high + low with x = n·pi/2 + r, |r| <= pi/4 (and a hair), for |x| below
        TRIG_LIMIT: x - n·P1 is exact (a multiple of 2^-53 below 1), and each later part's product,
        exact too, is taken off with the rounding's error kept (TwoSum), so that r holds 2^-70 of
        itself even where it cancels to 2^-61 of x."""
        b = self.b
        shifter = self.const(ROUNDING_SHIFTER)
        shifted = b.fadd(b.fmul(x, self.const(TWO_OVER_PI)), shifter)
        turns = b.sub(b.bitcast(shifted, self.int64), b.bitcast(shifter, self.int64))
        nearest = b.fsub(shifted, shifter)
        first, second, third, fourth = (self.const(part) for part in HALF_PI_PARTS)
        high = b.fsub(x, b.fmul(nearest, first))
        high, error = self.two_sum(high, b.fneg(b.fmul(nearest, second)))
        high, error_third = self.two_sum(high, b.fneg(b.fmul(nearest, third)))
        low = b.fsub(b.fadd(error, error_third), b.fmul(nearest, fourth))
        return (turns, *self.two_sum(high, low))

    def sine_and_cosine(
        self, high: ir.Value, low: ir.Value
    ) -> tuple[tuple[ir.Value, ir.Value], tuple[ir.Value, ir.Value]]:
        """sin and cos of high + low (|high| <= pi/4, low below its ulp), each as its leading terms
        (high - high^3/6, 1 - high^2/2, as double-double, every rounding's error kept) and the
        rest, far smaller, so that their sums are within about half an ulp."""
        b = self.b
        one = self.const(1.0)
        z = b.fmul(high, high)
        z_low = self.fma(high, high, b.fneg(z))  # high^2 = z + z_low exactly
        cube = b.fmul(high, z)
        cube_low = b.fadd(self.fma(high, z, b.fneg(cube)), b.fmul(high, z_low))
        sixth, sixth_low = (self.const(part) for part in MINUS_SIXTH)
        third = b.fmul(cube, sixth)  # -high^3/6
        third_low = b.fadd(
            self.fma(cube, sixth, b.fneg(third)), b.fadd(b.fmul(cube, sixth_low), b.fmul(cube_low, sixth))
        )
        sine, sine_error = self.two_sum(high, third)
        half = b.fmul(z, self.const(0.5))
        sine_rest = self.multiply_add(
            b.fmul(cube, z), self.horner(z, _SINE_SERIES), b.fmul(low, b.fsub(one, half))
        )  # cos(high) ≈ 1 - z/2 carries low
        leading = b.fsub(one, half)
        lost = b.fsub(b.fsub(b.fsub(one, leading), half), b.fmul(z_low, self.const(0.5)))  # exact, then z's
        cosine_rest = self.multiply_add(
            b.fmul(z, z), self.horner(z, _COSINE_SERIES), b.fneg(b.fmul(high, low))
        )
        return (sine, b.fadd(b.fadd(sine_error, third_low), sine_rest)), (leading, b.fadd(lost, cosine_rest))

    def circular(self, x: ir.Value, name: str) -> ir.Value:
        """sin, cos or tan of x by the quarter turn n of x = n·pi/2 + r: sin is sin r, cos r, -sin r
        or -cos r, cos x is sin(x + pi/2), and tan x is sin r / cos r for even n, -cos r / sin r
        for odd, divided as double-double (a quotient and its remainder's correction)."""
        b = self.b
        turns, high, low = self.quarter_turns(x)
        sine, cosine = self.sine_and_cosine(high, low)
        zero = self.integer(0)
        if name == "tan":
            odd = b.icmp_signed("!=", b.and_(turns, self.integer(1)), zero)
            sine, cosine = self.two_sum(*sine), self.two_sum(*cosine)  # each low part below an ulp
            top, top_low = (b.select(odd, c, s) for c, s in zip(cosine, sine, strict=True))
            bottom, bottom_low = (b.select(odd, s, c) for s, c in zip(sine, cosine, strict=True))
            quotient = b.fdiv(top, bottom)
            remainder = b.fsub(
                b.fadd(self.fma(b.fneg(quotient), bottom, top), top_low), b.fmul(quotient, bottom_low)
            )
            quotient = b.fadd(quotient, b.fdiv(remainder, bottom))
            return b.select(odd, b.fneg(quotient), quotient)
        if name == "cos":
            turns = b.add(turns, self.integer(1))
        sine, cosine = (b.fadd(*sine), b.fadd(*cosine))
        value = b.select(b.icmp_signed("!=", b.and_(turns, self.integer(1)), zero), cosine, sine)
        return b.select(b.icmp_signed("!=", b.and_(turns, self.integer(2)), zero), b.fneg(value), value)

    def guarded(self, name: str, x: ir.Value, small: ir.Value) -> ir.Value:
        """``name``'s core (``circular``) where |x| is below TRIG_LIMIT, ``small`` below TRIG_TINY
        and x itself for NaN, with each test on the bits (a float comparison with NaN may raise);
        libm's ``name`` where |x| is TRIG_LIMIT or more, called only when some lane needs it. Lanes
        the core does not serve compute on a stand-in, raising no flag."""
        b = self.b
        magnitude = b.and_(b.bitcast(x, self.int64), self.integer((1 << 63) - 1))

        def compared(sign: str, value: float) -> ir.Value:
            return b.icmp_unsigned(sign, magnitude, self.integer(_bits(value)))

        tiny, nan = compared("<", TRIG_TINY), compared(">", math.inf)
        beyond = b.and_(compared(">=", TRIG_LIMIT), compared("<=", math.inf))  # infinities too
        usual = b.not_(b.or_(b.or_(tiny, nan), beyond))
        core = self.circular(b.select(usual, x, stand_in(b, x)), name)
        result = b.select(nan, x, b.select(tiny, small, core))
        if self.lanes is None:
            any_beyond = beyond
        else:
            any_beyond = b.icmp_unsigned(
                "!=", b.bitcast(beyond, ir.IntType(self.lanes)), ir.Constant(ir.IntType(self.lanes), 0)
            )
        computed = b.block
        with b.if_then(any_beyond, likely=False):
            from_library = b.call(self.library(name), [x])
            from_library = b.select(beyond, from_library, result)
            called = b.block
        merged = b.phi(self.double)
        merged.add_incoming(result, computed)
        merged.add_incoming(from_library, called)
        return merged

    def library(self, name: str) -> ir.Function:
        """libm's ``name`` of a double, or of each lane of a vector, through a function that is not
        inlined: a vector loop's rare path stays out of its body."""
        module = self.module
        scalar = module.globals.get(name) or ir.Function(module, ir.FunctionType(DOUBLE, [DOUBLE]), name)
        if self.lanes is None:
            return scalar
        symbol = f"dynfuse.{name}.library.v{self.lanes}"
        function = module.globals.get(symbol)
        if function is None:
            function = ir.Function(module, ir.FunctionType(self.double, [self.double]), symbol)
            function.linkage = "internal"
            for attribute in ("noinline", "nounwind", "readnone"):
                function.attributes.add(attribute)
            b = ir.IRBuilder(function.append_basic_block("entry"))
            (x,) = function.args
            result = x
            for lane in range(self.lanes):
                value = b.call(scalar, [b.extract_element(x, ir.Constant(I32, lane))])
                result = b.insert_element(result, value, ir.Constant(I32, lane))
            b.ret(result)
        return function

    def sin(self, x: ir.Value) -> ir.Value:
        return self.guarded("sin", x, x)

    def cos(self, x: ir.Value) -> ir.Value:
        return self.guarded("cos", x, self.const(1.0))

    def tan(self, x: ir.Value) -> ir.Value:
        return self.guarded("tan", x, x)

    # -- the inverse circular functions, from one arctangent --

    def centered(self, values: Sequence[float], center: ir.Value) -> ir.Value:
        """``values[k]`` for ``center`` = k/4, by selects (a table's gather would keep loops scalar)."""
        result = self.const(values[0])
        for k in range(1, len(values)):
            is_k = self.b.fcmp_ordered("==", center, self.const(ARCTAN_CENTERS[k]))
            result = self.b.select(is_k, self.const(values[k]), result)
        return result

    def arctan2(self, y: ir.Value, x: ir.Value) -> ir.Value:
        """C's atan2: the angle of the smaller of |y|, |x| over the larger, u in [0, 1], whose
        arctangent is arctan c + arctan((u - c)/(1 + u·c)) at the nearest c of 1/4, ..., 1, or 0
        below 1/4 (a series to t^29); then pi/2 minus it where |y| was the larger, pi minus that
        where x is negative (or -0.0), and the sign of y. Constants are hi + lo, lo added last."""
        b = self.b
        zero, one = self.const(0.0), self.const(1.0)
        ay, ax = self.intrinsic("llvm.fabs", y), self.intrinsic("llvm.fabs", x)
        steep = b.fcmp_ordered(">", ay, ax)
        smaller, larger = b.select(steep, ax, ay), b.select(steep, ay, ax)
        u = b.fdiv(smaller, larger)
        u = b.select(b.fcmp_ordered("==", smaller, larger), one, u)  # inf/inf: pi/4
        u = b.select(b.fcmp_ordered("==", larger, zero), zero, u)  # 0/0: 0, or pi
        center = b.fmul(self.intrinsic("llvm.roundeven", b.fmul(u, self.const(4.0))), self.const(0.25))
        # below 1/4 the series takes u itself, exact: a reduced t as large as the result would carry
        # its own rounding into it
        center = b.select(b.fcmp_ordered("<", u, self.const(0.25)), zero, center)
        t = b.fdiv(b.fsub(u, center), self.multiply_add(u, center, one))  # u - center is exact
        square = b.fmul(t, t)
        series = self.multiply_add(b.fmul(t, square), self.horner(square, _ARCTAN_SERIES), t)
        # the angle from the x axis: c's part plus series, or its complement, or pi minus either
        centers = tuple(zip(*ARCTAN_OF_CENTERS, strict=True))
        complements = tuple(zip(*COMPLEMENTS_OF_CENTERS, strict=True))
        high = b.select(steep, self.centered(complements[0], center), self.centered(centers[0], center))
        low = b.select(steep, self.centered(complements[1], center), self.centered(centers[1], center))
        low = b.select(steep, b.fsub(low, series), b.fadd(low, series))
        behind = b.icmp_signed("<", b.bitcast(x, I64), self.integer(0))
        high = b.select(behind, b.fsub(self.const(PI[0]), high), high)
        low = b.select(behind, b.fsub(self.const(PI[1]), low), low)
        angle = b.fadd(high, low)
        result = self.intrinsic("llvm.copysign", angle, y)
        return b.select(b.fcmp_unordered("uno", x, y), b.fadd(x, y), result)

    def arctan(self, x: ir.Value) -> ir.Value:
        return self.arctan2(x, self.const(1.0))

    def arcsin(self, x: ir.Value) -> ir.Value:
        """The angle of the point (sqrt((1 - |x|)(1 + |x|)), |x|), with the sign of x: 1 - |x| is
        exact where it cancels; NaN past ±1."""
        b = self.b
        one = self.const(1.0)
        a = self.intrinsic("llvm.fabs", x)
        cosine = self.intrinsic("llvm.sqrt", b.fmul(b.fsub(one, a), b.fadd(one, a)))
        return self.intrinsic("llvm.copysign", self.arctan2(a, cosine), x)

    def arccos(self, x: ir.Value) -> ir.Value:
        """The angle of the point (x, sqrt((1 - x)(1 + x))): 0 to pi; NaN past ±1."""
        b = self.b
        one = self.const(1.0)
        sine = self.intrinsic("llvm.sqrt", b.fmul(b.fsub(one, x), b.fadd(one, x)))
        return self.arctan2(sine, x)

    # -- hypot --

    def hypot(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """sqrt(x^2 + y^2) with neither square overflowing nor underflowing: both scaled by the power
        of two that brings the larger near 1 (its exponent, kept within ±1000 so the power is a
        normal double), the squares exact as double-double (fma), and the rounded root corrected
        by one Newton step on what it misses of their sum: within about half an ulp. The edges as
        C's: +inf where either is infinite (even with NaN), NaN with NaN, the larger where the
        smaller is below 2^-60 of it (so no square of it underflows). Classified on the bits: a
        float comparison with NaN may raise."""
        b = self.b
        magnitude = self.integer((1 << 63) - 1)
        x_bits, y_bits = b.and_(b.bitcast(x, I64), magnitude), b.and_(b.bitcast(y, I64), magnitude)
        steep = b.icmp_unsigned(">", y_bits, x_bits)
        larger_bits, smaller_bits = b.select(steep, y_bits, x_bits), b.select(steep, x_bits, y_bits)
        larger, smaller = b.bitcast(larger_bits, DOUBLE), b.bitcast(smaller_bits, DOUBLE)
        infinity = self.integer(_bits(math.inf))
        not_finite = b.icmp_unsigned(">=", larger_bits, infinity)
        negligible = b.icmp_signed("<", smaller_bits, b.sub(larger_bits, self.integer(60 << 52)))
        usual = b.not_(
            b.or_(b.or_(not_finite, negligible), b.icmp_unsigned("==", larger_bits, self.integer(0)))
        )
        exponent = b.sub(b.lshr(larger_bits, self.integer(52)), self.integer(1023))
        exponent = b.select(b.icmp_signed(">", exponent, self.integer(1000)), self.integer(1000), exponent)
        exponent = b.select(b.icmp_signed("<", exponent, self.integer(-1000)), self.integer(-1000), exponent)
        down = self.power_of_two(b.neg(exponent))
        big = b.select(usual, b.fmul(larger, down), stand_in(b, larger))  # exact: a power of two
        small = b.select(usual, b.fmul(smaller, down), stand_in(b, smaller))
        big_square, small_square = b.fmul(big, big), b.fmul(small, small)
        big_error = self.fma(big, big, b.fneg(big_square))
        small_error = self.fma(small, small, b.fneg(small_square))
        root = self.intrinsic("llvm.sqrt", b.fadd(big_square, small_square))
        root_square = b.fmul(root, root)
        root_error = self.fma(root, root, b.fneg(root_square))
        # what the root's square misses of the sum: big_square - root_square is exact (Sterbenz)
        missed = b.fadd(
            b.fadd(b.fsub(big_square, root_square), small_square),
            b.fsub(b.fadd(big_error, small_error), root_error),
        )
        root = b.fadd(root, b.fdiv(missed, b.fadd(root, root)))
        result = b.fmul(root, self.power_of_two(exponent))
        result = b.select(usual, result, larger)  # 0, negligible, and NaN or inf (replaced below)
        nan = b.or_(b.icmp_unsigned(">", x_bits, infinity), b.icmp_unsigned(">", y_bits, infinity))
        result = b.select(nan, b.fadd(x, y), result)
        infinite = b.or_(b.icmp_unsigned("==", x_bits, infinity), b.icmp_unsigned("==", y_bits, infinity))
        return b.select(infinite, self.const(math.inf), result)

    # -- pow --

    def fma(self, a: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        """a·x + y rounded once: the error terms below are exact only so."""
        return self.intrinsic("llvm.fma", a, x, y)

    def two_sum(self, a: ir.Value, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """a + x as a double and the exact error of that rounding (Knuth's TwoSum)."""
        b = self.b
        total = b.fadd(a, x)
        virtual = b.fsub(total, a)
        return total, b.fadd(b.fsub(a, b.fsub(total, virtual)), b.fsub(x, virtual))

    def log_double_double(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """log(x) as hi + lo, about 2^-64 relative, for positive finite x: 2·atanh(s) with s and its
        leading terms carried as double-double, every rounding's error kept (no table: a gather
        would keep the loop scalar)."""
        b = self.b
        k, m = self.reduce_to_mantissa(x)
        f = b.fsub(m, self.const(1.0))  # exact
        two = self.const(2.0)
        u = b.fadd(f, two)
        u_low = b.fsub(f, b.fsub(u, two))  # u + u_low = m + 1 exactly
        s = b.fdiv(f, u)
        remainder = b.fsub(self.fma(b.fneg(s), u, f), b.fmul(s, u_low))  # f - s·(m + 1)
        s_low = b.fdiv(remainder, u)
        # s^2 and s^3 as double-double, then (2/3)s^3
        square = b.fmul(s, s)
        square_low = self.fma(s, s, b.fneg(square))
        cube = b.fmul(s, square)
        cube_low = b.fadd(self.fma(s, square, b.fneg(cube)), b.fmul(s, square_low))
        third = b.fmul(cube, self.const(TWO_THIRDS_HI))
        third_low = b.fadd(
            self.fma(cube, self.const(TWO_THIRDS_HI), b.fneg(third)),
            b.fadd(b.fmul(cube, self.const(TWO_THIRDS_LO)), b.fmul(cube_low, self.const(TWO_THIRDS_HI))),
        )
        tail = b.fmul(b.fmul(cube, square), self.horner(square, _ATANH_TAIL))
        # k·ln2 + 2s + (2/3)s^3 + tail, with what s_low adds to 2s and to (2/3)s^3 (2s^2·s_low)
        high, error_s = self.two_sum(b.fmul(k, self.const(LN2_HI)), b.fmul(s, two))
        high, error_third = self.two_sum(high, third)
        low = b.fmul(k, self.const(LN2_LO))
        low = b.fadd(low, b.fmul(s_low, two))
        for term in (error_s, error_third, third_low, b.fmul(b.fmul(square, s_low), two), tail):
            low = b.fadd(low, term)
        total = b.fadd(high, low)
        return total, b.fadd(b.fsub(high, total), low)

    def power_of_magnitude(self, magnitude: ir.Value, y: ir.Value) -> ir.Value:
        """|x|^y for positive finite |x| and finite y: exp(y·log|x|), with the product's error
        carried into exp for float64."""
        b = self.b
        if self.precision == FLOAT:
            return self.exp(b.fmul(y, self.log_of_positive(magnitude)))
        high, low = self.log_double_double(magnitude)
        product = b.fmul(y, high)
        error = b.fadd(self.fma(y, high, b.fneg(product)), b.fmul(y, low))
        # beyond exp's range the result is 0 or inf whatever the error (which may be NaN there)
        in_range = b.fcmp_ordered("<", self.intrinsic("llvm.fabs", product), self.const(1024.0))
        return self.exp_of_sum(product, b.select(in_range, error, self.const(0.0)))

    def power(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """C99's pow: its cases for zeros, infinities, NaN and negative x around |x|^y."""
        b = self.b
        zero, one, infinity = self.const(0.0), self.const(1.0), self.const(math.inf)
        magnitude = self.intrinsic("llvm.fabs", x)
        finite_x = b.fcmp_ordered("<", magnitude, infinity)
        finite_y = b.fcmp_ordered("<", self.intrinsic("llvm.fabs", y), infinity)
        usual = b.and_(b.and_(finite_x, finite_y), b.fcmp_ordered(">", magnitude, zero))
        # the general case on stand-ins where it does not apply, so no lane computes on edges
        result = self.power_of_magnitude(b.select(usual, magnitude, one), b.select(usual, y, one))
        integer = b.fcmp_ordered("==", self.intrinsic("llvm.trunc", y), y)
        half = b.fmul(y, self.const(0.5))
        odd = b.and_(integer, b.fcmp_ordered("!=", self.intrinsic("llvm.trunc", half), half))
        negative_y = b.fcmp_ordered("<", y, zero)
        # |x| = 0 or inf: inf where y < 0 and |x| = 0 or y > 0 and |x| = inf, else 0
        at_zero = b.fcmp_ordered("==", magnitude, zero)
        edge = b.select(b.xor(negative_y, at_zero), zero, infinity)
        result = b.select(b.or_(at_zero, b.fcmp_ordered("==", magnitude, infinity)), edge, result)
        # y = ±inf: inf where |x| > 1 and y > 0 or |x| < 1 and y < 0, 0 the other way, 1 at |x| = 1
        grows = b.xor(negative_y, b.fcmp_ordered(">", magnitude, one))
        limit = b.select(b.fcmp_ordered("==", magnitude, one), one, b.select(grows, infinity, zero))
        result = b.select(b.fcmp_ordered("==", self.intrinsic("llvm.fabs", y), infinity), limit, result)
        # negative x (and -0.0, -inf): the sign for odd integer y; NaN for finite x and non-integer y
        sign_of_x = b.icmp_signed("<", b.bitcast(x, I64), self.integer(0))
        result = b.select(b.and_(sign_of_x, odd), b.fneg(result), result)
        invalid = b.and_(b.and_(sign_of_x, finite_x), b.and_(b.fcmp_ordered("!=", x, zero), b.not_(integer)))
        result = b.select(invalid, self.const(math.nan), result)
        result = b.select(b.fcmp_unordered("uno", x, y), b.fadd(x, y), result)
        exact_one = b.or_(b.fcmp_ordered("==", y, zero), b.fcmp_ordered("==", x, one))
        return b.select(exact_one, one, result)
