"""Overhead against NumPy: small work, scalar code and short statements, where laziness cannot pay.

A lazy engine earns its keep on large fused work; this measures what it costs everywhere else, each
program against NumPy in the same run: recording one op (nothing materialized), one stencil statement
with and without a slice write, scalar loops over single elements, a cached 10-op chain materialized
every iteration, a small time loop and n-body, loop-heavy linear algebra written with slices as
textbooks write it, streaming chains on large float32 arrays (also against a Numba ``parallel=True``
loop and the machine's copy bandwidth, measured in the same run) and the import.

Every program is written once, as a function of the namespace it gets (NumPy or ``dynfuse.numpy``),
so both run the same code. Its dynfuse result is first checked against NumPy's (float64 to 1e-10
relative, integers exactly): a mismatch or an error is reported FAIL and not timed. Then each
contender (the namespaces; for a streaming chain also the copy and the Numba loop) runs in a process
of its own, as a script does (``timing.measure_in_processes``: a process's allocator remembers what
else ran in it), warmed up until dynfuse's tiers settle (``timing.warm_up``: a loop's sites try
recording after runs they count, and its kernels compile once interpreted runs have paid for them),
and timed in interleaved rounds: medians, with the dynfuse counters (``dynfuse.stats()`` deltas over
the timed calls) that explain each row. The machine is shared: read the ratios, not the times.

Writes the "overhead" section of perf/RESULTS.md; with ``--print-only`` or ``--only``, writes nothing.
``--quick`` (about a minute on 2 cores) takes fewer rounds and 2^20-element streaming chains; the
full run takes about three minutes.

    python perf/bench_overhead.py [--quick] [--repeats N] [--only TEXT] [--print-only]
"""

import argparse
import datetime
import importlib.util
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy
from timing import Timing, measure_in_processes, serve_warmed, write_results_section

import dynfuse
import dynfuse.numpy as dnp

NAMESPACES = {"NumPy": numpy, "dynfuse": dnp}
RECORDINGS = 1000  # recordings per timed call (ten statements per loop turn)
STATEMENTS = 20  # stencil statements per timed call
RTOL = 1e-10
SAMPLE_SECONDS = 0.01  # a timed sample repeats a fast call until it lasts about this long
# A streaming chain's sample lasts longer: Numba's OpenMP threads spin for milliseconds after its
# loop returns, on a core the next timed process needs; in samples of two calls that took a
# quarter of dynfuse's time (1.16-1.42x Numba's, against 1.06-1.08x in samples of 0.1 s)
STREAMING_SAMPLE_SECONDS = 0.1


@dataclass
class Program:
    """A program both namespaces run: ``setup(np)`` gives its arguments, ``run(np, *arguments)``
    its result (an array, a number or a tuple of them)."""

    group: str
    name: str
    run: Callable
    setup: Callable
    target: str = "0.9x NumPy's speed"
    per: int = 1  # operations per call: the times are reported per operation
    unit: str = "call"
    expect_no_materialization: bool = False
    timed: Callable | None = None  # what is timed, where it is not ``run`` materialized

    @property
    def label(self) -> str:
        return f"{self.group}: {self.name}"


@dataclass
class Row:
    program: Program
    timings: dict[str, Timing] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    failure: str = ""


def materialize(result):
    """NumPy arrays (or Python numbers) of a result, so a dynfuse call does its work inside the timing."""
    if isinstance(result, tuple):
        return tuple(materialize(part) for part in result)
    return numpy.asarray(result)


def arrays(np, *values: numpy.ndarray) -> list:
    """The inputs as the namespace's arrays: NumPy's own, or dynfuse arrays holding copies."""
    return [np.asarray(value.copy()) for value in values]


def check(expected, actual) -> None:
    """Raise AssertionError where the dynfuse result differs from NumPy's."""
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    assert len(expected) == len(actual), f"{len(actual)} results, NumPy gave {len(expected)}"
    for want, got in zip(expected, actual, strict=True):
        want, got = numpy.asarray(want), numpy.asarray(got)
        assert want.shape == got.shape, f"shape {got.shape}, NumPy gave {want.shape}"
        if want.dtype.kind in "iub":
            numpy.testing.assert_array_equal(got, want)
        else:
            rtol = RTOL if want.dtype == numpy.float64 else 1e-5
            numpy.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(1.0, float(abs(want).max())))


