"""The cache gives the same findings as a fresh run, and misses after edits, a new version or
another configuration."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lint_nograd import cache, cli, engine

FIXTURES = Path(__file__).parent / "fixtures" / "checker"


@pytest.fixture
def project(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES, tmp_path / "src")
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def parsed(monkeypatch):
    """The display paths of the files this run really analysed (not answered by the cache)."""
    seen: list[str] = []
    real = engine.check_source

    def counting(data, display_path, codes, **options):
        seen.append(display_path)
        return real(data, display_path, codes, **options)

    monkeypatch.setattr(engine, "check_source", counting)
    return seen


def check(capsys, *args: str) -> tuple[int, str]:
    status = cli.main(["check", "--jobs", "1", "--output-format", "json", *args])
    return status, capsys.readouterr().out


def test_a_warm_run_reports_the_same_findings_without_parsing(project, parsed, capsys):
    fresh = check(capsys, "--no-cache")
    assert not (project / cache.FOLDER_NAME).exists()
    analysed = len(parsed)
    cold = check(capsys)
    assert analysed > 10 and len(parsed) == 2 * analysed  # nothing cached yet
    warm = check(capsys)
    assert len(parsed) == 2 * analysed  # the warm run analysed nothing
    assert fresh == cold == warm and fresh[0] == 1
    assert (project / cache.FOLDER_NAME / ".gitignore").read_text().endswith("*\n")


def test_an_edit_misses_the_cache(project, parsed, capsys):
    check(capsys)
    target = project / "src" / "ng003_negatives.py"
    target.write_text(target.read_text() + "\n\ndef late(m, x):\n    with torch.no_grad():\n"
                      "        y = m(x)\n    y.backward()\n")
    parsed.clear()
    status, out = check(capsys)
    assert parsed == ["src/ng003_negatives.py"]
    assert "src/ng003_negatives.py" in out and check(capsys, "--no-cache")[1] == out


def test_a_new_version_misses_the_cache(project, parsed, capsys, monkeypatch):
    check(capsys)
    before = len(parsed)
    monkeypatch.setattr(cache, "_tool_fingerprint", lambda: b"another version")
    check(capsys)
    assert len(parsed) == 2 * before


def test_another_selection_misses_the_cache(project, parsed, capsys):
    check(capsys, "--select", "NG003")
    before = len(parsed)
    status, out = check(capsys, "--select", "NG001")
    assert len(parsed) > before and '"NG003"' not in out and '"NG001"' in out


def test_cache_dir_option_and_a_damaged_cache(project, parsed, capsys, tmp_path):
    folder = tmp_path / "elsewhere"
    first = check(capsys, "--cache-dir", str(folder))
    (folder / "findings.json").write_text("{not json")
    assert check(capsys, "--cache-dir", str(folder)) == first
    assert not (project / cache.FOLDER_NAME).exists()
    assert sorted(p.name for p in folder.iterdir()) == [".gitignore", "findings.json"]  # no leftovers


def _age(folder: Path, seconds: int = 3600) -> None:
    """Make every file look modified long ago, as files in a repository usually are."""
    for path in folder.rglob("*.py"):
        status = path.stat()
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns - seconds * 10**9))


def test_a_warm_run_does_not_even_read_unchanged_files(project, capsys, monkeypatch):
    _age(project / "src")
    first = check(capsys)
    reads: list[Path] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self) or real(self))
    assert check(capsys) == first
    assert [path for path in reads if path.suffix == ".py"] == []


def test_a_touched_file_with_the_same_bytes_is_not_parsed_again(project, parsed, capsys):
    _age(project / "src")
    first = check(capsys)
    parsed.clear()
    (project / "src" / "ng004_forward_mode.py").touch()  # a new modification time, the same bytes
    assert check(capsys) == first and parsed == []


def test_an_edit_just_after_a_run_is_seen_even_with_the_same_size_and_time(project, parsed, capsys):
    """The modification time may not change within one tick: a file modified shortly before its
    entry was recorded is hashed again rather than trusted by its status."""
    target = project / "src" / "ng003_negatives.py"
    target.write_text(target.read_text())  # modified now, just before the run records it
    check(capsys)
    status = target.stat()
    text = target.read_text()
    target.write_text(text.replace("graph_built_before", "graph_built_BEFORE"))  # same size
    os.utime(target, ns=(status.st_atime_ns, status.st_mtime_ns))
    parsed.clear()
    check(capsys)
    assert parsed == ["src/ng003_negatives.py"]
