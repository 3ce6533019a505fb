"""The CUDA backend: each kernel as CUDA C (``codegen.cuda``), for NVIDIA GPUs through CuPy.

Code generation needs no GPU and no CuPy: ``dynfuse.kernel_sources(..., backend='cuda')`` and
``dynfuse.explain(..., backend='cuda', source=True)`` show what would run, anywhere, and the test
suite compiles what the generator writes with NVRTC (``cupy.cuda.nvrtc``, which needs no device).
Running kernels needs arrays that live on the device; until those exist the backend cannot be
chosen to materialize (``available`` is False), so a kernel is never launched on host memory.
"""

from __future__ import annotations

from ..codegen import cuda as codegen
from ..kernel import PARAM, CompiledKernel, Kernel, Target


class CudaBackend:
    name = "cuda"
    # Rows of up to this many elements stay in one kernel of several passes: a block of
    # MAX_ROW_THREADS threads walks the row once per pass, the later passes reading it from L2.
    target = Target(name, persistent_row_elements=32768, compute_weight=0.1)

    def source(self, kernel: Kernel) -> str:
        text, _ = codegen.generate(kernel)
        return text

    def supports(self, kernel: Kernel) -> bool:
        """Everything but complex Python scalars (complex arrays never reach a kernel)."""
        return not any(
            inst.op is PARAM and dict(inst.params)["type"] == "complex" for inst in kernel.instructions
        )

    def available(self) -> bool:
        """Whether materializations may run here: not until device arrays exist."""
        return False

    def compile(self, kernel: Kernel) -> CompiledKernel:
        raise RuntimeError("the cuda backend runs kernels on device arrays, which dynfuse does not have yet")

    def cached(self, kernel: Kernel) -> bool:
        return False


BACKEND = CudaBackend()
