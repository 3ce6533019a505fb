"""The CPU backend's split point, measured: from how many elements do threads pay?

For an elementwise chain and a whole-array sum (float32, kernels compiled and cached) it times each
size on one thread and split across ``DYNFUSE_THREADS`` threads (default: every core), in one run,
interleaved, and reports the smallest size from which the split is faster at every larger size.
``PARALLEL_ELEMENTS`` in ``dynfuse/backends/cpu.py`` records the figure measured here. Correctness
is checked before anything is timed.

    python perf/bench_threads.py [--repeats N]
"""

import argparse

import numpy as np
from timing import median_time

import dynfuse
from dynfuse import config
from dynfuse.backends import cpu

WORKLOADS = {
    "relu(x*2)+1": lambda x: np.maximum(x * 2, 0) + 1,
    "(x*x).sum()": lambda x: (x * x).sum(),
}


def timed(workload, values, threads: int, split_from: int, repeats: int) -> float:
    config.threads, cpu.PARALLEL_ELEMENTS = threads, split_from
    lazy = dynfuse.asarray(values)
    return median_time(lambda: np.asarray(workload(lazy)), repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=51)
    args = parser.parse_args()
    threads = config.threads
    dynfuse.set_backend("cpu")
    config.tiers = False
    print(f"dynfuse {dynfuse.__version__}, backend 'cpu', {threads} threads, numpy {np.__version__}")
    for name, workload in WORKLOADS.items():
        print(f"\n{name}\n{'elements':>10} {'1 thread':>12} {f'{threads} threads':>12} {'ratio':>8}")
        faster_from = None
        for size in [2**k for k in range(10, 23)]:
            values = np.random.default_rng(0).standard_normal(size, dtype=np.float32)
            expected = workload(values.astype(np.float64))
            for split_from in (0, 1 << 62):  # always split, never split
                config.threads, cpu.PARALLEL_ELEMENTS = threads, split_from
                np.testing.assert_allclose(np.asarray(workload(dynfuse.asarray(values))), expected, rtol=1e-4)
            one = timed(workload, values, 1, 1 << 62, args.repeats)
            split = timed(workload, values, threads, 0, args.repeats)
            if split >= one:
                faster_from = None
            elif faster_from is None:
                faster_from = size
            print(f"{size:>10} {one * 1e6:>10.1f}us {split * 1e6:>10.1f}us {split / one:>8.2f}")
        print(f"{name}: {threads} threads are faster from {faster_from} elements on")


if __name__ == "__main__":
    main()
