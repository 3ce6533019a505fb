"""Timing shared by the benchmarks: repeated runs, after whatever warm-up the caller does.

A median says what a run costs; the interquartile range says how far to trust it on a shared,
noisy machine.
"""

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


@dataclass(frozen=True)
class Timing:
    """Seconds per run over repeated runs: the median and the first and third quartiles."""

    median: float
    low: float
    high: float

    @property
    def spread(self) -> float:
        """The interquartile range as a fraction of the median."""
        return (self.high - self.low) / self.median

    def scaled(self, factor: float) -> "Timing":
        return Timing(self.median * factor, self.low * factor, self.high * factor)


def measure(function, repeats, before=None) -> Timing:
    """Time ``function()`` over ``repeats`` runs; ``before()`` runs untimed before each."""
    return measure_interleaved({None: (function, before)}, repeats)[None]


def measure_interleaved(contenders: dict, repeats: int) -> dict:
    """Time each contender, ``name: (function, before)``, over ``repeats`` rounds of one run of each
    in turn: a slow spell of a shared machine then falls on all of them alike, so their ratios
    hold even where the times themselves drift. ``before()`` (or None) runs untimed before each."""
    samples: dict = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, (function, before) in contenders.items():
            if before is not None:
                before()
            start = time.perf_counter()
            function()
            samples[name].append(time.perf_counter() - start)
    return {name: summarize(times) for name, times in samples.items()}


def one_call(function) -> float:
    """Seconds of one call of ``function()``."""
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def looped(function, loops: int):
    """``function`` called ``loops`` times: one sample of a call too quick to time alone."""

    def sample() -> None:
        for _ in range(loops):
            function()

    return sample


def loops_for(functions, sample_seconds: float) -> int:
    """How many calls a sample makes so that the quickest of ``functions`` lasts ``sample_seconds``."""
    return max(1, int(sample_seconds / max(min(map(one_call, functions)), 1e-7)))


def measure_per_call(functions: dict, loops: int, repeats: int) -> dict:
    """Each of ``functions`` (``name: function``) timed per call, in interleaved rounds whose
    samples make ``loops`` calls (``measure_interleaved``)."""
    samples = measure_interleaved({name: (looped(f, loops), None) for name, f in functions.items()}, repeats)
    return {name: timing.scaled(1 / loops) for name, timing in samples.items()}


def measure_in_processes(commands: dict, repeats: int, sample_seconds: float) -> tuple[dict, dict]:
    """Each contender (``name: command``, a process whose code calls ``serve``) timed per call in a
    process of its own, in interleaved rounds (``measure_interleaved``) whose samples make as many
    calls as the quickest contender's call takes to last ``sample_seconds``; with what each reported
    at the end (``serve``'s ``report``). A process's allocator remembers what ran in it: glibc's
    malloc raises its mmap threshold as large blocks are freed, so whether NumPy's temporaries come
    from reused memory or from fresh pages, faulted in one by one, depends on what else the process
    did (a NumPy program took 3.9 ms a call beside dynfuse in one process, 35 ms in its own). A
    script runs in its own process, so each contender does."""
    workers = {
        name: subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for name, command in commands.items()
    }
    try:
        first = {name: float(_answer(worker)) for name, worker in workers.items()}
        loops = max(1, int(sample_seconds / max(min(first.values()), 1e-7)))
        samples: dict = {name: [] for name in workers}
        for _ in range(repeats):
            for name, worker in workers.items():
                samples[name].append(float(_ask(worker, str(loops))) / loops)
        reports = {name: json.loads(_ask(worker, "")) for name, worker in workers.items()}
    finally:
        for worker in workers.values():  # each ends at the end of its input, or is ended
            worker.stdin.close()
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
    return {name: summarize(times) for name, times in samples.items()}, reports


def _ask(worker: subprocess.Popen, line: str) -> str:
    worker.stdin.write(line + "\n")
    worker.stdin.flush()
    return _answer(worker)


