"""Small traces in a loop, from a fresh process: when does the tier policy replay them compiled, and
what does the whole loop cost against NumPy?

Each program is one loop body over small arrays whose trace is recorded (its operand is pending,
or larger than ``tiny_elements``), materialized every iteration. For N iterations it runs, each in a
fresh process (no kernel compiled, no plan, no sighting): NumPy, and dynfuse with its tier policy,
with an empty disk cache (``cold``: every kernel compiled) and with the disk cache the cold run
filled (``cached``: a program's second run). It reports the whole loop's time against NumPy's and
the iteration from which the body is launched compiled (``first launch``). The policy's numbers
(``Target.tiny_repeats``, ``Target.interpreted_op_work``, the compile costs) decide that iteration
from counts alone; this shows what they cost in time.

    python perf/bench_tier_loops.py [--iterations 100 300 1000 3000] [--repeats 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

BODIES = {
    "10-op chain, 1,000 float32": (
        "x = np.asarray(rng.standard_normal(1000, dtype=numpy.float32)) * 1.0",  # pending
        "y = np.minimum(np.abs(np.maximum(x * 2 + 1, 0) * x - 0.5) / 3 + x, 4) * 0.5",
        "y",
    ),
    "heat step 64x64, a named temporary, slice write": (
        "u = np.array(rng.random((64, 64))) * 1.0",
        "lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]\n"
        "    u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * lap",
        "u",
    ),
    "stencil 150x150, slice write": (
        "a = np.asarray(rng.random((150, 150))); b = np.asarray(rng.random((150, 150)))",
        "b[1:-1, 1:-1] = 0.25 * (a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1]); a, b = b, a",
        "a",
    ),
}

CHILD = """
import json, sys, time
import numpy
namespace = sys.argv[1]
if namespace == "numpy":
    np = numpy
else:
    import dynfuse
    import dynfuse.numpy as np
rng = numpy.random.default_rng(0)
{setup}
first_launch = None
started = time.perf_counter()
for iteration in range({iterations}):
    {body}
    numpy.asarray({result})
    if namespace != "numpy" and first_launch is None and dynfuse.stats()["kernels_launched"]:
        first_launch = iteration
seconds = time.perf_counter() - started
print(json.dumps({{"seconds": seconds, "first_launch": first_launch}}))
"""


def run_child(name: str, iterations: int, namespace: str, cache_dir: str) -> dict:
    setup, body, result = BODIES[name]
    source = CHILD.format(setup=setup, body=body, result=result, iterations=iterations)
    env = {**os.environ, "DYNFUSE_CACHE_DIR": cache_dir}
    done = subprocess.run(
        [sys.executable, "-c", source, namespace], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, nargs="+", default=[100, 300, 1000, 3000])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per figure (median)")
    args = parser.parse_args()
    print(
        f"{'program':50} {'N':>6} {'NumPy':>9} {'cold':>9} {'cold/NumPy':>10} {'first launch':>12} "
        f"{'cached':>9} {'cached/NumPy':>12} {'first launch':>12}"
    )
    for name in BODIES:
        for iterations in args.iterations:
            figures = {"numpy": [], "cold": [], "cached": []}
            launches = {"cold": None, "cached": None}
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory() as cache_dir:
                    figures["numpy"].append(run_child(name, iterations, "numpy", cache_dir)["seconds"])
                    for kind in ("cold", "cached"):  # the cold run fills the disk cache
                        found = run_child(name, iterations, "dynfuse", cache_dir)
                        figures[kind].append(found["seconds"])
                        launches[kind] = found["first_launch"]
            numpy_time, cold, cached = (statistics.median(figures[k]) for k in ("numpy", "cold", "cached"))
            print(
                f"{name:50} {iterations:>6} {numpy_time * 1e3:>7.1f}ms {cold * 1e3:>7.1f}ms "
                f"{cold / numpy_time:>10.2f} {launches['cold']!s:>12} {cached * 1e3:>7.1f}ms "
                f"{cached / numpy_time:>12.2f} {launches['cached']!s:>12}",
                flush=True,
            )


if __name__ == "__main__":
    main()
