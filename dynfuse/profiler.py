"""Where the time goes, line by line: what dynfuse did for each line of the program.

A profile attributes dynfuse's work to the program's own source lines (the innermost frame outside
dynfuse and NumPy): the ops each line recorded and how they ran (fused into compiled kernels,
interpreted op by op, as library calls), the ops it ran at once by NumPy, the materializations it
triggered with their reasons and their time by phase (planning, compiling, loading code from disk,
kernels, interpreting, library calls, copies between memories, and the rest, dynfuse's own
bookkeeping), its fallbacks and why, the kernels built for it (a line whose kernels are built again
and again, and what changed in their signatures), and each compiled kernel's launches and time.

Nothing of it costs anything unless a profile runs: starting one wraps the few runtime functions
that do those things (``_wrapped``: materializing, planning, compiling, launching, interpreting,
library calls, copies, fallbacks) and sets the recorders' hook (``accelerate.set_profile_hook``),
which tells it of each op recorded or run at once; stopping puts them back. While a profile runs,
the C recorder tells the hook when it replays a write's value itself, so that replay is timed and
attributed as it runs; a loop's carried run goes through Python's materialization, which launches
it in C the same way. The program's results are the same. One profile runs at a time, in the whole
process.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import itertools
import linecache
import operator
import os
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy

from . import accelerate, cache, execute, interpret, pressure, registry, replay, tiers, trace
from .ops import OpKind
from .profile_report import MEASURED_PHASES, format_profile, profile_html
from .stats import thread_counters

# The counters' module (the package's ``stats`` is its function), whose fallbacks a profile hears
_counting = importlib.import_module(f"{__package__}.stats")

# A line whose kernels were built this many times or more is a recompile worth showing
RECOMPILES_SHOWN_FROM = 4
# Code under these directories is dynfuse's or NumPy's, not the program's
_NOT_THE_PROGRAM = tuple(
    os.path.dirname(os.path.abspath(module.__file__)) + os.sep for module in (trace, numpy)
)

Line = tuple[str, int, str]  # file, line number, function
# What the recorders' hook is told (``Profile._noted``)
_RECORDED, _RUN_AT_ONCE, _REPLAY_IN_C, _REPLAY_IN_C_OVER = range(4)
_WRITTEN_IN_C = "a write's value (x[...] = value, x op= value)"


class _LineStats:
    __slots__ = (
        "direct",
        "fallbacks",
        "fates",
        "materializations",
        "phases",
        "reasons",
        "recorded",
        "seconds",
    )

    def __init__(self) -> None:
        self.recorded = self.direct = self.materializations = self.fallbacks = 0
        self.seconds = 0.0
        self.fates: Counter[str] = Counter()
        self.phases: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()

    def materialized(self, seconds: float, reason: str, phases: Counter[str]) -> None:
        self.materializations += 1
        self.seconds += seconds
        self.reasons[reason] += 1
        self.phases.update(phases)


class _KernelStats:
    __slots__ = ("compile_seconds", "launches", "lines", "number", "ops", "seconds", "shape")

    def __init__(self, number: int, kernel: Any) -> None:
        self.number = number
        self.shape = kernel.shape
        self.ops = _computing_ops(kernel)
        self.lines: set[Line] = set()
        self.launches = 0
        self.seconds = self.compile_seconds = 0.0

    def launched(self, seconds: float, lines: Iterable[Line]) -> None:
        self.launches += 1
        self.seconds += seconds
        self.lines.update(lines)


class _Materialization:
    __slots__ = ("line", "phases", "reason")

    def __init__(self, line: Line | None, reason: str) -> None:
        self.line = line
        self.reason = reason
        self.phases: Counter[str] = Counter()


class Profile:
    """What dynfuse did for each line of the program while the profile ran: ``start``/``stop``, or
    ``with dynfuse.profile() as profile:``; then ``data()``, ``text()``, ``html()``."""

    def __init__(self) -> None:
        self._lines: dict[Line, _LineStats] = {}
        self._origins: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # node -> line
        self._fallbacks: Counter[tuple[Line | None, str, str]] = Counter()
        self._builds: dict[Line, list[dict[str, str]]] = {}
        self._kernels: dict[Any, _KernelStats] = {}
        self._state = threading.local()
        self._ours: dict[str, bool] = {}  # by file: whether it is dynfuse's or NumPy's
        self._places: dict[tuple[int, int], tuple[Line, Any]] = {}
        self._originals: dict[tuple[Any, str], Any] = {}
        self._started = self._wall = 0.0

    # ---- starting and stopping -----------------------------------------------------------------

    def start(self) -> Profile:
        global _active
        with _starting:
            if _active is not None:
                raise RuntimeError("dynfuse.profile: a profile is already running in this process")
            _active = self
        for owner, name, wrap in _wrapped():
            original = owner.__dict__[name]
            if original is not None:  # C's replays, where the C recorder is in use
                self._originals[owner, name] = original
                setattr(owner, name, wrap(self, original))
        accelerate.set_profile_hook(self._noted)
        self._started = time.perf_counter()
        return self

    def stop(self) -> Profile:
        global _active
        if _active is not self:
            return self
        self._wall += time.perf_counter() - self._started
        accelerate.set_profile_hook(None)
        for (owner, name), original in self._originals.items():
            setattr(owner, name, original)
        self._originals.clear()
        _active = None
        return self

    def __enter__(self) -> Profile:
        return self.start()

    def __exit__(self, *exception: object) -> None:
        self.stop()

    # ---- what the program's lines did ----------------------------------------------------------

    def _line(self, frame: Any) -> Line | None:
        """The program's line running ``frame`` or the nearest frame that called it: known by its
        code and instruction, as a frame's line number is worked out from its code's line table."""
        frame = _program_frame(frame, self._ours)
        if frame is None:
            return None
        code = frame.f_code
        place = (id(code), frame.f_lasti)
        known = self._places.get(place)
        if known is None:  # the code is kept with its line, so that its id names no other code
            known = self._places[place] = ((code.co_filename, frame.f_lineno, code.co_name), code)
        return known[0]

    def _stats(self, line: Line) -> _LineStats:
        found = self._lines.get(line)
        if found is None:
            found = self._lines[line] = _LineStats()
        return found

    def _noted(self, kind: int, subject: Any) -> None:
        """The recorders' hook: an op recorded (``kind`` 0, its node), run at once (1, None), a
        write's value replayed by the C recorder (2, its node) and that replay over (3, whether it
        computed the value)."""
        if kind == _REPLAY_IN_C_OVER:
            self._replayed_in_c(subject)
            return
        line = self._line(sys._getframe(1))
        if kind == _REPLAY_IN_C:
            kernel = _kept_kernel(subject, registry.backend)
            self._state.in_c = (
                line,
                self._uncomputed_lines(_with_ancestors(subject)),
                kernel,
                time.perf_counter(),
            )
        elif line is None:
            return
        elif kind == _RUN_AT_ONCE:
            self._stats(line).direct += 1
        elif kind == _RECORDED and subject.op.kind is not OpKind.VIEW:
            self._stats(line).recorded += 1
            self._origins[subject] = line

    def _replayed_in_c(self, computed: bool) -> None:
        """A write's value the C recorder replayed: a materialization at the write's line, all
        kernel time, its ops fused."""
        line, fused, kernel, started = self._state.in_c
        seconds = time.perf_counter() - started
        self._state.in_c = None
        if not computed or line is None:
            return
        if kernel is not None:
            self._kernel(kernel).launched(seconds, fused)
        self._stats(line).materialized(seconds, _WRITTEN_IN_C, Counter(kernel=seconds))
        self._count_fates(fused, "fused")

    def _uncomputed_lines(self, nodes: Iterable[Any]) -> Counter[Line]:
        """The lines of ``nodes``, each as often as it recorded one of them: read before they are
        computed, as a replay releases the graph."""
        return Counter(line for line in map(self._origins.get, nodes) if line is not None)

    def _count_fates(self, lines: Counter[Line], fate: str) -> None:
        for line, count in lines.items():
            self._stats(line).fates[fate] += count

    def _fates(self, nodes: Iterable[Any], fate: str) -> None:
        origins = self._origins
        for node in nodes:
            line = origins.pop(node, None)
            if line is not None:
                self._stats(line).fates[fate] += 1

    # ---- the runtime's functions, wrapped while the profile runs -------------------------------

    def _materializing(self, original: Callable) -> Callable:
        """A materialization: its line, its reason, its time by phase."""

        @functools.wraps(original)
        def materializing(*args: Any, **kwargs: Any) -> Any:
            state = self._state
            if getattr(state, "current", None) is not None:  # within another's
                return original(*args, **kwargs)
            frame = sys._getframe(1)
            current = state.current = _Materialization(self._line(frame), _reason(frame))
            counters = thread_counters()
            before = counters["materializations"]
            state.replayed = False
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                seconds = time.perf_counter() - started
                state.current = None
                # counted in Python, or by a launch in C (its own count, read only in snapshots)
                computed = counters["materializations"] > before or state.replayed
                if computed and current.line is not None:
                    self._stats(current.line).materialized(seconds, current.reason, current.phases)

        return materializing

    def _phase(self, name: str, original: Callable, before: Callable | None = None) -> Callable:
        """Time spent in ``original`` counted to the running materialization's ``name`` phase,
        unless another phase holds it already."""

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            state = self._state
            current = getattr(state, "current", None)
            if before is not None:
                before(*args)
            if current is None or getattr(state, "phase", None) is not None:
                return original(*args, **kwargs)
            state.phase = name
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                state.phase = None
                current.phases[getattr(state, "phase_as", None) or name] += time.perf_counter() - started
                state.phase_as = None

        return timed

    def _launching(self, original: Callable) -> Callable:
        """A compiled kernel's launch: its time and the lines of the step it runs."""

        @functools.wraps(original)
        def launching(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(kernel, *args, **kwargs)
            finally:
                lines = getattr(self._state, "step_lines", ())
                self._kernel(kernel).launched(time.perf_counter() - started, lines)

        return self._phase("kernel", launching)

    def _kernel(self, kernel: Any) -> _KernelStats:
        found = self._kernels.get(kernel.signature)
        if found is None:
            found = self._kernels[kernel.signature] = _KernelStats(len(self._kernels) + 1, kernel)
        return found

    def _building(self, original: Callable, waits: bool) -> Callable:
        """A kernel asked for its code: where it was not built yet, a build of the step's lines (a
        compile, or a load from the disk cache: ``load`` time), remembered for recompiles."""

        @functools.wraps(original)
        def building(backend: Any, kernel: Any) -> Any:
            new = not cache.has_compiled(backend, kernel)
            counters = thread_counters()
            loaded = counters["disk_cache_hits"]
            try:
                return original(backend, kernel)
            finally:
                if new:
                    lines = getattr(self._state, "step_lines", set())
                    record = self._kernel(kernel)
                    record.lines |= lines
                    for line in lines:
                        self._builds.setdefault(line, []).append(_signature_parts(kernel))
                    if (
                        counters["disk_cache_hits"] > loaded
                        and getattr(self._state, "phase", None) == "compile"
                    ):
                        self._state.phase_as = "load"

        return self._phase("compile", building) if waits else building

    def _builder(self, original: Callable) -> Callable:
        """A kernel's build, on whichever thread runs it: its time is the kernel's compile time."""

        @functools.wraps(original)
        def builder(backend: Any, kernel: Any) -> Callable[[], Any]:
            build = original(backend, kernel)

            def timed_build() -> Any:
                started = time.perf_counter()
                try:
                    return build()
                finally:
                    self._kernel(kernel).compile_seconds += time.perf_counter() - started

            return timed_build

        return builder

    def _running_step(self, original: Callable) -> Callable:
        """A plan's kernel step: its ops fused, unless it ran interpreted."""

        @functools.wraps(original)
        def running_step(run: Any, step: Any) -> Any:
            state = self._state
            nodes = _weakly(run.nodes[number] for number in step.nodes)
            state.step_lines = set(self._uncomputed_lines(_alive(nodes)))
            state.interpreted = False
            try:
                return original(run, step)
            finally:
                self._fates(_alive(nodes), "interpreted" if state.interpreted else "fused")
                state.step_lines = set()

        return running_step

    def _interpreting_step(self, original: Callable) -> Callable:
        def interpreted(*args: Any) -> None:
            self._state.interpreted = True

        return self._phase("interpret", original, before=interpreted)

    def _interpreting(self, original: Callable) -> Callable:
        """The reference executor run on a trace outside a plan's step: its ops interpreted."""

        def unplanned(order: Any, *args: Any) -> None:
            state = self._state
            if getattr(state, "current", None) is not None and not getattr(state, "step_lines", None):
                self._fates(order, "interpreted")

        return self._phase("interpret", original, before=unplanned)

    def _library(self, original: Callable) -> Callable:
        def called(node: Any, *args: Any) -> None:
            self._fates([node], "library")

        return self._phase("library", original, before=called)

    def _replaying(
        self, original: Callable, kernel_of: Callable | None = None, computed: int = 0
    ) -> Callable:
        """A kept launch run again on a new trace of its structure (``KernelReplay.materialize``;
        C's ``replay_now``, ``replay_group_now``, ``launch_replay``): its ops fused, and its
        kernel launched, where ``kernel_of`` its arguments names one that no wrapped ``launch``
        counted. ``computed``: the position of the argument that is the node, or a group's members.
        """

        @functools.wraps(original)
        def replaying(*args: Any) -> bool:
            state = self._state
            if getattr(state, "replaying", False):  # within another replay, which counts it
                return original(*args)
            kernel = None if kernel_of is None else kernel_of(*args)
            fused = self._uncomputed_lines(
                node for top in _nodes(args[computed]) for node in _with_ancestors(top)
            )
            record = None if kernel is None else self._kernel(kernel)
            launches = None if record is None else record.launches
            state.step_lines, state.replaying = set(fused), True
            started = time.perf_counter()
            try:
                done = original(*args)
            finally:
                state.step_lines, state.replaying = set(), False
            if done:
                state.replayed = True
                self._count_fates(fused, "fused")
                if record is not None and record.launches == launches:  # launched in C
                    record.launched(time.perf_counter() - started, fused)
            return done

        return self._phase("kernel", replaying)

    def _falling_back(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def fell_back(name: str, why: str) -> None:
            original(name, why)
            line = self._line(sys._getframe(1))
            self._fallbacks[line, name, why] += 1
            if line is not None:
                self._stats(line).fallbacks += 1

        return fell_back

    # ---- what it found -------------------------------------------------------------------------

    def data(self) -> dict[str, Any]:
        """The profile as plain data (what ``--report-file`` writes under its keys)."""
        wall = self._wall + (time.perf_counter() - self._started if _active is self else 0.0)
        lines = []
        for (file, number, function), found in self._lines.items():
            phases = {name: found.phases.get(name, 0.0) for name in MEASURED_PHASES}
            phases["other"] = max(0.0, found.seconds - sum(phases.values()))
            lines.append(
                {
                    **_where((file, number, function)),
                    "recorded": found.recorded,
                    "fused": found.fates["fused"],
                    "interpreted": found.fates["interpreted"],
                    "library": found.fates["library"],
                    "direct": found.direct,
                    "materializations": found.materializations,
                    "seconds": found.seconds,
                    "phases": phases,
                    "reasons": dict(found.reasons.most_common()),
                    "fallbacks": found.fallbacks,
                }
            )
        lines.sort(
            key=lambda line: (
                -line["seconds"],
                -line["recorded"] - line["direct"],
                line["file"],
                line["line"],
            )
        )
        fallbacks = [
            {**_where(line), "name": name, "reason": why, "calls": calls}
            for (line, name, why), calls in self._fallbacks.most_common()
        ]
        recompiles = [
            {**_where(line), "compiles": len(builds), "changes": _changes(builds)}
            for line, builds in self._builds.items()
            if len(builds) >= RECOMPILES_SHOWN_FROM
        ]
        recompiles.sort(key=lambda entry: -entry["compiles"])
        kernels = [
            {
                "name": f"kernel {found.number} ({_shape(found.shape)}, {found.ops} ops)",
                "lines": sorted([file, number] for file, number, _ in found.lines),
                "ops": found.ops,
                "launches": found.launches,
                "seconds": found.seconds,
                "compile_seconds": found.compile_seconds,
            }
            for found in sorted(self._kernels.values(), key=lambda found: -found.seconds)
        ]
        return {
            "wall_seconds": wall,
            "lines": lines,
            "fallbacks": fallbacks,
            "recompiles": recompiles,
            "kernels": kernels,
        }

    def text(self, top: int = 20) -> str:
        """The profile for a terminal: the ``top`` lines by time, then fallbacks, recompiles, kernels."""
        return format_profile(self.data(), top)

    def html(self) -> str:
        """The profile as one self-contained page: the program's source, each line's profile beside it."""
        return profile_html(self.data())


_active: Profile | None = None
_starting = threading.Lock()


def active() -> Profile | None:
    """The profile running in this process, if one is."""
    return _active


def profile_process() -> Profile:
    """Profile from now to the process's exit (``DYNFUSE_PROFILE=1``), the text printed to stderr
    then, unless something stopped it before (``dynfuse run --profile`` reports it itself)."""
    profile = Profile().start()

    def report() -> None:
        if _active is profile:
            profile.stop()
            print(profile.text(), file=sys.stderr)

    atexit.register(report)
    return profile


def _wrapped() -> list[tuple[Any, str, Callable[[Profile, Callable], Callable]]]:
    """What a profile wraps while it runs: (owner, attribute, how)."""
    from . import schedule

    materializing = Profile._materializing
    return [
        (execute, "materialize", materializing),
        (execute, "materialize_into", materializing),
        (pressure, "materialize", materializing),
        (schedule, "plan_for", lambda profile, original: profile._phase("plan", original)),
        (schedule, "number_trace", lambda profile, original: profile._phase("plan", original)),
        (tiers, "_code_cost", lambda profile, original: profile._phase("compile", original)),
        (cache, "compiled_kernel", lambda profile, original: profile._building(original, waits=True)),
        (cache, "compile_in_background", lambda profile, original: profile._building(original, waits=False)),
        (cache, "_builder", Profile._builder),
        (execute, "launch", Profile._launching),
        (replay, "launch", Profile._launching),
        (execute._Run, "run_kernel", Profile._running_step),
        (execute._Run, "interpret", Profile._interpreting_step),
        (interpret, "run", Profile._interpreting),
        (execute, "library_call", Profile._library),
        (
            replay.KernelReplay,
            "materialize",
            lambda profile, original: profile._replaying(original, _own_kernel, 1),
        ),
        (replay, "replay_now", lambda profile, original: profile._replaying(original, _kept_kernel)),
        (replay, "replay_group_now", Profile._replaying),
        (replay, "launch_replay", Profile._replaying),
        (execute, "moved_leaves", lambda profile, original: profile._phase("copy", original)),
        (execute, "_moved_results", lambda profile, original: profile._phase("copy", original)),
        (_counting, "count_fallback", Profile._falling_back),
    ]


def _weakly(nodes: Iterable[Any]) -> list[weakref.ref]:
    """References to ``nodes`` that do not count: which intermediates the program holds is read
    from reference counts (``trace.held_ancestors``, ``held_outside``), which a profile must not move."""
    return [weakref.ref(node) for node in nodes]


def _alive(references: Iterable[weakref.ref]) -> Iterator[Any]:
    return (node for node in map(operator.call, references) if node is not None)


def _with_ancestors(node: Any) -> Iterator[Any]:
    yield node
    yield from node.ancestors


def _nodes(first: Any) -> tuple[Any, ...]:
    """The nodes a replay computes: one, or a group's members."""
    return first if isinstance(first, tuple) else (first,)


def _own_kernel(kept: Any, node: Any, *args: Any) -> Any:
    return kept.kernel


def _kept_kernel(node: Any, backend: str, *args: Any) -> Any:
    """The kernel C's ``replay_now`` would launch for ``node``: its structure's kept one, if any."""
    key = trace.replay_key(backend, node)
    kept = None if key is None else replay.find(key)
    run = None if kept is None else kept.runs.get(kept.held(node))
    return getattr(run, "kernel", None)


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape)) or "scalar"


