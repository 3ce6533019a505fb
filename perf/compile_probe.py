"""Compile times, measured in a fresh process that ``perf/bench.py`` starts with its own environment.

Each kernel is an elementwise chain whose structure comes from its index, so every index is a kernel
no cache has seen. For each one the probe reports the wall time of its first materialization
(record, plan, compile or load, run), the compile time and disk-cache hits dynfuse counted during
it, and the wall time of a second materialization (everything cached in memory): the difference is
what the first sight cost. Modes:

- ``cold``: after a warm-up kernel (imports, dtype probes), kernels no process has compiled;
- ``write``: compile the kernels, so that they are in ``DYNFUSE_CACHE_DIR``;
- ``read``: in a new process, the kernels ``write`` compiled; dtype probes are warmed first by the
  reference executor, which compiles nothing, so what remains is planning and the disk cache.

    python perf/compile_probe.py {cold,write,read} --backend NAME --kernels N   # prints JSON
"""

import argparse
import json
import time

import numpy as np

import dynfuse

STEPS = (
    lambda y, x: y + x,
    lambda y, x: y * 1.5,
    lambda y, x: np.maximum(y, x),
    lambda y, x: y - 0.25,
    lambda y, x: np.abs(y),
    lambda y, x: y * x,
    lambda y, x: np.minimum(y, 2),
    lambda y, x: y / 3,
)
CHAIN_LENGTH = 8
ELEMENTS = 4096


def chain(x, index):
    """Kernel ``index``: CHAIN_LENGTH steps, the base-len(STEPS) digits of ``index``."""
    y = x
    for _ in range(CHAIN_LENGTH):
        index, digit = divmod(index, len(STEPS))
        y = STEPS[digit](y, x)
    return y


def warm_up_chain(x):
    """Every step, one more than any kernel's: it shares no kernel with them."""
    y = x
    for step in (*STEPS, STEPS[0]):
        y = step(y, x)
    return y


def timed_materialization(trace):
    """Wall seconds to record ``trace`` on a fresh LazyArray and materialize it, and the result."""
    start = time.perf_counter()
    result = np.asarray(trace())
    return time.perf_counter() - start, result


def measure_kernels(indices, values):
    samples = []
    for index in indices:
        before = dynfuse.stats()
        first, result = timed_materialization(lambda index=index: chain(dynfuse.asarray(values), index))
        after = dynfuse.stats()
        cached, _ = timed_materialization(lambda index=index: chain(dynfuse.asarray(values), index))
        np.testing.assert_allclose(result, chain(values, index), rtol=1e-5, atol=1e-6)
        samples.append(
            {
                "first_ms": first * 1e3,
                "cached_ms": cached * 1e3,
                "compile_ms": (after["compile_seconds"] - before["compile_seconds"]) * 1e3,
                "kernels_compiled": after["kernels_compiled"] - before["kernels_compiled"],
                "disk_cache_hits": after["disk_cache_hits"] - before["disk_cache_hits"],
            }
        )
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("cold", "write", "read"))
    parser.add_argument("--backend", required=True)
    parser.add_argument("--kernels", type=int, required=True)
    args = parser.parse_args()
    values = np.random.default_rng(0).standard_normal(ELEMENTS, dtype=np.float32)
    indices = range(args.kernels)
    if args.mode == "read":
        dynfuse.set_backend("numpy")
        for index in indices:
            np.asarray(chain(dynfuse.asarray(values), index))
    dynfuse.set_backend(args.backend)
    if args.mode == "cold":
        np.asarray(warm_up_chain(dynfuse.asarray(values)))
    print(json.dumps(measure_kernels(indices, values)))


if __name__ == "__main__":
    main()
