"""Dispatch overhead: what recording and materializing costs per op, against NumPy doing the work.

Nothing is compiled to machine code yet (the ``groups`` backend runs each planned kernel as NumPy
calls; ``DYNFUSE_BACKEND=numpy`` runs op by op), so this measures overhead: the ratio dynfuse/NumPy
on tiny arrays (overhead dominates) and large ones (it vanishes). Compiled backends are measured
against this baseline. Correctness is checked before anything is timed.

    [DYNFUSE_BACKEND=numpy] python perf/bench_dispatch.py [--repeats N]
"""

import argparse

import numpy as np
from timing import median_time

import dynfuse


def chain(xp_array):
    return np.maximum(xp_array * 2.0, 0.0) + 1.0 - xp_array / 3.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=51)
    repeats = parser.parse_args().repeats
    print(f"dynfuse {dynfuse.__version__}, backend {dynfuse.registry.backend!r}, numpy {np.__version__}")
    print(f"{'elements':>10} {'numpy (median)':>16} {'dynfuse (median)':>18} {'ratio':>7}")
    for size in (10, 1_000, 100_000, 10_000_000):
        values = np.random.default_rng(0).standard_normal(size)
        expected = chain(values)
        np.testing.assert_allclose(np.asarray(chain(dynfuse.asarray(values))), expected, rtol=1e-15)
        chain(values)  # warm up NumPy; the check above warmed dynfuse's probes, plan and kernel
        numpy_time = median_time(lambda values=values: chain(values), repeats)
        lazy_time = median_time(lambda values=values: np.asarray(chain(dynfuse.asarray(values))), repeats)
        ratio = lazy_time / numpy_time
        print(f"{size:>10} {numpy_time * 1e6:>14.1f}us {lazy_time * 1e6:>16.1f}us {ratio:>7.2f}")


if __name__ == "__main__":
    main()