def _answer(worker: subprocess.Popen) -> str:
    answer = worker.stdout.readline()
    if not answer:
        raise RuntimeError(f"a timed process ended early: {' '.join(worker.args)}")
    return answer


# A timed process warms up for this many calls and this long at least, then until a call compiles
# nothing and does what the call before it did (its tiers settled: a fresh process's first kernels
# wait until interpreting has cost what starting LLVM would), for this long at most
WARM_UP_CALLS, WARM_UP_SECONDS, WARM_UP_LIMIT = 3, 1.0, 20.0
SETTLING = ("kernels_compiled", "kernels_launched", "interpreted_ops", "replays", "direct_ops")


def warm_up(function: Callable[[], object]) -> None:
    """Call ``function`` until dynfuse's tiers settle (its steady state); a NumPy contender's
    counters never move, so it warms up for the least time. Two calls alike are not settled while
    a kernel's interpreted runs still climb toward its compile (``tiers.climbing_runs``), nor while
    a background compile is in flight (a loaded machine's compile outlasts several calls): once
    they look it, the compiles asked for are waited for, and two more calls must agree."""
    import dynfuse  # the timed process's: imported where it is used, so the copy timing needs none
    from dynfuse import cache, tiers

    started, calls, last, waited = time.perf_counter(), 0, None, False
    while True:
        before, climbing = dynfuse.stats(), tiers.climbing_runs()
        function()
        after = dynfuse.stats()
        done = {key: after[key] - before[key] for key in SETTLING}
        calls, elapsed = calls + 1, time.perf_counter() - started
        # not while a kernel runs interpreted on its way to a compile: calls alike then are a plateau
        settled = done == last and not done["kernels_compiled"] and tiers.climbing_runs() == climbing
        ready = calls >= WARM_UP_CALLS and elapsed >= WARM_UP_SECONDS and settled
        if elapsed > WARM_UP_LIMIT or (ready and waited):
            return
        if ready:
            cache.finish_background_compiles()
            waited, done = True, None
        elif last is not None and not settled:  # what the wait let through changed the calls
            waited = False
        last = done


def serve_warmed(function: Callable[[], object], counters: Callable[[], dict[str, float]]) -> None:
    """``serve`` after ``warm_up``, reporting ``counters()``'s change per call since the warm-up."""
    warm_up(function)
    before = counters()

    def report(calls: int) -> dict[str, float]:
        after = counters()
        return {key: (after[key] - before[key]) / max(calls, 1) for key in after}

    serve(function, report)


def serve(function: Callable[[], object], report: Callable[[int], dict]) -> None:
    """A contender's side of ``measure_in_processes``, after its warm-up: writes the seconds of one
    call of ``function``; then, for each line it reads, calls it that many times and writes the
    seconds they took; on an empty line writes ``report(calls)`` (the count of calls since the warm-up)
    as JSON."""
    print(one_call(function), flush=True)
    calls = 1
    for line in sys.stdin:
        if not line.strip():
            break
        loops = int(line)
        started = time.perf_counter()
        for _ in range(loops):
            function()
        print(time.perf_counter() - started, flush=True)
        calls += loops
    print(json.dumps(report(calls)), flush=True)


def summarize(samples: list[float]) -> Timing:
    if len(samples) == 1:
        return Timing(samples[0], samples[0], samples[0])
    low, _, high = statistics.quantiles(samples, n=4, method="inclusive")
    return Timing(statistics.median(samples), low, high)


def median_time(function, repeats, before=None) -> float:
    """Median seconds of ``function()`` over ``repeats`` runs; ``before()`` runs untimed before each."""
    return measure(function, repeats, before).median


def write_results_section(name: str, section: str, results: Path = RESULTS) -> None:
    """Replace the section of ``results`` (perf/RESULTS.md) between ``<!-- name:start -->`` and
    ``<!-- name:end -->``, or add it at the end; the rest stays."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = results.read_text() if results.exists() else "# Benchmark results on a GPU\n"
    block = f"{start}\n{section}\n{end}"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    results.write_text(text)
