"""The group backend: each kernel as a Python function of NumPy calls.

It proves plans correct without a compiler: every kernel of a plan is generated as source from its
description alone, exactly as the LLVM and CUDA backends generate theirs, compiled by Python, and
run on the kernel's own input views. Each instruction is the op's NumPy reference; a reduction runs
over the kernel's reduced axes, keeping them, so per-row values broadcast back as in the kernel;
a scan (cumsum) runs along its axis.
It fuses nothing in memory (NumPy writes a temporary per op), so it is a check, not a speed-up.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import float_errors, ops
from ..devices import HOST
from ..kernel import CompiledKernel, Kernel, Target
from ..ops import OpKind


def _wrapped(array: np.ndarray, wraps: tuple[tuple[int, int, int], ...]) -> np.ndarray:
    """A rolled load as an array of the kernel's shape: along each wrapped axis, the elements at
    (i + start) % modulus of the memory the load reaches (``modulus`` positions along it)."""
    reach = list(array.shape)
    for axis, _, modulus in wraps:
        reach[axis] = modulus
    whole = np.lib.stride_tricks.as_strided(array, tuple(reach), array.strides, writeable=False)
    for axis, start, modulus in wraps:
        whole = np.take(whole, (np.arange(array.shape[axis]) + start) % modulus, axis=axis)
    return whole


def _gathered(
    array: np.ndarray,
    wraps: tuple[tuple[int, int, int], ...],
    positions: list[np.ndarray],
    gather: tuple[tuple[int, int], ...],
    shape: tuple[int, ...],
) -> np.ndarray:
    """A gathering load as an array of ``shape`` (the kernel's, or its row shape): the memory the
    load reaches from ``array`` (laid out at index 0 of the gathered axes), moved along each
    gathered axis by a position's value, negative ones from the end; along a wrapped axis, at
    (i + start) % modulus."""
    reach = list(array.shape)
    for axis, _, modulus in wraps:
        reach[axis] = modulus
    extents = tuple(extent for _, extent in gather)
    strides = tuple(stride * array.itemsize for stride, _ in gather)
    whole = np.lib.stride_tricks.as_strided(
        array, (*reach, *extents), array.strides + strides, writeable=False
    )
    starts = {axis: (start, modulus) for axis, start, modulus in wraps}
    grids = []
    for axis, extent in enumerate(shape):
        along = np.arange(extent)
        if axis in starts:
            along = (along + starts[axis][0]) % starts[axis][1]
        grids.append(along.reshape([extent if k == axis else 1 for k in range(len(shape))]))
    moved = [
        np.where(p < 0, p + extent, p) if p.dtype.kind == "i" else p
        for p, extent in zip(positions, extents, strict=True)
    ]
    return whole[(*grids, *moved)]


# The names generated code calls: every op by its table name, and NumPy's dtype for params.
_NAMESPACE: dict[str, Any] = {
    **{name: op.reference for name, op in ops.OPS.items()},
    "dtype": np.dtype,
    "broadcast_to": np.broadcast_to,
    "as_strided": lambda array, shape, strides: np.lib.stride_tricks.as_strided(
        array, shape, strides, writeable=False
    ),
    "wrapped": _wrapped,
    "gathered": _gathered,
}


class GroupBackend:
    name = "groups"
    memory = HOST
    # Measured by perf/bench_tiers.py (see perf/RESULTS.md): a planned group beats the op-by-op
    # interpreter from about 2**16 elements when its plan and code are cached, and from about 2**17
    # when it must plan and compile first (a 5-op chain: about 2**19 element-ops).
    target = Target(name, tiny_elements=1 << 16, first_sight_work=1 << 19)

    def source(self, kernel: Kernel) -> str:
        shape = kernel.shape
        last_use = {arg: number for number, inst in enumerate(kernel.instructions) for arg in inst.args}
        for output in kernel.outputs:
            last_use[output.value] = len(kernel.instructions)
        # A ufunc whose result is an output writes it in place: no copy afterwards.
        written_by: dict[int, int] = {}
        for position, output in enumerate(kernel.outputs):
            inst = kernel.instructions[output.value]
            if isinstance(inst.op.reference, np.ufunc) and not output.row:
                written_by.setdefault(output.value, position)
        lines = ["def kernel(inputs, params, outputs):"]
        for number, inst in enumerate(kernel.instructions):
            kind = inst.op.kind
            params = "".join(f", {key}={value!r}" for key, value in inst.params)
            if kind is OpKind.BUFFER:
                # A per-row input is read once per row, as an array of the row shape; a 0-d
                # source stays 0-d, as NumPy sees it op by op (its loops treat a 0-d operand apart
                # from a broadcast one, and signed zeros in min/max/clip can tell). Both are
                # re-strided, not sliced, so they hold their value even when rows are empty.
                read = f"inputs[{inst.slot}]"
                wraps = dict(inst.params).get("wraps")
                gather = dict(inst.params).get("gather")
                if wraps and not gather:
                    lines.append(f"    v{number} = wrapped({read}, {wraps!r})")
                    read = f"v{number}"
                if gather:
                    reads = kernel.row_shape if inst.row else shape
                    positions = ", ".join(f"v{arg}" for arg in inst.args)
                    call = f"gathered({read}, {wraps!r}, [{positions}], {gather!r}, {reads!r})"
                elif dict(inst.params)["zero_dim"]:
                    call = f"as_strided({read}, (), ())"
                elif inst.row:
                    call = f"as_strided({read}, {kernel.row_shape!r}, {read}.strides)"
                else:
                    call = read
            elif kind is OpKind.SCALAR:
                call = f"params[{inst.slot}]"
            elif kind is OpKind.REDUCTION:
                call = f"{inst.op.name}(broadcast_to(v{inst.args[0]}, {shape!r}){params}, keepdims=True)"
            elif kind is OpKind.SCAN:
                call = f"{inst.op.name}(broadcast_to(v{inst.args[0]}, {shape!r}){params})"
            else:
                if number in written_by:
                    params += f", out=outputs[{written_by[number]}]"
                call = f"{inst.op.name}({', '.join(f'v{arg}' for arg in inst.args)}{params})"
            lines.append(f"    v{number} = {call}")
            # Free temporaries at their last use, as NumPy's own expressions do: the allocator
            # then hands the same (cache-warm) memory to the next op.
            done = [f"v{arg}" for arg in sorted(set(inst.args)) if last_use[arg] == number]
            if done:
                lines.append(f"    del {', '.join(done)}")
        for position, output in enumerate(kernel.outputs):
            if written_by.get(output.value) != position:
                lines.append(f"    outputs[{position}][...] = v{output.value}")
        return "\n".join(lines) + "\n"

    def supports(self, kernel: Kernel) -> bool:
        return True

    def compile(self, kernel: Kernel) -> CompiledKernel:
        namespace = dict(_NAMESPACE)
        exec(compile(self.source(kernel), "<dynfuse group kernel>", "exec"), namespace)
        return _reporting_flags(namespace["kernel"])

    def cached(self, kernel: Kernel) -> bool:
        """Nothing is kept across processes: a compile is an ``exec`` of the source, cheap anyway."""
        return False

    def keeps_code(self) -> bool:
        return False

    def compile_work(self, kernel: Kernel) -> float:
        """An ``exec`` of a few NumPy calls costs about the same for every kernel."""
        return self.target.first_sight_work

    def least_compile_work(self, kernel: Kernel) -> float:
        return self.target.first_sight_work

    def variant(self) -> None:
        return None


def _report(kind: str, flags: int) -> None:
    float_errors.FLAGS[0] |= flags


def _reporting_flags(kernel: CompiledKernel) -> CompiledKernel:
    """The kernel run with NumPy's errors handed to ``float_errors.FLAGS``, as a compiled kernel
    reports them: its ops' own error states then decide (``execute``), not the one in force now."""

    def run(inputs: list, params: list, outputs: list) -> None:
        with np.errstate(all="call", call=_report):
            kernel(inputs, params, outputs)

    return run


BACKEND = GroupBackend()
