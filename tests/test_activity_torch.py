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


STATE_MODEL = '''\
import torch


class Normalised(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.1, 0.9, 9).reshape(3, 3))

    def forward(self, x):
        with torch.no_grad():
            sigma = torch.linalg.matrix_norm(self.weight, ord=2)
        return x @ (self.weight / sigma).T
'''
IN_PARAMETERS = '''\
import torch
from torch.func import functional_call, jacfwd

import model


def loss(params, x):
    return functional_call(model.Normalised(), params, (x,)).sum()


jacfwd(loss)
'''
OF_THE_CALL = '''\
import torch
from torch.func import jacfwd

import model

jacfwd(model.Normalised())
'''
UNRELATED = '''\
import torch
from torch.func import functional_call

def run(net, params, x):
    return functional_call(net, params, (x,))
'''


@pytest.mark.parametrize("scripts", [("in_parameters", "of_the_call"), ("of_the_call", "unrelated")],
                         ids=["functional_call", "elsewhere"])
def test_the_modules_state_is_varied_where_a_module_importing_it_differentiates_it(tmp_path, capsys, monkeypatch,
                                                                                   scripts):
    """`functional_call` in a module that imports the model's varies its parameters there; in a
    module that does not, it changes nothing for the model's regions."""
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "model.py").write_text(STATE_MODEL)
    texts = {"in_parameters": IN_PARAMETERS, "of_the_call": OF_THE_CALL, "unrelated": UNRELATED}
    for name in scripts:
        (tmp_path / f"{name}.py").write_text(texts[name])
    monkeypatch.chdir(tmp_path)
    cli.main(["check", "--no-cache", "--output-format", "json", "."])
    found = {(f["filename"], f["location"]["row"], f["code"]) for f in json.loads(capsys.readouterr().out)}
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("model", None)
    x = torch.tensor([1.0, 2.0, 4.0])
    net = runpy.run_path(str(tmp_path / "model.py"))["Normalised"]()
    params = dict(net.named_parameters())
    if "in_parameters" in scripts:
        loss = runpy.run_path(str(tmp_path / "in_parameters.py"))["loss"]
        assert not torch.allclose(jacfwd(loss)(params, x)["weight"], jacrev(loss)(params, x)["weight"])
        assert found == {("model.py", 10, "NG004")}
    else:
        assert torch.allclose(jacfwd(net)(x), jacrev(net)(x))
        assert found == set()
    sys.modules.pop("model", None)
