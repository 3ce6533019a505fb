"""The C recorder (dynfuse/_recorder.c) against its Python reference: the same traces, node for node.

Every other test records through whichever is in use (C where it is built); these record each
program both ways and compare what was built, and check what only the C side can get wrong
(reference counts, malformed calls).
"""

import contextlib
import gc
import itertools
import subprocess
import sys
import time
import warnings
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dynfuse
from dynfuse import accelerate, cache, config, ops, record, registry, trace
from dynfuse.backends import cuda
from dynfuse.devices import HOST
from dynfuse.trace import Node

from .test_plan_differential import STEP, inputs
from .test_plan_differential import record as record_program

pytestmark = pytest.mark.skipif(
    config.pure_python, reason="DYNFUSE_PURE_PYTHON=1 switches the C recorder off"
)


def test_the_c_recorder_is_built_and_in_use():
    """``make test`` builds it (a C compiler is part of the set-up): recording in Python there
    would mean the build broke without a word."""
    assert accelerate.in_use()


def describe(roots):
    """Every node under ``roots`` as plain data, nodes named by order of first sight, so two traces
    compare equal exactly when they have the same shape of graph and the same contents."""
    names: dict[int, int] = {}
    rows = []
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        if id(node) in names:
            continue
        names[id(node)] = len(names)
        rows.append(node)
        stack.extend(reversed(node.inputs))
        stack.extend(reversed(node.leaves + node.ancestors))

    def name(node):
        return names[id(node)]

    return [
        (
            node.op.name,
            node.params,
            node.shape,
            node.dtype,
            node.depth,
            node.key,
            node.buffer if node.op is ops.SCALAR else None,
            node.exposed,
            node.device,
            [name(child) for child in node.inputs],
            [name(leaf) for leaf in node.leaves],
            [name(ancestor) for ancestor in node.ancestors],
        )
        for node in rows
    ]


@settings(max_examples=150, deadline=None)
@given(
    arrays=inputs(), program=st.lists(STEP, min_size=1, max_size=24), outputs=st.lists(st.integers(0, 1000))
)
def test_random_traces_are_recorded_the_same_in_c_and_python(arrays, program, outputs):
    with np.errstate(all="ignore"):
        in_c = record_program(program, arrays, outputs)
        with accelerate.pure_python():
            in_python = record_program(program, arrays, outputs)
    assert describe([a._node for a in in_c]) == describe([a._node for a in in_python])


OPERANDS = [
    np.arange(6.0),
    np.arange(6, dtype=np.int32).reshape(2, 3),
    np.ones(3, np.float16),
    np.array([True, False]),
    np.arange(2.0).reshape(2, 1),  # broadcasts with (2, 3) and (3,) to (2, 3)
    np.array(2.0),
    np.ones((0, 3)),  # an empty broadcast: the general path probes it
    np.arange(4, dtype=np.complex64),  # unsupported: the general path records a fallback
]
SCALARS = [2, 0, 127, 128, -1, 2.5, True, 1j, 2**70, "x", None]


@pytest.mark.parametrize(
    "name", ["add", "multiply", "less", "right_shift", "divide", "negative", "sqrt", "where"]
)
def test_the_common_case_gives_what_the_reference_gives(name):
    """Each operand combination record_common takes or declines: same result either way."""
    op = ops.elementwise_op(name)
    arrays = [dynfuse.asarray(value) for value in OPERANDS]
    candidates = arrays + SCALARS
    arity = 3 if name == "where" else getattr(np, name).nin
    for operands in itertools.product(candidates, repeat=arity):
        got = outcome(op, operands)
        with accelerate.pure_python():
            expected = outcome(op, operands)
        if isinstance(got, dynfuse.LazyArray) and isinstance(expected, dynfuse.LazyArray):
            assert describe([got._node]) == describe([expected._node]), operands
            assert got._scalar == expected._scalar, operands  # where's 0-d result is an array
            assert got._base is None and got._views is None
        else:
            assert got == expected, operands


def outcome(op, operands):
    """What record_common made of the operands: a lazy array, None (declined), or the error type."""
    try:
        return record.record_common(op, *operands)
    except Exception as error:
        return type(error)


