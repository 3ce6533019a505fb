"""`make soak`: one process through 10,000 distinct small traces, then 100,000 repeats of cached ones.

A long-running program must not grow: its caches must evict (kernels, plans, replays, dtype
probes), compiled code must be freed with its kernel, no file may stay open, and throughput must
hold. Every kernel is compiled (``DYNFUSE_TIERS=0``), into a disk cache of its own, so each
distinct trace is a new signature through every cache. Each phase is cut into twenty slices; after
each, the script samples the resident memory (this process's and its LLVM compiler process's), the
open file descriptors and the cache sizes, and checks a sample of results against NumPy. It fails
(exit 1) if memory in the second half of a phase grows by more than ``GROWTH_ALLOWED``, if open
files grow, or if a result is wrong.

Writes its section of perf/RESULTS.md; with ``--print-only``, writes nothing.

    python perf/soak.py [--distinct N] [--repeats N] [--print-only]
"""

import argparse
import datetime
import os
import platform
import resource
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np
from timing import write_results_section

SLICES = 20
GROWTH_ALLOWED = 32 << 20  # bytes of resident memory over a phase's second half
CACHED_TRACES = 16


@dataclass
class Sample:
    done: int
    seconds: float  # this slice's
    resident: int  # bytes, this process's and the compiler process's
    compiler: int  # bytes, the compiler process's
    open_files: int
    caches: dict


