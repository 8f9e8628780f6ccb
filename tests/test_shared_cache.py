"""The default cache lives in the user's cache folder, one per project name, and is shared by every
checkout of the project: a fresh clone, a CI job that restores that folder and a branch switch
read only what changed, and report what a run without the cache reports, on any `--jobs`."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from lint_nograd import cli
from lint_nograd.run import cache, engine, stages

PROJECT = Path(__file__).parent / "fixtures" / "projects" / "cross_module"


@pytest.fixture
def parsed(monkeypatch):
    """The display paths of the files a run really analysed (not answered by the cache)."""
    seen: list[str] = []
    real = engine.facts
    monkeypatch.setattr(engine, "facts", lambda data, shown, codes, **options: seen.append(shown) or
                        real(data, shown, codes, **options))
    return seen


def check(folder: Path, capsys, *args: str) -> list:
    old = Path.cwd()
    os.chdir(folder)
    try:
        cli.main(["check", "--jobs", "1", "--output-format", "json", *args, "."])
    finally:
        os.chdir(old)
    return [{**d, "filename": d["filename"]} for d in json.loads(capsys.readouterr().out)]


def clone(source: Path, target: Path) -> Path:
    """A copy with files of new modification times and inodes, as a fresh clone has."""
    shutil.copytree(source, target, copy_function=shutil.copy)
    return target


def test_a_fresh_clone_and_a_branch_switch_are_warm_runs(tmp_path, capsys, parsed, user_cache):
    first = clone(PROJECT, tmp_path / "work" / "cross_module")
    fresh = check(first, capsys, "--no-cache")
    assert fresh and not (user_cache / "cross_module").exists()
    parsed.clear()
    assert check(first, capsys) == fresh and parsed  # cold: the shared cache is filled
    assert (user_cache / "cross_module" / "findings.json").is_file()
    assert cache.default_folder(first) == user_cache / "cross_module"

    second = clone(PROJECT, tmp_path / "ci" / "cross_module")  # another checkout of the same project
    parsed.clear()
    assert check(second, capsys) == fresh and parsed == []  # nothing parsed: the cache knew every file

    model = second / "pkg" / "model.py"
    original = model.read_text()
    model.write_text(original.replace("with torch.no_grad():", "with torch.enable_grad():", 1))  # a branch
    parsed.clear()
    switched = check(second, capsys)
    assert switched != fresh and parsed == ["pkg/model.py"] and switched == check(second, capsys, "--no-cache")
    model.write_text(original)  # back to the first branch
    parsed.clear()
    assert check(second, capsys) == fresh and parsed in ([], ["pkg/model.py"])  # at most what changed


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_same_findings_with_and_without_the_cache_on_any_jobs(tmp_path, capsys, jobs):
    project = clone(PROJECT, tmp_path / "cross_module")
    fresh = check(project, capsys, "--no-cache")
    assert check(project, capsys, "--jobs", jobs) == fresh  # cold
    assert check(project, capsys, "--jobs", jobs) == fresh  # warm


def test_the_cache_folder_can_be_moved(tmp_path, capsys, monkeypatch):
    """$LINT_NOGRAD_CACHE_DIR holds every project's folder; `--cache-dir` names this run's."""
    project = clone(PROJECT, tmp_path / "cross_module")
    monkeypatch.setenv("LINT_NOGRAD_CACHE_DIR", str(tmp_path / "shared"))
    check(project, capsys)
    assert (tmp_path / "shared" / "cross_module" / "findings.json").is_file()
    check(project, capsys, "--cache-dir", str(tmp_path / "mine"))
    assert (tmp_path / "mine" / "findings.json").is_file()
    monkeypatch.delenv("LINT_NOGRAD_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if os.name == "posix" and os.uname().sysname == "Linux":
        assert cache.default_folder(project) == tmp_path / "xdg" / "lint-nograd" / "cross_module"


@pytest.mark.skipif(not (os.name == "posix" and os.uname().sysname == "Linux"), reason="XDG folders are Linux's")
@pytest.mark.parametrize("xdg", ["relative/cache", "./cache", ""])
def test_a_relative_xdg_cache_home_is_ignored(tmp_path, monkeypatch, xdg):
    """The XDG spec: a relative path in $XDG_CACHE_HOME is invalid and ignored (~/.cache is used),
    rather than a cache in whatever folder the run starts from."""
    monkeypatch.delenv("LINT_NOGRAD_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert cache.default_folder(tmp_path / "app") == tmp_path / "home" / ".cache" / "lint-nograd" / "app"


MAKERS = Path(__file__).parent / "fixtures" / "projects" / "imported_makers"


@pytest.mark.parametrize("path, old, new", [
    ("pkg/utils/modes.py", "def frozen():\n    with torch.no_grad():", "def frozen():\n    with torch.enable_grad():"),
    ("pkg/layers.py", "def normalised(x):\n    with frozen():", "def normalised(x):\n    with timed():"),
    ("pkg/plain.py", "    return fn\n", "    return fn  # an edit no finding depends on\n"),
])
def test_an_edit_beside_grad_mode_makers_is_read_as_a_fresh_run_reads_it(tmp_path, capsys, path, old, new):
    """A module defining a grad mode other modules enter (`with frozen():`), one entering it, and
    one that does neither: after an edit, a warm run reports what a run without the cache reports;
    only the files that took a maker from another module make the whole project run again."""
    project = clone(MAKERS, tmp_path / "project")
    for file in project.rglob("*.py"):  # (not modified just before the run: then it is read again anyway)
        os.utime(file, (file.stat().st_atime, file.stat().st_mtime - 3600))
    cache_dir = ["--cache-dir", str(tmp_path / "cache")]
    before = check(project, capsys, *cache_dir)
    edited = project / path
    assert old in edited.read_text()
    edited.write_text(edited.read_text().replace(old, new, 1))
    linked: list[bool] = []
    real = stages.Run.link
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stages.Run, "link", lambda self: linked.append(True) or real(self))
        after = check(project, capsys, *cache_dir)
    assert after == check(project, capsys, "--no-cache")
    assert (after != before) is (path != "pkg/plain.py")
    assert bool(linked) is (path == "pkg/layers.py" or path == "pkg/utils/modes.py")