def test_devices_are_recorded_and_mixed_devices_refused_the_same_in_c_and_python():
    """A node's device is its inputs' (scalars go with any); two devices raise TypeError, naming them."""
    emulated = cuda.EMULATOR.device
    host = dynfuse.asarray(np.arange(6.0))
    device = dynfuse.LazyArray(Node.leaf(emulated.from_host(np.arange(6.0)), False, emulated))
    for pure in (False, True):
        with accelerate.pure_python() if pure else contextlib.nullcontext():
            assert (device * 2 + device)._node.device is emulated
            assert (2.5 - host)._node.device is HOST
            assert Node(ops.elementwise_op("negative"), (Node.scalar(2),), (), (), None).device is None
            expected = r"add: operands on different devices \(cuda-emulator \(6,\), cpu \(6,\)\)"
            with pytest.raises(TypeError, match=expected):
                device + host


def test_the_depth_bound_holds(monkeypatch):
    monkeypatch.setattr(config, "max_depth", 5)
    x = dynfuse.asarray(np.arange(4.0))
    for _ in range(12):
        x = x * 1.5 + 1
        assert x._node.depth <= 5
    np.testing.assert_allclose(np.asarray(x), _expected_chain(np.arange(4.0), 12))


def test_the_depth_bound_holds_for_views_reductions_and_casts(monkeypatch):
    monkeypatch.setattr(config, "max_depth", 5)
    values = np.arange(24.0).reshape(4, 6)
    x = dynfuse.asarray(values) * 1.0
    for _ in range(4):
        x = x.T.reshape(4, 6)[::-1, None][:, 0].astype(np.float32).astype(np.float64).T.T
        values = values.T.reshape(4, 6)[::-1]
        assert x._node.depth <= 5
    np.testing.assert_array_equal(np.asarray(x), values)
    values = np.arange(24.0).reshape(4, 6)
    total = (dynfuse.asarray(values) * 1.0).sum(0)
    for _ in range(8):
        total = total[None].sum(0, keepdims=True)[0]
        assert total._node.depth <= 5
    np.testing.assert_array_equal(np.asarray(total), values.sum(0))


def _expected_chain(values, steps):
    for _ in range(steps):
        values = values * 1.5 + 1
    return values


def settled_reference_counts(items: list) -> list[int]:
    """The reference counts of ``items`` once no other thread changes them: a background compile,
    or an earlier test's thread, may hold a dtype or a type for a moment (an array, a scalar)."""
    cache.finish_background_compiles()
    counts = None
    for _ in range(100):
        gc.collect()
        now = [sys.getrefcount(item) for item in items]
        if now == counts:
            break
        counts = now
        time.sleep(0.01)
    return counts


def test_references_are_released():
    """Nothing recorded outlives its last user, and what every op touches (the op, the shape, the
    dtype, the operands) keeps its reference count: a leak in C shows up here."""
    x = dynfuse.asarray(np.arange(8.0))
    scale = float("2.5")  # an object of this test's own, unlike the small constants
    watched = [ops.elementwise_op("multiply"), x._node.shape, x._node.dtype, x._node, scale]
    (x * scale + 1 > x) & True  # interns the structures and fills the dtype table
    before = settled_reference_counts(watched)
    for _ in range(1000):
        y = (x * scale + 1 > x) & True
        alive = weakref.ref(y._node.inputs[0])
        del y
        assert alive() is None
    trace._thread.recording.sweep()  # the weak references to the dead nodes go
    assert settled_reference_counts(watched) == before


