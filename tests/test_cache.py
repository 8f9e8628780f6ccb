"""The cache gives the same findings as a fresh run, and misses after edits, a new version or
another configuration."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from lint_nograd import cli
from lint_nograd.run import cache, engine, runner

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
    real = engine.facts

    def counting(data, display_path, codes, **options):
        seen.append(display_path)
        return real(data, display_path, codes, **options)

    monkeypatch.setattr(engine, "facts", counting)
    return seen


def check(capsys, *args: str) -> tuple[int, str]:
    status = cli.main(["check", "--jobs", "1", "--output-format", "json", *args])
    return status, capsys.readouterr().out


def check_warned(capsys, *args: str) -> tuple[int, str, str]:
    """`check` with what it wrote on standard error as well."""
    status = cli.main(["check", "--jobs", "1", "--output-format", "json", *args])
    return (status, *capsys.readouterr())


def test_a_warm_run_reports_the_same_findings_without_parsing(project, parsed, capsys):
    fresh = check(capsys, "--no-cache")
    assert not cache.default_folder(project).exists()
    analysed = len(parsed)
    cold = check(capsys)
    assert analysed > 10 and len(parsed) == 2 * analysed  # nothing cached yet
    warm = check(capsys)
    assert len(parsed) == 2 * analysed  # the warm run analysed nothing
    assert fresh == cold == warm and fresh[0] == 1
    assert (cache.default_folder(project) / ".gitignore").read_text().endswith("*\n")


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


def test_another_torch_version_misses_the_cache(project, parsed, capsys):
    """What a rule says depends on the release: NG002 is an error where it returns zeros."""
    new = check(capsys, "--torch-version", "2.13")
    before = len(parsed)
    old = check(capsys, "--torch-version", "2.5")
    assert len(parsed) > before and new != old
    assert check(capsys, "--torch-version", "2.5") == old and check(capsys, "--torch-version", "2.13") == new
    assert {d["severity"] for d in json.loads(new[1]) if d["code"] == "NG002"} == {"note"}
    assert {d["severity"] for d in json.loads(old[1]) if d["code"] == "NG002"} == {"error"}


def test_cache_dir_option_and_a_damaged_cache(project, parsed, capsys, tmp_path):
    folder = tmp_path / "elsewhere"
    first = check(capsys, "--cache-dir", str(folder))
    (folder / "findings.json").write_text("{not json")
    assert check(capsys, "--cache-dir", str(folder)) == first
    assert not cache.default_folder(project).exists()
    assert sorted(p.name for p in folder.iterdir()) == [".gitignore", "findings.json", "last_run.json"]  # no leftovers


def _age(folder: Path, seconds: int = 3600) -> None:
    """Make every file look modified long ago, as files in a repository usually are."""
    for path in folder.rglob("*.py"):
        status = path.stat()
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns - seconds * 10**9))


def test_a_warm_run_does_not_even_read_unchanged_files(project, capsys, monkeypatch):
    _age(project / "src")
    first = check(capsys)
    reads: list[Path] = []
    real = runner.read_regular_file
    monkeypatch.setattr(runner, "read_regular_file", lambda path, *args: reads.append(path) or real(path, *args))
    target = project / "src" / "ng003_negatives.py"
    target.write_text(target.read_text() + "\n")
    assert check(capsys)[0] == first[0]
    assert [path for path in reads if path.suffix == ".py"] == [target]  # the edited file alone


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


def _replace_keeping_size_and_time(target: Path, text: str, same_inode: bool) -> None:
    """New bytes of the same length under the old modification time: only the inode (a new
    file renamed over it) or the change time (written in place) tells."""
    status = target.stat()
    assert len(text.encode()) == status.st_size
    if same_inode:
        target.write_text(text)
    else:
        (target.parent / "new.tmp").write_text(text)
        os.replace(target.parent / "new.tmp", target)
    os.utime(target, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert (target.stat().st_size, target.stat().st_mtime_ns) == (status.st_size, status.st_mtime_ns)


@pytest.mark.parametrize("same_inode", [False, True], ids=["renamed over", "written in place"])
def test_a_file_replaced_with_the_same_size_and_time_is_read_again(project, parsed, capsys, same_inode):
    _age(project / "src")
    target = project / "src" / "ng003_negatives.py"
    text = target.read_text()
    check(capsys)
    _replace_keeping_size_and_time(target, text.replace("graph_built_before", "graph_built_BEFORE"), same_inode)
    parsed.clear()
    status, out = check(capsys)
    assert parsed == ["src/ng003_negatives.py"]
    assert (status, out) == check(capsys, "--no-cache")


# -- a cache that does not fit: one warning, then a fresh one ----------------------------------------

def _section(project: Path) -> dict:
    [section] = json.loads((cache.default_folder(project) / "findings.json").read_text())["versions"].values()
    return section


def _stored_findings(section: dict) -> list[list]:
    """Each list of findings stored in the section, of one file's bytes, by itself or linked."""
    return [found for entry in section["entries"].values() for key in ("local", "finished")
            for found in entry.get(key, {}).values()]


