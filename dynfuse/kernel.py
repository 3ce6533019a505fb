"""The kernel description: what the scheduler hands to a backend, and all a backend reads.

A kernel iterates over one ``shape``. When it reduces, ``reduce_axes`` are the axes it reduces
over: the kernel then works row by row (a row is everything along the reduced axes for one index
of the others), in one or more passes over each row. Its body is a list of instructions in SSA
form, each numbered by its position:

- ``load``: input array ``slot``, already laid out by the executor as an array of ``shape`` (any
  strides, zero along broadcast axes, negative for flips), so views cost nothing here. Its params
  say how it reads memory: ``broadcast`` (the axes it is constant along), ``contiguous`` (C order
  over the whole shape), ``zero_dim`` (its source is 0-d: one value for the whole kernel),
  ``fastest`` (the axis along which it steps through memory fastest, None for one value) and
  ``wraps`` (a rolled read: (axis, start, modulus) for each axis read at (i + start) % modulus,
  past the array's extent along it up to ``modulus``). A gathering load (``x[idx]``, ``take``)
  has ``gather``, an (element stride, extent) per argument: each argument, an integer value,
  moves the read by its value (plus the extent where it is negative, as NumPy's indices count
  from the end) times the stride; its array is laid out at the index 0 of those axes;
- ``param``: weak Python scalar ``slot`` of Python ``type`` (bool, int or float), passed at launch:
  ``x * 2`` and ``x * 3`` are one kernel;
- an elementwise op of the op table, on earlier values;
- a reduction over ``reduce_axes`` of an earlier value;
- a scan (``cumsum``) along ``reduce_axes`` (then its one axis) of an earlier value: per element,
  each the last one combined with the operand there, computed in its operand's pass as the pass
  goes along the row in order.

Each value is either per element (``row=False``) or per row (``row=True``: it does not vary along
the reduced axes: reductions, and loads and arithmetic that only see per-row values). ``stage``
is how many passes over the row must finish before the value exists: a per-element value of stage
``s`` is computed during pass ``s``, a per-row value of stage ``s`` between passes ``s - 1`` and
``s``, and a reduction of a stage-``s`` value accumulates during pass ``s`` and has stage ``s + 1``.
Softmax over rows is one kernel of three passes (max; sum of exp; write), each row read three times
while it stays in cache, written once.

Outputs are per element (an array of ``shape``) or per row (``shape`` with the reduced axes of
extent 1), fresh C-contiguous arrays, or for a ``strided`` output an array the caller gives with
any strides (the region a write names, which the kernel then writes in place: no temporary, no
copy). A backend computes exactly what NumPy computes, op by op, in these dtypes.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from . import ops
from .devices import Memory
from .ops import Op, OpKind

Shape = tuple[int, ...]

LOAD = ops.BUFFER  # the op of a load instruction: a buffer read
PARAM = ops.SCALAR  # the op of a scalar parameter


class Signature:
    """A structure as a cache key whose hash is computed once: plans and kernels are looked up by
    signature on every materialization, and a nested tuple would be hashed again on each lookup."""

    __slots__ = ("_hash", "value")

    def __init__(self, value: tuple) -> None:
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return isinstance(other, Signature) and self._hash == other._hash and self.value == other.value

    def __repr__(self) -> str:
        return f"Signature({self.value!r})"


@dataclass(frozen=True)
class Instruction:
    op: Op
    args: tuple[int, ...]  # numbers of earlier instructions
    params: tuple  # the op's static params; for loads and parameters, ``slot`` and the layout or type
    dtype: np.dtype | None  # None for a weak scalar parameter
    row: bool
    stage: int

    @property
    def slot(self) -> int:
        return dict(self.params)["slot"]

    def text(self, number: int) -> str:
        where = "row" if self.row else "elem"
        kind = self.op.kind
        if kind is OpKind.BUFFER:
            wraps = dict(self.params).get("wraps", ())
            call = f"load in{self.slot}" + "".join(
                f", axis {axis} at (i + {start}) % {modulus}" for axis, start, modulus in wraps
            )
            gather = dict(self.params).get("gather", ())
            call += "".join(
                f", moved by v{arg} * {stride} (of {extent})"
                for arg, (stride, extent) in zip(self.args, gather, strict=True)
            )
        elif kind is OpKind.SCALAR:
            call = f"param p{self.slot} ({dict(self.params)['type']})"
        else:
            arguments = ", ".join(f"v{arg}" for arg in self.args)
            extra = "".join(f", {key}={value}" for key, value in self.params)
            call = f"{self.op.name}({arguments}{extra})"
        dtype = "weak scalar" if self.dtype is None else str(self.dtype)
        return f"v{number} = {call} -> {dtype}  [{where}, stage {self.stage}]"


@dataclass(frozen=True)
class Output:
    value: int  # the instruction whose value is written
    row: bool  # per row: written once per row, into an array with the reduced axes of extent 1
    dtype: np.dtype
    strided: bool = False  # written through strides read at launch, into the array the caller gives


@dataclass(frozen=True)
class Kernel:
    shape: Shape
    reduce_axes: tuple[int, ...]
    instructions: tuple[Instruction, ...]
    outputs: tuple[Output, ...]
    signature: Signature = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        body = tuple(
            (inst.op.name, inst.args, inst.params, inst.dtype, inst.row, inst.stage)
            for inst in self.instructions
        )
        outputs = tuple((out.value, out.row, out.dtype, out.strided) for out in self.outputs)
        object.__setattr__(self, "signature", Signature((self.shape, self.reduce_axes, body, outputs)))

    @property
    def inputs(self) -> list[Instruction]:
        return [inst for inst in self.instructions if inst.op is LOAD]

    @functools.cached_property
    def contiguous_loads(self) -> tuple[bool, ...]:
        """Per load slot: whether the kernel was built to read it C-contiguous."""
        return tuple(dict(inst.params)["contiguous"] for inst in self.inputs)

    def storing_into(self, position: int) -> Kernel:
        """This kernel with output ``position`` written into an array the launch gives (strided)."""
        variants = self.__dict__.setdefault("_variants", {})
        if position not in variants:
            outputs = list(self.outputs)
            outputs[position] = dataclasses.replace(outputs[position], strided=True)
            variants[position] = Kernel(self.shape, self.reduce_axes, self.instructions, tuple(outputs))
        return variants[position]

    @functools.cached_property
    def output_layouts(self) -> tuple[tuple[Shape, np.dtype], ...]:
        """The shape and dtype of each output array, in order."""
        return tuple((self.output_shape(output), output.dtype) for output in self.outputs)

    @property
    def passes(self) -> int:
        """Passes over each row; 1 for a kernel that does not reduce or only needs one."""
        stages = [inst.stage for inst in self.instructions if not inst.row]
        stages += [inst.stage - 1 for inst in self.instructions if inst.op.kind is OpKind.REDUCTION]
        stages += [self.instructions[out.value].stage for out in self.outputs if not out.row]
        return 1 + max(stages, default=0)

    @property
    def row_shape(self) -> Shape:
        """The shape of a per-row value: ``shape`` with the reduced axes of extent 1."""
        return tuple(1 if axis in self.reduce_axes else extent for axis, extent in enumerate(self.shape))

    def output_shape(self, output: Output) -> Shape:
        return self.row_shape if output.row else self.shape

    def text(self) -> str:
        lines = [inst.text(number) for number, inst in enumerate(self.instructions)]
        lines += [
            f"out{position} <- v{out.value} ({'row' if out.row else 'elem'} {out.dtype}"
            f"{', strided' if out.strided else ''})"
            for position, out in enumerate(self.outputs)
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class Target:
    """What the scheduler knows of a backend: a few measured numbers, no code."""

    name: str
    # Rows up to this many elements keep a reduction and its consumers in one kernel of several
    # passes (the row stays in cache, or in one GPU block); longer rows split it into kernels.
    persistent_row_elements: int = 32768
    # Kernels with fewer elements always run interpreted: a compiled launch would not be faster.
    tiny_elements: int = 0
    # Ops on computed host arrays of fewer elements (at least ``tiny_elements``) run at once, by
    # NumPy, unless the place in the program that calls them records (a site, ``tiers``): a loop's
    # statement records once a trial shows its compiled replay pays, a one-off costs NumPy's call.
    direct_elements: int = 0
    # The least that getting a kernel's code costs, in the work of interpreting it: loading it where
    # the backend keeps it, or the fixed part of a compile (``Backend.compile_work`` says what the
    # whole compile costs). A kernel runs interpreted until the work of its signature's runs reaches
    # what getting its code costs, then compiles or loads it (at once if one run's work does).
    # Work: the elements of each fused op (of a reduction's operand), times the op's cost (an add 1,
    # an exp 10), in units of 4 bytes (float64 counts twice). Interpreting costs a NumPy pass per
    # op, and compiling grows far slower with the ops: a long chain over a few million elements pays
    # at once.
    first_sight_work: int = 0
    # What starting the backend's compiler costs, paid once in a process, by its first compile:
    # added to the first kernel's code cost, so a short program does not compile what its
    # interpreted run would finish before the compiler is up.
    start_work: int = 0
    # What planning a trace costs a node of it: a kernel comes only from a plan, so a trace seen the
    # first time whose whole work is less than planning it and the least code costs runs unplanned
    # (``tiers.unplanned_first_sight``; 0: planning counted free).
    plan_node_work: int = 0
    # A kernel the tier policy compiles, on its first sighting that does less work than this, runs
    # interpreted that time while it compiles on a thread of its own (0: never; a backend whose
    # compile is cheap); later sightings wait for the compile. Interpreting work below about one
    # compile's time then hides the compile behind it, on another core.
    background_work: int = 0
    # A trace of tiny kernels seen this many times is planned after all (0: never), and its kernels
    # then compile by the rule every kernel follows (the work interpreted reaches the code's cost):
    # replayed, one launch costs less than NumPy's calls. Its interpreted runs pay for the plan.
    tiny_repeats: int = 0
    # What the reference executor's call of one op costs besides its elements' work: NumPy's
    # dispatch and the executor's own bookkeeping, in the same units. On tiny arrays it is all
    # that interpreting costs, and what a compiled launch saves.
    interpreted_op_work: int = 0
    # What NumPy's call of one op costs run directly (``direct``) besides its elements' work: the
    # work a site's direct run of an op is credited with (``tiers.kernel_tier``).
    direct_op_work: int = 0
    # The cost of computing one unit of op cost (an add), in loads or stores of one element: about
    # 1 where arithmetic is as dear as memory traffic, far less on a GPU. The scheduler weighs
    # recomputing a shared node in several kernels against storing it once with this.
    compute_weight: float = 1.0
    # Elementwise ops the backend's kernels compute slower than NumPy's own loop does (a scalar
    # libm call where NumPy's loop is vectorized), as (op name, result dtype char): each runs as a
    # library call between kernels, on stored operands, so a plan is never slower than NumPy's op
    # for it (perf/bench_functions.py measures them).
    library_ops: frozenset[tuple[str, str]] = frozenset()
    # Reductions (by name, of an axis named by ``axis``) the backend's kernels compute slower than
    # NumPy's loop where they reduce their operand's last axis: each then runs as a library call
    # on its stored operand; across that axis a kernel still takes it.
    library_row_reductions: frozenset[str] = frozenset()
    # ... in rows of at least this many elements: NumPy's loop costs a call a row
    library_row_elements: int = 0
    # From how many elements a write's value is computed straight into the written region by a
    # kernel writing an output through strides given at launch (``Output.strided``), rather than
    # into a fresh array copied in (0: never). The copy saved must outweigh what the direct store's
    # run costs more than a cached replay's.
    in_place_elements: int = 0
    # Whether the backend's kernels read host arrays from copies in its own memory (a device's):
    # each copy is C-contiguous whatever the host array's layout (``Memory.from_host``), and plans
    # lay such a leaf out so.
    copies_host_arrays: bool = False

    def __hash__(self) -> int:  # part of every plan-cache key: cheaper than hashing every field
        return hash(self.name)


# A compiled kernel: ``run(inputs, params, outputs)``, inputs as arrays of the kernel's shape,
# params as the Python scalars, outputs as the arrays it fills (fresh C-contiguous ones, or for a
# strided output the array the caller gives).
CompiledKernel = Callable[[Sequence[Any], Sequence[Any], Sequence[Any]], None]


def element_strides(array: Any, slot: int) -> list[int]:
    """Operand ``slot``'s strides in elements, as a strided load or output takes them (NumPy's or
    CuPy's array)."""
    if any(stride % array.itemsize for stride in array.strides):
        raise ValueError(f"operand {slot} has strides {array.strides} that are not whole elements")
    return [stride // array.itemsize for stride in array.strides]


class Backend(Protocol):
    """Turns kernel descriptions into code. It knows nothing of traces or lazy arrays."""

    name: str
    target: Target
    memory: Memory  # where its kernels read and write (``devices``)

    def source(self, kernel: Kernel) -> str:
        """The generated source of ``kernel``, as text (no compiler needed)."""
        ...

    def supports(self, kernel: Kernel) -> bool:
        """Whether ``compile`` can build this kernel; one it cannot runs interpreted, silently."""
        ...

    def compile(self, kernel: Kernel) -> CompiledKernel: ...

    def cached(self, kernel: Kernel) -> bool:
        """Whether this kernel's code is kept from an earlier compile (on disk), so that compiling
        it only loads that: then it is not worth compiling in the background."""
        ...

    def keeps_code(self) -> bool:
        """Whether any code may be kept from other processes' compiles: a first look that generates
        no code (where it says no, ``cached`` says no for every kernel this process has not compiled,
        and those it keeps in memory)."""
        ...

    def compile_work(self, kernel: Kernel) -> float:
        """What compiling this kernel costs, in the work of interpreting it (``Target``): at least
        ``target.first_sight_work``."""
        ...

    def least_compile_work(self, kernel: Kernel) -> float:
        """A bound under ``compile_work`` said without generating any code, which that may do."""
        ...

    def variant(self) -> Hashable:
        """What compiled code depends on besides the kernel (the GPU it runs on); compiled kernels
        are cached per signature and variant."""
        ...
