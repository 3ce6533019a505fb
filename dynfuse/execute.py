"""Materialization: turn the trace behind some nodes into buffers, in one plan."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from . import config, stats
from .ops import OpKind
from .trace import Node, topological_order

# Materializing mutates nodes shared between arrays; one plan runs at a time.
lock = threading.RLock()


def _viewed(node: Node) -> Node:
    """The first node under a chain of views: the one whose memory the views share."""
    while node.op.kind is OpKind.VIEW:
        node = node.inputs[0]
    return node


def materialize(nodes: Iterable[Node]) -> None:
    """Compute every unmaterialized node in ``nodes`` together, sharing common work.

    A view is materialized together with the node it views, so that its buffer is a view of a
    buffer that node keeps: a later write through either is then seen by both, as in NumPy.
    """
    with lock:
        wanted: dict[int, Node] = {}
        for node in nodes:
            if not node.is_materialized:
                wanted[id(node)] = node
                viewed = _viewed(node)
                if viewed is not node and not viewed.is_materialized:
                    wanted[id(viewed)] = viewed
        if not wanted:
            return
        outputs = list(wanted.values())
        order = topological_order(outputs)
        results = config.BACKENDS[config.backend](order, outputs)
        for node in outputs:
            node.become_leaf(results[node])
        stats.count("materializations")
