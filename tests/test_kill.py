"""`lint-nograd fix` killed at random moments never leaves a file half-written.

A few hundred fixable files; `fix` is started and killed with SIGKILL (workers included) after a
random delay, several times. Every file is then byte for byte either the original or the fully
fixed version, and parses. A killed process cannot remove its temporary file: one may remain,
named `.<name>.<random>.tmp`, which no run ever reads. A run left to finish leaves nothing behind.
"""
from __future__ import annotations

import ast
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lint_nograd.fix import fix_source

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and process groups")

FIXTURES = Path(__file__).parent / "fixtures" / "fix"
FILES = 300
ROUNDS = 6
LEFTOVER = re.compile(r"\.(?P<name>.+\.py)\.\w+\.tmp")


def fixed_version(data: bytes) -> bytes:
    result = fix_source(data)
    return result.text.encode(result.encoding)


@pytest.fixture
def project(tmp_path) -> dict[Path, tuple[bytes, bytes]]:
    """FILES copies of the fix fixtures under varied names: path -> (original, fixed)."""
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    cases = sorted(FIXTURES.glob("*.in.py"))
    versions = {case: (case.read_bytes(), fixed_version(case.read_bytes())) for case in cases}
    files = {}
    for index in range(FILES):
        case = cases[index % len(cases)]
        path = tmp_path / f"pkg{index % 4}" / f"{case.name[:-len('.in.py')]}_{index:03d}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(versions[case][0])
        files[path] = versions[case]
    assert sum(original != fixed for original, fixed in files.values()) > FILES // 2
    return files


def start_fix(folder: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lint_nograd", "fix", "--no-cache", "--jobs", "2", "."],
                            cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def wait_for_first_write(process: subprocess.Popen, path: Path, original: bytes) -> None:
    """Writes start once every file is read and the first one is fixed: before, a kill tests nothing."""
    deadline = time.monotonic() + 60
    while path.read_bytes() == original and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)


def leftovers(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*.tmp")}


def test_killed_fix_leaves_each_file_original_or_fixed(project, tmp_path):
    seed = int(os.environ.get("LINT_NOGRAD_KILL_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    partial_rounds = 0
    first = min(path for path, (original, fixed) in project.items() if original != fixed)  # written first
    # how long the writes last here, from the first to the end: the kills land within that time
    process = start_fix(tmp_path)
    wait_for_first_write(process, first, project[first][0])
    writes_started = time.monotonic()
    process.wait()
    writing = time.monotonic() - writes_started
    for round_ in range(ROUNDS):
        for path, (original, _) in project.items():  # each round starts from the originals
            path.write_bytes(original)
        process = start_fix(tmp_path)
        wait_for_first_write(process, first, project[first][0])
        time.sleep(rng.uniform(0, 0.9 * writing))
        os.killpg(process.pid, signal.SIGKILL)  # the workers are in its process group
        process.wait()
        states = []
        for path, (original, fixed) in project.items():
            data = path.read_bytes()
            assert data in (original, fixed), f"seed {seed}, round {round_}: {path.name} is neither"
            ast.parse(data)
            states.append(data == fixed != original)
        partial_rounds += 0 < sum(states) < len(states)
    assert partial_rounds, f"seed {seed}: no kill came while files were being written"
    for leftover in leftovers(tmp_path):  # a temporary file a killed run could not remove
        match = LEFTOVER.fullmatch(leftover.name)
        assert match and (leftover.parent / match["name"]).exists(), leftover
    print(f"seed {seed}: {partial_rounds} of {ROUNDS} kills hit the writes; "
          f"{len(leftovers(tmp_path))} temporary files left by killed runs")

    before = leftovers(tmp_path)
    finished = subprocess.run([sys.executable, "-m", "lint_nograd", "fix", "--no-cache", "--jobs", "2", "."],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 1 and not finished.stderr.count("error"), finished.stderr  # refusals remain
    assert all(path.read_bytes() == fixed for path, (_, fixed) in project.items())
    assert leftovers(tmp_path) == before, "a run that finishes leaves no temporary file behind"
