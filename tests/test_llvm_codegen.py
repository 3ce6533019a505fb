"""The LLVM generator (``codegen/llvm.py``): the functions a module holds, the same IR for the same
kernel, and the code LLVM makes of it: vector instructions, no call where NumPy's rule needs none."""

import re

import numpy as np
import pytest

import dynfuse
from dynfuse import config, registry
from dynfuse.backends import cpu
from dynfuse.codegen import llvm

from .helpers import assert_same, kernel_of


@pytest.fixture(autouse=True)
def on_the_cpu_backend(monkeypatch):
    monkeypatch.setattr(registry, "backend", "cpu")


def functions(module) -> set[str]:
    """The names of the functions ``module`` defines (not those it only declares)."""
    return {function.name for function in module.functions if not function.is_declaration}


def test_a_module_holds_entry_or_the_split_functions():
    """ENTRY alone, or (split) PARTIAL and FINISH, which threads sharing rows call."""
    total = kernel_of((dynfuse.asarray(np.ones(1 << 12)) * 2).sum())
    entry, layout = llvm.generate(total)
    assert functions(entry) == {llvm.ENTRY}
    assert layout.splittable
    split, _ = llvm.generate(total, split=True)
    assert functions(split) == {llvm.PARTIAL, llvm.FINISH}
    chain, layout = llvm.generate(kernel_of(dynfuse.asarray(np.ones(100)) * 2 + 1))
    assert functions(chain) == {llvm.ENTRY}
    assert not layout.splittable and layout.state_cells == 0


@pytest.mark.parametrize("split", [False, True])
def test_one_kernel_generates_the_same_ir_every_time(split):
    """The disk cache is keyed by the IR text: a function built after another, or a module built
    again, must not differ by any state left from before."""
    kernel = kernel_of(np.exp(dynfuse.asarray(np.ones((64, 300), np.float32)) * 2).sum(axis=0))
    first, first_layout = llvm.generate(kernel, split)
    again, again_layout = llvm.generate(kernel, split)
    assert str(first) == str(again)
    assert first_layout == again_layout


def test_the_layout_says_what_the_launcher_passes():
    """Inputs and outputs, then the strides of the inputs not read in C order, then each parameter
    as its op's loop converts it: contiguous inputs pass no strides."""
    x = dynfuse.asarray(np.ones((30, 40)))
    strided = dynfuse.asarray(np.ones((80, 60))[::2, ::2])
    _, layout = llvm.generate(kernel_of(x.T * 2.5 + strided))
    assert (layout.inputs, layout.outputs, layout.strided, layout.ndim) == (2, 1, (0, 1), 2)
    assert [use.dtype for use in layout.param_uses] == [np.float64]
    assert layout.param_cell == 2 + 1 + 2 * 2
    assert layout.extent == 1200 and not layout.splittable and not layout.columns
    _, contiguous = llvm.generate(kernel_of(x * 2.5 + dynfuse.asarray(np.ones((30, 40)))))
    assert contiguous.strided == () and contiguous.param_cell == 3


def test_float32_chains_compile_to_vector_instructions():
    x = dynfuse.asarray(np.ones(4096, np.float32))
    assembly = cpu.BACKEND.assembly(kernel_of(np.maximum(x * 2, 0) + 1))
    vector_ops = [op for op in ("vmaxps", "vaddps", "vmulps", "maxps", "addps", "mulps") if op in assembly]
    assert vector_ops, assembly


def test_a_chain_with_a_float_power_vectorizes_whole():
    """``x**2.5`` is the backend's own branch-free pow (``llvm_math``), not a call to powf per
    element: the whole loop vectorizes, the power with it."""
    x = dynfuse.asarray(np.ones(4096, np.float32))
    assembly = cpu.BACKEND.assembly(kernel_of(np.tanh(x**2.5 * 0.5) + x))
    assert "powf" not in assembly and "pow@" not in assembly
    assert re.search(r"\b(vfmadd\d*pd|v?mulpd)\b", assembly), assembly


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_cube_is_computed_without_pow_in_vector_instructions(dtype):
    """GELU's ``x**3``: the float32 cube in double (packed conversions), the float64 one by fmas."""
    x = dynfuse.asarray(np.ones(4096, dtype))
    assembly = cpu.BACKEND.assembly(kernel_of(np.tanh(x**3 * 0.5) + x))
    assert "pow" not in assembly
    packed = "cvtps2pd" if dtype == np.float32 else "fmadd"
    assert packed in assembly, assembly