def _first_finding(section: dict) -> dict:
    return next(found for found in _stored_findings(section) if found)[0]


def _first_related(section: dict) -> dict:
    return next(finding["related"][0] for found in _stored_findings(section) for finding in found
                if finding["related"])


def _some_entry(section: dict) -> dict:
    return next(entry for entry in section["entries"].values() if entry.get("local"))


DAMAGES = {
    "a row that is not a number": lambda section: _first_finding(section).update(row=None),
    "a column below zero": lambda section: _first_finding(section).update(col=-3),
    "an unknown rule code": lambda section: _first_finding(section).update(code="ZZ999"),
    "a message that is a list": lambda section: _first_finding(section).update(message=["m"]),
    "a finding that is a list": lambda section: next(found for found in _stored_findings(section) if found)
    .__setitem__(0, ["NG003", "m"]),
    "findings that are a dict": lambda section: _some_entry(section)["local"].update({"k": {"a": 1}}),
    "a missing key": lambda section: _first_finding(section).pop("severity"),
    "an extra key": lambda section: _first_finding(section).update(extra=1),
    "a help that is a number": lambda section: _first_finding(section).update(help=1),
    "related that is a dict": lambda section: _first_finding(section).update(related={}),
    "a related place of another shape": lambda section: _first_related(section).update(row="3"),
    "a related place without a path": lambda section: _first_related(section).pop("path"),
    "an edit of another shape": lambda section: next(
        found for entry in _stored_findings(section) for found in entry if found["fix"]
    )["fix"]["edits"].append({"content": 1}),
    "an entry of another key": lambda section: _some_entry(section).update(other=1),
    "an index of another shape": lambda section: _some_entry(section).update(index=[True]),
    "a file entry of three items": lambda section: section["files"].update({"k": ["a", 1, 2]}),
    "a file entry with a text time": lambda section: section["files"].update({"k": ["a", "1"]}),
    "a section of another shape": lambda section: section.pop("files"),
}


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_a_cache_entry_of_another_shape_drops_the_cache_with_one_warning(project, capsys, damage):
    _age(project / "src")
    fresh = check(capsys, "--no-cache")
    check(capsys)
    path = cache.default_folder(project) / "findings.json"
    stored = json.loads(path.read_text())
    [section] = stored["versions"].values()
    damage(section)
    path.write_text(json.dumps(stored))
    status, out, err = check_warned(capsys)
    assert (status, out) == fresh  # no TypeError, no `m0.py:None:10`, no ZZ999
    assert err.count("\n") == 1 and err.startswith("lint-nograd: warning: cannot use the cache ")
    assert check_warned(capsys) == (*fresh, "")  # rebuilt


def test_the_warning_for_a_damaged_cache_comes_once(project, capsys):
    check(capsys)
    path = cache.default_folder(project) / "findings.json"
    stored = json.loads(path.read_text())
    _first_finding(next(iter(stored["versions"].values()))).update(row=None)
    path.write_text(json.dumps(stored))
    status = cli.main(["check", "--jobs", "2", "--output-format", "json"])
    out, err = capsys.readouterr()
    assert status == 1 and err == (f"lint-nograd: warning: cannot use the cache {path}: "
                                   "an entry of another shape; starting afresh\n")


