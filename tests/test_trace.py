"""trace: nodes, their structure ids and replay keys, the registry of pending nodes, and the walks."""

import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import dynfuse
from dynfuse import accelerate, ops, trace
from dynfuse.backends import cuda
from dynfuse.devices import HOST
from dynfuse.trace import Node, topological_order

from .helpers import assert_same

NEGATIVE = ops.elementwise_op("negative")
ADD = ops.elementwise_op("add")
FLOAT = np.dtype(np.float64)


def leaf(values=None):
    return Node.leaf(np.arange(3.0) if values is None else values, exposed=False)


def apply(op, *inputs):
    return Node(op, inputs, (), inputs[0].shape, inputs[0].dtype)


def key_of(make, *values):
    """The structure id of what ``make`` records over lazy arrays of ``values``."""
    return make(*(dynfuse.asarray(value) for value in values))._node.key


# ---- walks --------------------------------------------------------------------------------------


def test_topological_order_walks_a_deep_chain_without_recursion():
    node = start = leaf()
    chain = []
    for _ in range(5000):
        node = apply(NEGATIVE, node)
        chain.append(node)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100)
    try:
        order = topological_order([node])
    finally:
        sys.setrecursionlimit(limit)
    assert order == chain and start not in order
    assert node.depth == 5000


def test_topological_order_gives_shared_nodes_once_after_their_inputs():
    x, y = leaf(), leaf()
    a = apply(NEGATIVE, x)
    b = apply(ADD, a, a)
    c = apply(ADD, a, b)
    d = apply(ADD, b, y)
    order = topological_order([c, d, b, c])
    assert sorted(map(id, order)) == sorted(map(id, (a, b, c, d)))
    position = {id(node): index for index, node in enumerate(order)}
    for node in order:
        assert all(position[id(child)] < position[id(node)] for child in node.inputs if child.inputs)


def test_topological_order_stops_at_materialized_nodes():
    a = apply(NEGATIVE, leaf())
    b = apply(NEGATIVE, a)
    c = apply(ADD, b, a)
    b.become_leaf(np.zeros(3))
    assert topological_order([c]) == [a, c]
    assert topological_order([b]) == []


def test_depth_is_the_longest_path_to_a_leaf():
    x = leaf()
    deep = apply(NEGATIVE, apply(NEGATIVE, apply(NEGATIVE, x)))
    assert (x.depth, apply(ADD, x, deep).depth, apply(ADD, deep, x).depth) == (0, 4, 4)


def test_references_within_count_inputs_leaves_and_ancestors():
    x = leaf()
    a = apply(NEGATIVE, x)
    b = apply(ADD, a, x)
    inside = trace.references_within([a, b])
    assert inside[id(x)] == 5  # a's input and leaf, b's input, and b's two leaf positions (via a, direct)
    assert inside[id(a)] == 2  # b's input and ancestor
    assert inside[id(b)] == 0


def chain_of(node, length):
    for _ in range(length):
        node = apply(NEGATIVE, node)
    return node


@pytest.mark.parametrize("kept", [(), (0,), (1,), (0, 1)])
def test_held_ancestors_finds_what_held_intermediates_finds_without_a_walk(kept):
    """Two deep intermediates (one shared by both branches), held or not: a replay reads which from
    reference counts at positions its structure fixes, and must agree with the walk."""
    x = leaf()
    deep = [chain_of(x, 5), None]
    deep[1] = chain_of(apply(ADD, deep[0], x), 4)
    out = apply(ADD, deep[1], apply(ADD, deep[0], deep[0]))
    order = topological_order([out])
    structure = trace.deep_ancestors(out, order)
    held = [deep[index] for index in kept]
    del deep
    walked = trace.held_intermediates(order, [out])
    assert set(map(id, walked)) >= set(map(id, held))
    positions = trace.held_positions(out, walked)
    del order, walked  # a replay has no walk: nothing else references the trace's nodes
    # The function in use (C's, where it is built) and the Python reference read the same counts
    readers = {trace.held_ancestors, accelerate._REFERENCE[trace, "held_ancestors"]}
    assert [read(out, structure) for read in readers] == [positions] * len(readers)
    del held
    assert [read(out, structure) for read in readers] == [()] * len(readers)


# ---- structure ids and replay keys --------------------------------------------------------------


def test_structure_ids_are_equal_for_equal_structures_only():
    assert trace.structure_id(("a structure", 1)) == trace.structure_id(("a structure", 1))
    assert trace.structure_id(("a structure", 1)) != trace.structure_id(("a structure", 2))


