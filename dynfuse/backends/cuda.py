"""The CUDA backend: each kernel as CUDA C (``codegen.cuda``), launched on a device.

Code generation needs no GPU and no CuPy: ``dynfuse.kernel_sources(..., backend='cuda')`` and
``dynfuse.explain(..., backend='cuda', source=True)`` show what would run, anywhere, and the test
suite compiles what the generator writes with NVRTC (``cupy.cuda.nvrtc``, which needs no device).

A kernel runs through one launcher whatever the device: the grid is sized from the kernel's layout
and the device's multiprocessors, and the arguments are the layout's, in order. The device compiles,
loads and launches, on arrays in its own memory (``devices.Memory``): a trace of host arrays
given to a CUDA backend runs on device copies (``execute``). ``cuda`` runs kernels on a GPU, through
CuPy (``cupy_device``); without one it cannot be chosen to materialize (``unavailable_reason``).
``cuda-emulator`` is a device emulated on the host (``cuda_emulator``): the same kernels and launches
on its arrays, so that CI checks what a GPU would compute.

The generator is imported where a kernel is first generated, not with this module: a process that
never uses the CUDA backend does not pay for it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .. import float_errors
from ..devices import Memory
from ..kernel import CompiledKernel, Kernel, Target, element_strides
from .cuda_emulator import EmulatedDevice
from .cupy_device import CupyDevice

if TYPE_CHECKING:
    from ..codegen.cuda import Layout


class Device(Memory, Protocol):
    """What the launcher needs of a device besides its memory: its size, and a way to build and
    launch kernels."""

    multiprocessors: int
    resident_threads: int  # threads each multiprocessor holds at once

    def variant(self) -> Hashable:
        """What a compiled kernel depends on besides its source (which GPU); kernels are cached per
        signature and variant."""
        ...

    def cached(self, source: str) -> bool: ...

    def load(self, source: str) -> Any:
        """The compiled module of ``source``."""
        ...

    def function(self, module: Any, name: str) -> Any: ...

    def launch(self, function: Any, grid: int, block: int, arguments: list) -> None:
        """Arguments: the device arrays of pointer parameters, NumPy scalars of the others."""
        ...

    def flags_word(self) -> Any:
        """The device's 8-byte word that kernels OR their floating-point errors into."""
        ...

    def take_flags(self) -> int:
        """What kernels launched so far ORed into ``flags_word`` (once they are done), cleared."""
        ...

    def clear_flags(self) -> None:
        """``flags_word`` cleared after the launches so far, unread."""
        ...


def launch_shape(layout: Layout, multiprocessors: int, resident_threads: int) -> tuple[int, int]:
    """(blocks, threads per block): blocks enough to fill every multiprocessor, or fewer when the work
    needs fewer; the kernels' grid-stride loops cover any work with any grid."""
    block = layout.block_threads
    # rows, or elements (a pack a thread where the arrays allow)
    per_block = block // layout.threads_per_row if layout.threads_per_row else block * max(1, layout.pack)
    needed = -(-layout.elements // per_block)
    return max(1, min(needed, _resident_blocks(layout, multiprocessors, resident_threads))), block


def split_blocks(layout: Layout, multiprocessors: int, resident_threads: int) -> int:
    """PARTIAL's blocks for a reduction whose rows, a block each, would leave the device partly
    idle (a whole-array sum has one); 0 where ENTRY fills it, or the rows cannot be split."""
    resident = _resident_blocks(layout, multiprocessors, resident_threads)
    if not layout.chunks or layout.elements * layout.threads_per_row >= resident * layout.block_threads:
        return 0
    return min(layout.elements * layout.chunks, resident)


def _resident_blocks(layout: Layout, multiprocessors: int, resident_threads: int) -> int:
    return multiprocessors * max(1, resident_threads // layout.block_threads)


class _Launcher:
    """A compiled kernel: launched with the arguments its layout lists, on a grid the device fills."""

    def __init__(self, layout: Layout, module: Any, device: Device) -> None:
        from ..codegen.cuda import ENTRY, FINISH, PARTIAL, register_value

        self.layout = layout
        self.register_value = register_value  # what each launch converts by-value arguments with
        self.device = device
        self.grid, self.block = launch_shape(layout, device.multiprocessors, device.resident_threads)
        self.split_grid = split_blocks(layout, device.multiprocessors, device.resident_threads)
        if self.split_grid:
            self.partial = device.function(module, PARTIAL)
            self.finish = device.function(module, FINISH)
        else:
            self.entry = device.function(module, ENTRY)

    def __call__(self, inputs: list, params: list, outputs: list) -> None:
        layout = self.layout
        if layout.elements == 0:  # nothing to compute, and a grid of no blocks cannot be launched
            return
        arguments = [inputs[slot] for slot in layout.loads] + list(outputs)
        for slot in layout.strided:
            arguments += map(np.int64, element_strides(inputs[slot], slot))
        arguments += map(self.register_value, layout.param_arguments(params))
        if layout.reports:
            arguments.append(self.device.flags_word())
        if not self.split_grid:
            self.device.launch(self.entry, self.grid, self.block, arguments)
        else:
            states = [self.device.empty((layout.elements * layout.chunks,), dtype) for dtype in layout.states]
            self.device.launch(self.partial, self.split_grid, self.block, arguments + states)
            self.device.launch(self.finish, self.grid, self.block, arguments + states)
        if layout.reports:  # its word is read by ``interpret.heed_kernel_flags``
            float_errors.note_device_launch(self.device)


class CudaBackend:
    # Rows of up to this many elements stay in one kernel of several passes: a block of
    # MAX_ROW_THREADS threads walks the row once per pass, the later passes reading it from L2.
    persistent_row_elements = 32768

    def __init__(self, name: str, device: Device) -> None:
        self.name = name
        self.device = device
        self.memory: Memory = device  # where its kernels read and write
        self.target = Target(
            name,
            persistent_row_elements=self.persistent_row_elements,
            compute_weight=0.1,
            copies_host_arrays=True,
        )

    def source(self, kernel: Kernel) -> str:
        from ..codegen.cuda import generate

        text, _ = generate(kernel)
        return text

    def supports(self, kernel: Kernel) -> bool:
        """What the CUDA generator has code for (``codegen.cuda.supports``: complex values only in
        the ops it has their code for)."""
        from ..codegen.cuda import supports

        return supports(kernel)

    def unavailable_reason(self) -> str | None:
        return self.device.unavailable_reason()

    def variant(self) -> Hashable:
        return self.device.variant()

    def compile(self, kernel: Kernel) -> CompiledKernel:
        reason = self.unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"the {self.name} backend cannot run kernels: {reason}")
        from ..codegen.cuda import generate

        text, layout = generate(kernel)
        return _Launcher(layout, self.device.load(text), self.device)

    def cached(self, kernel: Kernel) -> bool:
        return self.device.cached(self.source(kernel))

    def keeps_code(self) -> bool:
        """The device's cache is asked kernel by kernel (``cached``)."""
        return True

    def compile_work(self, kernel: Kernel) -> float:
        """Not measured on a device yet: the target's one number for every kernel."""
        return self.target.first_sight_work

    def least_compile_work(self, kernel: Kernel) -> float:
        return self.target.first_sight_work


BACKEND = CudaBackend("cuda", CupyDevice())
EMULATOR = CudaBackend("cuda-emulator", EmulatedDevice())
