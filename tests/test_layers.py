"""The package's layers are folders, and imports point down only (see each folder's `__init__.py`).

Every import of every module counts, also one inside a function or under `TYPE_CHECKING`: a lazy
import is still a dependency.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "lint_nograd"

# A module may import its own layer and those ranked below it. The ways in are the modules at the
# top of the package; the runtime (torch only there) is apart: it imports only itself, and only
# `lint_nograd/__init__.py` (lazily, for `stop_gradient`) imports it. The watcher (watch/, runtime
# too) may import report/, analysis/ and the runtime, and nothing imports it.
RANKS = {"report": 0, "analysis": 1, "project": 2, "checks": 3, "run": 4, "fix": 5}
WAYS_IN = 6
RUNTIME = frozenset({"lint_nograd.shim", "lint_nograd.func"})
WATCH = "watch"
WATCH_MAY_IMPORT = ("watch", "root", "runtime", RANKS["report"], RANKS["analysis"])


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The modules of the package that a module imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[:len(package.split(".")) - node.level + 1], *filter(None, [base])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found |= {target for target in targets if target in known and target != name}
    return found


def layer(module: str) -> str | int:
    if module == "lint_nograd":
        return "root"
    if module in RUNTIME:
        return "runtime"
    if module.split(".")[1] == WATCH:
        return WATCH
    parts = module.split(".")
    return RANKS[parts[1]] if len(parts) > 2 or parts[1] in RANKS else WAYS_IN


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Upward imports, imports of the runtime or of the watcher, and cycles between modules."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            source_layer, target_layer = layer(module), layer(target)
            if WATCH in (source_layer, target_layer):
                if target_layer == WATCH and source_layer != WATCH:
                    found.append(f"{module} -> {target}: the watcher is imported by nothing")
                elif target_layer not in WATCH_MAY_IMPORT:
                    found.append(f"{module} -> {target}: the watcher imports only report/, analysis/ and the runtime")
                continue
            if target_layer == "root":
                continue  # `lint_nograd.__version__`: the root imports nothing eagerly
            if target_layer == "runtime" or source_layer == "runtime":
                if not (source_layer in ("runtime", "root") and target_layer == "runtime"):
                    found.append(f"{module} -> {target}: the runtime is imported only by itself")
            elif source_layer == "root" or target_layer > source_layer:
                found.append(f"{module} -> {target}: an upward import")
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                found.append("a cycle: " + " -> ".join([*path[path.index(target):], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def package_graph() -> dict[str, set[str]]:
    names = module_names()
    return {name: imports_of(path, name, set(names)) for name, path in names.items()}


def test_every_layer_is_a_folder_with_a_docstring_that_says_what_it_may_import():
    for folder in [*RANKS, WATCH]:
        docstring = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text()))
        assert docstring and ("may import" in docstring.lower() or "imports nothing" in docstring.lower()), folder


def test_imports_point_down_only_and_no_two_modules_import_each_other():
    graph = package_graph()
    assert "lint_nograd.run.runner" in graph and "lint_nograd.fix.rewrite" in graph["lint_nograd.cli"] | {
        target for targets in graph.values() for target in targets}
    assert violations(graph) == []


@pytest.mark.parametrize("graph, expected", [
    ({"lint_nograd.run.stages": {"lint_nograd.fix.settings"}}, ["an upward import"]),
    ({"lint_nograd.project.summary": {"lint_nograd.fix.plan"}}, ["an upward import"]),
    ({"lint_nograd.analysis.model": {"lint_nograd.report.registry"}}, []),
    ({"lint_nograd.cli": {"lint_nograd.run.runner"}}, []),
    ({"lint_nograd.run.runner": {"lint_nograd.run.stages"}, "lint_nograd.run.stages": {"lint_nograd.run.runner"}},
     ["a cycle"]),
    ({"lint_nograd.run.engine": {"lint_nograd.shim"}}, ["the runtime"]),
    ({"lint_nograd.func": {"lint_nograd.shim"}, "lint_nograd": {"lint_nograd.shim"}}, []),
    ({"lint_nograd.watch.hooks": {"lint_nograd.report.output", "lint_nograd.analysis.releases", "lint_nograd.shim",
                                  "lint_nograd.watch.torch_names", "lint_nograd"}}, []),
    ({"lint_nograd.watch.hooks": {"lint_nograd.run.config"}}, ["the watcher imports only"]),
    ({"lint_nograd.cli": {"lint_nograd.watch.startup"}}, ["the watcher is imported by nothing"]),
    ({"lint_nograd.shim": {"lint_nograd.watch.hooks"}}, ["the watcher is imported by nothing"]),
])
def test_the_rule_catches_what_it_should(graph, expected):
    found = violations(graph)
    assert len(found) == len(expected) and all(word in line for word, line in zip(expected, found))
