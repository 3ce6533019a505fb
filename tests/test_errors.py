"""Bad input raises NumPy's exception type, at the line that caused it, and changes nothing."""

import numpy as np
import pytest

import dynfuse

from .helpers import assert_same

dnp = dynfuse.numpy

# Each case runs once on NumPy arrays with the numpy namespace, once on lazy arrays with
# dynfuse.numpy: (name, function(asarray, xp), text the lazy error message must contain).
CASES = [
    ("broadcast", lambda a, xp: a(np.ones(3)) + a(np.ones(4)), "(3,) (4,)"),
    ("broadcast 2-d", lambda a, xp: xp.maximum(a(np.ones((2, 3))), a(np.ones((3, 2)))), "maximum"),
    ("where broadcast", lambda a, xp: xp.where(a(np.ones(3) > 0), a(np.ones(2)), 0), "where"),
    ("axis out of range", lambda a, xp: a(np.ones(3)).sum(axis=2), "axis 2"),
    ("negative axis out of range", lambda a, xp: xp.mean(a(np.ones((2, 2))), axis=-3), "axis -3"),
    ("repeated axis", lambda a, xp: a(np.ones((2, 2))).sum(axis=(0, 0)), "repeated axis"),
    ("argmax tuple axis", lambda a, xp: xp.argmax(a(np.ones((2, 2))), axis=(0, 1)), ""),
    ("empty max", lambda a, xp: a(np.ones((0, 3))).max(axis=0), "zero-size array"),
    ("empty argmin", lambda a, xp: a(np.ones(0)).argmin(), "empty"),
    ("bad dtype", lambda a, xp: a(np.ones(3)).astype("not a dtype"), "not a dtype"),
    ("safe cast", lambda a, xp: a(np.ones(3)).astype(np.int32, casting="safe"), "safe"),
    ("bool subtract", lambda a, xp: a(np.ones(3, bool)) - a(np.ones(3, bool)), "subtract"),
    ("bool negative", lambda a, xp: -a(np.ones(3, bool)), "negative"),
    ("float bitwise", lambda a, xp: a(np.ones(3)) & 1, "bitwise_and"),
    ("float shift", lambda a, xp: a(np.ones(3)) << a(np.ones(3)), "left_shift"),
    ("weak int overflow", lambda a, xp: a(np.ones(3, np.uint8)) + 300, "300"),
    ("weak negative into unsigned", lambda a, xp: a(np.ones(3, np.uint16)) * -1, "-1"),
    ("huge python int", lambda a, xp: a(np.ones(3, np.int64)) + 2**64, ""),
    ("negative scalar power of int", lambda a, xp: a(np.arange(3)) ** -2, "negative"),
    (
        "negative array power of int",
        lambda a, xp: xp.power(a(np.arange(3)), a(np.array([1, -1, 2]))),
        "negative",
    ),
    ("non-numeric operand", lambda a, xp: a(np.ones(3)) + "text", ""),
    ("object operand", lambda a, xp: a(np.ones(3)) * object(), ""),
    ("ragged list", lambda a, xp: xp.asarray([[1, 2], [3]]), "inhomogeneous"),
    ("reshape size", lambda a, xp: a(np.ones(6)).reshape(4, 2), "size 6 into shape (4, 2)"),
    ("reshape two unknowns", lambda a, xp: a(np.ones(6)).reshape(-1, -1), "one unknown"),
    ("index out of bounds", lambda a, xp: a(np.ones(3))[5], "index 5"),
    ("negative index out of bounds", lambda a, xp: a(np.ones((2, 3)))[:, -4], "index -4"),
    ("too many indices", lambda a, xp: a(np.ones(3))[0, 0], "too many indices"),
    ("two ellipses", lambda a, xp: a(np.ones(3))[..., ...], "ellipsis"),
    ("float index", lambda a, xp: a(np.ones(3))[1.5], ""),
    ("zero step", lambda a, xp: a(np.ones(3))[::0], "step"),
    ("transpose axes", lambda a, xp: xp.transpose(a(np.ones((2, 3))), (0,)), ""),
    ("transpose repeated", lambda a, xp: xp.transpose(a(np.ones((2, 3))), (0, 0)), ""),
    ("swapaxes", lambda a, xp: xp.swapaxes(a(np.ones((2, 3))), 0, 2), "axis 2"),
    ("moveaxis", lambda a, xp: xp.moveaxis(a(np.ones((2, 3))), 0, 5), ""),
    ("broadcast_to", lambda a, xp: xp.broadcast_to(a(np.ones(3)), (4,)), "(3,)"),
    ("squeeze non-unit", lambda a, xp: xp.squeeze(a(np.ones((2, 1))), axis=0), "size not equal to one"),
    ("expand_dims", lambda a, xp: xp.expand_dims(a(np.ones(3)), 3), ""),
    (
        "matmul core mismatch",
        lambda a, xp: a(np.ones((2, 3))) @ a(np.ones((4, 2))),
        "size 4 is different from 3",
    ),
    ("matmul scalar", lambda a, xp: xp.matmul(a(np.ones(3)), 2.0), "enough dimensions"),
    ("matmul batch", lambda a, xp: a(np.ones((2, 2, 2))) @ a(np.ones((3, 2, 2))), ""),
    ("len of 0-d", lambda a, xp: len(a(np.float64(1.0))), "unsized"),
    ("iterate 0-d", lambda a, xp: list(a(np.float64(1.0))), "0-d"),
    ("truth of many", lambda a, xp: bool(a(np.ones(3))), "ambiguous"),
    ("float of many", lambda a, xp: float(a(np.ones(3))), ""),
    ("where half given", lambda a, xp: xp.where(a(np.ones(3) > 0), 1), ""),
]


