"""The CPU backend: each kernel as LLVM IR, optimized at O3 for the host CPU, run on all cores.

``codegen.llvm`` writes the module; ``llvm_host`` sets LLVM up, the first time a kernel is compiled
or loaded, and ``llvm_compiler`` compiles it (LLVM's new pass manager at O3 with loop and SLP
vectorization, for the host CPU's name and features; past a program's first kernels, in a child
process). This module keeps the object code in the disk cache so a later
process loads it instead of compiling, and launches it through ctypes, which releases the GIL:
large work is split across a pool of threads, one range per thread.

The generator (with llvmlite's IR builder) and the disk cache are imported where a kernel is first
generated or looked up, not with this module: ``import dynfuse`` does not pay for them. What a
launch calls is imported here, so a launch imports nothing.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import cachetools
import numpy as np

from .. import config, pools, stats
from ..devices import HOST
from ..kernel import CompiledKernel, Kernel, Target, element_strides
from ..ops import OpKind

if TYPE_CHECKING:
    import llvmlite.binding as llvm

    from ..codegen.llvm import Layout
    from .llvm_host import LlvmHost

# Work below this many elements runs on one thread: handing a range to another thread costs more
# than it saves. Measured by perf/bench_threads.py (see perf/RESULTS.md) on chains of cheap ops,
# three of cost 1 an element (``CHEAP_ELEMENT_COST``); a dearer kernel's elements count as many times
# more (``Layout.element_cost``): a float64 exp chain splits from 2^18 elements (two threads take
# 0.83x one's time there, 0.62x at 2^20), an arcsin chain from 2^16.6 (0.75x at 2^17).
PARALLEL_ELEMENTS = 1 << 21
# A split launch is cut into more ranges than threads, which each thread takes in turn as it is done
# with its last, so a thread that the system slows (another process on its core, a hypervisor's
# steal) leaves its share to the others: halves fixed in advance took 2.1 and 4.1 ms on a 2^24
# float32 chain where the same halves run together took 3.3 ms each (perf/bench_overhead.py's
# streaming rows, each contender in a process of its own). A range costs a ctypes call, ~2 µs.
PIECES_PER_THREAD = 8
PIECE_WORK = 1 << 18
CHEAP_ELEMENT_COST = 3.0
_BYTE = np.dtype(np.uint8)
_ALIGNMENT = 64  # thread ranges start on multiples of this many elements (whole cache lines)
# What each line of a kernel's IR adds to its compile, in the work of interpreting (see CpuBackend).
COMPILE_WORK_PER_LINE = 1 << 18
# The fewest lines of IR a kernel's module has: its entry's, and some for each instruction by its
# kind (``least_compile_work``). The highest such bound under every kernel that perf/bench_programs.py
# and perf/bench_overhead.py compile (518 of 2 to 1,765 instructions): they have 1.0-2.4x these
# lines, 1.2x on average.
LEAST_MODULE_LINES = 60
LEAST_LINES = {OpKind.BUFFER: 4, OpKind.SCALAR: 2, OpKind.REDUCTION: 4, OpKind.SCAN: 4}  # others: 1

# struct's format character for each dtype (kind, itemsize), in its standard sizes
_STRUCT_CODES = {
    ("b", 1): "?",
    **{("i", size): code for size, code in ((1, "b"), (2, "h"), (4, "i"), (8, "q"))},
    **{("u", size): code for size, code in ((1, "B"), (2, "H"), (4, "I"), (8, "Q"))},
    **{("f", size): code for size, code in ((2, "e"), (4, "f"), (8, "d"))},
}


def _interface_address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _data_address_reader() -> Any:
    """The fastest correct way to read an array's data pointer, which every launch does per array.

    ``__array_interface__`` builds a dict each time (about 1.5 µs). NumPy's C API reads the pointer
    from the array object, right after the object header; reading it there through ctypes costs a
    tenth of that. That layout is checked here against ``__array_interface__``, on arrays of several
    kinds, and the slow way serves wherever it does not hold.
    """
    read_pointer = ctypes.c_size_t.from_address
    header = object.__basicsize__

    def header_address(array: np.ndarray) -> int:
        return read_pointer(id(array) + header).value

    samples = [np.empty(0), np.zeros((3, 4), np.float32)[:, ::-2], np.broadcast_to(np.arange(5), (2, 5))]
    samples.append(samples[1].T)
    if all(header_address(array) == _interface_address(array) for array in samples):
        return header_address
    return _interface_address


_data_address = _data_address_reader()

# ``dynfuse._launch.KernelCall`` and ``run_ranges`` where they were built and are used: put in place
# by dynfuse.accelerate. Without ``run_ranges``, a split launch's threads are ``pools.WORKERS``.
KernelCall: Any = None
run_ranges: Any = None

_POINTER, _INDEX = ctypes.c_void_p, ctypes.c_int64
# Each takes (cells, scratch, ...): see codegen.llvm
_ENTRY = ctypes.CFUNCTYPE(None, _POINTER, _POINTER, _INDEX, _INDEX)
_PARTIAL = ctypes.CFUNCTYPE(None, _POINTER, _POINTER, _INDEX, _INDEX, _INDEX, _INDEX, _POINTER)
_FINISH = ctypes.CFUNCTYPE(None, _POINTER, _POINTER, _INDEX, _INDEX, _POINTER, _INDEX)


_llvm: LlvmHost | None = None
_setup_lock = threading.Lock()
os.register_at_fork(after_in_child=_setup_lock._at_fork_reinit)  # as execute.lock


def _host() -> LlvmHost:
    """LLVM, set up the first time a kernel is compiled or loaded: a process that never needs one
    never imports llvmlite's binding (45 ms)."""
    global _llvm
    with _setup_lock:
        if _llvm is None:
            from .llvm_host import LlvmHost

            _llvm = LlvmHost()
    return _llvm


