"""ruff's habits on the real command line: `--output-file`, `-` for standard input, `-q`/`-qq`,
`check --fix`, `--show-fixes`, `--add-noqa`, `--watch`, `--config`, and SARIF from a sub-folder."""
from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_sources import DECLARES_LINT_NOGRAD, FIXABLE, NOT_FIXABLE
from lint_nograd import cli

NOTEBOOK = Path(__file__).parent / "fixtures" / "notebooks" / "meta_learning.ipynb"


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(DECLARES_LINT_NOGRAD)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def lint_nograd(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lint_nograd", *args, "--no-cache"], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=120)


# --output-file

def test_output_file_takes_the_report_and_stderr_keeps_the_errors(project):
    (project / "n.py").write_text(NOT_FIXABLE)
    (project / "report.txt").write_text("an older report\n")
    done = lint_nograd("check", "--output-format", "concise", "--output-file", "report.txt", "n.py", "missing.py",
                       cwd=project)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "lint-nograd: error: path does not exist: missing.py\n"
    report = (project / "report.txt").read_text()
    assert report.startswith("n.py:5:9: NG001 ") and report.endswith("Found 1 note.\n")
    assert [path.name for path in project.iterdir() if path.name.endswith(".tmp")] == []


def test_output_file_of_fix_in_json_in_a_new_folder(project):
    (project / "m.py").write_text(FIXABLE)
    (project / "n.py").write_text(NOT_FIXABLE)
    done = lint_nograd("fix", "-o", "reports/lint.json", "--output-format", "json", cwd=project)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")  # a note is left: no failed run
    assert [finding["code"] for finding in json.loads((project / "reports" / "lint.json").read_text())] == ["NG001"]
    assert "stop_gradient(x.mean())" in (project / "m.py").read_text()


def test_an_output_file_that_cannot_be_written_is_an_error(project, capsys):
    (project / "m.py").write_text(NOT_FIXABLE)
    (project / "report").mkdir()
    assert cli.main(["check", "--no-cache", "--output-file", "report"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("lint-nograd: error: cannot write report: ")


# `-` is standard input

@pytest.mark.parametrize("args, shown", [(["-"], "-"), (["-", "--stdin-filename", "pkg/m.py"], "pkg/m.py")])
def test_a_dash_reads_standard_input(project, args, shown):
    done = lint_nograd("check", "--output-format", "concise", *args, cwd=project, stdin=NOT_FIXABLE)
    assert done.returncode == 0 and done.stdout.startswith(f"{shown}:5:9: NG001 ")  # a note
    fixed = lint_nograd("fix", *args, cwd=project, stdin=FIXABLE)
    assert fixed.returncode == 0 and "s = stop_gradient(x.mean())" in fixed.stdout
    assert "No findings." in fixed.stderr and list(project.iterdir()) == [project / "pyproject.toml"]


def test_standard_input_is_checked_in_the_project_of_the_name_it_is_given(project):
    """As ruff: `--stdin-filename sub/x.py` takes the settings of sub/pyproject.toml, and the
    modules of the project rooted there."""
    package = project / "sub" / "pkg"
    package.mkdir(parents=True)
    (project / "sub" / "pyproject.toml").write_text('[tool.lint-nograd]\nextend-select = ["NG100"]\n')
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(
        "import torch\n\n\ndef loss(x):\n    with torch.no_grad():\n        s = x.mean()\n    return x - s\n")
    source = "from torch.func import jacfwd\n\nfrom pkg.model import loss\n\njacfwd(loss)\nx = 1  # noqa: NG001\n"
    done = lint_nograd("check", "--output-format", "concise", "--stdin-filename", "sub/x.py", "-", cwd=project,
                       stdin=source)
    found = [line.split(" ")[:2] for line in done.stdout.splitlines() if line.startswith("sub/")]
    assert found == [["sub/x.py:5:1:", "NG004"], ["sub/x.py:6:8:", "NG100"]], done.stdout + done.stderr


# -q, -qq, --silent

@pytest.mark.parametrize("quiet, lines", [(["-q"], 1), (["--quiet"], 1), (["-qq"], 0), (["--silent"], 0)])
def test_quiet_prints_findings_only_and_qq_nothing(project, quiet, lines):
    (project / "n.py").write_text(NOT_FIXABLE)
    loud = lint_nograd("check", "--output-format", "concise", cwd=project).stdout.splitlines(keepends=True)
    assert loud[0].startswith("n.py:5:9: NG001 ") and loud[1:] == ["Found 1 note.\n"]
    done = lint_nograd("check", "--output-format", "concise", *quiet, cwd=project)
    assert (done.returncode, done.stdout, done.stderr) == (0, "".join(loud[:lines]), "")


def test_quiet_keeps_errors_and_drops_the_fix_summary(project):
    (project / "m.py").write_text(FIXABLE)
    done = lint_nograd("fix", "-q", "missing.py", "m.py", cwd=project)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "lint-nograd: error: path does not exist: missing.py\n"
    clean = lint_nograd("check", "-qq", cwd=project)
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "")


# check --fix, --show-fixes, --unsafe-fixes

def test_check_fix_show_fixes_and_unsafe_fixes(project):
    unsafe = FIXABLE.replace("def f(x):", "def f(x, teacher=torch.nn.Identity()):").replace(
        "s = x.mean()", "s = teacher(x)")
    (project / "m.py").write_text(FIXABLE)
    (project / "u.py").write_text(unsafe)
    done = lint_nograd("check", "--fix", "--show-fixes", "--output-format", "concise", cwd=project)
    assert done.returncode == 1 and done.stdout.startswith("u.py:6:10: NG004 ")
    assert done.stderr.startswith("Fixed 1 region in 1 file:\n  m.py:6: NG004 (no-grad-under-forward-mode)\n")
    assert (project / "u.py").read_text() == unsafe
    done = lint_nograd("check", "--fix", "--show-fixes", "--unsafe-fixes", cwd=project)
    assert done.returncode == 0 and done.stderr.startswith(
        "Fixed 1 region in 1 file:\n  u.py:6: NG004 (no-grad-under-forward-mode)\n")
    assert "s = stop_gradient(teacher(x))" in (project / "u.py").read_text()


# --add-noqa

def test_add_noqa_merges_into_existing_comments_and_leaves_the_file_clean(project):
    source = ("import torch\nfrom torch.func import grad, vmap\n\n"
              "with torch.no_grad():\r\n"
              "    a = grad(abs)(1.0)  # noqa: E501\r\n"
              "    b = grad(abs)(1.0)  # keep this\r\n"
              "    c = vmap(abs)(1.0); d = grad(abs)(2.0)\r\n"
              '    e = grad(abs)(1.0, """\n"""); f = 1\n')
    (project / "m.py").write_bytes(source.encode())
    done = lint_nograd("check", "--add-noqa", cwd=project)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "Added 3 noqa directives.\n")
    assert (project / "m.py").read_bytes().decode() == source.replace(
        "# noqa: E501", "# noqa: E501, NG001").replace(
        "# keep this", "# keep this  # noqa: NG001").replace(
        "d = grad(abs)(2.0)", "d = grad(abs)(2.0)  # noqa: NG001")
    # the finding whose line ends inside a string stays: a comment there would change the string
    left = lint_nograd("check", "--output-format", "concise", cwd=project)
    assert left.returncode == 0 and left.stdout.startswith("m.py:8:9: NG001 ") and "Found 1 note." in left.stdout
    again = lint_nograd("check", "--add-noqa", cwd=project)
    assert (again.returncode, again.stderr) == (0, "")


def test_add_noqa_in_notebook_cells(project):
    shutil.copy(NOTEBOOK, project / "nb.ipynb")
    before = json.loads((project / "nb.ipynb").read_text())
    done = lint_nograd("check", "--add-noqa", "nb.ipynb", cwd=project)
    assert (done.returncode, done.stderr) == (0, "Added 2 noqa directives.\n")
    after = json.loads((project / "nb.ipynb").read_text())
    assert after["cells"][2]["source"][1] == "    with torch.no_grad():  # noqa: NG004\n"
    assert after["cells"][5]["source"][1].endswith("(x)  # noqa: NG001\n")
    changed = [index for index, (old, new) in enumerate(zip(before["cells"], after["cells"])) if old != new]
    assert changed == [2, 5] and lint_nograd("check", "nb.ipynb", cwd=project).returncode == 0


@pytest.mark.parametrize("args, message", [
    (["--add-noqa", "-"], "--add-noqa works on files: it cannot read standard input"),
    (["--watch", "--stdin-filename", "m.py"], "--watch works on files: it cannot read standard input"),
])
def test_add_noqa_and_watch_refuse_standard_input(project, args, message):
    done = lint_nograd("check", *args, cwd=project, stdin=NOT_FIXABLE)
    assert (done.returncode, done.stderr) == (2, f"lint-nograd: error: {message}\n")


# --watch

def test_watch_checks_again_when_a_file_changes(project):
    pytest.importorskip("watchfiles")
    (project / "n.py").write_text(NOT_FIXABLE)
    process = subprocess.Popen([sys.executable, "-m", "lint_nograd", "check", "--watch", "--no-cache",
                                "--output-format", "concise"], cwd=project, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stderr], daemon=True).start()

    def wait_for(text: str, deadline: float, on_wait=lambda: None) -> None:
        while time.monotonic() < deadline:
            try:
                if lines.get(timeout=0.5).startswith(text):
                    return
            except queue.Empty:
                on_wait()
        raise AssertionError(f"no `{text}` in time")

    try:
        wait_for("Watching for file changes.", time.monotonic() + 60)
        # the watcher starts just after the line: write until it sees a change
        fixed = NOT_FIXABLE.replace("(1.0)", "(1.0)  # noqa: NG001")
        wait_for("File change detected", time.monotonic() + 60, lambda: (project / "n.py").write_text(fixed))
        wait_for("Watching for file changes.", time.monotonic() + 60)
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    assert out.startswith("n.py:5:9: NG001 ") and "Found 1 note.\n" in out
    assert out.endswith("No findings.\n")


