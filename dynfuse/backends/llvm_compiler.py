"""LLVM IR to optimized host code; past a program's first few kernels, in a child process that is
replaced every so many compiles.

Why a child: llvmlite's pass manager leaks each run's ``PassInstrumentationCallbacks`` (tens of KiB
of native memory per kernel compiled; see perf/RESULTS.md, "soak"), so a long-lived process that
compiles thousands of kernels (a fuzzing session, a server) would grow without end; a child that is
replaced after ``RECYCLE_COMPILES`` compiles bounds that. And a crash inside LLVM then costs one
kernel (which falls back to the reference executor), not the program. The first
``IN_PROCESS_COMPILES`` compiles run in the program's own process: starting the child takes 0.1 s,
three or four compiles' time, which most scripts' whole compile time would not repay.

The child runs this file as a script, so it imports nothing but the standard library and llvmlite;
the parent only sends IR and reads back bytes. Requests and replies are a header (a tag byte, a
payload length) then the payload. The child writes one byte once LLVM is set up: a child that exits
before it (its Python cannot import llvmlite, or this file changed since the program imported it,
as when dynfuse is upgraded under a running program) cannot run here, and compiles stay in the
program.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import signal
import struct
import sys
import threading
from typing import TYPE_CHECKING, BinaryIO

import llvmlite.binding as llvm

if TYPE_CHECKING:
    import subprocess

# A compile asks for one of these: object code to load, or text for people (``explain``, tests).
OUTPUTS = {b"o": "object", b"s": "assembly", b"i": "ir"}
_OUTPUT_TAGS = {name: tag for tag, name in OUTPUTS.items()}
_DONE, _FAILED, _READY = b"+", b"!", b"R"
_HEADER = struct.Struct("<cQ")

# At most a few MiB of leaked native memory in either process; a restart of the child (0.1 s) every
# RECYCLE_COMPILES compiles (each 20 to 100 ms) costs a few percent of the compile time.
IN_PROCESS_COMPILES = 32
RECYCLE_COMPILES = 100


def _source_digest() -> str:
    """What the parent and the child check they both run: this file, as each read it."""
    with open(os.path.abspath(__file__), "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()


def initialize() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def target_machine(cpu: str, features: str) -> llvm.TargetMachine:
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(
        cpu=cpu, features=features, opt=3, reloc="pic", codemodel="jitdefault"
    )


# The optimization pipeline: O3 with loop and SLP vectorization, without loop unrolling. A kernel's
# loops are vectorized with interleaved accumulators already; unrolling them again (a block loop of
# 128 elements, fully) cost 13-29% of the examples' compile time and made object code larger, for
# no speed that perf/bench.py could measure. Then ``alwaysinline`` functions are inlined again: the
# vector variants the loop vectorizer calls (codegen/llvm_math's guarded functions) exist as calls
# only from then on, and inlined, the interleaved calls' work overlaps. Part of every disk-cache key
# (object code depends on it).
PIPELINE = (
    ("speed_level", 3),
    ("loop_vectorization", True),
    ("slp_vectorization", True),
    ("loop_unrolling", False),
    ("inline_after_vectorizing", True),
)


def compile_ir(machine: llvm.TargetMachine, text: str, output: str) -> bytes:
    """``text`` optimized by ``PIPELINE``, then emitted as ``output``."""
    module = llvm.parse_assembly(text)
    module.triple = llvm.get_process_triple()
    module.data_layout = str(machine.target_data)
    module.verify()
    settings = dict(PIPELINE)
    inline_after_vectorizing = settings.pop("inline_after_vectorizing")
    options = llvm.create_pipeline_tuning_options(speed_level=settings.pop("speed_level"))
    for name, value in settings.items():
        setattr(options, name, value)
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(module, builder)
    if inline_after_vectorizing:
        inliner = llvm.create_new_module_pass_manager()
        inliner.add_always_inliner_pass()
        inliner.run(module, builder)
    if output == "object":
        return machine.emit_object(module)
    return (machine.emit_assembly(module) if output == "assembly" else str(module)).encode()


class CompilerDied(RuntimeError):
    """The child exited (or its pipes broke) before it replied."""


class CompilerUnavailable(RuntimeError):
    """No child can run here: it cannot be started (no executable, no processes left), or it exits
    before it is ready (its Python cannot import llvmlite)."""


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) < size:
        raise CompilerDied
    return data


class CompilerProcess:
    """The parent's side of the child: one compile at a time, the child started when first needed
    and replaced when it has compiled ``RECYCLE_COMPILES`` kernels or died."""

    def __init__(self, cpu: str, features: str) -> None:
        source = _source_digest()
        self.command = [sys.executable, "-P", os.path.abspath(__file__), source, cpu, features]
        self.process: subprocess.Popen | None = None
        self.ready = False  # whether the child has said it set LLVM up
        self.compiles = 0
        self.lock = threading.Lock()
        os.register_at_fork(after_in_child=self._leave_to_parent)
        atexit.register(self.close, timeout=1.0)

    def _start(self) -> None:
        """Start the child if none runs: it sets LLVM up while this process goes on."""
        if self.process is None:
            import subprocess  # here: a program's first compiles start no child

            try:
                self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            except OSError as error:
                raise CompilerUnavailable(str(error)) from error
            self.ready, self.compiles = False, 0

    def compile(self, text: str, output: str) -> bytes:
        """``compile_ir``'s bytes, from the child. A child that dies is replaced and asked once more;
        if that one dies too, the kernel is what kills it: ``CompilerDied`` (the kernel falls back)."""
        with self.lock:
            for attempt in range(2):
                self._start()
                try:
                    status, payload = self._exchange(text.encode(), _OUTPUT_TAGS[output])
                except CompilerDied:
                    code = self._stop(kill=True)
                    if attempt:
                        raise CompilerDied(
                            f"LLVM's compiler process exited (code {code}) twice while compiling a kernel"
                        ) from None
                    continue
                except BaseException:  # an interrupt mid-exchange: the reply would be out of step
                    self._stop(kill=True)
                    raise
                self.compiles += 1
                if self.compiles >= RECYCLE_COMPILES:
                    self._stop()
                    with contextlib.suppress(CompilerUnavailable):  # the next compile says so
                        self._start()
                if status == _FAILED:
                    raise RuntimeError(f"LLVM could not compile a kernel: {payload.decode()}")
                return payload
        raise AssertionError("unreachable")

    def _exchange(self, request: bytes, tag: bytes) -> tuple[bytes, bytes]:
        """Send one request, and read its reply: a status and a payload."""
        process = self.process
        if not self.ready:
            if process.stdout.read(1) != _READY:
                raise CompilerUnavailable(f"it exited with code {process.wait()} before it was ready")
            self.ready = True
        try:
            process.stdin.write(_HEADER.pack(tag, len(request)) + request)
            process.stdin.flush()
        except OSError:  # a broken pipe: the child is gone
            raise CompilerDied from None
        status, length = _HEADER.unpack(_read_exactly(process.stdout, _HEADER.size))
        return status, _read_exactly(process.stdout, length)

    def _stop(self, kill: bool = False, timeout: float | None = None) -> int | None:
        """End the child (closing its input ends it once it has replied) and reap it: its exit code."""
        process, self.process = self.process, None
        if process is None:
            return None
        import subprocess

        if kill:
            process.kill()
        _close_pipes(process)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()

    def close(self, timeout: float | None = None) -> None:
        """End the child. At exit (``timeout`` given), a compile another thread has left in flight
        is not waited for beyond ``timeout``."""
        if self.lock.acquire(timeout=-1 if timeout is None else timeout):
            try:
                self._stop(timeout=timeout)
            finally:
                self.lock.release()

    def _leave_to_parent(self) -> None:
        """In a forked child: the compiler is the parent's. Close this process's ends of its pipes and
        forget it; a forked child that compiles starts a compiler of its own."""
        process, self.process = self.process, None
        self.lock = threading.Lock()
        if process is not None:
            _parents_processes.append(process)  # not this process's child: never finalized here
            _close_pipes(process)


def _close_pipes(process: subprocess.Popen) -> None:
    for stream in (process.stdin, process.stdout):
        with contextlib.suppress(OSError):  # a write buffered for a child that is gone
            stream.close()


# Popen objects of a parent's compiler, held in a forked child so that none is finalized there.
_parents_processes: list[subprocess.Popen] = []


def _serve(source: str, cpu: str, features: str) -> None:
    """The child: compile requests until the parent closes its input (or goes)."""
    if source != _source_digest():
        sys.exit("dynfuse's LLVM compiler process: its source changed since the program started")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the terminal is the parent's to handle
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever else writes to stdout: to stderr
    initialize()
    machine = target_machine(cpu, features)
    replies.write(_READY)
    replies.flush()
    with contextlib.suppress(CompilerDied, BrokenPipeError):
        while True:
            tag, length = _HEADER.unpack(_read_exactly(requests, _HEADER.size))
            text = _read_exactly(requests, length).decode()
            try:
                status, payload = _DONE, compile_ir(machine, text, OUTPUTS[tag])
            except Exception as error:  # the parent raises it, and the kernel falls back
                status, payload = _FAILED, f"{type(error).__name__}: {error}".encode()
            replies.write(_HEADER.pack(status, len(payload)) + payload)
            replies.flush()


if __name__ == "__main__":
    _serve(*sys.argv[1:])
