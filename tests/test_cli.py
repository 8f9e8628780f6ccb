"""The command line end to end, with a stand-in engine; a few runs of the real console script."""
from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lint_nograd import __version__, cli
from lint_nograd.report.diagnostics import Diagnostic, Edit, Fix
from lint_nograd.report.registry import RULES
from lint_nograd.run import engine
from lint_nograd.run.cache import Cache


def stand_in_check_source(data: bytes, display_path: str, codes: frozenset[str], **_) -> list[Diagnostic]:
    """Reports a selected rule wherever a line spells its code; a line saying `crash` raises."""
    found = []
    for row, line in enumerate(data.decode().splitlines(), 1):
        if "crash" in line:
            raise RuntimeError("the stand-in engine crashed")
        for code in sorted(codes):
            col = line.find(code) + 1
            if col:
                rule = RULES[code]
                fix = Fix("rewrite", (Edit("", row, col, row, col + 5),)) if rule.fixable else None
                found.append(Diagnostic(code, f"found {rule.name}", display_path, row, col, row,
                                        col + 5, rule.severity, line, fix))
    return found


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project folder as the current one, checked by the stand-in engine."""
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")  # stops the upward search
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(engine, "facts", lambda data, shown, codes, **_: engine.FileFacts(
        stand_in_check_source(data, shown, codes), None))
    monkeypatch.setattr(engine, "codes_to_check", lambda data, codes, scan=None: codes)  # no gate
    monkeypatch.setattr(cli, "Cache", lambda folder, *_: Cache(None))  # the cache has tests of its own
    return tmp_path


@pytest.fixture
def run(project, capsys):
    def run(*args: str) -> tuple[int, str, str]:
        status = cli.main(list(args))
        out, err = capsys.readouterr()
        return status, out, err
    return run


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


CLEAN = {"a.py": "x = 1\n"}
FINDING = {"a.py": "x = 1\ny = f(x)  # NG003\n"}
NOTE = {"a.py": "x = 1\ny = f(x)  # NG001\n"}  # NG001 is a note
NOTE_FAILS = {**NOTE, "pyproject.toml": "[tool.lint-nograd]\nexit-non-zero-on-note = true\n"}


@pytest.mark.parametrize("files, args, status", [
    (CLEAN, ["check"], 0),
    (FINDING, ["check"], 1),
    (FINDING, ["check", "--exit-zero"], 0),
    (FINDING, ["check", "--ignore", "NG003"], 0),
    (NOTE, ["check"], 0),  # shown and counted, but no failed run
    (NOTE, ["check", "--exit-non-zero-on-note"], 1),
    (NOTE_FAILS, ["check"], 1),
    (NOTE_FAILS, ["check", "--exit-zero"], 0),
    ({"a.py": "NG001 NG003\n"}, ["check"], 1),
    (CLEAN, ["check", "missing.py", "a.py"], 2),
    (FINDING, ["check", "--exit-zero", "missing", "."], 2),  # errors are not findings
    ({"a.py": "crash\n"}, ["check"], 2),
    (CLEAN, ["check", "--select", "NG9"], 2),
    (CLEAN, ["check", "--output-format", "xml"], 2),
    (CLEAN, ["check", "--jobs", "0"], 2),
    (CLEAN, ["nonsense"], 2),
    (CLEAN, [], 2),
    (CLEAN, ["--version"], 0),
])
def test_exit_status(run, project, files, args, status):
    write(project, files)
    assert run(*args)[0] == status


def test_full_output_is_the_default(run, project):
    write(project, {"pkg/m.py": "with no_grad():  # NG004\n"})
    status, out, err = run("check")
    assert (status, err) == (1, "")
    assert out == (
        f"{os.path.join('pkg', 'm.py')}:1:20: NG004 [*] found no-grad-under-forward-mode\n"
        "  |\n"
        "1 | with no_grad():  # NG004\n"
        "  |                    ^^^^^\n"
        "  |\n"
        "  = fix: rewrite\n"
        "\n"
        "Found 1 error.\n"
        "[*] 1 fixable with `lint-nograd fix`.\n"
    )


def test_concise_output_sorted_by_path_and_position(run, project):
    write(project, {"b.py": "NG001 NG004\n", "a.py": "\n\nNG003\n"})
    status, out, _ = run("check", "--output-format", "concise")
    assert out.splitlines() == [
        "a.py:3:1: NG003 found backward-without-graph",
        "b.py:1:1: NG001 found transform-under-no-grad",
        "b.py:1:7: NG004 [*] found no-grad-under-forward-mode",
        "Found 2 errors and 1 note.",
        "[*] 1 fixable with `lint-nograd fix`.",
    ]


@pytest.mark.parametrize("output_format", ["json", "sarif", "github"])
def test_machine_formats_have_no_summary(run, project, output_format):
    write(project, FINDING)
    status, out, _ = run("check", "--output-format", output_format)
    assert status == 1 and "Found" not in out
    if output_format == "github":
        assert out.startswith("::error title=lint-nograd (NG003),file=a.py,line=2,")
    else:
        json.loads(out)


def test_json_of_a_clean_run(run, project):
    write(project, CLEAN)
    assert run("check", "--output-format", "json")[1] == "[]\n"


def codes_checked(project, monkeypatch, *args) -> frozenset[str]:
    seen = []
    monkeypatch.setattr(engine, "facts", lambda data, shown, codes, **_: seen.append(codes) or engine.FileFacts([], None))
    assert cli.main(["check", *args]) == 0
    [codes] = seen
    return codes


@pytest.mark.parametrize("config, args, codes", [
    ("", [], set(RULES) - {"NG100"}),  # NG100 unused-noqa is off by default, as ruff's RUF100
    ("", ["--extend-select", "NG100"], set(RULES)),
    ("", ["--select", "NG001,NG002"], {"NG001", "NG002"}),
    ("", ["--select", "NG001", "--select", "NG003"], {"NG001", "NG003"}),
    ("", ["--select", "ALL", "--ignore", "NG00"], set()),
    ("", ["--ignore", "NG000,NG001,NG002,NG003"], {"NG004", "NG005", "NG006"}),
    ("", ["--select", "NG001", "--extend-select", "NG002"], {"NG001", "NG002"}),
    ('select = ["NG001", "NG002"]', [], {"NG001", "NG002"}),
    ('select = ["NG001", "NG002"]', ["--ignore", "NG002"], {"NG001"}),
    ('select = ["NG001", "NG002"]', ["--extend-select", "NG003"], {"NG001", "NG002", "NG003"}),
    ('ignore = ["NG003"]', ["--select", "NG003"], {"NG003"}),  # the command line wins
    ('ignore = ["NG003"]', ["--isolated"], set(RULES) - {"NG100"}),
])
def test_rule_selection(project, monkeypatch, config, args, codes):
    (project / "pyproject.toml").write_text(f"[tool.lint-nograd]\n{config}\n")
    write(project, CLEAN)
    if not codes:  # every rule off: nothing to run, nothing found
        assert cli.main(["check", *args]) == 0
    else:
        assert codes_checked(project, monkeypatch, *args) == codes


def test_unknown_code_is_a_usage_error(run, project):
    write(project, CLEAN)
    status, out, err = run("check", "--extend-select", "NG001,XYZ")
    assert status == 2 and out == ""
    assert err == "lint-nograd: error: unknown rule code or prefix `XYZ` in --extend-select\n"


def test_per_file_ignores(run, project):
    (project / "pyproject.toml").write_text(
        '[tool.lint-nograd]\nper-file-ignores = {"tests/*" = ["NG001"], "conftest.py" = ["NG"]}\n')
    write(project, {"tests/test_a.py": "NG001 NG003\n", "src/conftest.py": "NG001\n",
                    "src/b.py": "NG001\n"})
    out = run("check", "--output-format", "concise")[1]
    assert out.splitlines()[:-1] == [
        f"{os.path.join('src', 'b.py')}:1:1: NG001 found transform-under-no-grad",
        f"{os.path.join('tests', 'test_a.py')}:1:7: NG003 found backward-without-graph",
    ]


def test_config_is_found_from_a_subfolder_and_globs_stay_rooted(run, project, monkeypatch):
    (project / "pyproject.toml").write_text('[tool.lint-nograd]\nextend-exclude = ["pkg/gen"]\n')
    write(project, {"pkg/gen/a.py": "NG001\n", "pkg/b.py": "NG001\n"})
    monkeypatch.chdir(project / "pkg")
    assert run("check", "--output-format", "concise")[1].splitlines()[0].startswith("b.py:1:1:")


@pytest.mark.parametrize("args, shown", [
    ([], ["a.py"]),
    (["--exclude", "nothing"], ["a.py", os.path.join("build", "b.py")]),
    (["--extend-exclude", "a.py"], []),
    (["--no-respect-gitignore"], ["a.py", "ignored.py"]),
])
def test_file_selection_options(run, project, args, shown):
    write(project, {"a.py": "NG001\n", "build/b.py": "NG001\n", "ignored.py": "NG001\n",
                    ".gitignore": "ignored.py\n"})
    out = run("check", "--output-format", "json", *args)[1]
    assert [finding["filename"] for finding in json.loads(out)] == sorted(shown)


@pytest.mark.parametrize("text, message", [
    ("[tool.lint-nograd\n", "lint-nograd: error: cannot read pyproject.toml: "),
    ("[tool.lint-nograd]\nselects = []\n", "lint-nograd: error: unknown key `selects`"),
])
def test_bad_config_exits_2(run, project, text, message):
    (project / "pyproject.toml").write_text(text)
    write(project, FINDING)
    status, out, err = run("check")
    assert status == 2 and out == "" and err.startswith(message)


def test_missing_path_is_reported_after_checking_the_rest(run, project):
    write(project, FINDING)
    status, out, err = run("check", "--output-format", "concise", "nope", "a.py")
    assert status == 2
    assert out.startswith("a.py:2:13: NG003")
    assert err == "lint-nograd: error: path does not exist: nope\n"


def test_a_crash_in_one_file_is_reported_and_the_run_goes_on(run, project):
    write(project, {"a.py": "crash\n", "b.py": "NG001\n"})
    status, out, err = run("check", "--output-format", "concise")
    assert status == 2 and "b.py:1:1: NG001" in out
    assert err == ("lint-nograd: error: failed to check a.py: internal error: RuntimeError: "
                   "the stand-in engine crashed\n")


def test_an_internal_error_is_one_line_not_a_traceback(run, project, monkeypatch):
    def broken_discover(*args, **kwargs):
        raise ValueError("oops")

    monkeypatch.setattr(cli, "discover", broken_discover)
    assert run("check") == (2, "", "lint-nograd: error: internal error: ValueError: oops\n")


def test_statistics(run, project):
    write(project, {"a.py": "NG001\nNG004\nNG001\n", "b.py": "NG001\n"})
    status, out, _ = run("check", "--statistics")
    assert status == 1
    assert out == ("3  NG001      transform-under-no-grad\n"
                   "1  NG004  [*] no-grad-under-forward-mode\n"
                   "Found 1 error and 3 notes.\n[*] 1 fixable with `lint-nograd fix`.\n")


@pytest.mark.parametrize("args, env, colored", [
    (["--color", "always"], {}, True),
    (["--color", "always"], {"NO_COLOR": "1"}, True),  # an explicit flag beats the variable
    (["--color", "never"], {}, False),
    ([], {}, False),  # auto: not a terminal
])
def test_color(run, project, monkeypatch, args, env, colored):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    write(project, FINDING)
    assert ("\x1b[" in run("check", *args)[1]) == colored


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork",
                    reason="the stand-in engine reaches workers only when they are forked")
def test_jobs_2_gives_the_same_output_as_jobs_1(run, project):
    write(project, {f"m{index:02}.py": f"NG00{index % 7}\nx = 1  # NG004\n"
                    for index in range(cli.PARALLEL_MIN_FILES + 8)})
    one = run("check", "--jobs", "1", "--output-format", "json")
    two = run("check", "--jobs", "2", "--output-format", "json")
    assert one == two and one[0] == 1
    assert len(json.loads(one[1])) == 2 * (cli.PARALLEL_MIN_FILES + 8)


def test_cache_options_are_accepted(run, project):
    write(project, CLEAN)
    assert run("check", "--no-cache", "--cache-dir", "somewhere")[0] == 0


def test_rule_prints_its_page(run):
    status, out, _ = run("rule", "ng001")
    assert status == 0 and "NG001" in out


def test_rule_without_a_page_prints_its_summary(run, monkeypatch):
    monkeypatch.setattr(cli.output, "rule_page", lambda code: None)
    summary = RULES["NG004"].summary
    assert run("rule", "NG004")[1] == f"# NG004 (no-grad-under-forward-mode)\n\n{summary}\n"


def test_rule_all_lists_every_rule(run):
    status, out, _ = run("rule", "--all")
    header, *rows = out.splitlines()
    assert status == 0 and header.split() == ["CODE", "NAME", "SEVERITY", "DEFAULT", "FIX"]
    assert [row.split() for row in rows] == [
        [rule.code, rule.name, rule.severity, "off" if rule.code == "NG100" else "on", "yes" if rule.fixable else "no"]
        for rule in RULES.values()]


@pytest.mark.parametrize("args", [["rule", "NG999"], ["rule"], ["rule", "NG001", "--all"]])
def test_rule_usage_errors(run, args):
    status, out, err = run(*args)
    assert status == 2 and out == "" and "error" in err


def test_version(run):
    assert run("--version")[1] == f"lint-nograd {__version__}\n"


# The real console script, in a subprocess: only what does not depend on the engine's rules.
SCRIPT = shutil.which("lint-nograd", path=str(Path(sys.executable).parent))
COMMAND = [SCRIPT] if SCRIPT else [sys.executable, "-m", "lint_nograd"]


def script(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("pyproject, args, status, stderr", [
    ("", ["check"], 0, ""),
    ("", ["check", "missing.py"], 2, "lint-nograd: error: path does not exist: missing.py\n"),
    ("[tool.lint-nograd\n", ["check"], 2, "lint-nograd: error: cannot read pyproject.toml: "),
    ("[tool.lint-nograd]\ncolour = 1\n", ["check"], 2, "lint-nograd: error: unknown key `colour`"),
    ("", ["check", "--output-format", "xml"], 2, "usage: lint-nograd check"),
    ("", ["check", "--select", "NOPE"], 2, "lint-nograd: error: unknown rule code or prefix"),
])
def test_console_script(tmp_path, pyproject, args, status, stderr):
    (tmp_path / "pyproject.toml").write_text(pyproject or "[tool.lint-nograd]\n")
    (tmp_path / "clean.py").write_text("x = 1\n")
    result = script(tmp_path, *args)
    assert result.returncode == status
    assert result.stderr.startswith(stderr) and "Traceback" not in result.stderr
    if status == 0:
        assert result.stdout == "No findings.\n"


def test_console_script_prints_a_rule_page(tmp_path):
    result = script(tmp_path, "rule", "NG001")
    assert result.returncode == 0 and "NG001" in result.stdout
