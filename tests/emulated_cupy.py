"""CuPy's interface, as much of it as dynfuse's GPU device (``backends.cupy_device``) calls, over the
emulated CUDA device: so that CI runs that device's own code, every call it makes to CuPy, without a
GPU. Arrays are the emulator's (host memory that only CuPy's interface reaches), "NVRTC" keeps the
source as the binary, and loading a module compiles it for the emulator; a GPU runs the same code on
CuPy itself (the ``gpu`` tests).

``installed()`` puts a device on this library behind the ``cuda`` backend for a while.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

from dynfuse import replay
from dynfuse.backends import cuda
from dynfuse.backends.cuda_emulator import EmulatedArray, EmulatedDevice
from dynfuse.backends.cupy_device import CupyDevice

_EMULATOR = EmulatedDevice()
# An H100's numbers, but few multiprocessors: grids smaller than the work, as on the emulator
PROPERTIES = {"major": 9, "minor": 0, "multiProcessorCount": 2, "maxThreadsPerMultiProcessor": 2048}


class ndarray(EmulatedArray):
    """A CuPy array of the emulated GPU (named as CuPy names it)."""

    __slots__ = ()


def array(value: Any, copy: bool = True, order: str = "K") -> ndarray:
    if isinstance(value, EmulatedArray):
        return ndarray(value._data.copy(order))
    return ndarray(np.array(value, copy=True, order=order))


def empty(shape: tuple[int, ...], dtype: Any) -> ndarray:
    return ndarray(np.empty(shape, dtype))


def zeros(shape: tuple[int, ...], dtype: Any) -> ndarray:
    return ndarray(np.zeros(shape, dtype))


def ascontiguousarray(value: ndarray) -> ndarray:
    return ndarray(np.ascontiguousarray(value._data))


def as_strided(value: ndarray, shape: tuple[int, ...], strides: tuple[int, ...]) -> ndarray:
    return ndarray(np.lib.stride_tricks.as_strided(value._data, shape, strides))


class NVRTCError(RuntimeError):
    pass


class _Program:
    def __init__(self, source: str) -> None:
        self.source, self.options = source, None


def compile_program(program: _Program, options: list[str]) -> None:
    if not any(option.startswith("--gpu-architecture=") for option in options):
        raise NVRTCError("no architecture")
    program.options = options


def _binary(program: _Program) -> bytes:
    if program.options is None:
        raise NVRTCError("not compiled")
    return program.source.encode()


class Module:
    """A loaded module: the source, compiled for the emulator."""

    def load(self, binary: bytes) -> None:
        self.library = _EMULATOR.load(binary.rstrip(b"\0").decode())

    def get_function(self, name: str) -> Any:
        launch = _EMULATOR.function(self.library, name)

        def function(grid: tuple, block: tuple, arguments: tuple) -> None:
            assert type(grid) is tuple and type(block) is tuple and type(arguments) is tuple
            _EMULATOR.launch(launch, grid[0], block[0], list(arguments))

        function.module = self  # as CuPy's functions keep their module loaded
        return function


def _namespace(**members: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(**members)


LIBRARY = _namespace(
    ndarray=ndarray,
    array=array,
    empty=empty,
    zeros=zeros,
    ascontiguousarray=ascontiguousarray,
    lib=_namespace(stride_tricks=_namespace(as_strided=as_strided)),
    cuda=_namespace(
        runtime=_namespace(
            getDeviceCount=lambda: 1, getDevice=lambda: 0, getDeviceProperties=lambda device: PROPERTIES
        ),
        nvrtc=_namespace(
            NVRTCError=NVRTCError,
            createProgram=lambda source, name, headers, include_names: _Program(source),
            compileProgram=compile_program,
            getCUBIN=_binary,
            getPTX=_binary,
            getProgramLog=lambda program: "",
            destroyProgram=lambda program: None,
            getSupportedArchs=lambda: (75, 80, 86, 89, 90, 100, 120),
            getVersion=lambda: (0, 0),  # no NVRTC's: its "binaries" are kept apart from a GPU's
        ),
        function=_namespace(Module=Module),
    ),
)


@contextlib.contextmanager
def installed() -> Iterator[CupyDevice]:
    """The ``cuda`` backend on a device of this library, its kernels compiled afresh."""
    device = CupyDevice(LIBRARY)
    saved = cuda.BACKEND.device
    replay.clear_kernels()
    cuda.BACKEND.device = cuda.BACKEND.memory = device
    try:
        yield device
    finally:
        cuda.BACKEND.device = cuda.BACKEND.memory = saved
        replay.clear_kernels()