def test_watch_without_watchfiles_says_what_to_install(project, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "watchfiles", None)  # import fails
    assert cli.main(["check", "--watch"]) == 2
    assert capsys.readouterr().err == ("lint-nograd: error: --watch needs the watchfiles package: "
                                       "pip install watchfiles (or the check-watch extra)\n")


# --config

def test_config_without_our_table_is_an_error(project):
    (project / "n.py").write_text(NOT_FIXABLE)
    (project / "setup.toml").write_text('[tool.black]\nline-length = 100\n')
    done = lint_nograd("check", "--config", "setup.toml", cwd=project)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("lint-nograd: error: setup.toml has no [tool.lint-nograd] table "
                           "(nor is it a lint-nograd.toml)\n")


def test_config_may_be_a_lint_nograd_toml(project):
    (project / "n.py").write_text(NOT_FIXABLE)
    (project / "lint-nograd.toml").write_text('ignore = ["NG001"]\n')
    assert lint_nograd("check", "--config", "lint-nograd.toml", cwd=project).returncode == 0
    (project / "lint-nograd.toml").write_text('[tool.lint-nograd]\nignore = ["NG001"]\n')
    done = lint_nograd("check", "--config", "lint-nograd.toml", cwd=project)
    assert (done.returncode, done.stderr) == (2, "lint-nograd: error: unknown key `tool` in lint-nograd.toml\n")


