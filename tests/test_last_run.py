"""The last run: an unchanged project is answered from one small file, and a file whose edit
linking cannot see (a comment, a new line at the end) is the only one analysed again. After any
edit, the findings are those of a run without the cache."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from lint_nograd import cli
from lint_nograd.run import cache, engine

PROJECTS = Path(__file__).parent / "fixtures" / "projects"


@pytest.fixture
def project(tmp_path, monkeypatch):
    shutil.copytree(PROJECTS / "cross_module", tmp_path / "project")
    for path in (tmp_path / "project").rglob("*.py"):  # as files in a repository are: not modified just now
        status = path.stat()
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns - 3600 * 10**9))
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path / "project"


@pytest.fixture
def parsed(monkeypatch):
    """The display paths of the files analysed (not answered by the cache or the last run)."""
    seen: list[str] = []
    real = engine.facts
    monkeypatch.setattr(engine, "facts", lambda data, shown, *args, **kw: seen.append(shown) or real(data, shown,
                                                                                                    *args, **kw))
    return seen


@pytest.fixture
def cache_reads(monkeypatch):
    """How many times the cache file itself was read (not at all when there is none yet)."""
    reads: list[int] = []
    real = cache.Cache._read
    monkeypatch.setattr(cache.Cache, "_read", lambda self, data: reads.append(1) or real(self, data))
    return reads


def check(capsys, *args: str) -> tuple[int, str]:
    status = cli.main(["check", "--jobs", "1", "--output-format", "concise", *args])
    return status, capsys.readouterr().out


def test_an_unchanged_project_reads_neither_its_files_nor_the_cache(project, parsed, cache_reads, capsys):
    first = check(capsys)
    assert first[0] == 1 and "NG004" in first[1] and parsed and (cache.default_folder(project) / "findings.json").exists()
    parsed.clear()
    assert check(capsys) == first and parsed == [] and cache_reads == []


def test_a_comment_at_the_end_of_a_module_is_the_only_thing_analysed_again(project, parsed, cache_reads, capsys):
    first = check(capsys)
    parsed.clear()
    model = project / "pkg" / "model.py"
    model.write_text(model.read_text() + "# a comment\n")
    assert check(capsys) == first and parsed == ["pkg/model.py"] and cache_reads == []
    parsed.clear()
    assert check(capsys) == first and parsed == []  # and the last run knows the new text


EDITS = {
    "a line above every region": ("pkg/model.py", lambda text: "# moved down\n" + text),
    "a region gone": ("pkg/model.py", lambda text: text.replace("    with torch.no_grad():\n        s = x.mean()\n"
                                                               "    return (x - s).pow(3)",
                                                               "    s = x.mean()\n    return (x - s).pow(3)")),
    "a new transform": ("pkg/train.py", lambda text: text + "from pkg.model import unused\nu = jacfwd(unused)\n"),
    "a transform removed": ("pkg/train.py", lambda text: text.replace("h = jacfwd(loss)\n", "")),
    "a rebinding removed": ("pkg/lookalike.py", lambda text: text.replace("unused = plain", "other = plain")),
    "a comment": ("pkg/forms.py", lambda text: text + "# jacfwd\n"),
    "a file that does not parse": ("pkg/train.py", lambda text: text + "def (:\n"),
}


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_after_an_edit_the_findings_are_those_without_the_cache(project, capsys, edit):
    first = check(capsys)
    name, change = EDITS[edit]
    path = project / name
    path.write_text(change(path.read_text()))
    after = check(capsys)
    assert after == check(capsys, "--no-cache") == check(capsys)
    assert (after == first) == (edit == "a comment")


def test_a_new_file_or_other_options_run_the_project_again(project, parsed, capsys):
    first = check(capsys)
    parsed.clear()
    assert check(capsys, "--select", "NG004") != first and parsed  # other rules: other findings
    (project / "pkg" / "extra.py").write_text("from torch.func import jacfwd\nfrom pkg.model import unused\n"
                                              "g = jacfwd(unused)\n")
    parsed.clear()
    after = check(capsys)
    assert after != first and "pkg/model.py:23" in after[1] and after == check(capsys, "--no-cache")


@pytest.mark.parametrize("damage", [
    lambda stored: "{not json",
    lambda stored: json.dumps({**stored, "files": []}),
    lambda stored: json.dumps({**stored, "findings": {path: [{"row": "x"}] for path in stored["findings"]}}),
    lambda stored: json.dumps({**stored, "files": {path: [1] for path in stored["files"]}}),
], ids=["not json", "files not a table", "a finding of another shape", "a file entry of another shape"])
def test_a_damaged_last_run_is_run_again_silently(project, capsys, damage):
    first = check(capsys)
    path = cache.default_folder(project) / "last_run.json"
    path.write_text(damage(json.loads(path.read_text())))
    (project / "pkg" / "forms.py").write_text((project / "pkg" / "forms.py").read_text() + "# changed\n")
    assert check(capsys) == first
    assert capsys.readouterr().err == ""
