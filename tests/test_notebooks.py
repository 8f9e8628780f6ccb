"""Jupyter notebooks: `check` and `fix` on a real notebook file, written by nbformat."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lint_nograd import cli

nbformat = pytest.importorskip("nbformat")
NOTEBOOK = Path(__file__).parent / "fixtures" / "notebooks" / "meta_learning.ipynb"


@pytest.fixture
def notebook(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
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
    assert lines[0].startswith("nb.ipynb:cell 3:2:10: NG004 [*] `no_grad` region in `centered`, "
                               "reached in forward mode by `jacfwd(...)` at cell 4, line 3")
    assert lines[1].startswith("nb.ipynb:cell 6:2:13: NG001 `grad(...)` runs inside a `no_grad` "
                               "region (cell 6, line 1)")
    assert len(lines) == 4  # two findings, the summary: magics, shell lines and %%bash broke nothing


def test_fix_rewrites_code_cells_only(notebook, capsys):
    before = json.loads(notebook.read_text())
    status, out = run(capsys, "fix", "nb.ipynb")
    assert status == 1 and "NG001" in out and "NG004" not in out  # NG001 is not fixable
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
