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
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lint_nograd.fix.rewrite import fix_source
from lint_nograd.fix.settings import FixSettings

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and process groups")

FIXTURES = Path(__file__).parent / "fixtures" / "fix"
FILES = 300
ROUNDS = 6
LEFTOVER = re.compile(r"\.(?P<name>.+\.py)\.\w+\.tmp")


def fixed_version(data: bytes) -> bytes:
    """What `fix` writes in a project that does not declare lint-nograd: no added import."""
    result = fix_source(data, settings=FixSettings(may_add_shim=False))
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


# -- the workers of `--jobs` end with the process that started them -------------------------------

linux = pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.exists(f"/proc/{os.getpid()}/task"),
                           reason="reads a process's children from /proc")
BUSY_FILES = 200
CHECKED = Path(__file__).parent / "fixtures" / "checker" / "ng004_forward_mode.py"


@pytest.fixture
def busy_project(tmp_path) -> Path:
    """Enough files with findings to keep two workers busy for seconds."""
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    for index in range(BUSY_FILES):
        shutil.copy(CHECKED, tmp_path / f"m{index:03d}.py")
    return tmp_path


def children(pid: int) -> set[int]:
    try:
        return {int(child) for task in os.listdir(f"/proc/{pid}/task")
                for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()}
    except OSError:  # it ended
        return set()


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _as_at_a_terminal() -> None:
    """Ctrl-C as a terminal delivers it: a shell that started these tests in the background (`&`)
    made SIGINT ignored, and Python keeps an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_with_workers(folder: Path, command: str) -> tuple[subprocess.Popen, set[int]]:
    """`command --jobs 2` with its output on pipes, once both of its workers are running."""
    process = subprocess.Popen([sys.executable, "-m", "lint_nograd", command, "--no-cache", "--jobs", "2",
                                "--output-format", "concise", "."], cwd=folder, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True,
                               preexec_fn=_as_at_a_terminal)
    deadline = time.monotonic() + 120
    while len(children(process.pid)) < 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    workers = children(process.pid)
    assert len(workers) == 2 and process.poll() is None, "the workers never started"
    return process, workers


def wait_until_gone(pids: set[int]) -> set[int]:
    deadline = time.monotonic() + 60
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return {pid for pid in pids if alive(pid)}


@linux
@pytest.mark.parametrize("command", ["check", "fix"])
@pytest.mark.parametrize("signal_number", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_workers_die_with_their_parent_and_release_the_pipes(busy_project, command, signal_number):
    """A caller reading the pipes (pre-commit, an editor) gets their end instead of waiting forever."""
    process, workers = start_with_workers(busy_project, command)
    os.kill(process.pid, signal_number)  # the main process alone, as a supervisor would
    try:
        process.communicate(timeout=60)  # returns only once no process holds the pipes open
    finally:
        left = wait_until_gone(workers)
        for pid in left:  # never leave them behind, even when the test fails
            os.kill(pid, signal.SIGKILL)
    assert process.returncode == -signal_number and not left


@linux
@pytest.mark.parametrize("command", ["check", "fix"])
@pytest.mark.parametrize("whom", ["group", "main process"])
def test_ctrl_c_prints_one_line_and_exits_130(busy_project, command, whom):
    """Ctrl-C at a terminal reaches the whole process group; `kill -INT` may reach only the main
    process. Either way: one line, exit 130, no traceback from a worker, no worker left."""
    rng = random.Random(int(os.environ.get("LINT_NOGRAD_KILL_SEED", time.time_ns() % 10**6)))
    for _ in range(3):
        process, workers = start_with_workers(busy_project, command)
        time.sleep(rng.uniform(0, 0.3))  # somewhere in the run: idle workers, busy ones, writes
        if whom == "group":
            os.killpg(process.pid, signal.SIGINT)
        else:
            os.kill(process.pid, signal.SIGINT)
        try:
            _, err = process.communicate(timeout=60)
        finally:
            left = wait_until_gone(workers)
            for pid in left:
                os.kill(pid, signal.SIGKILL)
        assert (process.returncode, err, left) == (130, "lint-nograd: error: interrupted\n", set())
        for path in busy_project.glob("*.py"):  # fix wrote each file whole, or not at all
            ast.parse(path.read_bytes())


def test_never_more_workers_than_work(tmp_path, monkeypatch, capsys):
    import concurrent.futures

    from lint_nograd import cli
    from lint_nograd.run import jobs
    from test_cli_fix import FIXABLE

    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    files = cli.PARALLEL_MIN_FILES + 8
    for index in range(files):
        (tmp_path / f"m{index:03d}.py").write_text(FIXABLE)
    monkeypatch.chdir(tmp_path)
    started: list[int] = []
    real = concurrent.futures.ProcessPoolExecutor

    def counted(max_workers, **options):
        started.append(max_workers)
        return real(max_workers=max_workers, **options)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", counted)  # as the workers import it
    assert cli.main(["check", "--no-cache", "--jobs", "300", "--output-format", "concise"]) == 1
    assert cli.main(["fix", "--no-cache", "--jobs", "300", "--output-format", "concise"]) == 0
    # as many as chunks of files to read, summarise and finish; as many as files to fix
    assert set(started) == {-(-files // jobs.CHUNK_FILES), files}
    assert capsys.readouterr().err.startswith(f"Fixed {files} regions in {files} files.\n")
