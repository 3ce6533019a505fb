"""Nodes of the recorded DAG, and the walks over it.

A node is an op applied to input nodes, with static params (hashable: they belong to the
structure of the trace, not to its data) and the shape and dtype known when it was recorded.
Leaves are BUFFER nodes (an ndarray) and SCALAR nodes (a weak Python scalar, a parameter rather
than data, so a changing scalar does not change the trace's structure). Materializing a node turns
it into a BUFFER leaf in place: every node that reads it now reads the buffer, and the graph above
it is released. Walks are iterative, so no trace depth can reach Python's recursion limit.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any

import numpy as np

from . import ops
from .ops import Op, OpKind


class Node:
    __slots__ = ("__weakref__", "buffer", "depth", "dtype", "exposed", "inputs", "op", "params", "shape")

    def __init__(
        self, op: Op, inputs: tuple[Node, ...], params: tuple, shape: tuple[int, ...], dtype: np.dtype | None
    ) -> None:
        self.op = op
        self.inputs = inputs
        self.params = params
        self.shape = shape
        self.dtype = dtype
        self.buffer: Any = None
        self.exposed = False
        self.depth = 1 + max((node.depth for node in inputs), default=-1)
        if inputs:
            with _pending_lock:
                _pending.add(self)

    @classmethod
    def leaf(cls, array: np.ndarray, exposed: bool) -> Node:
        """A materialized leaf; ``exposed`` when code outside dynfuse may hold this memory."""
        node = cls(ops.BUFFER, (), (), array.shape, array.dtype)
        node.buffer = array
        node.exposed = exposed
        return node

    @classmethod
    def scalar(cls, value: bool | int | float | complex) -> Node:
        node = cls(ops.SCALAR, (), (), (), None)
        node.buffer = value
        return node

    @property
    def is_materialized(self) -> bool:
        return not self.inputs

    def become_leaf(self, array: np.ndarray) -> None:
        """Hold the computed value and let go of the graph above it."""
        self.op = ops.BUFFER
        self.inputs = ()
        self.params = ()
        self.buffer = array
        self.depth = 0
        with _pending_lock:
            _pending.discard(self)

    def __repr__(self) -> str:
        return f"<Node {self.op.name} {self.shape} {self.dtype}>"


# Every node not yet materialized that something still references. An eager write into a buffer
# first materializes those that read memory it overlaps, so they see the values from before.
_pending: weakref.WeakSet[Node] = weakref.WeakSet()
_pending_lock = threading.Lock()


def pending_readers(memory: np.ndarray) -> list[Node]:
    """Unmaterialized nodes that read a buffer sharing memory with ``memory``."""
    with _pending_lock:
        candidates = list(_pending)
    return [
        node
        for node in candidates
        if node.inputs
        and any(
            source.op.kind is OpKind.BUFFER and np.may_share_memory(source.buffer, memory)
            for source in node.inputs
        )
    ]


def topological_order(outputs: Iterable[Node]) -> list[Node]:
    """The unmaterialized nodes that ``outputs`` need, each after its inputs; leaves excluded."""
    order: list[Node] = []
    visited: set[int] = set()
    for root in outputs:
        if root.is_materialized or id(root) in visited:
            continue
        visited.add(id(root))
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, next_input = stack.pop()
            if next_input < len(node.inputs):
                stack.append((node, next_input + 1))
                child = node.inputs[next_input]
                if not child.is_materialized and id(child) not in visited:
                    visited.add(id(child))
                    stack.append((child, 0))
            else:
                order.append(node)
    return order
