"""The host pool: large outputs reuse freed blocks, within the bound; the blocks go back to the
system on demand, when idle and when memory runs out; and no block is handed out while an array or
view of it lives, across threads and in a forked child. Results stay NumPy's."""

import contextlib
import multiprocessing
import sys
import threading
import time

import numpy as np
import pytest

import dynfuse
from dynfuse import config, host_pool, registry

from .helpers import held_by_another_thread

MIB = 1 << 20
N = 1 << 21  # float32 elements: 8 MiB, pooled, and split across threads


@pytest.fixture(autouse=True)
def empty_pool(monkeypatch):
    monkeypatch.setattr(config, "pool_memory", 64 * MIB)
    monkeypatch.setattr(registry, "backend", "cpu")
    dynfuse.free_pool()
    dynfuse.reset_stats()
    yield
    dynfuse.free_pool()


def data(n=N, seed=0):
    return np.random.default_rng(seed).standard_normal(n, dtype=np.float32)


def chain(x):
    return np.maximum(x * 2, 0) + 1


def lease_of(array):
    """What holds an array's memory: the last of its bases."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array.base


def pool_counts():
    found = dynfuse.stats()
    return found["pool_hits"], found["pool_misses"], found["pool_bytes"]


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def test_size_classes_hold_the_size_in_whole_pages_an_eighth_over_at_most():
    for nbytes in [MIB, MIB + 1, 3 * MIB + 12345, 64 * MIB, 64 * MIB + 1, 1000 * MIB + 7]:
        size = host_pool.size_class(nbytes)
        assert nbytes <= size <= nbytes * 1.125 + 4096 and size % 4096 == 0
    assert host_pool.size_class(64 * MIB - 4) == host_pool.size_class(64 * MIB) == 64 * MIB


def test_a_loop_of_same_size_outputs_allocates_once():
    x = data()
    lazy = dynfuse.asarray(x)
    for _ in range(10):
        result = np.asarray(chain(lazy))
        assert type(lease_of(result)).__name__ == "_Lease"
        assert result.ctypes.data % host_pool.ALIGNMENT == 0
        np.testing.assert_array_equal(result, chain(x))
        del result
    assert pool_counts() == (9, 1, host_pool.size_class(x.nbytes))
    assert dynfuse.stats()["fallbacks"] == 0
    dynfuse.reset_stats()  # counts start again; the bytes kept are read, not counted
    assert pool_counts() == (0, 0, host_pool.size_class(x.nbytes))


@pytest.mark.parametrize(
    ("name", "program", "pooled"),
    [
        ("chain", chain, True),
        ("copy", lambda x: x.copy(), True),
        ("cast", lambda x: x.astype(np.float64), True),
        ("columns sliced", lambda x: x.reshape(1024, -1)[:, 1:] * 2, True),  # C order, strided
        ("rows reversed", lambda x: x.reshape(1024, -1)[::-1] - 1, True),
        ("transposed copy", lambda x: x.reshape(1024, -1).T.copy(), False),  # not in C order
        ("transposed sum", lambda x: x.reshape(1024, -1).T + 1, False),
        ("broadcast row", lambda x: x.reshape(1024, -1) + x[:2048], False),  # nor this
    ],
)
def test_large_values_the_reference_executor_computes_come_from_the_pool(name, program, pooled, monkeypatch):
    """Interpreted (the reference executor's NumPy calls), a large elementwise value is computed
    into a pooled block as a kernel's output is, where every array it reads is of its shape with
    its axes in C order, so NumPy's result would be C-contiguous: a loop of them faults its pages
    once. Values and dtypes stay NumPy's, and a pooled result's layout."""
    monkeypatch.setattr(registry, "backend", "numpy")
    x = data()
    expected = program(x)
    for _ in range(3):
        result = np.asarray(program(dynfuse.asarray(x)))
        np.testing.assert_array_equal(result, expected)
        assert result.dtype == expected.dtype
        assert (type(lease_of(result)).__name__ == "_Lease") == pooled, name
        assert result.strides == expected.strides or not pooled
        del result
    assert (pool_counts()[0] > 0) == pooled  # blocks reused from the second run


@pytest.mark.parametrize("nbytes, pooled", [(host_pool.INTERPRETED_MIN_BYTES, True), (64 << 10, False)])
def test_the_reference_executor_pools_its_values_from_where_malloc_maps_them(nbytes, pooled, monkeypatch):
    """Values of ``INTERPRETED_MIN_BYTES`` or more (glibc maps them, and the system faults them in
    at every run) come from the pool when the reference executor computes them, though a kernel's
    output of that size is NumPy's; smaller ones are NumPy's."""
    monkeypatch.setattr(registry, "backend", "numpy")
    x = data(nbytes // 4)
    assert nbytes < host_pool.MIN_BYTES
    for _ in range(3):
        result = np.asarray(chain(dynfuse.asarray(x)))
        np.testing.assert_array_equal(result, chain(x))
        assert (type(lease_of(result)).__name__ == "_Lease") == pooled
        del result
    assert (pool_counts()[0] > 0) == pooled


@pytest.mark.parametrize("transposed", [False, True])
def test_the_reference_executor_fills_a_large_roll_from_the_pool_in_numpys_layout(transposed, monkeypatch):
    """A roll's value (copied blocks, as NumPy's) fills an array of the pool where NumPy's would be
    C-ordered, and the op reading it last may compute into it; of another layout it is NumPy's own
    array, with NumPy's strides."""
    monkeypatch.setattr(registry, "backend", "numpy")
    x = data(1 << 16).reshape(256, 256)
    x = x.T if transposed else x
    for _ in range(3):
        rolled, expected = np.asarray(np.roll(dynfuse.asarray(x), 3, axis=1)), np.roll(x, 3, axis=1)
        np.testing.assert_array_equal(rolled, expected)
        assert rolled.strides == expected.strides
        assert (type(lease_of(rolled)).__name__ == "_Lease") == (not transposed)
        summed = np.asarray(np.roll(dynfuse.asarray(x), -5, axis=0) * 2 + x)
        np.testing.assert_array_equal(summed, np.roll(x, -5, axis=0) * 2 + x)
        del rolled, summed
    assert (pool_counts()[0] > 0) == (not transposed)


