"""record: what each recorded call checks at the line, and when a write rebinds or writes eagerly."""

import gc
import warnings

import numpy as np
import pytest

import dynfuse
from dynfuse import config, ops, record

from .helpers import assert_same


def owned(values):
    """A lazy array that nothing else aliases: computed, never handed to NumPy."""
    return dynfuse.array(np.asarray(values)) * 1


def materializations():
    return dynfuse.stats()["materializations"]


# ---- writes: rebind or write eagerly ------------------------------------------------------------


def test_in_place_on_unaliased_array_stays_lazy():
    x = owned(np.arange(3.0))
    before = materializations()
    x += 1
    x *= 2
    assert materializations() == before
    assert_same(x, (np.arange(3.0) + 1) * 2)


def test_a_write_that_no_alias_can_see_rebinds_the_array_to_a_new_node():
    x = owned(np.arange(3.0))
    assert record.can_rebind(x)
    first = x._node
    x += 1
    assert x._node is not first and x._node.inputs[0] is first  # the old node, read by the new one
    assert first.inputs and x._node.inputs  # neither computed


@pytest.mark.parametrize(
    "make",
    [
        lambda: dynfuse.asarray(np.arange(3.0)),  # NumPy's memory
        lambda: dynfuse.evaluate(owned(np.arange(6.0))[::2]),  # a view
    ],
    ids=["wrapped", "view"],
)
def test_a_write_an_alias_can_see_is_eager_into_the_same_node(make):
    x = make()
    assert not record.can_rebind(x)
    first = x._node
    x += 1
    assert x._node is first and first.is_materialized and materializations() >= 1
    assert_same(x, np.arange(3.0) + 1 if x.base is None else np.arange(6.0)[::2] + 1)


def test_a_live_view_stops_rebinding_until_it_is_gone():
    x = owned(np.arange(4.0))
    view = x[1:]
    assert not record.can_rebind(x) and not record.can_rebind(view)
    del view
    gc.collect()
    assert record.can_rebind(x)


def test_an_array_numpy_was_given_is_written_eagerly():
    x = owned(np.arange(3.0))
    exported = np.asarray(x)
    assert not record.can_rebind(x)
    x += 1
    np.testing.assert_array_equal(exported, np.arange(3.0) + 1)


def test_an_eager_write_first_computes_only_the_pending_nodes_that_read_the_memory():
    values, other = np.arange(6.0), np.arange(6.0)
    x = dynfuse.asarray(values)
    reads_x = x * 2
    reads_a_view = dynfuse.asarray(values[4:]) + 1
    reads_other = dynfuse.asarray(other) * 3
    x[0] = 100
    assert reads_x._node.is_materialized and reads_a_view._node.is_materialized
    assert not reads_other._node.is_materialized
    assert_same(reads_x, np.arange(6.0) * 2)
    assert values[0] == 100


def test_prepare_write_gives_the_target_buffer_once_nothing_pending_reads_it():
    values = np.arange(4.0)
    x = dynfuse.asarray(values)
    pending = x[1:] * 2  # reads x through a view
    buffer = record.prepare_write(x)
    assert buffer is values and pending._node.is_materialized


def test_writes_keep_traces_bounded(monkeypatch):
    monkeypatch.setattr(config, "max_depth", 4)
    x = owned(np.arange(3.0))
    for _ in range(10):
        x += 1
        assert x._node.depth <= 4
    assert_same(x, np.arange(3.0) + 10)


# ---- views --------------------------------------------------------------------------------------


def test_views_of_views_share_one_base_and_an_integer_index_copies():
    x = owned(np.arange(12.0).reshape(3, 4))
    row = x[1]
    assert row.base is x and row[::2].base is x and x.T[0].base is x
    element = x[1, 2]
    assert element.base is None and element._node.op is ops.ELEMENTWISE["astype"]
    assert x[1, 2, ...].base is x


