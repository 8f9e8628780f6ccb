"""`lint-nograd fix` end to end: what it writes, what it leaves alone, and its exit status."""
from __future__ import annotations

import io
import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_sources import CLEAN, DECLARES_LINT_NOGRAD, FIXABLE, NOT_FIXABLE
from lint_nograd import cli

FIXED = """\
import torch
from lint_nograd import stop_gradient
from torch.func import jacfwd


def f(x):
    s = stop_gradient(x.mean())
    return x - s


jacfwd(f)
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(DECLARES_LINT_NOGRAD)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fix(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main(["fix", "--output-format", "concise", *args])
    out, err = capsys.readouterr()
    return status, out, err


def check(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main(["check", "--no-cache", "--output-format", "concise", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_fix_rewrites_then_has_nothing_left(project, capsys):
    (project / "m.py").write_text(FIXABLE)
    status, out, err = fix(capsys)
    assert (status, out) == (0, "No findings.\n")
    assert err == "Fixed 1 region in 1 file.\nAdded `from lint_nograd import stop_gradient` to 1 file.\n"
    assert (project / "m.py").read_text() == FIXED
    assert fix(capsys) == (0, "No findings.\n", "")  # twice changes nothing
    left = sorted(p.name for p in project.iterdir() if p.name != ".lint_nograd_cache")
    assert left == ["m.py", "pyproject.toml"]  # nothing left behind


def test_fix_reports_what_remains_and_exits_1(project, capsys):
    (project / "m.py").write_text(FIXABLE)
    (project / "n.py").write_text(NOT_FIXABLE)
    status, out, _ = fix(capsys, "--exit-non-zero-on-note")  # what remains is a note
    assert status == 1 and out.startswith("n.py:5:9: NG001 ") and "m.py" not in out
    assert fix(capsys)[0] == 0
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

    def edit_meanwhile(data, display_path, codes, reach, settings, *rest):
        outcome = real(data, display_path, codes, reach, settings, *rest)
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
    assert {"content": "from lint_nograd import stop_gradient\n", "location": {"row": 2, "column": 1},
            "end_location": {"row": 2, "column": 1}} in edits
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
    assert (fixed.returncode, fixed.stdout) == (0, FIXED) and "No findings." in fixed.stderr
    left = run("fix", "--exit-non-zero-on-note", source=NOT_FIXABLE)
    assert (left.returncode, left.stdout) == (1, NOT_FIXABLE) and "pkg/m.py:5:9: NG001" in left.stderr
    assert not (project / "pkg").exists()


def test_force_exclude_applies_excludes_to_named_files(project, capsys):
    (project / "pyproject.toml").write_text('[tool.lint-nograd]\nextend-exclude = ["generated"]\n')
    (project / "generated").mkdir()
    (project / "generated" / "n.py").write_text(NOT_FIXABLE)
    assert cli.main(["check", "--exit-non-zero-on-note", "generated/n.py"]) == 1  # named: checked, as ruff does
    assert cli.main(["check", "--exit-non-zero-on-note", "--force-exclude", "generated/n.py"]) == 0
    capsys.readouterr()


# -- fix tiers: safe fixes by default, unsafe ones when asked ------------------------------------------

UNSAFE = """\
import torch
from torch.func import jacfwd


def distil(teacher, x):
    with torch.no_grad():
        target = teacher(x)
    return x - target


