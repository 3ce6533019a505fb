"""The example programs as a user runs them: plain ``python`` against ``dynfuse run``, whole processes.

Each example (``examples/*.py``) runs in rounds of three processes: ``python``; ``dynfuse run`` with
an empty disk cache (a first run ever: every kernel compiled, its compile time included); and
``dynfuse run`` again with the cache that run filled (any later run). The first run's own report
(``--report-file``) says how long it spent compiling, on any thread (a background compile overlaps
the run), which a later run does not spend. Each dynfuse run's printed
numbers are first checked against plain Python's (``examples/demo.py``'s comparison): a mismatch
is reported and the benchmark fails. Rounds interleave the three, so a slow spell of a shared
machine falls on all of them alike; medians and interquartile ranges are reported. Interpreter
start and imports are included: what a user waits for.

Writes its section of perf/RESULTS.md; with ``--print-only``, writes nothing.

    python perf/bench_examples.py [--rounds N] [--size demo|small] [--print-only] [EXAMPLE ...]
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from timing import Timing, summarize, write_results_section

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
from demo import numbers_differ  # noqa: E402 (examples/ is not a package)

PROGRAMS = ("black_scholes", "heat_diffusion", "kmeans", "transformer_mlp", "julia", "monte_carlo")


def timed(command: list[str], environment: dict) -> tuple[str, float]:
    """The process's standard output and its wall time; a failed run ends the benchmark."""
    started = time.perf_counter()
    finished = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    seconds = time.perf_counter() - started
    if finished.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({finished.returncode}):\n{finished.stderr}")
    return finished.stdout, seconds


def measure(program: str, size: str, rounds: int) -> dict[str, Timing]:
    script = str(EXAMPLES / f"{program}.py")
    plain = [sys.executable, script, "--size", size]
    samples: dict[str, list[float]] = {"python": [], "first run": [], "later run": [], "compiling": []}
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="dynfuse-bench-examples-") as cache:
            environment = {**os.environ, "DYNFUSE_CACHE_DIR": cache}
            expected, seconds = timed(plain, environment)
            samples["python"].append(seconds)
            report = os.path.join(cache, "report.json")
            for name in ("first run", "later run"):
                fused = [sys.executable, "-m", "dynfuse", "run", "--report", "none", "--report-file", report]
                printed, seconds = timed([*fused, script, "--size", size], environment)
                differing = numbers_differ(expected, printed)
                if differing:
                    sys.exit(f"{program}: dynfuse run printed other numbers:\n" + "\n".join(differing))
                samples[name].append(seconds)
                if name == "first run":
                    with open(report) as written:
                        samples["compiling"].append(json.load(written)["compile_seconds"])
    return {name: summarize(times) for name, times in samples.items()}


def seconds(timing: Timing) -> str:
    return f"{timing.median:.2f} s (±{100 * timing.spread / 2:.0f}%)"


def table(results: dict[str, dict[str, Timing]]) -> str:
    lines = [
        "| program | python | dynfuse run, first (compiles) | compiling | speedup "
        "| dynfuse run, later | speedup |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for program, timings in results.items():
        python, first, later = timings["python"], timings["first run"], timings["later run"]
        compiling = timings["compiling"].median
        lines.append(
            f"| {program} | {seconds(python)} | {seconds(first)} | {compiling:.2f} s | "
            f"{python.median / first.median:.2f}x | {seconds(later)} | {python.median / later.median:.2f}x |"
        )
    return "\n".join(lines)


def section(results: dict[str, dict[str, Timing]], size: str, rounds: int) -> str:
    command = f"python perf/bench_examples.py --rounds {rounds}"
    if size != "demo":
        command += f" --size {size}"
    return "\n".join(
        [
            f"## The examples under `dynfuse run`, measured {datetime.date.today().isoformat()}",
            "",
            f"`{command}`: whole processes at `--size {size}`, the median of {rounds} interleaved rounds",
            "(± half the interquartile range). A first run starts from an empty disk cache, so it compiles",
            "every kernel (how long, on any thread, its own report says: `compile_seconds`); a later",
            "run loads them. Every dynfuse run printed the same numbers as",
            f"`python`. {os.cpu_count()} cores, Python {platform.python_version()}, NumPy {np.__version__}.",
            "",
            table(results),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", choices=("small", "demo"), default="demo")
    parser.add_argument("--print-only", action="store_true", help="print the table, write nothing")
    parser.add_argument("programs", nargs="*", default=PROGRAMS)
    arguments = parser.parse_args()
    results = {}
    for program in arguments.programs:
        results[program] = measure(program, arguments.size, arguments.rounds)
        print(table({program: results[program]}).splitlines()[-1], flush=True)
    text = section(results, arguments.size, arguments.rounds)
    print("\n" + text)
    if not arguments.print_only and tuple(arguments.programs) == PROGRAMS:
        write_results_section("examples", text)


if __name__ == "__main__":
    main()
