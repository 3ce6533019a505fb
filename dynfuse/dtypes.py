"""NumPy 2 dtype promotion (NEP 50) and casting, decided by NumPy itself.

Promotion rules are subtle (weak Python scalars, value-based overflow errors for Python ints,
comparisons that accept out-of-range ints, per-ufunc loops such as ``sqrt(int8) -> float16``).
Rather than re-deriving them, an op's result dtype is found by running its NumPy reference on
one-element probe arrays of the operand dtypes, with the weak scalars themselves. That gives the
exact result dtype and raises the exact exception NumPy would, at the line that records the op.
Results are cached per (op, params, operand dtypes), so a probe runs once per signature.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .ops import Op

# In NumPy's order of kinds and sizes.
REAL_DTYPES: tuple[np.dtype, ...] = tuple(
    np.dtype(name)
    for name in "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64".split()  # noqa: SIM905
)
COMPLEX_DTYPES = (np.dtype(np.complex64), np.dtype(np.complex128))
SUPPORTED_DTYPES = REAL_DTYPES + COMPLEX_DTYPES
_SUPPORTED = frozenset(SUPPORTED_DTYPES)

WEAK_SCALAR_TYPES = (bool, int, float, complex)


def is_supported(dtype: np.dtype) -> bool:
    return dtype in _SUPPORTED


def is_weak_scalar(value: Any) -> bool:
    """Python scalars are weak under NEP 50; NumPy scalars (even ``np.float64``, a float subclass) are not."""
    return isinstance(value, WEAK_SCALAR_TYPES) and not isinstance(value, np.generic)


def scalar_key(value: Any) -> Any:
    """The part of a weak scalar that can change the result dtype or raise.

    Only Python ints matter by value (out of range for the array dtype, negative powers of
    integers); every int in [0, 127] fits every integer dtype and behaves alike.
    """
    if type(value) is int and not 0 <= value <= 127:
        return (int, value)
    return type(value)


_probe_arrays: dict[tuple[np.dtype, tuple[int, ...]], np.ndarray] = {}


def _ones(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    key = (dtype, shape)
    probe = _probe_arrays.get(key)
    if probe is None:
        probe = np.ones(shape, dtype)
        probe.flags.writeable = False
        _probe_arrays[key] = probe
    return probe


def _run_probe(op: Op, operands: list[Any], params: dict[str, Any], quiet_warnings: bool) -> np.ndarray:
    with np.errstate(all="ignore"):
        if quiet_warnings:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = op.reference(*operands, **params)
        else:
            result = op.reference(*operands, **params)
    return np.asarray(result)


class _BoundedCache(dict):
    """A dict emptied when full. Keys may hold values (a Python int beyond [0, 127]) and params (a
    reshape's shape), so a long program would otherwise grow it without end; a probe costs
    microseconds, so starting afresh now and then costs nothing measurable. Not an LRU: a lookup is
    on the recording path, where a plain dict's ``get`` is all it may cost."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: Any, value: Any) -> None:
        if len(self) >= self.limit:
            self.clear()
        super().__setitem__(key, value)


_result_dtypes: _BoundedCache = _BoundedCache(limit=1 << 14)


def result_dtype(
    op: Op, operands: list[tuple[np.dtype | None, Any]], params: tuple, empty: bool = False
) -> np.dtype:
    """The dtype NumPy gives ``op`` on these operands, or the exception NumPy raises.

    ``operands`` are (dtype, None) for arrays and (None, value) for weak Python scalars. An
    ``empty`` result is probed on empty arrays: NumPy's loop then meets no value to refuse
    (``x ** -1`` of an empty integer array).
    """
    described = [dtype if dtype is not None else scalar_key(value) for dtype, value in operands]
    key = (op, params, empty, *described)
    dtype = _result_dtypes.get(key)
    if dtype is None:
        shape = (0,) if empty else (1, 1)
        probes = [_ones(dtype, shape) if dtype is not None else value for dtype, value in operands]
        dtype = _run_probe(op, probes, dict(params), quiet_warnings=False).dtype
        _result_dtypes[key] = dtype
    return dtype


def reduction_dtype(op: Op, dtype: np.dtype, shape: tuple[int, ...], params: tuple) -> np.dtype:
    """The dtype of a reduction, or NumPy's exception (an empty ``max`` raises here, not later).

    Probing needs the operand's rank for its axes; a size-0 operand is probed at its real
    (free) shape, because which reductions of empty arrays raise depends on the shape.
    """
    empty = 0 in shape
    key = (op, params, dtype, len(shape))
    cached = None if empty else _result_dtypes.get(key)
    if cached is not None:
        return cached
    probe = np.empty(shape, dtype) if empty else _ones(dtype, (1,) * len(shape))
    # Warnings about the probe's own values (ddof >= 1 element) would be noise; the composite
    # reductions warn about the real shape themselves.
    result = _run_probe(op, [probe], dict(params), quiet_warnings=True).dtype
    if not empty:
        _result_dtypes[key] = result
    return result


def barrier_dtype(
    op: Op, operands: list[tuple[np.dtype, int]], params: tuple, out_dtype: np.dtype | None = None
) -> np.dtype:
    """The dtype of a library call on arrays of these (dtype, rank), or NumPy's exception; with
    ``out_dtype``, also NumPy's exception if the result may not be written into such an array.

    The probes have one element along each axis, so only dtypes, ranks and params decide (the
    shape errors are the shape rule's, raised before).
    """
    key = (op, params, out_dtype, *operands)
    dtype = _result_dtypes.get(key)
    if dtype is None:
        probes = [_ones(operand_dtype, (1,) * rank) for operand_dtype, rank in operands]
        result = _run_probe(op, probes, dict(params), quiet_warnings=True)
        if out_dtype is not None:
            out = np.ones(result.shape, out_dtype)
            _run_probe(op, probes, {**dict(params), "out": out}, quiet_warnings=True)
        dtype = _result_dtypes[key] = result.dtype
    return dtype


_allowed_output_casts: set[tuple] = set()


def check_output_cast(
    op: Op, operands: list[tuple[np.dtype | None, Any]], params: tuple, out_dtype: np.dtype
) -> None:
    """Raise NumPy's exception if the result of ``op`` may not be written into an ``out_dtype`` array.

    Ufuncs cast their output with the 'same_kind' rule unless told otherwise; asking the ufunc
    itself keeps the exception type and message exactly NumPy's.
    """
    key = (op, params, out_dtype, *[d if d is not None else scalar_key(v) for d, v in operands])
    if key in _allowed_output_casts:
        return
    probes = [_ones(dtype, (1, 1)) if dtype is not None else value for dtype, value in operands]
    out = np.ones((1, 1), out_dtype)
    with np.errstate(all="ignore"):
        op.reference(*probes, out=out, **dict(params))
    _allowed_output_casts.add(key)


def check_cast(from_dtype: np.dtype, to_dtype: np.dtype, casting: str) -> None:
    if not np.can_cast(from_dtype, to_dtype, casting=casting):
        raise TypeError(
            f"Cannot cast array data from {from_dtype!r} to {to_dtype!r} according to the rule {casting!r}"
        )
