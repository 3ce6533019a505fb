"""Nodes of the recorded DAG, and the walks over it.

A node is an op applied to input nodes, with static params (hashable: they belong to the
structure of the trace, not to its data) and the shape and dtype known when it was recorded.
Leaves are BUFFER nodes (an ndarray) and SCALAR nodes (a weak Python scalar, a parameter rather
than data, so a changing scalar does not change the trace's structure). Materializing a node turns
it into a BUFFER leaf in place: every node that reads it now reads the buffer, and the graph above
it is released. Walks are iterative, so no trace depth can reach Python's recursion limit.
"""

from __future__ import annotations

import itertools
import operator
import os
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from . import host_pool, ops, stats
from .devices import HOST, Memory
from .float_errors import current as current_errstate
from .ops import Op, OpKind

# A structure larger than this (in leaf occurrences plus interior ancestors) gets no replay key:
# the leaves and ancestors of traces that share subexpressions grow with every path through them.
REPLAY_KEY_LIMIT = 128

# Structures interned as ints, so a node's structure is one small tuple of its op, params and its
# inputs' ids, hashed and compared in constant time. Ids are never reused: when the table is full it
# starts afresh, and a structure seen again then gets a new id (a replay miss, never a wrong match).
STRUCTURE_TABLE_LIMIT = 1 << 16
_structure_ids: dict[Hashable, int] = {}
_new_structure_id = itertools.count(1).__next__


def structure_id(description: Hashable) -> int:
    """The id of a structure: equal ids, equal structures."""
    found = _structure_ids.get(description)
    if found is None:
        if len(_structure_ids) >= STRUCTURE_TABLE_LIMIT:
            _structure_ids.clear()
        found = _structure_ids[description] = _new_structure_id()
    return found


# The op of a group (``Node.group``): nodes materialized together, as the replay cache sees them
GROUP = Op("materialized together", OpKind.BARRIER)


def replay_key(backend: Hashable, node: Node) -> tuple | None:
    """What identifies a node's trace to the replay cache: the backend (its name; with a device's,
    its GPU too), the structure recorded with the node, and which of its leaf positions hold the same
    leaf. None once an ancestor was materialized: the structure no longer says what the node computes."""
    if node.key is None or not all(map(_inputs, node.ancestors)):
        return None
    return (backend, node.key, first_positions(node.leaves))