def test_an_index_of_integer_arrays_is_a_gather_and_a_mask_of_rows_falls_back_counted():
    x = owned(np.arange(8.0).reshape(4, 2))
    gathered = x[[0, 2]]
    assert gathered._node.op is ops.GATHERS["gather"]
    assert_same(gathered, np.arange(8.0).reshape(4, 2)[[0, 2]])
    assert_same(x[np.array([True, False, True, False])], np.arange(8.0).reshape(4, 2)[[0, 2]])
    assert dynfuse.stats()["fallback_names"] == {"getitem": 1}


# ---- checks at the line -------------------------------------------------------------------------


def test_integer_power_checks_the_exponents_values_where_it_is_written():
    base = owned(np.arange(3))
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        base ** dynfuse.asarray(np.array([1, -1, 2]))
    assert_same(base ** dynfuse.asarray(np.array([1, 0, 2])), np.arange(3) ** np.array([1, 0, 2]))


def test_a_negative_integer_exponent_of_an_empty_result_is_never_met():
    """NumPy's loop raises as it meets a negative exponent: an empty result meets none."""
    empty = owned(np.array([], dtype=np.int8))
    exponent = dynfuse.asarray(np.array(-2, np.int8)) + 0  # a 0-d scalar, computed lazily
    assert_same(empty**exponent, np.array([], np.int8) ** np.int8(-2))
    assert_same(empty**-1, np.array([], np.int8) ** -1)  # a Python int: refused by the probe otherwise
    assert_same(owned(np.zeros((2, 0), bool)) ** -1, np.zeros((2, 0), bool) ** -1)
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        owned(np.arange(3, dtype=np.int8)) ** -1
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        owned(np.arange(3, dtype=np.int8)) ** exponent


