"""The CUDA backend on a GPU: fused elementwise chains against the device's copy bandwidth,
``cupy.fuse`` and ``torch.compile``; row softmax and layernorm against ``torch.compile``.

Each case first checks dynfuse's result against CuPy's unfused one (and every peer's against it),
then times every contender interleaved in rounds, after warm-up (compiles, autotuning), each run
ended by a synchronize of the device: medians and interquartile ranges. Bandwidth counts each input
read once and each output written once, as a fused kernel does. Data stays on the device
throughout: dynfuse's arrays wrap CuPy's without a copy, torch's share them through DLPack.

dynfuse runs twice: under NumPy's default error state, where each launch of a kernel that can
raise a floating-point error is followed by a read of the device's error word (a wait for the
launch), and under ``np.errstate(all="ignore")``, where it is not read: the difference is what
NumPy's floating-point errors cost on a GPU.

Writes perf/RESULTS-gpu.md's section; with ``--print-only``, writes nothing. On the emulated device
(``--device cuda-emulator --size tiny``) it runs dynfuse alone, as a check of the script itself.

    python perf/bench_gpu.py [--device cuda|cuda-emulator] [--size full|tiny] [--repeats N]
"""

import argparse
import datetime
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from timing import Timing, measure_interleaved, write_results_section

import dynfuse

RESULTS_GPU = Path(__file__).resolve().parent / "RESULTS-gpu.md"
SIZES = {"full": (1 << 28, 8192), "tiny": (1 << 12, 64)}  # elements of a chain, rows (= columns)
GELU_SCALE = math.sqrt(2.0 / math.pi)
WRONG: list[str] = []  # cases where dynfuse's result differed: the run then fails, after its table


# Each case is written once over a namespace: ``numpy`` (what dynfuse records), ``cupy`` or ``torch``.
def axpy(xp, x, y):
    return x * 2.5 + y


def gelu(xp, x, y):
    return 0.5 * x * (1.0 + xp.tanh(GELU_SCALE * (x + 0.044715 * x * x * x)))


def chain8(xp, x, y):
    return xp.sqrt(xp.abs(xp.exp(-x * x) * y + 1.0)) - xp.sin(x) / (1.0 + y * y)