def test_pending_nodes_are_registered():
    """An eager write must find the nodes that read the buffer: the C recorder registers them."""
    base = np.arange(4.0)
    x = dynfuse.asarray(base)
    y = x * 2
    before = np.asarray(y).copy()
    z = x + 1
    x[0] = 100.0  # z reads the old value of x[0], as NumPy's z would
    np.testing.assert_array_equal(np.asarray(z), [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(before, [0.0, 2.0, 4.0, 6.0])


def test_malformed_nodes_raise_instead_of_crashing():
    scalar = Node.scalar(1.0)
    with pytest.raises(TypeError, match="tuple"):
        Node(ops.elementwise_op("negative"), [scalar], (), (), None)
    with pytest.raises(TypeError, match="nodes"):
        Node(ops.elementwise_op("negative"), ("not a node",), (), (), None)
    with pytest.raises(TypeError, match="initialized"):
        Node(ops.elementwise_op("negative"), (Node.__new__(Node),), (), (), None)
    with pytest.raises(TypeError):
        record.record_common(ops.elementwise_op("negative"))


@pytest.mark.parametrize(
    "extension",
    [
        "types.SimpleNamespace(INTERFACE_VERSION=0)",  # built from another version
        # classes it does not fit
        f"types.SimpleNamespace(INTERFACE_VERSION={accelerate.INTERFACE_VERSION}, bind=mismatched)",
    ],
)
def test_a_recorder_that_does_not_fit_is_refused_with_a_warning(extension):
    code = f"""
import sys, types, warnings
def mismatched(**objects):
    raise TypeError("dynfuse.trace.Node.op is not a __slots__ member")
sys.modules["dynfuse._recorder"] = {extension}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import dynfuse, numpy as np
print(dynfuse.accelerate.in_use(), [str(warning.message) for warning in caught])
print(np.asarray(dynfuse.asarray(np.arange(3.0)) * 2 + 1).tolist())
"""
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert printed.startswith("False") and "the C recorder is not used" in printed
    assert printed.endswith("[1.0, 3.0, 5.0]\n")


# ---- views, reductions and casts ------------------------------------------------------------------
# Random programs of views, reductions and casts, most of them on pending arrays (what the C
# recorder takes), with indices, shapes and axes NumPy refuses or the C recorder leaves to Python.

ODD_ITEMS = [
    np.int64(1),
    True,
    1.5,
    [0],
    slice(1.0, None),
    2**70,
    slice(2**70, None),
    slice(None, None, -(2**63)),
]
INDEX_ITEM = st.one_of(
    st.integers(-6, 6),
    st.builds(
        slice,
        st.none() | st.integers(-7, 7),
        st.none() | st.integers(-7, 7),
        st.none() | st.integers(-3, 3),
    ),
    st.sampled_from([None, Ellipsis]),
    st.sampled_from(ODD_ITEMS),
)
INDEX = st.one_of(INDEX_ITEM, st.lists(INDEX_ITEM, max_size=5).map(tuple))
AXIS = st.one_of(
    st.none(),
    st.integers(-4, 4),
    st.lists(st.integers(-4, 4), max_size=4).map(tuple),
    st.sampled_from([[0], np.int64(0), True, 1.0]),
)
EXTENT = st.integers(-2, 6)
NOTHING = object()  # an argument left out
KEEPDIMS = st.sampled_from([NOTHING, True, False, 1, None])
CASTS = [np.float32, "int16", np.dtype(bool), float, "f2", np.complex64, "uint8", "foo", [("a", "f4")]]
VIEW_STEP = st.one_of(
    st.tuples(st.just("getitem"), INDEX),
    st.tuples(
        st.just("reshape"),
        st.one_of(
            st.sampled_from([-1, (-1,), (1, -1), (-1, 1), (2, -1), (-1, 2, 1), ()]),
            st.integers(-2, 30),
            st.lists(EXTENT, max_size=4).map(tuple),
        ),
    ),
    st.tuples(st.just("reshape_args"), st.lists(EXTENT, min_size=2, max_size=4)),
    st.tuples(
        st.just("transpose"),
        st.integers(0, 3).flatmap(lambda n: st.permutations(range(n)) | st.permutations(range(-n, 0))),
    ),
    st.tuples(st.just("transpose_args"), st.lists(st.integers(-3, 3), max_size=3)),
    st.tuples(st.sampled_from(["T", "copy", "add"]), st.none()),
    st.tuples(st.just("squeeze"), AXIS),
    st.tuples(st.just("expand_dims"), AXIS),
    st.tuples(
        st.sampled_from(["sum", "prod", "max", "min", "any", "all", "argmax", "argmin", "mean"]),
        st.tuples(AXIS, KEEPDIMS, st.booleans()),
    ),
    st.tuples(st.just("astype"), st.sampled_from(CASTS)),
)


def apply_view_step(value, kind, argument):
    if kind == "getitem":
        return value[argument]
    if kind == "reshape":
        return value.reshape(argument)
    if kind == "reshape_args":
        return value.reshape(*argument)
    if kind == "transpose":
        return value.transpose(argument)
    if kind == "transpose_args":
        return value.transpose(*argument)
    if kind == "T":
        return value.T
    if kind == "copy":
        return value.copy()
    if kind == "add":
        return value + 1
    if kind == "squeeze":
        return value.squeeze(argument)
    if kind == "expand_dims":
        return dynfuse.numpy.expand_dims(value, argument)
    if kind == "astype":
        return value.astype(argument)
    axis, keepdims, by_name = argument
    kwargs = {} if keepdims is NOTHING else {"keepdims": keepdims}
    if by_name:
        return getattr(value, kind)(axis=axis, **kwargs)
    return getattr(value, kind)(axis, **kwargs)


def record_views(arrays, program):
    """The program's values (the inputs, then each step's result on the value it picks) and what
    each step gave: an array's index, or the error NumPy's type and message."""
    values = [dynfuse.asarray(array) for array in arrays]
    values += [value.copy() for value in values]  # pending, as most values a program indexes
    outcomes = []
    for pick, (kind, argument) in program:
        try:
            result = apply_view_step(values[pick % len(values)], kind, argument)
        except Exception as error:
            outcomes.append((type(error).__name__, str(error)))
            continue
        outcomes.append(len(values))
        values.append(result)
    return values, outcomes


def aliasing(values):
    """Each value's base (as a position among the values) and whether it has live views."""
    positions = {id(value): position for position, value in enumerate(values)}
    return [
        (None if value.base is None else positions.get(id(value.base), "elsewhere"), value._has_views())
        for value in values
    ]


@settings(max_examples=300, deadline=None)
@given(
    arrays=st.lists(
        hnp.arrays(
            st.sampled_from([np.float64, np.int32, np.bool_, np.float16, np.complex64]),
            hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
        ),
        min_size=1,
        max_size=2,
    ),
    program=st.lists(st.tuples(st.integers(0, 100), VIEW_STEP), min_size=1, max_size=16),
)
def test_views_reductions_and_casts_are_recorded_the_same_in_c_and_python(arrays, program):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        in_c, c_outcomes = record_views(arrays, program)
        with accelerate.pure_python():
            in_python, python_outcomes = record_views(arrays, program)
    assert c_outcomes == python_outcomes
    assert describe([a._node for a in in_c]) == describe([a._node for a in in_python])
    assert aliasing(in_c) == aliasing(in_python)


def test_views_reductions_and_casts_release_their_references():
    """The view, reduction and cast paths keep every reference count, and a base's list of views
    stays short while views are taken and dropped."""
    x = dynfuse.asarray(np.arange(24.0).reshape(4, 6)) * 1.0
    shape, dtype, node = x._node.shape, x._node.dtype, x._node
    stop = 10**6 + 1  # objects of this test's own, unlike the small ints
    ops_used = [ops.VIEWS[name] for name in ("getitem", "transpose", "reshape")] + [ops.REDUCTIONS["sum"]]
    watched = [shape, dtype, node, x, stop, np.float32, *ops_used]

    def record_all():
        steps = (
            x[1:stop, ::-2],
            x[3, -1],
            x[None, ..., 2],
            x.T,
            x.transpose(1, 0),
            x.reshape(-1),
            x.reshape(2, 3, 4),
            x[None].squeeze(),
            dynfuse.numpy.expand_dims(x, (0, -1)),
            x.sum(axis=0),
            x.max(1, keepdims=True),
            x.argmin(axis=-1),
            x.astype(np.float32),
        )
        return [weakref.ref(step._node) for step in steps]

    record_all()  # interns the structures and fills the tables
    before = settled_reference_counts(watched)
    for _ in range(300):
        for alive in record_all():
            assert alive() is None
    assert len(x._views) < 64
    trace._thread.recording.sweep()
    assert settled_reference_counts(watched) == before
    assert not x._has_views() and record.can_rebind(x)


def test_a_view_taken_in_c_stops_rebinding_until_it_is_gone():
    x = dynfuse.asarray(np.arange(6.0)) * 1.0
    view = x[1:]
    assert view.base is x and x[::2][1:].base is x
    assert not record.can_rebind(x)
    x += 1  # an eager write: the view sees it
    np.testing.assert_array_equal(np.asarray(view), np.arange(1.0, 6.0) + 1)
    del view
    gc.collect()
    assert record.can_rebind(x)


def test_computed_leaves_run_at_once_where_small_and_are_recorded_in_c_otherwise(monkeypatch):
    """A view of a computed array: with direct execution on and the array small, a NumPy view made
    at once; large, or direct execution off (the tests' default, tiers off), recorded in C. The
    Python function is not called either way."""
    called = []
    reference = record.getitem
    monkeypatch.setattr(record, "getitem", lambda *args: called.append(args) or reference(*args))
    small, large = dynfuse.asarray(np.arange(6.0)), dynfuse.asarray(np.arange(100000.0))
    assert small[1:]._node.inputs and large[1:]._node.inputs
    monkeypatch.setattr(config, "tiers", True)
    monkeypatch.setattr(registry, "backend", "cpu")
    assert not small[1:]._node.inputs
    assert large[1:]._node.inputs
    assert called == []


def test_sweeping_this_threads_pending_list_in_c_keeps_what_python_keeps():
    """A write first asks whether anything is pending, this thread's list swept: the nodes computed
    or gone leave it, the pending ones stay, in C as in the Python reference."""
    python_sweep = accelerate._REFERENCE[trace, "nothing_pending_swept"]
    x = dynfuse.asarray(np.arange(6.0))
    for sweep in (trace.nothing_pending_swept, python_sweep):
        kept = x * 2 + 1
        computed = x - 1
        np.asarray(computed)
        (x * 3) + 2  # gone at once
        assert sweep() is False  # ``kept`` is pending
        alive = {id(ref()) for ref in trace._thread.recording.refs}
        assert alive == {id(kept._node), id(kept._node.inputs[0])}
        np.asarray(kept)
        # Other tests' threads may hold pending nodes of their own: this thread's list is empty
        assert sweep() is trace._pending.empty() and trace._thread.recording.refs == []


def test_a_view_recorded_again_takes_its_params_and_structure_from_the_memo():
    """The same view, reduction or cast of arrays of one structure: the second is made from what the
    first left in the memo (the very params tuple, the same structure id), and computes its own
    array's values."""
    steps = (
        lambda v: v[1:-1, ::2],
        lambda v: v[None, 2],
        lambda v: v[3, 1],  # a scalar: the element, cast
        lambda v: v.T,
        lambda v: v.reshape(2, -1),
        lambda v: v.sum(axis=0),
        lambda v: v.max(1, keepdims=True),
        lambda v: v.astype(np.float32),
    )
    data = [np.arange(24.0).reshape(4, 6), -(np.arange(24.0).reshape(4, 6) ** 2)]
    for step in steps:
        first, second = (step(dynfuse.asarray(values) * 1.0) for values in data)
        assert first._node.params is second._node.params
        assert first._node.key == second._node.key
        for made, values in zip((first, second), data, strict=True):
            np.testing.assert_array_equal(np.asarray(made), step(values * 1.0))


def test_the_weak_references_kept_per_op_are_untracked_by_the_collector():
    """The pending list's and a base's references to the views taken: callback-free, they can close
    no cycle, and tracked they made a loop of views pay for collections of the references."""
    x = dynfuse.asarray(np.arange(24.0).reshape(4, 6)) * 1.0
    view = x[1:]
    assert [gc.is_tracked(ref) for ref in x._views] == [False]
    assert not gc.is_tracked(trace._thread.recording.refs[-1])
    del view
