"""Timing shared by the benchmarks: medians of repeated runs, after whatever warm-up the caller does."""

import statistics
import time


def median_time(function, repeats, before=None):
    """Median seconds of ``function()`` over ``repeats`` runs; ``before()`` runs untimed before each."""
    samples = []
    for _ in range(repeats):
        if before is not None:
            before()
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
