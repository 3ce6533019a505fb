"""The workloads of ``perf/bench.py``, each written once as NumPy code.

The same function runs eagerly on ndarrays (the NumPy peer) and lazily on dynfuse's LazyArrays
(recorded, then fused when materialized), so both compute exactly the same thing. The hand-written
peers (``bench_numba.py``, ``bench_numexpr.py``) implement each workload under the same name.
Arrays are float32; scalars are Python floats, weak under NumPy 2's promotion, so results stay
float32. Each workload states how close to a float64 reference a float32 result must be.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

ROW_LENGTH = 8192
LAYERNORM_EPSILON = 1e-5


@dataclass(frozen=True)
class Workload:
    name: str
    compute: Callable
    make_inputs: Callable[[int, np.random.Generator], dict]
    rtol: float
    atol: float
    # dynfuse's throughput must reach this fraction of Numba's, and this multiple of NumPy's (if set).
    numba_target: float
    numpy_target: float | None = None


def relu_chain(x):
    return np.maximum(x * 2, 0) + 1


def cubic(x, a, b, c, d):
    return ((a * x + b) * x + c) * x + d


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def normal_cdf(d):
    """Abramowitz and Stegun 26.2.17: the standard normal CDF within 7.5e-8, from exp and a polynomial."""
    k = 1 / (1 + 0.2316419 * np.abs(d))
    poly = k * (0.31938153 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))))
    tail = 0.3989422804014327 * np.exp(-0.5 * d * d) * poly
    return np.where(d > 0, 1 - tail, tail)


def black_scholes(spot, strike, years, rate, volatility):
    """European call and put prices."""
    volatility_sqrt_years = volatility * np.sqrt(years)
    d1 = (np.log(spot / strike) + (rate + 0.5 * volatility * volatility) * years) / volatility_sqrt_years
    d2 = d1 - volatility_sqrt_years
    discounted_strike = strike * np.exp(-rate * years)
    cdf1, cdf2 = normal_cdf(d1), normal_cdf(d2)
    call = spot * cdf1 - discounted_strike * cdf2
    put = discounted_strike * (1 - cdf2) - spot * (1 - cdf1)
    return call, put


def dot(a, b):
    return (a * b).sum()


def softmax(x):
    exps = np.exp(x - x.max(axis=-1, keepdims=True))
    return exps / exps.sum(axis=-1, keepdims=True)


def layernorm(x):
    """Without affine parameters: every peer normalizes only."""
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + LAYERNORM_EPSILON)


def column_sum(x):
    """Reductions over axis 0 of a C-contiguous matrix: each result gathers a column, so memory
    must be read row by row, a block of results kept at once."""
    return (x * 2).sum(axis=0)


def column_mean(x):
    return x.mean(axis=0)


def column_max(x):
    return x.max(axis=0)


def column_var(x):
    return x.var(axis=0)


def normal_vector(size, rng):
    return {"x": rng.standard_normal(size, dtype=np.float32)}


def cubic_inputs(size, rng):
    return normal_vector(size, rng) | {"a": 0.5, "b": -1.25, "c": 0.75, "d": 2.0}


def option_inputs(size, rng):
    return {
        "spot": rng.uniform(10, 100, size).astype(np.float32),
        "strike": rng.uniform(10, 100, size).astype(np.float32),
        "years": rng.uniform(0.25, 2, size).astype(np.float32),
        "rate": 0.02,
        "volatility": 0.3,
    }


def positive_pair(size, rng):
    """Positive factors, so the sum is large and a float32 sum that loses precision shows it."""
    return {name: rng.uniform(0.5, 1.5, size).astype(np.float32) for name in ("a", "b")}


def normal_rows(size, rng):
    return {"x": rng.standard_normal((size // ROW_LENGTH, ROW_LENGTH), dtype=np.float32)}


WORKLOADS = (
    Workload("relu(x*2)+1", relu_chain, normal_vector, 1e-4, 1e-5, numba_target=0.9, numpy_target=3),
    Workload("cubic polynomial", cubic, cubic_inputs, 1e-4, 1e-5, numba_target=0.9, numpy_target=3),
    Workload("GELU (tanh)", gelu_tanh, normal_vector, 1e-4, 1e-5, numba_target=0.9, numpy_target=3),
    # Prices up to 100: an absolute error of 1e-3 is 1e-5 of the scale.
    Workload("Black-Scholes", black_scholes, option_inputs, 1e-4, 1e-3, numba_target=0.9, numpy_target=3),
    Workload("(a*b).sum()", dot, positive_pair, 1e-4, 0, numba_target=0.8),
    Workload("softmax rows", softmax, normal_rows, 1e-4, 1e-8, numba_target=0.8),
    Workload("layernorm rows", layernorm, normal_rows, 1e-4, 1e-5, numba_target=0.8),
    # Sums of 4096 terms of both signs may come close to zero: float32 rounding of the terms' scale.
    Workload("(x*2).sum(axis=0)", column_sum, normal_rows, 1e-4, 1e-3, numba_target=0.8, numpy_target=3),
    Workload("x.mean(axis=0)", column_mean, normal_rows, 1e-4, 1e-6, numba_target=0.8),
    Workload("x.max(axis=0)", column_max, normal_rows, 0, 0, numba_target=0.8),
    Workload("x.var(axis=0)", column_var, normal_rows, 1e-4, 1e-6, numba_target=0.8, numpy_target=2),
)
