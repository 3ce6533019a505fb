"""`make bench`: dynfuse against NumPy, numexpr and Numba, as fractions of the machine's memory bandwidth.

Every implementation of every workload (``bench_workloads.py``) is first checked against a float64
reference: a wrong result is reported FAIL and not timed. Then each is warmed up and timed: the
median and interquartile range of repeated runs. The machine's limit is measured in the same run,
as a large copy counted as bytes read plus bytes written. A workload's effective bandwidth is the
fewest bytes it must move (its inputs read once, its outputs written once) over its median time,
reported as a fraction of that limit. Also measured, against the issue's targets: compiling a new
kernel (cold, and from the disk cache in a new process) and the dispatch overhead of a small cached
trace. A peer that is not installed is skipped with a note, never replaced.

Writes the section of perf/RESULTS.md between its bench markers, and perf/bench_bandwidth.png;
with ``--only``, runs the workloads whose name contains the text, prints their table, and writes
nothing.

    python perf/bench.py [--quick] [--backend NAME] [--repeats N] [--only TEXT]
"""

import argparse
import datetime
import functools
import importlib
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from bench_workloads import WORKLOADS, Workload
from compile_probe import ELEMENTS as COMPILE_PROBE_ELEMENTS
from timing import Timing, measure, measure_interleaved, warm_up, write_results_section

import dynfuse
from dynfuse import config, registry

PERF = Path(__file__).resolve().parent
CHART = PERF / "bench_bandwidth.png"
COMPILE_PROBE = PERF / "compile_probe.py"
TEXT_WIDTH = 100  # RESULTS.md's prose is wrapped; its tables are not

IMPLEMENTATIONS = ("dynfuse", "NumPy", "numexpr", "Numba")
COPY_ELEMENTS = 2**26
DISPATCH_ELEMENTS = 1000
TRACES_PER_SAMPLE = 200
COLD_COMPILE_TARGET_MS = 50
WARM_START_TARGET_MS = 5
DISPATCH_TARGET = 2


@dataclass(frozen=True)
class Scale:
    elements: int
    repeats: int
    kernels: int  # new kernels compiled per compile measurement


FULL, QUICK = Scale(2**25, 9, 21), Scale(2**22, 5, 7)


def import_peer(module_name, package):
    """The peer's module, or None and a note if its package is not installed."""
    try:
        return importlib.import_module(module_name), None
    except ModuleNotFoundError as error:
        if error.name != package:
            raise
        return None, f"{package} is not installed: its column is skipped."


NUMBA_PEER, NUMBA_MISSING = import_peer("bench_numba", "numba")
NUMEXPR_PEER, NUMEXPR_MISSING = import_peer("bench_numexpr", "numexpr")
NUMEXPR_METHOD = (
    "numexpr runs Black-Scholes, softmax, layernorm and the column variance in steps (d1, d2, k, "
    "the normal CDFs; the row or column max or mean, then the rest), each step writing an array; "
    "float literals are passed as float32 operands, so that it computes in float32."
)
NUMBA_METHOD = (
    "Numba: hand-written `parallel=True` loops over `prange`, float32 constants, fastmath off; sums "
    "keep 16 float32 accumulators (NumPy's pairwise sum keeps 8), since with fastmath off one "
    "accumulator makes every add wait for the one before; the dot product sums blocks of 4096, then "
    "the blocks' sums; column reductions give each thread a range of rows, reduced into a row of "
    "partial results of its own, combined after."
)


def default_backend():
    return "cpu" if "cpu" in registry.BACKENDS else "groups"


def ndarrays(result):
    """An implementation's result as a tuple of arrays. Numba boxes a float32 scalar as a Python
    float, so that is taken as the float32 it was."""
    results = result if isinstance(result, tuple) else (result,)
    return tuple(np.asarray(np.float32(value) if isinstance(value, float) else value) for value in results)


def float32_scalars(inputs):
    return {name: np.float32(value) if isinstance(value, float) else value for name, value in inputs.items()}


