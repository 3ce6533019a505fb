"""Launching: one compiled kernel or one library call run on buffers of a memory.

What a plan's step and a replay share: the leaves' values, the views a kernel reads them through,
the fresh outputs it writes, and a library call that runs in a device's library where it can.
"""

from __future__ import annotations

import contextvars
import itertools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from . import config, float_errors, pools, stats, views
from .devices import HOST, Memory, move
from .kernel import CompiledKernel, Kernel
from .ops import OpKind
from .trace import Node

if TYPE_CHECKING:
    from .schedule import Source


def leaf_value(node: Node, memory: Memory = HOST) -> Any:
    """A leaf's value as an array of ``memory``: its buffer; a weak scalar, or a converted NumPy
    scalar (which go with any device), put there."""
    if node.op.kind is OpKind.SCALAR:
        return move(np.asarray(node.buffer), HOST, memory)
    if node.device is None and memory is not HOST:
        return move(node.buffer, HOST, memory)
    return node.buffer


def read(value: Any, source: Source, shape: tuple[int, ...] | None, memory: Memory) -> Any:
    """``value``, an array of ``memory``, as ``source`` reads it: through its index map, unless that
    reads it as it is."""
    if source.index_map is not None and not (source.reads_in_place and value.shape == shape):
        value = views.strided_view(value, source.index_map, shape, memory)
    return value


def launch(
    kernel: Kernel,
    compiled: CompiledKernel,
    inputs: list[Any],
    params: list,
    memory: Memory = HOST,
    held: bool = False,
    given: tuple[int, Any] | None = None,
) -> list[Any]:
    """Run a compiled kernel on its inputs in ``memory``, first copied into the layout it was built
    for unless they are ``held`` in it already; its outputs, fresh but for the strided one ``given``
    (its position and the array it writes). The floating-point flags it raised are in
    ``float_errors.FLAGS``, for the caller to take."""
    if not held:
        inputs = [
            memory.contiguous(value) if contiguous and not value.flags.c_contiguous else value
            for value, contiguous in zip(inputs, kernel.contiguous_loads, strict=True)
        ]
    outputs = allocate_outputs(kernel, memory, given)
    compiled(inputs, params, outputs)
    if given is not None:
        stats.count("writes_in_place")
    return outputs


def allocate_outputs(kernel: Kernel, memory: Memory, given: tuple[int, Any] | None = None) -> list[Any]:
    """A kernel's fresh outputs, and the ``given`` one. Running out of memory here raises
    MemoryError (on the host, once the pool has given its free blocks back), as NumPy would for the
    same arrays: the program's to handle, never a fault that falls back."""
    if given is None:
        return [memory.empty(shape, dtype) for shape, dtype in kernel.output_layouts]
    position, array = given
    return [
        array if at == position else memory.empty(*layout) for at, layout in enumerate(kernel.output_layouts)
    ]


def library_call(node: Node, arguments: list, memory: Memory) -> Any:
    """A library call's NumPy function on arrays of ``memory``. On a device it is given the device's
    arrays, which NumPy hands to the device's library (CuPy's, by ``__array_function__``); where
    that fails, or does not give the shape and dtype NumPy's would, it runs on host copies."""
    params = dict(node.params)
    if memory is not HOST:
        try:
            value = node.op.reference(*arguments, **params)
        except MemoryError:  # the device's memory is full: as NumPy's would be, not a fault
            raise
        except Exception:  # the device's library lacks the function, or this use of it
            value = None
        if memory.owns(value) and value.shape == node.shape and value.dtype == node.dtype:
            return value
        stats.count_fallback(f"{node.op.name} on the host", "the device's library has no such call")
        arguments = [move(argument, memory, HOST) for argument in arguments]
    split = config.threads > 1 and views.size_of(node.shape) >= SPLIT_ELEMENTS
    with float_errors.restored(node.errstate):
        if node.op.kind is OpKind.ELEMENTWISE and split:
            value = _elementwise_in_parts(node, arguments, params)
        else:
            value = np.asarray(node.op.reference(*arguments, **params))
    return move(value, HOST, memory)


# An elementwise op NumPy's loop runs between kernels (``Target.library_ops``) splits across the
# threads from this many elements, as a kernel's launch does (its NumPy loop releases the GIL):
# float32 arcsin in a chain, two threads against one, took 1.26x as long on 2^18 elements (the
# hand-offs), 0.82x on 2^20, 0.69x on 2^22.
SPLIT_ELEMENTS = 1 << 20


def _elementwise_in_parts(node: Node, arguments: list, params: dict) -> np.ndarray:
    """NumPy's call for an elementwise ``node``, on ranges of its result's first axis, one a
    thread: each part computes what the whole call computes there, into the result's rows, with
    the caller's floating-point error settings."""
    result = HOST.empty(node.shape, node.dtype)
    # Arrays broadcast to the result (views); a Python scalar stays one, a weak operand as NumPy has it
    operands = [np.broadcast_to(a, node.shape) if isinstance(a, np.ndarray) else a for a in arguments]
    rows, row_size = node.shape[0], views.size_of(node.shape[1:])
    # Parts start on multiples of 64 elements, as the whole call's vector loop steps: NumPy's loops
    # round a tail's elements otherwise than the vector body's (by an ulp, in places)
    unit = 64 // math.gcd(64, row_size or 1)
    share = -(-rows // config.threads)  # rows a thread, rounded up, then up to a multiple of unit
    step = -(-share // unit) * unit
    bounds = [*range(0, rows, step), rows]

    def part(start: int, stop: int) -> Callable[[], object]:
        chosen = [a[start:stop] if isinstance(a, np.ndarray) else a for a in operands]
        # Under the caller's context: NumPy's errstate is a context variable, which another
        # thread would not see (np.errstate(invalid="raise") must still raise)
        context = contextvars.copy_context()
        return lambda: context.run(node.op.reference, *chosen, out=result[start:stop], **params)

    pools.WORKERS.run_all([part(start, stop) for start, stop in itertools.pairwise(bounds)])
    return result