jacfwd(distil, argnums=1)
"""
UNSAFE_FIXED = UNSAFE.replace("from torch.func import jacfwd\n", "from lint_nograd import stop_gradient\n"
                              "from torch.func import jacfwd\n").replace(
    "target = teacher(x)", "target = stop_gradient(teacher(x))")


def test_unsafe_fixes_are_left_alone_by_default(project, capsys):
    (project / "m.py").write_text(UNSAFE)
    status, out, err = fix(capsys)
    assert status == 1 and (project / "m.py").read_text() == UNSAFE
    assert err == "Nothing to fix: 1 hidden fix can be enabled with the `--unsafe-fixes` option.\n"
    assert out.endswith("Found 1 error.\nNo fixes available (1 hidden fix can be enabled with the "
                        "`--unsafe-fixes` option).\n")
    assert "m.py:6:10: NG004 `jacfwd(...)` ignores this `no_grad` region" in out and "[*]" not in out


@pytest.mark.parametrize("config, args", [("", ["--unsafe-fixes"]), ("unsafe-fixes = true\n", [])])
def test_unsafe_fixes_when_asked(project, capsys, config, args):
    (project / "pyproject.toml").write_text("[tool.lint-nograd]\n" + config)
    (project / "m.py").write_text(UNSAFE)
    status, out, err = fix(capsys, *args)
    assert (status, out) == (0, "No findings.\n") and err.startswith("Fixed 1 region in 1 file.\n")
    assert (project / "m.py").read_text() == UNSAFE_FIXED


def test_the_command_line_wins_over_unsafe_fixes_in_the_configuration(project, capsys):
    (project / "pyproject.toml").write_text("[tool.lint-nograd]\nunsafe-fixes = true\n")
    (project / "m.py").write_text(UNSAFE)
    assert fix(capsys, "--no-unsafe-fixes")[0] == 1 and (project / "m.py").read_text() == UNSAFE


def test_check_shows_which_fixes_are_hidden(project, capsys):
    (project / "safe.py").write_text(FIXABLE)
    (project / "unsafe.py").write_text(UNSAFE)
    assert cli.main(["check", "--output-format", "concise"]) == 1
    out = capsys.readouterr().out
    assert "safe.py:6:10: NG004 [*] " in out and "unsafe.py:6:10: NG004 `jacfwd(...)`" in out
    assert out.endswith("Found 2 errors.\n[*] 1 fixable with `lint-nograd fix` (1 hidden fix can be enabled "
                        "with the `--unsafe-fixes` option).\n")
    assert cli.main(["check", "--output-format", "concise", "--unsafe-fixes"]) == 1
    out = capsys.readouterr().out
    assert "unsafe.py:6:10: NG004 [*] " in out
    assert out.endswith("Found 2 errors.\n[*] 2 fixable with `lint-nograd fix --unsafe-fixes`.\n")


def test_json_carries_the_applicability(project, capsys):
    import json

    (project / "m.py").write_text(UNSAFE)
    assert cli.main(["check", "--output-format", "json"]) == 1
    [finding] = json.loads(capsys.readouterr().out)
    assert finding["fix"]["applicability"] == "unsafe"
    assert finding["fix"]["message"] == (
        "Keep the `no_grad` region, so that `teacher(...)` records no graph, and cut its values with "
        "`stop_gradient(...)` (unsafe: assumes `teacher(...)` returns new tensors)")
    assert {"content": "        target = stop_gradient(teacher(x))\n", "location": {"row": 6, "column": 1},
            "end_location": {"row": 8, "column": 1}} in [
        {**edit, "content": edit["content"].split("\n", 1)[1]} for edit in finding["fix"]["edits"]
        if edit["content"].startswith("    with")]


def test_check_fix_fixes_as_fix_does(project, capsys):
    (project / "m.py").write_text(FIXABLE)
    (project / "n.py").write_text(NOT_FIXABLE)
    status = cli.main(["check", "--fix", "--output-format", "concise", "--exit-non-zero-on-note"])
    out, err = capsys.readouterr()
    assert status == 1 and out.startswith("n.py:5:9: NG001 ") and err.startswith("Fixed 1 region in 1 file.\n")
    assert (project / "m.py").read_text() == FIXED


def test_show_fixes_lists_each_region(project, capsys):
    (project / "m.py").write_text(FIXABLE + FIXABLE.split("\n\n\n")[1].replace("def f", "def g") + "\njacfwd(g)\n")
    status, _, err = fix(capsys, "--show-fixes")
    assert status == 0
    assert err == ("Fixed 2 regions in 1 file:\n"
                   "  m.py:6: NG004 (no-grad-under-forward-mode)\n"
                   "  m.py:13: NG004 (no-grad-under-forward-mode)\n"
                   "Added `from lint_nograd import stop_gradient` to 1 file.\n")


def test_diff_exits_0_when_nothing_is_fixable(project, capsys):
    (project / "n.py").write_text(NOT_FIXABLE)
    (project / "u.py").write_text(UNSAFE)
    # it says that it ran, as ruff does: how many findings have no fix, how many fixes are hidden
    assert fix(capsys, "--diff") == (0, "", "Nothing to fix: 1 finding has no fix, 1 hidden fix can be enabled "
                                            "with the `--unsafe-fixes` option.\n")
    status, out, err = fix(capsys, "--diff", "--unsafe-fixes")
    assert status == 1 and "+        target = stop_gradient(teacher(x))\n" in out
    assert err == "Would fix 1 region in 1 file.\nWould add `from lint_nograd import stop_gradient` to 1 file.\n"
    assert (project / "u.py").read_text() == UNSAFE


@pytest.mark.parametrize("setting, line, added", [
    ("detach", "    s = x.mean().detach()\n", None),
    ("mypkg.autodiff.stop_gradient", "    s = stop_gradient(x.mean())\n", "from mypkg.autodiff import stop_gradient"),
])
def test_the_stop_gradient_setting(project, capsys, setting, line, added):
    (project / "pyproject.toml").write_text(f'[tool.lint-nograd]\nstop-gradient = "{setting}"\n')
    (project / "m.py").write_text(FIXABLE)
    status, _, err = fix(capsys)
    text = (project / "m.py").read_text()
    assert status == 0 and line in text and "lint_nograd" not in text
    assert (f"Added `{added}` to 1 file.\n" in err) == bool(added) and ("Added" in err) == bool(added)
    if added:
        assert text.startswith(f"import torch\n{added}\nfrom torch.func import jacfwd\n")


def test_a_helper_of_the_project_is_imported_as_first_party(project, capsys):
    """isort files a package found in the project's import roots as first-party, after torch."""
    (project / "pyproject.toml").write_text('[tool.lint-nograd]\nstop-gradient = "mypkg.autodiff.stop_gradient"\n')
    (project / "mypkg").mkdir()
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "m.py").write_text(FIXABLE)
    assert fix(capsys)[0] == 0
    assert (project / "m.py").read_text().startswith(
        "import torch\nfrom torch.func import jacfwd\n\nfrom mypkg.autodiff import stop_gradient\n\n\ndef f(x):")