def dynfuse_run(workload, inputs):
    """Record the workload on LazyArrays and materialize its outputs in one plan, as a user would."""
    lazy = {
        name: dynfuse.asarray(value) if isinstance(value, np.ndarray) else value
        for name, value in inputs.items()
    }
    outputs = workload.compute(**lazy)
    dynfuse.evaluate(*(outputs if isinstance(outputs, tuple) else (outputs,)))
    return ndarrays(outputs)


def runners(workload, inputs):
    """Per implementation, a function running the workload on ``inputs``, or why there is none."""
    # NumPy first: its outputs set the dtypes expected of every implementation and the bytes written.
    found = {
        "NumPy": lambda: ndarrays(workload.compute(**inputs)),
        "dynfuse": lambda: dynfuse_run(workload, inputs),
        "numexpr": NUMEXPR_MISSING,
        "Numba": NUMBA_MISSING,
    }
    if NUMEXPR_PEER is not None:
        function = getattr(NUMEXPR_PEER, workload.compute.__name__, None)  # same name, by convention
        found["numexpr"] = (lambda: ndarrays(function(**inputs))) if function else "no numexpr version."
    if NUMBA_PEER is not None:
        loop, numba_inputs = getattr(NUMBA_PEER, workload.compute.__name__, None), float32_scalars(inputs)
        found["Numba"] = (lambda: ndarrays(loop(**numba_inputs))) if loop else "no Numba loop."
    return found


def mismatch(outputs, reference, expected_dtypes, workload):
    """Why ``outputs`` are not the workload's results within its tolerance, or None if they are."""
    if len(outputs) != len(reference):
        return f"{len(outputs)} outputs instead of {len(reference)}"
    for got, want, dtype in zip(outputs, reference, expected_dtypes, strict=True):
        if got.shape != want.shape or got.dtype != dtype:
            return f"{got.dtype}{got.shape} instead of {dtype}{want.shape}"
        if not np.allclose(got, want, rtol=workload.rtol, atol=workload.atol):
            error = np.max(np.abs(got.astype(np.float64) - want))
            return f"off by up to {error:.3g} (rtol {workload.rtol:g}, atol {workload.atol:g})"
    return None


@dataclass
class Row:
    workload: Workload
    shape: tuple
    bytes_moved: int = 0
    # Per implementation: its Timing, or the reason it has none ("FAIL: ..." or a skip note).
    results: dict = field(default_factory=dict)
    dynfuse_note: str = ""


def run_workload(workload, elements, repeats, rng):
    inputs = workload.make_inputs(elements, rng)
    arrays = [value for value in inputs.values() if isinstance(value, np.ndarray)]
    widened = {
        name: value.astype(np.float64) if isinstance(value, np.ndarray) else value
        for name, value in inputs.items()
    }
    reference = ndarrays(workload.compute(**widened))
    del widened
    row = Row(workload, arrays[0].shape)
    for name, run in runners(workload, inputs).items():
        if isinstance(run, str):
            row.results[name] = run
            continue
        try:
            outputs = run()
        except Exception as error:  # a peer that cannot run the workload is reported, not fatal
            row.results[name] = f"FAIL: raised {type(error).__name__}: {error}"
            print(f"  {workload.name}: {name} {row.results[name]}", flush=True)
            continue
        if name == "NumPy":
            expected_dtypes = [output.dtype for output in outputs]
            row.bytes_moved = sum(array.nbytes for array in arrays) + sum(output.nbytes for output in outputs)
        problem = mismatch(outputs, reference, expected_dtypes, workload)
        del outputs
        if problem:
            row.results[name] = f"FAIL: {problem}"
            print(f"  {workload.name}: {name} {row.results[name]}", flush=True)
            continue
        if name == "dynfuse":  # until its kernels are compiled (a run interpreted is not its speed)
            warm_up(run)
            dynfuse.reset_stats()
        else:
            run()  # warm-up, after the check's first run
        row.results[name] = measure(run, repeats)
        if name == "dynfuse":
            row.dynfuse_note = dynfuse_activity(repeats)
        print(f"  {workload.name}: {name} {row.results[name].median * 1e3:.2f} ms", flush=True)
    return row


