"""The forms of Python that reach follows (docs/project.md), run with PyTorch. In each project of
FORMS, `pkg/cases.py` defines `case_*(x)`: each returns what one function computes in two ways that
agree unless a `no_grad` region it runs is ignored or dropped (forward and reverse mode, or a traced
graph and eager mode). `check pkg/cases.py` reports an error in a case exactly when the two differ:
the form lets reach see a region that changes the result, and its look-alikes stay silent."""
from __future__ import annotations

import ast
import contextlib
import importlib
import json
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from lint_nograd import cli  # noqa: E402

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
FORMS = ("annotations", "builtin_calls", "generators", "grad_mode_call_form", "guards", "handed_transforms", "imported_makers",
         "names_read_deep", "parameter_methods", "registries", "star_imports", "virtual_methods")
X = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)


def cases_of(project: Path) -> list[ast.FunctionDef]:
    module = ast.parse((project / "pkg" / "cases.py").read_text())
    return [node for node in module.body if isinstance(node, ast.FunctionDef) and node.name.startswith("case_")]


def errors_by_case(project: Path, capsys) -> dict[str, list[dict]]:
    old = Path.cwd()
    os.chdir(project)
    try:
        cli.main(["check", "--no-cache", "--output-format", "json", "pkg/cases.py"])
    finally:
        os.chdir(old)
    cases = cases_of(project)
    found: dict[str, list[dict]] = {}
    for finding in json.loads(capsys.readouterr().out):
        row = finding["location"]["row"]
        case = next((node.name for node in cases if node.lineno <= row <= node.end_lineno), None)
        assert case is not None, finding  # every finding is at a case's call
        if finding["severity"] == "error":
            found.setdefault(case, []).append(finding)
    return found


@contextlib.contextmanager
def imported(project: Path):
    sys.path.insert(0, str(project))
    try:
        yield importlib.import_module("pkg.cases")
    finally:
        sys.path.remove(str(project))
        for name in [name for name in sys.modules if name == "pkg" or name.startswith("pkg.")]:
            del sys.modules[name]


@pytest.mark.parametrize("form", FORMS)
def test_an_error_is_a_changed_result(form, capsys):
    project = PROJECTS / form
    errors = errors_by_case(project, capsys)
    changed = {}
    with imported(project) as cases:
        for node in cases_of(project):
            first, second = getattr(cases, node.name)(X.clone())
            changed[node.name] = not torch.allclose(first, second)
    assert {case for case in changed if case in errors} == {case for case, differs in changed.items() if differs}
    assert any(changed.values()) and not all(changed.values())  # each form has cases and look-alikes