def _ranges(count: int, parts: int) -> list[tuple[int, int]]:
    """``[0, count)`` in ``parts`` ranges of about equal size, starting on aligned elements."""
    step = -(-count // parts)
    step = -(-step // _ALIGNMENT) * _ALIGNMENT if count >= parts * _ALIGNMENT else step
    return [(start, min(start + step, count)) for start in range(0, count, step)]


class _Launcher:
    """A compiled kernel: fills the cells the module reads, and splits the work across threads."""

    def __init__(self, layout: Layout, load: Callable[..., Any]) -> None:
        from ..codegen.llvm import SCRATCH_ALIGNMENT

        self.layout = layout  # ENTRY's
        self.scratch_alignment = SCRATCH_ALIGNMENT  # the generator's, which ``scratch`` keeps
        # ``load(split)``: a module of the kernel, compiled or from the disk cache, and the engine
        # that owns its code (kept as long as this launcher): ENTRY's, or PARTIAL and FINISH's. Each
        # is loaded the first time a launch calls it.
        self.load = load
        self.entry = self.native = self.engine = self.entry_address = None
        self.split_native: tuple[int, Any] | None = None  # (threads, the C call split for them)
        self.partial = self.finish = self.split_engine = None
        self.split_scratch_bytes = 0
        self.cell_count = max(layout.param_cell + sum(use.cells for use in layout.param_uses), 1)
        # Cells packed by one struct: 8-byte pointers and strides, then each parameter in its loop
        # dtype, padded to 8 bytes (and its range flag, for a compared int); complex parameters,
        # which struct does not pack, always by ``convert_params`` (then fields is None).
        pointers = layout.inputs + layout.outputs
        address_codes = "Q" * pointers + "q" * (len(layout.strided) * layout.ndim)
        packs = all(use.dtype.kind != "c" for use in layout.param_uses)
        param_codes = "".join(
            _STRUCT_CODES[use.dtype.kind, use.dtype.itemsize] for use in layout.param_uses if packs
        )
        param_fields = "".join(
            f"{code}{8 - use.dtype.itemsize}x" + "q" * use.compared
            for code, use in zip(param_codes, layout.param_uses if packs else (), strict=True)
        )
        self.fields = struct.Struct("=" + address_codes + param_fields) if packs else None
        self.addresses = struct.Struct("=" + address_codes)  # alone: when ``convert_params`` must pack
        self.cell_type = ctypes.c_int64 * self.cell_count
        # The common case: the fields are the parameters as they come, one per slot, in order; then
        # this is their count (else -1).
        uses = layout.param_uses
        in_order = all(use.slot == slot and not use.compared for slot, use in enumerate(uses))
        self.fields_are_params = len(uses) if in_order else -1
        self.param_codes = param_codes
        self.rows = layout.extent
        self.work = _work(layout)
        # Now, what launches with the threads configured now will call: a kernel whose rows they
        # share never calls ENTRY.
        if self.shares_rows(config.threads):
            self.load_split(counted=False)
        else:
            self.load_entry(counted=False)

    def shares_rows(self, threads: int) -> bool:
        return _shares_rows(self.layout, threads)

    def native_call(self) -> Callable[[list, list, list], bool] | None:
        """The C call that runs a launch of this kernel with the threads configured now: on one
        thread, or split into the ranges ``__call__`` splits it into (not where threads share rows),
        where ``KernelCall`` packs its cells. What a launch plan in C calls from then on: the
        threads it splits for are those configured when the plan was made. The call returns False
        where it declines (a parameter it does not pack): then ``__call__`` runs."""
        if self.native is None or self.rows == 0:
            return None
        threads = config.threads
        if threads == 1 or self.work < PARALLEL_ELEMENTS:
            return self.native.run
        split = self.split_call(threads)
        return None if split is None else split.run

    def split_call(self, threads: int) -> Any:
        """``KernelCall`` over the ranges a launch on ``threads`` threads takes in turn; None where
        threads share rows, or there is no C pool of threads (``run_ranges``)."""
        if self.split_native is None or self.split_native[0] != threads:
            split = None
            if self.native is not None and run_ranges is not None and not self.shares_rows(threads):
                ranges = _ranges(self.rows, _pieces(self.work, self.rows, threads))
                bounds = (*(start for start, _ in ranges), self.rows)
                split = self.kernel_call(self.param_codes, bounds, min(threads, len(ranges)))
            self.split_native = (threads, split)
        return self.split_native[1]

    def load_entry(self, counted: bool = True) -> None:
        from ..codegen.llvm import ENTRY

        _, self.engine = self.timed_load(False, counted)
        self.entry_address = self.engine.get_function_address(ENTRY)
        self.entry = _ENTRY(self.entry_address)
        self.native = self.kernel_call(self.param_codes)

    def load_split(self, counted: bool = True) -> None:
        from ..codegen.llvm import FINISH, PARTIAL

        layout, self.split_engine = self.timed_load(True, counted)
        self.partial = _PARTIAL(self.split_engine.get_function_address(PARTIAL))
        self.finish = _FINISH(self.split_engine.get_function_address(FINISH))
        self.split_scratch_bytes = layout.scratch_bytes

    def timed_load(self, split: bool, counted: bool) -> tuple[Layout, llvm.ExecutionEngine]:
        """``load(split)``, its time ``counted`` as compile time: a load a launch asks for (the load
        in ``__init__`` is the kernel's compile, which ``cache.compiled_kernel`` counts)."""
        started = time.perf_counter()
        loaded = self.load(split)
        if counted:
            stats.count("compile_seconds", time.perf_counter() - started)
        return loaded

    def kernel_call(self, param_codes: str, bounds: tuple[int, ...] | None = None, takers: int = 1) -> Any:
        """The call done in C (``KernelCall``), where it was built and the cells are the plain case
        it packs: parameters as they come, no range flags, no half floats. ``bounds``: the starts
        of the ranges it splits a launch into, then the rows, taken by ``takers`` threads (the
        caller's and pool threads), each with a scratch of its own; one range on the caller's
        thread where not given."""
        if KernelCall is None or self.fields is None or self.fields_are_params < 0 or "e" in param_codes:
            return None
        layout = self.layout
        return KernelCall(
            entry=ctypes.cast(self.entry, ctypes.c_void_p).value,
            inputs=layout.inputs,
            outputs=layout.outputs,
            strided=tuple(layout.strided),
            ndim=layout.ndim,
            param_codes=param_codes,
            param_cell=layout.param_cell,
            cell_count=self.cell_count,
            rows=layout.extent,
            scratch_bytes=layout.scratch_bytes,
            scratch_alignment=self.scratch_alignment,
            bounds=(0, layout.extent) if bounds is None else bounds,
            takers=takers,
        )

    def cells(self, inputs: list, params: list, outputs: list) -> ctypes.Array:
        addresses = [*map(_data_address, inputs), *map(_data_address, outputs)]
        loads = len(inputs)
        for number in self.layout.strided:
            operand = inputs[number] if number < loads else outputs[number - loads]
            addresses += element_strides(operand, number)
        values = params if len(params) == self.fields_are_params else self.param_fields(params)
        cells = self.cell_type()
        if self.fields is not None:
            try:
                self.fields.pack_into(cells, 0, *addresses, *values)
                return cells
            except (struct.error, OverflowError):  # a value struct will not convert as NumPy does
                pass
        self.addresses.pack_into(cells, 0, *addresses)
        self.convert_params(cells, values)
        return cells

    def param_fields(self, params: list) -> list:
        """The parameter fields ``parameters`` packs: each value, and the range flag of compared ints."""
        values = []
        for use in self.layout.param_uses:
            value = params[use.slot]
            if use.compared:
                flag = use.range_flag(value)
                values += [0 if flag else value, flag]
            else:
                values.append(value)
        return values

    def convert_params(self, cells: ctypes.Array, values: list) -> None:
        """What ``parameters`` packs, with each value converted by NumPy instead (a float beyond
        float32's range becomes inf) and each range flag as it is."""
        raw = np.frombuffer(cells, np.uint8)
        cell = self.layout.param_cell
        fields = iter(values)
        for use in self.layout.param_uses:
            with np.errstate(all="ignore"):
                converted = np.array(next(fields), use.dtype)
            raw[8 * cell : 8 * cell + use.dtype.itemsize] = converted.reshape(1).view(np.uint8)
            if use.compared:
                cells[cell + 1] = next(fields)
            cell += use.cells

    def __call__(self, inputs: list, params: list, outputs: list) -> None:
        rows = self.rows
        if rows == 0:
            return
        threads = config.threads
        if threads == 1 or self.work < PARALLEL_ELEMENTS:
            if self.native is None or not self.native.run(inputs, params, outputs):
                if self.entry is None:
                    self.load_entry()
                cells = self.cells(inputs, params, outputs)
                scratch = self.scratch(1)
                self.entry(cells, scratch.addresses[0], 0, rows)
            return
        if self.shares_rows(threads):
            cells = self.cells(inputs, params, outputs)  # alive until the launch ends
            self.split_rows(ctypes.addressof(cells), rows, threads)
            return
        if self.entry is None:
            self.load_entry()
        split = self.split_call(threads)
        if split is not None and split.run(inputs, params, outputs):
            return
        cells = self.cells(inputs, params, outputs)
        address = ctypes.addressof(cells)
        ranges = _ranges(rows, _pieces(self.work, rows, threads))
        scratch = self.scratch(min(threads, len(ranges)))
        if run_ranges is not None:
            bounds = [start for start, _ in ranges] + [rows]
            run_ranges(self.entry_address, address, scratch.addresses, bounds)
            return
        taken = itertools.count()  # its next() is atomic: each range is run once
        pools.WORKERS.run_all(
            [_bind(_take_ranges, self.entry, address, own, ranges, taken) for own in scratch.addresses]
        )

    def split_rows(self, address: int, rows: int, threads: int) -> None:
        """Every row on several threads: partial states of each over ranges of its elements,
        combined in order."""
        if self.partial is None:
            self.load_split()
        ranges = _ranges(self.layout.row_elements, threads)
        states = np.zeros((len(ranges), rows, max(self.layout.state_cells, 1)), np.int64)
        scratch = self.scratch(len(ranges), self.split_scratch_bytes)
        calls = [
            _bind(self.partial, address, own, 0, rows, start, stop, states[part].ctypes.data)
            for part, (own, (start, stop)) in enumerate(zip(scratch.addresses, ranges, strict=True))
        ]
        pools.WORKERS.run_all(calls)
        self.finish(address, scratch.addresses[0], 0, rows, states.ctypes.data, len(ranges))

    def scratch(self, calls: int, size: int | None = None) -> _Scratch:
        """The scratch of each of ``calls`` calls that run at once, its own: where column mode holds
        a chunk's lanes, since a thread's stack may be too small for them. Memory of the host's
        (a large one pooled) and each call's address in it, None with nothing allocated for a
        kernel that needs none. ``size``: each call's bytes, if not ENTRY's."""
        size = self.layout.scratch_bytes if size is None else size
        if size == 0:
            return _Scratch(None, [None] * calls)
        alignment = self.scratch_alignment
        memory = HOST.empty((size * calls + alignment,), _BYTE)
        start = _data_address(memory)
        start += -start % alignment
        return _Scratch(memory, [start + size * call for call in range(calls)])


class _Scratch(NamedTuple):
    """Scratch addresses, and the memory they are in: the caller holds it until the calls are done."""

    memory: np.ndarray | None
    addresses: list[int | None]


def _work(layout: Layout) -> int:
    """The elements a launch goes through, weighted by their cost, as ``PARALLEL_ELEMENTS`` counts them."""
    weight = max(layout.element_cost / CHEAP_ELEMENT_COST, 1.0)
    return int(layout.extent * max(layout.row_elements, 1) * weight)


def _shares_rows(layout: Layout, threads: int) -> bool:
    """Whether threads share each row (PARTIAL, FINISH) rather than take ranges of rows (ENTRY):
    when each would not get enough rows (in column mode, whole cache lines of every row of memory
    it reads), or all rows fit one chunk of columns (then each thread reads whole rows of memory,
    in order)."""
    rows = layout.extent
    if threads == 1 or _work(layout) < PARALLEL_ELEMENTS or not layout.splittable:
        return False
    rows_per_thread = _ALIGNMENT if layout.columns else 1
    return rows < threads * rows_per_thread or rows <= layout.lanes


def _library_ops() -> frozenset[tuple[str, str]]:
    """The ops (by result dtype) NumPy's loops compute faster than the generator's code does, so
    that NumPy's loop runs them between kernels (perf/bench_functions.py): float32 sin and cos,
    which NumPy's SIMD loops compute in float32 to about 1.4 ulp and the generator in double,
    correctly rounded, at 0.6-0.7x their speed on one thread; and where NumPy has its SVML loops (on
    AVX512_SKX), tan (the generator's 0.6-0.7x theirs on one thread) and the float32 functions
    whose branch-free code, computed in double, costs several times theirs (0.7-0.9x on 2^22
    elements)."""
    slower = {("sin", "f"), ("cos", "f")}
    if np._core._multiarray_umath.__cpu_features__.get("AVX512_SKX"):
        dear = ("arcsin", "arccos", "arctan", "sinh", "arcsinh", "arctanh", "arccosh", "cbrt")
        slower |= {(name, "f") for name in dear} | {("tan", "f"), ("tan", "d")}
    return frozenset(slower)


def _bind(function: Any, *arguments: Any) -> Any:
    return lambda: function(*arguments)


def _pieces(work: float, rows: int, threads: int) -> int:
    """How many ranges a launch on ``threads`` threads is cut into: up to ``PIECES_PER_THREAD``
    each, none under ``PIECE_WORK``, each of whole cache lines where a thread's would be."""
    return max(threads, min(int(work // PIECE_WORK), threads * PIECES_PER_THREAD, rows // _ALIGNMENT))


def _take_ranges(entry: Any, address: int, scratch: Any, ranges: list, taken: Iterator[int]) -> None:
    """One thread's share of a launch: the next range no thread has taken, until none is left."""
    for index in taken:
        if index >= len(ranges):
            return
        entry(address, scratch, *ranges[index])


class CpuBackend:
    name = "cpu"
    memory = HOST
    # Measured by perf/bench_tiers.py, perf/bench_compile_cost.py and perf/bench_tier_loops.py (see
    # perf/RESULTS.md). Interpreting costs about 0.5 ns a unit of work, and a NumPy call about 4 µs
    # more on tiny arrays (the reference executor's bookkeeping included: a 10-op chain on 1,000
    # float32 is interpreted in 45 µs, a 64x64 heat step of 13 ops in 84 µs): 2**13 units an op;
    # run directly, a NumPy call costs about 1 µs (perf/bench_overhead.py): 2**11. A
    # compile costs a few ms plus 0.16 ms per line of the module's IR: 2**22 units, what a load
    # from the disk cache costs too, plus 2**18 a line (``compile_work``), from 2**24 for a short
    # chain to 2**29.5 for a kernel of hundreds of ops. A first sighting below 2**26 (a compile's
    # time, about) that does pay one is interpreted while its kernel compiles. Planning a tiny trace
    # costs about 200 µs, what four of its interpreted runs cost: after four, it is planned, and its
    # kernels compile by their work (a 10-op chain on 1,000 float32: replayed from its 43rd run where
    # its code is on disk, from its 500th where it compiles, in the background from the 250th).
    # Starting the compiler takes 59-86 ms once (five fresh processes, median 82: llvmlite's binding
    # imported and the host's target machine made 39-54 ms, the code generator imported 15-26,
    # concurrent.futures 5-8), at 0.86 ns a unit measured the same day: 3 * 2**25 units, added to
    # the first compile's cost (``start_work``). Planning a long trace costs
    # about 2**18 units a node (a 373-node Gray-Scott trace of rolls: 135-177 ms at 0.86 ns a unit;
    # a 45-node cavity step 2 ms): a trace seen once whose work is below that and a compile's
    # runs unplanned (``plan_node_work``).
    # A write's value computed into the region costs about 20 µs more in Python than a cached
    # replay in C and a copy, which that saves from about 2^16 float64 (a Jacobi statement, in
    # place against copied: 200² 73 against 64 µs, 256² 81 against 82, 300² 65 against 77, 400²
    # 92 against 122, 512² 125 against 180).
    # Ops on computed arrays below 2**16 elements run at once, by NumPy, until their site records
    # (``direct_elements``). Recorded from 2**14, a statement costs its recording and interpreted runs
    # until its kernels pay their compiles: a 161² lid-driven cavity's first run took 3-4x NumPy's
    # time, by sites 0.8-0.85x; steady, sites record its statements as fused replays at 3.5-4.3x
    # NumPy's speed against 1.5-2.0x (heat 3-D on 30³: 6.5-7.7x against 4.3-4.5x). The bound is
    # ``in_place_elements``: from there a write's value is computed into its region on a Python path
    # whose replay a site's trial does not find paying, so a site over a 400² Jacobi statement never
    # records (0.28x NumPy's speed with sites to 2**18).
    target = Target(
        name,
        tiny_elements=1 << 14,
        direct_elements=1 << 16,
        first_sight_work=1 << 22,
        start_work=3 << 25,
        plan_node_work=1 << 18,
        tiny_repeats=4,
        interpreted_op_work=1 << 13,
        direct_op_work=1 << 11,
        background_work=1 << 26,
        library_ops=_library_ops(),
        # The select of value and index that argmax and argmin carry from element to element keeps
        # the loop over a row scalar: 2^20 float32 along rows took 5 ms, NumPy's loop 0.08-0.18.
        # Across rows (axis 0 of a C-ordered matrix) the kernel takes columns in lanes, 17x NumPy.
        # In rows of a few elements NumPy's call a row costs more: ``(D * 2).argmin(axis=1)`` over
        # 2^21 float64, fused against NumPy's loop: rows of 4 4.4 against 9.4 ms, of 8 4.9
        # against 7.4, of 16 5.1 against 5.6, of 32 5.2 against 3.4, of 1024 5.4 against 1.2.
        library_row_reductions=frozenset({"argmax", "argmin"}),
        library_row_elements=24,
        in_place_elements=1 << 16,
    )

    def source(self, kernel: Kernel) -> str:
        """ENTRY's module, and, for a reduction whose rows threads may share, PARTIAL and FINISH's."""
        from ..codegen.llvm import generate

        module, layout = generate(kernel)
        if not layout.splittable:
            return str(module)
        return f"{module}\n{generate(kernel, split=True)[0]}"

    def assembly(self, kernel: Kernel) -> str:
        """ENTRY's optimized machine code, as assembly: to check what LLVM made of a kernel."""
        from ..codegen.llvm import generate

        return _host().emit(str(generate(kernel)[0]), "assembly").decode()

    def supports(self, kernel: Kernel) -> bool:
        """What the LLVM generator has code for (``codegen.llvm.supports``: complex values only in
        the ops it has their code for)."""
        from ..codegen.llvm import supports

        return supports(kernel)

    def compile(self, kernel: Kernel) -> CompiledKernel:
        return _Launcher(_module(kernel, split=False).layout, functools.partial(self.load, kernel))

    def cached(self, kernel: Kernel) -> bool:
        """Whether the module a launch with the configured threads calls is in the disk cache. An
        empty cache is seen without the key, whose host identity starts LLVM (20 ms): the first
        compile then starts it, on its own thread where a core is free."""
        from .. import disk_cache

        if not disk_cache.holds_any(self.name):
            return False
        return disk_cache.contains(self.name, self.disk_key(_launched_module(kernel).text))

    def keeps_code(self) -> bool:
        from .. import disk_cache

        return disk_cache.holds_earlier(self.name)

    def compile_work(self, kernel: Kernel) -> float:
        """What compiling the module a launch with the configured threads calls costs, in the work
        of interpreting: LLVM's time grows with the lines of IR it optimizes and emits."""
        lines = _launched_module(kernel).text.count("\n")
        return self.target.first_sight_work + COMPILE_WORK_PER_LINE * lines

    def least_compile_work(self, kernel: Kernel) -> float:
        """``compile_work`` at the least, from the kernel's instructions alone (no code generated): a
        module has its entry's lines and some for each instruction, by kind."""
        lines = LEAST_MODULE_LINES + sum(LEAST_LINES.get(inst.op.kind, 1) for inst in kernel.instructions)
        return self.target.first_sight_work + COMPILE_WORK_PER_LINE * lines

    def variant(self) -> None:
        """One host per process: its code depends on the host alone (``disk_key``)."""
        return None

    def disk_key(self, text: str) -> str:
        """The disk-cache key of a module: the code itself (a change to the code generator is a
        miss) and what its object code depends on."""
        from .. import disk_cache

        return disk_cache.key_of(self.name, text, _host().identity)

    def load(self, kernel: Kernel, split: bool) -> tuple[Layout, llvm.ExecutionEngine]:
        """One module of ``kernel`` loaded: from the disk cache, or compiled and stored there."""
        from .. import disk_cache

        host = _host()
        module = _module(kernel, split)
        key = self.disk_key(module.text)
        object_code = disk_cache.load(self.name, key)
        if object_code is None:
            object_code = host.emit(module.text, "object")
            disk_cache.store(self.name, key, object_code)
        with host.lock:
            engine = host.load(object_code)
        return module.layout, engine


class _Module(NamedTuple):
    text: str  # the IR
    layout: Layout


# Modules generated lately, by kernel signature and part: ``cached`` generates the module a launch
# would call, to look for it on disk, and the compile or load that follows reads it from here. A
# few kernels' worth: nothing holds a kernel's IR for as long as the kernel is cached.
_modules: cachetools.LRUCache = cachetools.LRUCache(maxsize=64)
_modules_lock = threading.Lock()
os.register_at_fork(after_in_child=_modules_lock._at_fork_reinit)  # as execute.lock


def _launched_module(kernel: Kernel) -> _Module:
    """The module a launch with the configured threads calls: ENTRY's, or PARTIAL and FINISH's."""
    return _module(kernel, _shares_rows(_module(kernel, split=False).layout, config.threads))


def _module(kernel: Kernel, split: bool) -> _Module:
    """ENTRY's module of ``kernel``, or (``split``) PARTIAL and FINISH's."""
    key = (kernel.signature, split)
    with _modules_lock:
        found = _modules.get(key)
    if found is None:
        from ..codegen.llvm import generate

        module, layout = generate(kernel, split)
        found = _Module(str(module), layout)
        with _modules_lock:
            _modules[key] = found
    return found


BACKEND = CpuBackend()
