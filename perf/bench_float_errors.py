"""What NumPy's floating-point error reporting costs compiled kernels: each program on clean data and
on data with 1% NaN (which x86 comparisons flag as invalid, so the kernel's arithmetic reruns by
NumPy), dynfuse against NumPy in the same run, with the reruns counted.

    python perf/bench_float_errors.py [--elements N] [--repeats N]

Results are checked against NumPy first; medians of interleaved rounds (``timing``).
"""

import argparse
import warnings

import numpy
from timing import measure_interleaved

import dynfuse
import dynfuse.numpy as dnp

PROGRAMS = {
    "maximum(x*2, 0) + 1": lambda np, x: np.maximum(x * 2, 0) + 1,
    "where(x > 0, x, 0.1*x)": lambda np, x: np.where(x > 0, x, 0.1 * x),
    "clip(3x, -1, 1) + max(x, 0.5)": lambda np, x: np.clip(x * 3, -1, 1) + np.maximum(x, 0.5),
    "exp(-x*x) * log1p(abs(x))": lambda np, x: np.exp(-x * x) * np.log1p(np.abs(x)),
    "(x > 0).sum() + x.max()": lambda np, x: (x > 0).sum() + x.max(),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1 << 20)
    parser.add_argument("--repeats", type=int, default=21)
    arguments = parser.parse_args()
    rng = numpy.random.default_rng(0)
    clean = rng.standard_normal(arguments.elements)
    with_nan = clean.copy()
    with_nan[::100] = numpy.nan
    print(f"{arguments.elements} float64, medians of {arguments.repeats}; dynfuse {dynfuse.__version__}")
    print("| program | data | NumPy ms | dynfuse ms | dynfuse / NumPy time | reruns per call |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, program in PROGRAMS.items():
        for label, data in (("clean", clean), ("1% NaN", with_nan)):
            lazy = dnp.asarray(data)
            with numpy.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = numpy.asarray(program(numpy, data))
                numpy.testing.assert_allclose(numpy.asarray(program(dnp, lazy)), expected, rtol=1e-12)
            contenders = {
                "NumPy": (lambda data=data, program=program: program(numpy, data), None),
                "dynfuse": (lambda lazy=lazy, program=program: numpy.asarray(program(dnp, lazy)), None),
            }
            for function, _ in contenders.values():  # warm: compiled, replayed, NumPy's memory reused
                for _ in range(3):
                    function()
            dynfuse.reset_stats()
            times = measure_interleaved(contenders, arguments.repeats)
            reruns = dynfuse.stats()["float_error_reruns"] / arguments.repeats
            numpy_ms, lazy_ms = times["NumPy"].median * 1e3, times["dynfuse"].median * 1e3
            cells = [f"`{name}`", label, f"{numpy_ms:.2f}", f"{lazy_ms:.2f}", f"{lazy_ms / numpy_ms:.2f}"]
            print("| " + " | ".join([*cells, f"{reruns:.2g}"]) + " |")


if __name__ == "__main__":
    main()