def test_small_arrays_and_a_disabled_pool_are_numpy_s_own(monkeypatch):
    assert host_pool.empty((1000,), np.dtype(np.float64)).base is None
    monkeypatch.setattr(config, "pool_memory", 0)
    x = data()
    result = np.asarray(chain(dynfuse.asarray(x)))
    assert lease_of(result) is None
    np.testing.assert_array_equal(result, chain(x))
    assert pool_counts() == (0, 0, 0)


def test_no_block_is_handed_out_while_an_array_or_view_of_it_lives():
    x = data()
    lazy = dynfuse.asarray(x)
    expected = chain(x)
    result = np.asarray(chain(lazy))
    view, raw, transposed = result[1::3], memoryview(result[5:]), result.reshape(-1, 4).T
    kept_lazy = chain(lazy) * 3  # a lazy array the program holds, then a lazy view of it alone
    np.asarray(kept_lazy)
    lazy_view = kept_lazy[::2]
    del result, kept_lazy
    for _ in range(4):  # same-size outputs, each filled: none may land on memory still held
        fresh = np.asarray(chain(lazy) - 7)
        assert not any(np.shares_memory(fresh, held) for held in (view, np.asarray(raw), transposed))
        assert not np.shares_memory(fresh, np.asarray(lazy_view))
        del fresh
    np.testing.assert_array_equal(view, expected[1::3])
    np.testing.assert_array_equal(np.asarray(raw), expected[5:])
    np.testing.assert_array_equal(transposed, expected.reshape(-1, 4).T)
    np.testing.assert_array_equal(np.asarray(lazy_view), (expected * 3)[::2])
    hits, misses, _ = pool_counts()
    assert misses == 3 and hits == 3  # three blocks held; the fresh outputs took turns on the third
    del view, raw, transposed, lazy_view
    assert pool_counts()[2] == 3 * host_pool.size_class(x.nbytes)


