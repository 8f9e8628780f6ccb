"""Grad mode carried across calls, run with PyTorch: in fixtures/projects/grad_mode_calls, each case
computes a derivative through helpers called inside a region. Run as written and with its region
taken away, a case's result changes exactly where `check` reports an error at it; a note or no
finding means the same result."""
from __future__ import annotations

import ast
import contextlib
import inspect
import json
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from lint_nograd import cli  # noqa: E402

PROJECT = Path(__file__).parent / "fixtures" / "projects" / "grad_mode_calls"
CASES = PROJECT / "pkg" / "cases.py"


def case_names() -> list[str]:
    module = ast.parse(CASES.read_text())
    return [node.name for node in module.body if isinstance(node, ast.FunctionDef) and node.name != "energy"]


def findings_by_case(capsys) -> dict[str, list[dict]]:
    old = Path.cwd()
    os.chdir(PROJECT)
    try:
        cli.main(["check", "--no-cache", "--output-format", "json", "."])
    finally:
        os.chdir(old)
    module = ast.parse(CASES.read_text())
    found: dict[str, list[dict]] = {}
    for finding in json.loads(capsys.readouterr().out):
        assert finding["filename"].endswith("cases.py"), finding
        row = finding["location"]["row"]
        case = next(node.name for node in module.body
                    if isinstance(node, ast.FunctionDef) and node.lineno <= row <= node.end_lineno)
        found.setdefault(case, []).append(finding)
    return found


@contextlib.contextmanager
def regions_taken_away():
    """`with torch.inference_mode():`, `with torch.no_grad():` and `torch.set_grad_enabled(False)`
    do nothing while the case runs."""
    saved = torch.inference_mode, torch.no_grad, torch.set_grad_enabled
    torch.inference_mode = torch.no_grad = torch.set_grad_enabled = lambda *args, **kwargs: contextlib.nullcontext()
    try:
        yield
    finally:
        torch.inference_mode, torch.no_grad, torch.set_grad_enabled = saved


@pytest.fixture(scope="module")
def cases():
    sys.path.insert(0, str(PROJECT))
    try:
        import pkg.cases

        yield pkg.cases
    finally:
        sys.path.remove(str(PROJECT))
        for name in [name for name in sys.modules if name == "pkg" or name.startswith("pkg.")]:
            del sys.modules[name]


@pytest.mark.parametrize("case", case_names())
def test_an_error_is_a_changed_result(case, cases, capsys):
    found = findings_by_case(capsys).get(case, [])
    function = getattr(cases, case)
    as_written = function()
    with regions_taken_away():
        without_region = inspect.unwrap(function)()  # a decorator region was applied at import
    changed = not torch.allclose(as_written, without_region)
    errors = [f for f in found if f["severity"] == "error"]
    assert bool(errors) == changed, (case, found, as_written, without_region)
    assert all(f["code"] in ("NG001", "NG002") for f in found)


def test_the_look_alikes_are_silent(capsys):
    found = findings_by_case(capsys)
    source = CASES.read_text()
    look_alikes = case_names()[[name for name in case_names()].index("sensitivity_under_no_grad"):]
    assert "# look-alikes" in source and look_alikes
    assert not [case for case in look_alikes if case in found]
