"""The op table (``ops``) and the code generators' tables of scalar code agree: every elementwise op
has code on each backend for each kind of dtype NumPy's loops for it take, every reduction a kernel
computes has its facts (``common.REDUCTION_FACTS``) and its combine code on each backend, the CUDA
code calls only functions its prelude defines, and no table names an op the op table does not have.
An op added to ``ops.py`` without its code on a backend fails here."""

import re
from types import ModuleType

import numpy as np
import pytest

from dynfuse import ops
from dynfuse.codegen import cuda, llvm
from dynfuse.codegen.common import REDUCTION_FACTS, OpLoop

GENERATORS = {"llvm": llvm, "cuda": cuda}
OPS = {**ops.ELEMENTWISE, **ops.INTERNAL}
# The reductions a kernel computes: the composite ones (mean, var, std) are recorded as sums
KERNEL_REDUCTIONS = {name for name, op in ops.REDUCTIONS.items() if op.expand is None}
# The type characters of NumPy loops a kernel runs: bool, the integers, float16/32/64
KERNEL_TYPES = "?bBhHiIlLqQefd"
# A dtype of each kind, and the one each kind's code runs in
SAMPLE_DTYPES = {
    "b": np.dtype(bool),
    "i": np.dtype(np.int32),
    "u": np.dtype(np.uint16),
    "f": np.dtype(np.float32),
}


def loop_kinds(op: ops.Op) -> set[str]:
    """The kinds of first operand NumPy has a loop of ``op`` for: a generator picks the op's code by
    that kind. Float alone for an op that is no ufunc (cube) or that generators choose for floats
    (``ops.INTERNAL``); where and astype have code for any dtype."""
    ufunc = np._core.umath.clip if op.name == "clip" else op.reference
    if op.name in ops.INTERNAL or not isinstance(ufunc, np.ufunc):
        return {"f"}
    return {np.dtype(types[0]).kind for types in ufunc.types if types[0] in KERNEL_TYPES}


def tables(generator: ModuleType) -> dict[str, dict]:
    """The generator's table of code for each kind of the loop's first input dtype."""
    return {
        "b": generator.BOOL_CODE,
        "i": generator.INTEGER_CODE,
        "u": generator.INTEGER_CODE,
        "f": generator.FLOAT_CODE,
    }


@pytest.mark.parametrize("backend", GENERATORS)
def test_every_elementwise_op_has_code_for_each_kind_it_takes(backend):
    generator = GENERATORS[backend]
    missing = [
        (name, kind)
        for name, op in OPS.items()
        for kind in sorted(loop_kinds(op))
        if name not in generator.ANY_DTYPE_CODE and name not in tables(generator)[kind]
    ]
    assert not missing, f"{backend} has no code for {missing}"


@pytest.mark.parametrize("backend", GENERATORS)
def test_the_tables_name_only_ops_of_the_op_table(backend):
    generator = GENERATORS[backend]
    named = set(generator.ANY_DTYPE_CODE).union(*tables(generator).values())
    assert named <= set(OPS), f"{backend} has code for ops that are not in ops.py: {named - set(OPS)}"


def test_cuda_code_calls_only_functions_the_prelude_defines():
    defined = set(re.findall(r"\b(df_\w+)\b", cuda.PRELUDE))
    for kind, table in tables(cuda).items():
        dtype = SAMPLE_DTYPES[kind]
        for name, code in table.items():
            expression = code(["x0", "x1", "x2"], OpLoop.of(dtype))
            called = set(re.findall(r"\b(df_\w+)\b", expression))
            assert called <= defined, f"{name} on {dtype} calls {called - defined}, not in cuda_prelude.cu"


def test_every_reduction_a_kernel_computes_has_its_facts_and_only_those():
    assert set(REDUCTION_FACTS) == KERNEL_REDUCTIONS


@pytest.mark.parametrize("backend", GENERATORS)
def test_every_reduction_a_kernel_computes_has_combine_code_and_only_those(backend):
    assert set(GENERATORS[backend].REDUCTION_CODE) == KERNEL_REDUCTIONS


@pytest.mark.parametrize("dtype", [*SAMPLE_DTYPES.values(), np.dtype(np.float16)], ids=str)
def test_cuda_reduction_code_calls_only_functions_the_prelude_defines(dtype):
    defined = set(re.findall(r"\b(df_\w+)\b", cuda.PRELUDE))
    for name, code in cuda.REDUCTION_CODE.items():
        operands = ["acc", "acc_index", "x", "x_index"] if REDUCTION_FACTS[name].indexed else ["acc", "x"]
        called = set(re.findall(r"\b(df_\w+)\b", code(operands, OpLoop(dtype))))
        assert called <= defined, f"{name} on {dtype} calls {called - defined}, not in cuda_prelude.cu"
