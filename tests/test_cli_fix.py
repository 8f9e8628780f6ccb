"""`lint-nograd fix` end to end: what it writes, what it leaves alone, and its exit status."""
from __future__ import annotations

import stat
import subprocess
import sys

import pytest

from lint_nograd import cli

FIXABLE = """\
import torch
from torch.func import jacfwd


def f(x):
    with torch.no_grad():
        s = x.mean()
    return x - s


jacfwd(f)
"""
FIXED = """\
import torch
from torch.func import jacfwd
from lint_nograd import stop_gradient


def f(x):
    s = stop_gradient(x.mean())
    return x - s


jacfwd(f)
"""
NOT_FIXABLE = """\
import torch
from torch.func import grad

with torch.no_grad():
    d = grad(abs)(1.0)
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fix(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main(["fix", "--output-format", "concise", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_fix_rewrites_then_has_nothing_left(project, capsys):
    (project / "m.py").write_text(FIXABLE)
    status, out, err = fix(capsys)
    assert (status, out) == (0, "All checks passed!\n")
    assert err == "Fixed 1 region in 1 file.\nAdded `from lint_nograd import stop_gradient` to 1 file.\n"
    assert (project / "m.py").read_text() == FIXED
    assert fix(capsys) == (0, "All checks passed!\n", "")  # twice changes nothing
    assert sorted(p.name for p in project.iterdir()) == ["m.py", "pyproject.toml"]  # nothing left behind


def test_fix_reports_what_remains_and_exits_1(project, capsys):
    (project / "m.py").write_text(FIXABLE)
    (project / "n.py").write_text(NOT_FIXABLE)
    status, out, _ = fix(capsys)
    assert status == 1 and out.startswith("n.py:5:9: NG001 ") and "m.py" not in out
    assert (project / "n.py").read_text() == NOT_FIXABLE


def test_diff_writes_nothing(project, capsys):
    (project / "m.py").write_text(FIXABLE)
    status, out, _ = fix(capsys, "--diff")
    assert status == 1
    assert "--- a/m.py\n+++ b/m.py\n" in out and "+    s = stop_gradient(x.mean())\n" in out
    assert (project / "m.py").read_text() == FIXABLE


@pytest.mark.parametrize("newline, bom", [("\r\n", b""), ("\n", b"\xef\xbb\xbf")])
def test_line_endings_bom_and_mode_are_kept(project, capsys, newline, bom):
    path = project / "m.py"
    path.write_bytes(bom + FIXABLE.replace("\n", newline).encode())
    path.chmod(0o751)
    assert fix(capsys)[0] == 0
    assert path.read_bytes() == bom + FIXED.replace("\n", newline).encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o751


def test_a_read_only_file_is_left_alone(project, capsys):
    path = project / "m.py"
    path.write_text(FIXABLE)
    path.chmod(0o444)
    status, out, err = fix(capsys)
    assert status == 2 and "m.py is read-only; left as it is" in err
    assert path.read_text() == FIXABLE and "m.py:6:10: NG004" in out


def test_a_file_changed_during_the_fix_is_left_alone(project, capsys, monkeypatch):
    path = project / "m.py"
    path.write_text(FIXABLE)
    real = cli.fix_pending

    def edit_meanwhile(data, display_path, codes, settings):
        outcome = real(data, display_path, codes, settings)
        path.write_text(FIXABLE + "# edited meanwhile\n")
        return outcome

    monkeypatch.setattr(cli, "fix_pending", edit_meanwhile)
    status, _, err = fix(capsys)
    assert status == 2 and "changed while it was being fixed" in err
    assert path.read_text() == FIXABLE + "# edited meanwhile\n"
    assert [p.name for p in project.iterdir() if p.name.endswith(".tmp")] == []


def test_fix_through_the_console_script(project):
    (project / "m.py").write_text(FIXABLE)
    run = subprocess.run([sys.executable, "-m", "lint_nograd", "fix", "--no-cache", "m.py"],
                         capture_output=True, text=True, cwd=project)
    assert run.returncode == 0, run.stderr
    assert (project / "m.py").read_text() == FIXED
    again = subprocess.run([sys.executable, "-m", "lint_nograd", "check", "--no-cache", "m.py"],
                           capture_output=True, text=True, cwd=project)
    assert again.returncode == 0


def test_check_shows_the_fix_in_json(project, capsys):
    import json

    (project / "m.py").write_text(FIXABLE)
    assert cli.main(["check", "--output-format", "json"]) == 1
    [finding] = json.loads(capsys.readouterr().out)
    assert finding["code"] == "NG004" and finding["fix"]["applicability"] == "safe"
    edits = finding["fix"]["edits"]
    assert {"content": "from lint_nograd import stop_gradient\n", "location": {"row": 3, "column": 1},
            "end_location": {"row": 3, "column": 1}} in edits
    assert (project / "m.py").read_text() == FIXABLE


def test_stdin_check_and_fix(project):
    """Editors pipe the buffer in: `--stdin-filename` names it; fix prints the fixed source."""
    def run(*args: str, source: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lint_nograd", *args, "--no-cache", "--stdin-filename",
                               "pkg/m.py", "--output-format", "concise"], input=source, capture_output=True,
                              text=True, cwd=project)

    checked = run("check", source=FIXABLE)
    assert checked.returncode == 1 and checked.stdout.startswith("pkg/m.py:6:10: NG004 [*]")
    fixed = run("fix", source=FIXABLE)
    assert (fixed.returncode, fixed.stdout) == (0, FIXED) and "All checks passed!" in fixed.stderr
    left = run("fix", source=NOT_FIXABLE)
    assert (left.returncode, left.stdout) == (1, NOT_FIXABLE) and "pkg/m.py:5:9: NG001" in left.stderr
    assert not (project / "pkg").exists()


def test_force_exclude_applies_excludes_to_named_files(project, capsys):
    (project / "pyproject.toml").write_text('[tool.lint-nograd]\nextend-exclude = ["generated"]\n')
    (project / "generated").mkdir()
    (project / "generated" / "n.py").write_text(NOT_FIXABLE)
    assert cli.main(["check", "generated/n.py"]) == 1  # named: checked, as ruff does
    assert cli.main(["check", "--force-exclude", "generated/n.py"]) == 0
    capsys.readouterr()
