"""The array API standard's test suite (github.com/data-apis/array-api-tests) on ``dynfuse.numpy``:
it fails no test that NumPy passes, with the same examples drawn for both.

Slow (several minutes) and needs the suite: where ``ARRAY_API_TESTS_DIR`` names a checkout (with
its ``array-api`` submodule) that one, else a fresh shallow clone; skipped, saying why, where
neither can be had.
"""

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SUITE = "https://github.com/data-apis/array-api-tests"
EXAMPLES = 30


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    pytest.importorskip("ndindex", reason="the array API suite needs ndindex (pip install ndindex)")
    given = os.environ.get("ARRAY_API_TESTS_DIR")
    if given:
        return Path(given)
    checkout = tmp_path_factory.mktemp("array-api-tests")
    command = ["git", "clone", "-q", "--depth", "1", "--recurse-submodules", "--shallow-submodules", SUITE]
    try:
        subprocess.run([*command, str(checkout)], check=True, capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as error:
        pytest.skip(f"the array API suite could not be fetched from {SUITE}: {error}")
    return checkout


def failures(suite: Path, module: str, report: Path, tests: list[str], examples: int = EXAMPLES) -> set[str]:
    """The node ids of the suite's ``tests`` that fail on the namespace ``module``."""
    environment = {**os.environ, "ARRAY_API_TESTS_MODULE": module}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *tests,
            "-q",
            "-p",
            "no:cacheprovider",
            f"--max-examples={examples}",
            "--hypothesis-seed=0",
            f"--junitxml={report}",
        ],
        cwd=suite,
        env=environment,
        capture_output=True,
        timeout=3600,
    )
    failed = set()
    for case in ElementTree.parse(report).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            path = case.get("classname").replace(".", "/") + ".py"
            failed.add(f"{path}::{case.get('name')}")
    return failed


def test_dynfuse_fails_no_test_numpy_passes(suite, tmp_path):
    """Examples are drawn anew for each namespace, so a failure of dynfuse's alone is tried again,
    with more examples, on NumPy: it is dynfuse's if NumPy still passes it and dynfuse still fails."""
    numpy_failures = failures(suite, "numpy", tmp_path / "numpy.xml", ["array_api_tests"])
    dynfuse_failures = failures(suite, "dynfuse.numpy", tmp_path / "dynfuse.xml", ["array_api_tests"])
    alone = sorted(dynfuse_failures - numpy_failures)
    if alone:
        numpy_again = failures(suite, "numpy", tmp_path / "numpy-again.xml", alone, 10 * EXAMPLES)
        dynfuse_again = failures(suite, "dynfuse.numpy", tmp_path / "dynfuse-again.xml", alone, EXAMPLES)
        alone = sorted(dynfuse_again - numpy_again)
    assert alone == []