@pytest.mark.parametrize("maker", ["C", "NumPy"])
def test_an_array_on_a_block_is_a_c_contiguous_writeable_array_based_on_its_lease(maker, monkeypatch):
    """Made in C (``leased_array``) or by NumPy from the lease's ``__array_interface__``: the same
    array, whose death gives the block back."""
    if maker == "NumPy":
        monkeypatch.setattr(host_pool, "leased_array", None)
    elif host_pool.leased_array is None:
        pytest.skip("the C launcher is not built")
    array = host_pool.empty((1000, 300), np.dtype(np.float32))
    lease = array.base
    assert type(lease) is host_pool._Lease and array.shape == (1000, 300) and array.dtype == np.float32
    assert array.flags.c_contiguous and array.flags.writeable and array.flags.aligned
    assert array.ctypes.data % host_pool.ALIGNMENT == 0
    array[...] = 2.5
    np.testing.assert_array_equal(np.asarray(lease), array)  # the interface names the same memory
    address = array.ctypes.data
    del array, lease
    assert host_pool.empty((1000, 300), np.dtype(np.float32)).ctypes.data == address


def test_an_array_owns_its_pooled_memory_as_it_would_numpy_s():
    """As the pressure count reads it (a view of the array holds the array, and counts there)."""
    pooled = host_pool.empty((N,), np.dtype(np.float32))
    assert host_pool.owns_memory(pooled) and host_pool.owns_memory(np.empty(3))
    assert not host_pool.owns_memory(pooled[1:]) and not host_pool.owns_memory(np.empty(3)[1:])
    again = np.asarray(pooled.base)  # another array on the same lease
    assert not host_pool.owns_memory(pooled) and not host_pool.owns_memory(again)
    del again
    assert host_pool.owns_memory(pooled)


def test_the_free_blocks_kept_stay_within_the_bound(monkeypatch):
    monkeypatch.setattr(config, "pool_memory", 20 * MIB)
    arrays = [host_pool.empty((N,), np.dtype(np.float32)) for _ in range(4)]  # 8 MiB each
    del arrays
    assert pool_counts()[2] == 16 * MIB  # two kept: a third would pass 20 MiB
    larger = host_pool.empty((4 * N,), np.dtype(np.float32))  # 32 MiB: never kept, not leased
    assert larger.base is None


def test_free_pool_gives_the_memory_back_to_the_system(monkeypatch):
    monkeypatch.setattr(config, "pool_memory", 256 * MIB)
    block = host_pool.empty((64 * MIB,), np.dtype(np.uint8))
    block.fill(1)
    del block
    assert pool_counts()[2] == 64 * MIB
    before = resident_bytes()
    assert dynfuse.free_pool() == 64 * MIB
    assert pool_counts()[2] == 0
    assert before - resident_bytes() > 48 * MIB


def test_blocks_not_reused_for_a_while_are_released(monkeypatch):
    monkeypatch.setattr(host_pool, "IDLE_SECONDS", 0.05)
    host_pool.empty((N,), np.dtype(np.float32))  # dropped at once
    assert pool_counts()[2] == host_pool.size_class(4 * N)
    time.sleep(0.1)
    other = host_pool.empty((2 * N,), np.dtype(np.float32))  # another size: the idle block goes
    assert pool_counts()[2] == 0
    del other


