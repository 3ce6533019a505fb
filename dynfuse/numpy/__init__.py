"""The NumPy namespace, lazily: ``import dynfuse.numpy as np`` and write NumPy.

- Recorded, fused when materialized: every ufunc of the op table, ``where``, ``clip``, reductions
  and statistics, views and shape functions, arrays built from their indices (``_elementwise``,
  ``_statistics``, ``_shapes``, ``_index_built``).
- Recorded as library calls (barriers: NumPy runs them on buffers, the ops around them still fuse):
  ``matmul``, ``dot``, ``einsum``, ``concatenate``, ``cumsum``, ``median``... (``_products``...).
- Run by NumPy at once, wrapped as leaves: creation and random draws (``_creation``, ``random``).
- Everything else falls through to NumPy (``_namespace``): functions run on materialized inputs,
  counted in ``stats()['fallbacks']`` by name; classes, dtypes and constants are NumPy's own.

Each function that mirrors a NumPy function also serves ``__array_function__``, so the same call
through real NumPy (``numpy.concatenate([x, y])``) stays lazy; ``LazyArray.__array_namespace__``
is this module (it sets itself there: ``array`` sits below it).

``fft`` and ``random`` are imported when first used, as NumPy imports its own (``numpy.random``
costs a few ms of every start-up); ``linalg``, which NumPy imports anyway, with the namespace.
"""

import sys as _sys
from typing import Any as _Any

import numpy as _np

from .. import accelerate as _accelerate
from .. import array as _array
from . import linalg  # noqa: F401 (a submodule, as NumPy's)
from ._creation import *  # noqa: F403
from ._elementwise import *  # noqa: F403
from ._index_built import *  # noqa: F403
from ._namespace import fall_through as _fall_through
from ._namespace import register_array_functions as _register_array_functions
from ._products import *  # noqa: F403
from ._shapes import *  # noqa: F403
from ._statistics import *  # noqa: F403

# dtypes and constants: NumPy's own objects (the fall-through below gives the others).
_OWN_OBJECTS = """bool bool_ int8 int16 int32 int64 intp uint8 uint16 uint32 uint64 uintp float16 float32
float64 half single double complex64 complex128 generic number integer signedinteger unsignedinteger
inexact floating dtype finfo iinfo ndarray pi e euler_gamma inf nan newaxis"""
globals().update({name: getattr(_np, name) for name in _OWN_OBJECTS.split()})

_register_array_functions(globals(), _np)
_numpy_attribute = _fall_through(globals(), _np)


def __getattr__(name: str) -> _Any:
    """``fft`` and ``random``, dynfuse's, imported on first use; any other name, NumPy's. (Imported
    by full name: ``from . import fft`` would look the name up here again, and recurse.)"""
    if name == "fft":
        import dynfuse.numpy.fft as fft

        return fft
    if name == "random":
        import dynfuse.numpy.random as random

        return random
    return _numpy_attribute(name)


_accelerate.accelerate_namespace(_sys.modules[__name__])
_array.numpy_namespace = _sys.modules[__name__]
