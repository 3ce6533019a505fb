"""Memory pressure: pending traces materialized early where they alone would hold too much memory.

New memory is when lazy traces can come to hold too much: a program that drops each array it made
once a lazy result is recorded over it (a loop of ``f(rng.random(n))``) would, NumPy having freed
each, keep them all until its results are asked for. As ``DYNFUSE_MAX_DEPTH`` bounds a trace's
depth, ``DYNFUSE_PENDING_MEMORY`` bounds what pending traces alone keep alive.
"""

from __future__ import annotations

from typing import Any

from . import config, trace, views
from .devices import HOST, Memory
from .execute import materialize
from .trace import Node

# Bytes of buffer leaves made since pending traces were last looked at (``new_leaf``)
_new_leaf_bytes = 0
# Pending traces whose results are this many times smaller than what they alone keep alive have
# reduced their data: materialized early, they let it go and lose little fusion (``new_leaf``).
SHRINKING = 8


def new_leaf(array: Any, exposed: bool, device: Memory | None = HOST) -> Node:
    """A buffer leaf over ``device``'s ``array`` (``exposed``: code outside dynfuse may hold its
    memory; ``device`` None: a converted NumPy scalar, which goes with any device), its memory
    counted as new (``note_new_memory``)."""
    node = Node.leaf(array, exposed, device)
    note_new_memory(array.nbytes)
    return node


def note_new_memory(nbytes: int) -> None:
    """Every quarter of ``DYNFUSE_PENDING_MEMORY`` made, the pending traces are looked at
    (``trace.pending_memory``), and materialized if what they alone keep alive has passed it. They
    are materialized at a quarter of it already when their results (the sinks) are ``SHRINKING``
    times smaller than that memory: a loop of ``f(rng.random(n)).mean(axis=1)`` then holds one draw
    at a time, as NumPy does, rather than several (whose memory, freed together, the allocator
    returns to the system and faults in again). The fusion given up is only with what later reads
    those small results.
    """
    global _new_leaf_bytes
    _new_leaf_bytes += nbytes
    check = config.pending_memory // 4
    if _new_leaf_bytes >= check:
        _new_leaf_bytes = 0
        held, sinks = trace.pending_memory()
        if held > config.pending_memory or (
            held > check
            and SHRINKING * sum(sink.dtype.itemsize * views.size_of(sink.shape) for sink in sinks) <= held
        ):
            materialize(sinks)
