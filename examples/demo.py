"""``make demo``: unmodified NumPy programs, run by plain Python and by ``dynfuse run``.

For each program: the wall time of ``python PROGRAM`` and of ``dynfuse run PROGRAM`` (twice: a first
run compiles the kernels, or finds them in the disk cache from an earlier demo; a second run, as any
later run of a script, loads them from the disk cache), the speedup, the check that both printed the
same numbers, and dynfuse's report of the second run. Whole processes are timed, interpreter start
and imports included: what a user waits for.

    python examples/demo.py [--size small|demo] [PROGRAM ...]
"""

from __future__ import annotations

import argparse
import math
import re
import subprocess
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
DEFAULT_PROGRAMS = ("black_scholes.py", "julia.py")
# Printed numbers agree to float32 rounding, amplified a little by sums of millions of terms.
RELATIVE_TOLERANCE = 1e-4
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan")


def timed_run(command: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if finished.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({finished.returncode}):\n{finished.stderr}")
    return finished, elapsed


def numbers_differ(expected: str, printed: str) -> list[str]:
    """The lines whose words or numbers differ beyond rounding; empty when the outputs agree."""
    expected_lines, printed_lines = expected.splitlines(), printed.splitlines()
    if len(expected_lines) != len(printed_lines):
        return [f"{len(expected_lines)} lines under python, {len(printed_lines)} under dynfuse"]
    differing = []
    for ours, theirs in zip(expected_lines, printed_lines, strict=True):
        words_equal = _NUMBER.sub("#", ours) == _NUMBER.sub("#", theirs)
        pairs = zip(_NUMBER.findall(ours), _NUMBER.findall(theirs), strict=False)
        if not words_equal or not all(
            math.isclose(float(a), float(b), rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-6)
            or (math.isnan(float(a)) and math.isnan(float(b)))
            for a, b in pairs
        ):
            differing.append(f"python: {ours}\ndynfuse: {theirs}")
    return differing


def demonstrate(program: str, size: str) -> bool:
    script = str(EXAMPLES / program)
    plain, plain_seconds = timed_run([sys.executable, script, "--size", size])
    dynfuse_run = [sys.executable, "-m", "dynfuse", "run", script, "--size", size]
    _, first_seconds = timed_run(dynfuse_run)
    fused, fused_seconds = timed_run(dynfuse_run)
    print(f"== {program} (--size {size})")
    print(plain.stdout.rstrip())
    differing = numbers_differ(plain.stdout, fused.stdout)
    print(f"\ndynfuse run printed {'the same results' if not differing else 'DIFFERENT results:'}")
    for lines in differing:
        print(lines)
    print(f"python:                   {plain_seconds:6.2f} s")
    print(f"dynfuse run, first run:   {first_seconds:6.2f} s")
    print(f"dynfuse run, second run:  {fused_seconds:6.2f} s   speedup {plain_seconds / fused_seconds:.2f}x")
    print("\nthe second run's report:")
    print(fused.stderr.rstrip(), end="\n\n")
    return not differing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("small", "demo"), default="demo")
    parser.add_argument("programs", nargs="*", default=DEFAULT_PROGRAMS, help="scripts in examples/")
    arguments = parser.parse_args()
    results = [demonstrate(program, arguments.size) for program in arguments.programs]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
