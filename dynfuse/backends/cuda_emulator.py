"""A CUDA device emulated on the host: the CUDA backend's kernels, unchanged, compiled by the host's
C++ compiler with ``cuda_emulator.h`` and run on host memory.

It is how the CUDA code generator's kernels are checked where there is no GPU (CI): the backend
``cuda-emulator`` runs each kernel through the same launcher as on a GPU (grid and block from the
layout and the device, arguments as cuLaunchKernel takes them), so the differential tests compare
what a GPU would compute with NumPy. Threads are fibers, run one at a time: it is slow, for
checking only. Modules are kept in the disk cache, as the CPU backend's object code.

Its memory is host memory behind CuPy's interface (``EmulatedArray``): arrays put on the device
``'cuda-emulator'`` behave as CuPy's do where dynfuse's device code relies on it (NumPy's functions
dispatch to them; converting one to NumPy without ``.get()`` raises TypeError), so CI runs the same
device path as a GPU, and a host function reached by a device array fails there as it would on one.

The header, the host compiler and the disk cache are read or imported where a module is first
compiled or looked up: importing dynfuse needs only the memory and its arrays.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

_IMPLICIT = (
    "Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a NumPy "
    "array explicitly."
)


class EmulatedArray:
    """An array in the emulated device's memory: a NumPy array that only CuPy's interface reaches,
    as much of it as dynfuse uses (NumPy's functions, indexing, ``reshape``, ``get``)."""

    __slots__ = ("_data",)

    def __init__(self, data: np.ndarray) -> None:
        self._data = data

    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    nbytes = property(lambda self: self._data.nbytes)
    itemsize = property(lambda self: self._data.itemsize)
    strides = property(lambda self: self._data.strides)
    flags = property(lambda self: self._data.flags)

    @property
    def base(self) -> EmulatedArray | None:
        return None if self._data.base is None else type(self)(self._data.base)

    @property
    def device_pointer(self) -> int:
        return self._data.ctypes.data

    def get(self) -> np.ndarray:
        """A host copy, as ``cupy.ndarray.get``."""
        return self._data.copy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(_IMPLICIT)

    def __bool__(self) -> bool:
        """The one value's truth, as CuPy reads it back (not Python's default, always true)."""
        return bool(self._data)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        outs = kwargs.get("out", ())
        result = getattr(ufunc, method)(*_device_data(inputs), **_device_data(kwargs))
        return _device_result(type(self), result, outs if isinstance(outs, tuple) else (outs,))

    def __array_function__(self, function: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        refused = sorted(kwargs.keys() & _NAMED_OTHERWISE_IN_CUPY.get(function, set()))
        if refused:
            raise TypeError(f"{function.__name__}() got an unexpected keyword argument '{refused[0]}'")
        return _device_result(type(self), function(*_device_data(args), **_device_data(kwargs)))

    def __getitem__(self, index: Any) -> EmulatedArray:
        return _device_result(type(self), self._data[_device_data(index)])

    def __setitem__(self, index: Any, value: Any) -> None:
        self._data[_device_data(index)] = _device_data(value)

    def reshape(self, *shape: Any, **kwargs: Any) -> EmulatedArray:
        return type(self)(self._data.reshape(*shape, **kwargs))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({np.array2string(self._data, separator=', ')}, dtype={self.dtype})"


# NumPy's keyword parameters that CuPy's function of the same name calls otherwise, and so refuses
_NAMED_OTHERWISE_IN_CUPY = {np.reshape: {"shape"}}


def _device_data(value: Any) -> Any:
    """The NumPy data behind emulated arrays, inside tuples, lists and dicts; a host array refused,
    as CuPy refuses one."""
    kind = type(value)
    if isinstance(value, EmulatedArray):
        return value._data
    if kind is np.ndarray:
        raise TypeError(f"Unsupported type {kind}")
    if kind in (tuple, list):
        return kind(map(_device_data, value))
    if kind is dict:
        return {key: _device_data(item) for key, item in value.items()}
    return value


def _device_result(kind: type[EmulatedArray], result: Any, outs: tuple = ()) -> Any:
    """NumPy's results as the device's arrays of ``kind``: arrays and NumPy scalars (0-d arrays, as
    CuPy returns them) wrapped, the ``out`` arrays given back as themselves."""
    if isinstance(result, np.ndarray):
        for out in outs:
            if isinstance(out, EmulatedArray) and out._data is result:
                return out
        return kind(result)
    if isinstance(result, np.generic):
        return kind(np.asarray(result))
    if type(result) in (tuple, list):
        return type(result)(_device_result(kind, item, outs) for item in result)
    return result


# Host compilation without fast math or contraction: each op rounds as it does in the kernel on a GPU.
FLAGS = ("-x", "c++", "-std=c++17", "-O1", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC", "-w")
_ENTRY = r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\('


@functools.cache
def header() -> str:
    """``cuda_emulator.h``, which every module is compiled after."""
    return Path(__file__).with_name("cuda_emulator.h").read_text()


@functools.cache
def compiler() -> tuple[str, str] | None:
    """The host C++ compiler (``$CXX``, else ``c++``) and its version line, or None if there is none
    that compiles ``_Float16`` (g++ 12, clang 15 and later)."""
    import shutil
    import subprocess

    command = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not command:
        return None
    try:
        version = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60)
        probe = subprocess.run(
            [command, "-x", "c++", "-std=c++17", "-fsyntax-only", "-"],
            input="_Float16 half = (_Float16)1.0f;\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if version.returncode or probe.returncode:
        return None
    return command, version.stdout.splitlines()[0] if version.stdout else command


class EmulatedDevice:
    """A small device: few multiprocessors, so that grids are smaller than the work and every
    grid-stride loop goes round more than once."""

    name = "cuda-emulator"
    multiprocessors = 2
    resident_threads = 1024  # per multiprocessor

    def __init__(self) -> None:
        # One launch at a time: every module's fibers run in the one shared workspace.
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._lock._at_fork_reinit)
        self._workspace: np.ndarray | None = None
        self._flags = EmulatedArray(np.zeros(1, np.uint64))

    def flags_word(self) -> EmulatedArray:
        return self._flags

    def take_flags(self) -> int:
        """Launches run to their end before they return: the word is read at once."""
        word = self._flags._data
        flags = int(word[0])
        if flags:
            word[0] = 0
        return flags

    def clear_flags(self) -> None:
        self._flags._data[0] = 0

    def unavailable_reason(self) -> str | None:
        """Why kernels cannot run here, or None."""
        return None if compiler() is not None else "no C++ compiler with _Float16 (g++ 12 or clang 15)"

    def variant(self) -> None:
        """One emulated device: kernels depend on their source alone."""
        return None

    def module_key(self, source: str) -> str:
        from .. import disk_cache

        return disk_cache.key_of(self.name, header(), source, FLAGS, compiler())

    def cached(self, source: str) -> bool:
        from .. import disk_cache

        return disk_cache.contains(self.name, self.module_key(source))

    def load(self, source: str) -> ctypes.CDLL:
        """``source`` compiled (or read from the disk cache) and loaded: one ``<kernel>_launch``
        entry per ``__global__`` function."""
        import tempfile

        from .. import disk_cache

        key = self.module_key(source)
        library = disk_cache.load(self.name, key)
        if library is None:
            library = self._compile(source)
            disk_cache.store(self.name, key, library)
        with tempfile.TemporaryDirectory(prefix="dynfuse-emulator-") as directory:
            path = Path(directory) / "module.so"
            path.write_bytes(library)
            return ctypes.CDLL(str(path))  # mapped: the file may go

    def _compile(self, source: str) -> bytes:
        import subprocess
        import tempfile

        entries = "".join(f"DF_EMULATOR_ENTRY({name})\n" for name in re.findall(_ENTRY, source))
        found = compiler()
        if found is None:
            raise RuntimeError(f"the cuda-emulator backend cannot run here: {self.unavailable_reason()}")
        with tempfile.TemporaryDirectory(prefix="dynfuse-emulator-") as directory:
            output = Path(directory) / "module.so"
            result = subprocess.run(
                [found[0], *FLAGS, "-o", str(output), "-"],
                input=f"{header()}\n{source}\n{entries}",
                capture_output=True,
                text=True,
            )
            if result.returncode:
                raise RuntimeError(f"the host compiler failed on a CUDA kernel:\n{result.stderr[-4000:]}")
            return output.read_bytes()

    def function(self, module: ctypes.CDLL, name: str) -> Any:
        launch = getattr(module, f"{name}_launch")
        launch.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        launch.restype = ctypes.c_int
        if self._workspace is None:
            size = module.dynfuse_workspace_bytes
            size.restype = ctypes.c_size_t
            self._workspace = np.empty(size(), np.uint8)  # touched only where fibers run
        return launch

    def owns(self, value: Any) -> bool:
        return type(value) is EmulatedArray

    def from_host(self, array: np.ndarray) -> EmulatedArray:
        return EmulatedArray(np.array(array, order="C", copy=True))

    def to_host(self, array: EmulatedArray) -> np.ndarray:
        return array.get()

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> EmulatedArray:
        return EmulatedArray(np.empty(shape, dtype))

    def contiguous(self, array: EmulatedArray) -> EmulatedArray:
        return array if array.flags.c_contiguous else EmulatedArray(np.ascontiguousarray(array._data))

    def as_strided(
        self, array: EmulatedArray, shape: tuple[int, ...], strides: tuple[int, ...]
    ) -> EmulatedArray:
        return EmulatedArray(np.lib.stride_tricks.as_strided(array._data, shape, strides, writeable=False))

    def __repr__(self) -> str:
        return f"<memory {self.name}>"

    def launch(self, function: Any, grid: int, block: int, arguments: list) -> None:
        """Run ``function`` on ``grid`` blocks of ``block`` threads: device arrays are passed as their
        data's address, NumPy scalars by value, as cuLaunchKernel takes them."""
        if any(isinstance(value, np.ndarray) for value in arguments):
            raise TypeError("a host array was passed to a kernel on the emulated device")
        values = [
            np.array(value.device_pointer, np.uintp) if isinstance(value, EmulatedArray) else np.array(value)
            for value in arguments
        ]
        pointers = (ctypes.c_void_p * max(len(values), 1))(*(value.ctypes.data for value in values))
        with self._lock:
            status = function(grid, block, pointers, self._workspace.ctypes.data)
        if status:
            raise RuntimeError(f"the emulated launch of {grid} blocks of {block} threads failed")
