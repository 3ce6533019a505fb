"""Direct execution: small work on computed arrays runs NumPy at once instead of being recorded.

Laziness pays where ops fuse into kernels over enough elements. On arrays already computed and
smaller than the tier policy's limit (``tiers.direct_elements``), recording, planning and
interpreting would cost several times NumPy's own call, and no kernel would be compiled for them
anyway. So such an op is NumPy's call on the buffers, now: its result, its warnings and its errors
are NumPy's, at the caller's line, and its result is a buffer leaf (a view is registered with its
base, so writes keep NumPy's aliasing). Laziness resumes by itself: an op over a pending array, or
over more elements, is recorded. Which path an op takes depends only on the program (which arrays
are computed, and their sizes), never on timing.

Each function returns ``DECLINED`` where its op is not direct: the recorder then records it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import execute, pressure, stats, trace, views
from .devices import HOST
from .ops import Op, OpKind
from .tiers import direct_elements
from .trace import Node

# The lazy array class; ``array`` defines it and sets it here as it is imported (as in ``record``).
LazyArray: Any = None
DECLINED: Any = object()

# NumPy functions and ndarray methods that write into their first argument (besides ``out=``), as
# ``ufunc.at`` does: a call of one is a write, prepared as one.
WRITES_FIRST_ARGUMENT = frozenset(
    {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis}
    | {
        getattr(np.ndarray, name)
        for name in ("sort", "partition", "put", "resize", "setfield", "setflags", "byteswap")
    }
)

_SCALARS = (int, float, bool, complex, np.generic)
# The exact types of Python's and NumPy's numeric scalars: NumPy's own scalar math serves them
SCALARS = frozenset(
    {int, float, bool, complex}
    | {np.dtype(code).type for code in np.typecodes["All"] if np.dtype(code).kind in "biufc"}
)


def _ran_at_once() -> None:
    """An op run at once: counted, and told to a profile (``trace.profile_hook``)."""
    stats.count("direct_ops")
    if trace.profile_hook is not None:
        trace.profile_hook(1, None)


def host_value(value: Any) -> Any:
    """``value`` as NumPy takes it, if it is computed and on the host: a lazy array's buffer, an
    ndarray, a Python or NumPy scalar; ``DECLINED`` otherwise (pending, on a device, a list...)."""
    if type(value) is LazyArray:
        node = value._node
        if node.inputs or node.device is not HOST:
            return DECLINED
        return node.buffer
    if isinstance(value, (np.ndarray, *_SCALARS)):
        return value
    return DECLINED


def host_values(operands: Sequence[Any]) -> list[Any] | None:
    values = list(map(host_value, operands))
    return None if any(value is DECLINED for value in values) else values


def _elements(values: Sequence[Any]) -> int:
    """The elements of the operands broadcast together (``broadcast_size``); at once where the
    arrays among them share one shape and the rest are scalars, as most calls' operands do."""
    shapes = [getattr(value, "shape", ()) for value in values]
    shaped = [shape for shape in shapes if shape]
    if not shaped:
        return 1
    if shaped.count(shaped[0]) == len(shaped):
        return views.size_of(shaped[0])
    return broadcast_size(shapes)


def broadcast_size(shapes: Sequence[tuple[int, ...]]) -> int:
    """The elements of ``shapes`` broadcast together: an upper bound where they do not broadcast
    (NumPy's call then raises NumPy's error)."""
    ndim = max(map(len, shapes))
    extents = [1] * ndim
    for shape in shapes:
        for axis, extent in enumerate(shape, ndim - len(shape)):
            extents[axis] = max(extents[axis], extent)
    return views.size_of(extents)


def result(value: Any) -> Any:
    """NumPy's fresh result as dynfuse gives it: an array as a lazy array over its buffer; a NumPy
    scalar as it is, as NumPy gives it."""
    _ran_at_once()
    return fresh(value) if isinstance(value, np.ndarray) else value


def fresh(value: np.ndarray) -> Any:
    """A lazy array over an ndarray NumPy just made, which nothing else sees."""
    return LazyArray(Node.leaf(value, exposed=False))


def call(
    function: Callable,
    operands: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    site_records: Callable[[], bool] | None = None,
) -> Any:
    """``function`` (an elementwise op's, a reduction's or a library call's reference) run now, if
    every operand is computed on the host and their broadcast is small, and ``site_records``
    (``tiers.site_records``, where given) does not say that the program's place records it."""
    values = host_values(operands)
    if values is None or _elements(values) >= direct_elements():
        return DECLINED
    if site_records is not None and site_records():
        return DECLINED
    return result(function(*values, **(kwargs or {})))


