"""Dask arrays whose chunks are dynfuse lazy arrays: each task's work on its chunk is one fused plan.

Dask splits an array into chunks, and fuses blockwise layers (elementwise ops, and a reduction's
chunk step) into one task per chunk; inside that task it still calls NumPy op by op, with a
temporary per op. On dynfuse chunks those calls record instead, and each task's result is
materialized at the task's end, in one plan: dynfuse's kernels read the chunk once and write the
result once. Dask's combine and aggregate steps run the same way, on the chunks' results.

    import dask.array as da
    import dynfuse.dask

    x = dynfuse.dask.from_dask(da.random.random((200_000, 1_000), chunks=(20_000, 1_000)))
    shifted = da.exp(x - x.max(axis=1, keepdims=True))
    softmax = shifted / shifted.sum(axis=1, keepdims=True)
    result = dynfuse.dask.to_numpy_chunks(softmax).compute()  # NumPy arrays again

Importing this module sets Dask up (in the program, and in each worker as it loads a task that
names this module): ``LazyArray`` becomes a chunk type Dask's arrays dispatch to, its size is its
``nbytes`` for Dask's memory accounting, and the ``array_optimize`` hook wraps every task so that
the lazy arrays it returns are materialized before it ends (a task's result that stayed lazy would
be computed wherever it is next read: on the worker's event loop while it is sent, or by the whole
graph at once in the client). Workers compile each kernel once, and workers on one machine share
the disk cache of compiled kernels. Chunks on a device (CuPy's arrays) become lazy arrays on that
device (``asarray`` wraps them), so each task's plan runs on the device's backend.
"""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np
from dask._task_spec import Task
from dask.array.dispatch import percentile_lookup, to_numpy_dispatch
from dask.array.optimization import optimize as _dask_optimize
from dask.sizeof import sizeof

from .array import LazyArray, asarray
from .record import evaluate

__all__ = ["from_dask", "to_numpy_chunks"]


def from_dask(array: da.Array) -> da.Array:
    """``array`` with each chunk a dynfuse lazy array: what Dask does to it next is recorded in each
    task and materialized at the task's end, in one plan."""
    return array.map_blocks(asarray, dtype=array.dtype, meta=_lazy_meta(array.ndim, array.dtype))


def to_numpy_chunks(array: da.Array) -> da.Array:
    """``array`` with each chunk a NumPy array again (each lazy chunk materialized in its task)."""
    return array.map_blocks(np.asarray, dtype=array.dtype, meta=np.empty((0,) * array.ndim, array.dtype))


def _lazy_meta(ndim: int, dtype: np.dtype) -> LazyArray:
    """What Dask keeps to know a chunk's type without a chunk: an empty lazy array."""
    return asarray(np.empty((0,) * ndim, dtype))


def materialized(result: Any) -> Any:
    """A task's ``result``, its lazy arrays materialized (together, in one plan): also those in the
    tuples, lists and dicts that Dask's reductions pass between their steps."""
    found: list[LazyArray] = []
    pending = [result]
    while pending:
        value = pending.pop()
        if isinstance(value, LazyArray):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
    if found:
        evaluate(*found)
    return result


def optimize(graph: Any, keys: Any, **kwargs: Any) -> dict:
    """Dask's array optimization (blockwise fusion, culling), then every task wrapped in
    ``materialized``: each task's lazy results are computed in the task, on the worker's thread."""
    optimized = dict(_previous_optimize(graph, keys, **kwargs))
    return {
        key: Task(key, materialized, node) if isinstance(node, Task) else node
        for key, node in optimized.items()
    }


def _to_numpy(array: LazyArray, **kwargs: Any) -> np.ndarray:
    return np.asarray(array)


def _percentile(array: LazyArray, q: Any, method: str = "linear") -> Any:
    return percentile_lookup.dispatch(np.ndarray)(np.asarray(array), q, method)


# Dask's array optimization as it was before this module (a user's own, or Dask's); on a reload,
# the one found the first time.
_previous_optimize = dask.config.get("array_optimize", None)
if _previous_optimize is None or getattr(_previous_optimize, "__module__", None) == __name__:
    _previous_optimize = _dask_optimize
da.register_chunk_type(LazyArray)
sizeof.register(LazyArray)(lambda array: int(array.nbytes))
to_numpy_dispatch.register(LazyArray)(_to_numpy)
percentile_lookup.register(LazyArray)(_percentile)
dask.config.set(array_optimize=optimize)
