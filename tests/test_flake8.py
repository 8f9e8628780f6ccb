"""The real `flake8 --select NG` prints what `lint-nograd check --output-format concise` does,
the `[*]` of a finding with a safe fix and why a fixable one has none included."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from lint_nograd.flake8_plugin import Plugin

CHECKER_FIXTURES = Path(__file__).parent / "fixtures" / "checker"
EXAMPLES = Path(__file__).parent.parent / "examples"
FINDING = re.compile(r"^\S+:\d+:\d+: NG\d{3} ")

HEADER = "import torch\nfrom torch.func import grad\n\n"
# file name -> (source, the findings expected in both tools as "row:col CODE")
CASES = {
    "transform_under_no_grad.py": (
        HEADER + "with torch.no_grad():\n    g = grad(torch.sin)(torch.tensor(1.0))\n",
        ["5:9 NG001"]),
    "backward_without_graph.py": (
        "import torch\n\nx = torch.ones(2, requires_grad=True)\nwith torch.no_grad():\n"
        "    loss = (x * 2).sum()\nloss.backward()\n",
        ["6:1 NG003"]),
    "noqa_on_one_line.py": (
        HEADER + "with torch.no_grad():\n"
        "    g = grad(torch.sin)(torch.tensor(1.0))  # noqa: NG001\n"
        "    h = grad(torch.cos)(torch.tensor(1.0))\n",
        ["6:9 NG001"]),
    "noqa_for_the_file.py": (
        "# lint-nograd: noqa\n" + HEADER + "with torch.no_grad():\n"
        "    g = grad(torch.sin)(torch.tensor(1.0))\n",
        []),
    "clean.py": (
        "import torch\n\nmodel = torch.nn.Linear(2, 2)\nwith torch.no_grad():\n"
        "    y = model(torch.ones(2))\n",
        []),
    # Columns count characters: "ééé" is three columns, and six bytes if read as UTF-8.
    "latin_1_cookie.py": (
        "# -*- coding: latin-1 -*-\n" + HEADER + "with torch.no_grad():\n"
        '    s = "ééé"; g = grad(torch.sin)(torch.tensor(1.0))\n',
        ["6:20 NG001"]),
}


def run(*command: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True,
                          cwd=cwd, input=stdin, timeout=300)


def flake8(*args: str, cwd: Path, stdin: str | None = None) -> list[str]:
    # --isolated: no setup.cfg, tox.ini or .flake8 of the machine running the tests.
    done = run("flake8", "--isolated", "--select", "NG", *args, cwd=cwd, stdin=stdin)
    assert done.returncode in (0, 1), done.stderr
    return sorted(done.stdout.splitlines())


def lint_nograd(*paths: str, cwd: Path) -> list[str]:
    done = run("lint_nograd", "check", "--isolated", "--no-cache", "--output-format", "concise",
               "--color", "never", *paths, cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    return sorted(line for line in done.stdout.splitlines() if FINDING.match(line))


@pytest.fixture(scope="module")
def both_tools(tmp_path_factory) -> tuple[list[str], list[str]]:
    folder = tmp_path_factory.mktemp("flake8")
    for name, (source, _) in CASES.items():
        (folder / name).write_text(source, encoding="latin-1" if "latin_1" in name else "utf-8")
    return flake8(*CASES, cwd=folder), lint_nograd(*CASES, cwd=folder)


def test_the_plugin_is_registered(tmp_path):
    assert "lint-nograd" in run("flake8", "--version", cwd=tmp_path).stdout


@pytest.mark.parametrize("name", CASES)
def test_flake8_reports_what_check_reports(both_tools, name):
    from_flake8, from_check = both_tools

    def found(lines: list[str]) -> list[str]:
        return [line for line in lines if line.startswith(f"{name}:")]

    assert found(from_flake8) == found(from_check)
    assert [_position_and_code(line) for line in found(from_check)] == CASES[name][1]


def _position_and_code(line: str) -> str:
    _, row, col, rest = line.split(":", 3)
    return f"{row}:{col} {rest.split()[0]}"


def test_flake8_and_check_agree_on_the_checker_fixtures():
    # A file that does not parse is flake8's E999 (its tree plugins never run), not NG000.
    # flake8 applies its own `# noqa`, which it also finds inside strings, where lint-nograd does not.
    names = sorted(path.name for path in CHECKER_FIXTURES.glob("*.py")
                   if not path.name.startswith("ng000_") and path.name != "noqa.py")
    from_flake8 = flake8(*names, cwd=CHECKER_FIXTURES)
    assert from_flake8 and from_flake8 == lint_nograd(*names, cwd=CHECKER_FIXTURES)


def test_source_from_stdin(tmp_path):
    """flake8 hands the plugin its lines; nothing is read from disk (the file does not exist)."""
    source, _ = CASES["transform_under_no_grad.py"]
    [line] = flake8("--stdin-display-name", "notebook_cell.py", "-", cwd=tmp_path, stdin=source)
    assert line.startswith("notebook_cell.py:5:9: NG001 ")


def test_the_fix_marker(tmp_path):
    refused = ("import torch\nfrom torch.func import jacfwd\n\n\ndef g(x, buf):\n    with torch.no_grad():\n"
               "        buf.add_(x)\n    return x\n\n\njacfwd(g)\n")
    (tmp_path / "fixable.py").write_text((EXAMPLES / "meta_learning.py").read_text())
    (tmp_path / "refused.py").write_text(refused)
    from_flake8 = flake8("fixable.py", "refused.py", cwd=tmp_path)
    assert from_flake8 == lint_nograd("fixable.py", "refused.py", cwd=tmp_path)
    assert any(" NG006 [*] " in line for line in from_flake8)
    assert any(line.startswith("refused.py:6:10: NG004 `jacfwd(...)` ") for line in from_flake8)  # no [*]


def test_the_plugin_reads_only_the_lines_it_is_given():
    source, _ = CASES["backward_without_graph.py"]
    plugin = Plugin(tree=None, filename="missing.py", lines=source.splitlines(keepends=True))
    [(row, col, text, kind)] = plugin.run()
    assert (row, col, text[:6], kind) == (6, 0, "NG003 ", Plugin)