def reduce(op: Op, value: Any, axis: Any, dtype: Any, keepdims: bool, ddof: Any) -> Any:
    """A reduction of a small computed array (or an ndarray, a scalar), by NumPy, given only the
    keywords the caller gave, as not every reduction takes every one: the ndarray's method (as
    ``x.sum()``, without the function's dispatch), a scalar's function."""
    buffer = host_value(value)
    if buffer is DECLINED or getattr(buffer, "size", 1) >= direct_elements():
        return DECLINED
    kwargs = {}
    if axis is not None:
        kwargs["axis"] = axis
    if dtype is not None:
        kwargs["dtype"] = dtype
    if keepdims:
        kwargs["keepdims"] = keepdims
    if ddof is not None:
        kwargs["ddof"] = ddof
    if isinstance(buffer, np.ndarray):
        return result(getattr(buffer, op.name)(**kwargs))
    return result(op.reference(buffer, **kwargs))


def call_into(
    function: Callable, operands: Sequence[Any], target: Any, kwargs: dict[str, Any], any_size: bool = False
) -> Any:
    """``function(..., out=target)`` run now into a computed target, after the pending nodes that
    read its memory are computed (they keep the values from before the write, as in NumPy); below
    ``direct_elements`` unless ``any_size``."""
    values = host_values(operands)
    buffer = host_value(target)
    if values is None or buffer is DECLINED:
        return DECLINED
    if not any_size and _elements([buffer, *values]) >= direct_elements():
        return DECLINED
    with execute.lock:
        execute.materialize_readers(buffer)
        function(*values, out=buffer, **kwargs)
    _ran_at_once()
    return target


def getitem(array: Any, index: Any) -> Any:
    """``array[index]`` for a computed array: NumPy's indexing, its errors too. A single element is
    read at any size (NumPy's scalar), a view only where it is small; an index of arrays (a gather,
    a mask), all computed, at any size, as NumPy copies it either way."""
    node = array._node
    limit = direct_elements()
    if node.inputs or node.device is not HOST or not limit:
        return DECLINED
    if not _is_view_index(index):
        computed = _computed_index(index)
        if computed is DECLINED or _gathers_much(node.buffer, computed, limit):
            return DECLINED
        if type(computed) is np.ndarray and computed.dtype.kind == "i" and computed.ndim and node.buffer.ndim:
            return result(np.take(node.buffer, computed, axis=0))  # NumPy's indexing, faster
        return result(node.buffer[computed])
    viewed = node.buffer[index]
    if not isinstance(viewed, np.ndarray):  # NumPy's scalar: one element, copied
        return viewed
    if viewed.size >= limit:
        return DECLINED
    return view(array, viewed, False)


def _gathers_much(buffer: np.ndarray, index: Any, limit: int) -> bool:
    """Whether ``index`` gathers (integer arrays, no mask) ``limit`` elements or more of ``buffer``:
    then it is recorded, and the kernel that consumes it reads the elements where they are. Counted
    from the shapes alone; an index NumPy refuses is left to NumPy's indexing, and its error, and so
    is one with a new axis (``record`` takes none)."""
    items = index if type(index) is tuple else (index,)
    if any(item is None for item in items):
        return False
    axes = buffer.ndim - sum(item is not Ellipsis for item in items)  # what an Ellipsis stands for
    arrays, elements, axis = [], 1, 0
    try:
        for item in items:
            if item is Ellipsis:
                elements *= math.prod(buffer.shape[axis : axis + axes])
                axis += axes
            elif isinstance(item, slice):
                elements *= len(range(*item.indices(buffer.shape[axis])))
                axis += 1
            else:
                value = item if isinstance(item, np.ndarray) else np.asarray(item)
                if value.dtype == np.bool_:
                    return False
                arrays.append(value.shape)
                axis += 1
        indexed = math.prod(np.broadcast_shapes(*arrays))
    except (IndexError, ValueError):
        return False
    return elements * indexed * math.prod(buffer.shape[axis:]) >= limit


def viewed_by_numpy(node: Node) -> bool:
    """Whether a NumPy array besides the node's own may see its buffer's memory: a view made in C
    (``_recorder``) is NumPy's view, not registered with its base, and the C recorder answers from
    the buffer's reference count. Without it, every view is registered (``view``): none is unseen."""
    return False


