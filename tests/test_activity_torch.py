"""A literal of the class is a constant only while no other module replaces it: with
`net.temperature = x.mean()` in a script, the region over `self.temperature` is reported, and
forward and reverse mode disagree; without it, neither."""
from __future__ import annotations

import json
import os
import runpy
import sys

import pytest

torch = pytest.importorskip("torch")
from lint_nograd import cli  # noqa: E402
from torch.func import jacfwd, jacrev  # noqa: E402

MODEL = '''\
import torch


class Tempered(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.temperature = 2.0

    def forward(self, x):
        with torch.no_grad():
            t = self.temperature * 2
        return x / t
'''
SCRIPT = '''\
import torch
from torch.func import jacfwd

import model


def loss(x):
    net = model.Tempered()
{replace}    return net(x)


jacfwd(loss)
'''


@pytest.mark.parametrize("replaced", [True, False], ids=["replaced", "literal"])
def test_a_literal_replaced_from_another_module_is_no_constant(tmp_path, capsys, monkeypatch, replaced):
    replace = "    net.temperature = x.mean()\n" if replaced else ""
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text(SCRIPT.format(replace=replace))
    monkeypatch.chdir(tmp_path)
    cli.main(["check", "--no-cache", "--output-format", "json", "."])
    found = [(f["filename"], f["location"]["row"], f["code"]) for f in json.loads(capsys.readouterr().out)]
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("model", None)
    loss = runpy.run_path(str(tmp_path / "train.py"))["loss"]
    x = torch.tensor([1.0, 2.0, 4.0])
    agree = torch.allclose(jacfwd(loss)(x), jacrev(loss)(x))
    assert agree == (not replaced)
    assert found == ([("model.py", 10, "NG004")] if replaced else [])
    sys.modules.pop("model", None)