def resident_bytes(process: str = "self") -> int:
    try:
        with open(f"/proc/{process}/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize()
    except FileNotFoundError:  # the compiler process, ended as it was sampled
        return 0


def compiler_resident_bytes() -> int:
    """The LLVM compiler process's (see dynfuse.backends.llvm_compiler), where one runs."""
    from dynfuse.backends import cpu

    compiler = cpu._llvm and cpu._llvm.compiler
    return resident_bytes(str(compiler.process.pid)) if compiler and compiler.process else 0


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def cache_sizes() -> dict:
    from dynfuse import cache, dtypes, replay, schedule, tiers

    return {
        "kernels": len(cache.kernels._entries),
        "plans": len(schedule.plans._entries),
        "replays": len(replay._replays),
        "sightings": len(tiers._sightings),
        "dtype probes": len(dtypes._result_dtypes),
    }


def distinct_trace(number: int):
    """A trace no other number makes: its length (so a kernel signature of its own), an integer
    scalar NumPy's promotion is asked about by value, and one of a few op mixes."""
    import dynfuse

    length = 1 + number
    values = np.arange(length, dtype=np.int64) - length // 2
    x = dynfuse.asarray(values)
    scalar = 1000 + number  # beyond [0, 127]: promotion is probed for each value
    kind = number % 4
    if kind == 0:
        lazy, expected = x * scalar + 1, values * scalar + 1
    elif kind == 1:
        lazy, expected = (x - scalar) // 7, (values - scalar) // 7
    elif kind == 2:
        lazy, expected = np.maximum(x, scalar % 50) * 0.5, np.maximum(values, scalar % 50) * 0.5
    else:
        lazy, expected = (x * 2 + scalar).sum(), (values * 2 + scalar).sum()
    return lazy, expected


def cached_trace(number: int):
    import dynfuse

    data = np.linspace(-3, 3, 257 + number % CACHED_TRACES)
    x = dynfuse.asarray(data)
    return np.exp(x * 0.5) + 1.5, np.exp(data * 0.5) + 1.5


def run_phase(name: str, count: int, make) -> list[Sample]:
    samples = []
    per_slice = max(count // SLICES, 1)
    done = 0
    while done < count:
        started = time.perf_counter()
        for number in range(done, min(done + per_slice, count)):
            lazy, expected = make(number)
            value = np.asarray(lazy)
            if number % 97 == 0:  # a sample of results, checked (the others only computed)
                np.testing.assert_allclose(value, expected, rtol=1e-12, err_msg=f"{name} {number}")
        done = min(done + per_slice, count)
        seconds, compiler = time.perf_counter() - started, compiler_resident_bytes()
        samples.append(
            Sample(done, seconds, resident_bytes() + compiler, compiler, open_files(), cache_sizes())
        )
        print(
            f"{name}: {done}/{count}, {per_slice / samples[-1].seconds:8.0f} traces/s, "
            f"{samples[-1].resident >> 20} MiB resident ({compiler >> 20} the compiler's), "
            f"{samples[-1].open_files} open files",
            file=sys.stderr,
            flush=True,
        )
    return samples


def second_half_growth(samples: list[Sample]) -> int:
    """Resident bytes gained from the middle of a phase to its highest point after: the first
    half fills the caches, the second must not grow."""
    middle = len(samples) // 2
    return max(sample.resident for sample in samples[middle:]) - samples[middle].resident


def verdicts(samples: list[Sample]) -> list[str]:
    """What went wrong in a phase, if anything. Open files are counted from the first slice: by its
    end the compiler process (and its two pipes) has started."""
    problems = []
    growth = second_half_growth(samples)
    if growth > GROWTH_ALLOWED:
        traces = samples[-1].done - samples[len(samples) // 2].done
        per_trace = growth / traces / 1024
        problems.append(
            f"resident memory grew {growth >> 20} MiB over the second half ({per_trace:.0f} KiB a trace)"
        )
    first, most = samples[0].open_files, max(sample.open_files for sample in samples)
    if most > first:
        problems.append(f"open files grew from {first} to {most}")
    return problems


def phase_row(name: str, count: int, samples: list[Sample]) -> str:
    rates = [
        (samples[0].done if index == 0 else sample.done - samples[index - 1].done) / sample.seconds
        for index, sample in enumerate(samples)
    ]
    half, last, growth = samples[len(samples) // 2], samples[-1], second_half_growth(samples)
    caches = ", ".join(f"{key} {value}" for key, value in last.caches.items())
    seconds = sum(sample.seconds for sample in samples)
    return (
        f"| {name} | {count} | {seconds:.0f} s | {min(rates):.0f} / {np.median(rates):.0f} "
        f"/ {max(rates):.0f} "
        f"| {half.resident >> 20} → {last.resident >> 20} MiB (+{growth >> 20}; compiler "
        f"{last.compiler >> 20}) | "
        f"{max(s.open_files for s in samples)} | {caches} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distinct", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=100_000)
    parser.add_argument("--print-only", action="store_true", help="print the table, write nothing")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dynfuse-soak-") as cache_dir:
        os.environ["DYNFUSE_CACHE_DIR"] = cache_dir
        os.environ["DYNFUSE_TIERS"] = "0"
        import dynfuse

        open_at_start = open_files()
        distinct = run_phase("distinct traces", arguments.distinct, distinct_trace)
        repeated = run_phase("repeats of cached traces", arguments.repeats, cached_trace)
        problems = verdicts(distinct) + verdicts(repeated)
        counters = dynfuse.stats()
    lines = [
        f"## Soak, measured {datetime.date.today().isoformat()}",
        "",
        f"`python perf/soak.py` (`make soak`): one process, every kernel compiled (`DYNFUSE_TIERS=0`), "
        f"{SLICES} slices per phase. {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"NumPy {np.__version__}, dynfuse {dynfuse.__version__} (backend {dynfuse.registry.backend}).",
        "",
        "| phase | traces | time | traces/s per slice: min / median / max "
        "| resident with the compiler process, half → end (growth; the compiler's at the end) "
        "| open files, most | cache entries at the end |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
        phase_row("distinct traces", arguments.distinct, distinct),
        phase_row("repeats of cached traces", arguments.repeats, repeated),
        "",
        f"Kernels compiled: {counters['kernels_compiled']:.0f}; replays run: {counters['replays']:.0f}; "
        f"fallbacks: {counters['fallbacks']:.0f}. Open files at the start: {open_at_start}.",
        "Verdict: "
        + ("; ".join(problems) if problems else "bounded memory, no open files gained, results right."),
    ]
    text = "\n".join(lines)
    print("\n" + text)
    if not arguments.print_only:
        write_results_section("soak", text)
    return 1 if problems or counters["fallbacks"] else 0


if __name__ == "__main__":
    sys.exit(main())
