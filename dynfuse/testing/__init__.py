"""Property-based testing of array code: random programs (Hypothesis strategies), a differential
check against NumPy, and checks of a user's own functions.

    from hypothesis import given
    from dynfuse.testing import assert_matches_numpy, cases

    @given(cases(max_depth=6))
    def test_dynfuse_matches_numpy(case):
        program, arrays = case
        assert_matches_numpy(program, arrays)

``python -m dynfuse fuzz`` runs the same check from the command line.
"""

from .compare import assert_matches_numpy, check_function, snippet
from .programs import FAMILIES, Input, Program, Ref, Step, cases, inputs, programs

__all__ = [
    "FAMILIES",
    "Input",
    "Program",
    "Ref",
    "Step",
    "assert_matches_numpy",
    "cases",
    "check_function",
    "inputs",
    "programs",
    "snippet",
]
