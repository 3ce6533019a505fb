"""LazyArray: NumPy's array interface, recorded instead of run.

Shape, dtype and errors are known when an operation is written; values when they are asked for
(``numpy.asarray(x)``, ``x.item()``, ``float(x)``, printing, iteration, ``dynfuse.evaluate``).
Like an ndarray, a view (``x[1:]``, ``x.T``, ``x.reshape(...)``) keeps its base in ``.base`` and
is materialized as a NumPy view of its base's buffer, so writes through either are seen by both.
"""

from __future__ import annotations

import inspect
import operator
import weakref
from collections.abc import Callable, Iterator
from types import GenericAlias, ModuleType
from typing import Any

import numpy as np

from . import devices, direct, execute, ops, pressure, record, registry, views
from .devices import HOST
from .trace import Node

# ``dynfuse.numpy``, which sits above this module and sets itself here when imported: the namespace
# ``__array_namespace__`` returns, and what ``clip`` and ``repeat`` call (as the namespace's own).
numpy_namespace: Any = None

_E = ops.elementwise_op


def _half_power_of_a_scalar(scalar: LazyArray) -> Any:
    """A NumPy scalar's ``** 0.5``: C's pow (0.0 at -0.0, inf at -inf), which ``float_power`` is,
    where the power ufunc's loop takes sqrt; in float64, exact for every float dtype (a square root
    rounded twice is rounded once)."""
    root = numpy_namespace.float_power(scalar, 0.5)
    return root if scalar.dtype == np.float64 else root.astype(scalar.dtype)


def _fast_power_op(array: LazyArray, exponent: Any) -> ops.Op | Callable[[LazyArray], Any] | None:
    """The ufunc NumPy's ``ndarray.__pow__`` substitutes for some Python-scalar exponents, or, for a
    scalar, what computes NumPy's scalar power where it is not the power ufunc.

    ``a ** 2`` is ``square(a)`` for every dtype (so ``bool ** 2`` is int8, where ``power`` gives
    int64); on floating and complex arrays ``a ** -1`` is ``reciprocal`` and ``a ** 0.5`` is
    ``sqrt`` (which differs from ``power`` at -0.0 and -inf). NumPy's ``a ** 3`` calls pow; dynfuse
    records it as ``cube``, which backends compute by multiplying, as exactly as pow (GELU's ``x**3``), and
    ``a ** -0.5``, ``a ** 1.5`` and ``a ** -1.5`` as ``ops.HALF_POWERS``, from a square root. A scalar's
    power is the ufunc (``bool ** 2`` is the default int), but at 0.5, where it is C's pow.
    """
    if array._scalar:
        half = isinstance(exponent, (float, np.floating)) and exponent == 0.5
        return _half_power_of_a_scalar if half and array.dtype.kind == "f" else None
    if type(exponent) is int and exponent == 2:
        return _E("square")
    if array.dtype.kind in "fc":
        if type(exponent) is int and exponent == -1:
            return _E("reciprocal")
        if type(exponent) is float and exponent == 0.5:
            return _E("sqrt")
    if array.dtype.kind == "f":
        if type(exponent) in (int, float) and exponent == 3:
            return _E("cube")
        if type(exponent) is float and exponent in ops.HALF_POWERS:
            return _E(ops.HALF_POWERS[exponent])
    return None


