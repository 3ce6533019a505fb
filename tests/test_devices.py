"""Devices: arrays live on a device, stay there between materializations and move only when asked.

Arrays that live on a device: ``asarray(x, device=...)``, ``.device``, ``.to()``, results kept
on the device between materializations, host copies only when asked for, and a clear error for an
op that mixes devices.

Every test runs on each device: the emulated CUDA device (``cuda-emulator``); the GPU device's own
code (``cupy_device``) on CuPy's interface emulated (``emulated_cupy``), which CI runs; and, marked
``gpu``, a GPU through CuPy. The emulated arrays behave as CuPy's where dynfuse relies on it: a host
function that reached one would fail here as on a GPU."""

import pickle
import warnings

import numpy as np
import pytest

import dynfuse
from dynfuse import config, registry
from dynfuse.backends import cuda, cuda_emulator
from dynfuse.testing import faults

from . import emulated_cupy
from .helpers import assert_same

NO_COMPILER = pytest.mark.skipif(
    cuda_emulator.compiler() is None, reason="no C++ compiler with _Float16 to emulate a CUDA device"
)


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("cuda-emulator", marks=NO_COMPILER),
        pytest.param("cuda on emulated CuPy", marks=NO_COMPILER),
        pytest.param("cuda", marks=pytest.mark.gpu),
    ],
)
def device(request):
    """The device's memory (``devices.Memory``), ready for arrays."""
    if request.param == "cuda-emulator":
        yield cuda.EMULATOR.device
    elif request.param == "cuda":
        reason = cuda.BACKEND.unavailable_reason()
        if reason is not None:
            pytest.skip(reason)
        yield cuda.BACKEND.device
    else:
        with emulated_cupy.installed() as installed:
            yield installed


def on_device(values, device):
    return dynfuse.asarray(values, device=device.name)


def assert_on_device(array, device):
    """The array is on the device, and so are its values, once computed."""
    assert array.device == device.name
    dynfuse.evaluate(array)
    assert device.owns(array._node.buffer)


def data(shape=(64, 96), dtype=np.float32, seed=0):
    return np.random.default_rng(seed).uniform(-3, 3, shape).astype(dtype)


# ---- placing arrays --------------------------------------------------------------------------------


def test_a_periodic_stencil_of_rolls_runs_on_the_device(device):
    """Rolls read through wrapping loads in the device's kernel: the result stays there."""
    host = data()
    array = on_device(host, device)
    result = np.roll(array, 1, 0) + np.roll(array, -2, 1) * 2 - np.roll(array * 3, (5, 7), (0, 1)).sum(axis=0)
    assert_on_device(result, device)
    expected = np.roll(host, 1, 0) + np.roll(host, -2, 1) * 2 - np.roll(host * 3, (5, 7), (0, 1)).sum(axis=0)
    np.testing.assert_allclose(np.asarray(result), expected, rtol=1e-5, atol=1e-4)


def test_asarray_puts_a_copy_on_the_device_and_numpy_asarray_copies_it_back(device):
    host = data()
    array = on_device(host, device)
    assert array.device == device.name and array.shape == host.shape and array.dtype == host.dtype
    host[0, 0] = 100  # a copy was taken
    back = np.asarray(array)
    assert type(back) is np.ndarray and back[0, 0] != 100
    back[0, 1] = 100  # and a copy is given
    assert np.asarray(array)[0, 1] != 100
    with pytest.raises(ValueError, match="avoid copy"):
        np.asarray(array, copy=False)


def test_a_device_array_is_wrapped_without_a_copy(device):
    device_array = device.from_host(data())
    array = dynfuse.asarray(device_array)
    assert array.device == device.name and array._node.buffer is device_array
    assert_same(array + 1, device_array.get() + 1)


def test_to_moves_and_returns_the_array_itself_where_it_is(device):
    host = dynfuse.asarray(data())
    assert host.device == "cpu" and host.to("cpu") is host
    moved = host.to(device.name)
    assert moved.device == device.name and moved.to(device.name) is moved
    assert moved.to_device(device.name) is moved and moved.to(device) is moved  # a name, or the memory
    assert_same(moved.to("cpu"), data())
    assert dynfuse.asarray(moved, device="cpu").device == "cpu"
    assert dynfuse.asarray(host, device=device.name).device == device.name


