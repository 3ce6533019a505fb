"""Peak memory of each workload of ``bench_workloads.py``: dynfuse's fused kernels against NumPy.

A fused chain should need little more than its inputs and outputs: it reads each input once and
writes each output once, with no temporaries; NumPy allocates a temporary per operation it cannot
elide. Measured with ``tracemalloc`` (NumPy reports its data allocations to it), as the peak of
memory allocated during one evaluation, the inputs already in memory; each implementation is
warmed up first (so a compile's own allocations are not counted) and checked against the other.

Writes its section of perf/RESULTS.md; with ``--print-only``, writes nothing.

    python perf/bench_memory.py [--elements N] [--print-only]
"""

import argparse
import datetime
import gc
import os
import platform
import tracemalloc

import numpy as np
from bench_workloads import WORKLOADS
from timing import write_results_section

import dynfuse


def peak_bytes(compute) -> tuple[int, object]:
    """The most memory allocated at once while ``compute()`` runs, and its result (kept, so the
    output is counted, as it is for a program that uses it)."""
    gc.collect()
    tracemalloc.start()
    try:
        result = compute()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result


def materialized(result):
    return [np.asarray(part) for part in result] if isinstance(result, tuple) else np.asarray(result)


def nbytes(value) -> int:
    return sum(part.nbytes for part in value) if isinstance(value, list) else value.nbytes


def measure(workload, elements: int) -> dict:
    inputs = workload.make_inputs(elements, np.random.default_rng(0))
    lazy_inputs = {
        name: dynfuse.asarray(value) if isinstance(value, np.ndarray) else value
        for name, value in inputs.items()
    }

    def numpy_run():
        return materialized(workload.compute(**inputs))

    def dynfuse_run():
        return materialized(workload.compute(**lazy_inputs))

    expected, got = numpy_run(), dynfuse_run()  # warm-up, and the check
    for want, have in zip(
        expected if isinstance(expected, list) else [expected],
        got if isinstance(got, list) else [got],
        strict=True,
    ):
        np.testing.assert_allclose(have, want, rtol=workload.rtol, atol=workload.atol)
    numpy_peak, result = peak_bytes(numpy_run)
    del result
    dynfuse_peak, result = peak_bytes(dynfuse_run)
    input_bytes = sum(value.nbytes for value in inputs.values() if isinstance(value, np.ndarray))
    return {"inputs": input_bytes, "outputs": nbytes(result), "numpy": numpy_peak, "dynfuse": dynfuse_peak}


def per_output(found: dict) -> str:
    """The peak over the outputs, where the outputs are large enough for the ratio to mean much."""
    return f"{found['dynfuse'] / found['outputs']:.2f}" if found["outputs"] >= 1 << 20 else "—"


def mib(value: int) -> str:
    return f"{value / 2**20:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1 << 22)
    parser.add_argument("--print-only", action="store_true", help="print the table, write nothing")
    arguments = parser.parse_args()
    dynfuse.set_backend("cpu")
    dynfuse.config.tiers = False  # every kernel compiled: the tier policy interprets one-off small work
    rows = [
        "| workload | inputs MiB | outputs MiB | NumPy peak MiB | dynfuse peak MiB | dynfuse peak / outputs "
        "| NumPy peak / dynfuse peak |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for workload in WORKLOADS:
        found = measure(workload, arguments.elements)
        rows.append(
            f"| {workload.name} | {mib(found['inputs'])} | {mib(found['outputs'])} | {mib(found['numpy'])} "
            f"| {mib(found['dynfuse'])} | {per_output(found)} "
            f"| {found['numpy'] / found['dynfuse']:.1f}x |"
        )
        print(rows[-1], flush=True)
    text = "\n".join(
        [
            f"## Peak memory of a fused chain, measured {datetime.date.today().isoformat()}",
            "",
            f"`python perf/bench_memory.py`: float32 workloads of `make bench` at {arguments.elements} "
            "elements, the peak of memory allocated during one evaluation (`tracemalloc`), inputs "
            "already in memory; the result is kept, so it counts; every kernel compiled "
            "(`DYNFUSE_TIERS=0`). A fused kernel allocates its outputs and nothing else: a peak of 1.00x "
            "the outputs. Several outputs are asked for one at a time, as `np.asarray` of each would: "
            "computing the first keeps the deep intermediates that the others' pending traces read "
            "(`trace.held_intermediates`) until they are asked for. So Black-Scholes' `call` keeps "
            "its two normal CDFs for `put` (2.00x); `dynfuse.evaluate(call, put)` peaks at 1.00x. "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, NumPy {np.__version__}.",
            "",
            *rows,
        ]
    )
    print("\n" + text)
    if not arguments.print_only:
        write_results_section("memory", text)


if __name__ == "__main__":
    main()