# 1. Recording one op on a 300x300 float64 array (smaller computed arrays run at once, by NumPy,
# below the CPU's direct size): ten statements a loop turn, results dropped.
RECORDING_SIDE = 300

RECORDED = {
    "x[1:-1, 2:]": "x[1:-1, 2:]",
    "x[3, 4]": "x[3, 4]",
    "x.T": "x.T",
    "x.reshape(-1)": "x.reshape(-1)",
    "x[None]": "x[None]",
    "x + 1.0": "x + 1.0",
    "x.sum(axis=0)": "x.sum(axis=0)",
    "x.astype(np.float32)": "x.astype(np.float32)",
}
# The same on an array not computed yet (``x = a * 1.0``): the C recorder's case, where ``x`` above
# is a computed leaf, which the Python functions take.
RECORDED_PENDING = {
    **RECORDED,
    "x[..., None]": "x[..., None]",
    "np.expand_dims(x, 0)": "np.expand_dims(x, 0)",
    "x.max(axis=1, keepdims=True)": "x.max(axis=1, keepdims=True)",
}


def recording_loop(expression: str) -> Callable:
    """A loop of ``RECORDINGS`` statements ``expression`` whose results are dropped, nothing
    materialized: generated code, so no Python call per recording is timed."""
    body = "\n".join(f"        {expression}" for _ in range(10))
    source = f"def loop(np, x):\n    for _ in range({RECORDINGS // 10}):\n{body}\n"
    scope: dict = {}
    exec(compile(source, f"<recording {expression}>", "exec"), scope)
    return scope["loop"]


def recorded(expression: str) -> Callable:
    """The expression once, its result checked against NumPy's."""
    return eval(f"lambda np, x: {expression}")


def grid(np, n: int) -> list:
    return arrays(np, numpy.random.default_rng(n).random((n, n)))


def pending_grid(np, n: int) -> list:
    return [value * 1.0 for value in grid(np, n)]


# 2. One stencil statement, materialized each time, alternating two grids as a Jacobi sweep does.


def stencil(np, a, b):
    for step in range(STATEMENTS):
        source = a if step % 2 == 0 else b
        u = 0.25 * (source[1:-1, :-2] + source[1:-1, 2:] + source[:-2, 1:-1] + source[2:, 1:-1])
        materialize(u)
    return u


def stencil_write(np, a, b):
    for _ in range(STATEMENTS):
        b[1:-1, 1:-1] = 0.25 * (a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1])
        materialize(b)
        a, b = b, a
    return a, b


def two_grids(np, n: int) -> list:
    rng = numpy.random.default_rng(n)
    return arrays(np, rng.random((n, n)), rng.random((n, n)))


# 3. Scalar code: single elements read, computed with and written.


def scalar_sum(np, a):
    n = a.shape[0]
    s = 0.0
    for i in range(2000):
        s += np.sin(a[i % n, (7 * i) % n]) * a[i % n, i % n]
    return float(s)


def fill_matrix(np, x):
    m = x.shape[0]
    A = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            A[i, j] = float(x[i]) * float(x[j]) / (1.0 + i + j)
    return A


# 4. The dispatch loop: a 10-op chain on 1,000 float32, materialized every iteration.


def ten_op_chain(np, x):
    """Ten elementwise ops: x*2, +1, maximum, *x, -0.5, abs, /3, +x, minimum, *0.5."""
    return np.minimum(np.abs(np.maximum(x * 2 + 1, 0) * x - 0.5) / 3 + x, 4) * 0.5


def dispatch_loop(np, x):
    for _ in range(200):
        y = materialize(ten_op_chain(np, x))
    return y


# 5. Time loops as people write them.


def heat(np, u0):
    u = np.array(u0)
    c = 0.1
    for _ in range(300):
        laplacian = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + c * laplacian
    return u


