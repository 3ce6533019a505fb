"""What profiling costs: each program of ``examples/`` under ``dynfuse run`` and ``dynfuse run --profile``.

Whole processes are timed, as a user waits for them, the two commands taking turns (each first
every other time) so that the machine's drift falls on both; the kernels come from a disk cache the
first, untimed, run of each filled. The ratio is the profiled run's median time over the plain
run's: the profile's cost.

    python perf/bench_profile.py [--size small|demo] [--runs N] [PROGRAM ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
PROGRAMS = (
    "black_scholes.py",
    "julia.py",
    "heat_diffusion.py",
    "kmeans.py",
    "monte_carlo.py",
    "transformer_mlp.py",
)


def seconds(command: list[str], environment: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return elapsed


def measure(program: str, size: str, runs: int, environment: dict[str, str]) -> tuple[float, float]:
    """The median seconds of the plain and the profiled run."""
    plain = [
        sys.executable,
        "-m",
        "dynfuse",
        "run",
        "--report",
        "none",
        str(EXAMPLES / program),
        "--size",
        size,
    ]
    profiled = [*plain[:4], "--profile", *plain[4:]]
    seconds(profiled, environment)  # fills the disk cache; the profile's own code warmed up in the OS
    times: dict[str, list[float]] = {"plain": [], "profiled": []}
    for run in range(runs):  # in turns, each first every other time
        for name in ("plain", "profiled") if run % 2 == 0 else ("profiled", "plain"):
            times[name].append(seconds(plain if name == "plain" else profiled, environment))
    return statistics.median(times["plain"]), statistics.median(times["profiled"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("small", "demo"), default="demo")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("programs", nargs="*", default=PROGRAMS)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        environment = {**os.environ, "DYNFUSE_CACHE_DIR": cache}
        print(f"| program (--size {arguments.size}) | dynfuse run | with --profile | profiled / plain |")
        print("| --- | ---: | ---: | ---: |")
        ratios = []
        for program in arguments.programs:
            plain, profiled = measure(program, arguments.size, arguments.runs, environment)
            ratios.append(profiled / plain)
            print(f"| {program} | {plain:.3f} s | {profiled:.3f} s | {profiled / plain:.3f} |", flush=True)
        print(f"- geometric mean of the ratios: {statistics.geometric_mean(ratios):.3f}")


if __name__ == "__main__":
    main()