def view(array: Any, viewed: np.ndarray, keeps_scalar: bool = True) -> Any:
    """A lazy array over ``viewed``, a NumPy view of ``array``'s buffer, registered as a view of
    ``array``'s base as a recorded view is. A scalar's 0-d view is a scalar where ``keeps_scalar``
    (a method's: ``s.T``), an array where not (NumPy's ``s[...]``)."""
    base = array._base if array._base is not None else array
    _ran_at_once()
    made = LazyArray(
        Node.leaf(viewed, exposed=False), base, keeps_scalar and array._scalar and not viewed.ndim
    )
    base._add_view(made)
    return made


def view_op(array: Any, function: Callable, *args: Any) -> Any:
    """A view op (``reshape``, ``transpose``, ``broadcast_to``) of a small computed array, by NumPy:
    a view where NumPy gives one, a fresh array where it copies."""
    node = array._node
    limit = direct_elements()
    if node.inputs or node.device is not HOST or views.size_of(node.shape) >= limit:
        return DECLINED
    buffer = node.buffer
    made = function(buffer, *args)
    if made.size >= limit:  # broadcast to a large shape: recorded, so what reads it reads an index map
        return DECLINED
    # NumPy's view of a view has the memory's owning array as its base (where one owns it)
    if made.base is not None and (made.base is buffer or made.base is buffer.base):
        return view(array, made)
    return result(made)


def setitem(target: Any, index: Any, value: Any) -> bool:
    """``target[index] = value`` written now where the target is computed and neither index nor
    value is pending: NumPy's assignment (its casting and errors; a mask or an index array, as NumPy
    writes through it in place at any size), after the pending nodes that read the memory written
    are computed (the region a basic index picks, else the whole target). False where it is not
    direct."""
    written = host_value(value)  # first: a pending value, a statement's, declines at once
    if written is DECLINED:
        if type(value) is LazyArray or not isinstance(value, (list, tuple)):
            return False
        written = value  # a nested list of numbers, as NumPy converts it
    buffer = host_value(target)
    if buffer is DECLINED or not direct_elements():
        return False
    written_memory = buffer
    if _is_view_index(index):
        # The region written, a view: an axis added, so one element's is a view too (NumPy's
        # element alone is a scalar copy)
        written_memory = buffer[(*index, None) if type(index) is tuple else (index, None)]
    else:
        # A list may hold lazy arrays, which NumPy would compute in the middle of the write
        if any(isinstance(item, list) for item in (index if type(index) is tuple else (index,))):
            return False
        index = _computed_index(index)
        if index is DECLINED:
            return False
    with execute.lock:
        execute.materialize_readers(written_memory)
        buffer[index] = written
    return True


def _computed_index(index: Any) -> Any:
    """``index`` with each lazy array in it (a mask, an index array) replaced by its buffer; DECLINED
    where one is pending or on a device."""
    items = index if type(index) is tuple else (index,)
    items = tuple(host_value(item) if type(item) is LazyArray else item for item in items)
    if any(item is DECLINED for item in items):
        return DECLINED
    return items if type(index) is tuple else items[0]


def _is_view_index(index: Any) -> bool:
    """Whether NumPy answers ``index`` with a view or one element: integers (NumPy's too), slices,
    None and Ellipsis, alone or in a tuple."""
    for item in index if type(index) is tuple else (index,):
        kind = type(item)
        if kind is int or kind is slice or item is None or item is Ellipsis or isinstance(item, np.integer):
            continue
        return False
    return True


