"""Materialization: turn the trace behind some nodes into buffers, in one plan.

With a kernel backend the trace is planned (``schedule``), and the plan runs step by step: library
calls for barriers, kernels for fusion groups. A kernel runs compiled or interpreted by the tier
policy: below ``Target.tiny_elements`` always interpreted (a compiled launch costs more than
NumPy's few calls); below ``Target.first_sight_elements`` interpreted the first time its signature
is seen and compiled from the second (tiered, like a JIT: one-off small work pays no compile);
otherwise compiled at once. A kernel that fails to compile or to run is interpreted instead, with
a warning: a fault in dynfuse never turns into a wrong answer.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable

import cachetools
import numpy as np

from . import cache, config, interpret, schedule, stats, views
from .kernel import Backend, CompiledKernel
from .ops import OpKind
from .schedule import KernelStep, LibraryStep, Plan, Source
from .trace import Node, topological_order

# Materializing mutates nodes shared between arrays; one plan runs at a time.
lock = threading.RLock()

# How often each kernel signature has been seen, for the tier policy.
_sightings: cachetools.LRUCache = cachetools.LRUCache(maxsize=4 * config.kernel_cache_size)


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
        outputs = wanted_nodes(nodes)
        if not outputs:
            return
        backend = config.BACKENDS[config.backend]
        order = topological_order(outputs)
        if backend is None or _tiny(order, backend):
            results = interpret.run(order, outputs)
        else:
            results = run_planned(order, outputs, backend)
        for node in outputs:
            node.become_leaf(results[node])
        stats.count("materializations")


def _tiny(order: list[Node], backend: Backend) -> bool:
    """Work too small for any kernel to pay off: not even worth planning. A reduction's work is its
    input's size, however small its result (``x.sum(axis=0)``)."""
    limit = backend.target.tiny_elements
    return config.tiers and all(
        views.size_of(node.shape) < limit
        and (node.op.kind is not OpKind.REDUCTION or views.size_of(node.inputs[0].shape) < limit)
        for node in order
    )


def run_planned(order: list[Node], outputs: list[Node], backend: Backend) -> dict[Node, np.ndarray]:
    trace = schedule.number_trace(order, outputs)
    try:
        plan = schedule.plan_for(trace, backend.target)
    except Exception as error:  # a fault of the scheduler's: the trace still runs, op by op
        _warn_fault("planning", error)
        stats.count_fallback("plan")
        return interpret.run(order, outputs)
    return _Run(trace.nodes, plan, backend).results(outputs)


def _warn_fault(what: str, error: Exception) -> None:
    warnings.warn(
        f"dynfuse: {what} failed ({type(error).__name__}: {error}); running it with the reference executor",
        RuntimeWarning,
        stacklevel=4,
    )


class _Run:
    """One execution of a plan: the buffers of stored nodes, freed after their last reader."""

    def __init__(self, nodes: list[Node], plan: Plan, backend: Backend) -> None:
        self.nodes = nodes
        self.plan = plan
        self.backend = backend
        self.buffers: dict[int, np.ndarray] = {}
        stats.count("kernels_planned", len(plan.kernels))
        for step, release in zip(plan.steps, plan.release, strict=True):
            if isinstance(step, LibraryStep):
                node = nodes[step.node]
                arguments = [self.array(source) for source in step.inputs]
                self.buffers[step.node] = np.asarray(node.op.reference(*arguments, **dict(node.params)))
            else:
                self.run_kernel(step)
            for number in release:
                del self.buffers[number]

    def results(self, outputs: list[Node]) -> dict[Node, np.ndarray]:
        values = {self.nodes[number]: self.array(source) for number, source in self.plan.outputs}
        return {node: values[node] for node in outputs}

    def array(self, source: Source, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """A source as an array: the buffer, through its views, then read through its index map."""
        base = self.nodes[source.node]
        value = base.buffer if base.is_materialized else self.buffers[source.node]
        if base.op.kind is OpKind.SCALAR:
            value = np.asarray(value)
        for number in source.views:
            view = self.nodes[number]
            value = view.op.reference(value, **dict(view.params))
        if source.index_map is not None and not (source.reads_in_place and value.shape == shape):
            value = views.strided_view(value, source.index_map, shape)
        return value

    def run_kernel(self, step: KernelStep) -> None:
        kernel = step.kernel
        compiled = None
        if not self._interpreted_tier(step):
            try:
                compiled = cache.compiled_kernel(self.backend, kernel)
                if compiled is not None:
                    outputs = self.launch(step, compiled)
            except Exception as error:  # a fault of dynfuse's own code: never a wrong answer
                _warn_fault(f"a {self.backend.name} kernel", error)
                stats.count_fallback(f"kernel:{self.backend.name}")
                compiled = None
        if compiled is None:
            self.interpret(step)
            return
        stats.count("kernels_launched")
        stats.count("fused_ops", len(step.nodes))
        for number, output in zip(step.stores, outputs, strict=True):
            self.buffers[number] = output.reshape(self.nodes[number].shape)

    def launch(self, step: KernelStep, compiled: CompiledKernel) -> list[np.ndarray]:
        kernel = step.kernel
        inputs = []
        for source, contiguous in zip(step.loads, kernel.contiguous_loads, strict=True):
            value = self.array(source, kernel.shape)
            # hold the layout the kernel was built for
            inputs.append(
                np.ascontiguousarray(value) if contiguous and not value.flags.c_contiguous else value
            )
        params = [self.nodes[number].buffer for number in step.params]
        outputs = [np.empty(shape, dtype) for shape, dtype in kernel.output_layouts]
        compiled(inputs, params, outputs)
        return outputs

    def _interpreted_tier(self, step: KernelStep) -> bool:
        if not config.tiers:
            return False
        target = self.backend.target
        elements = views.size_of(step.kernel.shape)
        if elements < target.tiny_elements:
            return True
        if elements >= target.first_sight_elements:
            return False
        key = (self.backend.name, step.kernel.signature)
        seen = _sightings.get(key, 0)
        _sightings[key] = seen + 1
        return seen == 0

    def interpret(self, step: KernelStep) -> None:
        known = {self.nodes[number]: value for number, value in self.buffers.items()}
        order = [self.nodes[number] for number in step.nodes]
        stores = [self.nodes[number] for number in step.stores]
        values = interpret.run(order, stores, known)
        for number, node in zip(step.stores, stores, strict=True):
            self.buffers[number] = values[node]


def explain_plan(outputs: list[Node], backend: Backend) -> tuple[list[Node], Plan]:
    """The numbered trace and the plan that materializing ``outputs`` would run: nothing runs."""
    trace = schedule.number_trace(topological_order(outputs), outputs)
    return trace.nodes, schedule.plan_for(trace, backend.target)


def wanted_nodes(nodes: Iterable[Node]) -> list[Node]:
    """The nodes a materialization of ``nodes`` computes: views together with what they view."""
    wanted: dict[int, Node] = {}
    for node in nodes:
        if not node.is_materialized:
            wanted[id(node)] = node
            viewed = _viewed(node)
            if viewed is not node and not viewed.is_materialized:
                wanted[id(viewed)] = viewed
    return list(wanted.values())
