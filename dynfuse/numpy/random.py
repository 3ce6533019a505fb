"""``numpy.random`` with lazy arrays: NumPy draws, and each draw becomes a leaf of the trace.

A draw has no work to fuse; what it returns is new memory that nothing else sees, so writes into
it may stay lazy. ``default_rng`` gives a ``Generator`` and ``RandomState`` a legacy state, both
NumPy's underneath (the same seed draws the same numbers), their methods returning lazy arrays;
the module's legacy functions (``seed``, ``rand``, ``normal``...) draw from NumPy's global state.
Lazy arguments (a ``loc`` array, an array to ``shuffle`` in place) are computed first. Other names
(bit generators, ``SeedSequence``) are NumPy's own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as _np

from .. import record as _record
from ._namespace import fall_through as _fall_through

# Draws that permute their first argument in place.
_IN_PLACE = frozenset({"shuffle"})


def _draw(function: Callable, args: tuple, kwargs: dict) -> Any:
    written = args[:1] if function.__name__ in _IN_PLACE else ()
    return _record.call_numpy(function, args, kwargs, written=written, fresh=True)


def _drawing(function: Callable) -> Callable:
    @functools.wraps(function)
    def draw(*args: Any, **kwargs: Any) -> Any:
        return _draw(function, args, kwargs)

    return draw


class _Drawing:
    """A NumPy random state (``numpy_class``), its draws as lazy arrays: each public method of the
    NumPy class is one here, and each property reads through."""

    numpy_class: type
    _numpy: Any

    def __init_subclass__(cls) -> None:
        for name, attribute in vars(cls.numpy_class).items():
            if name.startswith("_") or name in vars(cls):
                continue
            if callable(attribute):
                setattr(cls, name, _method(name))
            else:
                setattr(cls, name, property(functools.partial(_numpy_attribute, name=name)))

    @classmethod
    def _of(cls, numpy_state: Any) -> Any:
        drawing = cls.__new__(cls)
        drawing._numpy = numpy_state
        return drawing

    def __repr__(self) -> str:
        return f"dynfuse {self._numpy!r}"


def _method(name: str) -> Callable:
    def method(self: _Drawing, *args: Any, **kwargs: Any) -> Any:
        return _draw(getattr(self._numpy, name), args, kwargs)

    method.__name__ = method.__qualname__ = name
    return method


def _numpy_attribute(drawing: _Drawing, name: str) -> Any:
    return getattr(drawing._numpy, name)


class Generator(_Drawing):
    """``numpy.random.Generator`` drawing lazy arrays."""

    numpy_class = _np.random.Generator

    def __init__(self, bit_generator: Any) -> None:
        self._numpy = _np.random.Generator(bit_generator)

    def spawn(self, n_children: int) -> list[Generator]:
        return [Generator._of(child) for child in self._numpy.spawn(n_children)]


class RandomState(_Drawing):
    """``numpy.random.RandomState`` (the legacy API) drawing lazy arrays."""

    numpy_class = _np.random.RandomState

    def __init__(self, seed: Any = None) -> None:
        self._numpy = _np.random.RandomState(seed)


def default_rng(seed: Any = None) -> Generator:
    """``numpy.random.default_rng``: a Generator is returned as it is, anything else seeds a new one."""
    if isinstance(seed, Generator):
        return seed
    return Generator._of(_np.random.default_rng(seed.tolist() if _record.is_lazy(seed) else seed))


# The legacy functions: methods of NumPy's global RandomState, drawing from it.
for _name in _np.random.__all__:
    _function = getattr(_np.random, _name)
    if _name not in globals() and callable(_function) and not isinstance(_function, type):
        globals()[_name] = _drawing(_function)

_fall_through(globals(), _np.random)
del _name, _function
