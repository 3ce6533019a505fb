"""``dynfuse.explain`` and ``dynfuse.kernel_sources``: what materializing arrays would run.

Nothing is computed: the trace is planned (plans are cached, so explaining first makes the real
run find its plan ready) and described, kernel by kernel, with the planner's reasons for each
kernel that did not join the one before it and for each value stored between kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import execute, record, registry, views
from .devices import HOST
from .kernel import Backend, Kernel
from .ops import OpKind
from .trace import Node, topological_order

if TYPE_CHECKING:
    from .schedule import KernelStep, Plan, Reasons


class Explanation(str):
    """A str that shows itself as text (not as a quoted literal) at the interactive prompt."""

    def __repr__(self) -> str:
        return str(self)


def _backend(name: str | None, outputs: list[Node]) -> Backend | None:
    """The backend named, or the one that would run ``outputs`` (``execute.backend_for``)."""
    if name is None:
        return execute.backend_for((outputs[0].device if outputs else None) or HOST)
    if name not in registry.BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(sorted(registry.BACKENDS))}")
    return registry.BACKENDS[name]


def _outputs(arrays: tuple) -> list[Node]:
    return execute.wanted_nodes([array._node for array in arrays if record.is_lazy(array)])


def kernel_sources(*arrays: Any, backend: str | None = None) -> list[str]:
    """The generated source of each kernel that materializing ``arrays`` would compile."""
    outputs = _outputs(arrays)
    chosen = _backend(backend, outputs)
    if chosen is None:
        raise ValueError(
            "kernel_sources: the reference backend 'numpy' runs op by op and generates no kernels"
        )
    _, plan = execute.explain_plan(outputs, chosen)
    return [_source(chosen, step.kernel) for step in plan.kernels]


def _source(backend: Backend, kernel: Kernel) -> str:
    """The kernel's generated source, or why there is none: it runs interpreted on this backend."""
    if not backend.supports(kernel):
        return f"(none: the {backend.name} generator has no code for an op of it, so it runs interpreted)"
    return backend.source(kernel)


def _shape_text(node: Node) -> str:
    return f"{node.dtype}{list(node.shape)}"


def _nbytes(node: Node, elements: int | None = None) -> int:
    if node.dtype is None:
        return 0
    return (views.size_of(node.shape) if elements is None else elements) * node.dtype.itemsize