def test_only_a_signed_integer_exponent_is_computed_for_its_check():
    base = owned(np.arange(3))
    exponent = owned(np.array([1, 0, 2], np.uint8))
    before = materializations()
    base**exponent
    owned(np.arange(3.0)) ** owned(np.array([-1.0, 2.0, 0.5]))
    assert materializations() == before and exponent._node.inputs
    signed = owned(np.array([1, 0, 2]))
    base**signed
    assert signed._node.is_materialized


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda x: x.mean(axis=0), "Mean of empty slice"),
        (lambda x: x.var(axis=0), "Degrees of freedom <= 0 for slice"),
        (lambda x: x[:, :1].T.var(ddof=1), "Degrees of freedom <= 0 for slice"),
    ],
)
def test_mean_and_var_warn_as_numpy_at_the_line_that_records_them(call, message):
    values = np.ones((0, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(dynfuse.asarray(values))
    assert [str(warning.message) for warning in caught] == [message]
    assert caught[0].category is RuntimeWarning and caught[0].filename == __file__
    assert materializations() == 0
    with pytest.warns(RuntimeWarning, match=message), np.errstate(all="ignore"):
        call(values)


def test_a_composite_reduction_recorded_again_makes_the_same_primitives_over_its_operand(monkeypatch):
    """mean, var and std, recorded again with the same arguments on another operand of the same
    shape and dtype, make the primitives they made the first time, over the new operand (no
    expansion again), and NumPy's results; arguments NumPy refuses are refused every time, and
    warnings come every time."""
    # Room for these three: a full set of kept expansions starts afresh, whatever ran before
    monkeypatch.setattr(record, "_EXPANSIONS", {})
    first, second = np.arange(12.0).reshape(3, 4), np.linspace(-1.0, 5.0, 12).reshape(3, 4)
    calls = [("mean", {"axis": 1}), ("var", {"axis": 0, "ddof": 1}), ("std", {"keepdims": True})]
    expanded = []
    for again, values in enumerate((first, second, first)):
        lazy = dynfuse.asarray(values) * 1.0
        with monkeypatch.context() as patch:
            if again:  # recorded before: nothing is expanded again
                patch.setattr(record.Emitter, "reduce", lambda *arguments: expanded.append(arguments))
            for name, kwargs in calls:
                assert_same(getattr(lazy, name)(**kwargs), getattr(values, name)(**kwargs))
        with pytest.raises(TypeError):
            lazy.mean(axis=1.0)
    assert expanded == []
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
            dynfuse.asarray(np.ones((0, 3))).mean(axis=0)


def test_std_warns_as_numpy_when_it_is_recorded():
    with pytest.warns(RuntimeWarning, match="Degrees of freedom <= 0 for slice"):
        dynfuse.asarray(np.ones(2)).std(ddof=5)
    assert materializations() == 0


def test_casts_are_checked_with_numpys_rule_and_message():
    x = owned(np.arange(3.0))
    with pytest.raises(TypeError) as numpys:
        np.arange(3.0).astype(np.int32, casting="safe")
    with pytest.raises(TypeError) as ours:
        x.astype(np.int32, casting="safe")
    assert str(ours.value) == str(numpys.value)
    assert x.astype(np.float64, copy=False) is x and x.astype(np.float64) is not x


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("axis", [None, 0, -1, 1, 2])
def test_running_sums_take_numpys_axes(shape, axis):
    values = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    try:
        expected = np.cumsum(values, axis=axis)
    except np.exceptions.AxisError:
        with pytest.raises(np.exceptions.AxisError):
            dynfuse.numpy.cumsum(dynfuse.asarray(values), axis=axis)
        return
    assert_same(dynfuse.numpy.cumsum(dynfuse.asarray(values), axis=axis), expected)


# ---- the common case ----------------------------------------------------------------------------


def test_the_common_case_records_one_node_with_numpys_dtype():
    add = ops.elementwise_op("add")
    x = dynfuse.asarray(np.arange(3, dtype=np.int8))
    result = record.record_common(add, x, 2)
    assert result._node.op is add and result._node.inputs[0] is x._node
    assert result._node.inputs[1].op is ops.SCALAR and result._node.inputs[1].buffer == 2
    assert result.dtype == (np.arange(3, dtype=np.int8) + 2).dtype and result._node.params == ()
    assert record.record_common(add, 1.5, x).dtype == np.float64


@pytest.mark.parametrize(
    "operands",
    [
        (np.int8(2),),  # a NumPy scalar is strong
        (128,),  # a Python int that may not fit: its value decides
        (-1,),
        (dynfuse.asarray(np.arange(2.0)),),  # another shape: broadcasting
        (dynfuse.asarray(np.arange(3, dtype=np.longdouble)),),  # an unsupported dtype
    ],
    ids=["numpy scalar", "int 128", "int -1", "broadcast", "longdouble"],
)
def test_the_common_case_declines_what_the_general_path_records(operands):
    add = ops.elementwise_op("add")
    x = dynfuse.asarray(np.arange(3, dtype=np.int16))
    assert record.record_common(add, x, *operands) is None
    assert record.record_common(add, 1, 2) is None  # two scalars: no array to give the shape


def test_the_common_case_declines_ops_that_check_values():
    x = dynfuse.asarray(np.arange(3))
    assert record.record_common(ops.elementwise_op("power"), x, x) is None


# ---- library calls and fallbacks ----------------------------------------------------------------


def test_static_params_are_sorted_and_hashable_or_none_for_data():
    assert record.static_params({"b": [1, [2, 3]], "a": None}) == (("a", None), ("b", (1, (2, 3))))
    assert record.static_params({"a": np.ones(2)}) is None
    assert record.static_params({"a": {}}) is None
    assert record.static_params({"a": owned(np.ones(2))}) is None


def test_fallbacks_are_named_as_numpy_names_them():
    assert record.function_name(np.linalg.inv) == "linalg.inv"
    assert record.function_name(np.sort) == "sort"
    assert record.function_name(np.ndarray.sort) == "ndarray.sort"


def test_other_libraries_arrays_take_the_operation():
    class Foreign:
        def __array_ufunc__(self, *args, **kwargs):
            return NotImplemented

    assert record.defers_to(Foreign()) and record.foreign((1, [2, Foreign()]))
    for value in (np.ones(2), np.float32(1), owned(np.ones(2)), 1.5, [1, 2]):
        assert not record.defers_to(value)
    assert not record.foreign((np.ones(2), owned(np.ones(2)), [1.0, np.ones(1)]))


@pytest.mark.parametrize("axis", [(2, 1), (1, 2), (-1, 1)])
def test_reduction_axes_are_recorded_in_order_as_numpy_walks_them(axis):
    """Which product overflows first decides NaN against 0: NumPy walks ``axis=(2, 1)`` in the
    array's order, so the kernel must too."""
    values = np.array([[[1.2e241, 1.5e67], [0.0, 0.0]]])
    product = np.prod(dynfuse.asarray(values), axis=axis)
    assert dict(product._node.params)["axis"] == (1, 2)
    with np.errstate(all="ignore"):
        assert_same(product, np.prod(values, axis=axis))


@pytest.mark.parametrize("dtype", ["float64", "int8", "bool"])
@pytest.mark.parametrize(
    "name", ["sum", "prod", "max", "min", "any", "all", "argmax", "argmin", "mean", "std"]
)
def test_a_0d_reduction_takes_the_axes_numpy_takes(name, dtype, recorder):
    """NumPy's ufunc reductions take axis 0 or -1 of a 0-d array as no axis (the element, in the
    reduction's dtype); argmax and argmin see the element in one axis; mean and std take none."""
    value = np.array(3, dtype)
    for axis in (0, -1, 1, (0,), (), None):
        for keepdims in (False, True):
            kwargs = {"axis": axis, "keepdims": keepdims} if keepdims else {"axis": axis}
            pending = dynfuse.asarray(value) + np.zeros((), dtype)
            try:
                expected = getattr(np, name)(value, **kwargs)
            except Exception as error:
                with pytest.raises(type(error)):
                    getattr(np, name)(pending, **kwargs)
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # std over no elements warns in both
                assert_same(getattr(pending, name)(**kwargs), expected)


@pytest.mark.parametrize("index", [0, slice(0, 1), Ellipsis], ids=["element", "slice", "all"])
def test_a_number_scalar_written_into_integers_is_converted_as_numpy_converts_it(index):
    """A float or integer *scalar* goes through int(): out of range is OverflowError, NaN
    ValueError (a 0-d array's values are cast as they are); the array is left as it was."""
    for total, error in [(300.0, OverflowError), (np.nan, ValueError), (3.75, None)]:
        expected = np.array([1, 2], np.int8)
        target = dynfuse.asarray(expected.copy()) + 0
        value = dynfuse.asarray(np.array([total, 0.0])).sum()  # a lazy float scalar
        if error is None:
            target[index] = value
            expected[index] = np.float64(total)
        else:
            with pytest.raises(error):
                target[index] = value
            with pytest.raises(error):
                expected[index] = np.float64(total)
        np.testing.assert_array_equal(np.asarray(target), expected)
    target = dynfuse.asarray(np.array([1, 2], np.int8)) + 0
    with pytest.raises(OverflowError):  # an integer scalar too: np.int64(300) is out of int8's range
        target[index] = dynfuse.asarray(np.array([200, 100])).sum()


def test_a_scalar_takes_no_item_assignment_as_numpys_scalars():
    total = dynfuse.asarray(np.arange(4.0)).sum()
    with pytest.raises(TypeError, match=r"'numpy\.float64' object does not support item assignment"):
        total[...] = 1.0
    with pytest.raises(TypeError, match="does not support item assignment"):
        total.astype(np.float32)[()] = 2.0
    assert float(total) == 6.0


@pytest.mark.parametrize("size", [2, 40000], ids=["computed at once", "recorded"])
def test_a_scalars_ellipsis_view_is_an_array_as_numpys(recorder, size):
    """``s[...]`` of a NumPy scalar is a 0-d array (its ``** 2`` squares: bool gives int8), where
    ``s.T`` is the scalar (its ``** 2`` is the scalar power: int64)."""
    host = np.ones(size, bool)
    total = dynfuse.asarray(host) if size > 2 else dynfuse.asarray(host) | False
    every = total.all()
    for got, wanted in [(every[...] ** 2, host.all()[...] ** 2), (every.T**2, host.all().T ** 2)]:
        assert np.asarray(got).dtype == np.asarray(wanted).dtype
        assert getattr(got, "_scalar", True) == isinstance(wanted, np.generic)


# ---- a write through a boolean mask of the target's shape ---------------------------------------

MASK_VALUES = [0, -1, 300, 2.5, -3.7, float("nan"), float("inf"), 1 + 2j, True]
MASK_VALUES += [np.float64("nan"), np.int64(-7), np.float32(1e10), np.array(4.0), np.array([7.0])]
MASK_DTYPES = ["bool", "int8", "uint8", "int64", "float16", "float32", "float64", "complex64"]


def _masked_write(module, dtype, value):
    """``x[x > 0.5] = value`` on a computed array, as a program writes it: the result or NumPy's error,
    and the warnings it gave."""
    x = module.asarray(np.linspace(-2, 3, 150 * 150).reshape(150, 150)) * 1.0
    x = x.astype(dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            x[x > 0.5] = value
            result = np.asarray(x)
        except Exception as error:  # NumPy's conversion errors: the same type at the same line
            return type(error).__name__, ()
    return result, tuple(sorted(str(w.category.__name__) for w in caught))


@pytest.mark.parametrize("dtype", MASK_DTYPES)
@pytest.mark.parametrize("value", MASK_VALUES, ids=repr)
def test_a_masked_write_of_one_value_converts_it_as_numpy_does(dtype, value):
    """``x[mask] = value`` is ``where(mask, value, x)`` with the value converted as NumPy's assignment
    converts it: its result, its errors (a Python int out of range, NaN into integers) and its
    warnings (a cast out of range), bit for bit."""
    actual, expected = _masked_write(dynfuse, dtype, value), _masked_write(np, dtype, value)
    if isinstance(expected[0], str):
        assert actual == expected
    else:
        assert actual[1] == expected[1]
        np.testing.assert_array_equal(actual[0], expected[0], strict=True)


def test_masked_writes_in_a_loop_stay_lazy_and_fuse():
    """A clipped update with ``x[x < -0.9] = 0.0`` each step, on an array nothing else sees: no step
    materializes, and the fused result is NumPy's."""
    rng = np.random.default_rng(4)
    x0, gradient = rng.standard_normal((150, 150)), rng.random((150, 150))
    x, expected = dynfuse.asarray(x0) * 1.0, x0.copy()
    before = dynfuse.stats()["materializations"]
    for _ in range(5):
        for array in (x, expected):
            array -= 0.1 * gradient * (array - 0.5)
            array[array < -0.9] = 0.0
    assert dynfuse.stats()["materializations"] == before and x._node.inputs
    assert_same(x, expected)


def test_a_masked_write_is_seen_through_views_and_not_by_what_was_computed_before():
    values = np.linspace(-1, 1, 200 * 100).reshape(200, 100)
    x = dynfuse.asarray(values.copy())
    column, before = x[:, 3], x * 2
    x[x < 0] = 7.0
    expected = values.copy()
    expected[expected < 0] = 7.0
    assert_same(column, expected[:, 3])
    assert_same(before, values * 2)
    assert_same(x, expected)


def test_masked_writes_that_are_not_one_value_of_the_target_shape_are_numpys():
    """A mask of leading axes only, a value per selected element, a lazy value of another dtype."""
    values = np.arange(24.0).reshape(4, 6)
    for mask_of, value in [
        (lambda a: a[:, 0] > 5, -1.0),
        (lambda a: a > 10, np.arange(13.0)),
        (lambda a: a > 10, dynfuse.asarray(np.float32(2.5))),
    ]:
        x, expected = dynfuse.asarray(values.copy()), values.copy()
        x[mask_of(x)] = value
        expected[mask_of(expected)] = np.asarray(value)
        assert_same(x, expected)
