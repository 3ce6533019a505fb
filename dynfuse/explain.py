"""``dynfuse.explain``: what materializing some arrays would compute, as readable text."""

from __future__ import annotations

from typing import Any

from . import config, record
from .ops import OpKind
from .trace import Node, topological_order


class Explanation(str):
    """A str that shows itself as text (not as a quoted literal) at the interactive prompt."""

    def __repr__(self) -> str:
        return str(self)


def _param_text(params: tuple) -> str:
    return "".join(f", {key}={value}" for key, value in params)


def explain(*arrays: Any) -> Explanation:
    """The trace that materializing ``arrays`` would run, node by node, computing nothing."""
    outputs = [array._node for array in arrays if record.is_lazy(array)]
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
                lines.append(f"  {names[id(node)]} = input {node.dtype}{list(node.shape)}")
        return names[id(node)]

    for node in order:
        arguments = ", ".join(name(child) for child in node.inputs)
        label = name(node)  # inputs are named first, so they read top to bottom
        call = f"{node.op.name}({arguments}{_param_text(node.params)})"
        lines.append(f"  {label} = {call} -> {node.dtype}{list(node.shape)}  [{node.op.kind.value}]")
    requested = ", ".join(name(node) for node in outputs) or "nothing"
    header = (
        f"dynfuse trace: {len(order)} op(s) to compute for {len(outputs)} output(s); "
        f"backend {config.backend!r}"
    )
    return Explanation("\n".join([header, *lines, f"  outputs: {requested}"]))