def test_what_follows_a_scan_along_a_row_vectorizes(monkeypatch):
    """A running sum is computed in order, a block of the row at a time into a buffer; the exp of
    it and the sum that follow run over the block in vector instructions (a Monte-Carlo path's
    ``exp(cumsum(returns))``), with the results of the loop that computes all in order."""
    values = np.random.default_rng(0).standard_normal((40, 300)) * 0.1
    x = dynfuse.asarray(values)
    assembly = cpu.BACKEND.assembly(kernel_of(np.exp(np.cumsum(x * 0.5, axis=1)).sum(axis=1)))
    assert "vmulpd" in assembly or "mulpd" in assembly, assembly
    monkeypatch.setattr(config, "tiers", False)
    prices = np.exp(np.cumsum(x * 0.5, axis=1))
    assert_same(prices, np.exp(np.cumsum(values * 0.5, axis=1)))
    fused = np.exp(np.cumsum(x * 0.5, axis=1)).sum(axis=1)  # positive terms: a few ulps apart at most
    assert_same(fused, np.exp(np.cumsum(values * 0.5, axis=1)).sum(axis=1), max_ulp=16)
    double = np.cumsum(np.cumprod(1 + x, axis=1) - x.mean(axis=1, keepdims=True), axis=1)
    assert_same(
        double, np.cumsum(np.cumprod(1 + values, axis=1) - values.mean(axis=1, keepdims=True), axis=1)
    )


@pytest.mark.parametrize(("shape", "vectorized"), [((1 << 12,), False), ((256, 1024), True)], ids=str)
def test_finish_is_vectorized_only_where_it_combines_every_columns_states(shape, vectorized):
    """Rows mode: FINISH combines the states of fewer rows than threads, and is compiled for size
    (its vector loops were half the split module's compile). Columns mode: every lane's."""
    kernel = kernel_of((dynfuse.asarray(np.ones(shape, np.float32)) * 2).sum(axis=0))
    optimized = cpu._host().emit(cpu._module(kernel, split=True).text, "ir").decode()
    finish = optimized[optimized.index(f"@{llvm.FINISH}(") :]
    finish = finish[: finish.index("\n}\n")]
    assert bool(re.search(r"<\d+ x ", finish)) == vectorized  # a vector type: <8 x float>


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(50, 100), (3, 8192), (3, 8193)])
def test_a_dear_value_a_later_pass_reads_again_is_kept_from_its_own_pass(dtype, shape):
    """Softmax's divide reads the sum's exponentials: kept in a row from the pass that computes them
    (where the row fits ``ROW_KEPT_BYTES``), not computed again; the result is the same either way."""
    values = np.random.default_rng(3).random(shape).astype(dtype) * 4
    x = dynfuse.asarray(values)

    def softmax(xp, x):
        e = xp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True) + xp.sqrt(x)  # sqrt: cheap, computed again

    kernel = kernel_of(softmax(np, x))
    kept_in_row = llvm._KernelModule(kernel).kept_in_row
    exponentials = [n for n, inst in enumerate(kernel.instructions) if inst.op.name == "exp"]
    row_bytes = shape[1] * np.dtype(dtype).itemsize
    assert kept_in_row == ({exponentials[0]: row_bytes} if row_bytes <= llvm.ROW_KEPT_BYTES else {})
    with np.errstate(all="ignore"):
        expected = softmax(np, values)
    tolerance = 4 * np.finfo(dtype).eps
    np.testing.assert_allclose(np.asarray(softmax(np, x)), expected, rtol=tolerance, atol=tolerance)
