"""Whatever a repository holds, `check` and `fix` report it clearly, go on with the other files,
and lose nothing.

A file that cannot be parsed is an NG000 finding; what cannot be read or used is an error on
standard error. Exit status: 0 clean, 1 findings, 2 a usage or I/O error. Never a traceback.
Each case runs next to `good.py`, a fixable file, which must still be checked and fixed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lint_nograd import cli, write
from lint_nograd.write import replace_file
from test_cli_fix import FIXABLE, FIXED

REGION = b"import torch\nwith torch.no_grad():\n    y = x * 2\ny.backward()\n"  # passes the gate
GOOD_FINDING = "good.py:6:10: NG004 [*]"
symlinks = pytest.mark.skipif(os.name == "nt", reason="POSIX symlinks")


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "good.py").write_text(FIXABLE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main([*args, "--no-cache", "--output-format", "concise"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


# -- files that cannot be parsed: NG000, and the others are still checked and fixed ------------

BLOCKS = "".join(" " * depth + "if x:\n" for depth in range(120)) + " " * 120 + "pass\n"
UNPARSABLE = {
    "syntax error": (b"with torch.no_grad(:\n    loss.backward()\n", "1:20: NG000 cannot parse: invalid syntax"),
    "python 2": (REGION + b'print "done"\n', "5:1: NG000 cannot parse: Missing parentheses in call to 'print'"),
    "invalid utf-8": (REGION + b"s = '\xff'\n", "5:1: NG000 cannot decode the file as utf-8: invalid byte"),
    "NUL byte": (REGION + b"x = 1\x00\n", "5:1: NG000 the file contains a NUL byte"),
    "unknown coding cookie": (b"# -*- coding: klingon -*-\n" + REGION, "1:1: NG000 cannot decode the file: unknown"),
    "tabs and spaces": (REGION + b"if x:\n\tif y:\n        pass\n", "7:1: NG000 cannot parse: inconsistent use"),
    "nested parentheses": (REGION + b"z = " + b"(" * 300 + b"1" + b")" * 300 + b"\n",
                           "5:205: NG000 cannot parse: too many nested parentheses"),
    "nested blocks": (REGION + BLOCKS.encode(), "105:1: NG000 cannot parse: too many levels of indentation"),
    "nested too deeply to parse": (REGION + b"z = " + b"-" * 100_000 + b"1\n",
                                   "1:1: NG000 cannot parse: the code is nested too deeply"),
    "a MB line nested too deeply": (REGION + b"z = " + b"1+" * 1_000_000 + b"1\n",
                                    "1:1: NG000 cannot parse: the code is nested too deeply"),
    "coding cookie of a codec that is no text encoding": (
        b"# -*- coding: rot13 -*-\n" + REGION, "1:1: NG000 cannot decode the file"),
}


@pytest.mark.parametrize("data, expected", UNPARSABLE.values(), ids=UNPARSABLE.keys())
def test_a_file_that_cannot_be_parsed_is_an_ng000(project, capsys, data, expected):
    (project / "bad.py").write_bytes(data)
    status, out, err = run(capsys, "check")
    assert (status, err) == (1, "")
    assert f"bad.py:{expected}" in out and GOOD_FINDING in out
    status, out, err = run(capsys, "fix")
    assert status == 1 and f"bad.py:{expected}" in out
    assert (project / "bad.py").read_bytes() == data
    assert (project / "good.py").read_text() == FIXED


# -- files that parse, in every layout: fixed with each byte outside the region kept -----------

def fixable(newline: str = "\n", prefix: bytes = b"", suffix: str = "") -> tuple[bytes, bytes]:
    """FIXABLE and FIXED with these line breaks, after `prefix` and before `suffix`."""
    return tuple(prefix + (text + suffix).replace("\n", newline).encode("latin-1") for text in (FIXABLE, FIXED))


LAYOUTS = {
    "BOM and CRLF": fixable("\r\n", b"\xef\xbb\xbf"),
    "latin-1 coding cookie": fixable(prefix=b"# -*- coding: latin-1 -*-\n# caf\xe9\n", suffix="s = 'd\xe9j\xe0'\n"),
    "mixed line endings": (
        b"import torch\r\nfrom torch.func import jacfwd\n\r\n\rdef f(x):\r\n    with torch.no_grad():\n"
        b"        s = x.mean()\r    return x - s\n\r\n\njacfwd(f)\r\n",
        b"import torch\r\nfrom torch.func import jacfwd\nfrom lint_nograd import stop_gradient\r\n\r\n\rdef f(x):\r\n"
        b"    s = stop_gradient(x.mean())\r\n    return x - s\n\r\n\njacfwd(f)\r\n"),  # new lines: the first break's
    "a line of 3 MB": fixable(suffix="s = '" + "a" * 3_000_000 + "'\n"),
    "no line break at the end": tuple(text[:-1] for text in fixable()),
    "an empty file": (b"", b""),
    "nested deeply, but not too deeply": fixable(suffix="z = " + "(" * 150 + "1" + ")" * 150 + "\n"),
    "coding: unicode_escape (writing would not give back the bytes)": (
        b"# -*- coding: unicode_escape -*-\n" + FIXABLE.encode(),) * 2,
}


@pytest.mark.parametrize("data, expected", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_every_layout_is_kept(project, capsys, data, expected):
    path = project / "m.py"
    path.write_bytes(data)
    status, _, err = run(capsys, "fix", "m.py")
    assert status in (0, 1) and "error" not in err
    assert path.read_bytes() == expected
    again = run(capsys, "fix", "m.py")
    assert again[0] == status and "Fixed" not in again[2] and path.read_bytes() == expected


def test_a_region_too_deep_for_libcst_is_refused_not_a_crash(tmp_path):
    """libcst's native parser overflows the stack on `a and b and ...` thousands deep (a crash
    of the process, not an exception): such a region is refused before it gets there."""
    source = FIXABLE.replace("s = x.mean()", "s = x.mean()\n        assert x" + " and x" * 8000)
    (tmp_path / "m.py").write_text(source)
    for command in ("check", "fix"):
        done = subprocess.run([sys.executable, "-m", "lint_nograd", command, "--isolated", "--no-cache",
                               "--output-format", "concise", "m.py"], capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 1 and "(no fix: the region's code is nested too deeply)" in done.stdout
    assert (tmp_path / "m.py").read_text() == source


# -- the file system ----------------------------------------------------------------------------

@symlinks
def test_links_to_nowhere_and_missing_paths(project, capsys):
    (project / "loop.py").symlink_to(project / "loop.py")
    (project / "broken.py").symlink_to(project / "gone.py")
    status, out, err = run(capsys, "check")  # a folder: they hold no source, and are passed over
    assert (status, err) == (1, "") and GOOD_FINDING in out
    status, out, err = run(capsys, "check", "loop.py", "broken.py", "missing.py", "good.py")
    assert status == 2 and GOOD_FINDING in out
    assert err == "".join(f"lint-nograd: error: path does not exist: {name}\n"
                          for name in ("loop.py", "broken.py", "missing.py"))


def test_a_folder_named_like_a_source_file_is_searched(project, capsys):
    (project / "x.py").mkdir()
    (project / "x.py" / "inner.py").write_text(FIXABLE)
    (project / "empty.ipynb").mkdir()
    status, out, err = run(capsys, "check", "x.py", "empty.ipynb")
    assert (status, err) == (1, "") and out.startswith("x.py/inner.py:6:10: NG004")
    assert run(capsys, "check", "empty.ipynb")[:2] == (0, "All checks passed!\n")


def test_a_file_removed_before_it_is_read(project, capsys, monkeypatch):
    (project / "gone.py").write_text(FIXABLE)
    plan_jobs = cli.plan_jobs

    def plan_then_remove(*args, **kwargs):
        plan = plan_jobs(*args, **kwargs)
        (project / "gone.py").unlink()
        return plan

    monkeypatch.setattr(cli, "plan_jobs", plan_then_remove)
    for command in ("check", "fix"):
        (project / "gone.py").write_text(FIXABLE)
        status, out, err = run(capsys, command)
        assert status == 2 and err.endswith("lint-nograd: error: cannot read gone.py: No such file or directory\n")
        assert "gone.py" not in out and not (project / "gone.py").exists()
    assert (project / "good.py").read_text() == FIXED


def test_a_file_removed_before_it_is_written(project, capsys, monkeypatch):
    (project / "gone.py").write_text(FIXABLE)
    fix_pending = cli.fix_pending

    def fix_then_remove(data, display_path, codes, settings):
        outcome = fix_pending(data, display_path, codes, settings)
        (project / "gone.py").unlink(missing_ok=True)
        return outcome

    monkeypatch.setattr(cli, "fix_pending", fix_then_remove)
    status, _, err = run(capsys, "fix", "gone.py")
    assert status == 2 and "cannot write " in err and "gone.py: No such file or directory" in err
    assert sorted(path.name for path in project.iterdir()) == ["good.py", "pyproject.toml"]  # not made again


@pytest.mark.parametrize("pyproject, args, message", [
    ("[tool.lint-nograd\n", [], "cannot read pyproject.toml: "),
    ('[tool.lint-nograd]\nextend-exclude = ["build", "\\\\"]\n', [],
     "`extend-exclude` in [tool.lint-nograd] of pyproject.toml: `\\` is not a valid glob"),
    ('[tool.lint-nograd]\nper-file-ignores = { "!tests\\\\" = ["NG004"] }\n', [],
     "`per-file-ignores` in [tool.lint-nograd] of pyproject.toml: `tests\\` is not a valid glob"),
    ("[tool.lint-nograd]\n", ["--extend-exclude", "a,!"], "argument --extend-exclude: `!` is not a valid glob"),
], ids=["not TOML", "an exclude glob", "a per-file glob", "a glob on the command line"])
def test_a_broken_configuration_is_a_usage_error(project, capsys, pyproject, args, message):
    (project / "pyproject.toml").write_text(pyproject)
    status, out, err = run(capsys, "check", *args)
    assert (status, out) == (2, "") and message in err


def test_a_gitignore_pattern_git_cannot_read_is_skipped_as_git_does(project, capsys):
    (project / "sub").mkdir()
    (project / "sub" / ".gitignore").write_text("!\nignored.py\nbroken\\\n")
    (project / "sub" / "ignored.py").write_text(FIXABLE)
    status, out, err = run(capsys, "check")
    assert (status, err) == (1, "") and GOOD_FINDING in out and "ignored.py" not in out


def test_an_internal_error_in_one_file_names_it_and_the_run_goes_on(project, capsys, monkeypatch):
    from lint_nograd import fix

    real = fix.fix_source

    def fails_on_bad(data, codes, display_path, settings):
        if display_path == "bad.py":
            raise RuntimeError("unexpected")
        return real(data, codes, display_path, settings)

    (project / "bad.py").write_text(FIXABLE)
    monkeypatch.setattr(fix, "fix_source", fails_on_bad)
    status, _, err = run(capsys, "fix")
    assert status == 2
    assert err.endswith("lint-nograd: error: failed to fix bad.py: internal error: RuntimeError: unexpected\n")
    assert (project / "bad.py").read_text() == FIXABLE and (project / "good.py").read_text() == FIXED


def test_a_damaged_cache_is_started_afresh(project, capsys):
    (project / ".lint_nograd_cache").mkdir()
    (project / ".lint_nograd_cache" / "findings.json").write_text("[]")
    status = cli.main(["check", "--output-format", "concise"])
    out, err = capsys.readouterr()
    assert (status, err) == (1, "") and GOOD_FINDING in out


# -- writing ------------------------------------------------------------------------------------

@symlinks
def test_a_link_is_written_through_and_stays_a_link(project, capsys):
    (project / "real").mkdir()
    (project / "real" / "m.py").write_text(FIXABLE)
    (project / "link.py").symlink_to(project / "real" / "m.py")
    status, _, err = run(capsys, "fix")  # finds the file under both names
    assert status == 0 and "error" not in err
    assert (project / "link.py").is_symlink() and (project / "real" / "m.py").read_text() == FIXED


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root may give a file away")
def test_the_owner_is_kept(project, capsys):
    path = project / "m.py"
    path.write_text(FIXABLE)
    os.chown(path, 4321, 4321)
    assert run(capsys, "fix", "m.py")[0] == 0
    assert path.read_text() == FIXED and (path.stat().st_uid, path.stat().st_gid) == (4321, 4321)


def test_an_interrupted_write_leaves_the_file_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "m.py"
    path.write_text(FIXABLE)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(write.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        replace_file(path, FIXED.encode(), FIXABLE.encode())
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"] and path.read_text() == FIXABLE


# -- notebooks ----------------------------------------------------------------------------------

def notebook(*sources: list[str], bom: bytes = b"") -> bytes:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{number}", "metadata": {}, "outputs": [],
              "source": source} for number, source in enumerate(sources)]
    document = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return bom + (json.dumps(document, indent=1) + "\n").encode()


FIXABLE_LINES = FIXABLE.splitlines(keepends=True)
FIXED_LINES = FIXED.splitlines(keepends=True)
MAGICS = ["%matplotlib inline\n", "\n", "  \n", "!ls\n", "\n", "x = 1"]
NOTEBOOKS = {
    "a BOM": (notebook(FIXABLE_LINES, bom=b"\xef\xbb\xbf"), notebook(FIXED_LINES, bom=b"\xef\xbb\xbf")),
    "blank lines before a magic": (notebook(MAGICS, FIXABLE_LINES),
                                   notebook(["from lint_nograd import stop_gradient\n", *MAGICS],
                                            FIXED_LINES[:2] + FIXED_LINES[3:])),  # the import joins the first cell
    "a line spelling the cell marker": (notebook(["# lint-nograd: cell 1\n", *FIXABLE_LINES], ["x = 1"]),
                                        notebook(["# lint-nograd: cell 1\n", *FIXED_LINES], ["x = 1"])),
}


@pytest.mark.parametrize("data, expected", NOTEBOOKS.values(), ids=NOTEBOOKS.keys())
def test_notebook_layouts_are_kept(project, capsys, data, expected):
    path = project / "nb.ipynb"
    path.write_bytes(data)
    status, out, err = run(capsys, "fix", "nb.ipynb")
    assert (status, err) == (0, "Fixed 1 region in 1 file.\nAdded `from lint_nograd import stop_gradient` to 1 file.\n")
    assert path.read_bytes() == expected


def test_a_notebook_cell_that_is_not_text_is_an_ng000(project, capsys):
    (project / "nb.ipynb").write_bytes(notebook([1, 2], FIXABLE_LINES))
    status, out, err = run(capsys, "check", "nb.ipynb")
    assert (status, err) == (1, "") and "nb.ipynb:1:1: NG000 not a Jupyter notebook: a cell's source is not text" in out