def test_running_out_of_memory_releases_the_pool_and_tries_again(monkeypatch):
    x, y = data(), data(2 * N, seed=1)
    np.asarray(chain(dynfuse.asarray(x)))  # its block is kept
    assert pool_counts()[2] > 0
    system_memory = host_pool._system_memory
    refusals = []

    def scarce(nbytes):  # the system has memory only once the pool has let go of its own
        if host_pool.held_bytes():
            refusals.append(nbytes)
            raise MemoryError
        return system_memory(nbytes)

    monkeypatch.setattr(host_pool, "_system_memory", scarce)
    np.testing.assert_array_equal(np.asarray(chain(dynfuse.asarray(y))), chain(y))
    assert len(refusals) == 1 and dynfuse.stats()["fallbacks"] == 0

    def exhausted(nbytes):
        raise MemoryError

    monkeypatch.setattr(host_pool, "_system_memory", exhausted)
    with pytest.raises(MemoryError):  # the program's to handle, as NumPy's would be
        np.asarray(chain(dynfuse.asarray(data(3 * N))))
    assert dynfuse.stats()["fallbacks"] == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_a_long_loop_keeps_its_resident_memory_flat():
    x = data(4 * N)  # 32 MiB outputs
    lazy = dynfuse.asarray(x)
    expected = chain(x)
    for step in range(60):
        result = np.asarray(chain(lazy))
        if step == 10:
            settled = resident_bytes()
    grown = resident_bytes() - settled
    np.testing.assert_array_equal(result, expected)
    assert grown < 8 * MIB
    hits, misses, _ = pool_counts()
    assert misses == 2 and hits == 58  # the result held while the next is computed: two blocks


def test_threads_allocating_and_freeing_never_share_a_block():
    """Each thread fills its arrays with its own pattern and checks them before letting go: a block
    handed out twice would show another thread's pattern."""
    x = data()
    expected = chain(x)
    lazy = dynfuse.asarray(x)
    errors = []
    start = threading.Barrier(4)

    def work(number):
        try:
            start.wait()
            held = []
            for step in range(30):
                size = (N, N + 4096, 2 * N)[(number + step) % 3]
                array = host_pool.empty((size,), np.dtype(np.float32))
                array.fill(number * 1000 + step)
                held.append((array, number * 1000 + step))
                if step % 5 == 0:
                    result = np.asarray(chain(lazy))
                    if not np.array_equal(result, expected):
                        errors.append(f"thread {number}: a wrong result")
                if len(held) > 3:
                    old, value = held.pop(0)
                    if not (old == value).all():
                        errors.append(f"thread {number}: its array was overwritten")
        except Exception as error:  # reported below, in the test's thread
            errors.append(repr(error))

    threads = [threading.Thread(target=work, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    hits, misses, held_bytes = pool_counts()
    assert hits > misses and held_bytes <= config.pool_memory


# ---- a forked child --------------------------------------------------------------------------------

held_by_parent = None


def compute_in_child(n):
    """In the forked child: what its pool holds at first, then a same-size output computed."""
    kept = dynfuse.stats()["pool_bytes"]
    x = data(n)
    result = np.asarray(chain(dynfuse.asarray(x)))
    return (
        kept,
        bool(np.array_equal(result, chain(x))),
        bool(np.shares_memory(result, held_by_parent)),
        bool(np.array_equal(held_by_parent, chain(x))),
    )


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
@pytest.mark.parametrize("lock_held", [False, True])
def test_a_forked_child_starts_with_an_empty_pool(lock_held):
    """The child drops the free lists (and a lock another thread held): it never hands out a block
    its arrays inherited from the parent still use, and computes right."""
    global held_by_parent
    x = data()
    lazy = dynfuse.asarray(x)
    held_by_parent = np.asarray(chain(lazy))
    np.asarray(chain(lazy))  # a second block, free in the parent as the child is forked
    assert pool_counts()[2] > 0
    holding = held_by_another_thread(host_pool._lock) if lock_held else contextlib.nullcontext()
    with holding, multiprocessing.get_context("fork").Pool(1) as pool:
        kept, right, shared, parent_intact = pool.apply_async(compute_in_child, (N,)).get(timeout=120)
    assert kept == 0 and right and not shared and parent_intact
    held_by_parent = None
