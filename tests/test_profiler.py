"""``dynfuse.profile`` and ``dynfuse run --profile``: what dynfuse did, attributed to the program's lines.

Scripts run in subprocesses, as a user runs them; a block profiled in this process checks that a
profile changes no result and leaves the runtime as it found it."""

import json
import subprocess
import sys
from html import escape
from html.parser import HTMLParser

import numpy
import pytest

import dynfuse
import dynfuse.numpy as dnp
from dynfuse import execute, pressure, replay, trace

from .test_runner import environment, write  # noqa: F401 (a fixture)

# A fallback on one line, a materialization on another, and a loop whose kernels compile again as
# the shape changes (every kernel compiled: DYNFUSE_TIERS=0)
SCRIPT = """\
import numpy as np


def grid(n):
    return np.ones((n, n)) * 2.0 + 1.0


a = np.ones((300, 300))
ordered = np.sort(a, axis=0)
c = a * 2 + 1
print(float(c.sum()))
for n in range(300, 306):
    total = float(grid(n).sum())
print("<done> & 'quoted'")
"""
FALLBACK_LINE, RECORDED_LINE, MATERIALIZED_LINE, RECOMPILED_LINE, LOOP_LINE = 9, 10, 11, 5, 13


def entry(entries, line):
    return next(found for found in entries if found["line"] == line)


def test_a_scripts_profile_names_its_lines_and_why(tmp_path, environment):  # noqa: F811
    script = write(tmp_path / "profiled.py", SCRIPT)
    report_file, page = tmp_path / "report.json", tmp_path / "profile.html"
    command = [sys.executable, "-m", "dynfuse", "run", "--profile", "--report-file", report_file]
    command += ["--profile-html", page, script]
    result = subprocess.run(
        [str(part) for part in command],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "<done> & 'quoted'"
    report = json.loads(report_file.read_text())
    profile = report["profile"]
    assert set(profile) == {"wall_seconds", "lines", "fallbacks", "recompiles", "kernels"}
    lines = profile["lines"]
    assert {line["file"] for line in lines} == {str(script)}

    # the fallback: its line, function and reason
    (fallback,) = profile["fallbacks"]
    assert (fallback["line"], fallback["function"], fallback["name"]) == (FALLBACK_LINE, "<module>", "sort")
    assert (
        fallback["reason"] == "a NumPy function dynfuse does not record" == report["fallback_reasons"]["sort"]
    )
    assert entry(lines, FALLBACK_LINE)["fallbacks"] == 1

    # the ops a line recorded, fused where another line materialized them, and why it did
    recorded = entry(lines, RECORDED_LINE)
    assert recorded["recorded"] == recorded["fused"] == 2 and recorded["materializations"] == 0
    materialized = entry(lines, MATERIALIZED_LINE)
    assert materialized["materializations"] == 1 and materialized["source"] == "print(float(c.sum()))"
    assert materialized["reasons"] == {"a Python number read": 1}
    assert materialized["seconds"] > 0 and materialized["phases"]["kernel"] > 0
    assert sum(materialized["phases"].values()) == pytest.approx(materialized["seconds"])
    loop = entry(lines, LOOP_LINE)
    assert loop["materializations"] == 6 and loop["function"] == "<module>"

    # the helper's line (and the loop's, whose sum the kernels fuse) compiles again at each shape
    recompiled = entry(profile["recompiles"], RECOMPILED_LINE)
    assert (recompiled["function"], recompiled["compiles"]) == ("grid", 6)
    assert "shape (300, 300) -> (301, 301)" in recompiled["changes"]
    assert entry(profile["recompiles"], LOOP_LINE)["compiles"] == 6
    grid_line = [str(script), RECOMPILED_LINE]
    grid_kernels = [kernel for kernel in profile["kernels"] if grid_line in kernel["lines"]]
    assert len(grid_kernels) == 6 and all(kernel["launches"] == 1 for kernel in grid_kernels)

    # the lines' times fit in the run's
    assert sum(line["seconds"] for line in lines) <= profile["wall_seconds"] <= report["wall_seconds"] * 1.01

    # the text after the report, and the page
    text = result.stderr.split("dynfuse profile:", 1)[1]
    assert f"profiled.py:{MATERIALIZED_LINE}" in text and "print(float(c.sum()))" in text
    assert "sort (1 call): a NumPy function dynfuse does not record" in text
    parser = HTMLParser()
    page_text = page.read_text()
    parser.feed(page_text)
    parser.close()
    for source_line in filter(str.strip, SCRIPT.splitlines()):
        assert escape(source_line) in page_text or escape(source_line, quote=False) in page_text


def test_dynfuse_profile_environment_variable_prints_the_table_at_exit(tmp_path, environment):  # noqa: F811
    script = write(
        tmp_path / "plain.py",
        """\
        import dynfuse.numpy as np
        x = np.ones((300, 300))
        print(float((x * 3 + 1).sum()))
        """,
    )
    result = subprocess.run(
        [sys.executable, script],
        env={**environment, "DYNFUSE_PROFILE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "360000.0"
    assert "dynfuse profile:" in result.stderr and "plain.py:3" in result.stderr


def _wrapped_now():
    return (
        execute.materialize,
        pressure.materialize,
        execute._Run.run_kernel,
        replay.replay_now,
        replay.launch_replay,
        trace.profile_hook,
    )


def test_a_profiled_block_computes_what_an_unprofiled_one_does_and_leaves_nothing_behind():
    def program():
        grid = dnp.asarray(numpy.linspace(0, 1, 200 * 200).reshape(200, 200))
        for _ in range(40):  # a statement that replays, small and large
            grid[1:-1, 1:-1] = 0.25 * (grid[1:-1, :-2] + grid[1:-1, 2:] + grid[:-2, 1:-1] + grid[2:, 1:-1])
        big = dnp.ones((400, 400))
        values = [float((big * step + 1).sum()) for step in range(5)]
        return numpy.asarray(grid), values

    before = _wrapped_now()
    expected = program()
    with dynfuse.profile() as profile:
        with pytest.raises(RuntimeError, match="already running"):
            dynfuse.profile().start()
        got = program()
    assert _wrapped_now() == before
    numpy.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]
    data = profile.data()
    here = [line for line in data["lines"] if line["file"] == __file__]
    # the stencil's writes (3 adds and a multiply each): every op recorded computed once, and counted
    (write,) = [line for line in here if line["source"].startswith("grid[1:-1, 1:-1] = ")]
    assert write["recorded"] > 0 and write["fused"] + write["interpreted"] == write["recorded"]
    assert (
        write["recorded"] + write["direct"] == 40 * 4 and write["materializations"] > 0
    )  # 3 adds, 1 multiply
    (sums,) = [line for line in here if line["source"].startswith("values = ")]
    assert sums["materializations"] == 5 and sums["reasons"] == {"a Python number read": 5}
    assert profile.text().startswith("dynfuse profile:")
    # profiling again after the first one stopped works
    with dynfuse.profile() as again:
        float(dnp.ones(10).sum())
    assert again.data()["wall_seconds"] > 0
