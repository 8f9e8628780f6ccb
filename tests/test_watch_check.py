"""The watcher speaks as `check` does, because teams run both: the same findings, messages, help and
severities on the same program, `# noqa` read the same way, `[tool.lint-nograd]`'s select, ignore
and exit-non-zero-on-note, and a strict run that fails on what `check` fails on, saying why."""
from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from test_watch import rows, run, watch, write

from lint_nograd.checks import region_in_reached_function, transform_in_region
from lint_nograd.watch import report

PROGRAM = """\
    import torch
    from torch.func import grad, jacfwd, jacrev


    def f(x):
        with torch.no_grad():  # region
            s = x * x
        return s * x


    def quiet(x):
        with torch.no_grad():  # noqa: NG004
            s = x * x
        return s * x


    def other_code(x):
        with torch.no_grad():  # noqa: NG005 (another code: not silenced)
            s = x * x
        return s * x


    x = torch.tensor(1.5)
    print(jacfwd(jacrev(f))(x).item())  # as written
    jacfwd(quiet)(x)
    jacfwd(other_code)(x)  # other code
    with torch.no_grad():  # outer
        grad(f)(x)  # grad in region
        grad(f)(x)  # noqa
"""


def _said(entries: list[dict]) -> set[tuple]:
    """(code, row, severity, message, related messages), the watcher's hit count left out."""
    return {(d["code"], d["location"]["row"], d["severity"], d["message"].rpartition(" [")[0] or d["message"],
             tuple(r["message"] for r in d["related"])) for d in entries}


def test_the_watcher_reports_what_check_reports_in_checks_words(tmp_path):
    script = write(tmp_path, "program.py", PROGRAM)
    watched, done = watch(script)
    assert done.stdout == "3.0\n", done.stderr  # jacfwd(jacrev(f)) differentiates through the region
    checked = run([sys.executable, "-m", "lint_nograd", "check", "--output-format", "json", "program.py"], tmp_path)
    assert checked.returncode == 1, checked.stderr
    at = rows(script)
    # the noqa on the region, and the bare noqa on the call, silence both; another code's does not
    assert {(code, row) for code, row, *_ in _said(watched)} == {
        ("NG004", at["region"]), ("NG004", at["noqa: NG005 (another code: not silenced)"]),
        ("NG001", at["grad in region"])}
    assert _said(watched) == {(code, row, severity, message, related)
                              for code, row, severity, message, related in _said(json.loads(checked.stdout))}
    by_row = {d["location"]["row"]: d for d in watched}
    # a call is named as written: jacfwd(jacrev(f)) is no `hessian`
    assert by_row[at["region"]]["related"][0]["message"] == "`jacfwd(jacrev(f))` reaches it in forward mode"


def test_the_help_is_checks_own():
    assert report.HELP["NG001"] == transform_in_region.HELP_NO_GRAD
    assert report.HELP["NG001 forward"] == transform_in_region.HELP_NO_GRAD_FORWARD
    assert report.HELP["NG001 wrong"] == transform_in_region.HELP_NO_GRAD_WRONG
    assert report.HELP["NG002"] == transform_in_region.HELP_INFERENCE
    assert report.HELP["NG002 functional"] == transform_in_region.HELP_FUNCTIONAL
    why, way_out = region_in_reached_function._WHY, region_in_reached_function._FIX
    assert (report.HELP["NG004"], report.HELP["NG005"]) == (why["forward"] + way_out, why["traced"] + way_out)
    assert "Call it outside the region" not in report.HELP["NG001"]


FORWARD_AND_NOTE = """\
    import torch, torch.func as tf

    def f(x):
        with torch.no_grad():
            s = x * x
        return s * x

    def test_jvp():
        assert tf.jvp(f, (torch.tensor(1.5),), (torch.tensor(1.0),))[1].item() == 6.75

    def test_grad_in_region():
        with torch.no_grad():
            assert tf.grad(f)(torch.tensor(1.5)).item() == 2.25
"""


def _project(tmp_path: Path, settings: str) -> Path:
    write(tmp_path, "pyproject.toml", f"[project]\nname = 'p'\n\n[tool.lint-nograd]\n{textwrap.dedent(settings)}")
    write(tmp_path, "test_model.py", FORWARD_AND_NOTE)
    return tmp_path


def _pytest(folder: Path, *options: str):
    return run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_model.py", *options], folder)


