"""`check --watch` on the real command line: Ctrl-C leaves with one line and exit 130, as any run
stopped so; a folder renamed or moved, which the file system reports alone (not the files in
it), is noticed: its old findings go and the files under its new name are checked."""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("watchfiles")
pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGINT and process groups")

NOT_FIXABLE = """\
import torch
from torch.func import grad

with torch.no_grad():
    d = grad(abs)(1.0)
"""


def _as_at_a_terminal() -> None:
    """A shell that started the tests in the background made SIGINT ignored: Ctrl-C as a terminal gives it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Watching:
    """`lint-nograd check --watch` in `folder`, its standard error read line by line as it comes."""

    def __init__(self, folder: Path, *paths: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lint_nograd", "check", "--watch", "--no-cache", "--output-format", "concise",
             *paths],
            cwd=folder, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            preexec_fn=_as_at_a_terminal)
        self.lines: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.err.append(line)
            self.lines.put(line)

    def wait_for(self, text: str, on_wait=lambda: None, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if self.lines.get(timeout=0.5).startswith(text):
                    return
            except queue.Empty:
                on_wait()
        raise AssertionError(f"no `{text}` in time; stderr so far: {''.join(self.err)!r}")

    def ready(self, touch: Path) -> None:
        """Once the watcher runs: it starts just after the first `Watching` line, so write until it sees one."""
        self.wait_for("Watching for file changes.")
        self.wait_for("File change detected", lambda: touch.write_text(touch.read_text()))
        self.wait_for("Watching for file changes.")

    def stop(self) -> tuple[str, str]:
        if self.process.poll() is None:
            self.process.terminate()
        out, _ = self.process.communicate(timeout=30)
        return out, "".join(self.err)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (root / "pkg" / "n.py").write_text(NOT_FIXABLE)
    return root


@pytest.mark.parametrize("whom", ["group", "main process"])
def test_ctrl_c_leaves_watch_mode_with_one_line_and_exit_130(project, whom):
    watching = Watching(project)
    try:
        watching.wait_for("Watching for file changes.")
        time.sleep(0.5)  # in the watcher's wait
        if whom == "group":
            os.killpg(watching.process.pid, signal.SIGINT)
        else:
            os.kill(watching.process.pid, signal.SIGINT)
        watching.process.wait(timeout=60)
    finally:
        out, err = watching.stop()
    assert watching.process.returncode == 130
    assert err == "Watching for file changes.\nlint-nograd: error: interrupted\n"
    assert out.startswith("pkg/n.py:5:9: NG001 ")


def test_a_renamed_folder_is_checked_under_its_new_name_and_a_moved_out_one_is_gone(project, tmp_path):
    (project / "other.py").write_text("x = 1\n")
    watching = Watching(project)
    try:
        watching.ready(project / "other.py")
        (project / "pkg").rename(project / "lib")  # one event, for the folder
        watching.wait_for("File change detected")
        watching.wait_for("Watching for file changes.")
        # files in the renamed folder are watched too
        (project / "lib" / "n.py").write_text(NOT_FIXABLE.replace("(1.0)", "(1.0)  # noqa: NG001")
                                              + "with torch.no_grad():\n    e = grad(abs)(2.0)\n")
        watching.wait_for("File change detected")
        watching.wait_for("Watching for file changes.")
        (project / "lib").rename(tmp_path / "elsewhere")  # out of the project
        watching.wait_for("File change detected")
        watching.wait_for("Watching for file changes.")
    finally:
        out, _ = watching.stop()
    runs, places = [], []  # each run's findings, by place
    for line in out.splitlines():
        if line.startswith(("Found ", "No findings.")):
            runs.append(places)
            places = []
        elif ": NG" in line:
            places.append(line.split(" ")[0])
    *first, renamed, edited, moved_out = runs
    assert first and all(run == ["pkg/n.py:5:9:"] for run in first), out
    assert (renamed, edited, moved_out) == (["lib/n.py:5:9:"], ["lib/n.py:7:9:"], []), out


def test_a_file_given_is_watched_after_it_is_deleted_and_when_it_comes_back(project, tmp_path):
    """`check --watch ../project/pkg/n.py` from another folder: the file's folder is watched."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    given = project / "pkg" / "n.py"
    watching = Watching(elsewhere, str(given))
    try:
        watching.ready(given)
        given.unlink()
        watching.wait_for("File change detected")
        watching.wait_for("Watching for file changes.")
        given.write_text(NOT_FIXABLE)
        watching.wait_for("File change detected")
        watching.wait_for("Watching for file changes.")
    finally:
        out, err = watching.stop()
    assert f"lint-nograd: error: path does not exist: {given}\n" in err
    assert out.splitlines()[-2].startswith(f"{given}:5:9: NG001 ") and out.endswith("Found 1 note.\n"), out