def test_the_entries_of_another_version_are_kept_and_not_judged(project, capsys):
    """Two installed versions may share a project: each keeps its own section."""
    first = check(capsys)
    path = cache.default_folder(project) / "findings.json"
    stored = json.loads(path.read_text())
    other = {"written": 1, "entries": {"k": {"a shape": "of another version"}}, "files": {}}
    stored["versions"]["another version"] = other
    path.write_text(json.dumps(stored))
    (project / "src" / "new.py").write_text("x = 1\n")
    assert check_warned(capsys) == (*first, "")
    assert json.loads(path.read_text())["versions"]["another version"] == other


def test_a_cache_too_large_to_read_back_is_not_written(project, capsys, monkeypatch):
    monkeypatch.setattr(cache, "_MAX_BYTES", 100)
    first = check(capsys)
    assert not (cache.default_folder(project) / "findings.json").exists()
    assert check_warned(capsys) == (*first, "")


# -- the cache folder and its files are never written through a link ---------------------------------

symlinks = pytest.mark.skipif(os.name == "nt", reason="POSIX symlinks")


@symlinks
@pytest.mark.parametrize("target_exists", [False, True])
def test_a_planted_gitignore_link_is_not_written_through(project, capsys, tmp_path_factory, target_exists):
    target = tmp_path_factory.mktemp("elsewhere") / "victim"
    if target_exists:
        target.write_text("precious\n")
    cache.default_folder(project).mkdir()
    (cache.default_folder(project) / ".gitignore").symlink_to(target)
    first = check(capsys)
    assert target.read_text() == "precious\n" if target_exists else not target.exists()
    assert (cache.default_folder(project) / "findings.json").is_file()
    assert check(capsys) == first


@symlinks
def test_a_cache_folder_that_is_a_link_is_not_used(project, capsys, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    cache.default_folder(project).symlink_to(elsewhere, target_is_directory=True)
    fresh = check(capsys, "--no-cache")
    assert check_warned(capsys) == (*fresh, f"lint-nograd: warning: the cache folder {cache.default_folder(project)} "
                                            "is a symbolic link; not used\n")
    assert list(elsewhere.iterdir()) == []


@symlinks
def test_a_cache_dir_named_through_a_link_is_used_where_it_leads(project, capsys, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (project / "link").symlink_to(elsewhere, target_is_directory=True)
    first = check_warned(capsys, "--cache-dir", "link")
    assert (elsewhere / "findings.json").is_file() and first[2] == ""
    assert check_warned(capsys, "--cache-dir", "link") == first


def test_findings_are_stored_as_asdict_makes_them(project):
    """The stored form of a finding is written by hand for speed: it must stay what
    `dataclasses.asdict` gives, fix, edits and related places included."""
    from dataclasses import asdict

    from lint_nograd.fix import rewrite

    found = []
    for path in sorted((project / "src").glob("ng00*.py")):
        found += engine.check_source(path.read_bytes(), path.name, engine.FIXABLE_CODES | {"NG003", "NG004"},
                                     attach_fixes=rewrite.attach_fixes)
    assert any(d.fix is not None and d.fix.edits for d in found) and any(d.related for d in found)
    assert cache.diagnostics_to_json(found) == [asdict(d) for d in found]
    assert cache.diagnostics_from_json(json.loads(json.dumps(cache.diagnostics_to_json(found))), "") is not None


def test_summaries_read_back_are_the_same_and_share_their_refs(project):
    """A summary read from the cache is the one stored; summaries read in one run keep each ref
    once (a project's summaries repeat `("imp", "torch")` thousands of times)."""
    from lint_nograd.project.summary import ModuleSummary

    made = [summary for path in sorted((project / "src").glob("ng00*.py"))
            if (summary := engine.facts(path.read_bytes(), path.name, frozenset()).summary) is not None]
    shared: dict = {}
    read = [ModuleSummary.from_json(json.loads(json.dumps(summary.to_json())), shared) for summary in made]
    assert read == made
    refs = [ref for summary in read for refs in summary.names.values() for ref in refs]
    torch_refs = [ref for ref in refs if ref == ("imp", "torch")]
    assert len(torch_refs) > 1 and all(ref is torch_refs[0] for ref in torch_refs)
