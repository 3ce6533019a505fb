"""The C extensions, put in place of the Python code they speed up.

- ``dynfuse._recorder``: recording runs once per array operation, so its cost is every lazy op's
  dispatch overhead. It does what ``trace.Node.__init__``, ``trace.structure_id``,
  ``trace.replay_key`` and ``record.record_common`` do, on the same objects, and the common case of
  views, reductions and casts on pending arrays (``record.getitem``, ``reshape``...); it keeps the
  sites of ``tiers``' recording policy, and replays a cached small trace's kernel
  (``replay.replay_now``, ``launch_replay``).
- ``dynfuse._launch``: ``KernelCall`` packs a compiled CPU kernel's cells and calls it, where
  ``backends.cpu`` would pack them with ``struct`` and call through ctypes; ``leased_array`` makes
  a pooled array on its lease, where NumPy would read the lease's ``__array_interface__``.

The Python code stays the reference: it runs where an extension was not built (no C compiler),
where it is stale, or when ``DYNFUSE_PURE_PYTHON=1``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import warnings
from collections.abc import Callable, Iterator
from types import FunctionType, ModuleType
from typing import Any

import numpy

from . import (
    array,
    config,
    devices,
    direct,
    execute,
    float_errors,
    host_pool,
    interpret,
    ops,
    record,
    registry,
    replay,
    stats,
    tiers,
    trace,
)
from .backends import cpu

# What this Python code expects of each extension: a build from another version is not used.
INTERFACE_VERSION = 16
LAUNCH_INTERFACE_VERSION = 4

# (owner, attribute) -> the Python reference; LazyArray's methods with a fast path join below
_REFERENCE: dict[tuple[Any, str], Any] = {
    (trace.Node, "__init__"): trace.Node.__init__,
    (trace, "structure_id"): trace.structure_id,
    (trace, "replay_key"): trace.replay_key,
    (trace, "held_ancestors"): trace.held_ancestors,
    (trace, "nothing_pending_swept"): trace.nothing_pending_swept,
    (trace, "reads_nothing"): trace.reads_nothing,
    (trace, "pending_run"): trace.pending_run,
    (replay, "launch_replay"): replay.launch_replay,
    (replay, "replay_now"): replay.replay_now,
    (replay, "replay_group_now"): replay.replay_group_now,
    (tiers, "settle_sites"): tiers.settle_sites,
    (tiers, "site_repeats"): tiers.site_repeats,
    (tiers, "site_records"): tiers.site_records,
    (tiers, "note_recorded"): tiers.note_recorded,
    (tiers, "cap_verdicts"): tiers.cap_verdicts,
    (tiers, "set_site_trials"): tiers.set_site_trials,
    (tiers, "sites"): tiers.sites,
    (record, "record_common"): record.record_common,
    (direct, "result"): direct.result,
    (direct, "view"): direct.view,
    (direct, "fresh"): direct.fresh,
    (direct, "numpy_call"): direct.numpy_call,
    (tiers, "direct_elements"): tiers.direct_elements,
    (direct, "direct_elements"): tiers.direct_elements,
}
_accelerated: dict[tuple[Any, str], Any] = {}
# record's functions whose common case is recorded in C (each name is also its kind there, as a
# method's ``fast_path`` names one)
_FAST_FUNCTIONS = ("getitem", "reshape", "transpose", "expand_dims", "astype")


def _current_extension(name: str, version: int, description: str) -> ModuleType | None:
    """The extension ``dynfuse.<name>``, where it was built, and built from this dynfuse."""
    try:
        extension = importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        return None
    if getattr(extension, "INTERFACE_VERSION", None) != version:
        return _refused(description, "it was built from another version of dynfuse")
    return extension


def _load() -> ModuleType | None:
    _recorder = _current_extension("_recorder", INTERFACE_VERSION, "the C recorder")
    if _recorder is None:
        return None
    try:
        _recorder.bind(
            Node=trace.Node,
            LazyArray=array.LazyArray,
            trace_module=trace,
            config_module=config,
            structure_ids=trace._structure_ids,
            new_structure_id=trace._new_structure_id,
            thread_state=trace._thread,
            start_thread=trace._pending.start_thread,
            scalar_op=ops.SCALAR,
            common_dtypes=record._common_dtypes,
            common_result=record._common_result,
            bound_depth=record.bound_depth,
            mixed_devices=trace.mixed_devices,
            host=devices.HOST,
            direct_elements=tiers.direct_elements,
            numpy_scalar=numpy.generic,
            scalars=direct.SCALARS,
            writers=direct.WRITES_FIRST_ARGUMENT,
            declined=direct.DECLINED,
            large_made=direct.large_made,
            buffer_op=ops.BUFFER,
            pending=trace._pending,
            registry_module=registry,
            matmul=ops.BARRIERS["matmul"],
            dot=ops.BARRIERS["dot"],
            held_ancestors=trace.held_ancestors,
            package_path=os.path.dirname(__file__) + os.sep,
            materialize_carried=execute.materialize_carried,
            group_op=trace.GROUP,
            python_pending_run=trace.pending_run,
            view_ops=frozenset(ops.VIEWS.values()),
            take_views=execute.take_views,
            operator_into_region_limit=record.operator_into_region_limit,
            pooled_empty=host_pool.empty,
            pool_min_bytes=host_pool.MIN_BYTES,
            lock=execute.lock,
            replays=replay._replays,
            errstate_var=float_errors._state,
            float_flags=float_errors.FLAGS,
            getitem_op=ops.VIEWS["getitem"],
            transpose_op=ops.VIEWS["transpose"],
            reshape_op=ops.VIEWS["reshape"],
            astype_op=ops.ELEMENTWISE["astype"],
            masked_select_op=ops.BARRIERS["masked_select"],
            common_reductions=record._common_reductions,
            common_reduction=record._common_reduction,
            common_casts=record._common_casts,
            common_cast=record._common_cast,
        )
    except (TypeError, AttributeError, RuntimeError) as error:  # classes it does not match
        return _refused("the C recorder", str(error))
    stats.SOURCES.append((_recorder.tallies, _recorder.reset_tallies))
    return _recorder


def _load_launch() -> tuple[type | None, Callable | None, Callable | None]:
    """``KernelCall``, ``run_ranges`` and ``leased_array`` of the C launcher; None where it is not
    built (``run_ranges`` also where the system has no POSIX threads)."""
    _launch = _current_extension("_launch", LAUNCH_INTERFACE_VERSION, "the C kernel launcher")
    if _launch is None:
        return None, None, None
    return _launch.KernelCall, getattr(_launch, "run_ranges", None), _launch.leased_array


def _refused(extension: str, reason: str) -> None:
    warnings.warn(
        f"dynfuse: {extension} is not used ({reason}); running that part in Python (reinstall "
        "dynfuse to rebuild it)",
        RuntimeWarning,
        stacklevel=4,
    )


def _install(functions: dict[tuple[Any, str], Any]) -> None:
    for (owner, name), function in functions.items():
        setattr(owner, name, function)
    if functions is _accelerated:  # assigning the methods reset LazyArray's slots to a lookup
        _extension.install_slots()


def accelerate_namespace(namespace: ModuleType) -> None:
    """Put C functions in place of the namespace's functions that mark their common case with
    ``fast_path`` (``dynfuse.numpy``'s ufuncs), each keeping the attributes the Python one has."""
    for name, function in list(vars(namespace).items()):
        accelerated(namespace, name, function)


def accelerated(namespace: ModuleType, name: str, function: Any) -> Any:
    """The namespace's ``name``, bound to ``function``, or to its C version where it marks its
    common case with ``fast_path`` and recording runs in C (kept for ``pure_python``): what the
    name is now."""
    if _extension is None or not isinstance(function, FunctionType) or not hasattr(function, "fast_path"):
        return function
    fast = _extension.fast_function(*function.fast_path, function)
    fast.__dict__.update(vars(function))
    _REFERENCE[namespace, name] = function
    _accelerated[namespace, name] = fast
    bound = fast if in_use() else function
    setattr(namespace, name, bound)
    return bound


def set_profile_hook(hook: Callable[[int, Any], None] | None) -> None:
    """Tell ``hook`` of each op recorded, (0, its node), and each run at once, (1, None), by the
    Python recorder and the C one (``dynfuse.profiler``); None: tell nobody."""
    trace.profile_hook = hook
    if _extension is not None:
        _extension.set_profile_hook(hook)


def in_use() -> bool:
    """Whether recording runs in C now."""
    return bool(_accelerated) and trace.structure_id is _accelerated[trace, "structure_id"]


@contextlib.contextmanager
def pure_python() -> Iterator[None]:
    """Record in Python inside the block (tests compare the two)."""
    was_in_use = in_use()
    _install(_REFERENCE)
    try:
        yield
    finally:
        if was_in_use:
            _install(_accelerated)


_extension = _load()
if _extension is not None:
    for owner, name in _REFERENCE:
        _accelerated[owner, name] = getattr(_extension, "node_init" if name == "__init__" else name)
    for name in _FAST_FUNCTIONS:
        _REFERENCE[record, name] = getattr(record, name)
        _accelerated[record, name] = _extension.fast_function(None, name, _REFERENCE[record, name])
    # LazyArray's methods (and properties) mark their common case with ``fast_path``: in C it skips
    # their Python frame, and the Python method is what runs when the C function declines.
    for name, attribute in vars(array.LazyArray).items():
        method = attribute.fget if isinstance(attribute, property) else attribute
        if hasattr(method, "fast_path"):
            _REFERENCE[array.LazyArray, name] = attribute
            if isinstance(attribute, property):
                fast = _extension.fast_function(*method.fast_path, method)
                _accelerated[array.LazyArray, name] = property(fast, doc=attribute.__doc__)
            else:
                fast = _extension.fast_function(*method.fast_path, method)
                fast.__dict__.update(vars(method))  # ``fast_path`` too: ``dynfuse.numpy`` wraps some
                _accelerated[array.LazyArray, name] = fast
    # Always C's where it is built: views made in C are not registered, whichever recorder runs next
    direct.viewed_by_numpy = _extension.viewed_by_numpy
    if not config.pure_python:
        _install(_accelerated)
        tiers.forget_sites()
        interpret.run_strips = _extension.run_strips
if not config.pure_python:
    cpu.KernelCall, cpu.run_ranges, host_pool.leased_array = _load_launch()