def _binary(name: str, substitute: Any = None) -> tuple:
    """The forward, reflected and in-place operator methods for one binary ufunc.

    ``substitute(array, other)`` may name a unary op that NumPy's operator uses instead, or give a
    function of the array that computes what NumPy's operator does (a scalar's, never written in
    place: in-place operators rebind a scalar).
    """
    op = _E(name)

    def call(self: LazyArray, other: Any, out: LazyArray | None) -> Any:
        if record.defers_to(other):
            return NotImplemented
        replacement = substitute(self, other) if substitute else None
        if isinstance(replacement, ops.Op):
            return record.elementwise(replacement, (self,), out=out)
        if replacement is not None:
            return replacement(self)
        return record.elementwise(op, (self, other), out=out)

    def forward(self: LazyArray, other: Any) -> Any:
        replacement = substitute(self, other) if substitute else None
        if isinstance(replacement, ops.Op):
            recorded = record.record_common(replacement, self)
        elif replacement is not None:
            return replacement(self)
        else:
            recorded = record.record_common(op, self, other)
        return recorded if recorded is not None else call(self, other, None)

    def reflected(self: LazyArray, other: Any) -> Any:
        recorded = record.record_common(op, other, self)
        if recorded is not None:
            return recorded
        return NotImplemented if record.defers_to(other) else record.elementwise(op, (other, self))

    def in_place(self: LazyArray, other: Any) -> Any:
        return forward(self, other) if self._scalar else call(self, other, self)

    # A substitute is what NumPy's operator does on a computed array: C runs that operator
    forward.fast_path = (op, "forward" if substitute is None else "power")
    if substitute is None:
        in_place.fast_path = (op, "in place")
    reflected.fast_path = (op, "reflected")
    return forward, reflected, in_place


def _unary(name: str) -> Any:
    op = _E(name)

    def method(self: LazyArray) -> Any:
        recorded = record.record_common(op, self)
        return recorded if recorded is not None else record.elementwise(op, (self,))

    method.fast_path = (op, "unary")
    return method


_conjugate = _unary("conjugate")


def reduction_method(name: str, positional: tuple[str, ...]) -> Any:
    """A reduction with NumPy's signature; serves as the method and as the ``dynfuse.numpy`` function."""

    def reduce(a: Any, *args: Any, **kwargs: Any) -> Any:
        if len(args) > len(positional):
            raise TypeError(f"{name}() takes at most {len(positional) + 1} positional arguments")
        for key, value in zip(positional, args, strict=False):
            if key in kwargs:
                raise TypeError(f"{name}() got multiple values for argument {key!r}")
            kwargs[key] = value
        return record.reduction(name, a, **kwargs)

    reduce.__name__ = reduce.__qualname__ = name
    reduce.__doc__ = f"Lazy ``numpy.{name}``: recorded now, fused with its producers when materialized."
    reduce.__signature__ = inspect.signature(getattr(np, name))  # what introspection sees: NumPy's
    # What ``accelerate`` needs to record the method's common case (``axis``, ``keepdims``) in C
    reduce.fast_path = (ops.REDUCTIONS[name], "one_axis" if name in ops.SINGLE_AXIS_REDUCTIONS else "reduce")
    return reduce


def cumulative_method(name: str) -> Any:
    """A running total or product, fused (a scan); serves as the ``dynfuse.numpy`` function too."""
    op = ops.SCANS[name]

    def accumulate(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        return record.scan(op, a, axis, dtype, out)

    accumulate.__name__ = accumulate.__qualname__ = name
    accumulate.__doc__ = f"Lazy ``numpy.{name}``, fused with the ops around it (a running {name[3:]})."
    return accumulate


def _outer_operands(a: Any, b: Any) -> tuple[Any, Any]:
    """``ufunc.outer(a, b)`` as an elementwise call: ``a`` with an axis of one per axis of ``b``."""
    a, b = record.lazy(a), record.lazy(b)
    return record.reshape(a, a.shape + (1,) * b.ndim), b


class LazyFlags:
    """``LazyArray.flags``: ownership without computing (Dask asks it of every slice it takes, to
    copy a small slice of a large chunk); the layout flags of the computed array."""

    __slots__ = ("_array",)

    def __init__(self, array: LazyArray) -> None:
        self._array = array

    @property
    def owndata(self) -> bool:
        return self._array.base is None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._array._value().flags, name)

    def __getitem__(self, name: str) -> bool:
        if name in ("OWNDATA", "O"):
            return self.owndata
        return self._array._value().flags[name]

    def __repr__(self) -> str:
        flags = self._array._value().flags
        return repr(flags).replace(f"OWNDATA : {flags.owndata}", f"OWNDATA : {self.owndata}")