# SARIF and GitHub from a sub-folder of a repository

@pytest.fixture
def repository(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "pyproject.toml").write_text(DECLARES_LINT_NOGRAD)
    (tmp_path / "pkg" / "sub" / "n.py").write_text(NOT_FIXABLE)
    (tmp_path / "pkg" / "other.py").write_text(NOT_FIXABLE)
    shutil.copy(NOTEBOOK, tmp_path / "pkg" / "sub" / "nb.ipynb")
    return tmp_path


@pytest.mark.parametrize("cwd, paths", [("pkg/sub", ["."]), ("pkg/sub", [".", "../other.py"]), ("", ["pkg"])])
def test_sarif_uris_are_relative_to_the_repository_root(repository, cwd, paths):
    done = lint_nograd("check", "--output-format", "sarif", *paths, cwd=repository / cwd)
    assert done.returncode == 1, done.stderr
    pytest.importorskip("sarif_pydantic").Sarif.model_validate(json.loads(done.stdout))  # valid SARIF 2.1.0
    [run] = json.loads(done.stdout)["runs"]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": repository.as_uri() + "/"}}
    locations = {(result["ruleId"], result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
                 for result in run["results"]}
    assert {("NG001", "pkg/sub/n.py"), ("NG004", "pkg/sub/nb.ipynb")} <= locations
    assert all(result["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
               for result in run["results"])
    [cell] = [result for result in run["results"] if result["ruleId"] == "NG004"]
    assert cell["message"]["text"].startswith("cell 3, line 2, column 10: `jacfwd(...)` ignores this `no_grad`")
    assert cell["locations"][0]["physicalLocation"]["region"] == {"startLine": 1}  # a line of the notebook
    [reaching] = cell["relatedLocations"]  # the call, in another cell: named the same way
    assert reaching["message"]["text"].startswith("cell 4, line 3, column ")
    assert reaching["physicalLocation"] == {"artifactLocation": {"uri": "pkg/sub/nb.ipynb", "uriBaseId": "%SRCROOT%"},
                                            "region": {"startLine": 1}}


def test_sarif_without_a_repository_is_relative_to_the_project_root(repository):
    (repository / ".git").rmdir()
    done = lint_nograd("check", "--output-format", "sarif", "n.py", cwd=repository / "pkg" / "sub")
    [run] = json.loads(done.stdout)["runs"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == (repository / "pkg").as_uri() + "/"
    assert run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "sub/n.py"


def test_github_annotations_of_a_notebook_name_the_cell_not_a_line(repository):
    done = lint_nograd("check", "--output-format", "github", "nb.ipynb", cwd=repository / "pkg" / "sub")
    lines = done.stdout.splitlines()
    assert lines[0].startswith("::error title=lint-nograd (NG004),file=nb.ipynb::nb.ipynb:cell 3:2:10: NG004 ")
    assert all("line=" not in line.split("::")[1] for line in lines)
