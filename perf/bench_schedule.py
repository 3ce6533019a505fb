"""What the scheduler costs, and what its plans save.

1. Planning time for a deep shared DAG (``x = x + x*0.5``, 200 levels, both operands shared:
   2**200 paths through 600 nodes), cold (empty plan cache) and from the plan cache.
2. For named patterns: kernels planned, passes, and memory traffic fused against op by op, as
   ``dynfuse.explain`` estimates it.
3. A loop with a changing scalar: plans built and kernels compiled over 1000 iterations.
Correctness is checked before anything is timed; times are medians.

    python perf/bench_schedule.py [--repeats N]
"""

import argparse
import re

import numpy as np
from timing import median_time

import dynfuse
from dynfuse import config, execute, registry, replay, schedule
from dynfuse.trace import topological_order


def deep_dag(levels):
    start = np.linspace(0, 1, 1000)
    x, expected = dynfuse.asarray(start), start
    for _ in range(levels):
        x = x + x * 0.5
        expected = expected + expected * 0.5
    return x, expected


def plan(array):
    outputs = execute.wanted_nodes([array._node])
    trace = schedule.number_trace(topological_order(outputs), outputs)
    return schedule.plan_for(trace, registry.BACKENDS["groups"].target)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x):
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)


PATTERNS = {
    "relu(x*2)+1": lambda x, w: np.maximum(x * 2, 0) + 1,
    "(x*x).sum()": lambda x, w: (x * x).sum(),
    "x - x.mean(-1)": lambda x, w: x - x.mean(axis=-1, keepdims=True),
    "softmax rows": lambda x, w: softmax(x),
    "layernorm rows": lambda x, w: layernorm(x),
    "relu(x @ w + 1)": lambda x, w: np.maximum(x @ w + 1, 0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    repeats = parser.parse_args().repeats
    config.max_depth = 10_000
    print(f"dynfuse {dynfuse.__version__}, numpy {np.__version__}")

    x, expected = deep_dag(200)
    np.testing.assert_allclose(np.asarray(deep_dag(200)[0]), expected, rtol=1e-12)
    cold = median_time(lambda: plan(x), repeats, before=replay.clear_plans)
    warm = median_time(lambda: plan(x), repeats)
    print(f"\n200-level shared DAG: plan {cold * 1e3:.1f} ms cold, {warm * 1e3:.2f} ms from the plan cache")

    print(f"\n{'pattern':<18} {'shape':>12} {'kernels':>8} {'passes':>8} {'traffic fused/op-by-op':>24}")
    rng = np.random.default_rng(0)
    for shape in [(256, 256), (4, 100_000)]:
        data, weights = rng.standard_normal(shape), rng.standard_normal((shape[1], 8))
        for name, pattern in PATTERNS.items():
            lazy_result = pattern(dynfuse.asarray(data), dynfuse.asarray(weights))
            text = dynfuse.explain(lazy_result)
            np.testing.assert_allclose(np.asarray(lazy_result), pattern(data, weights), rtol=1e-10)
            steps = plan(pattern(dynfuse.asarray(data), dynfuse.asarray(weights))).kernels
            passes = "+".join(str(step.kernel.passes) for step in steps)
            ratio = re.search(r"op by op \((.*) less\)", text)
            print(
                f"{name:<18} {shape!s:>12} {len(steps):>8} {passes:>8} {ratio.group(1) if ratio else '-':>24}"
            )

    dynfuse.reset_stats()
    base = dynfuse.asarray(rng.standard_normal(100_000))
    for step in range(1000):
        scale = 1 + step / 1000
        np.testing.assert_allclose(np.asarray(base * scale + scale), np.asarray(base) * scale + scale)
    stats = dynfuse.stats()
    print(
        f"\nloop of 1000 with a changing float scalar: {stats['plan_cache_misses']:.0f} plan(s) built, "
        f"{stats['plan_cache_hits']:.0f} reused, {stats['kernels_compiled']:.0f} kernel(s) compiled"
    )


if __name__ == "__main__":
    main()