def test_unknown_and_unavailable_devices_raise_value_error(device):
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        dynfuse.asarray([1, 2], device="tpu")
    if registry.unavailable_reason("cuda") is not None:
        with pytest.raises(ValueError, match="'cuda' is not available"):
            dynfuse.asarray([1, 2], device="cuda")


def test_printing_and_pickling_a_device_array(device):
    array = on_device(np.arange(3, dtype=np.int32), device)
    assert repr(array) == f"LazyArray([0, 1, 2], dtype=int32, device='{device.name}')"
    assert str(array * 2) == "[0 2 4]"
    assert array[1].item() == 1 and array.tolist() == [0, 1, 2] and int(array.sum()) == 3
    restored = pickle.loads(pickle.dumps(array * 2))
    assert restored.device == device.name
    assert_same(restored, np.arange(3, dtype=np.int32) * 2)


# ---- computing on the device ------------------------------------------------------------------------

PROGRAMS = {
    "chain": lambda x, y: np.tanh(x * 0.5 + y) ** 2 - np.float32(1.5),
    "rows": lambda x, y: (x * y).sum(axis=1),
    "columns": lambda x, y: np.maximum(x, y).max(axis=0),
    "softmax": lambda x, y: (
        np.exp(x - x.max(axis=1, keepdims=True))
        / np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)
    ),
    "views": lambda x, y: x[::2, 1:].T * y[1::2, :-1].T + x[:32, 0],
    "whole": lambda x, y: (x - y).mean() + np.sqrt(np.abs(y)).std(),
    "barrier": lambda x, y: np.tanh(x @ y.T) + 1,
    "scan": lambda x, y: np.cumsum(x * y, axis=1),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_programs_run_on_the_device_as_numpy_runs_them(device, name):
    x, y = data(seed=1), data(seed=2)
    result = PROGRAMS[name](on_device(x, device), on_device(y, device))
    assert_on_device(result, device)
    counted = dynfuse.stats()
    assert counted["kernels_launched"] > 0 and counted["fallbacks"] == 0
    expected = PROGRAMS[name](x, y)
    np.testing.assert_allclose(np.asarray(result), expected, rtol=2e-5, atol=1e-5 * np.abs(expected).max())


def test_results_stay_on_the_device_between_materializations(device):
    x = on_device(data(), device)
    y = np.exp(x) + 1
    dynfuse.evaluate(y)
    z = (y * 2).sum(axis=0)  # reads y's device buffer
    assert_on_device(y, device)
    assert_on_device(z, device)
    assert_same(z, ((np.exp(data()) + 1) * 2).sum(axis=0), max_ulp=64)


def test_repeated_traces_replay_on_the_device(device):
    host = data((8, 8))
    for step in range(30):
        result = on_device(host, device) * step + 1
        assert_same(result, host * step + 1)
    assert dynfuse.stats()["replays"] > 0


def test_traces_with_numpy_scalars_replay_on_the_device(device):
    """A NumPy scalar (``mean``'s count, a float32 factor) is put on the device at each launch: the
    trace still replays, with each call's own scalar."""
    host = data((6, 5))
    x = on_device(host, device)
    for factor in (2.0, 3.0, 4.0):
        dynfuse.reset_stats()
        normalized = (x - x.mean(axis=1, keepdims=True)) * np.float32(factor)
        expected = (host - host.mean(axis=1, keepdims=True)) * np.float32(factor)
        np.testing.assert_allclose(np.asarray(normalized), expected, rtol=1e-5, atol=1e-5)
    assert dynfuse.stats()["replays"] == 1


def test_numpy_scalars_and_python_scalars_go_with_the_device(device):
    x = on_device(data(), device)
    result = x * np.float32(2) + np.sqrt(np.float64(2)) - 1
    assert_on_device(result, device)
    assert_same(result, data() * np.float32(2) + np.sqrt(np.float64(2)) - 1)