def test_node_keys_follow_ops_params_and_leaf_descriptions_not_data():
    values = np.arange(6.0)
    same = key_of(lambda x: x * 2 + 1, values)
    assert key_of(lambda x: x * 2 + 1, values + 10) == same  # other data
    assert key_of(lambda x: x * 3 + 5, values) == same  # a weak scalar is a parameter, not structure
    for other in [
        key_of(lambda x: x * 2.0 + 1, values),  # another scalar type
        key_of(lambda x: x * 2 - 1, values),  # another op
        key_of(lambda x: x * 2 + 1, values.astype(np.float32)),  # another dtype
        key_of(lambda x: x * 2 + 1, values[:5]),  # another shape
        key_of(lambda x: x * 2 + 1, np.arange(12.0)[::2]),  # another layout: strided
        key_of(lambda x: x * 2 + 1, values[::-1]),  # another layout: flipped
        key_of(lambda x: x * 2 + 1, values.reshape(2, 3)),
    ]:
        assert other != same
    assert key_of(lambda x: x.sum(axis=0), values.reshape(2, 3)) != key_of(
        lambda x: x.sum(axis=1), values.reshape(2, 3)
    )  # another param
    assert key_of(lambda x: x.astype(np.int8), values) != key_of(lambda x: x.astype(np.int16), values)


def test_replay_keys_say_which_leaf_positions_hold_the_same_leaf():
    x, y = dynfuse.asarray(np.arange(5.0)), dynfuse.asarray(np.arange(5.0, 10.0))
    shared, separate = (x * 2 + x)._node, (x * 2 + y)._node
    assert shared.key == separate.key
    assert trace.replay_key("cpu", shared) != trace.replay_key("cpu", separate)
    assert trace.replay_key("cpu", shared)[:2] == ("cpu", shared.key)
    assert trace.replay_key("cuda", shared) != trace.replay_key("cpu", shared)


def test_no_replay_key_once_an_ancestor_was_materialized():
    x = dynfuse.asarray(np.arange(5.0))
    t = x * 2
    u = t + 1
    assert trace.replay_key("cpu", u._node) is not None
    dynfuse.evaluate(t)
    assert u._node.key is not None and trace.replay_key("cpu", u._node) is None


def test_structures_past_the_limit_have_no_key():
    x = dynfuse.asarray(np.arange(3.0))
    y = x
    while len(y._node.leaves) + len(y._node.ancestors) + 2 <= trace.REPLAY_KEY_LIMIT:
        y = y + x
    assert y._node.key is not None
    y = y + x
    assert (y._node.key, y._node.leaves, y._node.ancestors) == (None, (), ())
    assert trace.replay_key("cpu", y._node) is None
    assert (y + 1)._node.key is None  # nor has anything recorded over it


def test_the_table_of_structures_starts_afresh_without_reusing_ids(monkeypatch):
    monkeypatch.setattr(trace, "STRUCTURE_TABLE_LIMIT", 4)
    trace._structure_ids.clear()
    first = [trace.structure_id(("structure", number)) for number in range(4)]
    assert trace.structure_id(("structure", 0)) == first[0]  # found: the table keeps it
    trace.structure_id(("structure", 4))  # a new one, and the table is full: it starts afresh
    assert len(trace._structure_ids) == 1
    again = trace.structure_id(("structure", 0))
    assert again not in first and again > max(first)


def test_buffer_keys_describe_dtype_shape_layout_and_memory():
    values = np.arange(6.0).reshape(2, 3)
    assert trace.buffer_layout(values) is None
    assert trace.buffer_layout(values.T) == values.T.strides
    assert trace.buffer_key(values) == (values.dtype, (2, 3), None)
    assert trace.buffer_key(values, None) == trace.buffer_key(values)
    emulated = cuda.EMULATOR.device
    assert trace.buffer_key(values, emulated) == (values.dtype, (2, 3), None, emulated.name)


# ---- leaves -------------------------------------------------------------------------------------


def test_leaves_and_scalars():
    values = np.arange(3.0)
    node = Node.leaf(values, exposed=True)
    assert (node.is_materialized, node.buffer is values, node.exposed, node.depth) == (True, True, True, 0)
    assert (node.device, node.memory, node.key) == (HOST, HOST, trace.structure_id(trace.buffer_key(values)))
    scalar = Node.scalar(2.5)
    assert (scalar.op, scalar.buffer, scalar.device, scalar.memory, scalar.shape) == (
        ops.SCALAR,
        2.5,
        None,
        HOST,
        (),
    )
    assert scalar.key == Node.scalar(7.0).key != Node.scalar(7).key


