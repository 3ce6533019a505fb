"""The math functions in a fused chain, against NumPy's and numexpr's loops for them.

Each of NumPy's transcendental ufuncs runs in the chain ``f(x) * 2.0 + 1.0`` on float32 and
float64 arrays of 2^22 elements (whose temporaries NumPy writes to memory) and of 2^18 (which stay
in cache, where only the loops' arithmetic counts), as a user writes it: dynfuse fuses the chain
into one kernel (or, for an op in the CPU target's ``library_ops``, runs NumPy's loop for that op
between two kernels); NumPy runs three loops; numexpr evaluates the expression string where it has
the function. Every result is checked against NumPy's first. Medians of interleaved rounds after a
warm-up that lets the tier policy compile (the steady state of a loop); speed is the peer's time
over dynfuse's, so above 1 dynfuse is faster. What a row says is how the CPU
backend computes the function: ``inline`` (its own branch-free code, ``codegen/llvm_math.py``),
``libm`` (a scalar call per element), or ``NumPy's loop`` (``Target.library_ops``).

    python perf/bench_functions.py [--quick]
    python perf/bench_functions.py --costs   # codegen/llvm.py's ELEMENT_COSTS, measured again
"""

import argparse
import dataclasses
import os
import platform
import statistics
import time

import numpy as np
from timing import measure_interleaved, write_results_section

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import cache, config, replay
from dynfuse.backends import cpu
from dynfuse.codegen import llvm_math

UNARY = ("sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arctanh")
# name: (the chain on a namespace and its operand, numexpr's expression or None, the operand's range)
FUNCTIONS = {
    name: (
        (lambda np, x, name=name: getattr(np, name)(x) * 2.0 + 1.0),
        f"{name}(x) * 2.0 + 1.0",
        (0.05, 0.95),
    )
    for name in (*UNARY, "exp", "expm1", "log", "log1p")
}
FUNCTIONS |= {
    "arccosh": ((lambda np, x: np.arccosh(x) * 2.0 + 1.0), "arccosh(x) * 2.0 + 1.0", (1.05, 1.95)),
    "cbrt": ((lambda np, x: np.cbrt(x) * 2.0 + 1.0), None, (-5.0, 5.0)),
    "arctan2": ((lambda np, x: np.arctan2(x, 0.7) * 2.0 + 1.0), "arctan2(x, 0.7) * 2.0 + 1.0", (-1.0, 1.0)),
    "hypot": ((lambda np, x: np.hypot(x, 0.7) * 2.0 + 1.0), None, (-1.0, 1.0)),
    "power": ((lambda np, x: x**1.7 * 2.0 + 1.0), "x**1.7 * 2.0 + 1.0", (0.05, 5.0)),
}


def how_computed(name: str, dtype: np.dtype) -> str:
    if (name, dtype.char) in cpu.BACKEND.target.library_ops:
        return "NumPy's loop"
    return "inline" if name in llvm_math.INLINE else "libm"


def numexpr_call(expression: str | None):
    try:
        import numexpr
    except ImportError:
        return None
    if expression is None:
        return None
    return lambda x: numexpr.evaluate(expression, local_dict={"x": x})


def measure(name: str, dtype: np.dtype, size: int, repeats: int) -> dict:
    chain, expression, (low, high) = FUNCTIONS[name]
    x = np.random.default_rng(0).uniform(low, high, size).astype(dtype)
    lazy = dnp.asarray(x)
    contenders = {
        "NumPy": lambda: chain(np, x),
        "dynfuse": lambda: np.asarray(chain(dnp, lazy)),
    }
    evaluate = numexpr_call(expression)
    if evaluate is not None:
        contenders["numexpr"] = lambda: evaluate(x)
    expected = chain(np, x)
    # a few ulps of the function's value: the chain's + 1.0 cancels to near 0 at some points
    tolerance = (1e-5 if dtype == np.float32 else 1e-12) * float(np.abs(expected).max())
    for label, function in contenders.items():
        np.testing.assert_allclose(function(), expected, rtol=0, atol=tolerance, err_msg=f"{label} {name}")
        for _ in range(40 if size < 1 << 20 else 3):  # the tier policy's compiles, then warm-up
            function()
        cache.finish_background_compiles()
        function()
    timings = measure_interleaved(
        {label: (function, None) for label, function in contenders.items()}, repeats
    )
    return {label: timing.median for label, timing in timings.items()}


