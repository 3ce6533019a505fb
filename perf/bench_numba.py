"""The Numba peer: a hand-written ``parallel=True`` loop per workload of ``bench_workloads.py``.

Float32 throughout, as a fair peer: a Python float literal would make Numba compute in float64,
so every constant is a float32 (module constants are frozen into the code with their type) and
scalars arrive as float32. ``fastmath`` is off, as it is for NumPy and dynfuse: the same rounding.
Compiled code is cached next to this file, so only the first run pays for compiling.
"""

import math

import numba
import numpy as np
from bench_workloads import LAYERNORM_EPSILON

ONE, HALF, TWO = np.float32(1), np.float32(0.5), np.float32(2)
GELU_SCALE, GELU_CUBIC = np.float32(0.7978845608), np.float32(0.044715)
CDF_K = np.float32(0.2316419)
CDF_POLY = tuple(np.float32(c) for c in (0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429))
INV_SQRT_2PI = np.float32(0.3989422804014327)
EPSILON = np.float32(LAYERNORM_EPSILON)
SUM_BLOCK = 4096
LANES = 16
ROW_RANGES = 64  # column reductions: ranges of rows reduced in parallel, each into partial results

jit = numba.njit(parallel=True, fastmath=False, cache=True)


@jit
def copy(source, destination):
    for i in numba.prange(source.size):
        destination[i] = source[i]


@jit
def relu_chain(x):
    out = np.empty_like(x)
    for i in numba.prange(x.size):
        out[i] = max(x[i] * TWO, np.float32(0)) + ONE
    return out


@jit
def cubic(x, a, b, c, d):
    out = np.empty_like(x)
    for i in numba.prange(x.size):
        out[i] = ((a * x[i] + b) * x[i] + c) * x[i] + d
    return out


@jit
def gelu_tanh(x):
    out = np.empty_like(x)
    for i in numba.prange(x.size):
        v = x[i]
        out[i] = HALF * v * (ONE + math.tanh(GELU_SCALE * (v + GELU_CUBIC * v * v * v)))
    return out


@numba.njit(fastmath=False, cache=True)
def normal_cdf(d):
    k = ONE / (ONE + CDF_K * abs(d))
    a1, a2, a3, a4, a5 = CDF_POLY
    tail = INV_SQRT_2PI * math.exp(-HALF * d * d) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))))
    return ONE - tail if d > 0 else tail


@jit
def black_scholes(spot, strike, years, rate, volatility):
    call, put = np.empty_like(spot), np.empty_like(spot)
    drift = rate + HALF * volatility * volatility
    for i in numba.prange(spot.size):
        volatility_sqrt_years = volatility * math.sqrt(years[i])
        d1 = (math.log(spot[i] / strike[i]) + drift * years[i]) / volatility_sqrt_years
        d2 = d1 - volatility_sqrt_years
        discounted_strike = strike[i] * math.exp(-rate * years[i])
        cdf1, cdf2 = normal_cdf(d1), normal_cdf(d2)
        call[i] = spot[i] * cdf1 - discounted_strike * cdf2
        put[i] = discounted_strike * (ONE - cdf2) - spot[i] * (ONE - cdf1)
    return call, put


@numba.njit(fastmath=False, cache=True)
def lane_sum(values):
    """The sum of a 1-D float32 array in LANES accumulators, as NumPy's pairwise sum keeps 8: with
    fastmath off the compiler may not reorder float adds, and one accumulator makes each add wait
    for the one before."""
    lanes = np.zeros(LANES, np.float32)
    whole = values.size - values.size % LANES
    for start in range(0, whole, LANES):
        for lane in range(LANES):
            lanes[lane] += values[start + lane]
    total = lanes.sum()
    for i in range(whole, values.size):
        total += values[i]
    return total


@jit
def dot(a, b):
    """Blocks of products, each summed while it is in cache, then the sum of the blocks' sums."""
    blocks = (a.size + SUM_BLOCK - 1) // SUM_BLOCK
    partials = np.empty(blocks, np.float32)
    for block in numba.prange(blocks):
        start, stop = block * SUM_BLOCK, min((block + 1) * SUM_BLOCK, a.size)
        partials[block] = lane_sum(a[start:stop] * b[start:stop])
    return lane_sum(partials)


@jit
def softmax(x):
    out = np.empty_like(x)
    for row in numba.prange(x.shape[0]):
        row_max = x[row, 0]
        for j in range(1, x.shape[1]):
            row_max = max(row_max, x[row, j])
        for j in range(x.shape[1]):
            out[row, j] = math.exp(x[row, j] - row_max)
        total = lane_sum(out[row])
        for j in range(x.shape[1]):
            out[row, j] /= total
    return out


@jit
def layernorm(x):
    """The squared deviations are summed from the output row, while it is in cache."""
    out = np.empty_like(x)
    count = np.float32(x.shape[1])
    for row in numba.prange(x.shape[0]):
        mean = lane_sum(x[row]) / count
        for j in range(x.shape[1]):
            out[row, j] = (x[row, j] - mean) * (x[row, j] - mean)
        scale = math.sqrt(lane_sum(out[row]) / count + EPSILON)
        for j in range(x.shape[1]):
            out[row, j] = (x[row, j] - mean) / scale
    return out


@numba.njit(fastmath=False, cache=True)
def added_partials(partial):
    """The rows of ``partial`` added, in order."""
    out = partial[0].copy()
    for part in range(1, partial.shape[0]):
        for j in range(partial.shape[1]):
            out[j] += partial[part, j]
    return out


@jit
def column_sum(x):
    """Each range of rows is added into its own row of partial sums, in order (as NumPy adds the
    rows), and the partial sums after: every thread reads its rows of memory in order."""
    rows, columns = x.shape
    partial = np.zeros((ROW_RANGES, columns), np.float32)
    for part in numba.prange(ROW_RANGES):
        for i in range(part * rows // ROW_RANGES, (part + 1) * rows // ROW_RANGES):
            for j in range(columns):
                partial[part, j] += TWO * x[i, j]
    return added_partials(partial)


@jit
def column_mean(x):
    rows, columns = x.shape
    partial = np.zeros((ROW_RANGES, columns), np.float32)
    for part in numba.prange(ROW_RANGES):
        for i in range(part * rows // ROW_RANGES, (part + 1) * rows // ROW_RANGES):
            for j in range(columns):
                partial[part, j] += x[i, j]
    return added_partials(partial) / np.float32(rows)


@jit
def column_max(x):
    rows, columns = x.shape
    partial = np.full((ROW_RANGES, columns), -np.inf, np.float32)
    for part in numba.prange(ROW_RANGES):
        for i in range(part * rows // ROW_RANGES, (part + 1) * rows // ROW_RANGES):
            for j in range(columns):
                partial[part, j] = max(partial[part, j], x[i, j])
    out = partial[0].copy()
    for part in range(1, ROW_RANGES):
        for j in range(columns):
            out[j] = max(out[j], partial[part, j])
    return out


@jit
def column_var(x):
    """Two parallel passes: the means, then the squared deviations from them."""
    rows, columns = x.shape
    mean = column_mean(x)
    partial = np.zeros((ROW_RANGES, columns), np.float32)
    for part in numba.prange(ROW_RANGES):
        for i in range(part * rows // ROW_RANGES, (part + 1) * rows // ROW_RANGES):
            for j in range(columns):
                partial[part, j] += (x[i, j] - mean[j]) * (x[i, j] - mean[j])
    return added_partials(partial) / np.float32(rows)
