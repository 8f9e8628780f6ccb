"""Whole-project analysis: each `fixtures/projects/<case>/` is a small project (a `pyproject.toml`
with a `[tool.lint-nograd]` table, several modules), and each of its `expect*.txt` files starts with
the command line to run there (`# check pkg/train.py`), followed by the exact output (concise
unless the command line names another format).

After an intended change of messages, regenerate with
`LINT_NOGRAD_UPDATE_FIXTURES=1 pytest tests/test_project_fixtures.py` and review the diff.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
from lint_nograd import cli
from lint_nograd.run import stages

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
EXPECTATIONS = sorted(PROJECTS.glob("*/expect*.txt"))


def run(project: Path, args: list[str], capsys, *extra: str) -> str:
    """The output (concise unless the expectation names a format), what went to standard error, and
    the exit status."""
    old = Path.cwd()
    os.chdir(project)
    try:
        concise = [] if "--output-format" in args else ["--output-format", "concise"]
        status = cli.main([*args, *concise, *extra])
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    return f"{out}{err}exit {status}\n"


def read(expectation: Path) -> tuple[list[str], str]:
    header, _, expected = expectation.read_text().partition("\n")
    assert header.startswith("# "), f"{expectation}: the first line must be `# check ARGS`"
    return shlex.split(header[2:]), expected


@pytest.mark.parametrize("expectation", EXPECTATIONS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_project(expectation: Path, capsys):
    args, expected = read(expectation)
    got = run(expectation.parent, args, capsys, "--no-cache")
    if os.environ.get("LINT_NOGRAD_UPDATE_FIXTURES"):
        expectation.write_text(f"# {shlex.join(args)}\n{got}")
        expected = got
    assert got == expected


@pytest.mark.parametrize("expectation", EXPECTATIONS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_one_finding_per_problem(expectation: Path):
    """No two findings print the same line: a call reaching two regions names each region's place."""
    findings = [line for line in read(expectation)[1].splitlines() if re.match(r"\S+:\d+:\d+: NG\d{3} ", line)]
    assert len(findings) == len(set(findings))