def first_positions(nodes: tuple[Node, ...]) -> tuple[int, ...]:
    """Where each of ``nodes`` first appears among them: which positions hold the same node."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(id(node), position) for position, node in enumerate(nodes))


_inputs = operator.attrgetter("inputs")


# A profile's hook (``dynfuse.profiler``, set by ``accelerate.set_profile_hook``): told of each op
# recorded, (0, its node), and each run at once, (1, None); None while nothing is profiled.
profile_hook: Callable[[int, Any], None] | None = None


class Node:
    """One recorded op, or a leaf.

    Besides the graph, a node carries what lets a repeated trace skip planning (see
    ``execute.materialize``), built as it is recorded, so nothing walks the trace again:
    - ``key``: the id (``structure_id``) of its structure: ops, params and leaf descriptions (dtype,
      shape and layout of buffers, type of scalars); None past ``REPLAY_KEY_LIMIT``;
    - ``leaves``: the leaf under each leaf position of ``key``, in order (a leaf read twice is there
      twice: which positions hold the same leaf is part of the lookup); empty for a leaf itself;
    - ``ancestors``: the interior nodes under it. Once one of them is materialized, the structure no
      longer says what this node computes (the leaves it started from may since have changed).

    ``device`` is the memory its value lives in (``devices``): its inputs', which must agree; None
    for a weak scalar, or a NumPy scalar converted, which go with any device.

    ``errstate`` is NumPy's floating-point error state when the op was recorded
    (``float_errors.current``), under which it runs through NumPy and a kernel's flags are heeded;
    None for a leaf.
    """

    __slots__ = (
        "__weakref__",
        "ancestors",
        "buffer",
        "depth",
        "device",
        "dtype",
        "errstate",
        "exposed",
        "inputs",
        "key",
        "leaves",
        "op",
        "params",
        "shape",
    )

    def __init__(
        self, op: Op, inputs: tuple[Node, ...], params: tuple, shape: tuple[int, ...], dtype: np.dtype | None
    ) -> None:
        self.op = op
        self.inputs = inputs
        self.params = params
        self.shape = shape
        self.dtype = dtype
        self.buffer: Any = None
        self.exposed = False
        self.errstate = current_errstate()  # NumPy's, where this op runs through NumPy
        # This runs once per recorded op: loops without generators, tuples joined in C, no calls
        # but the one that interns the structure.
        depth = 0
        device = None
        description: list[Any] = [op, params]
        leaves: tuple[Node, ...] = ()
        ancestors: tuple[Node, ...] = ()
        for node in inputs:
            if node.depth >= depth:
                depth = node.depth + 1
            if node.device is not device and node.device is not None:
                if device is not None:
                    mixed_devices(op, inputs)
                device = node.device
            description.append(node.key)
            if node.inputs:
                leaves += node.leaves
                ancestors += node.ancestors
                ancestors += (node,)
            else:  # a leaf does not list itself: that would be a cycle, kept alive until a GC pass
                leaves += (node,)
        self.depth = depth
        self.device = device
        if None in description or len(leaves) + len(ancestors) > REPLAY_KEY_LIMIT:
            self.key, self.leaves, self.ancestors = None, (), ()
        else:
            self.key, self.leaves, self.ancestors = structure_id(tuple(description)), leaves, ancestors
        if inputs:
            try:
                recording = _thread.recording
            except AttributeError:
                recording = _pending.start_thread()
            recording.refs.append(weakref.ref(self))
            recording.counters["ops_recorded"] += 1
            if len(recording.refs) >= recording.sweep_at:
                recording.sweep()
            if profile_hook is not None:
                profile_hook(0, self)

    def read_back(self, array: Any) -> None:
        """Stand for a copy of ``array``, the host memory this pending node's value was written
        into (``execute.materialize_into``): still pending, now a cast reading a leaf of that
        memory, so that a write there computes it first, as it does any pending reader (its new
        registration tells a search for readers that remembered the memory unread), and a read
        computes it from there."""
        copy = Node(
            ops.ELEMENTWISE["astype"],
            (Node.leaf(array, False),),
            (("dtype", self.dtype),),
            self.shape,
            self.dtype,
        )
        for name in ("op", "inputs", "params", "depth", "key", "leaves", "ancestors", "errstate"):
            setattr(self, name, getattr(copy, name))
        _thread.recording.refs.append(weakref.ref(self))

    @classmethod
    def group(cls, members: Sequence[Node]) -> Node:
        """Pending nodes materialized together, as one node to the replay cache (``replay``): its
        leaves are theirs, its ancestors theirs with each member after its own, its structure theirs
        and which of its ancestors are the same node (a member another one reads, an intermediate
        they share), which a structure alone does not say. No trace reads it; it is never pending."""
        node = cls.__new__(cls)
        node.op, node.inputs, node.params, node.shape, node.dtype = GROUP, tuple(members), (), (), None
        node.buffer, node.exposed, node.depth, node.device = None, False, 0, members[0].device
        node.errstate = None
        keys: list[Any] = []
        leaves: tuple[Node, ...] = ()
        ancestors: tuple[Node, ...] = ()
        for member in members:
            keys.append(member.key)
            leaves += member.leaves
            ancestors += member.ancestors
            ancestors += (member,)
        if None in keys or len(leaves) + len(ancestors) > REPLAY_KEY_LIMIT:
            node.key, node.leaves, node.ancestors = None, (), ()
            return node
        shared = first_positions(ancestors)
        node.key, node.leaves, node.ancestors = structure_id((GROUP, tuple(keys), shared)), leaves, ancestors
        return node

    @classmethod
    def leaf(cls, array: Any, exposed: bool, device: Memory | None = HOST) -> Node:
        """A materialized leaf of ``device``'s ``array``; ``exposed`` when code outside dynfuse may
        hold this memory."""
        key = structure_id(buffer_key(array, device))
        return cls._leaf(ops.BUFFER, array, array.shape, array.dtype, exposed, key, device)

    @classmethod
    def scalar(cls, value: bool | int | float | complex) -> Node:
        return cls._leaf(ops.SCALAR, value, (), None, False, structure_id(type(value)), None)

    @classmethod
    def _leaf(
        cls,
        op: Op,
        value: Any,
        shape: tuple,
        dtype: np.dtype | None,
        exposed: bool,
        key: int,
        device: Memory | None,
    ) -> Node:
        node = cls.__new__(cls)
        node.op, node.inputs, node.params, node.shape, node.dtype = op, (), (), shape, dtype
        node.buffer, node.exposed, node.depth, node.device = value, exposed, 0, device
        node.errstate = None
        node.key, node.leaves, node.ancestors = key, (), ()
        return node

    @property
    def is_materialized(self) -> bool:
        return not self.inputs

    @property
    def memory(self) -> Memory:
        """Where its value is: its device's memory, or the host's for a node that goes with any
        device (a scalar, a converted NumPy scalar)."""
        return self.device or HOST

    def become_leaf(self, array: Any, key: int | None = None) -> None:
        """Hold the computed value (an array of the node's device) and let go of the graph above
        it. ``key``: the array's ``structure_id(buffer_key(array, device))``, where the caller knows
        it already."""
        self.op = ops.BUFFER
        self.inputs = ()
        self.params = ()
        self.buffer = array
        self.depth = 0
        self.key = structure_id(buffer_key(array, self.device)) if key is None else key
        self.leaves = ()
        self.ancestors = ()

    def __repr__(self) -> str:
        return f"<Node {self.op.name} {self.shape} {self.dtype}>"


def buffer_layout(array: np.ndarray) -> tuple[int, ...] | None:
    """What a plan may depend on in a buffer's memory layout: nothing for a C-contiguous one, else
    its strides (broadcast axes, flips, whether a reshape can view it)."""
    return None if array.flags.c_contiguous else array.strides


def buffer_key(array: Any, device: Memory | None = HOST) -> tuple:
    """A buffer leaf as plans see it; a device's names its memory, so a structure says where its
    leaves are."""
    key = (array.dtype, array.shape, buffer_layout(array))
    return key if device is HOST or device is None else (*key, device.name)


def mixed_devices(op: Op | str, inputs: tuple[Node, ...]) -> None:
    """Raise, for an op (or a call, by name) over arrays in different memories, CuPy's error for a
    NumPy operand."""
    found = ", ".join(f"{node.device.name} {node.shape}" for node in inputs if node.device is not None)
    name = op if isinstance(op, str) else op.name
    raise TypeError(
        f"{name}: operands on different devices ({found}); move them to one with .to(device) or "
        "dynfuse.asarray(x, device=...)"
    )


class _Recording:
    """What one thread has recorded: weak references to its nodes (those pending among them are
    what ``_PendingNodes`` finds), and its ``stats`` counters."""

    __slots__ = ("counters", "refs", "sweep_at", "thread")

    def __init__(self) -> None:
        self.thread = threading.current_thread()
        self.refs: list[weakref.ref] = []
        self.sweep_at = 1024
        self.counters = stats.thread_counters()

    def sweep(self) -> None:
        """Keep the references to pending nodes: only from the list's own thread, or once it ended.
        Next sweep when the list has doubled, so adding stays constant time."""
        self.refs[:] = [ref for ref in self.refs if (alive := ref()) is not None and alive.inputs]
        self.sweep_at = max(1024, 2 * len(self.refs))

    def still_needed(self) -> bool:
        if self.thread.is_alive():
            return True
        self.sweep()
        return bool(self.refs)


class _PendingNodes:
    """Every node not yet materialized that something still references. An eager write into a buffer
    first materializes those that read memory it overlaps, so they see the values from before.

    Recording adds one node per op, so adding must be cheap: ``Node.__init__`` appends a weak
    reference to its thread's own list, without a lock. Others only read it, whole, which the GIL
    makes atomic. The lists of threads that have ended are swept when a new thread starts
    recording, and dropped once empty, so short-lived threads leave nothing behind. Reading them
    (``alive``) sweeps the reader's own list first: a loop of eager writes then reads, at each
    write, what was recorded since the last (one statement), not up to a thousand dead references.
    """

    __slots__ = ("_lock", "_recordings")  # the C recorder reads _recordings by its slot

    def __init__(self) -> None:
        self._recordings: list[_Recording] = []
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._lock._at_fork_reinit)  # as execute.lock

    def start_thread(self) -> _Recording:
        recording = _thread.recording = _Recording()
        with self._lock:
            self._recordings = [entry for entry in self._recordings if entry.still_needed()]
            self._recordings.append(recording)
        return recording

    def empty(self) -> bool:
        """Whether no thread's list holds a reference, dead or alive: then nothing is pending
        (``alive`` sweeps dead ones away, so a loop of writes finds its lists empty again)."""
        return not any(recording.refs for recording in self._recordings)

    def sweep_own(self) -> None:
        """Sweep this thread's list, so that the next reading reads only what was recorded since."""
        own = getattr(_thread, "recording", None)
        if own is not None:
            own.sweep()

    def alive(self) -> list[Node]:
        self.sweep_own()
        with self._lock:
            lists = [recording.refs for recording in self._recordings]
        return [node for refs in lists for ref in list(refs) if (node := ref()) is not None and node.inputs]


_thread = threading.local()  # .recording: this thread's _Recording
_pending = _PendingNodes()


# Arrays that no pending node read at the last search, with the pending lists' state then (each
# list, its length and its last reference). While no node is recorded none can come to read one:
# a pending node's inputs never change, and what it computes is fresh memory or a view of what it
# reads. So a loop's writes into arrays nothing pending reads (boundary rows written between
# statements, while earlier statements' values stay pending) skip the search.
_unread: dict[int, tuple[weakref.ref, Memory, tuple]] = {}
_UNREAD_KEPT = 16


def _pending_state() -> tuple:
    return tuple(
        (recording, len(recording.refs), recording.refs[-1] if recording.refs else None)
        for recording in _pending._recordings
    )


def _unchanged(state: tuple) -> bool:
    now = _pending._recordings
    if len(state) != len(now):
        return False
    for recording, (then, length, last) in zip(now, state, strict=True):
        refs = recording.refs
        if recording is not then or len(refs) != length or (refs[-1] if length else None) is not last:
            return False
    return True


def nothing_pending() -> bool:
    """Whether no node is pending in any thread (a list not swept since its nodes were computed
    answers no)."""
    return _pending.empty()


def nothing_pending_swept() -> bool:
    """``nothing_pending``, this thread's list swept first: a statement's nodes, computed since they
    were recorded, leave none there."""
    _pending.sweep_own()
    return _pending.empty()


def reads_nothing(memory: Any) -> bool:
    """Whether no pending node reads a host leaf sharing memory with ``memory``, a host array, as
    ``pending_readers`` asks (this thread's list swept first): in C, the whole search, without
    the list of readers; here, whether nothing is pending at all."""
    return nothing_pending_swept()


def pending_readers(memory: Any, device: Memory = HOST) -> list[Node]:
    """Unmaterialized nodes that read a buffer sharing memory with ``memory``, an array of ``device``.
    Each leaf is asked once: many pending nodes read the same few arrays."""
    if reads_nothing(memory) if device is HOST else nothing_pending_swept():
        return []
    known = _unread.get(id(memory))
    if known is not None and known[0]() is memory and known[1] is device and _unchanged(known[2]):
        return []
    shares: dict[int, bool] = {}
    readers = []
    for node in _pending.alive():
        for source in node.inputs:
            if source.op is not ops.BUFFER:
                continue
            shared = shares.get(id(source))
            if shared is None:
                shared = source.memory is device and np.may_share_memory(source.buffer, memory)
                shares[id(source)] = shared
            if shared:
                readers.append(node)
                break
    if not readers:
        _remember_unread(memory, device)
    return readers


def _remember_unread(memory: Any, device: Memory) -> None:
    try:
        reference = weakref.ref(memory)
    except TypeError:  # an array type without weak references: searched each time
        return
    if len(_unread) >= _UNREAD_KEPT:
        _unread.clear()
    _unread[id(memory)] = (reference, device, _pending_state())


def read_by_pending(node: Node) -> bool:
    """Whether a pending node reads ``node``: a graph recorded over it, whose structure (its key,
    leaves and ancestors, kept as recorded) includes ``node``'s graph as it is now."""
    return any(node in reader.inputs for reader in _pending.alive())


def dependent_sinks(readers: list[Node]) -> list[Node]:
    """The pending nodes that depend on ``readers`` (the readers included) and that no other of them
    reads: what a write computes first, so every reader keeps the values from before it, fused with
    what reads it, where computing the readers alone would store each (a stencil's partial sums,
    an array apiece). A reader that the program holds and the sinks do not keep is found again."""
    nodes = _pending.alive()
    dependent = set(map(id, readers))
    members = list(readers)
    grew = True
    while grew:  # until none joins: nodes come in the order they were recorded, so one pass finds all
        grew = False
        for node in nodes:
            if id(node) not in dependent and any(id(source) in dependent for source in node.inputs):
                dependent.add(id(node))
                members.append(node)
                grew = True
    read = {id(source) for node in members for source in node.inputs}
    return [node for node in members if id(node) not in read]


def pending_run() -> tuple[list[Node], list[Node]]:
    """This thread's pending nodes as one run of the program's loop: its values (the nodes that are
    no views and that no other such node reads, through views or not), in the order they were
    recorded, whose materializing computes all the rest; and its views."""
    _pending.sweep_own()
    own = getattr(_thread, "recording", None)
    nodes = [] if own is None else [node for ref in own.refs if (node := ref()) is not None and node.inputs]
    read: set[int] = set()
    for node in nodes:
        if node.op.kind is not OpKind.VIEW:
            for source in node.inputs:
                read.add(id(source))
                while source.op.kind is OpKind.VIEW and source.inputs:
                    source = source.inputs[0]
                    read.add(id(source))
    values = [node for node in nodes if node.op.kind is not OpKind.VIEW and id(node) not in read]
    return values, [node for node in nodes if node.op.kind is OpKind.VIEW]


def pending_memory() -> tuple[int, list[Node]]:
    """What unmaterialized traces alone keep alive: the bytes of their buffer leaves that nothing
    else references (``f(rng.random(n))`` drops the array; NumPy would have freed it after ``f``),
    and the sinks of those traces (the pending nodes no other pending node reads), whose
    materializing lets go of them.

    "Nothing else": no reference to a leaf node from outside the pending traces (``held_outside``),
    and a buffer that owns its memory and is held by its node alone. A miscount only moves when a
    trace is materialized, never what it computes.
    """
    nodes = _pending.alive()
    inside = references_within(nodes)
    buffers = (source for node in nodes for source in node.inputs if source.op.kind is OpKind.BUFFER)
    leaves = list(dict.fromkeys(buffers))  # each once, and held by this list alone
    outside = set(map(id, held_outside(leaves, inside)))
    held = sum(
        leaf.buffer.nbytes
        for leaf in leaves
        if id(leaf) not in outside
        and host_pool.owns_memory(leaf.buffer)
        and sys.getrefcount(leaf.buffer) <= 2  # its node's reference and the argument
    )
    return held, [node for node in nodes if id(node) not in inside]


# An intermediate this deep costs a chain of ops to compute again, more than storing it now and
# reading it back later (two passes).
HELD_DEPTH = 4


def _worth_keeping(node: Node, viewed: set[int]) -> bool:
    """Whether an intermediate the program holds is kept once computed: it is deep, or read through
    a view (``_ids_viewed``): a row or a window of it, as a loop reads such an array piece by piece,
    each piece otherwise computing it again (all of it, where the trace is interpreted)."""
    return node.op.kind is not OpKind.VIEW and (node.depth >= HELD_DEPTH or id(node) in viewed)


def _ids_viewed(order: list[Node]) -> set[int]:
    """The ids of the nodes a view in ``order`` reads."""
    return {id(node.inputs[0]) for node in order if node.op.kind is OpKind.VIEW}


def held_intermediates(order: list[Node], outputs: Sequence[Node], group: Node | None = None) -> list[Node]:
    """The nodes of ``order`` (not outputs, not views) that the program still holds, and that are
    deep or read through a view (``_worth_keeping``): computed now, they are kept (they become
    leaves), as NumPy would have them, rather than computed again when asked for
    (``x = layer(x); print(x.std())``, then the next layer; ``w = a - 0.5``, then ``w[k]`` in a loop).

    "Held": referenced from outside this trace (``held_outside``), by a lazy array the program
    keeps or by a graph recorded over the node. A miscount can only cost speed: a kept node holds
    its own value. The outputs' ``group`` (``Node.group``), where one stands for them, is part of
    the trace.
    """
    requested = set(map(id, outputs))
    viewed = _ids_viewed(order)
    kept = [node for node in order if _worth_keeping(node, viewed) and id(node) not in requested]
    if not kept:
        return []
    inside = references_within(order if group is None else [*order, group])
    return held_outside(kept, inside, listed=1)  # ``order`` lists them too


def deep_ancestors(node: Node, order: list[Node]) -> tuple[tuple[int, int], ...]:
    """``held_intermediates``' candidates in ``node``'s trace (``order``, unmaterialized), for any
    trace of its structure: the first position of each in ``node.ancestors``, and how often the
    trace itself references it (``references_within``), which the structure fixes. A group's
    members are what it computes, not intermediates."""
    grouped = node.op is GROUP
    inside = references_within([*order, node] if grouped else order)
    viewed = _ids_viewed(order)
    seen: set[int] = set(map(id, node.inputs)) if grouped else set()
    deep = []
    for position, ancestor in enumerate(node.ancestors):
        if _worth_keeping(ancestor, viewed) and id(ancestor) not in seen:
            seen.add(id(ancestor))
            deep.append((position, inside[id(ancestor)]))
    return tuple(deep)


def held_ancestors(node: Node, deep: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """``held_intermediates`` without a walk, for a trace whose structure gave ``deep``
    (``deep_ancestors``): the positions in ``node.ancestors`` of those the program still holds."""
    ancestors = node.ancestors
    return tuple(
        position for position, inside in deep if sys.getrefcount(ancestors[position]) > inside + 1
    )  # + 1: ``getrefcount``'s argument


def held_positions(node: Node, held: list[Node]) -> tuple[int, ...]:
    """Where ``held_intermediates`` found ``held`` (intermediates of ``node``'s trace): their first
    positions in ``node.ancestors``, as ``held_ancestors`` gives them."""
    ids = [id(ancestor) for ancestor in node.ancestors]
    return tuple(sorted(ids.index(id(member)) for member in held))


# References to a node that ``held_outside`` itself holds while it counts: the list of candidates,
# the loop variable, and ``sys.getrefcount``'s argument.
_COUNTING_REFERENCES = 3


def held_outside(candidates: list[Node], inside: Counter[int], listed: int = 0) -> list[Node]:
    """The nodes of ``candidates`` that something outside their graph references: a lazy array the
    program keeps, or another graph recorded over them. That is what is left of a node's reference
    count once the graph's own references (``inside``, from ``references_within``), the references
    of the count itself, and the caller's other ``listed`` lists of them are taken away, as NumPy's
    temporary elision reads reference counts.
    """
    counted = _COUNTING_REFERENCES + listed
    return [node for node in candidates if sys.getrefcount(node) > inside[id(node)] + counted]


def references_within(nodes: Iterable[Node]) -> Counter[int]:
    """How often the graph of ``nodes`` itself references each node, by id: in their inputs,
    leaves and ancestors. What a node's reference count holds beyond that (less the counter's own
    references) is held from outside: by a lazy array the program keeps, or another graph."""
    referenced: list[int] = []  # counted at once: ``Counter.update`` costs a call per tuple
    for node in nodes:
        referenced += map(id, node.inputs)
        referenced += map(id, node.leaves)
        referenced += map(id, node.ancestors)
    return Counter(referenced)


def topological_order(outputs: Iterable[Node]) -> list[Node]:
    """The unmaterialized nodes that ``outputs`` need, each after its inputs; leaves excluded."""
    order: list[Node] = []
    visited: set[int] = set()
    for root in outputs:
        if not root.inputs or id(root) in visited:
            continue
        visited.add(id(root))
        stack = [(root, iter(root.inputs))]
        while stack:
            node, children = stack[-1]
            for child in children:  # resumes where this node's walk left off
                if child.inputs and id(child) not in visited:
                    visited.add(id(child))
                    stack.append((child, iter(child.inputs)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order