def _where(line: Line | None) -> dict[str, Any]:
    if line is None:
        return {"file": "", "line": 0, "function": "", "source": ""}
    file, number, function = line
    return {
        "file": file,
        "line": number,
        "function": function,
        "source": linecache.getline(file, number).strip(),
    }


# Why a materialization happened, by the function of dynfuse's that asked for it: the first of
# ``_ON_THE_WAY`` met between the materialization and the program, else the one the program called
_ON_THE_WAY = {
    "bound_depth": "the trace reached its depth bound (DYNFUSE_MAX_DEPTH)",
    "bound_memory": "pending traces held too much memory (DYNFUSE_PENDING_MEMORY)",
    "fallback": "an op dynfuse does not record needed the values",
    "materialize_readers": "a write over memory that pending values read",
    "materialize_carried": "a value a loop's run carried into its next run",
}
_CALLED = {
    "__array__": "converted to a NumPy array",
    "__repr__": "printed",
    "__str__": "printed",
    "__format__": "printed",
    "__float__": "a Python number read",
    "__int__": "a Python number read",
    "__complex__": "a Python number read",
    "__index__": "a Python number read",
    "__bool__": "a truth value read",
    "item": "a Python number read",
    "tolist": "a Python list made",
    "evaluate": "dynfuse.evaluate",
    "__setitem__": "a write (x[...] = value)",
    "__dlpack__": "handed to another library",
}


