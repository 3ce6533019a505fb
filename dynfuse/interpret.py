"""The reference executor: runs a trace op by op with NumPy.

It is the correctness oracle for every backend and the path for work too small to compile.
Each node runs its op's NumPy reference on its inputs' values, weak scalars passed as the Python
scalars they are, so results follow NumPy exactly. An intermediate is dropped as soon as its
last consumer has run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from . import stats
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
    values: dict[Node, Any] = dict(known or {})
    for node in order:
        args = [values.get(child, child.buffer) for child in node.inputs]
        # asarray: NumPy returns scalars for 0-d results, and a view of a scalar would be a copy.
        values[node] = np.asarray(node.op.reference(*args, **dict(node.params)))
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
