"""Output that fits where it lands, on the real command line: text wrapped to the terminal's width
(COLUMNS, else the terminal's own, else 80), related places of standard input named by path,
`fix --diff` of a notebook as a diff of each changed cell, diffs coloured on a terminal only."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_sources import FIXABLE

FIXTURES = Path(__file__).parent / "fixtures"
SOURCE_LINE = re.compile(r"^ *\d+ \| ")  # `12 | code`: the source, shown whole
ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def lint_nograd(cwd: Path, *args: str, env: dict | None = None, stdin: str | None = None,
                ) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "NO_COLOR")}
    return subprocess.run([sys.executable, "-m", "lint_nograd", *args, "--no-cache"], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=120, env={**environment, **(env or {})})


def at_a_terminal(cwd: Path, *args: str, columns: int, env: dict | None = None) -> str:
    """What the command writes to a terminal `columns` wide (a pseudo-terminal)."""
    pty, fcntl, termios, struct = (pytest.importorskip(name) for name in ("pty", "fcntl", "termios", "struct"))
    main, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    environment = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "NO_COLOR")}
    process = subprocess.Popen([sys.executable, "-m", "lint_nograd", *args, "--no-cache"], cwd=cwd,
                               stdout=terminal, stderr=subprocess.DEVNULL, env={**environment, **(env or {})})
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the other end closed (EIO on Linux)
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=120)
    os.close(main)
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.fixture
def reach_forms(tmp_path):
    project = tmp_path / "reach_forms"
    shutil.copytree(FIXTURES / "projects" / "reach_forms", project)
    return project


def long_lines(text: str, width: int) -> list[str]:
    return [line for line in ESCAPE.sub("", text).splitlines() if len(line) > width and not SOURCE_LINE.match(line)]


@pytest.mark.parametrize("columns", [48, 60, 100])
def test_full_output_fits_columns_but_for_source_lines(reach_forms, columns):
    done = lint_nograd(reach_forms, "check", "--output-format", "full", ".", env={"COLUMNS": str(columns)})
    assert done.returncode == 1, done.stderr
    assert done.stdout.count("= help:") >= 5 and not long_lines(done.stdout, columns)
    assert any(len(line) > columns - 8 for line in done.stdout.splitlines())  # it uses the width it has
    # the text is all there, in order: only the line breaks moved (a word wider than a line is cut)
    wide = lint_nograd(reach_forms, "check", "--output-format", "full", ".", env={"COLUMNS": "1000"})
    assert "".join(done.stdout.split()) == "".join(wide.stdout.split())


def test_off_a_terminal_the_width_is_80(reach_forms):
    done = lint_nograd(reach_forms, "check", "--output-format", "full", ".")
    assert not long_lines(done.stdout, 80) and long_lines(done.stdout, 70)


def test_at_a_terminal_the_width_is_the_terminal_s(reach_forms):
    shown = at_a_terminal(reach_forms, "check", "--output-format", "full", ".", columns=64)
    assert "= help:" in shown and "\x1b[" in shown  # coloured, at a terminal
    assert not long_lines(shown, 64) and long_lines(shown, 56)
    plain = at_a_terminal(reach_forms, "check", "--output-format", "full", ".", columns=64, env={"NO_COLOR": "1"})
    assert "\x1b[" not in plain and ESCAPE.sub("", shown) == plain


# -- standard input: related places named by path ----------------------------------------------------

MODEL = """\
import torch


def loss(x):
    with torch.no_grad():
        s = x.mean()
        s.add_(1)
    return x - s
"""
TRAIN = """\
from torch.func import jacfwd

from pkg.model import loss

