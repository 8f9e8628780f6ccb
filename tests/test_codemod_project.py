"""The libcst command rewrites a region that a transform in another module of its project reaches,
as `lint-nograd fix` does."""
from __future__ import annotations

import shutil
from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodContext

from lint_nograd import cli
from lint_nograd.codemod import StopGradientCommand

PROJECTS = Path(__file__).parent / "fixtures" / "projects"


def test_a_region_reached_from_another_module_is_rewritten(tmp_path, monkeypatch):
    project = tmp_path / "project"
    shutil.copytree(PROJECTS / "cross_module", project)
    model = project / "pkg" / "model.py"
    source = model.read_text()
    context = CodemodContext(filename=str(model))
    rewritten = StopGradientCommand(context).transform_module(cst.parse_module(source)).code
    # the project does not declare lint-nograd: the cut needs nothing new
    assert rewritten != source and ".detach()" in rewritten and "lint_nograd" not in rewritten
    monkeypatch.chdir(project)
    assert cli.main(["fix", "--no-cache", "--quiet", "pkg"]) in (0, 1)
    assert rewritten == model.read_text()  # what `lint-nograd fix` writes


def test_a_region_nothing_reaches_is_left_alone(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(PROJECTS / "cross_module", project)
    (project / "pkg" / "train.py").unlink()
    (project / "pkg" / "forms.py").unlink()
    (project / "pkg" / "__init__.py").write_text("")
    model = project / "pkg" / "model.py"
    source = model.read_text()
    command = StopGradientCommand(CodemodContext(filename=str(model)))
    assert command.transform_module(cst.parse_module(source)).code == source
