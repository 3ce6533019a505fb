"""exp, log and tanh families as branch-free LLVM IR, so the loop vectorizer can widen them.

A call to libm inside a loop keeps the loop scalar, and LLVM's vector math libraries are not
reachable through llvmlite's pass builder. Here each function is built from arithmetic, bit
operations and selects: the classic range reductions (``x = n·ln2 + r`` for the exponentials,
``x = 2^k·m`` for the logarithms) and Taylor series on the reduced argument, long enough for the
precision asked for. Everything is computed in double: float32 results are double results rounded
once, so they are correctly rounded but for rare ties (as glibc's ``expf``/``logf`` are), and float64
results stay within about an ulp. NaN, ±inf, -0.0, overflow, underflow to subnormals and domain
errors give what C's libm gives.

Each function is defined once per module as an internal ``alwaysinline`` function, so a kernel's
loop sees only arithmetic after inlining.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal, localcontext

import numpy as np
from llvmlite import ir

I32, I64 = ir.IntType(32), ir.IntType(64)
FLOAT, DOUBLE = ir.FloatType(), ir.DoubleType()

FUNCTIONS = frozenset({"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh"})


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
    LOG2_E = float(1 / _LN2)
    LOG10_E = float(1 / Decimal(10).ln())
    LOG10_2_HI, LOG10_2_LO = _split(_LN2 / Decimal(10).ln())
SQRT_HALF_BITS = int(np.float64(math.sqrt(0.5)).view(np.int64))
ROUNDING_SHIFTER = 1.5 * 2.0**52  # adding it rounds a double below 2^51 to an integer, in the low bits

# Terms of the series, per result precision: enough that the truncation error stays below 2^-54
# of the result for float64 and below 2^-35 for float32 (whose result is one rounding of the double).
_EXPM1_DEGREE = {FLOAT: 9, DOUBLE: 13}  # expm1(r) = r + r^2/2! + ... on |r| <= ln2/2
_ATANH_TERMS = {FLOAT: 7, DOUBLE: 9}  # log(1+f) = 2 atanh(s) = 2s + 2s^3/3 + ... on |s| <= 0.1716

# Below and above these, exp (and exp2, expm1) is 0 (or -1) and inf at the precision: clamping the
# argument there keeps the reduction's integers small without changing any result.
_EXP_RANGE = {FLOAT: (-104.0, 89.0), DOUBLE: (-746.0, 710.0)}
_EXP2_RANGE = {FLOAT: (-151.0, 129.0), DOUBLE: (-1076.0, 1025.0)}


def call(
    module: ir.Module, builder: ir.IRBuilder, name: str, x: ir.Value, for_half: bool = False
) -> ir.Value:
    """``name(x)`` for a float or double ``x``, through the module's definition of it.

    ``for_half``: the float result will be rounded again, to float16. LLVM's instruction selection
    would merge the two roundings into one call to ``__truncdfhf2``, which the JIT cannot resolve
    (and which rounds once where NumPy rounds twice); a fence keeps them apart, at the cost of
    vectorizing, which float16 loops do not get anyway.
    """
    symbol = f"dynfuse.{name}.{'f32' if x.type == FLOAT else 'f64'}{'.half' if for_half else ''}"
    function = module.globals.get(symbol)
    if function is None:
        function = ir.Function(module, ir.FunctionType(x.type, [x.type]), symbol)
        function.linkage = "internal"
        function.attributes.add("alwaysinline")
        function.attributes.add("nounwind")
        body = ir.IRBuilder(function.append_basic_block("entry"))
        argument = function.args[0]
        wide = argument if x.type == DOUBLE else body.fpext(argument, DOUBLE)
        result = getattr(_Emitter(module, body, x.type), name)(wide)
        if x.type == FLOAT:
            result = body.fptrunc(result, FLOAT)
            if for_half:
                signature = ir.FunctionType(FLOAT, [FLOAT])
                result = body.call(
                    module.declare_intrinsic("llvm.arithmetic.fence", [FLOAT], signature), [result]
                )
        body.ret(result)
    return builder.call(function, [x])


class _Emitter:
    """Builds one function's body in double, with the series lengths of the result's precision."""

    def __init__(self, module: ir.Module, builder: ir.IRBuilder, precision: ir.Type) -> None:
        self.module = module
        self.b = builder
        self.precision = precision

    # -- small pieces --

    def const(self, value: float) -> ir.Constant:
        return ir.Constant(DOUBLE, value)

    def integer(self, value: int) -> ir.Constant:
        return ir.Constant(I64, value)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        signature = ir.FunctionType(DOUBLE, [DOUBLE] * len(args))
        function = self.module.declare_intrinsic(name, [DOUBLE], signature)
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

    def log_parts(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """k (as a double) and log(m), for positive finite x = 2^k·m with m in [sqrt(1/2), sqrt(2))."""
        b = self.b
        subnormal = b.fcmp_ordered("<", x, self.const(2.0**-1022))
        x = b.select(subnormal, b.fmul(x, self.const(2.0**54)), x)
        bits = b.bitcast(x, I64)
        k = b.ashr(b.sub(bits, self.integer(SQRT_HALF_BITS)), self.integer(52))
        m = b.bitcast(b.sub(bits, b.shl(k, self.integer(52))), DOUBLE)
        k = b.sub(k, b.select(subnormal, self.integer(54), self.integer(0)))
        f = b.fsub(m, self.const(1.0))  # exact
        s = b.fdiv(f, b.fadd(f, self.const(2.0)))
        z = b.fmul(s, s)
        terms = _ATANH_TERMS[self.precision]
        series = b.fmul(z, self.horner(z, [2.0 / (2 * j + 1) for j in range(1, terms + 1)]))
        # log(1+f) = 2s + s·series, and 2s = f - s·f
        log_m = b.fsub(f, b.fmul(s, b.fsub(f, series)))
        return b.sitofp(b.trunc(k, I32), DOUBLE), log_m

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

    def log(self, x: ir.Value) -> ir.Value:
        k, log_m = self.log_parts(x)
        b = self.b
        return self.logarithm(
            x, b.fadd(b.fmul(k, self.const(LN2_HI)), self.multiply_add(k, self.const(LN2_LO), log_m))
        )

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
