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
        depth = 0
        for node in inputs:  # this runs once per recorded op: no generator, no max()
            if node.depth >= depth:
                depth = node.depth + 1
        self.depth = depth
        if inputs:
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
        node = cls.__new__(cls)
        node.op, node.inputs, node.params, node.shape, node.dtype = ops.SCALAR, (), (), (), None
        node.buffer, node.exposed, node.depth = value, False, 0
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
        _pending.discard(self)

    def __repr__(self) -> str:
        return f"<Node {self.op.name} {self.shape} {self.dtype}>"


class _PendingNodes:
    """Every node not yet materialized that something still references. An eager write into a buffer
    first materializes those that read memory it overlaps, so they see the values from before.

    Recording adds one node per op, so adding must be cheap: weak references without callbacks in a
    dict, dead ones swept when the dict has doubled.
    """

    def __init__(self) -> None:
        self._refs: dict[int, weakref.ref] = {}
        self._sweep_at = 1024
        self._lock = threading.Lock()

    def add(self, node: Node) -> None:
        with self._lock:
            self._refs[id(node)] = weakref.ref(node)  # a dead node's entry under a reused id is replaced
            if len(self._refs) >= self._sweep_at:
                self._refs = {key: ref for key, ref in self._refs.items() if ref() is not None}
                self._sweep_at = max(1024, 2 * len(self._refs))

    def discard(self, node: Node) -> None:
        with self._lock:
            ref = self._refs.get(id(node))
            if ref is not None and ref() is node:
                del self._refs[id(node)]

    def alive(self) -> list[Node]:
        with self._lock:
            refs = list(self._refs.values())
        return [node for ref in refs if (node := ref()) is not None]


_pending = _PendingNodes()


def pending_readers(memory: np.ndarray) -> list[Node]:
    """Unmaterialized nodes that read a buffer sharing memory with ``memory``."""
    return [
        node
        for node in _pending.alive()
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
        if not root.inputs or id(root) in visited:
            continue
        visited.add(id(root))
        stack = [(root, iter(root.inputs))]
        while stack:
            node, children = stack[-1]
            for child in children:  # resumes where this node's walk left off
                if child.inputs and id(child) not in visited:
                    visited.add(id(child))
                    stack.append((child, iter(child.inputs)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order
