"""The NumPy namespace, lazily: ``import dynfuse.numpy as np`` and write NumPy.

- Recorded, fused when materialized: every ufunc of the op table, ``where``, ``clip``, reductions
  and statistics, views and shape functions (``_elementwise``, ``_statistics``, ``_shapes``).
- Recorded as library calls (barriers: NumPy runs them on buffers, the ops around them still fuse):
  ``matmul``, ``dot``, ``einsum``, ``concatenate``, ``cumsum``, ``median``... (``_products``...).
- Run by NumPy at once, wrapped as leaves: creation and random draws (``_creation``, ``random``).
- Everything else falls through to NumPy (``_namespace``): functions run on materialized inputs,
  counted in ``stats()['fallbacks']`` by name; classes, dtypes and constants are NumPy's own.

Each function that mirrors a NumPy function also serves ``__array_function__``, so the same call
through real NumPy (``numpy.concatenate([x, y])``) stays lazy; ``LazyArray.__array_namespace__``
is this module (it sets itself there: ``array`` sits below it).
"""

import sys as _sys

import numpy as _np

from .. import array as _array
from . import fft, linalg, random  # noqa: F401 (submodules, as NumPy's)
from ._creation import *  # noqa: F403
from ._elementwise import *  # noqa: F403
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
_fall_through(globals(), _np)
_array.numpy_namespace = _sys.modules[__name__]
