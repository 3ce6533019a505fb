"""A short tour of dynfuse's lazy arrays: record, explain, materialize (run it: python examples/tour.py)."""

import numpy as np

import dynfuse

rng = np.random.default_rng(0)
x = dynfuse.asarray(rng.standard_normal((4, 5), dtype=np.float32))

# Nothing is computed here: each line records a node, and checks shapes and dtypes at once.
relu = np.maximum(x * 2, 0) + 1
centered = x - x.mean(axis=-1, keepdims=True)
row_norms = np.sqrt((centered * centered).sum(axis=1))
print("recorded:", relu.shape, relu.dtype, "and", row_norms.shape, row_norms.dtype)
print("materializations so far:", dynfuse.stats()["materializations"])

print()
print(dynfuse.explain(relu, row_norms))

# One plan computes both; the shared work (x) is read once.
dynfuse.evaluate(relu, row_norms)
print()
print("relu(x*2)+1, first row:", relu[0])
print("row norms:", row_norms)
assert np.allclose(np.asarray(row_norms), np.linalg.norm(np.asarray(centered), axis=1))

# Errors come at the line that causes them, with NumPy's exception types.
try:
    x + dynfuse.asarray(np.ones(3))
except ValueError as error:
    print("\nValueError at the offending line:", error)

# NumPy's aliasing holds: a view sees an in-place update of its base.
view = x[:, 1:]
x += 1
assert np.array_equal(np.asarray(view), np.asarray(x)[:, 1:])

# Work this tiny runs op by op (a kernel would not pay); large work runs the planned kernels.
# Softmax over rows of 1000 elements: one kernel, three passes over each row while it is in cache.
big = dynfuse.asarray(rng.standard_normal((2000, 1000)))
exps = np.exp(big - big.max(axis=1, keepdims=True))
softmax = exps / exps.sum(axis=1, keepdims=True)
print("\n" + "\n".join(line for line in dynfuse.explain(softmax).splitlines() if not line.startswith(" ")))
dynfuse.evaluate(softmax)
assert np.allclose(np.asarray(softmax).sum(axis=1), 1.0)
print("kernels launched:", dynfuse.stats()["kernels_launched"])

# What dynfuse cannot record lazily falls back to NumPy, and is counted.
np.sort(x, axis=1)
print("\nstats:", dynfuse.stats())