def nbody(np, x, y, vx, vy, m):
    dt, eps = 0.01, 0.01
    for _ in range(100):
        dx = x[:, None] - x[None, :]
        dy = y[:, None] - y[None, :]
        r2 = dx**2 + dy**2 + eps
        inv = r2**-1.5
        ax = (dx * inv * m).sum(axis=1)
        ay = (dy * inv * m).sum(axis=1)
        vx = vx - dt * ax
        vy = vy - dt * ay
        x = x + dt * vx
        y = y + dt * vy
    return x, y


def bodies(np, count: int = 64) -> list:
    rng = numpy.random.default_rng(count)
    return arrays(
        np,
        rng.random(count),
        rng.random(count),
        numpy.zeros(count),
        numpy.zeros(count),
        rng.random(count) / count,
    )


# 6. Loop-heavy linear algebra, written with slices as textbooks write it.


def forward_solve(np, L, b):
    n = b.shape[0]
    x = np.zeros(n)
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def lu_rows(np, A0):
    """Doolittle LU without pivoting, row by row (the ikj order): L below the diagonal, U on and above."""
    A = np.array(A0)
    n = A.shape[0]
    for i in range(1, n):
        for k in range(i):
            A[i, k] = A[i, k] / A[k, k]
            A[i, k + 1 :] -= A[i, k] * A[k, k + 1 :]
    return A


def gauss_seidel(np, A, b, x0):
    x = np.array(x0)
    n = b.shape[0]
    for i in range(n):
        x[i] = (b[i] - A[i, :i] @ x[:i] - A[i, i + 1 :] @ x[i + 1 :]) / A[i, i]
    return x


def csr_matvec(np, data, indices, indptr, x):
    n = indptr.shape[0] - 1
    y = np.zeros(n)
    for i in range(n):
        start, end = indptr[i], indptr[i + 1]
        y[i] = data[start:end] @ x[indices[start:end]]
    return y


def dominant(n: int) -> numpy.ndarray:
    """A diagonally dominant matrix: no pivoting needed, Gauss-Seidel converges."""
    return numpy.random.default_rng(n).random((n, n)) + n * numpy.eye(n)


def lower_system(np, n: int) -> list:
    return arrays(np, numpy.tril(dominant(n)), numpy.random.default_rng(1).random(n))


def full_system(np, n: int) -> list:
    rng = numpy.random.default_rng(2)
    return arrays(np, dominant(n), rng.random(n), numpy.zeros(n))


def csr_system(np, n: int, per_row: int = 5) -> list:
    rng = numpy.random.default_rng(3)
    counts = rng.integers(1, 2 * per_row, n)
    indptr = numpy.concatenate([[0], numpy.cumsum(counts)]).astype(numpy.int64)
    indices = numpy.concatenate([numpy.sort(rng.choice(n, c, replace=False)) for c in counts])
    return arrays(np, rng.random(indptr[-1]), indices.astype(numpy.int64), indptr, rng.random(n))


# 7. Streaming chains on large float32 arrays.


def relu_chain(np, x):
    return np.maximum(x * 2, 0) + 1


def cubic(np, x):
    return ((0.5 * x - 1.5) * x + 2.0) * x - 3.0


