"""``python -m dynfuse fuzz``: random programs through dynfuse and NumPy until a budget runs out.

Hypothesis runs in rounds of ``ROUND`` examples, each round seeded from the session's seed, so a run
is repeatable from its seed and stops between rounds when its time is up. A round that finds a
failure shrinks it; the report gives each shrunk program as a snippet to paste into a test.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from hypothesis import HealthCheck, given, seed, settings

from .. import config
from ..stats import stats as counters
from .compare import assert_matches_numpy
from .programs import cases

ROUND = 50


@dataclass
class FuzzReport:
    seed: int
    backend: str
    examples: int = 0  # programs run, shrinking's included
    kernels_compiled: int = 0
    signatures: int = 0  # distinct kernel signatures the examples planned and ran compiled
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"fuzz: {self.examples} examples on the {self.backend} backend in {self.seconds:.1f} s "
            f"(seed {self.seed})",
            f"  kernels: {self.kernels_compiled} compiled, {self.signatures} distinct signatures",
            f"  failures: {len(self.failures)}",
        ]
        for number, failure in enumerate(self.failures, start=1):
            lines += ["", f"--- failure {number} ---", failure]
        return "\n".join(lines)


def fuzz(
    examples: int = 500,
    seed_value: int | None = None,
    backend: str | None = None,
    max_depth: int = 8,
    time_limit: float | None = None,
    progress: TextIO | None = None,
) -> FuzzReport:
    """Run up to ``examples`` random programs (fewer if ``time_limit`` seconds pass first) through
    dynfuse's ``backend`` against NumPy. ``progress``: a stream for a progress bar."""
    chosen = backend or config.backend
    reason = config.unavailable_reason(chosen)
    if reason is not None:
        raise ValueError(f"fuzz: {reason}")
    session_seed = random.randrange(1 << 32) if seed_value is None else seed_value
    report = FuzzReport(session_seed, chosen)
    before = counters()
    started = time.perf_counter()
    strategy = cases(max_depth=max_depth)
    failures: dict[str, None] = {}
    for round_number in range(-(-examples // ROUND)):
        if time_limit is not None and time.perf_counter() - started >= time_limit:
            break
        size = min(ROUND, examples - ROUND * round_number)

        @seed(session_seed * 1_000_003 + round_number)
        @settings(
            max_examples=size,
            database=None,
            deadline=None,
            derandomize=False,
            print_blob=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def check(case: tuple) -> None:
            program, arrays = case
            report.examples += 1
            assert_matches_numpy(program, arrays, backend=chosen)

        try:
            check()
        except AssertionError as failure:
            failures[str(failure)] = None
        except BaseExceptionGroup as group:  # several distinct failures in one round
            for failure in group.exceptions:
                failures[str(failure)] = None
        _show_progress(progress, report.examples, examples, len(failures), time.perf_counter() - started)
    after = counters()
    report.kernels_compiled = after["kernels_compiled"] - before["kernels_compiled"]
    report.signatures = after["cache_misses"] - before["cache_misses"]
    report.seconds = time.perf_counter() - started
    report.failures = list(failures)
    if progress is not None:
        progress.write("\n" if progress.isatty() else "")
    return report


def _show_progress(stream: TextIO | None, done: int, total: int, failures: int, seconds: float) -> None:
    if stream is None:
        return
    width = 30
    filled = width * done // max(total, 1)
    bar = "#" * filled + "." * (width - filled)
    line = f"[{bar}] {done}/{total} examples, {failures} failures, {seconds:.0f} s"
    stream.write(f"\r{line}" if stream.isatty() else f"{line}\n")
    stream.flush()


def main(
    examples: int, seed_value: int | None, backend: str | None, max_depth: int, time_limit: float | None
) -> int:
    report = fuzz(examples, seed_value, backend, max_depth, time_limit, progress=sys.stderr)
    print(report.summary())
    return 1 if report.failures else 0