def library_call(op: Op, operands: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """A library call on computed operands runs now, whatever their size: NumPy computes it either
    way, and it is a barrier to fusion (a scan, which fuses, only where it is small). A fresh copy
    where NumPy's result is a view of an operand, as the recorded call's buffer would be."""
    if op.kind is not OpKind.BARRIER:
        return call(op.reference, operands, kwargs)
    values = host_values(operands)
    if values is None or not direct_elements():
        return DECLINED
    made = op.reference(*values, **kwargs)
    if (
        isinstance(made, np.ndarray)
        and made.base is not None
        and any(isinstance(value, np.ndarray) and np.may_share_memory(made, value) for value in values)
    ):
        made = made.copy()
    return result(made)


class _Declined(Exception):
    """Raised inside ``numpy_call``'s walk: an argument it does not take."""


# What ``numpy_call`` hands NumPy as it is, besides arrays and numeric scalars: these exact types,
# and classes and dtypes
_PLAIN = frozenset({str, slice, type(None), type(Ellipsis)})
_MAX_HANDED = 32  # arrays among the arguments
_MAX_ARGUMENTS = 16  # positional and keyword arguments


def numpy_call(function: Callable, args: tuple, kwargs: dict[str, Any]) -> Any:
    """``function`` (NumPy's own) run now on the buffers of the lazy arrays among its arguments (in
    lists and tuples too), where each is a small computed host array: what dynfuse's own function
    would compute, by NumPy, without its general path (or what a creation function makes).
    ``DECLINED`` for a lazy array that is pending or large, another library's array or a dict among
    the arguments, ``device=`` or ``like=``, ``out=`` while any node is pending (one might read
    it), a function that writes into an argument, and a large result made from a lazy array
    (recorded, so what reads it fuses: NumPy's function has no other effect, and the general path
    calls it again). A large result of NumPy's arrays and numbers alone (``zeros``, ``arange``) is
    final: making it again would double its cost.

    A result that is an argument's memory (``asarray``, ``atleast_1d``) or a view of it
    (``ravel``, ``split``) is that lazy array, or its view; one over an ndarray argument's memory,
    or another array's, is exposed, as that memory is; NumPy's new memory is fresh."""
    limit = direct_elements()
    if (
        not limit
        or ("out" in kwargs and not trace.nothing_pending())
        or "device" in kwargs
        or "like" in kwargs
        or _writes_argument(function)
        or len(args) + len(kwargs) > _MAX_ARGUMENTS
    ):
        return DECLINED
    handed: list[tuple[np.ndarray, Any]] = []  # (the array NumPy gets, its lazy array or None)
    try:
        call_args = [_buffer(value, handed, limit, 0) for value in args]
        call_kwargs = {name: _buffer(value, handed, limit, 0) for name, value in kwargs.items()}
    except _Declined:
        return DECLINED
    made = function(*call_args, **call_kwargs)
    large = _large(made, limit)
    if large and any(lazy is not None for _, lazy in handed):
        return DECLINED  # a lazy array's broadcast view or tiling: recorded, so what reads it fuses
    _ran_at_once()
    wrapped = _as_lazy(made, handed)
    if large:
        large_made(made)
    return wrapped


def _writes_argument(function: Callable) -> bool:
    try:
        return function in WRITES_FIRST_ARGUMENT
    except TypeError:  # an unhashable callable: not one of them, but left to the general path
        return True


def _buffer(value: Any, handed: list, limit: int, depth: int) -> Any:
    if type(value) is LazyArray:
        node = value._node
        if node.inputs or node.device is not HOST or views.size_of(node.shape) >= limit:
            raise _Declined
        value, lazy = node.buffer, value
    elif type(value) is np.ndarray:
        lazy = None
    elif type(value) in (list, tuple) and depth < 4:
        return type(value)([_buffer(item, handed, limit, depth + 1) for item in value])
    elif type(value) in SCALARS or type(value) in _PLAIN or isinstance(value, (type, np.dtype)):
        return value
    else:
        raise _Declined
    if len(handed) == _MAX_HANDED:
        raise _Declined
    handed.append((value, lazy))
    return value


def _large(made: Any, limit: int) -> bool:
    if type(made) in (list, tuple):
        return any(_large(item, limit) for item in made)
    return isinstance(made, np.ndarray) and made.size >= limit


def large_made(made: Any) -> None:
    """A large result ``numpy_call`` made of NumPy's arrays and numbers alone: its new memory counted
    toward the pending-memory check, as a creation function's (``pressure.new_leaf``)."""
    pressure.note_new_memory(_new_bytes(made))


def _new_bytes(made: Any) -> int:
    if type(made) in (list, tuple):
        return sum(_new_bytes(item) for item in made)
    return made.nbytes if isinstance(made, np.ndarray) and made.base is None else 0


def _as_lazy(made: Any, handed: list[tuple[np.ndarray, Any]]) -> Any:
    if type(made) in (list, tuple):
        return type(made)([_as_lazy(item, handed) for item in made])
    if not isinstance(made, np.ndarray):
        return made
    owner = made.base
    for array, lazy in handed:
        if made is array:
            return lazy if lazy is not None else _exposed(made)
        if owner is not None and (owner is array or (array.base is not None and owner is array.base)):
            return view(lazy, made) if lazy is not None else _exposed(made)
    if owner is not None:  # memory of another array's: whoever holds that sees writes to it
        return _exposed(made)
    return fresh(made)


def _exposed(made: np.ndarray) -> Any:
    """A lazy array over memory that code outside dynfuse may hold."""
    return LazyArray(Node.leaf(made, exposed=True))