def test_the_reference_backend_runs_device_arrays_on_host_copies(device, monkeypatch):
    monkeypatch.setattr(registry, "backend", "numpy")
    result = np.exp(on_device(data(), device)).sum(axis=0) @ on_device(data((96, 4)), device)
    assert_on_device(result, device)
    assert dynfuse.stats()["kernels_launched"] == 0
    assert_same(result, np.exp(data()).sum(axis=0) @ data((96, 4)), max_ulp=64)


def test_a_failing_plan_falls_back_on_host_copies_and_stays_on_the_device(device):
    x = on_device(data(), device)
    with (
        faults.injected_faults(1.0, backend=device.name),
        pytest.warns(RuntimeWarning, match="planning failed"),
    ):
        result = np.exp(x) * 2
        assert_on_device(result, device)
    assert dynfuse.stats()["fallbacks"] == 1
    assert_same(result, np.exp(data()) * 2)


def test_a_failing_device_launch_falls_back_on_host_copies_and_stays_on_the_device(device, monkeypatch):
    def refused(*arguments):
        raise RuntimeError("simulated: the launch failed")

    monkeypatch.setattr(device, "launch", refused)
    x, y = on_device(data(), device), on_device(data(seed=3), device)
    with pytest.warns(RuntimeWarning, match=f"{device.name} kernel failed"):
        result = (np.exp(x) * y).sum(axis=1) + x[:, 0]
        assert_on_device(result, device)
    assert dynfuse.stats()["fallbacks"] >= 1
    assert_same(result, (np.exp(data()) * data(seed=3)).sum(axis=1) + data()[:, 0], max_ulp=64)


def test_a_kernel_the_device_cannot_compile_falls_back_on_host_copies(device, monkeypatch):
    def refused(source):
        raise RuntimeError("simulated: the compiler failed")

    monkeypatch.setattr(device, "load", refused)
    monkeypatch.setattr(config, "disk_cache", False)
    dynfuse.replay.clear_kernels()
    x = on_device(data(), device)
    with pytest.warns(RuntimeWarning, match=f"{device.name} kernel failed.*simulated: the compiler failed"):
        result = np.sqrt(np.abs(x)) * 3
        assert_on_device(result, device)
    assert dynfuse.stats()["fallback_names"] == {f"kernel:{device.name}": 1}
    assert_same(result, np.sqrt(np.abs(data())) * 3)
    dynfuse.replay.clear_kernels()


def test_unrecorded_functions_run_on_host_copies_and_come_back_to_the_device(device):
    x = on_device(data(), device)
    result = np.sort(x * 2, axis=1)
    assert_on_device(result, device)
    assert dynfuse.stats()["fallbacks"] == 1
    assert_same(result, np.sort(data() * 2, axis=1))
    target = on_device(np.zeros_like(data()), device)
    np.copyto(target, x + 1)  # written through a host copy, then copied back
    assert_on_device(target, device)
    assert_same(target, data() + 1)
    out = on_device(np.zeros(96, np.float32), device)
    np.add.reduce(x, axis=0, out=out)
    assert_same(out, np.add.reduce(data(), axis=0), max_ulp=64)


def test_writes_on_the_device_keep_numpy_aliasing(device):
    host = data((6, 5))
    x = on_device(host, device)
    view = x[1:]
    before = view * 2
    x[1] = 100  # before must keep the values from before the write
    x[2, :2] = np.array([7, 8], np.float32)  # host values are copied to the device
    x[3] = [1, 2, 3, 4, 5]
    expected = host.copy()
    expected_before = expected[1:] * 2
    expected[1], expected[2, :2], expected[3] = 100, [7, 8], [1, 2, 3, 4, 5]
    assert_same(before, expected_before)
    assert_same(view, expected[1:])
    assert_same(x, expected)
    x += 1  # in place, lazily
    assert_same(x, expected + 1)