def programs(quick: bool) -> list[Program]:
    found = []
    recordings = (
        (f"recording, {RECORDING_SIDE}x{RECORDING_SIDE} float64", RECORDED, grid),
        (f"recording, pending {RECORDING_SIDE}x{RECORDING_SIDE} float64", RECORDED_PENDING, pending_grid),
    )
    for group, expressions, setup in recordings:
        for label, expression in expressions.items():
            found.append(
                Program(
                    group,
                    f"`{label}`",
                    recorded(expression),
                    lambda np, setup=setup: setup(np, RECORDING_SIDE),
                    target="1 us per op",
                    per=RECORDINGS,
                    unit="op",
                    expect_no_materialization=True,
                    timed=recording_loop(expression),
                )
            )
    for n in (50, 100, 150):
        found.append(
            Program(
                "one statement",
                f"stencil {n}x{n}",
                stencil,
                lambda np, n=n: two_grids(np, n),
                per=STATEMENTS,
                unit="statement",
            )
        )
        found.append(
            Program(
                "one statement",
                f"stencil, slice write, {n}x{n}",
                stencil_write,
                lambda np, n=n: two_grids(np, n),
                per=STATEMENTS,
                unit="statement",
            )
        )
    scalars = numpy.random.default_rng(4).random((100, 100))
    found.append(
        Program(
            "scalar code",
            "`s += np.sin(a[i, 7i % n]) * a[i, i]`, 2,000 steps",
            scalar_sum,
            lambda np: arrays(np, scalars),
            target="1.3x NumPy's time",
        )
    )
    found.append(
        Program(
            "scalar code",
            "fill 40x40 `A[i, j] = float(x[i]) * float(x[j]) / (1 + i + j)`",
            fill_matrix,
            lambda np: arrays(np, scalars[0, :40]),
            target="1.3x NumPy's time",
        )
    )
    chain_input = numpy.random.default_rng(5).standard_normal(1000, dtype=numpy.float32)
    found.append(
        Program(
            "dispatch",
            "10-op chain, 1,000 float32, materialized, 200 iterations",
            dispatch_loop,
            lambda np: arrays(np, chain_input),
            target="faster than NumPy",
        )
    )
    heat_grid = numpy.random.default_rng(6).random((64, 64))
    found.append(
        Program(
            "time loop",
            "heat equation, 64x64, 300 steps",
            heat,
            lambda np: arrays(np, heat_grid),
            target="faster than NumPy",
        )
    )
    found.append(
        Program("time loop", "n-body, 64 bodies, 100 steps", nbody, bodies, target="faster than NumPy")
    )
    for n in (60, 200):
        found.append(
            Program(
                "linear algebra", f"forward solve, n={n}", forward_solve, lambda np, n=n: lower_system(np, n)
            )
        )
        found.append(
            Program(
                "linear algebra", f"LU by rows, n={n}", lu_rows, lambda np, n=n: [np.asarray(dominant(n))]
            )
        )
        found.append(
            Program(
                "linear algebra",
                f"Gauss-Seidel sweep, n={n}",
                gauss_seidel,
                lambda np, n=n: full_system(np, n),
            )
        )
        found.append(
            Program(
                "linear algebra", f"CSR matvec by rows, n={n}", csr_matvec, lambda np, n=n: csr_system(np, n)
            )
        )
    elements = 2**20 if quick else 2**24
    stream = numpy.random.default_rng(7).standard_normal(elements, dtype=numpy.float32)
    power = int(math.log2(elements))
    for name, chain in (("`relu(x*2)+1`", relu_chain), ("cubic polynomial", cubic)):
        found.append(
            Program(
                "streaming",
                f"{name}, 2^{power} float32",
                chain,
                lambda np: [np.asarray(stream)],
                target="85% of copy bandwidth",
            )
        )
    return found


def calls(program: Program, namespace, timed: bool = False) -> Callable[[], object]:
    """One call of the program on fresh arguments, its result materialized (``timed``: what is timed)."""
    arguments = program.setup(namespace)
    if timed and program.timed is not None:
        return lambda: program.timed(namespace, *arguments)
    return lambda: materialize(program.run(namespace, *arguments))


def counters() -> dict[str, float]:
    stats = dynfuse.stats()
    return {key: stats[key] for key in ("materializations", "kernels_launched", "interpreted_ops")}


def contenders(program: Program) -> list[str]:
    """Who times ``program``: both namespaces; for a streaming chain also a copy of the same size
    and, where installed, a Numba loop."""
    names = list(NAMESPACES)
    if program.group == "streaming":
        names.append("copy")
        if importlib.util.find_spec("numba") is not None:
            names.append("Numba")
    return names


def measure_program(program: Program, repeats: int, quick: bool) -> Row:
    """Check one program, then time it in a process of its own per contender."""
    try:
        check(calls(program, numpy)(), calls(program, dnp)())
    except Exception as error:  # a wrong result or an error is a dynfuse bug: reported, not timed
        return Row(program, failure=f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160]}")
    commands = {
        name: [sys.executable, __file__, "--serve", name, program.label] + (["--quick"] if quick else [])
        for name in contenders(program)
    }
    sample = STREAMING_SAMPLE_SECONDS if program.group == "streaming" else SAMPLE_SECONDS
    timings, reports = measure_in_processes(commands, repeats, sample)
    return Row(program, {name: t.scaled(1 / program.per) for name, t in timings.items()}, reports["dynfuse"])