@pytest.mark.parametrize("name", [case[0] for case in CASES])
def test_error_type_matches_numpy(name):
    _, function, text = next(case for case in CASES if case[0] == name)
    with pytest.raises(Exception) as numpy_error, np.errstate(all="ignore"):
        function(np.asarray, np)
    with pytest.raises(Exception) as lazy_error, np.errstate(all="ignore"):
        function(dynfuse.asarray, dnp)  # raised here, not at a later materialization
    assert lazy_error.type is numpy_error.type, (lazy_error.value, numpy_error.value)
    assert text in str(lazy_error.value)
    assert dynfuse.stats()["materializations"] == 0 or name in {
        "negative array power of int",
        "len of 0-d",
        "iterate 0-d",
        "truth of many",
        "float of many",
    }


# In-place mistakes: (name, function(x), text); x is int64 [0 1 2] and must be unchanged afterwards.
IN_PLACE_CASES = [
    ("float into int", lambda x: x.__iadd__(1.5), "same_kind"),
    ("float array into int", lambda x: x.__imul__(np.ones(3)), "same_kind"),
    ("true divide into int", lambda x: x.__itruediv__(2), "same_kind"),
    ("output shape", lambda x: x.__iadd__(np.ones((2, 3), np.int64)), "non-broadcastable output"),
    ("ufunc out shape", lambda x: np.add(x, np.ones((2, 3), np.int64), out=x), ""),
    ("setitem out of bounds", lambda x: x.__setitem__(7, 1), "index 7"),
    ("setitem overflow", lambda x: x.__setitem__(0, 2**70), ""),
    ("setitem wrong shape", lambda x: x.__setitem__(slice(None), np.ones(2)), ""),
    ("setitem bad value", lambda x: x.__setitem__(0, "text"), ""),
    ("negative power in place", lambda x: x.__ipow__(np.array([1, -1, 1])), "negative"),
    ("matmul in place", lambda x: x.__imatmul__(np.ones((3, 3))), ""),
]


@pytest.mark.parametrize("lazy_kind", ["owned", "wrapped", "viewed"])
@pytest.mark.parametrize("name", [case[0] for case in IN_PLACE_CASES])
def test_failed_in_place_changes_nothing(name, lazy_kind):
    _, function, text = next(case for case in IN_PLACE_CASES if case[0] == name)
    with pytest.raises(Exception) as numpy_error, np.errstate(all="ignore"):
        function(np.arange(3))
    if lazy_kind == "owned":
        x = dynfuse.array(np.arange(3)) + 0
    elif lazy_kind == "wrapped":
        x = dynfuse.asarray(np.arange(3))
    else:
        base = dynfuse.array(np.arange(6)) + 0
        x = base[::2]
    watcher = x * 1
    with pytest.raises(Exception) as lazy_error, np.errstate(all="ignore"):
        function(x)
    assert lazy_error.type is numpy_error.type, (lazy_error.value, numpy_error.value)
    assert text in str(lazy_error.value)
    expected = np.arange(6)[::2] if lazy_kind == "viewed" else np.arange(3)
    assert_same(x, expected)
    assert_same(watcher, expected)
    if lazy_kind == "viewed":
        assert_same(base, np.arange(6))
