"""Findings are for one torch release: `torch-version`, `--torch-version`, else the torch installed
(read from its metadata, never imported), else the newest release the table knows. What NG002 says,
and how severe it is, follow `lint_nograd/analysis/releases.py`; pinned here, by the real command line, for
releases on both sides of the fix for pytorch issue 177318."""
from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from lint_nograd.analysis import releases

SOURCE = """\
import torch
from torch.func import grad, jacfwd, linearize

x = torch.tensor(1.5)
with torch.inference_mode():
    slope = grad(torch.sin)(x)
    curve = jacfwd(torch.sin)(x)
    line = linearize(torch.sin, x)
with torch.no_grad():
    other = grad(torch.sin)(x)
"""

EXPECTED = {
    "2.5": [
        ("NG002", "error", "`grad(...)` returns zeros on torch 2.5: it runs under `inference_mode` (line 5)"),
        ("NG002", "error", "`jacfwd(...)` raises on torch 2.5: it runs under `inference_mode` (line 5)"),
        ("NG002", "error", "`linearize(...)` returns zeros on torch 2.5: it runs under `inference_mode` (line 5)"),
        ("NG001", "note", "`grad(...)` differentiates as if the `no_grad` region (line 9) were not there"),
    ],
    "2.13": [
        ("NG002", "note", "`grad(...)` under `inference_mode` (line 5): correct on torch 2.13, zeros before 2.12"),
        ("NG002", "note", "`jacfwd(...)` under `inference_mode` (line 5): correct on torch 2.13, raises before 2.12"),
        ("NG002", "error", "`linearize(...)` returns zeros on torch 2.13: it runs under `inference_mode` (line 5)"),
        ("NG001", "note", "`grad(...)` differentiates as if the `no_grad` region (line 9) were not there"),
    ],
    "2.4": [
        ("NG002", "error", "`grad(...)` returns zeros on torch 2.4: it runs under `inference_mode` (line 5)"),
        ("NG002", "error", "`jacfwd(...)` raises on torch 2.4: it runs under `inference_mode` (line 5)"),
        ("NG002", "error", "`linearize(...)` raises on torch 2.4: it runs under `inference_mode` (line 5)"),
        ("NG001", "note", "`grad(...)` differentiates as if the `no_grad` region (line 9) were not there"),
    ],
}