def numba_loop(name: str) -> Callable:
    """A Numba ``parallel=True`` loop of a streaming chain, writing into a preallocated array."""
    import numba

    @numba.njit(parallel=True, fastmath=False)
    def relu(x, out):
        for i in numba.prange(x.shape[0]):
            out[i] = max(x[i] * numpy.float32(2), numpy.float32(0)) + numpy.float32(1)

    @numba.njit(parallel=True, fastmath=False)
    def cube(x, out):
        for i in numba.prange(x.shape[0]):
            v = x[i]
            out[i] = (
                (numpy.float32(0.5) * v - numpy.float32(1.5)) * v + numpy.float32(2.0)
            ) * v - numpy.float32(3.0)

    return {"`relu(x*2)+1`": relu, "cubic polynomial": cube}[name]


def contender_call(name: str, program: Program) -> Callable[[], object]:
    """What contender ``name`` calls to run ``program``: a namespace's call, or for a streaming
    chain a copy of its input into an existing array or a Numba loop (checked against NumPy)."""
    if name in NAMESPACES:
        return calls(program, NAMESPACES[name], timed=True)
    (x,) = program.setup(numpy)
    out = numpy.empty_like(x)
    if name == "copy":
        return lambda: numpy.copyto(out, x)
    loop = numba_loop(program.name.split(",")[0])
    loop(x, out)
    numpy.testing.assert_allclose(out, calls(program, numpy)(), rtol=1e-6)
    return lambda: loop(x, out)


def serve_here(name: str, label: str, quick: bool) -> None:
    """Time contender ``name`` on the program ``label``, warmed up, for ``measure_in_processes``;
    dynfuse's counters per timed call are its report."""
    program = next(program for program in programs(quick) if program.label == label)
    serve_warmed(contender_call(name, program), counters)


def import_times(repeats: int) -> dict[str, Timing]:
    """Seconds for ``python -c "import MODULE"`` in fresh processes, interleaved."""
    samples: dict[str, list[float]] = {"numpy": [], "dynfuse.numpy": []}
    for _ in range(repeats):
        for module in samples:
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
            samples[module].append(time.perf_counter() - started)
    return {module: Timing(statistics.median(s), min(s), max(s)) for module, s in samples.items()}


def microseconds(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.2f} us"