def test_a_bad_stop_gradient_setting_is_a_configuration_error(project, capsys):
    (project / "pyproject.toml").write_text('[tool.lint-nograd]\nstop-gradient = "mypkg.cut"\n')
    (project / "m.py").write_text(FIXABLE)
    status, out, err = fix(capsys)
    assert status == 2 and "`stop-gradient` in [tool.lint-nograd] of pyproject.toml names `cut`" in err
    assert (project / "m.py").read_text() == FIXABLE


def test_the_cache_keeps_fixes_apart_by_setting(project, capsys):
    import json

    (project / "m.py").write_text(FIXABLE)
    assert cli.main(["check", "--output-format", "json"]) == 1
    [default] = json.loads(capsys.readouterr().out)
    (project / "pyproject.toml").write_text('[tool.lint-nograd]\nstop-gradient = "detach"\n')
    assert cli.main(["check", "--output-format", "json"]) == 1
    [detached] = json.loads(capsys.readouterr().out)
    assert "stop_gradient(" in default["fix"]["edits"][0]["content"]
    assert ".detach()" in detached["fix"]["edits"][0]["content"]


def test_fix_takes_out_the_noqa_codes_the_project_check_finds_unused(tmp_path, monkeypatch, capsys):
    """NG100's fix is applied from the whole project's check: a directive used by a finding that
    linking gives another file's call stays; a code silencing nothing goes, the directive with it
    when it was its only code."""
    project = tmp_path / "one_finding"
    shutil.copytree(Path(__file__).parent / "fixtures" / "projects" / "one_finding", project)
    monkeypatch.chdir(project)
    model = (project / "pkg" / "model.py").read_text()
    assert cli.main(["fix", "--no-cache", "--extend-select", "NG100", "--show-fixes", "pkg/train.py"]) == 1
    err = capsys.readouterr().err
    assert "pkg/train.py:11: NG100 (unused-noqa)" in err and "pkg/train.py:7" not in err
    train = (project / "pkg" / "train.py").read_text()
    assert "traced = symbolic_trace(loss)  # noqa: NG005\n" in train  # used: loss is not given
    assert "plain = jacrev(stale)\n" in train
    assert (project / "pkg" / "model.py").read_text() == model  # not given: not written
    cli.main(["check", "--no-cache", "--extend-select", "NG100", "--output-format", "concise", "pkg/train.py"])
    assert "NG100" not in capsys.readouterr().out


