"""Arrays built from their indices (tri, eye, identity, triu, tril, diag of a vector, indices) as expressions,
and diagonals as views: NumPy's results, fused with what reads them, never fallbacks."""

import numpy as np
import pytest

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import config, registry

from .helpers import assert_same

RNG = np.random.default_rng(3)
MATRIX = RNG.random((5, 4))
STACK = RNG.random((2, 3, 6, 5))

CALLS = {
    "triu above": lambda m, a: m.triu(a(MATRIX), 1),
    "tril": lambda m, a: m.tril(a(MATRIX)),
    "tril below": lambda m, a: m.tril(a(MATRIX), -2),
    "triu of a stack": lambda m, a: m.triu(a(STACK), -1),
    "tril of a vector": lambda m, a: m.tril(a(MATRIX[0])),
    "triu of bools": lambda m, a: m.triu(a(MATRIX > 0.5)),
    "triu of int8": lambda m, a: m.triu(a(MATRIX.astype(np.int8) + 1), 2),
    "eye": lambda m, a: m.eye(4),
    "eye, offset and dtype": lambda m, a: m.eye(3, 5, 1, dtype=np.int32),
    "eye, off the matrix": lambda m, a: m.eye(3, k=-7),
    "identity of bools": lambda m, a: m.identity(3, dtype=bool),
    "tri": lambda m, a: m.tri(3, 4, 1),
    "tri, empty": lambda m, a: m.tri(0, 3),
    "tri of float32": lambda m, a: m.tri(4, dtype=np.float32),
    "diagonal method": lambda m, a: a(MATRIX).diagonal(),
    "diagonal above": lambda m, a: m.diagonal(a(MATRIX), 1),
    "diagonal below": lambda m, a: m.diagonal(a(MATRIX), -2),
    "diagonal, empty": lambda m, a: m.diagonal(a(MATRIX), 7),
    "diagonal of a stack": lambda m, a: m.diagonal(a(STACK), 1, 3, 1),
    "diagonal, negative axes": lambda m, a: m.diagonal(a(STACK), -1, -1, 0),
    "diag of a matrix": lambda m, a: m.diag(a(MATRIX), 1),
    "diag of a vector": lambda m, a: m.diag(a(MATRIX[0]), -1),
    "diag of a vector, on the diagonal": lambda m, a: m.diag(a(MATRIX[1])),
    "diag of a vector, above": lambda m, a: m.diag(a(MATRIX[2] - 0.5), 3),
    "diag of ints": lambda m, a: m.diag(a(np.arange(-2, 3, dtype=np.int16)), 1),
    "diag of bools": lambda m, a: m.diag(a(MATRIX[0] > 0.5), -2),
    "diag of an empty vector": lambda m, a: m.diag(a(MATRIX[0, :0]), 2),
    "diag of a vector, then a product": lambda m, a: a(MATRIX) @ m.diag(a(MATRIX[0])),
    "diag of a 3-d array": lambda m, a: m.diag(a(STACK[0])),
    "indices": lambda m, a: m.indices((3, 4)),
    "indices of float32, three axes": lambda m, a: m.indices((2, 3, 4), dtype=np.float32),
    "indices, one axis": lambda m, a: m.indices((5,)),
    "indices, empty": lambda m, a: m.indices((2, 0, 3)),
    "indices, sparse": lambda m, a: sum(m.indices((3, 4), sparse=True)),
    "indices, distances": lambda m, a: np.hypot(*(m.indices((30, 40)) - 5.0)),
    "indices, negative size": lambda m, a: m.indices((-1, 2)),
    "indices of an iterator": lambda m, a: m.indices(iter([3, 2])),
    "indices of a float size": lambda m, a: m.indices([2.0, 3]),
    "triu then sum": lambda m, a: m.triu(a(MATRIX), 1).sum(),
    "plus a scaled identity": lambda m, a: a(MATRIX)[:4, :4] + 4 * m.eye(4),
    "trace of a stack": lambda m, a: (a(STACK) * 2).diagonal(0, 2, 3).sum(axis=-1),
    "eye, negative size": lambda m, a: m.eye(-1),
    "diagonal, one axis twice": lambda m, a: m.diagonal(a(MATRIX), 0, 1, 1),
    "tril of a 0-d array": lambda m, a: m.tril(a(np.float64(3))),
}


def _outcome(namespace, call, make):
    try:
        return call(namespace, make)
    except Exception as error:
        return type(error)