h = jacfwd(loss)
"""


@pytest.fixture
def package(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    (tmp_path / "pkg" / "train.py").write_text(TRAIN)
    return tmp_path


@pytest.mark.parametrize("command", ["check", "fix"])
def test_related_places_of_standard_input_are_named_by_path(package, command):
    """`fix` reads standard input as a file of its own, told what reaches it: the places it is told
    of are named as `check` names them, by path."""
    done = lint_nograd(package, command, "--output-format", "json", "--stdin-filename", "pkg/model.py",
                       stdin=MODEL)
    report = done.stdout if command == "check" else done.stderr  # fix: the source on stdout
    [finding] = json.loads(report)
    [related] = finding["related"]
    assert (finding["filename"], related["filename"], related["location"]) == (
        "pkg/model.py", "pkg/train.py", {"row": 5, "column": 5})
    full = lint_nograd(package, command, "--stdin-filename", "pkg/model.py", stdin=MODEL)
    assert "= note: pkg/train.py:5:5: `jacfwd(loss)` reaches it in forward mode" in full.stdout + full.stderr


def test_a_reaching_call_in_the_same_file_read_from_standard_input_is_named_by_its_path(package):
    source = MODEL + "\n\nfrom torch.func import jvp\n\njvp(loss, (1.0,), (1.0,))\n"
    (package / "pkg" / "train.py").write_text("")
    (package / "pkg" / "model.py").write_text(source)
    for command in ("check", "fix"):
        done = lint_nograd(package, command, "--output-format", "json", "--stdin-filename", "pkg/model.py",
                           stdin=source)
        [finding] = json.loads(done.stdout if command == "check" else done.stderr)
        assert [related["filename"] for related in finding["related"]] == ["pkg/model.py"], command


# -- fix --diff --------------------------------------------------------------------------------------

def apply_cell_diffs(diff: str, cells: list[str]) -> list[str]:
    """Apply `--- a/x.ipynb:cell N` diffs to cell sources, as a reader of the diff would."""
    cells = list(cells)
    for section in re.split(r"^--- ", diff, flags=re.M)[1:]:
        header, *lines = section.splitlines(keepends=True)
        number = int(re.search(r":cell (\d+)$", header.strip()).group(1))
        old = cells[number - 1].splitlines(keepends=True)
        new, at = [], 0
        for line in lines[1:]:  # after `+++ b/...`
            hunk = re.match(r"@@ -(\d+)(?:,\d+)? ", line)
            if hunk:
                start = int(hunk.group(1)) - (0 if hunk.group(0).startswith("@@ -0") else 1)
                new += old[at:start]
                at = start
            elif line.startswith("\\"):  # no newline at the end: the line before has none
                new[-1] = new[-1].rstrip("\n")
            elif line.startswith(("-", " ")):
                assert old[at].rstrip("\n") == line[1:].rstrip("\n"), (old[at], line)
                at += 1
                if line.startswith(" "):
                    new.append(old[at - 1])
            elif line.startswith("+"):
                new.append(line[1:])
        cells[number - 1] = "".join(new + old[at:])
    return cells


def cell_sources(path: Path) -> list[str]:
    return ["".join(cell["source"]) for cell in json.loads(path.read_text())["cells"]]


def test_fix_diff_of_a_notebook_is_a_diff_of_each_changed_cell(tmp_path):
    notebook = tmp_path / "nb.ipynb"
    shutil.copy(FIXTURES / "notebooks" / "meta_learning.ipynb", notebook)
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    before = cell_sources(notebook)
    done = lint_nograd(tmp_path, "fix", "--diff", "--unsafe-fixes", "nb.ipynb")
    assert done.returncode == 1, done.stderr
    headers = re.findall(r"^--- a/nb\.ipynb:cell (\d+)\n\+\+\+ b/nb\.ipynb:cell \1\n", done.stdout, flags=re.M)
    assert headers and '"source"' not in done.stdout and '\\n"' not in done.stdout  # Python, not JSON
    assert "\x1b[" not in done.stdout  # not a terminal
    lint_nograd(tmp_path, "fix", "--unsafe-fixes", "nb.ipynb")
    after = cell_sources(notebook)
    assert after != before
    assert apply_cell_diffs(done.stdout, before) == after
    assert sorted(int(number) for number in headers) == [
        number for number, (old, new) in enumerate(zip(before, after), 1) if old != new]


def test_diffs_are_coloured_on_a_terminal_unless_no_color(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "m.py").write_text(FIXABLE)
    plain = lint_nograd(tmp_path, "fix", "--diff", "m.py").stdout
    assert plain.startswith("--- a/m.py\n+++ b/m.py\n@@ ") and "\x1b[" not in plain
    shown = at_a_terminal(tmp_path, "fix", "--diff", "m.py", columns=80)
    assert "\x1b[31m-    with torch.no_grad():\x1b[0m" in shown and "\x1b[32m+" in shown
    assert ESCAPE.sub("", shown) == plain
    assert at_a_terminal(tmp_path, "fix", "--diff", "m.py", columns=80, env={"NO_COLOR": "1"}) == plain
    forced = lint_nograd(tmp_path, "fix", "--diff", "--color", "always", "m.py").stdout
    assert ESCAPE.sub("", forced) == plain and forced != plain
    assert (tmp_path / "m.py").read_text() == FIXABLE