def seconds_per_element(chain, x: np.ndarray, repeats: int = 31) -> float:
    lazy = dnp.asarray(x)
    for _ in range(5):
        np.asarray(chain(dnp, lazy))
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        np.asarray(chain(dnp, lazy))
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) / x.size


def element_costs() -> None:
    """What one element of each function's generated code costs, on one thread, in units of a
    cheap float32 op (``relu(x*2)+1`` has three): the chain's time less its two cheap ops."""
    config.threads, config.tiers = 1, False
    cpu.BACKEND.target = dataclasses.replace(cpu.BACKEND.target, library_ops=frozenset())
    replay.clear_plans()
    size = 1 << 17
    values = np.random.default_rng(0).uniform(0.1, 0.9, size)
    unit = seconds_per_element(lambda np, x: np.maximum(x * 2, 0) + 1, values.astype(np.float32)) / 3
    print(f"a cheap float32 op: {unit * 1e9:.3f} ns an element")
    for dtype in (np.float32, np.float64):
        costs = []
        for name, (chain, _, (low, _high)) in FUNCTIONS.items():
            x = (values + (low if low >= 1 else 0)).astype(dtype)
            costs.append(f"{name} {seconds_per_element(chain, x) / unit - 2:.0f}")
        print(f"{np.dtype(dtype)}: " + ", ".join(costs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^14 and 2^16 elements, nothing written")
    parser.add_argument("--costs", action="store_true", help="each function's cost an element, one thread")
    args = parser.parse_args()
    if args.costs:
        element_costs()
        return
    (small, large), repeats = ((1 << 14, 1 << 16), 3) if args.quick else ((1 << 18, 1 << 22), 9)
    dynfuse.set_backend("cpu")
    speed_columns = f"speed vs NumPy, {small:,} | speed vs NumPy, {large:,} | speed vs numexpr, {large:,}"
    times = f"NumPy ms, {large:,} | dynfuse ms, {large:,}"
    rows = [
        f"| function | dtype | dynfuse computes it by | {speed_columns} | {times} |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    slower: dict[int, list[str]] = {small: [], large: []}
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        for name in FUNCTIONS:
            speeds = {}
            for size in (small, large):
                seconds = measure(name, dtype, size, repeats)
                speeds[size] = seconds["NumPy"] / seconds["dynfuse"]
                if speeds[size] < 1:
                    slower[size].append(f"{name} ({dtype})")
            numexpr = seconds.get("numexpr")
            versus_numexpr = "" if numexpr is None else f"{numexpr / seconds['dynfuse']:.2f}x"
            speed = f"**{speeds[small]:.2f}x** | **{speeds[large]:.2f}x** | {versus_numexpr}"
            times = f"{seconds['NumPy'] * 1e3:.2f} | {seconds['dynfuse'] * 1e3:.2f}"
            rows.append(f"| {name} | {dtype} | {how_computed(name, dtype)} | {speed} | {times} |")
            print(rows[-1], flush=True)
    summary = [
        f"slower than NumPy at {size:,} elements: {', '.join(names) if names else 'none'}"
        for size, names in slower.items()
    ]
    print("\n".join(summary))
    if args.quick:
        return
    threads = os.environ.get("DYNFUSE_THREADS", "unset (all cores)")
    section = "\n".join(
        [
            "## Math functions in a fused chain",
            "",
            f"`python perf/bench_functions.py` ({platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores; NumPy {np.__version__}; DYNFUSE_THREADS={threads}). The chain "
            "`f(x) * 2.0 + 1.0`, each result checked against NumPy's first; medians of "
            f"{repeats} interleaved rounds after a warm-up. Speed is the peer's time "
            "over dynfuse's: above 1, dynfuse is faster.",
            "",
            *rows,
            "",
            *(f"- {line}" for line in summary),
        ]
    )
    write_results_section("functions", section)


if __name__ == "__main__":
    main()
