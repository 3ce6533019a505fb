"""dynfuse's modules import one another without cycles, so each sits on a floor above what it uses.

The graph is read from the source with ``ast``, so an import inside a function counts as much as one
at the top of a module: it runs, later, and ties the two modules together just the same. An edge
goes from a module to each dynfuse module one of its import statements names:

- ``import dynfuse.x.y`` and ``from dynfuse.x import y`` (or ``from .x import y``) name the module
  ``dynfuse.x.y`` where that is a module, else ``dynfuse.x`` (``y`` is then a name defined there);
  ``importlib.import_module`` with a constant name counts as an ``import`` of it.
- An import under ``if TYPE_CHECKING:`` is left out: it never runs, and is there for annotations.
- A package is its ``__init__``. Python runs a package's ``__init__`` before any of its submodules,
  but that order alone is no edge: a submodule depends on its package only where it names it
  (``import dynfuse``, or ``from .. import set_backend``, a name the ``__init__`` defines). So an
  ``__init__`` that imports its own submodules (to gather its public names) is fine as long as none
  of them imports the package back; one that does closes a cycle through the ``__init__``.
- The C extensions (``_recorder``, ``_launch``) import nothing of dynfuse: ``accelerate`` hands them
  what they call.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import dynfuse

PACKAGE = Path(dynfuse.__file__).parent


def module_names() -> dict[str, Path]:
    """Every dynfuse module by dotted name: a package by its ``__init__``."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of import statements under ``if TYPE_CHECKING:``."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def imported(name: str, source: str, is_package: bool, modules: Collection[str]) -> set[str]:
    """The ``modules`` that module ``name`` imports, anywhere in its ``source``."""
    tree = ast.parse(source)
    package = name if is_package else name.rpartition(".")[0]
    skipped = _type_checking_only(tree)
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in modules else base)
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            targets.add(node.args[0].value)
    return {target for target in targets if target in modules and target != name}


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {
        name: imported(name, path.read_text(), path.name == "__init__.py", modules)
        for name, path in modules.items()
    }


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of two or more modules that each reach all the others (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return groups


def cycle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest cycle through the group's first module (breadth-first inside the group), as the
    modules along it, the first repeated at the end."""
    start = min(group)
    came_from = {start: start}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph[module] & group):
                if target == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if target not in came_from:
                    came_from[target] = module
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle in the strongly connected group {sorted(group)}")


def test_imports_of_every_form_are_edges():
    modules = ["p", "p.a", "p.b", "p.c", "p.d", "p.e", "p.sub", "p.sub.f", "p.sub.g", "p.sub.h"]
    source = """
import p.a
from . import b
from .c import name_in_c
from .sub import f, name_in_sub
from p.sub.g import name_in_g
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from . import d

def later():
    from . import e
    importlib.import_module("p.sub.h")
"""
    assert imported("p.sub.x", source.replace("from .", "from .."), False, modules) == set(modules[1:]) - {
        "p.d"
    }
    assert imported("p", source, True, modules) == set(modules[1:]) - {"p.d"}
    # A name the package's __init__ defines is an edge to the package, not to its submodules
    assert imported("p.a", "from . import name_in_p\nimport p", False, modules) == {"p"}


def test_cycles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}, "f": {"e", "g"}, "g": {"f"}}
    assert strongly_connected(graph) == [{"a", "b", "c"}, {"f", "g"}]
    assert cycle_in(graph, {"a", "b", "c"}) == ["a", "b", "c", "a"]


def test_settings_and_memory_import_nothing_above_them():
    """Settings, and what a memory is: everything else may import them. Host memory's large arrays
    come from its pool, which reads a setting and counts."""
    graph = import_graph()
    assert graph["dynfuse.config"] == set()
    assert graph["dynfuse.devices"] == {"dynfuse.host_pool"}
    assert graph["dynfuse.host_pool"] == {"dynfuse.config", "dynfuse.stats"}


def test_no_import_cycles():
    graph = import_graph()
    found = [
        f"{' -> '.join(cycle_in(graph, group))} (of {len(group)} modules: {', '.join(sorted(group))})"
        for group in strongly_connected(graph)
    ]
    assert not found, "import cycles among dynfuse's modules:\n" + "\n".join(found)


# The floors of docs/ARCHITECTURE.md, from the ground up: a module imports only from its own floor
# or below. A module is on the floor of the longest name listed that it is or starts with.
FLOORS = (
    (
        "dynfuse.config",
        "dynfuse.devices",
        "dynfuse.float_errors",
        "dynfuse.host_pool",
        "dynfuse.stats",
        "dynfuse.pools",
        "dynfuse.version",
    ),
    ("dynfuse.disk_cache", "dynfuse.views"),
    ("dynfuse.ops", "dynfuse.dtypes"),
    ("dynfuse.trace", "dynfuse.kernel"),
    ("dynfuse.codegen", "dynfuse.backends", "dynfuse.cache", "dynfuse.interpret"),
    ("dynfuse.schedule",),
    ("dynfuse.registry",),
    (
        "dynfuse.launch",
        "dynfuse.tiers",
        "dynfuse.replay",
        "dynfuse.execute",
        "dynfuse.pressure",
        "dynfuse.direct",
    ),
    ("dynfuse.record", "dynfuse.array", "dynfuse.accelerate"),
    (
        "dynfuse",
        "dynfuse.numpy",
        "dynfuse.explain",
        "dynfuse.runner",
        "dynfuse.__main__",
        "dynfuse.dask",
        "dynfuse.profiler",
        "dynfuse.profile_report",
    ),
)


def floor_of(module: str) -> int:
    """The floor of ``module``: that of the longest prefix ``FLOORS`` names."""
    best, floor = "", -1
    for level, names in enumerate(FLOORS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > len(best):
                best, floor = name, level
    return floor


def test_every_module_imports_only_its_floor_or_below():
    graph = import_graph()
    upward = [
        f"{module} (floor {floor_of(module)}) imports {target} (floor {floor_of(target)})"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if floor_of(target) > floor_of(module)
    ]
    assert not upward, "imports that reach up a floor:\n" + "\n".join(upward)


# What only planning, compiling, launching, a GPU, Dask or a rare path needs: ``import dynfuse.numpy``
# leaves it to the first call that does, so every program's start-up does not pay for it.
DEFERRED = (
    "llvmlite",
    "dynfuse.schedule",
    "dynfuse.codegen.common",
    "dynfuse.codegen.llvm",
    "dynfuse.codegen.cuda",
    "dynfuse.backends.llvm_host",
    "dynfuse.backends.llvm_compiler",
    "dynfuse.disk_cache",
    "dynfuse.numpy.fft",
    "dynfuse.numpy.random",
    "dynfuse.dask",
    "numpy.fft",
    "numpy.random",
    "dask",
    "cupy",
    "concurrent.futures",
    "decimal",
    "hashlib",
    "secrets",
    "shutil",
    "subprocess",
    "tempfile",
    "uuid",
)


def test_import_leaves_what_only_kernels_and_rare_paths_need():
    """In a fresh process, ``import dynfuse.numpy`` imports none of ``DEFERRED`` that ``import
    numpy`` does not already (what NumPy imports is no cost of dynfuse's)."""
    code = (
        "import sys, json, numpy; before = set(sys.modules); import dynfuse.numpy; "
        f"print(json.dumps([m for m in {DEFERRED!r} if m in sys.modules and m not in before]))"
    )
    environment = {name: value for name, value in os.environ.items() if name != "DYNFUSE_BACKEND"}
    result = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == []
