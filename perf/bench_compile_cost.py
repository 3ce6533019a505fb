"""What a kernel's compile costs against what interpreting it costs: the numbers behind the CPU
backend's tier policy (``CpuBackend.target.first_sight_work``, ``cpu.COMPILE_WORK_PER_LINE``).

Runs the examples (``examples/*.py``) in this process, every kernel compiled (``DYNFUSE_TIERS=0``),
and for each kernel signature the first time it is launched measures (best of three):

- interpreting it, as the tier policy would (the reference executor on its nodes), against its
  work as the policy counts it (``tiers._interpreting_work``): nanoseconds per unit of work,
  whose median is weighted by the interpreting time (where the policy's choice counts);
- compiling the module a launch calls (LLVM's pipeline and object emission, not the load),
  against that module's lines of IR.

It fits a compile's milliseconds as ``fixed + per_line * lines`` (least relative error) and
expresses both parts in units of interpreted work (that median). Writes its
section of perf/RESULTS.md when it ran every example; with ``--print-only``, writes nothing.

    python perf/bench_compile_cost.py [--size small|demo] [--print-only] [EXAMPLE ...]
"""

import argparse
import contextlib
import datetime
import io
import os
import platform
import statistics
import sys
import time

os.environ["DYNFUSE_TIERS"] = "0"  # every kernel compiled: none is left out of the sample
os.environ["DYNFUSE_DISK_CACHE"] = "0"

import numpy as np
from bench_examples import EXAMPLES, PROGRAMS
from timing import write_results_section

import dynfuse
from dynfuse import execute, registry, runner, tiers
from dynfuse.backends import cpu, llvm_compiler

REPEATS = 3
# Kernels whose interpretation is shorter than this say more about NumPy's call overhead than
# about its passes: left out of the nanoseconds per unit.
SHORTEST_INTERPRETATION = 1e-3


def best_of(function) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def sample_kernels(program: str, size: str) -> list[dict]:
    """Each new kernel signature of ``program``: its work, interpretation, IR lines and compile."""
    samples: list[dict] = []
    seen: set = set()
    launch = execute._Run.run_kernel
    host = cpu._host()

    def measured_launch(run: execute._Run, step: execute.KernelStep) -> None:
        kernel = step.kernel
        if kernel.signature not in seen:
            seen.add(kernel.signature)
            nodes = [run.nodes[number] for number in step.nodes]
            text = cpu._launched_module(kernel).text
            samples.append(
                {
                    "program": program,
                    "work": sum(tiers._interpreting_work(node, cpu.BACKEND.target) for node in nodes),
                    "interpreting": best_of(lambda: run.interpret(step)),
                    "lines": text.count("\n"),
                    "compiling": best_of(lambda: llvm_compiler.compile_ir(host.machine, text, "object")),
                }
            )
        launch(run, step)

    execute._Run.run_kernel = measured_launch
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the example's own printing
            status = runner.run(str(EXAMPLES / f"{program}.py"), ["--size", size], report="none")
    finally:
        execute._Run.run_kernel = launch
    if status != 0:
        sys.exit(f"{program} exited with status {status}")
    return samples


def fit(samples: list[dict]) -> tuple[float, float]:
    """``fixed`` and ``per_line`` (seconds) minimizing the mean |log(predicted / measured)|."""
    lines = np.array([sample["lines"] for sample in samples], float)
    seconds = np.array([sample["compiling"] for sample in samples])
    best = (np.inf, 0.0, 0.0)
    for fixed in np.linspace(0, 0.02, 81):
        for per_line in np.linspace(1e-5, 1e-3, 199):
            error = np.mean(np.abs(np.log((fixed + per_line * lines) / seconds)))
            best = min(best, (error, fixed, per_line))
    return best[1], best[2]


def weighted_median(pairs: list[tuple[float, float]]) -> float:
    """The value of sorted ``(value, weight)`` pairs below which half the weight lies: the rate of
    the kernels where interpreting takes the time, which is where the tier policy's choice counts."""
    weights = np.cumsum([weight for _, weight in pairs])
    return pairs[int(np.searchsorted(weights, weights[-1] / 2))][0]


def report(samples: list[dict], size: str) -> str:
    fixed, per_line = fit(samples)
    timed = sorted(
        (sample["interpreting"] / sample["work"], sample["interpreting"])
        for sample in samples
        if sample["interpreting"] >= SHORTEST_INTERPRETATION and sample["work"] > 0
    )
    rates = [rate for rate, _ in timed]
    per_unit = weighted_median(timed)
    misses = [abs(np.log((fixed + per_line * sample["lines"]) / sample["compiling"])) for sample in samples]
    rows = []
    for program in dict.fromkeys(sample["program"] for sample in samples):
        mine = [sample for sample in samples if sample["program"] == program]
        compiles = [1e3 * sample["compiling"] for sample in mine]
        lines = [sample["lines"] for sample in mine]
        rows.append(
            f"| {program} | {len(mine)} | {min(lines)}-{max(lines)} | "
            f"{min(compiles):.1f}-{max(compiles):.1f} ms | {statistics.median(compiles):.1f} ms |"
        )
    today = datetime.date.today().isoformat()
    return "\n".join(
        [
            f"## What a compile costs, in interpreted work, measured {today}",
            "",
            f"`python perf/bench_compile_cost.py` (examples at `--size {size}`, every kernel compiled; "
            f"best of {REPEATS}): {len(samples)} kernel signatures. The compile is LLVM's pipeline and "
            "object emission for the module a launch calls; interpreting is the reference executor on "
            f"the kernel's nodes. {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"NumPy {np.__version__}, dynfuse {dynfuse.__version__}.",
            "",
            "| program | kernels | lines of IR | compile | median compile |",
            "| --- | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            f"A compile takes {1e3 * fixed:.1f} ms + {1e3 * per_line:.3f} ms per line of IR (the fit's "
            f"median error {100 * (np.exp(statistics.median(misses)) - 1):.0f}%, worst "
            f"{np.exp(max(misses)):.1f}x). Interpreting costs {1e9 * per_unit:.2f} ns per unit of work "
            f"(the median over the {len(rates)} kernels interpreted for 1 ms or more, weighted by that "
            f"time; from "
            f"{1e9 * min(rates):.2f} to {1e9 * max(rates):.2f}). In units of work: a compile's fixed "
            f"part is 2**{np.log2(fixed / per_unit):.1f} and a line 2**{np.log2(per_line / per_unit):.1f}; "
            f"the CPU backend uses 2**{np.log2(cpu.CpuBackend.target.first_sight_work):.0f} and "
            f"2**{np.log2(cpu.COMPILE_WORK_PER_LINE):.0f}.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", default=PROGRAMS)
    parser.add_argument("--size", choices=("small", "demo"), default="demo")
    parser.add_argument("--print-only", action="store_true", help="print the section, write nothing")
    arguments = parser.parse_args()
    registry.set_backend("cpu")
    samples = [sample for program in arguments.programs for sample in sample_kernels(program, arguments.size)]
    section = report(samples, arguments.size)
    print(section)
    if not arguments.print_only and tuple(arguments.programs) == PROGRAMS:
        write_results_section("compile-cost", section)


if __name__ == "__main__":
    main()
