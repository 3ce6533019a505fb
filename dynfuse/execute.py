"""Materialization: turn the trace behind some nodes into buffers, in one plan."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from . import config, stats
from .trace import Node, topological_order

# Materializing mutates nodes shared between arrays; one plan runs at a time.
lock = threading.RLock()


def materialize(nodes: Iterable[Node]) -> None:
    """Compute every unmaterialized node in ``nodes`` together, sharing common work."""
    with lock:
        outputs = list({id(node): node for node in nodes if not node.is_materialized}.values())
        if not outputs:
            return
        order = topological_order(outputs)
        results = config.BACKENDS[config.backend](order, outputs)
        for node in outputs:
            node.become_leaf(results[node])
        stats.count("materializations")
