"""``python -m dynfuse fuzz``: random programs through dynfuse and NumPy until a budget runs out.

Hypothesis runs in rounds of ``ROUND`` examples, each round seeded from the session's seed, so a run
is repeatable from its seed and stops between rounds when its time is up. A round that finds a
failure shrinks it; the report gives each shrunk program as a snippet to paste into a test. With
``faults``, planning, compiles and launches fail at random throughout (``faults.injected_faults``):
every program must still give NumPy's result, through the reference executor.
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TextIO

from hypothesis import HealthCheck, given, seed, settings

from .. import registry
from ..stats import stats as counters
from .compare import assert_matches_numpy
from .faults import injected_faults
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
    fault_rate: float = 0.0
    faults_injected: Counter[str] = field(default_factory=Counter)  # by place: compile, launch, planning

    def summary(self) -> str:
        lines = [
            f"fuzz: {self.examples} examples on the {self.backend} backend in {self.seconds:.1f} s "
            f"(seed {self.seed})",
            f"  kernels: {self.kernels_compiled} compiled, {self.signatures} distinct signatures",
        ]
        if self.fault_rate:
            injected = sorted(self.faults_injected.items())
            places = ", ".join(f"{count} in {place}" for place, count in injected) or "none"
            total = sum(self.faults_injected.values())
            lines.append(f"  faults injected at rate {self.fault_rate}: {total} ({places})")
        lines += [f"  failures: {len(self.failures)}"]
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
    faults: float = 0.0,
) -> FuzzReport:
    """Run up to ``examples`` random programs (fewer if ``time_limit`` seconds pass first) through
    dynfuse's ``backend`` against NumPy; with ``faults``, planning, compiles and launches failing at
    that rate. ``progress``: a stream for a progress bar."""
    chosen = backend or registry.backend
    reason = registry.unavailable_reason(chosen)
    if reason is not None:
        raise ValueError(f"fuzz: {reason}")
    session_seed = random.randrange(1 << 32) if seed_value is None else seed_value
    report = FuzzReport(session_seed, chosen, fault_rate=faults)
    injecting = injected_faults(faults, session_seed, chosen) if faults else contextlib.nullcontext(Counter())
    with injecting as injected:
        _run_rounds(report, examples, max_depth, time_limit, progress)
    report.faults_injected = injected
    return report


def _run_rounds(
    report: FuzzReport, examples: int, max_depth: int, time_limit: float | None, progress: TextIO | None
) -> None:
    chosen, session_seed = report.backend, report.seed
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
    examples: int,
    seed_value: int | None,
    backend: str | None,
    max_depth: int,
    time_limit: float | None,
    faults: float = 0.0,
) -> int:
    report = fuzz(examples, seed_value, backend, max_depth, time_limit, progress=sys.stderr, faults=faults)
    print(report.summary())
    return 1 if report.failures else 0
