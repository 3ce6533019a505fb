"""NumPy's floating-point error state, as ops record it and as their reruns restore it.

NumPy decides what a divide-by-zero, overflow, underflow or invalid operation does (warn, raise,
ignore, call, log) from its error state (``np.errstate``, ``np.seterr``), a context variable read
when a ufunc runs. A lazy op runs later, maybe outside the ``with np.errstate(...)`` it was
recorded in, so each op keeps the state in force when it was recorded (``current``), and whatever
runs it through NumPy runs it under that state (``restored``).

A compiled kernel does not call NumPy: it reports the IEEE flags its work raised into one word,
``FLAGS`` (its address ``flags_address``, which kernels name as ``FLAGS_SYMBOL``), as NumPy's bit
values; a device's kernel, into the device's own word (``note_device_launch``, ``device_flags``).
Where a kernel raised a flag that some op of it does not ignore (``heeded``), its ops that can
report an error run again by NumPy under their recorded states (``interpret.rerun_for_errors``),
which then warns, raises or calls exactly as NumPy does: a flag is rare, and reporting one too many
only costs that rerun.
"""

from __future__ import annotations

import array
import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

# NumPy's bits (``np._core.umath`` FPE_*): what kernels report
DIVIDE, OVERFLOW, UNDERFLOW, INVALID = 1, 2, 4, 8
ALL = DIVIDE | OVERFLOW | UNDERFLOW | INVALID
CATEGORIES = {DIVIDE: "divide", OVERFLOW: "over", UNDERFLOW: "under", INVALID: "invalid"}
FLAGS_SYMBOL = "dynfuse_float_flags"

try:  # NumPy 2's context variable: reading it costs a few tens of nanoseconds
    from numpy._core.umath import _extobj_contextvar as _state
except ImportError:  # a NumPy that keeps it elsewhere: ops run under the state in force when they run
    _state = None

# One 8-byte word kernels OR their flags into (atomically: threads of one launch share it)
FLAGS = array.array("q", [0])


def flags_address() -> int:
    return FLAGS.buffer_info()[0]


# Devices whose kernels may have raised flags into their own word since it was last read or cleared
_unread_devices: dict[int, Any] = {}


def note_device_launch(device: Any) -> None:
    """A kernel that reports into ``device``'s word (``flags_word``) was launched."""
    _unread_devices[id(device)] = device


def device_flags(heeding: Callable[[], bool]) -> int:
    """The flags devices' kernels raised since the last call: read where ``heeding()`` (reading waits
    for the device's launches to end), else cleared unread, as no op asked for them."""
    flags = 0
    if _unread_devices:
        devices = list(_unread_devices.values())
        _unread_devices.clear()
        read = heeding()
        for device in devices:
            if read:
                flags |= device.take_flags()
            else:
                device.clear_flags()
    return flags


def take_flags() -> int:
    """The flags kernels raised since the last call, cleared."""
    flags = FLAGS[0]
    if flags:
        FLAGS[0] = 0
    return flags


def current() -> Any:
    """The error state in force: an opaque value ``enter`` takes (None where it cannot be read)."""
    return None if _state is None else _state.get()


def enter(state: Any) -> Any:
    """Put ``state`` (from ``current``) in force, until ``leave`` is given what this returns."""
    return None if state is None or _state is None else _state.set(state)


def leave(token: Any) -> None:
    if token is not None:
        _state.reset(token)


@contextlib.contextmanager
def restored(state: Any) -> Iterator[None]:
    """Run under ``state`` (from ``current``)."""
    token = enter(state)
    try:
        yield
    finally:
        leave(token)


_modes: dict[Any, dict[str, str]] = {}  # by state, a few: a loop may enter a fresh errstate each time
_stopping: dict[Any, bool] = {}  # by state, the same few: whether a mode of it stops the program


def _modes_of(state: Any) -> dict[str, str]:
    modes = _modes.get(state)
    if modes is None:
        if len(_modes) >= 64:
            _modes.clear()
        with restored(state):
            modes = _modes[state] = np.geterr()
    return modes


def _stops(state: Any) -> bool:
    """Whether an error under ``state`` (from ``current``; None: the one in force) is raised, or a
    handler called or logged to: what no write may come before."""
    state = current() if state is None else state
    stops = None if state is None else _stopping.get(state)
    if stops is None:
        # no context variable to key by (state None): NumPy's modes now, not kept
        modes = np.geterr() if state is None else _modes_of(state)
        stops = any(mode in ("raise", "call", "log") for mode in modes.values())
        if state is not None:
            if len(_stopping) >= 64:
                _stopping.clear()
            _stopping[state] = stops
    return stops


def heeded(flags: int, states: Iterable[Any]) -> bool:
    """Whether any of ``states`` (ops' recorded states; None: the one in force) does not ignore a
    flag of ``flags``."""
    names = [name for bit, name in CATEGORIES.items() if flags & bit]
    return any(any(modes[name] != "ignore" for name in names) for modes in _distinct_modes(states))


def _distinct_modes(states: Iterable[Any]) -> Iterator[dict[str, str]]:
    """NumPy's error modes (``np.geterr()``) under each distinct one of ``states`` (ops' recorded
    states; None: the one in force)."""
    for state in {id(state): state for state in states}.values():
        state = current() if state is None else state
        yield np.geterr() if state is None else _modes_of(state)


# What NumPy's warnings and errors say, per category: "<what> encountered in <ufunc>"
_ENCOUNTERED = ("divide by zero", "overflow", "underflow", "invalid value")


def may_interrupt(states: Iterable[Any], names: Callable[[], Iterable[str]]) -> bool:
    """Whether a flag a kernel reports could stop the program for any of its ops (``states``: each
    op's recorded state, None for the one in force; ``names()``: their ufuncs' names, asked for only
    where a filter makes a warning an error): an error raised, a handler called or logged to, or a
    warning that a filter makes an error (one whose message could be NumPy's for one of them). Then
    nothing may be written before the kernel's flags are heeded, as NumPy raises before it assigns."""
    if any(_stops(state) for state in {id(state): state for state in states}.values()):
        return True
    errors = [
        message
        for action, message, category, _, _ in warnings.filters
        if action == "error" and issubclass(RuntimeWarning, category)
    ]
    if not errors:
        return False
    texts = [f"{what} encountered in {name}" for what in _ENCOUNTERED for name in set(names())]
    return any(message is None or any(message.match(text) for text in texts) for message in errors)


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


@contextlib.contextmanager
def warned_where_asked() -> Iterator[None]:
    """The warnings of what runs inside given again at the program's line that asked for the value
    (the first frame outside dynfuse), under the program's filters, as NumPy's come from the line
    that called it; not at dynfuse's line that ran NumPy."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            frame = sys._getframe(1)
            while frame.f_back is not None and (
                frame.f_code.co_filename.startswith(_PACKAGE)
                or frame.f_code.co_filename == contextlib.__file__
            ):
                frame = frame.f_back
    for warning in caught:
        warnings.warn_explicit(
            warning.message,
            warning.category,
            frame.f_code.co_filename,
            frame.f_lineno,
            module=frame.f_globals.get("__name__"),
            registry=frame.f_globals.setdefault("__warningregistry__", {}),
        )