def test_becoming_a_leaf_lets_go_of_the_graph_above():
    below = leaf()
    node = apply(NEGATIVE, apply(NEGATIVE, below))
    middle = weakref.ref(node.inputs[0])
    node.become_leaf(np.ones(3))
    gc.collect()
    assert middle() is None
    assert (node.op, node.inputs, node.depth, node.leaves, node.ancestors) == (ops.BUFFER, (), 0, (), ())
    assert node.key == Node.leaf(np.ones(3), exposed=False).key


# ---- devices ------------------------------------------------------------------------------------


def test_a_node_lives_in_its_inputs_memory_and_scalars_go_anywhere():
    emulated = cuda.EMULATOR.device
    on_device = Node.leaf(emulated.from_host(np.arange(3.0)), False, emulated)
    assert apply(ADD, on_device, Node.scalar(1.0)).device is emulated
    assert apply(ADD, Node.scalar(1.0), leaf()).device is HOST
    assert Node(NEGATIVE, (Node.scalar(1.0),), (), (), None).device is None


def test_mixed_devices_raise_type_error_naming_both():
    emulated = cuda.EMULATOR.device
    on_device = Node.leaf(emulated.from_host(np.arange(3.0)), False, emulated)
    with pytest.raises(
        TypeError, match=r"^add: operands on different devices \(cpu \(3,\), cuda-emulator \(3,\)\)"
    ):
        apply(ADD, leaf(), on_device)
    with pytest.raises(TypeError, match=r"^setitem: operands on different devices .* \.to\(device\)"):
        trace.mixed_devices("setitem", (on_device, leaf()))


# ---- pending nodes ------------------------------------------------------------------------------


def test_pending_readers_are_the_unmaterialized_nodes_reading_overlapping_memory():
    values, other = np.arange(6.0), np.arange(6.0)
    direct = dynfuse.asarray(values) * 2
    through_a_view = dynfuse.asarray(values[3:]) + 1
    elsewhere = dynfuse.asarray(other) * 2
    done = dynfuse.evaluate(dynfuse.asarray(values) - 1)

    def readers(memory, device=HOST):
        return {id(node) for node in trace.pending_readers(memory, device)}

    assert readers(values) == {id(direct._node), id(through_a_view._node)}
    assert readers(values[:3]) == {id(direct._node)}
    assert readers(other) == {id(elsewhere._node)} and not done._node.inputs
    assert readers(values, cuda.EMULATOR.device) == set()
    dynfuse.evaluate(direct)
    assert readers(values) == {id(through_a_view._node)}
    del through_a_view
    gc.collect()
    assert readers(values) == set()


def test_an_array_nothing_read_is_searched_again_once_a_node_is_recorded(monkeypatch):
    """A write finds no reader of an array: the next finds none without a search while nothing is
    recorded, and finds what is recorded after."""
    values = np.arange(6.0)
    held = dynfuse.asarray(np.ones(6)) * 3  # pending, elsewhere: the search is not skipped as empty
    assert trace.pending_readers(values) == []
    searched = []
    with monkeypatch.context() as patch:
        patch.setattr(trace._PendingNodes, "alive", lambda _: searched.append(1) or [held._node])
        assert trace.pending_readers(values) == [] and not searched
    reader = dynfuse.asarray(values[2:]) * 2
    assert [id(node) for node in trace.pending_readers(values)] == [id(reader._node)]
    array = dynfuse.asarray(values)
    array[:2] = 7.0  # the reader is computed before the write, and keeps the values from before it
    assert_same(reader, np.arange(2.0, 6.0) * 2)
    assert values[:2].tolist() == [7.0, 7.0]


def test_every_recorded_op_is_counted():
    x = dynfuse.asarray(np.arange(3.0))
    before = dynfuse.stats()["ops_recorded"]
    (x * 2 + 1).sum()
    assert dynfuse.stats()["ops_recorded"] - before == 3


def test_threads_that_ended_leave_no_pending_lists_behind():
    x = dynfuse.asarray(np.arange(5.0))
    ended = []
    for _ in range(20):
        thread = threading.Thread(target=lambda: x * 2)  # recorded, then dropped
        thread.start()
        thread.join()
        ended.append(thread)
    last = threading.Thread(target=lambda: x * 3)  # a new recording thread sweeps the ended ones
    last.start()
    last.join()
    assert not [recording for recording in trace._pending._recordings if recording.thread in ended]