def softmax(xp, x, y):
    if xp.__name__ == "torch":
        return xp.softmax(x, dim=1)
    shifted = xp.exp(x - x.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def layernorm(xp, x, y):
    if xp.__name__ == "torch":
        return xp.nn.functional.layer_norm(x, x.shape[1:], eps=1e-5)
    mean = x.mean(axis=1, keepdims=True)
    return (x - mean) / xp.sqrt(x.var(axis=1, keepdims=True) + 1e-5)


def column_sum(xp, x, y):
    return x.sum(0)


def centered_columns(xp, x, y):
    return x - x.mean(0)


# name: (function, inputs it reads, 1-D chain or rows)
CASES = {
    "x * 2.5 + y": (axpy, 2, False),
    "GELU (tanh)": (gelu, 1, False),
    "8-op chain, 2 inputs": (chain8, 2, False),
    "row softmax": (softmax, 1, True),
    "row layernorm": (layernorm, 1, True),
    "column sum": (column_sum, 1, True),
    "x - x.mean(0)": (centered_columns, 1, True),
}
# Reductions along the leading axis, on many columns and on few: the evidence for the CUDA
# generator's COLUMN_ROWS (column tiles from that many columns on)
COLUMN_SHAPES = {
    "full": [(1 << 18, 256), (1 << 16, 1024), (8192, 8192), (1024, 1 << 16), (256, 1 << 20)],
    "tiny": [(256, 16)],
}
COLUMN_CASES = ("column sum", "x - x.mean(0)")


class Device:
    """Arrays, a synchronize, and the peers there are: CuPy and torch on a GPU, none on the emulator."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.peers: dict[str, Callable] = {}
        if name == "cuda":
            import cupy

            self.cupy = cupy
            self.synchronize = cupy.cuda.get_current_stream().synchronize
            properties = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
            self.description = properties["name"].decode()
            self.peers["cupy.fuse"] = self.cupy_fuse
            try:
                import torch

                self.torch = torch
                self.peers["torch.compile"] = self.torch_compile
                self.description += f", torch {torch.__version__}"
            except ImportError:
                pass
            runtime = cupy.cuda.runtime
            self.description += (
                f", CuPy {cupy.__version__}, CUDA runtime {runtime.runtimeGetVersion()}, "
                f"driver API {runtime.driverGetVersion()}"
            )
        else:
            self.synchronize = lambda: None
            self.description = "emulated CUDA device (a check of this script, not a speed)"

    def put(self, values: np.ndarray):
        return dynfuse.asarray(values, device=self.name)

    def reference(self, function: Callable, inputs: list) -> np.ndarray:
        """CuPy's unfused result on a GPU, NumPy's on the emulator (in float64, then rounded)."""
        if self.name == "cuda":
            return function(self.cupy, *[value.cupy() for value in inputs]).get()
        wide = [np.asarray(value).astype(np.float64) for value in inputs]  # then rounded, as one op
        return function(np, *wide).astype(np.float32)

    def cupy_fuse(self, function: Callable, inputs: list, rows: bool) -> Callable | None:
        if rows:
            return None  # cupy.fuse fuses reductions along an axis with keepdims poorly; not a peer

        def fused_case(x, y):  # CuPy names the kernel after the function: a lambda's is refused
            return function(self.cupy, x, y)

        fused = self.cupy.fuse(fused_case)
        x, y = (value.cupy() for value in inputs)
        return lambda: fused(x, y)

    def torch_compile(self, function: Callable, inputs: list, rows: bool) -> Callable:
        compiled = self.torch.compile(lambda x, y: function(self.torch, x, y))
        x, y = (self.torch.from_dlpack(value.cupy()) for value in inputs)
        return lambda: compiled(x, y)


def to_host(result) -> np.ndarray:
    if hasattr(result, "get"):
        return result.get()
    if hasattr(result, "cpu"):
        return result.cpu().numpy()
    return np.asarray(result)


@dataclass
class Measured:
    timings: dict[str, Timing]  # by contender
    traffic: int  # bytes a fused kernel reads and writes
    copy_bandwidth: float | None  # bytes a second of a device-to-device copy, read and written
    host: float | None  # dynfuse's seconds on the host per call (``host_time``)
    quiet_host: float | None  # the same under ``np.errstate(all="ignore")``: no error word read


def run_case(device: Device, name: str, elements: int, side: int, repeats: int) -> Measured:
    function, count, rows = CASES[name]
    shape = (side, side) if rows else (elements,)
    rng = np.random.default_rng(0)
    inputs = [device.put(rng.standard_normal(shape, dtype=np.float32)) for _ in range(count)]
    operands = (inputs * 2)[:2]  # (x, y); y is x where a case reads one input

    contenders = {"dynfuse": evaluated(function, operands), QUIET: evaluated(function, operands, quiet=True)}
    for peer, build in device.peers.items():
        made = build(function, operands, rows)
        if made is not None:
            contenders[peer] = made
    expected = device.reference(function, operands)
    timings = checked_timings(device, name, contenders, expected, repeats, copied=inputs[0])
    copy_bandwidth = 2 * inputs[0].nbytes / timings.pop("copy").median if "copy" in timings else None
    # The host's share, on a GPU (the emulator's launches end before they return)
    host, quiet_host = (
        host_time(contenders[contender], device.synchronize)
        if contender in timings and device.name == "cuda"
        else None
        for contender in ("dynfuse", QUIET)
    )
    return Measured(timings, count * math.prod(shape) * 4 + expected.nbytes, copy_bandwidth, host, quiet_host)


def host_time(call: Callable, synchronize: Callable, calls: int = 10, rounds: int = 7) -> float:
    """The host's time per call (recording, finding the replay, launching): calls issued one after
    another without waiting for the device, which runs them meanwhile; the median of the rounds."""
    times = []
    for _ in range(rounds):
        synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        times.append((time.perf_counter() - start) / calls)
    synchronize()
    return statistics.median(times)


# dynfuse under ``np.errstate(all="ignore")``: the device's error word is not read after a launch
QUIET = "dynfuse, errors ignored"


def evaluated(function: Callable, operands: list, quiet: bool = False) -> Callable:
    """A call of ``function`` recorded by dynfuse on ``operands`` and computed, each time; ``quiet``:
    recorded and computed under ``np.errstate(all="ignore")``."""

    def call():
        with np.errstate(all="ignore" if quiet else None):
            result = function(np, *operands)
            dynfuse.evaluate(result)
        return result

    return call


def checked_timings(device: Device, name: str, contenders: dict, expected, repeats: int, copied=None) -> dict:
    """Each contender's result checked against ``expected``, then all of them (and, on a GPU, a
    device-to-device copy of ``copied``) warmed up and timed in interleaved rounds."""
    tolerance = 5e-6 if name.startswith("x *") else 2e-5
    for contender, call in list(contenders.items()):
        try:
            got = to_host(call())
        except Exception as error:  # a peer that cannot run the case is left out of it, said so
            print(f"{name}: {contender} failed ({type(error).__name__}: {error}); left out", file=sys.stderr)
            del contenders[contender]
            continue
        if not np.allclose(got, expected, rtol=tolerance, atol=tolerance * float(np.abs(expected).max())):
            error = float(np.abs(got - expected).max())
            print(f"{name}: {contender} differs from the unfused result by {error:g}", file=sys.stderr)
            del contenders[contender]
            if contender == "dynfuse":
                WRONG.append(name)
    for call in contenders.values():  # warm-up beyond the first: caches, autotuning, clocks
        for _ in range(3):
            call()
    device.synchronize()
    timed = {
        name: (lambda call=call: (call(), device.synchronize()), None) for name, call in contenders.items()
    }
    if device.name == "cuda" and copied is not None:
        source = copied.cupy()
        target = device.cupy.empty_like(source)
        timed["copy"] = (lambda: (device.cupy.copyto(target, source), device.synchronize()), None)
    return measure_interleaved(timed, repeats)


def column_modes(device: Device, size: str, repeats: int) -> str:
    """Reductions along the leading axis in column tiles (a warp reads 32 adjacent columns, warps
    share a column's elements) against a group of threads along each column, each against CuPy's
    own in the same rounds."""
    from dynfuse import replay
    from dynfuse.codegen import cuda as generator

    chosen = generator.COLUMN_ROWS
    modes = {"column tiles": 0, "a group along each column": 1 << 62}
    lines = [
        "",
        f"Reductions along the leading axis, float32, by the CUDA generator's layout of threads "
        f"(dynfuse's time; `COLUMN_ROWS` = {chosen:,} chooses column tiles from that many columns"
        f" on){'; CuPy unfused as the peer' if device.name == 'cuda' else ''}:",
        "",
        "| case | shape | " + " | ".join(modes) + " | CuPy |",
        "| --- | --- |" + " ---: |" * (len(modes) + 1),
    ]
    rng = np.random.default_rng(1)
    try:
        for shape in COLUMN_SHAPES[size]:
            x = device.put(rng.standard_normal(shape, dtype=np.float32))
            for name in COLUMN_CASES:
                function = CASES[name][0]
                expected = device.reference(function, [x, x])
                times = {}
                for mode, rows in modes.items():
                    generator.COLUMN_ROWS = rows
                    replay.clear_kernels()

                    contenders = {"dynfuse": evaluated(function, [x, x])}
                    if device.name == "cuda":
                        native = x.cupy()
                        contenders["CuPy"] = lambda function=function, native=native: function(
                            device.cupy, native, native
                        )
                    timings = checked_timings(device, f"{name} {shape}", contenders, expected, repeats)
                    if "dynfuse" in timings:
                        times[mode] = timings["dynfuse"].median
                    if "CuPy" in timings:
                        times["CuPy"] = timings["CuPy"].median
                cells = " | ".join(
                    f"{times[mode] * 1e3:.3f} ms" if mode in times else "-" for mode in [*modes, "CuPy"]
                )
                lines.append(f"| {name} | {shape[0]:,} x {shape[1]:,} | {cells} |")
    finally:
        generator.COLUMN_ROWS = chosen
        replay.clear_kernels()
    return "\n".join(lines)


def table(results: dict, device: Device, size: str, repeats: int) -> str:
    peers = [
        peer for peer in ("cupy.fuse", "torch.compile") if any(peer in m.timings for m in results.values())
    ]
    header = (
        "| case | dynfuse | of it, host | GB/s | of copy's GB/s | errors ignored | of it, host |"
        + "".join(f" {peer} | dynfuse speedup |" for peer in peers)
    )
    lines = [
        f"## The CUDA backend on a GPU, measured {datetime.date.today()}",
        "",
        f"`python perf/bench_gpu.py --size {size} --repeats {repeats}` on {device.description}: "
        f"the median of {repeats} interleaved rounds (± half the interquartile range), each run ended by a "
        "synchronize. The host's share is dynfuse's time per call issuing calls without waiting for the "
        "device (recording, finding the replay, launching; under NumPy's default error state, reading "
        "the device's floating-point error word after each launch that can raise one, which waits for "
        "it; not under `errstate(all='ignore')`). "
        "GB/s counts each input read and the output written once; the copy is `cupy.copyto` of the "
        "first input, read and written. Chains have "
        f"{SIZES[size][0]:,} float32 elements; rows are {SIZES[size][1]}x{SIZES[size][1]} float32. "
        f"Python {platform.python_version()}, NumPy {np.__version__}.",
        "",
        header,
        "| --- |" + " ---: |" * (6 + 2 * len(peers)),
    ]
    for name, measured in results.items():
        ours = measured.timings.get("dynfuse")
        if ours is None:
            lines.append(f"| {name} | differs from CuPy's |")
            continue
        bandwidth = measured.traffic / ours.median
        fraction = f"{bandwidth / measured.copy_bandwidth:.0%}" if measured.copy_bandwidth else "-"
        host, quiet_host = (
            f"{seconds * 1e6:.0f} µs" if seconds is not None else "-"
            for seconds in (measured.host, measured.quiet_host)
        )
        quiet = measured.timings.get(QUIET)
        row = f"| {name} | {ours.median * 1e3:.3f} ms (±{ours.spread / 2:.0%}) | {host} |"
        row += f" {bandwidth / 1e9:.0f} | {fraction} |"
        row += f" {quiet.median * 1e3:.3f} ms | {quiet_host} |" if quiet else " - | - |"
        for peer in peers:
            theirs = measured.timings.get(peer)
            row += (
                f" {theirs.median * 1e3:.3f} ms | {theirs.median / ours.median:.2f}x |"
                if theirs
                else " - | - |"
            )
        lines.append(row)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cuda-emulator"), default="cuda")
    parser.add_argument("--size", choices=SIZES, default="full")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--print-only", action="store_true")
    arguments = parser.parse_args()
    reason = dynfuse.registry.unavailable_reason(arguments.device)
    if reason is not None:
        sys.exit(f"bench_gpu: {reason}")
    device = Device(arguments.device)
    elements, side = SIZES[arguments.size]
    results = {name: run_case(device, name, elements, side, arguments.repeats) for name in CASES}
    section = table(results, device, arguments.size, arguments.repeats)
    section += "\n" + column_modes(device, arguments.size, arguments.repeats)
    print(section)
    if WRONG:
        sys.exit(f"bench_gpu: dynfuse's results differ from the unfused ones: {', '.join(WRONG)}")
    if not arguments.print_only:
        write_results_section("gpu", section, RESULTS_GPU)


if __name__ == "__main__":
    main()
