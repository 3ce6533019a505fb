"""LLVM set up for this process: the host's target machine, the compiler, and object code loaded
as executable code. ``backends.cpu`` makes one, the first time a kernel is compiled or loaded."""

from __future__ import annotations

import os
import threading
import warnings

import llvmlite
import llvmlite.binding as llvm

from .. import float_errors
from ..version import __version__
from . import llvm_compiler


class LlvmHost:
    """LLVM set up once per process: the host target machine, the compiler, and a lock (LLVM is not
    re-entrant). The first ``llvm_compiler.IN_PROCESS_COMPILES`` compiles run in this process, the
    rest in the compiler process (see ``llvm_compiler``)."""

    def __init__(self) -> None:
        llvm_compiler.initialize()
        # The word every kernel reports its floating-point flags into (``codegen.llvm``)
        llvm.add_symbol(float_errors.FLAGS_SYMBOL, float_errors.flags_address())
        self.cpu = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        self.machine = self.target_machine()
        self.compiler: llvm_compiler.CompilerProcess | None = llvm_compiler.CompilerProcess(
            self.cpu, self.features
        )
        self.in_process_left = llvm_compiler.IN_PROCESS_COMPILES
        self.lock = threading.Lock()
        os.register_at_fork(after_in_child=self.lock._at_fork_reinit)  # as execute.lock
        # What object code depends on, besides the kernel: part of every disk-cache key.
        self.identity = (
            __version__,
            llvmlite.__version__,
            llvm.llvm_version_info,
            llvm_compiler.PIPELINE,
            self.cpu,
            self.features,
        )

    def target_machine(self) -> llvm.TargetMachine:
        return llvm_compiler.target_machine(self.cpu, self.features)

    def emit(self, text: str, output: str) -> bytes:
        """``llvm_compiler.compile_ir``'s ``output`` for the kernel module ``text``."""
        with self.lock:
            compiler = self.compiler
            if self.in_process_left > 0 or compiler is None:
                self.in_process_left -= 1
                return llvm_compiler.compile_ir(self.machine, text, output)
        try:
            return compiler.compile(text, output)
        except llvm_compiler.CompilerUnavailable as error:
            warnings.warn(
                f"dynfuse cannot start its LLVM compiler process ({error}); compiling in this process",
                RuntimeWarning,
                stacklevel=2,
            )
            self.compiler = None
            return self.emit(text, output)

    def load(self, object_code: bytes) -> llvm.ExecutionEngine:
        # An engine owns (and frees) its target machine: each gets its own.
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.target_machine())
        engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
        engine.finalize_object()
        return engine
