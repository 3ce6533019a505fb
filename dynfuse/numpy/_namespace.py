"""What each of dynfuse's NumPy namespaces (``numpy``, ``numpy.linalg``, ``numpy.random``,
``numpy.fft``) does the same way: serve ``__array_function__`` with its functions, and fall through
to NumPy's module for the names it does not define."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from .. import accelerate, direct, record


def register_array_functions(namespace: dict[str, Any], numpy_module: ModuleType) -> None:
    """Each function of ``namespace`` that mirrors a function of ``numpy_module`` becomes the one
    ``LazyArray.__array_function__`` runs for it, so ``numpy.concatenate([lazy, lazy])`` is
    recorded as ``dynfuse.numpy.concatenate`` would be (and ``numpy.zeros(3, like=lazy)`` made as
    ``dynfuse.numpy.zeros`` makes it). Ufuncs reach ``__array_ufunc__`` instead. In the namespace,
    each is wrapped to leave another library's arrays to that library (``deferring``)."""
    for name, function in list(namespace.items()):
        numpy_function = getattr(numpy_module, name, None)
        if (
            callable(function)
            and not name.startswith("_")
            and callable(numpy_function)
            and not isinstance(numpy_function, (np.ufunc, type))
        ):
            record.HANDLED_FUNCTIONS[numpy_function] = function
            namespace[name] = deferring(function, numpy_function)


def deferring(function: Callable, numpy_function: Callable) -> Callable:
    """``function``, unless an argument (or an array in a sequence argument, as ``concatenate``
    takes) is another library's array (``record.foreign``: a Dask array, a CuPy array): then
    NumPy's own function, whose ``__array_function__`` dispatch hands it to that library, as
    ``numpy.mean(dask_array)`` does, rather than computing it here."""

    # A function whose common case has no C path, and that does not ask the program's place first
    at_once = not hasattr(function, "fast_path") and not getattr(function, "asks_site", False)

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        if record.foreign(args):
            return numpy_function(*args, **kwargs)
        if at_once:  # small computed arrays: NumPy's function, at once (``direct.numpy_call``)
            made = direct.numpy_call(numpy_function, args, kwargs)
            if made is not direct.DECLINED:
                return made
        return function(*args, **kwargs)

    if at_once:  # what ``accelerate`` needs to run that check in C
        call.fast_path = (numpy_function, "numpy")
    return call


def falling_back(function: Callable) -> Callable:
    """``function`` run by NumPy on materialized inputs, its array results lazy, counted by name;
    on small computed arrays NumPy's call at once, as any direct op (``direct.numpy_call``, in C
    where it can), which is no fallback: nothing was left unrecorded."""
    name = record.function_name(function)

    @functools.wraps(function)
    def fall_back(*args: Any, **kwargs: Any) -> Any:
        return record.fallback(name, function, args, kwargs, "a NumPy function dynfuse does not record")

    fall_back.fast_path = (function, "numpy")  # what ``accelerate`` needs to run that check in C
    return fall_back


# The double-underscore names that are NumPy's as a library. The others describe the module itself
# (``__path__`` would send ``import dynfuse.numpy.linalg.x`` to NumPy's files), so they never fall through.
_NUMPYS_DUNDERS = frozenset({"__version__", "__array_api_version__", "__array_namespace_info__"})


def fall_through(namespace: dict[str, Any], numpy_module: ModuleType) -> Callable[[str], Any]:
    """Give the module whose globals are ``namespace`` every name of ``numpy_module`` it lacks.

    Functions fall back (``falling_back``); classes (dtypes, ``errstate``), constants and modules
    are NumPy's own objects, and so are ufuncs, which on lazy arrays reach
    ``LazyArray.__array_ufunc__``. Found once, then kept in the namespace. ``__all__`` is NumPy's
    (every public name of the namespace is one of NumPy's), so ``from dynfuse.numpy import *`` gives
    what ``from numpy import *`` does. Returns the module's ``__getattr__``, for a module that
    looks up a few names itself first.
    """
    module_name = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        try:
            if name.startswith("__") and name not in _NUMPYS_DUNDERS:
                raise AttributeError(name)
            attribute = getattr(numpy_module, name)
        except AttributeError:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}") from None
        if callable(attribute) and not isinstance(attribute, (type, np.ufunc)):
            attribute = accelerate.accelerated(sys.modules[module_name], name, falling_back(attribute))
        namespace[name] = attribute
        return attribute

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(dir(numpy_module)))

    namespace["__all__"] = list(numpy_module.__all__)
    namespace["__getattr__"] = __getattr__
    namespace["__dir__"] = __dir__
    return __getattr__