@pytest.mark.parametrize("expectation", EXPECTATIONS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_same_findings_with_the_cache_and_with_workers(expectation: Path, capsys, tmp_path, monkeypatch):
    """Cold cache, warm cache, and every stage in worker processes: the same output."""
    project = tmp_path / "project"
    shutil.copytree(expectation.parent, project)
    args, expected = read(expectation)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run(project, args, capsys, *cache) == expected
    assert run(project, args, capsys, *cache) == expected
    monkeypatch.setattr(cli, "PARALLEL_MIN_FILES", 0)
    monkeypatch.setattr(stages, "CHUNK_FILES", 1)
    assert run(project, args, capsys, "--no-cache", "--jobs", "2") == expected


@pytest.mark.parametrize("expectation", EXPECTATIONS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_summarising_ahead_changes_no_finding(expectation: Path, capsys, monkeypatch):
    """Modules are summarised ahead of linking only to be taken when linking asks for them."""
    monkeypatch.setattr(stages, "AHEAD_LEVELS", 0)
    args, expected = read(expectation)
    assert run(expectation.parent, args, capsys, "--no-cache") == expected


def test_linking_takes_the_modules_summarised_ahead(capsys, monkeypatch):
    """`jacfwd(loss)` with `loss` from another module: that module is summarised with the others
    (in worker processes when there are several), not one at a time while linking."""
    asked: list[tuple[str, bool]] = []  # each module linking loads, and whether it was summarised ahead
    real = stages.Run._load

    def load(self, entry):
        asked.append((entry.name, self.by_module[entry.name].path in self._ahead))
        return real(self, entry)

    monkeypatch.setattr(stages.Run, "_load", load)
    args, expected = read(PROJECTS / "cross_module" / "expect.txt")
    assert run(PROJECTS / "cross_module", args, capsys, "--no-cache", "--jobs", "2") == expected
    assert ("pkg.model", True) in asked and ("pkg.model", False) not in asked


GUESSED = {  # `probe(self.net, x)`: whether `probe` transforms what it is handed needs `lib` loaded (q.hand)
    "m.py": "from helpers import probe\nfrom torch.func import jvp\n\n\n"
            "def direct(f, x):\n    return jvp(f, (x,), (x,))\n\n\n"
            "class Trainer:\n    def __init__(self, net):\n        self.net = net\n\n"
            "    def step(self, x):\n        return probe(self.net, x)\n",
    "helpers.py": "from m import direct\n\n\ndef probe(f, x):\n    return direct(f, x)\n",
    "q.py": "import lib\nfrom torch.func import jvp\n\n\ndef hand(g, x):\n    return lib.direct(g, x)\n\n\n"
            "def other(f, x):\n    return jvp(f, (x,), (x,))\n",
    "lib.py": "import energies\nimport m\n\n\ndef direct(f, x):\n    return f(x)\n",
    "energies.py": "import torch\n\n\ndef energy(x):\n    with torch.no_grad():\n        s = x.max()\n"
                   "    return x / s\n",
    "run.py": "import torch\nfrom energies import energy\nfrom m import Trainer\n\n"
              "Trainer(energy).step(torch.ones(3))\n",
}


def test_guessing_what_to_summarise_ahead_loads_nothing(tmp_path, capsys, monkeypatch):
    """The guess of what linking will ask for is told from the refs alone: a module summarised
    while guessing is summarised in this process, one at a time, which is what summarising ahead
    in worker processes is there to spare."""
    for name, text in GUESSED.items():
        (tmp_path / name).write_text(text)
    loaded: list[str] = []
    guessing: list[bool] = []
    real_load, real_ahead = stages.Run._load, stages.Run._summarise_ahead

    def ahead(self, project, modules):
        guessing.append(True)
        try:
            return real_ahead(self, project, modules)
        finally:
            guessing.pop()

    monkeypatch.setattr(stages.Run, "_summarise_ahead", ahead)
    monkeypatch.setattr(stages.Run, "_load", lambda self, entry: (loaded.extend([entry.name] * bool(guessing)),
                                                                  real_load(self, entry))[1])
    monkeypatch.setattr(cli, "PARALLEL_MIN_FILES", 0)
    with_guess = run(tmp_path, ["check", "--isolated", "."], capsys, "--no-cache", "--jobs", "2")
    assert loaded == [] and guessing == [] and "energies.py:5:10: NG004" in with_guess
    monkeypatch.setattr(stages, "AHEAD_LEVELS", 0)
    assert run(tmp_path, ["check", "--isolated", "."], capsys, "--no-cache", "--jobs", "2") == with_guess


def test_the_collector_is_paused_for_a_run_and_back_after_it(capsys, monkeypatch):
    """Linking makes many objects and no cycles: the collector is off meanwhile, and on again after
    (the editor server runs one check after another in one process)."""
    import gc

    from lint_nograd.project import linking

    during: list[bool] = []
    real = linking.Project.link
    monkeypatch.setattr(linking.Project, "link", lambda self, modules: (during.append(gc.isenabled()),
                                                                       real(self, modules))[1])
    args, expected = read(PROJECTS / "cross_module" / "expect.txt")
    assert gc.isenabled()
    assert run(PROJECTS / "cross_module", args, capsys, "--no-cache", "--jobs", "1") == expected
    assert during and not any(during) and gc.isenabled()


def findings(project: Path, args: list[str], capsys) -> list[dict]:
    old = Path.cwd()
    os.chdir(project)
    try:
        cli.main(["check", "--no-cache", "--output-format", "json", *args])
    finally:
        os.chdir(old)
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("project", sorted(p for p in PROJECTS.iterdir() if p.is_dir()), ids=lambda p: p.name)
def test_a_file_checked_alone_is_told_of_a_region_only_as_the_whole_project_reports_it(project, capsys):
    """pre-commit checks the files staged, CI the whole project: a call in a file given alone is told
    of another file's region only when `check .` reports that region, under the same code, so that
    the region's `# noqa` (or its file's) satisfies both."""
    reported = {(d["filename"], d["location"]["row"], d["code"]) for d in findings(project, ["."], capsys)}
    told = 0
    for path in sorted(project.rglob("*.py")):
        shown = path.relative_to(project).as_posix()
        for finding in findings(project, [shown], capsys):
            regions = [r for r in finding["related"] if " region in `" in r["message"] and r["filename"] != shown]
            for region in regions:
                told += 1
                assert (region["filename"], region["location"]["row"], finding["code"]) in reported, finding
    assert told or project.name not in ("one_finding", "cross_module")