def _program_frame(frame: Any, ours: dict[str, bool]) -> Any:
    """The innermost frame from ``frame`` out whose code is neither dynfuse's nor NumPy's, known by
    its file (a name whose hash Python keeps; a code object's is worked out from its contents)."""
    while frame is not None:
        file = frame.f_code.co_filename
        mine = ours.get(file)
        if mine is None:
            mine = ours[file] = file.startswith(_NOT_THE_PROGRAM)
        if not mine:
            return frame
        frame = frame.f_back
    return None


def _reason(frame: Any) -> str:
    """Why the materialization running under ``frame`` happened, from dynfuse's frames above it."""
    called = None
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(_NOT_THE_PROGRAM):
            break
        if code.co_name in _ON_THE_WAY:
            return _ON_THE_WAY[code.co_name]
        if code.co_filename.endswith(f"{os.sep}pressure.py"):
            return _ON_THE_WAY["bound_memory"]
        called = code.co_name
        frame = frame.f_back
    if called is None:
        return "materialized"
    if called.startswith("__i") and called.endswith("__"):
        return "an in-place update (x op= value)"
    return _CALLED.get(called, f"in {called}")


def _computing_ops(kernel: Any) -> int:
    """A kernel's instructions but its loads."""
    return len(kernel.instructions) - len(kernel.inputs)


def _signature_parts(kernel: Any) -> dict[str, str]:
    """What a kernel's signature says of the arrays it reads, to tell one build from the next."""
    loads = kernel.inputs
    return {
        "shape": str(tuple(kernel.shape)),
        "dtype": ", ".join(sorted({str(load.dtype) for load in loads})) or "none",
        "layout": " ".join("C" if contiguous else "strided" for contiguous in kernel.contiguous_loads)
        or "none",
        "ops": str(_computing_ops(kernel)),
    }


def _changes(builds: list[dict[str, str]], most: int = 6) -> list[str]:
    """What changed from each build of a line's kernels to the next: the first ``most`` kinds."""
    changes: list[str] = []
    for before, after in itertools.pairwise(builds):
        for part, value in after.items():
            if before[part] != value:
                change = f"{part} {before[part]} -> {value}"
                if change not in changes:
                    changes.append(change)
        if len(changes) >= most:
            break
    return changes[:most]
