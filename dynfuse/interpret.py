"""The reference executor: runs a trace op by op with NumPy.

It is the correctness oracle for every backend and the path for work too small to compile.
Each node runs its op's NumPy reference on its inputs' values, weak scalars passed as the Python
scalars they are, so results follow NumPy exactly. An intermediate is dropped as soon as its
last consumer has run, or that consumer, a ufunc of its dtype and shape, computes into it; a large
elementwise result is computed into an array of the host's pool (``host_pool``), as a compiled
kernel's is, not into fresh pages that fault at every run. Each op
runs under NumPy's error state when it was recorded (``Node.errstate``), so it warns or raises as it
would have then.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from . import float_errors, host_pool, stats
from .devices import HOST, move
from .ops import OpKind
from .trace import Node


def run(
    order: Sequence[Node], outputs: Collection[Node], known: Mapping[Node, Any] | None = None
) -> dict[Node, np.ndarray]:
    """Compute every node of ``order`` (inputs first); return the values of ``outputs``.

    ``known`` holds values computed earlier for nodes that are not materialized yet, and host
    copies of leaves that live on a device: it runs on host arrays only.
    """
    wanted = set(outputs)
    computed_here = set(order)
    uses = Counter(child for node in order for child in node.inputs if child in computed_here)
    reusable = _reusable(order, wanted)
    values: dict[Node, Any] = dict(known or {})
    now = float_errors.current()
    for node in order:
        args = [values.get(child, child.buffer) for child in node.inputs]
        into = _written_over(node, args, reusable, uses) if node.op.computes_into else None
        if into is None:
            into = _pooled(node, args)
        params = dict(node.params) if node.params else {}
        token = None if node.errstate is now else float_errors.enter(node.errstate)
        try:
            # asarray: NumPy returns scalars for 0-d results, and a view of a scalar would be a copy.
            if into is None:
                values[node] = np.asarray(node.op.reference(*args, **params))
            else:
                values[node] = node.op.reference(*args, **params, out=into)
        finally:
            if token is not None:
                float_errors.leave(token)
        if node.op.kind is OpKind.BARRIER:
            # A library call costs far more than reading its result: the node keeps it (as a leaf),
            # so what is recorded over it and materialized later reads it rather than call again.
            # It lives as long as something recorded over it does.
            node.become_leaf(move(values[node], HOST, node.memory))
        for child in node.inputs:
            if child in uses:
                uses[child] -= 1
                if uses[child] == 0 and child not in wanted:
                    del values[child]
    stats.count("interpreted_ops", len(order))
    return {node: values[node] for node in wanted}


def heed_kernel_flags(
    nodes: Callable[[], Sequence[Node]], known: Callable[[], Mapping[Node, Any]] | None = None
) -> None:
    """After a compiled kernel's launch: the floating-point flags it raised taken, and where an op
    of ``nodes()`` (what it computed, inputs first) heeds one, the ops run again by NumPy for what it
    reports (``rerun_for_errors``); ``known()`` gives the values of what they read that are not
    leaves. Both are asked for only then: a launch without a flag pays one read of the word."""
    flags = float_errors.take_flags()
    if flags:
        order = nodes()
        if float_errors.heeded(flags, (node.errstate for node in order)):
            rerun_for_errors(order, None if known is None else known())


def rerun_for_errors(order: Sequence[Node], known: Mapping[Node, Any] | None = None) -> None:
    """For a compiled kernel that raised a floating-point flag an op of ``order`` heeds: NumPy's run
    of the ops that can report a floating-point error (``Op.reports_float_errors_on``), with the ops of
    ``order`` they read, each under its recorded error state, so NumPy warns (at the program's line
    that asked for the value), raises, calls or logs as it would have. The values stay the
    kernel's: a comparison or a select reading NaN raises the hardware's flag, NumPy's never
    report, and a kernel of those alone costs nothing."""
    order = list(dict.fromkeys(order))
    reporting = [
        node
        for node in order
        if node.op.reports_float_errors_on([node.dtype, *(child.dtype for child in node.inputs)])
    ]
    if not reporting:
        return
    inside, needed, pending = set(order), set(), list(reporting)
    while pending:
        node = pending.pop()
        if node not in needed:
            needed.add(node)
            pending.extend(child for child in node.inputs if child in inside)
    stats.count("float_error_reruns")
    with float_errors.warned_where_asked():
        run([node for node in order if node in needed], (), known)  # for what NumPy says alone


def _reusable(order: Sequence[Node], wanted: Collection[Node]) -> set[Node]:
    """Intermediates whose memory the last op reading them may write its result into, as NumPy's own
    ``var`` squares in place: a fresh array of a large intermediate then costs its page faults
    again at every run. Not an output, nor a library call's result (a leaf then), and read only by
    elementwise ops and reductions, which never keep a view of what they read."""
    readers_ok: dict[Node, bool] = {}
    for node in order:
        keeps_no_view = node.op.kind in (OpKind.ELEMENTWISE, OpKind.REDUCTION)
        for child in node.inputs:
            readers_ok[child] = readers_ok.get(child, True) and keeps_no_view
    return {
        node
        for node in order
        if readers_ok.get(node)
        and node not in wanted
        and node.op.kind in (OpKind.ELEMENTWISE, OpKind.REDUCTION)
    }


def _pooled(node: Node, args: list) -> np.ndarray | None:
    """An array of the host's pool that ``node``, a ufunc of one result or a cast on the host, may
    compute into: for a result of ``host_pool.INTERPRETED_MIN_BYTES`` or more, where every array it
    reads is of its shape (or one element) with its axes in C order (``_c_ordered``: a slice of rows
    or of columns too), so that NumPy's own result would be C-contiguous."""
    op = node.op
    least = host_pool.INTERPRETED_MIN_BYTES
    if op.kind is not OpKind.ELEMENTWISE or node.dtype.itemsize * math.prod(node.shape) < least:
        return None
    if node.device is not HOST or not ((op.computes_into and not node.params) or op.name == "astype"):
        return None
    whole = [value for value in args if isinstance(value, np.ndarray) and value.size != 1]
    if any(value.shape != node.shape or not _c_ordered(value) for value in whole):
        return None
    return host_pool.empty(node.shape, node.dtype, least)


def _c_ordered(value: np.ndarray) -> bool:
    """Whether NumPy lays a ufunc's result on ``value`` out in C order (its ``order="K"`` follows
    the operands' strides): ``value``'s axes of more than one element have strides that shrink
    from the first to the last, by magnitude."""
    if value.flags.c_contiguous:
        return True
    strides = [abs(stride) for stride, length in zip(value.strides, value.shape, strict=True) if length > 1]
    return all(outer > inner > 0 for outer, inner in itertools.pairwise(strides))


def _written_over(node: Node, args: list, reusable: set[Node], uses: Counter) -> np.ndarray | None:
    """An operand's array that ``node``, a ufunc (``Op.computes_into``) of the same dtype and shape
    as it, may compute into: one only ``node`` still reads, which owns its memory."""
    if node.params:  # only for ``computes_into`` ops
        return None
    for child, value in zip(node.inputs, args, strict=True):
        if (
            child in reusable
            and uses[child] == node.inputs.count(child)
            and isinstance(value, np.ndarray)
            and host_pool.owns_memory(value)
            and value.flags.writeable
            and value.dtype == node.dtype
            and value.shape == node.shape
        ):
            return value
    return None
