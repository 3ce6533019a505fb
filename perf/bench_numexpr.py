"""The numexpr peer: each workload of ``bench_workloads.py`` as ``numexpr.evaluate`` calls.

numexpr computes a float literal in float64 (``x*2.5`` of a float32 ``x`` is float64), so
``evaluate`` passes every float literal and scalar in as a float32 variable, as a careful user
would. numexpr cannot name a subexpression and reduces only a whole expression, along one axis,
so the row workloads, the column variance and Black-Scholes run in steps, each step writing an
array. Its float32 sum of 2^25 positive terms is off by percents (measured), which the benchmark
reports as a FAIL.
"""

import re

import numexpr
import numpy as np
from bench_workloads import LAYERNORM_EPSILON

FLOAT_LITERAL = re.compile(r"(?<![\w.])\d+(?:\.\d*(?:[eE][-+]?\d+)?|[eE][-+]?\d+)")


def evaluate(expression, **operands):
    """``numexpr.evaluate`` in float32: float literals and Python floats become float32 operands."""
    constants = {}

    def name_constant(match):
        name = f"constant{len(constants)}"
        constants[name] = np.float32(match.group())
        return name

    float32_expression = FLOAT_LITERAL.sub(name_constant, expression)
    operands = {name: np.float32(v) if isinstance(v, float) else v for name, v in operands.items()}
    return numexpr.evaluate(float32_expression, local_dict=operands | constants)


def relu_chain(x):
    return evaluate("where(x * 2 > 0, x * 2, 0) + 1", x=x)


def cubic(x, a, b, c, d):
    return evaluate("((a * x + b) * x + c) * x + d", x=x, a=a, b=b, c=c, d=d)


def gelu_tanh(x):
    return evaluate("0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))", x=x)


def normal_cdf(d):
    k = evaluate("1 / (1 + 0.2316419 * abs(d))", d=d)
    tail = (
        "0.3989422804014327 * exp(-0.5 * d * d)"
        " * k * (0.31938153 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))))"
    )
    # 1 - tail where d > 0, else tail, with the tail written (and computed) once.
    return evaluate(f"where(d > 0, 1.0, 0.0) - where(d > 0, 1.0, -1.0) * {tail}", d=d, k=k)


def black_scholes(spot, strike, years, rate, volatility):
    d1 = evaluate(
        "(log(spot / strike) + (rate + 0.5 * volatility * volatility) * years) / (volatility * sqrt(years))",
        spot=spot,
        strike=strike,
        years=years,
        rate=rate,
        volatility=volatility,
    )
    d2 = evaluate("d1 - volatility * sqrt(years)", d1=d1, volatility=volatility, years=years)
    cdf1, cdf2 = normal_cdf(d1), normal_cdf(d2)
    prices = {"spot": spot, "strike": strike, "years": years, "rate": rate, "cdf1": cdf1, "cdf2": cdf2}
    call = evaluate("spot * cdf1 - strike * exp(-rate * years) * cdf2", **prices)
    put = evaluate("strike * exp(-rate * years) * (1 - cdf2) - spot * (1 - cdf1)", **prices)
    return call, put


def dot(a, b):
    return evaluate("sum(a * b)", a=a, b=b)


def softmax(x):
    row_max = evaluate("max(x, axis=1)", x=x)[:, None]
    exps = evaluate("exp(x - row_max)", x=x, row_max=row_max)
    row_sum = evaluate("sum(exps, axis=1)", exps=exps)[:, None]
    return evaluate("exps / row_sum", exps=exps, row_sum=row_sum)


def layernorm(x):
    count = np.float32(x.shape[1])
    mean = evaluate("sum(x, axis=1)", x=x)[:, None] / count
    centered = evaluate("x - mean", x=x, mean=mean)
    variance = evaluate("sum(centered * centered, axis=1)", centered=centered)[:, None] / count
    return evaluate(
        "centered / sqrt(variance + epsilon)", centered=centered, variance=variance, epsilon=LAYERNORM_EPSILON
    )


def column_sum(x):
    return evaluate("sum(x * 2, axis=0)", x=x)


def column_mean(x):
    return evaluate("sum(x, axis=0)", x=x) / np.float32(x.shape[0])


def column_max(x):
    return evaluate("max(x, axis=0)", x=x)


def column_var(x):
    mean = column_mean(x)
    return evaluate("sum((x - mean) * (x - mean), axis=0)", x=x, mean=mean) / np.float32(x.shape[0])