def test_pending_nodes_of_an_ended_thread_are_kept_while_alive():
    x = dynfuse.asarray(np.arange(5.0))
    results = []
    thread = threading.Thread(target=lambda: results.append(x * 2))
    thread.start()
    thread.join()
    sweeping = threading.Thread(target=lambda: x * 3)  # a new recording thread sweeps ended ones
    sweeping.start()
    sweeping.join()
    assert id(results[0]._node) in {id(node) for node in trace.pending_readers(np.asarray(x))}


# ---- making and dropping nodes and lazy arrays --------------------------------------------------
# The C recorder allocates and drops these two classes itself, keeping dropped objects for reuse:
# what CPython guarantees of an object's end and start must hold all the same.


class _Released:
    """An object whose release is seen through a weak reference."""


def test_a_dropped_node_or_array_releases_its_slots_and_calls_weak_reference_callbacks():
    called = []
    node = Node.leaf(np.arange(3.0), exposed=False)
    array = dynfuse.LazyArray(node)
    watched = [weakref.ref(node, called.append), weakref.ref(array, called.append)]
    buffer = weakref.ref(node.buffer)
    del array, node
    gc.collect()
    assert [ref() for ref in watched] == [None, None] and len(called) == 2
    assert buffer() is None


def test_subclasses_drop_their_own_slots_and_their_bases():
    class Marked(Node):
        __slots__ = ("mark",)

    class MarkedArray(dynfuse.LazyArray):
        __slots__ = ("mark",)

    node = Marked.leaf(np.arange(2.0), exposed=False)
    array = MarkedArray(Node.leaf(np.arange(2.0), exposed=False))
    marks = [_Released(), _Released(), _Released()]
    node.mark, array.mark, node.params = marks
    released = [weakref.ref(mark) for mark in marks]
    del node, array, marks
    gc.collect()
    assert [ref() for ref in released] == [None, None, None]


def test_objects_made_after_many_drops_start_empty_untracked_and_hold_their_class():
    """Nodes and lazy arrays hold no cycle among them: the cyclic collector need not walk them, fresh
    or reused. A subclass's may hold anything, and is tracked."""
    values = dynfuse.asarray(np.arange(64.0))
    classes = (Node, dynfuse.LazyArray)
    held = [sys.getrefcount(cls) for cls in classes]
    for start in range(2000):
        values[start % 60 :]  # each a node and a lazy array, dropped at once
    assert [sys.getrefcount(cls) for cls in classes] == held
    fresh = Node.__new__(Node)
    assert not gc.is_tracked(fresh) and not gc.is_tracked(values) and not gc.is_tracked(values._node)
    with pytest.raises(AttributeError):
        fresh.buffer  # noqa: B018 (never set: unset, whatever object was reused)
    array = dynfuse.LazyArray.__new__(dynfuse.LazyArray)
    with pytest.raises(AttributeError):
        array._node  # noqa: B018

    class Marked(Node):
        __slots__ = ("mark",)

    assert gc.is_tracked(Marked.__new__(Marked))


def test_a_long_chain_of_nodes_is_dropped_without_exhausting_the_stack():
    node = leaf()
    for _ in range(200_000):
        node = apply(NEGATIVE, node)
    del node  # each node holds the one below through its inputs
    gc.collect()


def test_reads_nothing_is_true_only_where_no_pending_node_reads_the_memory(recorder):
    """``reads_nothing`` answers a write's search at once: never True where a pending node reads
    memory overlapping the array's (through a view, reversed too); in C, True wherever none does."""
    values, other = np.arange(10.0), np.arange(10.0)
    reader = dynfuse.asarray(values[2:5]) * 2
    held = dynfuse.asarray(other) + 1
    searched_in_c = not hasattr(trace.reads_nothing, "__code__")
    for memory, read in [
        (values, True),
        (values[4:], True),
        (values[::-1], True),
        (other, True),
        (values[5:], False),
        (np.arange(3.0), False),
    ]:
        assert bool(trace.pending_readers(memory)) == read
        assert not (trace.reads_nothing(memory) and read)
        if searched_in_c:
            assert trace.reads_nothing(memory) == (not read)
    assert reader._node.inputs and held._node.inputs
