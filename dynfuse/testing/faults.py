"""Faults injected into dynfuse, to check that none turns into a wrong answer.

``injected_faults(rate)`` makes planning, compiling and each kernel launch fail at random (seeded),
as a bug in the scheduler, a compiler crash or a kernel that cannot launch would: dynfuse must then
run the work with its reference executor, warn, count it, and give NumPy's result. The fuzzer runs
random programs under it (``dynfuse fuzz --faults RATE``).
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

from .. import registry, replay, schedule

# In every injected fault's message: the checker tells them from faults of dynfuse's own.
MARK = "injected fault"


class InjectedFault(RuntimeError):
    """A failure dynfuse did not cause, raised where a real one could arise."""


@contextlib.contextmanager
def injected_faults(rate: float, seed: int = 0, backend: str | None = None) -> Iterator[Counter[str]]:
    """Within the block, planning, compiling and launching on ``backend`` each fail with probability
    ``rate``. Yields the count of faults injected, by place. Compiled kernels and plans made within
    are dropped on both sides of the block, so that none made outside fails and none made inside
    fails later."""
    if not 0 <= rate <= 1:
        raise ValueError(f"injected_faults: the rate must lie in [0, 1], not {rate}")
    chosen = registry.BACKENDS[backend or registry.backend]
    if chosen is None:
        raise ValueError("injected_faults: the numpy backend compiles nothing to inject faults into")
    draw = random.Random(seed).random
    injected: Counter[str] = Counter()

    def maybe_fail(where: str) -> None:
        if draw() < rate:
            injected[where] += 1
            raise InjectedFault(f"{MARK} in {where}")

    compile_kernel, plan_for = chosen.compile, schedule.plan_for

    def failing_compile(kernel: Any) -> Any:
        maybe_fail("a compile")
        run = compile_kernel(kernel)

        def failing_launch(inputs: list, params: list, outputs: list) -> None:
            maybe_fail("a launch")
            run(inputs, params, outputs)

        return failing_launch

    def failing_plan(*arguments: Any) -> Any:
        maybe_fail("planning")
        return plan_for(*arguments)

    own_compile = vars(chosen).get("compile")  # one set on the instance already (a test's), or None
    _forget_compiled()
    chosen.compile, schedule.plan_for = failing_compile, failing_plan
    try:
        yield injected
    finally:
        if own_compile is None:
            del chosen.compile  # the class's method again
        else:
            chosen.compile = own_compile
        schedule.plan_for = plan_for
        _forget_compiled()


def _forget_compiled() -> None:
    replay.clear_kernels()
    replay.clear_plans()