def table(rows: list[Row]) -> str:
    lines = [
        "| group | program | NumPy | dynfuse | time ratio (dynfuse / NumPy) | dynfuse materializations "
        "| dynfuse kernels launched | target |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        program = row.program
        if row.failure:
            lines.append(
                f"| {program.group} | {program.name} | | | FAIL: {row.failure} | | | {program.target} |"
            )
            continue
        numpy_time, lazy_time = row.timings["NumPy"].median, row.timings["dynfuse"].median
        ratio = f"{lazy_time / numpy_time:.2f}"
        if program.expect_no_materialization and row.counters["materializations"]:
            ratio += " (materialized while recording)"
        per_call = program.per if program.per > 1 else 1
        kernels = f"{row.counters['kernels_launched'] / per_call:.3g}"
        if row.counters["interpreted_ops"]:
            kernels += f" (+{row.counters['interpreted_ops'] / per_call:.3g} ops interpreted)"
        lines.append(
            f"| {program.group} | {program.name} | {microseconds(numpy_time)} / {program.unit} "
            f"| {microseconds(lazy_time)} / {program.unit} | {ratio} "
            f"| {row.counters['materializations'] / per_call:.3g} / {program.unit} "
            f"| {kernels} / {program.unit} | {program.target} |"
        )
    return "\n".join(lines)


def streaming_table(streaming: list[Row]) -> str:
    lines = [
        "| chain | dynfuse | NumPy | Numba `parallel=True`, preallocated output | np.copyto, same size "
        "| dynfuse's share of copy bandwidth | Numba's share | dynfuse / Numba time |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in streaming:
        s = {name: timing.median for name, timing in row.timings.items()}
        share = {name: s["copy"] / s[name] for name in s}  # the same bytes moved as the copy
        numba_cells = (
            f"{microseconds(s['Numba'])} | {microseconds(s['copy'])} | {share['dynfuse']:.0%} | "
            f"{share['Numba']:.0%} | {s['dynfuse'] / s['Numba']:.2f}"
            if "Numba" in s
            else f"not installed | {microseconds(s['copy'])} | {share['dynfuse']:.0%} | | "
        )
        lines.append(
            f"| {row.program.name} | {microseconds(s['dynfuse'])} | {microseconds(s['NumPy'])} "
            f"| {numba_cells} |"
        )
    return "\n".join(lines)


def import_line(times: dict[str, Timing]) -> str:
    plain, lazy = times["numpy"].median, times["dynfuse.numpy"].median
    return (
        f'Import, fresh processes (median): `python -c "import numpy"` {plain * 1e3:.0f} ms, '
        f'`python -c "import dynfuse.numpy"` {lazy * 1e3:.0f} ms: **{(lazy - plain) * 1e3:+.0f} ms** '
        "(target: at most +60 ms)."
    )


def cpu_model() -> str:
    """The processor's name, so a reader can tell which machine the table is from."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def section(rows: list[Row], imports: dict[str, Timing], command: str, seconds: float) -> str:
    streaming = [row for row in rows if row.program.group == "streaming" and not row.failure]
    streaming_lines = [
        "Streaming chains, each timed in the same rounds as a copy of the same size (`np.copyto` into",
        "an existing array; a chain, like the copy, reads its input and writes its output once):",
        "",
        streaming_table(streaming),
        "",
    ]
    if not streaming:
        streaming_lines = []
    return "\n".join(
        [
            f"## Overhead against NumPy: small work, scalar code, short statements, "
            f"measured {datetime.date.today().isoformat()}",
            "",
            f"`{command}` ({seconds:.0f} s): {cpu_model()}, {os.cpu_count()} cores; "
            f"Python {platform.python_version()}, NumPy {numpy.__version__}, dynfuse {dynfuse.__version__}.",
            "Both namespaces run the same code, and every dynfuse result was checked against NumPy's first",
            "(FAIL: it differed, or raised). Each contender runs in a process of its own (a script does),",
            "warmed up until its tiers settle; medians of interleaved rounds, per call, per",
            "recorded op or per statement; the ratio is dynfuse's time over NumPy's, so above 1 is slower",
            "than NumPy. A recording loop drops its results and materializes nothing; each stencil",
            f"statement is materialized ({STATEMENTS} a call, alternating two grids as a Jacobi sweep does);",
            "the other programs materialize only where their code reads a value or returns. Counters are",
            "`dynfuse.stats()` deltas over the timed calls. The machine is shared: read ratios, not times.",
            "",
            table(rows),
            "",
            *streaming_lines,
            import_line(imports),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, 2^20-element streaming chains")
    parser.add_argument("--repeats", type=int, help="timed rounds per program (default 7, --quick 3)")
    parser.add_argument(
        "--only", help="run the programs whose group or name contains this text; write nothing"
    )
    parser.add_argument("--print-only", action="store_true", help="print the tables, write nothing")
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)  # a timed process: contender, label
    arguments = parser.parse_args()
    if arguments.serve:
        serve_here(*arguments.serve, arguments.quick)
        return
    repeats = arguments.repeats or (3 if arguments.quick else 7)
    started = time.perf_counter()
    rows = []
    for program in programs(arguments.quick):
        if arguments.only and arguments.only not in f"{program.group} {program.name}":
            continue
        rows.append(measure_program(program, repeats, arguments.quick))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    imports = import_times(repeats if arguments.quick else 2 * repeats)
    command = "python perf/bench_overhead.py" + (" --quick" if arguments.quick else "")
    if arguments.repeats:
        command += f" --repeats {arguments.repeats}"
    text = section(rows, imports, command, time.perf_counter() - started)
    print("\n" + text)
    if not arguments.print_only and not arguments.only:
        write_results_section("overhead", text)
    if any(row.failure for row in rows):
        sys.exit("some dynfuse results differ from NumPy's: see FAIL above")


if __name__ == "__main__":
    main()