@pytest.mark.parametrize("tiers", [True, False], ids=["interpreted on the host", "planned"])
@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_views_computed_with_their_base_see_later_writes_to_it(device, monkeypatch, tiers, shape):
    """Views materialized with their base share its memory on the device, however they were
    computed (small work runs on the host and comes back): a later write reaches them, as in NumPy."""
    monkeypatch.setattr(config, "tiers", tiers)
    base = on_device(np.zeros(shape, np.float32), device).copy()
    expected = np.zeros(shape, np.float32)
    views = [base.T, np.expand_dims(base, 0), base.reshape(-1), np.squeeze(base)]
    expected_views = [expected.T, np.expand_dims(expected, 0), expected.reshape(-1), np.squeeze(expected)]
    for view, expected_view in zip(views, expected_views, strict=True):
        assert_same(view, expected_view)
    base += 1
    expected += 1
    for view, expected_view in zip(views, expected_views, strict=True):
        assert_same(view, expected_view)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_negative_zeros_keep_their_sign_on_the_way_to_the_device_and_back(device, dtype):
    for shape in [(), (3,)]:
        zeros = np.full(shape, -0.0, dtype)
        there = on_device(zeros, device)
        assert np.signbit(np.asarray(there)).all()
        assert_same(np.negative(np.negative(there)), zeros)  # through a kernel
        assert_same(there * on_device(np.ones(shape, bool), device), zeros * np.ones(shape, bool))


# ---- mixing devices -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mix",
    [
        lambda there, host: there + host,
        lambda there, host: np.add(host, there),
        lambda there, host: np.where(there > 0, host, 0),
        lambda there, host: np.concatenate([there, host]),
        lambda there, host: there @ host.T,
        lambda there, host: np.sort(np.stack([there, host])),
        lambda there, host: there * np.asarray(host),
    ],
)
def test_an_op_that_mixes_devices_raises_type_error_where_it_is_written(device, mix):
    there, host = on_device(data(), device), dynfuse.asarray(data())
    with pytest.raises(TypeError, match="different devices"):
        mix(there, host)


def test_a_write_from_another_device_raises_and_changes_nothing(device):
    there, host = on_device(data(), device), dynfuse.asarray(data())
    with pytest.raises(TypeError, match="different devices"):
        host += there
    with pytest.raises(TypeError, match="different devices"):
        there[0] = host[0]
    with pytest.raises(TypeError, match="different devices"):
        np.add(there, 1, out=host)
    assert_same(host, data())
    assert_same(there, data())


# ---- a host trace given to the device's backend -------------------------------------------------------


def test_host_arrays_run_on_device_copies_under_a_device_backend(device, monkeypatch):
    monkeypatch.setattr(registry, "backend", device.name)
    monkeypatch.setattr(config, "tiers", False)
    host = dynfuse.asarray(data())
    result = np.exp(host).sum(axis=1)
    dynfuse.evaluate(result)
    assert result.device == "cpu" and type(result._node.buffer) is np.ndarray
    assert dynfuse.stats()["kernels_launched"] > 0
    assert_same(result, np.exp(data()).sum(axis=1), max_ulp=64)


def test_views_of_host_arrays_under_a_device_backend_stay_views(device, monkeypatch):
    """A view of a host array computed with kernels on the device is still a view of the host
    array: a later write into the array reaches it."""
    monkeypatch.setattr(registry, "backend", device.name)
    host = data((4, 3))
    x = dynfuse.asarray(host)
    flipped = x.T[::-1]
    largest = flipped.max()
    x[...] *= largest
    assert_same(flipped, host.T[::-1])
    assert np.shares_memory(np.asarray(flipped), host)


def test_stats_and_warnings_are_clean_on_the_device(device):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(np.abs(on_device(data(), device)) + 1, np.abs(data()) + 1)
    assert dynfuse.stats()["fallbacks"] == 0


