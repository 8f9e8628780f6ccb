"""Every message of every fixture, on every release the table knows, is one short line: at most
100 characters. The why and the way out are in the help, the long names in related places."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from lint_nograd import cli
from lint_nograd.analysis.releases import RELEASES
from lint_nograd.checks.finding import MAX_MESSAGE
from lint_nograd.fix.rewrite import check_with_fixes
from lint_nograd.report.registry import RULES

FIXTURES = Path(__file__).parent / "fixtures"
SOURCES = sorted([*FIXTURES.glob("checker/*.py"), *FIXTURES.glob("fix/*.in.py"), *FIXTURES.glob("notebooks/*.ipynb")])
PROJECTS = sorted(path.parent for path in FIXTURES.glob("projects/*/pyproject.toml"))
VERSIONS = [row.release for row in RELEASES]


def assert_short(messages: list[str]) -> None:
    assert messages
    for message in messages:
        assert len(message) <= MAX_MESSAGE and "\n" not in message, message


@pytest.mark.parametrize("version", VERSIONS)
def test_every_fixture_message_fits(version):
    messages = []
    for path in SOURCES:
        name = path.name.replace(".in.py", ".py")
        messages += [d.message for d in check_with_fixes(path.read_bytes(), name, frozenset(RULES),
                                                         torch_version=version)]
    assert_short(messages)
    assert MAX_MESSAGE == 100


@pytest.mark.parametrize("version", VERSIONS)
def test_every_project_fixture_message_fits(version, capsys):
    messages = []
    old = Path.cwd()
    for project in PROJECTS:
        os.chdir(project)
        try:
            cli.main(["check", "--no-cache", "--output-format", "json", "--torch-version", version, "."])
        finally:
            os.chdir(old)
        messages += [d["message"] for d in json.loads(capsys.readouterr().out)]
    assert_short(messages)


def test_long_names_are_shortened(tmp_path):
    """Names and code as written are cut, so that no message grows with them."""
    name = "a_very_long_name_for_a_function_" * 3
    source = (f"import torch\nfrom torch.func import grad, jacfwd\n\n"
              f"def {name}(x):\n    with torch.set_grad_enabled(False):\n        s = x.mean()\n    return s * x\n\n"
              f"{name}_too = grad({name})\n"
              f"with torch.set_grad_enabled(False):\n    {name}_value = {name}(1.0)\n    {name}_too(1.0)\n"
              f"{name}_value.backward()\n"
              f"jacfwd({name}, argnums=0)(torch.ones(3))\n")
    found = check_with_fixes(source.encode(), "m.py", frozenset(RULES))
    assert {d.code for d in found} >= {"NG001", "NG003", "NG004"}
    assert_short([d.message for d in found])
