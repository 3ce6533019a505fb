"""Dask on dynfuse chunks against Dask on NumPy chunks, on a local ``distributed`` cluster whose
workers each have less memory than the array.

Each workload draws a float64 array with ``da.random`` (inside the tasks, as a cluster loads data)
larger than one worker's memory limit, runs a chain of ops that Dask fuses into one task per chunk,
and reduces it to a small result: so the data only ever exists chunk by chunk. Results are checked
first (dynfuse chunks against NumPy chunks, same draws). Then rounds alternate the two; each run
starts a cluster of its own, so a worker's peak resident memory (``ru_maxrss``) is that run's.
Medians are reported; the ratio is what to read on a shared machine.

    python perf/bench_dask.py [--rounds N] [--rows N] [--print-only]
"""

import argparse
import datetime
import platform
import resource
import time

import dask.array as da
import numpy as np
from distributed import Client, KilledWorker, LocalCluster
from timing import write_results_section

import dynfuse.dask

WORKERS = 2
MEMORY_LIMIT = "600MiB"
COLUMNS = 1_000
CHUNK_ROWS = 10_000  # 80 MB chunks


def softmax_column_sums(x):
    shifted = da.exp(x - x.max(axis=1, keepdims=True))
    return (shifted / shifted.sum(axis=1, keepdims=True)).sum(axis=0)


def black_scholes_mean(x):
    spot, strike, years = 100 + 10 * da.tanh(x), 100 + 5 * da.cos(x), 0.25 + da.abs(da.sin(x))
    rate, volatility = 0.02, 0.3
    root = volatility * da.sqrt(years)
    d1 = (da.log(spot / strike) + (rate + 0.5 * volatility**2) * years) / root

    def cdf(value):
        return 0.5 * (1.0 + da.tanh(0.7978845608 * (value + 0.044715 * value**3)))

    return (spot * cdf(d1) - strike * da.exp(-rate * years) * cdf(d1 - root)).mean(axis=0)


WORKLOADS = {
    "elementwise chain, sum": lambda x: (da.exp(-(x**2)) * 3 + da.sin(x) / (1 + da.abs(x))).sum(axis=0),
    "row softmax, column sums": softmax_column_sums,
    "black-scholes, mean": black_scholes_mean,
    "variance of rows": lambda x: (x * 3 + 1).var(axis=1).sum(),
}


def peak_memory() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run(workload, rows: int, fused: bool, memory_limit: str | int = MEMORY_LIMIT) -> tuple | None:
    """The result, the wall time and the largest worker peak of one run, on a cluster of its own;
    None if the workers were killed for passing their memory limit."""
    with (
        LocalCluster(
            n_workers=WORKERS,
            threads_per_worker=1,
            memory_limit=memory_limit,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        x = da.random.default_rng(0).standard_normal((rows, COLUMNS), chunks=(CHUNK_ROWS, COLUMNS))
        if fused:
            x = dynfuse.dask.from_dask(x)
        started = time.perf_counter()
        try:
            result = np.asarray(workload(x).compute())
        except KilledWorker:
            return None
        seconds = time.perf_counter() - started
        return result, seconds, max(client.run(peak_memory).values())


def summary(outcomes: list) -> tuple[float | None, str, str]:
    """Median seconds, and the time and peak cells; a run killed by the memory limit shows as such."""
    finished = [outcome for outcome in outcomes if outcome is not None]
    if len(finished) < len(outcomes):
        return (
            None,
            f"killed ({len(outcomes) - len(finished)} of {len(outcomes)} runs)",
            f"over {MEMORY_LIMIT}",
        )
    seconds = float(np.median([outcome[1] for outcome in finished]))
    peak = float(np.median([outcome[2] for outcome in finished]))
    return seconds, f"{seconds:.2f} s", f"{peak / 2**20:.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=200_000)  # 1.6 GB of float64
    parser.add_argument("--print-only", action="store_true")
    options = parser.parse_args()
    array_bytes = options.rows * COLUMNS * 8
    rows = []
    for name, workload in WORKLOADS.items():
        # Checked without a memory limit: NumPy chunks may not fit one.
        expected = run(workload, options.rows, fused=False, memory_limit=0)[0]
        np.testing.assert_allclose(run(workload, options.rows, fused=True)[0], expected, rtol=1e-9, atol=1e-9)
        runs = {False: [], True: []}
        for _ in range(options.rounds):
            for fused in (False, True):
                runs[fused].append(run(workload, options.rows, fused))
        cells = {fused: summary(outcomes) for fused, outcomes in runs.items()}
        speedup = f"{cells[False][0] / cells[True][0]:.2f}x" if cells[False][0] and cells[True][0] else "-"
        (_, numpy_time, numpy_peak), (_, fused_time, fused_peak) = cells[False], cells[True]
        rows.append(f"| {name} | {numpy_time} | {fused_time} | {speedup} | {numpy_peak} | {fused_peak} |")
        print(rows[-1], flush=True)
    text = "\n".join(
        [
            f"## Dask: dynfuse chunks against NumPy chunks, measured {datetime.date.today()}",
            "",
            f"Measured by `python perf/bench_dask.py --rounds {options.rounds}`: "
            f"a `distributed.LocalCluster` of {WORKERS} worker processes (1 thread each, memory limit "
            f"{MEMORY_LIMIT} each), a float64 array of {array_bytes / 2**30:.2f} GiB "
            f"({options.rows} x {COLUMNS}, chunks of {CHUNK_ROWS} rows) drawn by `da.random` in the tasks; "
            f"medians of {options.rounds} runs, each on a new cluster; peak: the largest worker's "
            f"resident memory (the worker process itself included). Results checked first. "
            f"{WORKERS} cores, Python {platform.python_version()}, NumPy {np.__version__}.",
            "",
            "| workload | NumPy chunks | dynfuse chunks | speedup | NumPy peak | dynfuse peak |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            *rows,
        ]
    )
    print(text)
    if not options.print_only:
        write_results_section("dask", text)


if __name__ == "__main__":
    main()
