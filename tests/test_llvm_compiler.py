"""The LLVM compiler process compiles what this process would, and survives what befalls it.

When it dies, cannot start, is interrupted or is forked, every kernel still comes out right."""

import multiprocessing
import os
import signal
import sys

import numpy as np
import pytest

import dynfuse
from dynfuse import config, execute, registry, replay
from dynfuse.backends import cpu, llvm_compiler
from dynfuse.codegen import llvm as codegen


@pytest.fixture
def compiler(monkeypatch):
    """A compiler process of the test's own, compiling every kernel; no kernel from a cache."""
    host = cpu._host()
    own = llvm_compiler.CompilerProcess(host.cpu, host.features)
    monkeypatch.setattr(host, "compiler", own)
    monkeypatch.setattr(host, "in_process_left", 0)
    monkeypatch.setattr(config, "disk_cache", False)
    monkeypatch.setattr(registry, "backend", "cpu")
    replay.clear_kernels()
    yield own
    own.close()
    replay.clear_kernels()


def chain(x, steps=3):
    for step in range(steps):
        x = np.exp(x * 0.5) - x / (step + 2)
    return x


def data():
    return np.random.default_rng(0).standard_normal(1000)


def assert_same(lazy, expected):
    np.testing.assert_allclose(np.asarray(lazy), expected, rtol=1e-12)


def module_text(steps):
    lazy = chain(dynfuse.asarray(data()), steps)
    _, plan = execute.explain_plan([lazy._node], cpu.BACKEND)
    return str(codegen.generate(plan.kernels[0].kernel)[0])


def test_the_child_compiles_what_this_process_would(compiler):
    host = cpu._host()
    text = module_text(3)
    for output in ("assembly", "ir"):
        assert compiler.compile(text, output) == llvm_compiler.compile_ir(host.machine, text, output)
    assert_same(chain(dynfuse.asarray(data())), chain(data()))
    assert compiler.process is not None and dynfuse.stats()["kernels_compiled"] == 1


def test_a_compile_error_is_raised_and_the_child_goes_on(compiler):
    compiler.compile(module_text(1), "object")
    pid = compiler.process.pid
    with pytest.raises(RuntimeError, match=r"LLVM could not compile a kernel: (?s:.*)expected type"):
        compiler.compile("define void @broken( {", "object")
    assert compiler.compile(module_text(1), "object")
    assert compiler.process.pid == pid


def test_a_child_that_died_between_compiles_is_replaced(compiler):
    compiler.compile(module_text(1), "object")
    dead = compiler.process
    os.kill(dead.pid, signal.SIGKILL)
    dead.wait()
    assert_same(chain(dynfuse.asarray(data())), chain(data()))  # no warning: the no-fault filter
    assert compiler.process is not dead and dead.returncode == -signal.SIGKILL


def test_a_kernel_that_kills_the_compiler_falls_back(compiler, monkeypatch):
    """Here the child says it is ready, then exits when asked, as it would if LLVM crashed on the
    kernel: asked twice, then the kernel runs in the reference executor, with a warning, counted."""
    crashing = (
        "import sys; sys.stdout.buffer.write(b'R'); sys.stdout.flush(); sys.stdin.buffer.read(9); sys.exit(3)"
    )
    monkeypatch.setattr(compiler, "command", [sys.executable, "-c", crashing])
    with pytest.warns(RuntimeWarning, match=r"compiler process exited \(code 3\) twice"):
        assert_same(chain(dynfuse.asarray(data())), chain(data()))
    assert dynfuse.stats()["fallbacks"] == 1
    assert compiler.process is None


def test_the_child_is_replaced_after_so_many_compiles(compiler, monkeypatch):
    monkeypatch.setattr(llvm_compiler, "RECYCLE_COMPILES", 2)
    open_files = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    children = []
    for steps in range(1, 7):
        assert_same(chain(dynfuse.asarray(data()), steps), chain(data(), steps))
        children.append(compiler.process)
    assert len({child.pid for child in children}) == 4  # replaced after the 2nd, 4th and 6th compiles
    assert all(child.poll() is not None for child in children[:-1])  # reaped: no zombie left
    if open_files is not None:
        assert len(os.listdir("/proc/self/fd")) <= open_files + 2  # the one child's pipes


def test_an_interrupt_while_waiting_for_the_child(compiler, monkeypatch):
    """The reply would come out of step with the next request: the child is ended, and replaced."""
    compiler.compile(module_text(1), "object")
    interrupted = compiler.process
    reads = []

    def interrupt_first_read(stream, size):
        reads.append(size)
        if len(reads) == 1:
            raise KeyboardInterrupt
        return read_exactly(stream, size)

    read_exactly = llvm_compiler._read_exactly
    monkeypatch.setattr(llvm_compiler, "_read_exactly", interrupt_first_read)
    y = chain(dynfuse.asarray(data()))
    with pytest.raises(KeyboardInterrupt):
        np.asarray(y)
    assert compiler.process is None and interrupted.poll() is not None
    assert_same(y, chain(data()))
    assert compiler.process is not interrupted


# Commands of a child that cannot run, made from the command of one that can.
UNRUNNABLE = {
    "no executable": lambda command: [os.path.join(os.sep, "nonexistent", "python")],
    "exits before it is ready": lambda command: [sys.executable, "-c", "import sys; sys.exit(3)"],
    "upgraded under the program": lambda command: [*command[:3], "0" * 64, *command[4:]],
}


@pytest.mark.parametrize("unrunnable", UNRUNNABLE.values(), ids=UNRUNNABLE.keys())
def test_where_no_child_can_run_this_process_compiles(compiler, monkeypatch, unrunnable):
    host = cpu._host()
    monkeypatch.setattr(compiler, "command", unrunnable(compiler.command))
    with pytest.warns(RuntimeWarning, match="cannot start its LLVM compiler process"):
        assert_same(chain(dynfuse.asarray(data())), chain(data()))
    assert host.compiler is None and dynfuse.stats()["fallbacks"] == 0
    assert_same(chain(dynfuse.asarray(data()), 2), chain(data(), 2))


def compile_in_forked_worker(steps):
    assert cpu._host().compiler.process is None  # the parent's is not this process's
    return np.asarray(chain(dynfuse.asarray(data()), steps))


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_a_forked_process_starts_a_compiler_of_its_own(compiler):
    compiler.compile(module_text(1), "object")
    parents = compiler.process
    with multiprocessing.get_context("fork").Pool(1) as pool:
        result = pool.apply_async(compile_in_forked_worker, (4,)).get(timeout=120)
    np.testing.assert_allclose(result, chain(data(), 4), rtol=1e-12)
    assert compiler.process is parents and parents.poll() is None
    assert_same(chain(dynfuse.asarray(data()), 5), chain(data(), 5))