STALE = CLEAN.replace("torch.ones(3)\n", "torch.ones(3)  # noqa: NG004\n")  # a directive that silences nothing


def as_notebook(source: str) -> str:
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": source.splitlines(keepends=True)}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


@pytest.mark.parametrize("name", ["m.py", "nb.ipynb"])
@pytest.mark.parametrize("way", ["fix", "--diff", "stdin"])
def test_every_way_of_fixing_takes_out_what_ng100_finds(project, capsys, monkeypatch, way, name):
    """What `check` marks fixable, `fix` fixes: written, shown as a diff (exit 1, as ruff's), or
    printed back from standard input; in a Python file and in a notebook's cell alike."""
    source = as_notebook(STALE) if name.endswith(".ipynb") else STALE
    fixed = as_notebook(CLEAN) if name.endswith(".ipynb") else CLEAN
    (project / name).write_text(source)
    status, out, _ = check(capsys, "--extend-select", "NG100", name)
    assert status == 1 and " NG100 [*] " in out
    args = ["--no-cache", "--extend-select", "NG100"]
    if way == "stdin":
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(source.encode())))
        status, out, err = fix(capsys, *args, "--stdin-filename", name, "-")
        assert (status, out) == (0, fixed) and "Fixed 1 unused noqa directive in 1 file." in err
    elif way == "--diff":
        status, out, err = fix(capsys, *args, "--diff", name)
        assert status == 1 and "-x = torch.ones(3)  # noqa: NG004" in out and "+x = torch.ones(3)" in out
        assert err == "Would fix 1 unused noqa directive in 1 file.\n"
    else:
        assert fix(capsys, *args, name)[0] == 0
        source = fixed
    assert (project / name).read_text() == source
    assert check(capsys, "--extend-select", "NG100", name)[0] == (1 if way != "fix" else 0)


def test_the_diff_takes_out_only_the_codes_the_project_check_finds_unused(tmp_path, monkeypatch, capsys):
    """As `fix` writes it (above): a directive that a finding linking gives stays in the diff."""
    project = tmp_path / "one_finding"
    shutil.copytree(Path(__file__).parent / "fixtures" / "projects" / "one_finding", project)
    monkeypatch.chdir(project)
    status, out, _ = fix(capsys, "--no-cache", "--extend-select", "NG100", "--diff", "pkg/train.py")
    assert status == 1
    assert [line for line in out.splitlines() if line[:1] in "+-" and line[:3] not in ("---", "+++")] == [
        "-plain = jacrev(stale)  # noqa: NG006", "+plain = jacrev(stale)"]
