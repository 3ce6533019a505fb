"""A fused kernel right after a matmul: what BLAS's idle threads cost dynfuse's.

OpenBLAS's threads spin for a while after each call (``OPENBLAS_THREAD_TIMEOUT``: 2**28 cycles by
default) before they sleep. A kernel that dynfuse splits across every core right after a matmul
shares those cores with them. This times transformer_mlp's GELU (float32, 2048 x 2048) through
dynfuse on one thread and on every core, and through NumPy, each alone and right after a matmul,
interleaved, medians. Correctness is checked first. Compare a run under
``OPENBLAS_THREAD_TIMEOUT=4`` (idle threads sleep at once) or ``OPENBLAS_NUM_THREADS=1``.

    python perf/bench_blas_spin.py [--repeats N]
"""

import argparse
import math
import os
import statistics
import time

import numpy

import dynfuse
import dynfuse.numpy as lazy_numpy
from dynfuse import config

SCALE = math.sqrt(2 / math.pi)
SETTLE_SECONDS = 0.5  # OpenBLAS's default spin, 2**28 cycles, is about 0.1 s


def gelu(np, x):
    return 0.5 * x * (1.0 + np.tanh(SCALE * (x + 0.044715 * x**3)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25)
    args = parser.parse_args()
    dynfuse.set_backend("cpu")
    config.tiers = False
    rng = numpy.random.default_rng(0)
    left = rng.standard_normal((2048, 512), dtype=numpy.float32)
    right = rng.standard_normal((512, 2048), dtype=numpy.float32)
    x = left @ right
    lazy = lazy_numpy.asarray(x)
    numpy.testing.assert_allclose(numpy.asarray(gelu(lazy_numpy, lazy)), gelu(numpy, x), rtol=1e-5, atol=1e-6)
    cores = config.threads

    def fused() -> None:
        numpy.asarray(gelu(lazy_numpy, lazy))

    runs = {  # name: (what runs, dynfuse's threads)
        "numpy": (lambda: gelu(numpy, x), cores),
        "dynfuse, 1 thread": (fused, 1),
        f"dynfuse, {cores} threads": (fused, cores),
    }
    times = {(name, after): [] for name in runs for after in (False, True)}
    for _ in range(args.repeats):
        for (name, after), samples in times.items():
            run, config.threads = runs[name]
            if after:
                left @ right
            else:
                time.sleep(SETTLE_SECONDS)  # past any spinning from the last matmul
            started = time.perf_counter()
            run()
            samples.append(time.perf_counter() - started)
    config.threads = cores
    timeout = os.environ.get("OPENBLAS_THREAD_TIMEOUT", "unset")
    print(f"{cores} cores, NumPy {numpy.__version__}, OPENBLAS_THREAD_TIMEOUT {timeout}")
    print(f"medians of {args.repeats} interleaved rounds")
    print("| run | alone | right after a matmul | slower by |")
    print("| --- | ---: | ---: | ---: |")
    for name in runs:
        alone, after = (statistics.median(times[name, flag]) for flag in (False, True))
        print(f"| {name} | {1e3 * alone:.1f} ms | {1e3 * after:.1f} ms | {after / alone:.2f}x |")


if __name__ == "__main__":
    main()
