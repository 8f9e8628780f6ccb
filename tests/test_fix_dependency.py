"""The default fix adds no dependency on lint-nograd to a project that does not declare it: there
the cut is `.detach()`, which needs nothing new, wherever it is exact for what reaches the region;
elsewhere the `stop_gradient` fix is offered as unsafe, its title saying it adds the dependency.
A project that declares lint-nograd keeps the `stop_gradient` fix. (With torch, the forms are run
under each transform and tracer: tests/test_fix_dependency_torch.py.)"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_sources import FIXABLE
from lint_nograd import cli
from lint_nograd.fix.settings import declares_lint_nograd

DETACHED = FIXABLE.replace("    with torch.no_grad():\n        s = x.mean()\n", "    s = x.mean().detach()\n")
TRACED_BY_MAKE_FX = """\
import torch
from torch.fx.experimental.proxy_tensor import make_fx


def f(x):
    with torch.no_grad():
        s = x.mean()
    return x - s


make_fx(f)
"""
TUPLE = FIXABLE.replace("s = x.mean()", "s = x.max(0)").replace("x - s", "x - s.values")
DEPENDENCY = "adds a dependency on lint-nograd, which the project does not declare"


def run(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main([*args, "--no-cache"])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("files", [
    {"pyproject.toml": '[project]\nname = "app"\ndependencies = ["torch", "lint-nograd>=0.1"]\n'},
    {"pyproject.toml": '[project]\nname = "app"\n[project.optional-dependencies]\nrun = ["lint_nograd @ git+https://h/x"]\n'},
    {"pyproject.toml": '[project]\nname = "lint-nograd"\n'},
    {"requirements.txt": "torch\n-e git+https://h/x#egg=lint_nograd\n"},
    {"requirements/base.txt": "Lint.Nograd==0.1  # the runtime shim\n"},
], ids=["dependencies", "optional-dependencies", "the project itself", "requirements.txt", "requirements/"])
def test_a_project_that_declares_lint_nograd_keeps_the_stop_gradient_fix(tmp_path, monkeypatch, capsys, files):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    assert declares_lint_nograd(tmp_path)
    (tmp_path / "m.py").write_text(FIXABLE)
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "fix", "m.py")[0] == 0
    assert "from lint_nograd import stop_gradient\n" in (tmp_path / "m.py").read_text()


@pytest.mark.parametrize("files", [
    {},
    {"pyproject.toml": "[tool.lint-nograd]\n"},
    {"pyproject.toml": '[project]\nname = "app"\ndependencies = ["torch", "lint-nograd-extra"]\n'},
    {"requirements.txt": "torch\n# lint-nograd\n"},
], ids=["no metadata", "no dependencies", "another package", "a comment"])
def test_a_project_that_does_not_declare_it_gets_no_new_import(tmp_path, monkeypatch, capsys, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert not declares_lint_nograd(tmp_path)
    (tmp_path / "m.py").write_text(FIXABLE)
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, "fix", "--diff", "m.py")
    assert status == 1 and "+    s = x.mean().detach()\n" in out and "lint_nograd" not in out
    assert err == "Would fix 1 region in 1 file.\n"
    assert run(capsys, "fix", "m.py")[0] == 0
    assert (tmp_path / "m.py").read_text() == DETACHED


def test_a_pyproject_that_cannot_be_read_declares_nothing(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project\n")  # `check` and `fix` say why, with exit 2
    (tmp_path / "requirements.txt").write_bytes(b"\xff\xfe")
    assert not declares_lint_nograd(tmp_path)


@pytest.fixture
def undeclared(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\ndependencies = ["torch"]\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fixes(capsys, source: str, *args: str) -> list[tuple[str, str]]:
    """(title, applicability) of each fix `check` offers for `source`."""
    Path("m.py").write_text(source)
    found = json.loads(run(capsys, "check", "--output-format", "json", *args, "m.py")[1])
    return [(d["fix"]["message"], d["fix"]["applicability"]) for d in found if d["fix"]]


def test_make_fx_from_torch_2_14_gets_stop_gradient_as_an_unsafe_fix(undeclared, capsys):
    # make_fx records `.detach()` as `aten.alias` there (pytorch PR 186845): no cut
    assert fixes(capsys, TRACED_BY_MAKE_FX, "--torch-version", "2.13") == [
        ("Replace the `no_grad` region with `.detach()`", "safe")]
    assert fixes(capsys, TRACED_BY_MAKE_FX, "--torch-version", "2.14") == [
        (f"Replace the `no_grad` region with `stop_gradient(...)` (unsafe: {DEPENDENCY})", "unsafe")]
    # forward mode and another tracer reach it: the finding names the forward-mode transform, and the tracer too
    both = TRACED_BY_MAKE_FX.replace("make_fx(f)\n", "make_fx(f)\njacfwd(f)\n").replace(
        "import make_fx\n", "import make_fx\nfrom torch.func import jacfwd\n")
    assert fixes(capsys, both, "--torch-version", "2.15") == [
        (f"Replace the `no_grad` region with `stop_gradient(...)` (unsafe: {DEPENDENCY})", "unsafe")]
    assert fixes(capsys, FIXABLE, "--torch-version", "2.15") == [("Replace the `no_grad` region with `.detach()`",
                                                                 "safe")]


def test_where_detach_cannot_cut_the_value_stop_gradient_is_unsafe(undeclared, capsys):
    assert fixes(capsys, TUPLE) == [(f"Replace the `no_grad` region with `stop_gradient(...)` (unsafe: {DEPENDENCY})",
                                     "unsafe")]
    status, _, err = run(capsys, "fix", "m.py")
    assert status == 1 and "Nothing to fix: 1 hidden fix can be enabled with the `--unsafe-fixes` option." in err
    assert run(capsys, "fix", "--unsafe-fixes", "m.py")[0] == 0
    assert "from lint_nograd import stop_gradient\n" in (undeclared / "m.py").read_text()


def test_an_import_the_module_has_is_no_new_dependency(undeclared, capsys):
    source = FIXABLE.replace("import torch\n", "import torch\nimport lint_nograd as ln\n")
    assert fixes(capsys, source) == [("Replace the `no_grad` region with `ln.stop_gradient(...)`", "safe")]


def test_the_setting_named_keeps_its_form(undeclared, capsys):
    (undeclared / "pyproject.toml").write_text(
        '[project]\nname = "app"\n[tool.lint-nograd]\nstop-gradient = "lint_nograd.stop_gradient"\n')
    assert fixes(capsys, TUPLE) == [("Replace the `no_grad` region with `stop_gradient(...)`", "safe")]


def test_detach_needs_no_name_the_module_has_taken(undeclared, capsys):
    source = FIXABLE.replace("import torch\n", "import torch\n\nstop_gradient = lint_nograd = None\n")
    assert fixes(capsys, source) == [("Replace the `no_grad` region with `.detach()`", "safe")]