@pytest.mark.parametrize("direct", [False, True], ids=["recorded", "direct"])
@pytest.mark.parametrize("pending", [False, True], ids=["computed", "pending"])
@pytest.mark.parametrize("name", CALLS)
def test_index_built_arrays_and_diagonals_are_numpys(name, pending, direct, monkeypatch):
    monkeypatch.setattr(config, "tiers", direct)
    before = dynfuse.stats()["fallbacks"]

    def make(values):
        lazy = dnp.asarray(np.array(values, copy=True))
        return lazy + np.zeros((), lazy.dtype) if pending and lazy.dtype != bool else lazy

    expected = _outcome(np, CALLS[name], lambda values: values)
    actual = _outcome(dnp, CALLS[name], make)
    if isinstance(expected, type):
        assert actual is expected
        return
    if isinstance(actual, dynfuse.LazyArray):
        assert_same(actual, expected)
    else:  # a scalar NumPy's call made at once
        assert type(actual) is type(expected) and actual == expected
    assert dynfuse.stats()["fallbacks"] == before


def test_a_triangle_sum_reads_its_matrix_in_one_kernel(monkeypatch):
    """``np.triu(M, 1).sum()``: the mask from two small aranges, the select and the sum, one kernel."""
    monkeypatch.setattr(registry, "backend", "cpu")
    matrix = RNG.random((300, 200))
    before = dynfuse.stats()
    total = dnp.triu(dnp.asarray(matrix), 1).sum()
    assert_same(total, np.triu(matrix, 1).sum())
    after = dynfuse.stats()
    assert after["kernels_launched"] - before["kernels_launched"] == 1
    assert after["fallbacks"] == before["fallbacks"]


def test_an_identity_added_to_a_matrix_is_never_made(monkeypatch):
    monkeypatch.setattr(registry, "backend", "cpu")
    matrix = RNG.random((300, 300))
    before = dynfuse.stats()["kernels_launched"]
    shifted = dnp.asarray(matrix) + 300 * dnp.eye(300)
    assert_same(shifted, matrix + 300 * np.eye(300))
    assert dynfuse.stats()["kernels_launched"] - before == 1


@pytest.mark.parametrize("k", [0, 2, -3])
def test_a_diagonal_matrix_of_a_vector_is_never_made(k, monkeypatch):
    """``M + np.diag(v, k)``: one kernel (and, off the diagonal, the vector's join with its zeros)."""
    monkeypatch.setattr(registry, "backend", "cpu")
    matrix, vector = RNG.random((300, 300)), RNG.random(300 - abs(k))
    before = dynfuse.stats()
    shifted = dnp.asarray(matrix) + dnp.diag(dnp.asarray(vector), k)
    assert_same(shifted, matrix + np.diag(vector, k))
    after = dynfuse.stats()
    assert after["kernels_launched"] - before["kernels_launched"] == 1
    assert after["fallbacks"] == before["fallbacks"]


def test_an_index_grid_is_never_made(monkeypatch):
    """``(np.indices((n, m)) ** 2).sum()``: the grids picked from two small aranges, one kernel."""
    monkeypatch.setattr(registry, "backend", "cpu")
    before = dynfuse.stats()["kernels_launched"]
    total = (dnp.indices((300, 400)) ** 2).sum()
    assert_same(total, (np.indices((300, 400)) ** 2).sum())
    assert dynfuse.stats()["kernels_launched"] - before == 1


@pytest.mark.parametrize("direct", [False, True], ids=["recorded", "direct"])
def test_a_diagonal_is_a_read_only_view_and_an_eye_is_writable(direct, monkeypatch):
    monkeypatch.setattr(config, "tiers", direct)
    for namespace in (np, dnp):
        matrix = namespace.asarray(MATRIX.copy())
        with pytest.raises(ValueError, match="read-only"):
            matrix.diagonal()[0] = 1.0
    identity, expected = dnp.eye(3), np.eye(3)
    identity[0, 1] = expected[0, 1] = 5.0
    assert_same(identity, expected)


def test_triangles_and_diagonals_of_a_device_array_stay_on_its_device():
    reason = registry.unavailable_reason("cuda-emulator")
    if reason is not None:
        pytest.skip(reason)
    memory = registry.BACKENDS["cuda-emulator"].memory
    on_device = dynfuse.asarray(MATRIX.copy()).to(memory.name)
    calls = (
        lambda m, a: m.triu(a, 1),
        lambda m, a: m.tril(a[0], -1),
        lambda m, a: m.diagonal(a, 1),
        lambda m, a: m.diag(a[1], -2),
    )
    for call in calls:
        result = call(dnp, on_device)
        assert result.device == memory.name
        np.testing.assert_array_equal(np.asarray(result), call(np, MATRIX))
