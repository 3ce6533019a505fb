"""A GPU as the CUDA backend's device, through CuPy: its arrays are CuPy arrays, its kernels the CUDA
code generator's, compiled by NVRTC and launched by CuPy's driver bindings on CuPy's current stream.

Kernels are compiled here with ``cupy.cuda.nvrtc``, not by ``cupy.RawModule``: CuPy's compile path
appends ``-ftz=true`` to every option list, and NVRTC takes the last ``ftz`` it is given, so a raw
module would flush float32 subnormals to zero, where NumPy keeps them. The binary (a cubin for the
GPU's architecture, or PTX for the driver to finish where NVRTC is older than the GPU) is kept in
dynfuse's disk cache, keyed by source, options, NVRTC version and architecture, beside the CPU
backend's object code. CuPy's own kernels (the copies and library calls dynfuse asks of it) keep
CuPy's cache, which is ``CUPY_CACHE_DIR``, by default ``<DYNFUSE_CACHE_DIR>/cupy`` (private, and
checked as dynfuse's own entries are; CuPy's memory alone where it cannot be trusted).

Kernels run on CuPy's current device. A compiled kernel belongs to the GPU it was compiled for: the
backend's kernels are cached per signature and GPU (``variant``).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from .. import config


def architecture(capability: int, supported: Sequence[int]) -> str:
    """NVRTC's target for a GPU of compute capability ``capability`` (90 for 9.0): a binary for it
    where NVRTC knows it, else PTX for the newest architecture NVRTC knows below it, which the
    driver compiles for the GPU when the module loads."""
    if capability in supported:
        return f"sm_{capability}"
    older = [known for known in supported if known <= capability]
    if not older:
        raise RuntimeError(
            f"NVRTC compiles for compute capabilities {min(supported) / 10:.1f} and later; "
            f"this GPU has {capability / 10:.1f}"
        )
    return f"compute_{max(older)}"


def compile_program(nvrtc: Any, source: str, target: str) -> bytes:
    """``source`` compiled by NVRTC for ``target`` (``architecture``): a cubin, or NUL-terminated PTX
    as the driver loads it."""
    from ..codegen.cuda import COMPILE_OPTIONS

    program = nvrtc.createProgram(source, "dynfuse.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(program, [f"--gpu-architecture={target}", *COMPILE_OPTIONS])
        except nvrtc.NVRTCError as error:
            log = nvrtc.getProgramLog(program)
            raise RuntimeError(
                f"NVRTC failed on a CUDA kernel for {target}: {error}\n{log[-4000:]}"
            ) from error
        if target.startswith("sm_"):
            return bytes(nvrtc.getCUBIN(program))
        return bytes(nvrtc.getPTX(program)).rstrip(b"\0") + b"\0"
    finally:
        nvrtc.destroyProgram(program)


class CupyDevice:
    """The GPU that CuPy calls current. ``library`` is CuPy, imported when first needed (a test may
    give a module with CuPy's interface instead)."""

    name = "cuda"

    def __init__(self, library: Any = None) -> None:
        self._given = library
        self._properties_of: dict[int, dict[str, Any]] = {}  # by GPU: they do not change while we run
        self._flags_of: dict[int, Any] = {}  # by GPU: the word its kernels report errors into

    @functools.cached_property
    def library(self) -> Any:
        if self._given is not None:
            return self._given
        # Read by CuPy when its compiler module is imported: CuPy's kernels keep dynfuse's cache,
        # made and checked as dynfuse's own directories are, or CuPy's memory alone where that
        # cannot be trusted (a directory the user names is the user's choice)
        if "CUPY_CACHE_DIR" not in os.environ:
            from .. import disk_cache

            directory = config.cache_dir / "cupy"
            if disk_cache.private_directory(directory):
                os.environ["CUPY_CACHE_DIR"] = str(directory)
            else:
                os.environ.setdefault("CUPY_CACHE_IN_MEMORY", "1")
        return importlib.import_module("cupy")

    @functools.cached_property
    def _absent(self) -> str | None:
        try:
            library = self.library
        except ImportError as error:
            return f"CuPy is not installed ({error}; pip install 'dynfuse[cuda13]')"
        except Exception as error:  # CuPy's import found no CUDA libraries it needs
            return f"CuPy cannot be imported ({type(error).__name__}: {error})"
        try:
            count = library.cuda.runtime.getDeviceCount()
        except Exception as error:  # CUDARuntimeError: no driver, or no device
            return f"CUDA finds no GPU ({error})"
        return None if count > 0 else "CUDA finds no GPU"

    def unavailable_reason(self) -> str | None:
        """Why arrays cannot live here (no CuPy, or no GPU), or None."""
        return self._absent

    # ---- the GPU ----------------------------------------------------------------------------------

    def _current(self) -> tuple[int, dict[str, Any]]:
        """The current GPU's number and properties."""
        runtime = self.library.cuda.runtime
        gpu = runtime.getDevice()
        found = self._properties_of.get(gpu)
        if found is None:
            found = self._properties_of[gpu] = runtime.getDeviceProperties(gpu)
        return gpu, found

    @property
    def multiprocessors(self) -> int:
        return int(self._current()[1]["multiProcessorCount"])

    @property
    def resident_threads(self) -> int:
        return int(self._current()[1]["maxThreadsPerMultiProcessor"])

    def variant(self) -> Hashable:
        """What a compiled kernel depends on besides its source: the GPU, and its architecture."""
        gpu, properties = self._current()
        return gpu, properties["major"], properties["minor"]

    # ---- kernels ----------------------------------------------------------------------------------

    def _binary_key(self, source: str) -> tuple[str, str]:
        """The NVRTC target for the current GPU, and the disk-cache key of ``source``'s binary."""
        from .. import disk_cache
        from ..codegen.cuda import COMPILE_OPTIONS

        _, properties = self._current()
        nvrtc = self.library.cuda.nvrtc
        target = architecture(10 * properties["major"] + properties["minor"], nvrtc.getSupportedArchs())
        key = disk_cache.key_of(self.name, source, COMPILE_OPTIONS, nvrtc.getVersion(), target)
        return target, key

    def cached(self, source: str) -> bool:
        from .. import disk_cache

        return disk_cache.contains(self.name, self._binary_key(source)[1])

    def load(self, source: str) -> Any:
        """``source`` compiled for the current GPU (or its binary read from the disk cache), loaded."""
        from .. import disk_cache

        target, key = self._binary_key(source)
        binary = disk_cache.load(self.name, key)
        if binary is None:
            binary = compile_program(self.library.cuda.nvrtc, source, target)
            disk_cache.store(self.name, key, binary)
        module = self.library.cuda.function.Module()
        module.load(binary)
        return module

    def function(self, module: Any, name: str) -> Any:
        return module.get_function(name)  # it holds the module, loaded, while it lives

    def launch(self, function: Any, grid: int, block: int, arguments: list) -> None:
        """On CuPy's current stream: CuPy passes its arrays as their data's address (the first field
        of what it passes), NumPy scalars by value."""
        function((grid,), (block,), tuple(arguments))

    def flags_word(self) -> Any:
        gpu = self.library.cuda.runtime.getDevice()
        word = self._flags_of.get(gpu)
        if word is None:
            word = self._flags_of[gpu] = self.library.zeros(1, np.uint64)
        return word

    def take_flags(self) -> int:
        """Read back once the current stream's launches are done (``get`` waits for them): a launch
        whose ops can report an error costs that wait, as NumPy reports errors at its line."""
        word = self.flags_word()
        flags = int(word.get()[0])
        if flags:
            word[...] = 0
        return flags

    def clear_flags(self) -> None:
        """A write in stream order: no wait."""
        self.flags_word()[...] = 0

    # ---- memory -------------------------------------------------------------------------------------

    def owns(self, value: Any) -> bool:
        """Whether ``value`` is a CuPy array: never where CuPy is not imported, which it needs not be."""
        library = self._given or sys.modules.get("cupy")
        return library is not None and isinstance(value, library.ndarray)

    def from_host(self, array: np.ndarray) -> Any:
        if array.ndim == 0:  # CuPy (14.2) puts a 0-d array's value there, not its bytes: -0.0 as 0.0
            return self.library.array(array.reshape(1), copy=True).reshape(())
        return self.library.array(array, copy=True, order="C")

    def to_host(self, array: Any) -> np.ndarray:
        return array.get()

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return self.library.empty(shape, dtype)

    def contiguous(self, array: Any) -> Any:
        return self.library.ascontiguousarray(array)

    def as_strided(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
        return self.library.lib.stride_tricks.as_strided(array, shape, strides)

    def __repr__(self) -> str:
        return f"<memory {self.name}>"