class LazyArray:
    """An n-dimensional array whose operations are recorded and fused when its value is needed."""

    __slots__ = ("__weakref__", "_base", "_node", "_scalar", "_views")
    # Above ndarray's 0: libraries that choose an implementation by it (Dask's dispatch) choose the
    # lazy array's. NumPy's own operators go by ``__array_ufunc__`` instead.
    __array_priority__ = 1.0

    def __init__(self, node: Node, base: LazyArray | None = None, scalar: bool = False) -> None:
        self._node = node
        self._base = base
        # A 0-d value NumPy holds as a scalar (a reduction's, a ufunc's, an element's): immutable,
        # so an in-place operator rebinds the name, and its ``**`` is NumPy's scalar power.
        self._scalar = scalar
        # Weak references to the views of this array, some perhaps dead: only whether one lives is
        # asked (``record.can_rebind``), so no callback keeps the list exact as each view dies.
        self._views: list[weakref.ref[LazyArray]] | None = None

    def _add_view(self, view: LazyArray) -> None:
        """Register a view; the dead ones go when the list reaches a power of two, so a loop that
        takes and drops views keeps it short (the C recorder does the same)."""
        refs = self._views
        if refs is None:
            self._views = [weakref.ref(view)]
            return
        refs.append(weakref.ref(view))
        count = len(refs)
        if count >= 8 and not count & (count - 1):
            refs[:] = [ref for ref in refs if ref() is not None]

    def _has_views(self) -> bool:
        """Whether a view of this array is alive."""
        refs = self._views
        if not refs:
            return False
        refs[:] = [ref for ref in refs if ref() is not None]
        return bool(refs)

    # ---- known at once ---------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self._node.shape

    @shape.setter
    def shape(self, shape: Any) -> None:
        """In place, as NumPy's: the array becomes a view of its memory in ``shape`` (computed
        first); where that would take a copy, NumPy's error, and nothing changes."""
        if self._scalar:
            raise AttributeError("attribute 'shape' of 'numpy.generic' objects is not writable")
        node = self._node
        reshaped = self._value().view()
        reshaped.shape = shape  # NumPy's checks and errors, on a view of its own
        self._node = pressure.new_leaf(reshaped, exposed=node.exposed, device=node.device)

    @property
    def dtype(self) -> np.dtype:
        return self._node.dtype

    @property
    def ndim(self) -> int:
        return len(self._node.shape)

    @property
    def size(self) -> int:
        return views.size_of(self._node.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def flags(self) -> LazyFlags:
        """NumPy's flags of the array's memory: whether it owns it (a view does not) is known
        without computing; the others (``c_contiguous``...) are those of the computed array."""
        return LazyFlags(self)

    @property
    def base(self) -> LazyArray | None:
        """The array whose memory this view shares, as ``ndarray.base``; None for an owner."""
        return self._base

    @property
    def T(self) -> LazyArray:
        return record.transpose(self)

    T.fget.fast_path = (None, "transpose")

    @property
    def real(self) -> LazyArray:
        """The real part: of a complex array a view, through which a write changes the array (a
        kernel reads it with the array's strides, no copy); of a real one, the array itself."""
        return record.complex_part(self, "real")

    @real.setter
    def real(self, value: Any) -> None:
        self._set_part("real", value)

    @property
    def imag(self) -> LazyArray:
        """The imaginary part: of a complex array a view, as ``real``; of a real one, read-only zeros."""
        return record.complex_part(self, "imag")

    @imag.setter
    def imag(self, value: Any) -> None:
        self._set_part("imag", value)

    def _set_part(self, name: str, value: Any) -> None:
        """``a.real = value``, ``a.imag = value``: written through the part's view, as NumPy does."""
        if self._scalar:
            raise AttributeError(f"attribute '{name}' of 'numpy.generic' objects is not writable")
        if name == "imag" and self.dtype.kind != "c":
            raise TypeError("array does not have imaginary part to set")
        record.complex_part(self, name)[...] = value

    @property
    def mT(self) -> LazyArray:
        """The last two axes swapped (a stack of matrices, each transposed)."""
        if self.ndim < 2:
            raise ValueError(f"matrix transpose with ndim < 2 is undefined (shape {self.shape})")
        return record.permute(self, views.swapaxes_axes(-1, -2, self.ndim))

    @property
    def device(self) -> str:
        """Where the values live, as the array API asks: ``'cpu'`` (host memory, as NumPy's),
        ``'cuda'`` or ``'cuda-emulator'`` (``devices``)."""
        return self._node.memory.name

    def to(self, device: Any) -> LazyArray:
        """This array on ``device``: itself if it is there, else a copy there (its values computed
        first, where they live)."""
        target = registry.memory_named(device, "to")
        source = self._node.memory
        if target is source:
            return self
        moved = devices.move(self._value(), source, target)
        return LazyArray(pressure.new_leaf(moved, exposed=False, device=target))

    def to_device(self, device: Any, /, *, stream: Any = None) -> LazyArray:
        """The array API's name for ``to``."""
        if stream is not None:
            raise ValueError("to_device: streams are not supported")
        return self.to(device)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    # ---- materialization -------------------------------------------------------------------------

    def _value(self) -> Any:
        """The computed values, where they live."""
        node = self._node
        if node.inputs:
            execute.materialize((node,))
        return node.buffer

    def _host(self) -> np.ndarray:
        return record.host_value(self._node)

    def numpy(self) -> np.ndarray:
        """The values as an ndarray sharing this array's memory (as ``numpy.asarray`` gives); a
        copy of an array on a device."""
        return self.__array__()

    def cupy(self) -> Any:
        """The values as the CuPy array that holds them, without a copy (as ``numpy()`` gives an
        ndarray): the array must be on device ``'cuda'``; ``x.to('cuda').cupy()`` copies it there."""
        if self.device != "cuda":
            raise ValueError(
                f"cupy: the array is on device {self.device!r}, not 'cuda'; x.to('cuda') copies it there"
            )
        buffer = self._value()
        self._node.exposed = True
        return buffer

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA's array protocol, for an array on ``'cuda'``: CuPy, PyTorch and Numba take its values
        without a copy (``cupy.asarray(x)``); absent from arrays elsewhere."""
        if self.device != "cuda":
            raise AttributeError(f"an array on device {self.device!r} has no __cuda_array_interface__")
        return self.cupy().__cuda_array_interface__

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if self._node.memory is not HOST:
            if copy is False:
                raise ValueError(
                    f"Unable to avoid copy while creating an array on the host from {self.device}"
                )
            return np.asarray(self._host(), dtype=dtype)
        buffer = self._value()
        self._node.exposed = True
        return buffer if dtype is None and copy is None else np.asarray(buffer, dtype=dtype, copy=copy)

    __array__.fast_path = (None, "array")

    def __dlpack__(
        self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: bool | None = None
    ) -> Any:
        """The computed values' DLPack capsule, as the array holding them gives it: the consumer
        shares this array's memory (and may write it), as through ``__array__``."""
        value = self._value()
        self._node.exposed = True
        return value.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """Where the values live, as DLPack names devices; known without computing them on the host."""
        if self._node.memory is HOST:
            return (1, 0)  # kDLCPU
        return self._value().__dlpack_device__()

    def item(self, *args: Any) -> Any:
        return self._host().item(*args)

    item.fast_path = ("item", "value")  # a computed host array's buffer's, in C

    def tolist(self) -> Any:
        return self._host().tolist()

    tolist.fast_path = ("tolist", "value")

    def __bool__(self) -> bool:
        return bool(self._host())

    def __float__(self) -> float:
        return float(self._host())

    def __int__(self) -> int:
        return int(self._host())

    def __complex__(self) -> complex:
        return complex(self._host())

    def __index__(self) -> int:
        return operator.index(self._host())

    def __iter__(self) -> Iterator[Any]:
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        values = self._host()  # computed once; rows are then views of it, as NumPy's are
        if self.ndim == 1:
            return iter(values)
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        text = np.array_repr(self._host())
        if self._node.memory is not HOST:
            text = f"{text[:-1]}, device={self.device!r})" if text.endswith(")") else text
        return "LazyArray" + text[len("array") :] if text.startswith("array") else f"LazyArray({text})"

    def __str__(self) -> str:
        return str(self._host())

    def __format__(self, spec: str) -> str:
        return format(self._host(), spec)

    def __reduce__(self) -> tuple:
        return (_from_numpy, (np.array(self._host()), self.device))

    def __dask_tokenize__(self) -> tuple:
        """Dask's token for the array (``dynfuse.dask``): its values' hash once computed; while it is
        pending, a fresh token (hashing the values would compute them): two tokens of one pending
        array differ, as Dask's own are for objects it cannot hash."""
        import hashlib  # here, not at start-up: only Dask asks
        import uuid

        if self._node.inputs:
            return ("dynfuse.LazyArray", uuid.uuid4().hex)
        values = np.ascontiguousarray(self._host())
        return ("dynfuse.LazyArray", self.dtype.str, self.shape, hashlib.sha256(values.data).hexdigest())

    def __copy__(self) -> LazyArray:
        return self.copy()

    def __deepcopy__(self, memo: dict) -> LazyArray:
        return self.copy()

    __hash__ = None  # type: ignore[assignment]
    __class_getitem__ = classmethod(GenericAlias)  # ``LazyArray[Any, np.dtype[np.float64]]``, as ndarray's

    def __contains__(self, value: Any) -> bool:
        """``value in a``, as NumPy's: whether any element equals it, broadcast against the array."""
        return bool((self == value).any())

    def __delitem__(self, index: Any) -> None:
        raise ValueError("cannot delete array elements")

    # ---- NumPy protocols ---------------------------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if not kwargs and method == "__call__" and 1 <= len(inputs) <= 2:  # the common case, first
            op = ops.UFUNC_OPS.get(ufunc)
            recorded = None if op is None else record.record_common(op, *inputs)
            if recorded is not None:
                return recorded
        if record.foreign((*inputs, kwargs.get("out"))):
            return NotImplemented  # another library's array: NumPy then asks it (NEP 13)
        out = record.single_out(kwargs.pop("out", None))
        if method == "__call__" and ufunc in ops.UFUNC_OPS:
            return record.ufunc_call(ops.UFUNC_OPS[ufunc], inputs, out, kwargs)
        if method == "__call__" and ufunc is np.matmul and not kwargs:
            return record.matmul(*inputs, out=out)
        if method == "reduce" and ufunc in ops.UFUNC_REDUCE_OPS and len(inputs) == 1:
            kwargs.setdefault("axis", 0)
            return record.reduction(ops.UFUNC_REDUCE_OPS[ufunc].name, inputs[0], out=out, **kwargs)
        if method == "outer" and ufunc in ops.UFUNC_OPS and len(inputs) == 2:
            return record.ufunc_call(ops.UFUNC_OPS[ufunc], _outer_operands(*inputs), out, kwargs)
        if method == "at" and type(inputs[0]) is LazyArray and inputs[0]._node.memory is HOST and not kwargs:
            # an unbuffered write, accumulating at repeated indices: NumPy's, into the target's memory
            return record.write_now(f"{ufunc.__name__}.at", inputs[0], inputs[1:], ufunc.at)
        if out is not None:
            kwargs["out"] = out
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        why = "a ufunc method or keywords dynfuse does not record"
        return record.fallback(name, getattr(ufunc, method), inputs, kwargs, why)

    # What ``accelerate`` needs to record this method's common case in C (as for the operators)
    __array_ufunc__.fast_path = (ops.UFUNC_OPS, "ufunc")

    def __array_namespace__(self, *, api_version: str | None = None) -> ModuleType:
        """``dynfuse.numpy``, as an ndarray's is ``numpy``: array-API code given lazy arrays records."""
        np.empty(0).__array_namespace__(api_version=api_version)  # NumPy's refusal of unknown versions
        return numpy_namespace

    def __array_function__(self, func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
        if not all(issubclass(kind, (LazyArray, np.ndarray)) for kind in types):
            return NotImplemented
        handler = record.HANDLED_FUNCTIONS.get(func)
        if handler is not None:
            return handler(*args, **kwargs)
        why = "a NumPy function dynfuse does not record"
        return record.fallback(record.function_name(func), func, args, kwargs, why)

    # ---- operators ---------------------------------------------------------------------------------

    __add__, __radd__, __iadd__ = _binary("add")
    __sub__, __rsub__, __isub__ = _binary("subtract")
    __mul__, __rmul__, __imul__ = _binary("multiply")
    __truediv__, __rtruediv__, __itruediv__ = _binary("divide")
    __floordiv__, __rfloordiv__, __ifloordiv__ = _binary("floor_divide")
    __mod__, __rmod__, __imod__ = _binary("remainder")
    __pow__, __rpow__, __ipow__ = _binary("power", substitute=_fast_power_op)
    __and__, __rand__, __iand__ = _binary("bitwise_and")
    __or__, __ror__, __ior__ = _binary("bitwise_or")
    __xor__, __rxor__, __ixor__ = _binary("bitwise_xor")
    __lshift__, __rlshift__, __ilshift__ = _binary("left_shift")
    __rshift__, __rrshift__, __irshift__ = _binary("right_shift")
    __lt__ = _binary("less")[0]
    __le__ = _binary("less_equal")[0]
    __gt__ = _binary("greater")[0]
    __ge__ = _binary("greater_equal")[0]
    __eq__ = _binary("equal")[0]  # type: ignore[assignment]
    __ne__ = _binary("not_equal")[0]  # type: ignore[assignment]
    __neg__ = _unary("negative")
    __pos__ = _unary("positive")
    __invert__ = _unary("invert")
    __abs__ = _unary("absolute")

    def __divmod__(self, other: Any) -> tuple[Any, Any]:
        return self // other, self % other

    def __rdivmod__(self, other: Any) -> tuple[Any, Any]:
        return other // self, other % self

    def __matmul__(self, other: Any) -> Any:
        return record.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return record.matmul(other, self)

    # In C, a product of computed arrays runs at once (``direct``); the methods above otherwise
    __matmul__.fast_path = (ops.BARRIERS["matmul"], "forward")
    __rmatmul__.fast_path = (ops.BARRIERS["matmul"], "reflected")

    def __imatmul__(self, other: Any) -> LazyArray:
        return record.matmul(self, other, out=self)

    # ---- indexing ----------------------------------------------------------------------------------

    def __getitem__(self, index: Any) -> Any:
        return record.getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        record.setitem(self, index, value)

    # In C: an element or small view of a computed array read at once (``direct``), a view of a
    # pending one recorded, and a write into a small computed array that nothing pending reads
    # made at once (a pending value computed first by the launch its structure kept); the methods
    # above are what runs otherwise
    __getitem__.fast_path = (None, "getitem")
    __setitem__.fast_path = (None, "setitem")

    # ---- methods -----------------------------------------------------------------------------------

    def astype(self, dtype: Any, casting: str = "unsafe", copy: bool = True) -> Any:
        return record.astype(self, dtype, casting=casting, copy=copy)

    astype.fast_path = (None, "astype")

    def copy(self) -> Any:
        return record.astype(self, self.dtype)

    copy.fast_path = (None, "copy")

    def fill(self, value: Any) -> None:
        record.setitem(self, Ellipsis, value)

    def reshape(self, *shape: Any, order: str = "C") -> Any:
        if order != "C":
            return record.fallback(
                "reshape", np.reshape, (self, shape), {"order": order}, "order= other than 'C'"
            )
        return record.reshape(self, shape[0] if len(shape) == 1 else shape)

    reshape.fast_path = (None, "reshape")

    def transpose(self, *axes: Any) -> Any:
        return record.transpose(self, None if not axes else axes[0] if len(axes) == 1 else axes)

    transpose.fast_path = (None, "transpose")

    def swapaxes(self, axis1: int, axis2: int) -> Any:
        return record.permute(self, views.swapaxes_axes(axis1, axis2, self.ndim))

    def squeeze(self, axis: Any = None) -> Any:
        shape = np.squeeze(views.shape_stand_in(self.shape), axis).shape
        return record.reshape(self, shape)

    squeeze.fast_path = (None, "squeeze")

    def ravel(self) -> Any:
        return record.reshape(self, -1)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
        """A read-only view, as NumPy's; serves as ``dynfuse.numpy.diagonal`` too."""
        return record.diagonal(self, offset, axis1, axis2)

    def flatten(self) -> Any:
        return record.reshape(self, -1).copy()

    def clip(self, min: Any = None, max: Any = None) -> Any:
        return numpy_namespace.clip(self, min, max)

    def conjugate(self) -> Any:
        """The complex conjugate; an array of another dtype itself, as NumPy's method gives."""
        return _conjugate(self) if self.dtype.kind == "c" else self

    conj = conjugate

    sum = reduction_method("sum", ("axis", "dtype", "out", "keepdims"))
    prod = reduction_method("prod", ("axis", "dtype", "out", "keepdims"))
    mean = reduction_method("mean", ("axis", "dtype", "out", "keepdims"))
    var = reduction_method("var", ("axis", "dtype", "out", "ddof", "keepdims"))
    std = reduction_method("std", ("axis", "dtype", "out", "ddof", "keepdims"))
    max = reduction_method("max", ("axis", "out", "keepdims"))
    min = reduction_method("min", ("axis", "out", "keepdims"))
    any = reduction_method("any", ("axis", "out", "keepdims"))
    all = reduction_method("all", ("axis", "out", "keepdims"))
    argmax = reduction_method("argmax", ("axis", "out"))
    argmin = reduction_method("argmin", ("axis", "out"))
    cumsum = cumulative_method("cumsum")
    cumprod = cumulative_method("cumprod")

    def dot(self, b: Any, out: Any = None) -> Any:
        """A library call (BLAS); serves as ``dynfuse.numpy.dot`` too."""
        return record.barrier(ops.BARRIERS["dot"], (self, b), out=out)

    dot.fast_path = (ops.BARRIERS["dot"], "forward")

    def repeat(self, repeats: Any, axis: Any = None) -> Any:
        return numpy_namespace.repeat(self, repeats, axis)


_UNRECORDED_ATTRIBUTE = "an ndarray attribute dynfuse does not record"


def _falling_back(name: str) -> Any:
    """An ndarray attribute that LazyArray does not record: NumPy's, on the materialized array,
    counted as ``ndarray.<name>`` (a method that writes into the array, such as ``sort``, is
    prepared as a write: see ``direct.WRITES_FIRST_ARGUMENT``)."""
    attribute = getattr(np.ndarray, name)
    counted = f"ndarray.{name}"
    if not callable(attribute):
        return property(
            lambda self: record.fallback(counted, attribute.__get__, (self,), {}, _UNRECORDED_ATTRIBUTE),
            doc=attribute.__doc__,
        )

    def method(self: LazyArray, *args: Any, **kwargs: Any) -> Any:
        return record.fallback(counted, attribute, (self, *args), kwargs, _UNRECORDED_ATTRIBUTE)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = attribute.__doc__
    return method


for _name in dir(np.ndarray):
    if not _name.startswith("_") and not hasattr(LazyArray, _name):
        setattr(LazyArray, _name, _falling_back(_name))
# What recording and direct execution wrap their nodes in: both sit below this module
record.LazyArray = direct.LazyArray = LazyArray


def _from_numpy(array: np.ndarray, device: str = "cpu") -> LazyArray:
    """An unpickled array: on its device again (which must be available where it is unpickled)."""
    return asarray(array, device=None if device == "cpu" else device)


def asarray(obj: Any, dtype: Any = None, copy: bool | None = None, device: Any = None) -> LazyArray:
    """A lazy array over ``obj``; an ndarray is wrapped without a copy, as ``numpy.asarray`` does,
    and so is a device's array (CuPy's).

    A wrapped ndarray is the same memory: results not yet materialized read it when they are,
    so a later write to the ndarray is seen by them (use ``dynfuse.array`` to take a copy).
    ``device`` (``'cpu'``, ``'cuda'``, ``'cuda-emulator'``) is where the array lives: ``obj`` is
    copied there if it is elsewhere, as the array API's ``asarray`` does.
    """
    if device is not None or not isinstance(obj, (LazyArray, np.ndarray)):
        obj, copy = _placed(obj, dtype, copy, device)
    if isinstance(obj, LazyArray):
        target = obj.dtype if dtype is None else np.dtype(dtype)
        if target == obj.dtype and not copy:
            return obj
        if copy is False:
            raise ValueError("asarray: unable to avoid a copy while converting to the requested dtype")
        return record.astype(obj, target)
    if isinstance(obj, np.ndarray) and not copy:
        if dtype is None or np.dtype(dtype) == obj.dtype:
            return LazyArray(pressure.new_leaf(obj, exposed=True))
        if copy is False:
            raise ValueError("asarray: unable to avoid a copy while converting to the requested dtype")
    return LazyArray(pressure.new_leaf(np.array(obj, dtype=dtype, copy=True), exposed=False))


def _placed(obj: Any, dtype: Any, copy: bool | None, device: Any) -> tuple[Any, bool | None]:
    """``obj`` on ``device`` (None: where it is) for ``asarray``, with the ``copy`` still to make: a
    device's array wrapped, what is elsewhere copied there (a lazy array); else ``obj`` itself."""
    target = None if device is None else registry.memory_named(device, "asarray")
    if not isinstance(obj, LazyArray):
        owner = registry.owner(obj)
        if owner is not None:  # a device's array, wrapped as it is
            obj = LazyArray(pressure.new_leaf(obj, exposed=True, device=owner))
        elif target is None or target is HOST:
            return obj, copy
        else:
            _refuse_copy(copy, target)
            host = np.asarray(obj, dtype=dtype)
            return LazyArray(pressure.new_leaf(target.from_host(host), exposed=False, device=target)), None
    if target is not None and obj._node.memory is not target:
        _refuse_copy(copy, target)
        return obj.to(target), None
    return obj, copy


def _refuse_copy(copy: bool | None, target: devices.Memory) -> None:
    if copy is False:
        raise ValueError(f"asarray: unable to avoid a copy while moving to device {target.name!r}")


def array(obj: Any, dtype: Any = None, copy: bool = True, device: Any = None) -> LazyArray:
    """A lazy array holding a copy of ``obj`` (unless ``copy=False``), as ``numpy.array`` does."""
    return asarray(obj, dtype=dtype, copy=copy if copy else None, device=device)