@pytest.mark.parametrize("settings, options, codes", [
    ("select = ['NG001']\n", (), {"NG001"}),
    ("ignore = ['NG004']\n", ("--nograd-watch-select", "NG00"), {"NG001", "NG004"}),
    ("", ("--nograd-watch-ignore", "NG001"), {"NG004"}),
])
def test_the_pytest_plugin_reads_the_projects_settings_and_its_options(tmp_path, settings, options, codes):
    done = _pytest(_project(tmp_path, settings), "--nograd-watch", *options)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr
    shown = {code for code in ("NG001", "NG004") if f": {code} " in done.stdout}
    assert shown == codes


def test_strict_fails_on_what_check_fails_on_and_says_why(tmp_path):
    folder = _project(tmp_path, "ignore = ['NG004']\n")  # a note alone: check exits 0
    assert _pytest(folder, "--nograd-watch-strict").returncode == 0
    folder = _project(tmp_path, "ignore = ['NG004']\nexit-non-zero-on-note = true\n")
    noted = _pytest(folder, "--nograd-watch-strict")
    assert noted.returncode == 1 and "2 passed" in noted.stdout
    assert "lint-nograd watch failed: 1 note (NG001)" in noted.stdout
    folder = _project(tmp_path, "")
    failed = _pytest(folder, "--nograd-watch-strict")
    assert failed.returncode == 1 and "lint-nograd watch failed: 1 error (NG004)" in failed.stdout
    assert "notes alone fail only with exit-non-zero-on-note" in failed.stdout


def test_the_command_line_reads_the_settings_and_takes_strict_select_and_ignore(tmp_path):
    folder = _project(tmp_path, "ignore = ['NG004']\n")
    write(folder, "train.py", textwrap.dedent(FORWARD_AND_NOTE) + "\ntest_jvp(); test_grad_in_region(); print('ran')\n")
    command = [sys.executable, "-m", "lint_nograd.watch", "--output-format", "json"]

    def codes(done) -> set[str]:
        report = done.stderr.partition("\nlint-nograd watch failed")[0]
        start = re.search(r"^\[", report, re.MULTILINE)  # after what torch warns (jit's deprecation, 2.15)
        return {d["code"] for d in json.loads(report[start.start() if start else 0:])}

    plain = run([*command, "train.py"], folder)
    assert (plain.returncode, plain.stdout, codes(plain)) == (0, "ran\n", {"NG001"})
    assert run([*command, "--strict", "train.py"], folder).returncode == 0  # a note only
    strict = run([*command, "--strict", "--select", "NG", "train.py"], folder)
    assert strict.returncode == 1 and codes(strict) == {"NG001", "NG004"}
    assert strict.stderr.endswith("lint-nograd watch failed: 1 error (NG004), as `check` would fail; "
                                  "notes alone fail only with exit-non-zero-on-note\n")
    noted = run([*command, "--strict", "--exit-non-zero-on-note", "train.py"], folder)
    assert noted.returncode == 1 and codes(noted) == {"NG001"}
    assert codes(run([*command, "--select", "NG", "--ignore", "NG001", "train.py"], folder)) == {"NG004"}


@pytest.mark.parametrize("settings, words", [
    ("select = ['XX1']\n", "unknown rule code or prefix `XX1`"),
    ("ignore = 'NG001'\n", "`ignore` in [tool.lint-nograd]"),
    ("exit-non-zero-on-note = 'yes'\n", "must be true or false"),
    ("select = [\n", "cannot read"),
])
def test_bad_settings_are_a_clear_message_and_exit_status_2(tmp_path, settings, words):
    folder = _project(tmp_path / "project", settings)
    write(folder, "train.py", "print('not run')\n")
    done = run([sys.executable, "-m", "lint_nograd.watch", "train.py"], folder)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
    plugin = _pytest(folder, "--nograd-watch")
    assert plugin.returncode == 4 and "Traceback" not in plugin.stderr
    assert words in plugin.stderr or "Invalid value" in plugin.stderr  # pytest reads pyproject.toml first
    plain = write(tmp_path / "plain", "train.py", "print('not run')\n").parent
    bad_option = run([sys.executable, "-m", "lint_nograd.watch", "--select", "NG9", "train.py"], plain)
    assert bad_option.returncode == 2 and "`NG9` in --select" in bad_option.stderr
    assert "Traceback" not in bad_option.stderr and bad_option.stdout == ""