def lint_nograd(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lint_nograd", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "m.py").write_text(SOURCE)
    return tmp_path


def findings(done: subprocess.CompletedProcess) -> list[tuple[str, str, str]]:
    assert done.returncode == 1, done.stderr
    return [(d["code"], d["severity"], d["message"]) for d in json.loads(done.stdout)]


@pytest.mark.parametrize("version", EXPECTED)
def test_messages_and_severities_per_release(project, version):
    done = lint_nograd(project, "check", "--no-cache", "--output-format", "json", "--torch-version", version, "m.py")
    assert findings(done) == EXPECTED[version]


def test_the_setting_and_the_option_the_option_wins(project):
    (project / "pyproject.toml").write_text('[tool.lint-nograd]\ntorch-version = "2.5"\n')
    assert findings(lint_nograd(project, "check", "--no-cache", "--output-format", "json")) == EXPECTED["2.5"]
    done = lint_nograd(project, "check", "--no-cache", "--output-format", "json", "--torch-version", "2.13.0")
    assert findings(done) == EXPECTED["2.13"]


def test_the_summary_counts_what_the_release_gets_wrong(project):
    done = lint_nograd(project, "check", "--no-cache", "--output-format", "concise", "--torch-version", "2.13")
    assert done.stdout.endswith("\nFound 1 error and 3 notes.\n")
    done = lint_nograd(project, "check", "--no-cache", "--output-format", "concise", "--torch-version", "2.5")
    assert done.stdout.endswith("\nFound 3 errors and 1 note.\n")


def test_notes_alone_do_not_fail_a_run_unless_asked(project):
    """On 2.13 the transforms under `inference_mode` and `no_grad` are right: notes, exit 0."""
    (project / "m.py").write_text(SOURCE.replace("    line = linearize(torch.sin, x)\n", ""))
    done = lint_nograd(project, "check", "--no-cache", "--output-format", "concise", "--torch-version", "2.13")
    assert done.returncode == 0 and done.stdout.endswith("\nFound 3 notes.\n")
    done = lint_nograd(project, "check", "--no-cache", "--torch-version", "2.13", "--exit-non-zero-on-note")
    assert done.returncode == 1
    done = lint_nograd(project, "check", "--no-cache", "--torch-version", "2.5")  # zeros there: errors
    assert done.returncode == 1


def test_ng001_is_an_error_on_a_release_where_the_transform_misbehaves_under_the_region():
    """No release in the table gets a transform under `no_grad` wrong (old functorch did: it raised);
    a row that said so makes NG001 an error whose help says to call the transform outside."""
    import ast
    from dataclasses import replace
    from types import MappingProxyType

    from lint_nograd.analysis.model import SemanticModel
    from lint_nograd.checks import transform_in_region

    model = SemanticModel(ast.parse(SOURCE), SOURCE)
    row = releases.behaviour("2.13")
    wrong = replace(row, outer_no_grad=MappingProxyType({**row.outer_no_grad, "grad": "raises"}))
    [right] = [f for f in transform_in_region.check(model, frozenset({"NG001"}), row, "2.13") if f.code == "NG001"]
    [bad] = [f for f in transform_in_region.check(model, frozenset({"NG001"}), wrong, "2.13") if f.code == "NG001"]
    assert (right.severity, bad.severity) == ("note", "error")
    assert bad.message == "`grad(...)` raises on torch 2.13: it runs under `no_grad` (line 9)"
    assert "outside the region" in bad.help and "noqa" in right.help


@pytest.mark.parametrize("args, message", [
    (["--torch-version", "two"], 'argument --torch-version: must be a torch release such as "2.4", not \'two\''),
    (["--torch-version", "1.13"], "1.13 is older than the releases lint-nograd knows, 2.1 and newer"),
])
def test_a_bad_option_is_a_usage_error(project, args, message):
    done = lint_nograd(project, "check", *args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_a_bad_setting_is_a_configuration_error(project):
    (project / "pyproject.toml").write_text("[tool.lint-nograd]\ntorch-version = 2.10\n")
    done = lint_nograd(project, "check")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ('lint-nograd: error: `torch-version` in [tool.lint-nograd] of pyproject.toml must be '
                           'a string, such as "2.4", not 2.1\n')


def test_the_default_is_the_torch_installed_read_without_importing_it():
    code = "import sys; from lint_nograd.analysis.releases import default_target; print(default_target(), 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    try:
        installed = metadata.version("torch")
    except metadata.PackageNotFoundError:
        expected = releases.RELEASES[-1].release
    else:
        expected = ".".join(map(str, releases.parse_version(installed)[:2]))
    assert done.stdout.split() == [expected, "False"]


@pytest.mark.parametrize("installed, expected", [
    (None, releases.RELEASES[-1].release),  # no torch next to the linter: the newest release known
    ("2.7.1+cu126", "2.7"),
    ("2.16.0.dev20260101", "2.16"),  # newer than the table: its newest row, named as installed
    ("1.13.1", releases.RELEASES[-1].release),  # older than the table
    ("nonsense", releases.RELEASES[-1].release),
])
def test_the_default_when_torch_is_missing_or_unknown(monkeypatch, installed, expected):
    monkeypatch.setattr(releases, "installed_torch", lambda: installed)
    assert releases.default_target.__wrapped__() == expected


@pytest.mark.parametrize("folder, version", [
    ("torch-2.13.0+cpu.dist-info", "2.13.0+cpu"),
    ("torch-2.5.1-py3.11.egg-info", "2.5.1"),
    ("torchvision-0.29.1.dist-info", None),  # another package
    ("torch_audio-2.9.1.dist-info", None),
])
def test_the_installed_torch_is_read_from_its_metadata_folder(tmp_path, monkeypatch, folder, version):
    (tmp_path / folder).mkdir()
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(tmp_path)])
    assert releases.installed_torch() == version


@pytest.mark.parametrize("where", ["option", "setting"])
def test_a_release_newer_than_the_table_is_reported_as_its_newest_row_said_once(project, where):
    newest = releases.RELEASES[-1].release
    args = ["--torch-version", "2.99"] if where == "option" else []
    if where == "setting":
        (project / "pyproject.toml").write_text('[tool.lint-nograd]\ntorch-version = "2.99.1"\n')
    done = lint_nograd(project, "check", "--no-cache", "--output-format", "json", *args)
    as_newest = findings(lint_nograd(project, "check", "--no-cache", "--output-format", "json",
                                     "--torch-version", newest))
    assert findings(done) == [(code, severity, message.replace(f"torch {newest}", "torch 2.99"))
                              for code, severity, message in as_newest]
    named = "2.99" if where == "option" else "2.99"
    assert done.stderr == (f"lint-nograd: warning: torch {named} is newer than the releases lint-nograd knows: "
                           f"reporting what torch {newest} does\n")


def test_a_release_the_table_covers_says_nothing(project):
    done = lint_nograd(project, "check", "--no-cache", "--output-format", "json", "--torch-version",
                       releases.RELEASES[-1].measured_on)
    assert done.returncode == 1 and done.stderr == ""
