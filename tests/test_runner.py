"""``dynfuse run``: a script runs as under ``python``, with its own NumPy imports on dynfuse.

Its libraries stay on real NumPy, and a report comes at exit. Scripts run in subprocesses, as a user
runs them."""

import builtins
import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy
import pytest

import dynfuse
from dynfuse import runner
from dynfuse.__main__ import main

REPOSITORY = Path(dynfuse.__file__).resolve().parent.parent
CONSOLE_SCRIPT = Path(sys.executable).with_name("dynfuse")
# The package form of dynfuse.numpy brings submodules and the fall-through
# to NumPy (np.save, np.linalg, ...); the tests that need them wait for it.
needs_namespace_package = pytest.mark.skipif(
    not hasattr(dynfuse.numpy, "__path__"), reason="needs dynfuse.numpy as a package with fall-through"
)


@pytest.fixture
def environment(tmp_path):
    """This checkout's dynfuse, a kernel cache of the test's own, every kernel compiled."""
    variables = {key: value for key, value in os.environ.items() if not key.startswith("DYNFUSE_")}
    python_path = [str(REPOSITORY), *filter(None, [os.environ.get("PYTHONPATH")])]
    variables |= {
        "PYTHONPATH": os.pathsep.join(python_path),
        "DYNFUSE_CACHE_DIR": str(tmp_path / "kernel-cache"),
        "DYNFUSE_TIERS": "0",
    }
    return variables


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def run(command, environment, cwd):
    return subprocess.run(
        [str(part) for part in command], env=environment, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def run_dynfuse(script, *arguments, environment, options=()):
    command = [sys.executable, "-m", "dynfuse", "run", *options, script, *arguments]
    return run(command, environment, script.parent)


def run_python(script, *arguments, environment):
    return run([sys.executable, script, *arguments], environment, script.parent)


def test_the_scripts_own_numpy_imports_resolve_to_dynfuse_and_libraries_keep_numpy(tmp_path, environment):
    library = write(
        tmp_path / "library" / "outside_library.py",
        """
        import numpy

        def numpy_name():
            return numpy.__name__

        def converted_type(value):
            return type(numpy.asarray(value)).__name__
        """,
    )
    numpy_user = "import numpy\n\ndef numpy_name():\n    return numpy.__name__\n"
    write(tmp_path / "project" / "site-packages" / "vendored_library.py", numpy_user)
    write(tmp_path / "project" / "helpers" / "mine.py", numpy_user)
    script = write(
        tmp_path / "project" / "main.py",
        """
        import json
        import os
        import sys

        sys.path.append(sys.argv[1])
        sys.path.append(os.path.join(os.path.dirname(__file__), "site-packages"))
        import numpy as np
        import numpy
        import numpy.polynomial
        from numpy import asarray, exp

        import outside_library
        import vendored_library
        from helpers import mine

        def imported_late():
            import numpy
            return numpy.__name__

        x = asarray([1.0, -2.0, 3.0])
        print(json.dumps({
            "name": __name__,
            "argv": sys.argv[1:],
            "path0": sys.path[0],
            "file": __file__,
            "np": np.__name__,
            "numpy": numpy.__name__,
            "late": imported_late(),
            "lazy": [type(exp(x)).__module__, type(np.asarray([1.0]) + 1).__module__],
            "helper": mine.numpy_name(),
            "outside": outside_library.numpy_name(),
            "vendored": vendored_library.numpy_name(),
            "converted": outside_library.converted_type(x),
            "sys.modules": sys.modules["numpy"].__name__,
            "polynomial": sys.modules["numpy.polynomial"].__name__,
        }))
        """,
    )
    arguments = [library.parent, "--flag", "--", "value"]
    result = run_dynfuse(script, *arguments, environment=environment)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["name"] == "__main__"
    assert seen["argv"] == [str(argument) for argument in arguments]
    assert seen["path0"] == os.path.realpath(script.parent)
    assert seen["file"] == str(script)
    assert seen["np"] == seen["numpy"] == seen["late"] == seen["helper"] == "dynfuse.numpy"
    assert seen["lazy"] == ["dynfuse.array", "dynfuse.array"]
    assert seen["outside"] == seen["vendored"] == seen["sys.modules"] == "numpy"
    assert seen["converted"] == "ndarray"
    assert seen["polynomial"] == "numpy.polynomial"


def executed(code: str, directory: Path, file: str = "module.py", name: str = "users_module") -> dict:
    """The globals after running ``code`` as module ``name`` from ``directory / file``, redirected."""
    namespace = {"__name__": name, "__file__": str(directory / file)}
    original = builtins.__import__
    with runner.numpy_imports_redirected(str(directory)):
        exec(compile(code, namespace["__file__"], "exec"), namespace)
    assert builtins.__import__ is original
    return namespace


def test_import_forms_follow_import_semantics(tmp_path):
    assert executed("import numpy", tmp_path)["numpy"] is dynfuse.numpy
    assert executed("import numpy as np", tmp_path)["np"] is dynfuse.numpy
    assert executed("from numpy import *", tmp_path)["exp"] is dynfuse.numpy.exp
    assert executed("from numpy import where as w", tmp_path)["w"] is dynfuse.numpy.where
    # dynfuse has no numpy.polynomial: the real one is imported, and ``numpy`` is still dynfuse's
    assert executed("import numpy.polynomial", tmp_path)["numpy"] is dynfuse.numpy
    from_real = executed("from numpy.polynomial import polynomial", tmp_path)["polynomial"]
    assert from_real is importlib.import_module("numpy.polynomial.polynomial")
    with pytest.raises(ModuleNotFoundError, match=r"numpy\.no_such_module"):
        executed("import numpy.no_such_module", tmp_path)


def test_only_the_scripts_own_code_is_redirected(tmp_path):
    assert executed("import numpy", tmp_path, file="sub/deeper/module.py")["numpy"] is dynfuse.numpy
    assert executed("import numpy", tmp_path / "script", file="../beside.py")["numpy"] is numpy
    assert executed("import numpy", tmp_path, file=".venv/lib/site-packages/pkg/m.py")["numpy"] is numpy
    assert executed("import numpy", tmp_path, name="dynfuse.anything")["numpy"] is numpy
    assert executed("import numpy", tmp_path, name="numpy.testing")["numpy"] is numpy


@needs_namespace_package
def test_numpy_submodules_resolve_to_dynfuses(tmp_path):
    assert executed("from numpy import linalg", tmp_path)["linalg"] is dynfuse.numpy.linalg
    assert executed("import numpy.linalg as la", tmp_path)["la"] is dynfuse.numpy.linalg
    assert executed("from numpy.random import default_rng", tmp_path)["default_rng"] is (
        dynfuse.numpy.random.default_rng
    )
    assert executed("import numpy.fft", tmp_path)["numpy"].fft is dynfuse.numpy.fft


def test_printing_and_conditions_as_under_python(tmp_path, environment):
    script = write(
        tmp_path / "conditions.py",
        """
        import numpy as np

        x = np.asarray([[1, -2, 3], [4, 5, -6]])
        y = x * 3 - 1
        print(y)
        print(y.sum(axis=0), y.max(), int((y > 0).sum()))
        print(f"{float(np.exp(x * 0.5).mean()):.6f}")
        if (x > -10).all():
            print("all above -10")
        if not (y > 0).all():
            print("not all positive")
        for row in y:
            print(row)
        """,
    )
    under_dynfuse = run_dynfuse(script, environment=environment, options=["--report", "none"])
    under_python = run_python(script, environment=environment)
    assert under_dynfuse.returncode == under_python.returncode == 0, under_dynfuse.stderr
    assert under_dynfuse.stdout == under_python.stdout
    assert under_dynfuse.stderr == ""


@needs_namespace_package
def test_saving_as_under_python(tmp_path, environment):
    script = write(
        tmp_path / "saving.py",
        """
        import sys
        import numpy as np

        y = np.arange(12).reshape(3, 4) * 3 - 7
        np.save(sys.argv[1] + ".npy", y)
        np.savetxt(sys.argv[1] + ".txt", y, fmt="%d")
        """,
    )
    assert run_dynfuse(script, "dynfuse", environment=environment).returncode == 0
    assert run_python(script, "python", environment=environment).returncode == 0
    assert numpy.array_equal(numpy.load(tmp_path / "dynfuse.npy"), numpy.load(tmp_path / "python.npy"))
    assert (tmp_path / "dynfuse.txt").read_text() == (tmp_path / "python.txt").read_text()


def documented_report_keys() -> tuple[set[str], set[str]]:
    """The keys the runner's docstring lists, and those the README's table lists."""
    docstring_table = runner.__doc__.split("Its keys:")[1]
    readme_section = (REPOSITORY / "README.md").read_text().split("## Run an unmodified NumPy script")[1]
    return (
        set(re.findall(r"^    ([a-z_]+)  ", docstring_table, flags=re.MULTILINE)),
        set(re.findall(r"^\| `([a-z_]+)` \|", readme_section.split("\n## ")[0], flags=re.MULTILINE)),
    )


REPORTING_SCRIPT = """
    import numpy as np

    x = np.asarray([0.5 * i for i in range(64)])
    for scale in (1.0, 2.0, 3.0):
        total = float((x * scale + 1).sum())
    print(f"{total:.6f}", np.sort(x * -1.0)[:2])
"""


def test_report_counts_what_dynfuse_did(tmp_path, environment):
    script = write(tmp_path / "reporting.py", REPORTING_SCRIPT)
    reports = []
    for number in (1, 2):  # the second process finds the first one's kernels on disk
        report_file = tmp_path / f"report{number}.json"
        result = run_dynfuse(script, environment=environment, options=["--report-file", report_file])
        assert result.returncode == 0, result.stderr
        report = json.loads(report_file.read_text())
        reports.append(report)
        assert f"{report['ops_recorded']:,} recorded, {report['ops_fused']:,} fused" in result.stderr
        assert f"{report['ops_run_at_once']:,} run at once by NumPy" in result.stderr
        assert f"{report['kernels_compiled']:,} compiled" in result.stderr
        assert "fallbacks  1: sort (1)" in result.stderr
    first, second = reports
    in_docstring, in_readme = documented_report_keys()
    assert set(first) | {"profile"} == in_docstring == in_readme  # "profile": with --profile
    assert first["script"] == str(script) and first["backend"] == "cpu" and first["exit_status"] == 0
    assert first["kernels_compiled"] >= 1 and first["kernels_reused_from_disk"] == 0
    assert first["kernels_reused_from_memory"] >= 2  # the loop's second and third sums
    assert second["kernels_compiled"] == 0 and second["kernels_reused_from_disk"] == first["kernels_compiled"]
    assert first["ops_recorded"] == second["ops_recorded"] >= first["ops_fused"] > 0
    assert first["fallbacks"] == first["stats"]["fallback_names"] == {"sort": 1}
    assert first["materializations"] == first["stats"]["materializations"] >= 3
    assert first["wall_seconds"] > 0


def test_report_counts_ops_run_at_once_with_the_tiers_on(tmp_path, environment):
    """As a user runs it: the small script's work on computed arrays is NumPy's calls, unrecorded."""
    script = write(tmp_path / "reporting.py", REPORTING_SCRIPT)
    result = run_dynfuse(
        script, environment={**environment, "DYNFUSE_TIERS": "1"}, options=["--report", "json"]
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == run_python(script, environment=environment).stdout
    report = json.loads(result.stderr)
    assert report["ops_run_at_once"] == report["stats"]["direct_ops"] > 0
    assert report["ops_recorded"] == report["materializations"] == 0


def test_backend_option_and_json_on_stderr(tmp_path, environment):
    script = write(tmp_path / "reporting.py", REPORTING_SCRIPT)
    result = run_dynfuse(script, environment=environment, options=["--backend", "numpy", "--report", "json"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == run_python(script, environment=environment).stdout
    report = json.loads(result.stderr)
    assert report["backend"] == "numpy"
    assert report["ops_fused"] == report["kernels_compiled"] == 0 < report["ops_interpreted"]
    refused = run_dynfuse(script, environment=environment, options=["--backend", "nonsense"])
    assert refused.returncode == 2 and "unknown backend 'nonsense'" in refused.stderr
    assert refused.stdout == ""


FAILING_SCRIPT = """
    import sys
    import numpy as np

    x = np.asarray([1, 2, 3]) * 2
    print(x.sum(), flush=True)
    mode = sys.argv[1]
    if mode == "raise":
        raise ValueError(f"no good: {x}")
    if mode == "broadcast":
        x + np.asarray([1, 2])
    if mode == "interrupt":
        raise KeyboardInterrupt
    sys.exit(3 if mode == "status" else "a message")
"""


@pytest.mark.parametrize("mode", ["raise", "broadcast", "interrupt", "status", "message"])
def test_failures_end_as_under_python(tmp_path, environment, mode):
    script = write(tmp_path / "failing.py", FAILING_SCRIPT)
    under_dynfuse = run_dynfuse(script, mode, environment=environment, options=["--report", "none"])
    under_python = run_python(script, mode, environment=environment)
    assert under_dynfuse.returncode == under_python.returncode != 0
    assert under_dynfuse.stdout == under_python.stdout
    if mode in ("broadcast", "interrupt"):  # dynfuse's message, its frames, an interrupt's starters
        assert exception_type(under_dynfuse.stderr) == exception_type(under_python.stderr)
        script_frame = under_python.stderr.split("    x + np.asarray")[0]
        assert mode == "interrupt" or under_dynfuse.stderr.startswith(script_frame)
    else:
        assert under_dynfuse.stderr == under_python.stderr


def exception_type(stderr: str) -> str:
    return stderr.splitlines()[-1].partition(":")[0]


def test_report_follows_an_exception(tmp_path, environment):
    script = write(tmp_path / "failing.py", FAILING_SCRIPT)
    result = run_dynfuse(script, "raise", environment=environment)
    traceback, report = result.stderr.split("ValueError: no good: [2 4 6]\n")
    assert traceback.startswith("Traceback (most recent call last):") and "runpy" not in traceback
    assert report.startswith(f"dynfuse run: {script} exited with status 1 after ")


@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="the console script is not installed here")
def test_console_script_runs_as_the_module_does(tmp_path, environment):
    script = write(tmp_path / "failing.py", FAILING_SCRIPT)
    options = ["--report", "none"]
    as_module = run_dynfuse(script, "status", environment=environment, options=options)
    as_console_script = run([CONSOLE_SCRIPT, "run", *options, script, "status"], environment, tmp_path)
    assert as_console_script.returncode == as_module.returncode == 3
    assert (as_console_script.stdout, as_console_script.stderr) == (as_module.stdout, as_module.stderr)


def test_a_script_that_cannot_be_read_is_status_2_and_not_run(tmp_path, capsys):
    assert runner.run(str(tmp_path / "missing.py")) == 2
    assert "can't open file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        main(["run", "--report", "json"])
    assert refused.value.code == 2
    assert "required: SCRIPT" in capsys.readouterr().err
