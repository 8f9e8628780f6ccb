"""No command harms a file it was not asked to write: `-o` into a FIFO writes into it, a report
never replaces a checked file or lands in the cache, and `fix -` always gives standard input back."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_sources import CLEAN, DECLARES_LINT_NOGRAD, FIXABLE, NOT_FIXABLE



@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(DECLARES_LINT_NOGRAD)
    return tmp_path


def lint_nograd(*args: str, cwd: Path, stdin: str | None = None, cache: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lint_nograd", *args, *([] if cache else ["--no-cache"])],
                          cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120)


# -o into a file that is not a regular one

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("command", ["check", "fix"])
def test_output_file_that_is_a_fifo_is_written_into_not_replaced(project, command):
    (project / "n.py").write_text(NOT_FIXABLE)
    fifo = project / "report.fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = lint_nograd(command, "--output-format", "concise", "-o", "report.fifo", "n.py", cwd=project)
    reader.join(60)
    assert done.returncode == 0, done.stderr  # NG001 is a note: shown, not failed
    assert received and received[0].decode().startswith("n.py:5:9: NG001 ")
    assert fifo.is_fifo()  # still the FIFO: never renamed over
    assert [p.name for p in project.iterdir() if p.name.endswith(".tmp")] == []


# -o naming a file being checked, or a place in the cache

@pytest.mark.parametrize("target", ["m.py", "./m.py", "sub/../m.py", "other.py"])
def test_output_file_that_is_a_checked_file_is_an_error(project, target):
    (project / "m.py").write_text(FIXABLE)
    (project / "other.py").write_text(CLEAN)  # a file of the project, though not named
    (project / "sub").mkdir()
    for command in ("check", "fix"):
        done = lint_nograd(command, "-o", target, "m.py", cwd=project)
        assert done.returncode == 2 and "is one of the files being checked" in done.stderr, done.stderr
        assert (project / "m.py").read_text() == FIXABLE and (project / "other.py").read_text() == CLEAN


def test_output_file_inside_the_cache_is_an_error(project, user_cache):
    (project / "m.py").write_text(NOT_FIXABLE)
    assert lint_nograd("check", "m.py", cwd=project, cache=True).returncode == 0  # makes the cache (NG001: a note)
    folder = user_cache / project.name
    cached = sorted(p.name for p in folder.iterdir())
    for target in (str(folder / "report.txt"), str(folder / cached[0])):
        done = lint_nograd("check", "-o", target, "m.py", cwd=project, cache=True)
        assert done.returncode == 2 and "inside the cache folder" in done.stderr
    elsewhere = project / "cache"
    done = lint_nograd("check", "--cache-dir", "cache", "-o", "cache/r.txt", "m.py", cwd=project, cache=True)
    assert done.returncode == 2 and "inside the cache folder" in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == cached
    assert not (elsewhere / "r.txt").exists()


def test_an_output_file_beside_the_inputs_is_still_written(project):
    (project / "m.py").write_text(NOT_FIXABLE)
    done = lint_nograd("check", "--output-format", "concise", "-o", "report.py.txt", "m.py", cwd=project)
    assert done.returncode == 0 and (project / "report.py.txt").read_text().startswith("m.py:5:9: NG001")


# fix - and --stdin-filename: standard input always comes back

@pytest.mark.parametrize("source", [CLEAN, NOT_FIXABLE, "x = (\n", FIXABLE.replace("jacfwd(f)", "")],
                         ids=["no findings", "no fix", "does not parse", "region not reached"])
@pytest.mark.parametrize("args", [["-"], ["--stdin-filename", "pkg/m.py"], ["-", "--stdin-filename", "m.py"]])
def test_fix_of_standard_input_echoes_it_when_nothing_changes(project, source, args):
    done = lint_nograd("fix", *args, cwd=project, stdin=source)
    assert done.stdout == source, done.stderr
    assert done.returncode in (0, 1, 2)


def test_fix_of_standard_input_echoes_a_file_the_settings_exclude(project):
    (project / "pyproject.toml").write_text('[tool.lint-nograd]\nper-file-ignores = {"gen/*" = ["NG"]}\n')
    done = lint_nograd("fix", "--stdin-filename", "gen/m.py", cwd=project, stdin=FIXABLE)
    assert (done.returncode, done.stdout) == (0, FIXABLE)


def test_fix_of_standard_input_prints_the_fixed_source_once(project):
    done = lint_nograd("fix", "-", cwd=project, stdin=FIXABLE)
    assert done.stdout.count("import torch") == 1 and "s = stop_gradient(x.mean())" in done.stdout