def test_floating_point_errors_of_device_kernels_warn_and_raise_as_numpy(device):
    """A device keeps no IEEE flags: its kernels judge their values, and NumPy says what it would."""
    host = np.array([1.0, 0.0, -1.0, 4.0])
    x = on_device(host, device)
    with pytest.warns(RuntimeWarning) as expected:
        np.log(host * 1.0) / (host - 1.0)
    with pytest.warns(RuntimeWarning) as caught:
        values = np.log(x * 1.0) / (x - 1.0)
        dynfuse.evaluate(values)
    messages = sorted(str(warning.message) for warning in caught)
    assert messages == sorted(str(warning.message) for warning in expected) and len(messages) == 3
    assert_on_device(values, device)
    with np.errstate(all="ignore"):
        assert_same(values, np.log(host) / (host - 1.0))
    with np.errstate(over="raise"), pytest.raises(FloatingPointError, match="overflow encountered in exp"):
        dynfuse.evaluate(np.exp(x * 1000.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            dynfuse.evaluate(np.sqrt(x - 2.0) // 0.0)  # flags no op heeds: not read, and cleared
        reruns = dynfuse.stats()["float_error_reruns"]
        dynfuse.evaluate(np.sqrt(x + 2.0) * 3.0)
    assert dynfuse.stats()["float_error_reruns"] == reruns
    assert dynfuse.stats()["kernels_launched"] >= 3 and dynfuse.stats()["fallbacks"] == 0


def test_explain_plans_a_device_array_for_its_device_backend(device):
    result = np.exp(on_device(data(), device)) + 1
    assert f"plan on backend '{device.name}'" in dynfuse.explain(result)
    assert dynfuse.kernel_sources(result) == dynfuse.kernel_sources(result, backend="cuda")
    assert "plan on backend 'cpu'" in dynfuse.explain(np.exp(dynfuse.asarray(data())))


def test_creation_functions_take_a_device_and_like_functions_follow_their_prototype(device):
    from dynfuse import numpy as dnp

    zeros = dnp.zeros((3, 4), dtype=np.float32, device=device.name)
    assert zeros.device == device.name
    like = dnp.ones_like(zeros)
    assert like.device == device.name
    assert_same(like + zeros, np.ones((3, 4), np.float32))
    assert dnp.full_like(zeros, 2, device="cpu").device == "cpu"
    assert dnp.asarray([1, 2], device=device.name).device == device.name
    assert dnp.astype(zeros, np.int32, device="cpu").device == "cpu"


def test_checks_that_read_values_read_them_on_the_host(device):
    base = on_device(np.array([1, 2, 3]), device)
    assert_same(base**base, np.array([1, 4, 27]))
    with pytest.raises(ValueError, match="Integers to negative integer powers"):
        base ** (base - 5)
    assert_same(
        np.add.outer(base, device.from_host(np.arange(2))),
        np.add.outer([1, 2, 3], np.arange(2)),
    )
    scanned = dynfuse.numpy.cumsum(device.from_host(np.arange(4)))  # a CuPy-like array as such
    assert scanned.device == device.name
    assert_same(scanned, np.cumsum(np.arange(4)))


# ---- library calls on the device ----------------------------------------------------------------------


def test_library_calls_run_in_the_devices_library_without_host_copies(device, monkeypatch):
    x, y = on_device(data(), device), on_device(data(seed=2), device)
    dynfuse.evaluate(x, y)

    def refused(array):
        raise AssertionError("a host copy")

    monkeypatch.setattr(device, "to_host", refused)
    result = np.tanh(x @ y.T) + np.median(x, axis=1)[:, None] + np.concatenate([x, y]).sum()
    assert_on_device(result, device)
    monkeypatch.undo()
    assert dynfuse.stats()["fallbacks"] == 0
    expected = np.tanh(data() @ data(seed=2).T) + np.median(data(), axis=1)[:, None]
    expected += np.concatenate([data(), data(seed=2)]).sum()
    np.testing.assert_allclose(np.asarray(result), expected, rtol=2e-5, atol=1e-3)


def test_cupy_hands_over_the_array_on_cuda_without_a_copy(device):
    x = on_device(data(), device) * 2
    host = dynfuse.asarray(data())
    assert not hasattr(host, "__cuda_array_interface__")
    with pytest.raises(ValueError, match="cupy: the array is on device 'cpu', not 'cuda'"):
        host.cupy()
    if device.name != "cuda":
        with pytest.raises(ValueError, match=f"on device '{device.name}'"):
            x.cupy()
        return
    handed = x.cupy()
    assert device.owns(handed) and handed is x._node.buffer
    assert_same(x, data() * 2)
    handed[0, 0] = 5  # the array's own memory, as numpy() gives a host array's
    assert float(x[0, 0]) == 5
