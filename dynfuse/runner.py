"""``dynfuse run SCRIPT [ARGS...]``: an unmodified NumPy script, run as ``python SCRIPT ARGS`` runs it,
with its own ``import numpy`` resolved to ``dynfuse.numpy``; then a report of what dynfuse did.

Which imports are redirected. ``builtins.__import__`` is wrapped for the run. An absolute import of
``numpy`` or ``numpy.X`` is redirected when the importing code is the script's own: its globals name a
file under the script's directory (the script itself, helper modules beside it, functions of theirs
called back by libraries), outside any ``site-packages``/``dist-packages`` there, and outside the
``numpy`` and ``dynfuse`` packages. ``numpy`` becomes ``dynfuse.numpy``; ``numpy.X`` becomes
``dynfuse.numpy.X`` where that module exists and stays the real ``numpy.X`` otherwise, but the top
level an ``import numpy.X`` binds is ``dynfuse.numpy`` either way. Every other importer (matplotlib,
pandas, scipy, NumPy itself, dynfuse) keeps getting real NumPy, and ``sys.modules['numpy']`` stays
real NumPy; the lazy arrays handed to them are materialized by the array protocols.
``importlib.import_module("numpy")`` does not pass through ``__import__`` and is not redirected.

The run. ``sys.argv`` is ``[SCRIPT, *ARGS]`` (``sys.argv[0]`` and ``__file__`` the absolute path, so
tracebacks read as under ``python``), ``sys.path[0]`` the script's real directory, ``__name__`` is
``'__main__'``. An uncaught exception is printed by ``sys.excepthook`` without the runner's frames
and the status is 1; ``sys.exit(code)`` gives ``code`` as Python would; an interrupt is reported, then
goes on to Python, which exits by SIGINT.

The report, printed to stderr at exit (``--report text``, the default; ``json``; ``none``), and
written as JSON to ``--report-file PATH`` if asked. Its keys:

    script                      the script's path, as given
    backend                     the backend that materialized arrays (``dynfuse.registry.backend``)
    exit_status                 the status the run exits with
    wall_seconds                wall-clock time from the script's first line to its end
    kernels_compiled            kernels compiled by the backend in this run (not found on disk)
    kernels_reused_from_disk    kernels whose compiled code was loaded from the disk cache
    kernels_reused_from_memory  launches of a kernel compiled earlier in the run (kernel cache hits
                                and replays)
    compile_seconds             time spent compiling kernels and loading them from disk
    ops_recorded                operations recorded lazily
    ops_fused                   operations computed inside compiled kernels
    ops_interpreted             operations run one by one with NumPy (tiny work, the ``numpy``
                                backend, a kernel that fell back)
    ops_run_at_once             operations on small computed arrays run by NumPy as they were
                                called, unrecorded (direct execution)
    materializations            times lazy values were computed
    fallbacks                   {function name: calls} that ran through NumPy, unrecorded
    stats                       every counter of ``dynfuse.stats()`` at exit
    fallback_reasons            {function name: why it ran through NumPy (the last time)}
    profile                     with ``--profile``: what dynfuse did for each line of the script
                                (``dynfuse.profiler``): ``wall_seconds``; ``lines``, each line's ops
                                recorded and how they ran (fused, interpreted, library), ops run at
                                once, materializations with their seconds by phase and reasons, and
                                fallbacks, by time; ``fallbacks`` by line, function and reason;
                                ``recompiles``, lines whose kernels were built again and again, with
                                what changed in their signatures; ``kernels``, each compiled kernel's
                                lines, launches, seconds and compile seconds
    workers                     {address: {kernels_compiled, kernels_reused_from_disk,
                                kernels_launched, ops_fused}} of each worker of the script's Dask
                                ``distributed`` client, if it is still connected at exit; else {}

A script that imports ``dask.array`` gets ``dynfuse.dask`` set up: Dask arrays made from its lazy
arrays have lazy chunks, each task's materialized in that task.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import importlib.util
import json
import os
import runpy
import signal
import sys
import time
import types
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import config, profile_report, registry
from .stats import reset_stats, stats

REPORT_FORMATS = ("text", "json", "none")
_INTERRUPTED = 128 + signal.SIGINT  # how a shell reports a process that SIGINT ended

# Never redirected, wherever they live: the real NumPy and the engine that stands in for it.
_REAL_NUMPY_PACKAGES = frozenset(("numpy", "dynfuse"))
_INSTALLED_PACKAGE_DIRECTORIES = frozenset(("site-packages", "dist-packages"))
# Frames a traceback shows under ``python SCRIPT`` but not ours: how the script was started.
_STARTER_MODULES = frozenset(("runpy", __name__))


def run(
    script: str,
    arguments: Sequence[str] = (),
    report: str = "text",
    report_file: str | None = None,
    profile: bool = False,
    profile_html: str | None = None,
) -> int:
    """Run ``script`` as ``python script *arguments`` would, report, and return the exit status.
    ``profile``: attribute what dynfuse did to the script's lines (``dynfuse.profiler``), printed
    after the report and added to the JSON's keys; ``profile_html``: that profile as a page, there."""
    if report not in REPORT_FORMATS:
        raise ValueError(f"run: report must be one of {', '.join(REPORT_FORMATS)}, not {report!r}")
    path = os.path.abspath(script)
    with contextlib.ExitStack() as cleanup:
        try:
            with open(path, "rb"):  # as python does: a script it cannot read is status 2, not run
                pass
            destination, page = (
                cleanup.enter_context(open(name, "w", encoding="utf-8")) if name else None
                for name in (report_file, profile_html)
            )
        except OSError as error:
            print(f"dynfuse run: can't open file {error.filename!r}: {error.strerror}", file=sys.stderr)
            return 2
        report_stream = sys.stderr  # as it is now: the script may replace or close its own
        sys.argv = [path, *arguments]
        sys.path[:1] = [os.path.dirname(os.path.realpath(path))]
        reset_stats()
        profiled = _profiling(profile or page is not None)
        started = time.perf_counter()
        status = _INTERRUPTED  # unless the script ends otherwise
        try:
            with numpy_imports_redirected(sys.path[0]):
                status = _run_as_main(path)
        finally:  # an interrupt goes on, reported: Python then exits by SIGINT, as for ``python SCRIPT``
            summary = make_report(script, status, time.perf_counter() - started)
            if profiled is not None:
                summary["profile"] = profiled.stop().data()
            _write_report(summary, report, report_stream, destination)
            if profiled is not None and report != "json":
                print(profile_report.format_profile(summary["profile"]), file=report_stream)
            if page is not None:
                page.write(profile_report.profile_html(summary["profile"]))
    return status


