"""Backend selection and environment variables."""

import os
import subprocess
import sys

import numpy as np
import pytest

import dynfuse


def test_set_backend_validates(monkeypatch):
    monkeypatch.setattr(dynfuse.registry, "backend", dynfuse.registry.backend)
    dynfuse.set_backend("numpy")
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        dynfuse.set_backend("nope")
    with pytest.raises(ValueError, match="'cuda' backend cannot run here"):
        dynfuse.set_backend("cuda")
    assert dynfuse.registry.backend == "numpy"


def run_with_environment(code, **environment):
    env = {**os.environ, **environment}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)


def test_environment_variables_are_read_at_import(tmp_path):
    result = run_with_environment(
        "from dynfuse import config as c, registry; "
        "print(registry.backend, c.cache_dir, c.max_depth, c.tiers, c.plan_cache_size, c.kernel_cache_size, "
        "c.pending_memory, c.pool_memory)",
        DYNFUSE_BACKEND="numpy",
        DYNFUSE_CACHE_DIR=str(tmp_path),
        DYNFUSE_MAX_DEPTH="17",
        DYNFUSE_TIERS="0",
        DYNFUSE_PLAN_CACHE="5",
        DYNFUSE_KERNEL_CACHE="6",
        DYNFUSE_PENDING_MEMORY="3",
        DYNFUSE_POOL_MEMORY="0",
    )
    assert result.stdout.split() == ["numpy", str(tmp_path), "17", "False", "5", "6", str(3 << 20), "0"]


def test_bad_environment_values_warn_and_use_defaults():
    result = run_with_environment(
        "from dynfuse import config, registry; print(registry.backend, config.max_depth, config.pool_memory)",
        DYNFUSE_BACKEND="warp-drive",
        DYNFUSE_MAX_DEPTH="-3",
        DYNFUSE_POOL_MEMORY="-1",
    )
    assert result.stdout.split() == [dynfuse.registry.DEFAULT_BACKEND, "256", str(512 << 20)]
    assert all(
        name in result.stderr for name in ("DYNFUSE_BACKEND", "DYNFUSE_MAX_DEPTH", "DYNFUSE_POOL_MEMORY")
    )


def test_max_depth_cuts_the_trace(monkeypatch):
    monkeypatch.setattr(dynfuse.config, "max_depth", 5)
    x = dynfuse.array(np.ones(3))
    for _ in range(12):
        x = x + 1
    assert x._node.depth < 5
    np.testing.assert_array_equal(np.asarray(x), np.full(3, 13.0))