def _bytes_text(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError


def _traffic_op_by_op(order: list[Node]) -> int:
    """Bytes NumPy reads and writes running the trace op by op, a temporary per op (views free)."""
    return sum(
        sum(_nbytes(child) for child in node.inputs) + _nbytes(node)
        for node in order
        if node.op.kind is not OpKind.VIEW
    )


def _traffic_planned(nodes: list[Node], plan: Plan) -> int:
    """Bytes the plan reads and writes: each kernel reads each buffer once and writes its outputs."""
    from .schedule import LibraryStep

    total = 0
    for step in plan.steps:
        if isinstance(step, LibraryStep):
            node = nodes[step.node]
            total += sum(_nbytes(child) for child in node.inputs) + _nbytes(node)
            continue
        elements = views.size_of(step.kernel.shape)
        read = {source.node for source in step.loads}
        total += sum(_nbytes(nodes[n], min(elements, views.size_of(nodes[n].shape))) for n in read)
        total += sum(_nbytes(nodes[n]) for n in step.stores)
    return total


def explain(*arrays: Any, backend: str | None = None, source: bool = False) -> Explanation:
    """What materializing ``arrays`` would run: the trace, then each kernel and library call.

    ``backend`` names the backend to plan for (default: the one that would run them, the arrays'
    device's for arrays on a device); ``source=True`` adds each kernel's generated source.
    """
    from . import schedule

    outputs = _outputs(arrays)
    chosen = _backend(backend, outputs)
    order = topological_order(outputs)
    names: dict[int, str] = {}
    lines: list[str] = []

    def name(node: Node) -> str:
        if id(node) not in names:
            names[id(node)] = f"%{len(names)}"
            if node.op.kind is OpKind.SCALAR:
                lines.append(
                    f"  {names[id(node)]} = parameter {node.buffer!r} (weak {type(node.buffer).__name__})"
                )
            elif node.is_materialized:
                lines.append(f"  {names[id(node)]} = input {_shape_text(node)}")
        return names[id(node)]

    for node in order:
        arguments = ", ".join(name(child) for child in node.inputs)
        label = name(node)  # inputs are named first, so they read top to bottom
        params = "".join(f", {key}={value}" for key, value in node.params)
        lines.append(
            f"  {label} = {node.op.name}({arguments}{params}) -> {_shape_text(node)}  [{node.op.kind.value}]"
        )
    requested = ", ".join(name(node) for node in outputs) or "nothing"
    header = [f"dynfuse trace: {len(order)} op(s) for {len(outputs)} output(s)", *lines]
    if chosen is None:
        header.append(f"backend 'numpy' runs these op by op; outputs: {requested}")
        return Explanation("\n".join(header))
    nodes, plan = execute.explain_plan(outputs, chosen)
    fused, op_by_op = _traffic_planned(nodes, plan), _traffic_op_by_op(order)
    ratio = f" ({op_by_op / fused:.1f}x less)" if fused else ""
    body = [
        f"plan on backend {chosen.name!r}: {len(plan.kernels)} kernel(s), "
        f"{len(plan.steps) - len(plan.kernels)} library call(s)",
        f"  memory traffic: {_bytes_text(fused)} fused, {_bytes_text(op_by_op)} op by op{ratio}",
    ]
    for position, step in enumerate(plan.steps):
        if isinstance(step, schedule.LibraryStep):
            node = nodes[step.node]
            arguments = ", ".join(name(child) for child in node.inputs)
            body.append(
                f"library {position}: {node.op.name}({arguments}) -> {name(node)} {_shape_text(node)}"
            )
            continue
        body += _kernel_lines(position, step, nodes, name)
        if source:
            body += ["  source:", *(f"    {line}" for line in _source(chosen, step.kernel).splitlines())]
    body += _reason_lines(
        schedule.reasons(schedule.number_trace(order, outputs), chosen.target), plan, nodes, name
    )
    body.append(f"outputs: {requested}")
    return Explanation("\n".join(header + body))


def _kernel_lines(position: int, step: KernelStep, nodes: list[Node], name: Any) -> list[str]:
    kernel = step.kernel
    reducing = (
        f", reducing axes {kernel.reduce_axes} in {kernel.passes} pass(es)" if kernel.reduce_axes else ""
    )
    fused = [nodes[n] for n in step.nodes if nodes[n].op.kind is not OpKind.VIEW]
    lines = [
        f"kernel {position}: over {kernel.shape}{reducing}; {len(fused)} op(s) fused: "
        + " ".join(f"{node.op.name} {name(node)}" for node in fused)
    ]
    for slot, source in enumerate(step.loads):
        through = "".join(f" .{nodes[n].op.name}" for n in source.views)
        lines.append(f"  in{slot} = {name(nodes[source.node])}{through} {_shape_text(nodes[source.node])}")
    for slot, n in enumerate(step.params):
        lines.append(f"  p{slot} = {name(nodes[n])} = {nodes[n].buffer!r}")
    for slot, n in enumerate(step.stores):
        lines.append(f"  out{slot} -> {name(nodes[n])} {_shape_text(nodes[n])}")
    lines += [f"  {line}" for line in kernel.text().splitlines()]
    return lines


def _reason_lines(reasons: Reasons, plan: Plan, nodes: list[Node], name: Any) -> list[str]:
    """The planner's reasons: why each kernel did not join an earlier one, why values are stored."""
    from .schedule import KernelStep

    lines = []
    for apart in reasons.apart:
        node = "" if apart.node is None else f"{name(nodes[apart.node])} ({nodes[apart.node].op.name})"
        reason = apart.why.value.format(*apart.details, node=node, earlier=apart.earlier, later=apart.later)
        lines.append(f"kernel {apart.earlier} | kernel {apart.later}: not fused: {reason}")
    storing = {
        n: position
        for position, step in enumerate(plan.steps)
        if isinstance(step, KernelStep)
        for n in step.stores
    }
    for stored in reasons.stored:
        lines.append(
            f"{name(nodes[stored.node])} stored by kernel {storing[stored.node]}: "
            + stored.why.value.format(*stored.details)
        )
    return lines