def _profiling(wanted: bool) -> Any:
    """The profile of the script's lines, started, where ``wanted`` or ``DYNFUSE_PROFILE=1`` asks for
    one (that one started with the process: the runner reports it); None where neither does."""
    if not wanted and not config.profile:
        return None
    from . import profiler

    return profiler.active() or profiler.Profile().start()


def _write_report(summary: dict[str, Any], report: str, stream: TextIO, destination: TextIO | None) -> None:
    with contextlib.suppress(AttributeError, OSError, ValueError):  # the script may have closed stdout
        sys.stdout.flush()  # the script's output first
    if report == "text":
        print(format_report(summary), file=stream)
    elif report == "json":
        print(json.dumps(summary, indent=2), file=stream)
    if destination is not None:
        json.dump(summary, destination, indent=2)
        destination.write("\n")


def _run_as_main(path: str) -> int:
    """The exit status of running ``path`` as ``__main__``, with Python's own handling of its end."""
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exit_request:
        return _exit_status(exit_request.code)
    except KeyboardInterrupt:
        raise  # to Python's own exit by SIGINT
    except BaseException as error:
        error.__traceback__ = _without_starter_frames(error.__traceback__)
        sys.excepthook(type(error), error, error.__traceback__)
        return 1
    return 0


def _exit_status(code: Any) -> int:
    """What the interpreter exits with for ``sys.exit(code)``: a message is printed, status 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _without_starter_frames(traceback: types.TracebackType | None) -> types.TracebackType | None:
    kept = []
    while traceback is not None:
        if traceback.tb_frame.f_globals.get("__name__") not in _STARTER_MODULES:
            kept.append(traceback)
        traceback = traceback.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


@contextlib.contextmanager
def numpy_imports_redirected(script_directory: str) -> Iterator[None]:
    """Within the block, code under ``script_directory`` that imports NumPy gets ``dynfuse.numpy``."""
    redirect = _NumpyRedirect(script_directory, builtins.__import__)
    builtins.__import__ = redirect
    try:
        yield
    finally:
        if builtins.__import__ is redirect:  # else someone wrapped it in turn: theirs stays
            builtins.__import__ = redirect.original


class _NumpyRedirect:
    """``builtins.__import__`` as the script's own code should see it (see the module docstring)."""

    def __init__(self, script_directory: str, original: Any) -> None:
        self.script_directory = os.path.realpath(script_directory)
        self.original = original
        self.namespace = importlib.import_module("dynfuse.numpy")
        self._script_files: dict[str, bool] = {}  # an importer's __file__ -> whether it is the script's
        self._targets: dict[str, str] = {}  # numpy.X -> the module imported in its place

    def __call__(
        self,
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        if level or not (name == "numpy" or name.startswith("numpy.")) or not self._from_script(globals):
            module = self.original(name, globals, locals, fromlist, level)
            # The script's own import of Dask, complete (one of Dask's own, mid-way, is not).
            if name.startswith("dask") and "dask.array" in sys.modules and self._from_script(globals):
                _dask_on_dynfuse()
            return module
        module = self.original(self._target(name), globals, locals, fromlist, 0)
        # ``import numpy.X`` binds the top level; ``from numpy.X import y`` reads the module itself.
        return module if fromlist else self.namespace

    def _from_script(self, importer: Mapping[str, Any] | None) -> bool:
        if not importer:
            return False
        name, file = importer.get("__name__"), importer.get("__file__")
        if not isinstance(name, str) or not isinstance(file, str):
            return False
        if name.partition(".")[0] in _REAL_NUMPY_PACKAGES:
            return False
        inside = self._script_files.get(file)
        if inside is None:
            inside = self._script_files[file] = self._under_script_directory(file)
        return inside

    def _under_script_directory(self, file: str) -> bool:
        relative = Path(os.path.relpath(os.path.realpath(file), self.script_directory))
        outside = relative.parts[:1] == (os.pardir,)
        return not outside and not _INSTALLED_PACKAGE_DIRECTORIES.intersection(relative.parts)

    def _target(self, name: str) -> str:
        """``dynfuse.numpy.X`` for ``numpy.X`` if dynfuse has that module, else ``numpy.X`` itself."""
        target = self._targets.get(name)
        if target is None:
            candidate = f"dynfuse.{name}"
            try:
                found = importlib.util.find_spec(candidate) is not None
            except ModuleNotFoundError as error:  # a parent is missing, or is a module, not a package
                if not (error.name and (candidate + ".").startswith(error.name + ".")):
                    raise
                found = False
            target = self._targets[name] = candidate if found else name
        return target


def _dask_on_dynfuse() -> None:
    """Once the script has imported ``dask.array``: lazy chunks (the script's arrays made into Dask
    arrays) are materialized in each task, on the workers (``dynfuse.dask``)."""
    if "dynfuse.dask" in sys.modules or _dask_unavailable:
        return
    try:
        importlib.import_module("dynfuse.dask")
    except ImportError as error:  # a Dask without what dynfuse.dask needs: Dask runs on, unfused
        _dask_unavailable.append(error)
        warnings.warn(
            f"dynfuse run: Dask's chunks stay NumPy's work, unfused ({error})", RuntimeWarning, stacklevel=2
        )


_dask_unavailable: list[ImportError] = []  # why dynfuse.dask could not be set up, once


def workers_stats() -> dict[str, dict[str, Any]]:
    """``dynfuse.stats()`` of each worker of the script's Dask client, if one is still connected
    (one the script closed can no longer be asked); else nothing."""
    if "distributed" not in sys.modules:
        return {}
    try:
        client = sys.modules["distributed"].default_client()
        if client.status != "running":
            return {}
        return client.run(stats)
    except Exception:  # no client, or a cluster going away: nothing to collect
        return {}


def _kernels_built(counters: Mapping[str, Any]) -> dict[str, int]:
    """Kernels compiled, and loaded from the disk cache instead, from one process's ``stats()``,
    which counts a kernel loaded from disk among the compiled ones (only its compile is saved)."""
    return {
        "kernels_compiled": counters["kernels_compiled"] - counters["disk_cache_hits"],
        "kernels_reused_from_disk": counters["disk_cache_hits"],
    }


def make_report(script: str, exit_status: int, wall_seconds: float) -> dict[str, Any]:
    """The report's dictionary (keys in the module docstring), from ``dynfuse.stats()`` now."""
    counters = stats()
    workers = workers_stats()
    return {
        "script": script,
        "backend": registry.backend,
        "exit_status": exit_status,
        "wall_seconds": wall_seconds,
        **_kernels_built(counters),
        "kernels_reused_from_memory": counters["cache_hits"] + counters["replays"],
        "compile_seconds": counters["compile_seconds"],
        "ops_recorded": counters["ops_recorded"],
        "ops_fused": counters["fused_ops"],
        "ops_interpreted": counters["interpreted_ops"],
        "ops_run_at_once": counters["direct_ops"],
        "materializations": counters["materializations"],
        "fallbacks": dict(sorted(counters["fallback_names"].items(), key=lambda item: (-item[1], item[0]))),
        "fallback_reasons": counters["fallback_reasons"],
        "stats": counters,
        "workers": {
            address: {
                **_kernels_built(worker),
                "kernels_launched": worker["kernels_launched"],
                "ops_fused": worker["fused_ops"],
            }
            for address, worker in workers.items()
        },
    }


def format_report(report: Mapping[str, Any]) -> str:
    """The report as a few lines for a person, read from ``make_report``'s dictionary."""
    fallbacks = report["fallbacks"]
    listed = ", ".join(f"{name} ({calls})" for name, calls in fallbacks.items())
    return "\n".join(
        (
            f"dynfuse run: {report['script']} exited with status {report['exit_status']} "
            f"after {report['wall_seconds']:.3f} s (backend {report['backend']})",
            f"  kernels    {report['kernels_compiled']:,} compiled and "
            f"{report['kernels_reused_from_disk']:,} loaded from the disk cache "
            f"in {report['compile_seconds']:.3f} s; "
            f"{report['kernels_reused_from_memory']:,} launches reused one from memory",
            f"  ops        {report['ops_recorded']:,} recorded, {report['ops_fused']:,} fused into kernels, "
            f"{report['ops_interpreted']:,} interpreted, {report['ops_run_at_once']:,} run at once by NumPy; "
            f"{report['materializations']:,} materializations",
            f"  fallbacks  {f'{sum(fallbacks.values()):,}: {listed}' if fallbacks else 'none'}",
            *_workers_line(report["workers"]),
        )
    )


def _workers_line(workers: Mapping[str, Mapping[str, int]]) -> list[str]:
    if not workers:
        return []
    total = {key: sum(worker[key] for worker in workers.values()) for key in next(iter(workers.values()))}
    return [
        f"  workers    {len(workers)} Dask workers: {total['kernels_compiled']:,} kernels compiled and "
        f"{total['kernels_reused_from_disk']:,} loaded from disk; {total['kernels_launched']:,} launches, "
        f"{total['ops_fused']:,} ops fused"
    ]