def dynfuse_activity(calls):
    """What dynfuse did per call, from its counters: kernels, op-by-op work, fallbacks."""
    stats = dynfuse.stats()
    note = f"{stats['kernels_launched'] / calls:g} kernel(s)"
    if stats["interpreted_ops"]:
        note += f", {stats['interpreted_ops'] / calls:g} op(s) interpreted"
    if stats["fallback_names"]:
        note += f", fallbacks {stats['fallback_names']}"
    return note


def measure_bandwidth_limit(repeats):
    """Bytes read plus bytes written per second by a large copy, per way of copying."""
    source = np.random.default_rng(1).random(COPY_ELEMENTS, dtype=np.float32)
    destination = np.zeros_like(source)
    copies = {"np.copyto": lambda: np.copyto(destination, source)}
    if NUMBA_PEER is not None:
        copies["Numba parallel copy"] = lambda: NUMBA_PEER.copy(source, destination)
    rates = {}
    for name, copy in copies.items():
        destination.fill(0)
        copy()
        if not np.array_equal(destination, source):
            raise RuntimeError(f"{name} did not copy")
        rates[name] = 2 * source.nbytes / measure(copy, repeats).median
    return rates


def probe(mode, backend, kernels, environment):
    """The compile probe's per-kernel samples, from a new process with ``environment`` added."""
    command = [sys.executable, str(COMPILE_PROBE), mode, "--backend", backend, "--kernels", str(kernels)]
    completed = subprocess.run(
        command, env=os.environ | environment, capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"compile probe {mode} failed:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout)


def median_of(samples, key):
    return float(np.median([sample[key] for sample in samples]))


def measure_compile(backend, kernels):
    """Cold compiles with no disk cache, then loads from a disk cache another process filled."""
    with tempfile.TemporaryDirectory(prefix="dynfuse-bench-") as directory:
        compile_everything = {"DYNFUSE_TIERS": "0"}
        cold = probe(
            "cold",
            backend,
            kernels,
            compile_everything | {"DYNFUSE_DISK_CACHE": "0", "DYNFUSE_CACHE_DIR": f"{directory}/cold"},
        )
        shared = compile_everything | {"DYNFUSE_CACHE_DIR": f"{directory}/shared"}
        probe("write", backend, kernels, shared)
        warm = probe("read", backend, kernels, shared)
    return cold, warm


def ten_op_chain(x):
    """Ten elementwise ops: x*2, +1, maximum, *x, -0.5, abs, /3, +x, minimum, *0.5."""
    return np.minimum(np.abs(np.maximum(x * 2 + 1, 0) * x - 0.5) / 3 + x, 4) * 0.5


def measure_dispatch(repeats):
    """Microseconds per trace, recorded and materialized, after everything is cached; NumPy and
    each tier setting timed in turn (``measure_interleaved``)."""
    values = np.random.default_rng(2).standard_normal(DISPATCH_ELEMENTS, dtype=np.float32)
    expected = ten_op_chain(values)

    def lazy_chain():
        return np.asarray(ten_op_chain(dynfuse.asarray(values)))

    def traces(run):
        def sample():
            for _ in range(TRACES_PER_SAMPLE):
                run()

        return sample

    configured = config.tiers
    contenders = {"NumPy": (traces(lambda: ten_op_chain(values)), None)}
    try:
        for tiers, name in ((True, "dynfuse, default tiers"), (False, "dynfuse, DYNFUSE_TIERS=0")):
            setting = functools.partial(setattr, config, "tiers", tiers)
            setting()
            np.testing.assert_allclose(lazy_chain(), expected, rtol=1e-6)
            # Cached as the target means it: past the repeats after which the tier policy compiles it.
            for _ in range(registry.BACKENDS["cpu"].target.tiny_repeats + 1):
                lazy_chain()
            contenders[name] = (traces(lazy_chain), setting)
        times = measure_interleaved(contenders, repeats)
    finally:
        config.tiers = configured
    return {name: timing.scaled(1e6 / TRACES_PER_SAMPLE) for name, timing in times.items()}


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def milliseconds(result):
    if isinstance(result, Timing):
        return f"{result.median * 1e3:.2f} ±{result.spread * 50:.0f}%"
    return "FAIL" if result.startswith("FAIL") else "skipped"


def speed_ratio(row, peer):
    """dynfuse's throughput over the peer's, or None where either has no time."""
    ours, theirs = row.results["dynfuse"], row.results[peer]
    if isinstance(ours, Timing) and isinstance(theirs, Timing):
        return theirs.median / ours.median
    return None


def fraction(row, name, limit):
    result = row.results[name]
    return row.bytes_moved / result.median / limit if isinstance(result, Timing) else None


def verdict(ratio, target, peer):
    if ratio is None:
        return f"≥{target:g}x {peer}: no figure"
    return f"≥{target:g}x {peer}: {'met' if ratio >= target else 'missed'}"


def workload_table(rows, limit):
    header = (
        "| workload | shape | dynfuse ms | NumPy ms | numexpr ms | Numba ms "
        "| speed vs Numba | speed vs NumPy | fraction of limit: dynfuse | NumPy | numexpr | Numba | target |"
    )
    lines = [header, "| --- | --- |" + " ---: |" * 10 + " --- |"]
    for row in rows:
        ratios = [speed_ratio(row, peer) for peer in ("Numba", "NumPy")]
        fractions = [fraction(row, name, limit) for name in IMPLEMENTATIONS]
        targets = [verdict(ratios[0], row.workload.numba_target, "Numba")]
        if row.workload.numpy_target is not None:
            targets.append(verdict(ratios[1], row.workload.numpy_target, "NumPy"))
        cells = [
            row.workload.name,
            "x".join(map(str, row.shape)),
            *(milliseconds(row.results[name]) for name in IMPLEMENTATIONS),
            *("—" if ratio is None else f"{ratio:.2f}x" for ratio in ratios),
            *("—" if value is None else f"{value:.2f}" for value in fractions),
            "; ".join(targets),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def workload_notes(rows):
    activity = "; ".join(f"{row.workload.name}: {row.dynfuse_note or 'not timed'}" for row in rows)
    notes = [f"dynfuse per call: {activity}."]
    for row in rows:
        for name in IMPLEMENTATIONS:
            result = row.results[name]
            if isinstance(result, str) and result.startswith("FAIL"):
                notes.append(f"{row.workload.name}: **{name} {result}**, so it was not timed.")
    return notes


def compile_table(cold, warm, dispatch):
    cold_first = median_of(cold, "first_ms")
    warm_first = median_of(warm, "first_ms")
    disk_hits = sum(sample["disk_cache_hits"] for sample in warm)
    recompiled = sum(sample["kernels_compiled"] for sample in warm)
    warm_verdict = "met" if warm_first < WARM_START_TARGET_MS else "missed"
    if disk_hits < len(warm):
        warm_verdict = (
            f"not measured: {recompiled:g} of {len(warm)} kernels compiled again, {disk_hits:g} disk hits"
        )
    numpy_dispatch = dispatch["NumPy"].median
    cold_note = (
        f"backend compile {median_of(cold, 'compile_ms'):.2f} ms; "
        f"cached {median_of(cold, 'cached_ms'):.2f} ms"
    )
    warm_note = (
        f"slowest {max(sample['first_ms'] for sample in warm):.2f} ms; "
        f"backend compile {median_of(warm, 'compile_ms'):.2f} ms; {disk_hits:g} disk hits"
    )
    lines = [
        "| measurement | dynfuse | for comparison | target | verdict |",
        "| --- | ---: | --- | --- | --- |",
        f"| cold compile: first materialization of a new kernel (median of {len(cold)}) "
        f"| {cold_first:.2f} ms | {cold_note} | < {COLD_COMPILE_TARGET_MS} ms "
        f"| {'met' if cold_first < COLD_COMPILE_TARGET_MS else 'missed'} |",
        f"| warm start: new process, kernel compiled by an earlier one (median of {len(warm)}) "
        f"| {warm_first:.2f} ms | {warm_note} | < {WARM_START_TARGET_MS} ms | {warm_verdict} |",
    ]
    for name, timing in dispatch.items():
        if name != "NumPy":
            ratio = timing.median / numpy_dispatch
            lines.append(
                f"| dispatch, 10-op trace on {DISPATCH_ELEMENTS} float32 ({name}) | {timing.median:.1f} µs "
                f"±{timing.spread * 50:.0f}% | NumPy eager {numpy_dispatch:.1f} µs: {ratio:.1f}x "
                f"| < {DISPATCH_TARGET}x NumPy | {'met' if ratio < DISPATCH_TARGET else 'missed'} |"
            )
    return "\n".join(lines)


def draw_chart(rows, limit):
    """A grouped bar chart of each workload's fraction of the limit, per implementation."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(11, 5))
    width = 0.8 / len(IMPLEMENTATIONS)
    for offset, name in enumerate(IMPLEMENTATIONS):
        values = [fraction(row, name, limit) for row in rows]
        positions = [index + (offset - 1.5) * width for index in range(len(rows))]
        label = name if any(value is not None for value in values) else f"{name} (no figures)"
        axes.bar(positions, [np.nan if value is None else value for value in values], width, label=label)
    axes.axhline(1, color="black", linewidth=0.8)
    axes.set_xticks(range(len(rows)), [row.workload.name for row in rows])
    axes.set_ylabel("effective bandwidth / copy bandwidth")
    axes.set_title(f"Fraction of the measured memory bandwidth ({limit / 1e9:.1f} GB/s), {cpu_model()}")
    axes.legend()
    figure.tight_layout()
    figure.savefig(CHART, dpi=120)
    pyplot.close(figure)


def versions():
    found = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    for name, peer, package in (("numexpr", NUMEXPR_PEER, "numexpr"), ("Numba", NUMBA_PEER, "numba")):
        if peer is not None:
            found.append(f"{name} {importlib.import_module(package).__version__}")
    return ", ".join(found)


def wrap(text, bullet=False):
    indents = {"initial_indent": "- ", "subsequent_indent": "  "} if bullet else {}
    return textwrap.fill(text, TEXT_WIDTH, break_long_words=False, break_on_hyphens=False, **indents)


@dataclass(frozen=True)
class Run:
    """What one run of the benchmark measured, and how."""

    backend: str
    quick: bool
    repeats: int
    threads: int
    load: float
    rates: dict
    rows: list
    cold: list
    warm: list
    dispatch: dict


def results_section(run, chart_line):
    limit = max(run.rates.values())
    notes = [note for note in (NUMEXPR_MISSING, NUMBA_MISSING) if note]
    if run.quick:
        notes.append("`--quick` is a smoke test: arrays this small may fit in cache; fractions can mislead.")
    notes += workload_notes(run.rows)
    notes += [method for peer, method in ((NUMEXPR_PEER, NUMEXPR_METHOD), (NUMBA_PEER, NUMBA_METHOD)) if peer]
    return "\n".join(
        [
            "## `make bench`: dynfuse against NumPy, numexpr and Numba",
            "",
            wrap(
                f"Machine: {cpu_model()}, {run.threads} cores ({platform.machine()}); {versions()}; dynfuse "
                f"{dynfuse.__version__}, backend `{run.backend}`. "
                f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC. "
                f"Command: `{shlex.join(['python', *sys.argv])}`. "
                f"Threads: Numba and numexpr {run.threads}; dynfuse DYNFUSE_THREADS="
                f"{os.environ.get('DYNFUSE_THREADS', 'unset (all cores)')}. Load average when it started: "
                f"{run.load:.2f} (other work on the cores slows the parallel peers most: a thread that "
                "waits for a core holds up the others at the end of a loop)."
            ),
            "",
            wrap(
                f"Memory bandwidth limit (a copy of {COPY_ELEMENTS} float32, bytes read plus written): "
                + ", ".join(f"{name} {rate / 1e9:.1f} GB/s" for name, rate in run.rates.items())
                + f"; the limit is the best, {limit / 1e9:.1f} GB/s."
            ),
            "",
            wrap(
                f"float32 throughout; median of {run.repeats} timed runs after a correctness check and a "
                'warm-up; ± is half the interquartile range, as a percentage of the median. "Speed vs" is '
                "dynfuse's throughput over the peer's (the peer's time over dynfuse's). The fraction of the "
                "limit is the workload's effective bandwidth (inputs read once plus outputs written once, "
                "over the median time) over the copy bandwidth. Every implementation allocates its outputs: "
                "arrays this large are fresh pages from the system, whose first touch each timed run pays "
                "and the copy does not."
            ),
            "",
            workload_table(run.rows, limit),
            "",
            *(wrap(note, bullet=True) for note in notes),
            "",
            wrap(
                "Compile and dispatch (compile times measured in fresh processes, `DYNFUSE_TIERS=0`: the "
                "cold one with `DYNFUSE_DISK_CACHE=0` and an empty `DYNFUSE_CACHE_DIR`, the warm start with "
                "a cache another process filled; a materialization is record, plan, compile or load, run on "
                f"{COMPILE_PROBE_ELEMENTS} float32; dispatch: median per trace after warm-up):"
            ),
            "",
            compile_table(run.cold, run.warm, run.dispatch),
            "",
            chart_line,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK.elements} elements instead of {FULL.elements}"
    )
    parser.add_argument("--backend", default=default_backend(), choices=sorted(registry.BACKENDS))
    parser.add_argument("--repeats", type=int, help="timed runs per implementation")
    parser.add_argument(
        "--only", metavar="TEXT", help="only the workloads whose name contains TEXT; no files"
    )
    args = parser.parse_args()
    scale = QUICK if args.quick else FULL
    repeats = args.repeats or scale.repeats
    threads = len(os.sched_getaffinity(0))
    if NUMBA_PEER is not None:
        importlib.import_module("numba").set_num_threads(threads)
    if NUMEXPR_PEER is not None:
        importlib.import_module("numexpr").set_num_threads(threads)
    dynfuse.set_backend(args.backend)
    load = os.getloadavg()[0]

    print(f"dynfuse {dynfuse.__version__}, backend {args.backend!r}; {versions()}", flush=True)
    rates = measure_bandwidth_limit(repeats)
    print("copy bandwidth: " + ", ".join(f"{name} {rate / 1e9:.1f} GB/s" for name, rate in rates.items()))
    rng = np.random.default_rng(0)
    workloads = [workload for workload in WORKLOADS if args.only is None or args.only in workload.name]
    rows = [run_workload(workload, scale.elements, repeats, rng) for workload in workloads]
    if args.only is not None:
        print("\n" + workload_table(rows, max(rates.values())))
        return
    cold, warm = measure_compile(args.backend, scale.kernels)
    dispatch = measure_dispatch(repeats)
    run = Run(args.backend, args.quick, repeats, threads, load, rates, rows, cold, warm, dispatch)

    chart_line = f"![Fractions of the copy bandwidth]({CHART.name})"
    try:
        draw_chart(rows, max(rates.values()))
    except ModuleNotFoundError as error:
        chart_line = f"No chart: {error.name} is not installed."
    section = results_section(run, chart_line)
    print("\n" + section)
    write_results_section("bench", section)


if __name__ == "__main__":
    main()
