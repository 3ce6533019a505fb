"""The tier policy's thresholds, measured: when is a planned, compiled kernel worth it?

For one elementwise chain over N elements it times, in one run:
- ``interpreted``: the reference executor, op by op, no plan (what tiny work gets);
- ``warm``: planned and compiled, with the plan and the kernel already cached (a hot loop);
- ``cold``: planned and compiled from empty caches (the first sight of a signature).
``tiny_elements`` is the smallest N from which ``warm`` beats ``interpreted``: below it a kernel
never pays. ``first_sight_work`` is the smallest N times the chain's op count from which ``cold``
beats ``interpreted`` (interpreting costs a pass per op, compiling grows far slower with the ops:
``--links`` lengthens the chain to check that): below it a first sighting runs interpreted and
compiles when seen again. ``repeats`` is how many
runs of a trace pay back compiling it ((cold - warm) / (interpreted - warm)): below
``tiny_elements`` the tier policy reaches that figure by counting each interpreted op's call
(``Target.interpreted_op_work``); ``perf/bench_tier_loops.py`` shows where it lands in small loops.
Each backend's Target records the figures measured here. Correctness is checked before anything is
timed.

    python perf/bench_tiers.py [--backend groups] [--repeats N] [--links L]
"""

import argparse
import dataclasses

import numpy as np
from timing import median_time

import dynfuse
from dynfuse import config, registry, replay

OPS_PER_LINK = 5


def chain(a, links):
    """``links`` times ``maximum(x*2, 0) + 1 - a/3``, each on the last: 5 ops a link."""
    x = a
    for _ in range(links):
        x = np.maximum(x * 2.0, 0.0) + 1.0 - a / 3.0
    return x


def clear_caches():
    replay.clear_plans()
    replay.clear_kernels()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="groups")
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--links", type=int, default=1, help="chain length, in links of 5 ops")
    args = parser.parse_args()
    backend = registry.BACKENDS[args.backend]
    config.disk_cache = False  # cold means compiled, not loaded from an earlier run's object code
    # Measure with the policy off: every kernel compiled, whatever its size.
    backend.target = dataclasses.replace(backend.target, tiny_elements=0, first_sight_work=0)
    ops = OPS_PER_LINK * args.links
    print(f"dynfuse {dynfuse.__version__}, backend {args.backend!r}, numpy {np.__version__}, {ops} ops")
    columns = ("interpreted", "warm", "cold", "warm/interp", "cold/interp", "repeats")
    print(f"{'elements':>10} " + " ".join(f"{column:>12}" for column in columns))
    tiny = first_sight = None
    for size in [2**k for k in (4, 8, 12, 14, 15, 16, 17, 18, 19, 20, 21, 22)]:
        values = np.random.default_rng(0).standard_normal(size)
        expected = chain(values, args.links)

        def run(values=values):
            return np.asarray(chain(dynfuse.asarray(values), args.links))

        for name in ("numpy", args.backend):
            dynfuse.set_backend(name)
            np.testing.assert_allclose(run(), expected, rtol=1e-15)
        dynfuse.set_backend("numpy")
        interpreted = median_time(run, args.repeats)
        dynfuse.set_backend(args.backend)
        run()
        warm = median_time(run, args.repeats)
        cold = median_time(run, args.repeats, before=clear_caches)
        if tiny is None and warm < interpreted:
            tiny = size
        if first_sight is None and cold < interpreted:
            first_sight = size
        repeats = f"{(cold - warm) / (interpreted - warm):.0f}" if warm < interpreted else "never"
        print(
            f"{size:>10} {interpreted * 1e6:>10.1f}us {warm * 1e6:>10.1f}us {cold * 1e6:>10.1f}us "
            f"{warm / interpreted:>12.2f} {cold / interpreted:>12.2f} {repeats:>12}"
        )
    work = None if first_sight is None else first_sight * ops
    print(f"warm beats interpreted from {tiny} elements; cold (plan + compile) from {first_sight}", end=" ")
    print(f"({work} element-ops)")


if __name__ == "__main__":
    main()
