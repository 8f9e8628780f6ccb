"""Jupyter notebooks: `check` and `fix` on a real notebook file, written by nbformat."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_sources import DECLARES_LINT_NOGRAD
from lint_nograd import cli

nbformat = pytest.importorskip("nbformat")
NOTEBOOK = Path(__file__).parent / "fixtures" / "notebooks" / "meta_learning.ipynb"


@pytest.fixture
def notebook(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(DECLARES_LINT_NOGRAD)
    monkeypatch.chdir(tmp_path)
    shutil.copy(NOTEBOOK, tmp_path / "nb.ipynb")
    return tmp_path / "nb.ipynb"


def run(capsys, *args: str) -> tuple[int, str]:
    status = cli.main([*args, "--no-cache", "--output-format", "concise"])
    return status, capsys.readouterr().out


def test_check_names_the_cell_and_the_line_in_it(notebook, capsys):
    status, out = run(capsys, "check", ".")  # a folder is searched for notebooks too
    assert status == 1
    lines = out.splitlines()
    assert lines[0] == ("nb.ipynb:cell 3:2:10: NG004 [*] `jacfwd(...)` ignores this `no_grad` region: "
                        "forward-mode gradients flow through it")
    assert lines[1] == ("nb.ipynb:cell 6:2:13: NG001 `grad(...)` differentiates as if the `no_grad` region "
                        "(cell 6, line 1) were not there")
    assert len(lines) == 4  # two findings, the summary: magics, shell lines and %%bash broke nothing


def test_related_places_name_their_cell(notebook, capsys):
    """The call that reaches a region in another cell is pointed at in that cell, in every format."""
    assert cli.main(["check", "nb.ipynb", "--no-cache", "--output-format", "json"]) == 1
    forward, under = json.loads(capsys.readouterr().out)
    [reacher] = forward["related"]
    assert (reacher["filename"], reacher["cell"], reacher["location"]) == ("nb.ipynb", 4, {"row": 3, "column": 15})
    assert reacher["message"].endswith("reaches it in forward mode")
    [region] = under["related"]
    assert (region["cell"], region["location"]["row"], region["message"]) == (6, 1, "the `no_grad` region")
    assert cli.main(["check", "nb.ipynb", "--no-cache"]) == 1
    assert "  = note: nb.ipynb:cell 4:3:15: `jacfwd(centered)` reaches it in forward mode\n" in capsys.readouterr().out


def test_fix_rewrites_code_cells_only(notebook, capsys):
    before = json.loads(notebook.read_text())
    status, out = run(capsys, "fix", "nb.ipynb")
    assert status == 0 and "NG001" in out and "NG004" not in out  # NG001 is not fixable, and a note
    after = json.loads(notebook.read_text())
    changed = [i for i, (a, b) in enumerate(zip(before["cells"], after["cells"])) if a != b]
    assert changed == [1, 2]  # the import joins the first code cell; the region goes
    assert "".join(after["cells"][2]["source"]) == (
        "def centered(x):\n    shift = stop_gradient(x.mean())  # a constant\n    return x - shift")
    assert after["cells"][1]["source"][:3] == [  # above the first statement, a magic here
        "from lint_nograd import stop_gradient\n", "%matplotlib inline\n", "import torch\n"]
    for old, new in zip(before["cells"], after["cells"]):
        assert {k: v for k, v in old.items() if k != "source"} == {k: v for k, v in new.items() if k != "source"}
    assert {k: v for k, v in before.items() if k != "cells"} == {k: v for k, v in after.items() if k != "cells"}
    nbformat.validate(nbformat.reads(notebook.read_text(), as_version=4))


def test_fix_keeps_the_json_layout_and_is_idempotent(notebook, capsys):
    run(capsys, "fix", "nb.ipynb")
    text = notebook.read_text()
    assert text == nbformat.writes(nbformat.reads(text, as_version=4)) + "\n"  # nbformat's own layout
    assert text.endswith("}\n") and "café" in text
    run(capsys, "fix", "nb.ipynb")
    assert notebook.read_text() == text


def test_a_notebook_that_is_not_json_is_an_ng000(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.ipynb").write_text('{"cells": [ with torch.no_grad(): grad(f)(x) loss.backward()')
    status, out = run(capsys, "check", "broken.ipynb")
    assert status == 1 and out.startswith("broken.ipynb:1:1: NG000 not a Jupyter notebook")
