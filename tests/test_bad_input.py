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
from dataclasses import replace

import pytest
from cli_sources import DECLARES_LINT_NOGRAD
from deadline import deadline
from lint_nograd import cli
from lint_nograd.fix import write
from lint_nograd.fix.write import replace_file
from test_cli_fix import FIXABLE, FIXED

REGION = b"import torch\nwith torch.no_grad():\n    y = x * 2\ny.backward()\n"  # passes the gate
GOOD_FINDING = "good.py:6:10: NG004 [*]"
symlinks = pytest.mark.skipif(os.name == "nt", reason="POSIX symlinks")


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(DECLARES_LINT_NOGRAD)
    (tmp_path / "good.py").write_text(FIXABLE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main([*args, "--no-cache", "--output-format", "concise"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


def related_places(capsys, *args: str) -> list[list[tuple[int | None, int]]]:
    """The (cell, row) of the places each finding points at, from JSON output."""
    cli.main(["check", *args, "--no-cache", "--output-format", "json"])
    return [[(r["cell"], r["location"]["row"]) for r in d["related"]] for d in json.loads(capsys.readouterr().out)]


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
        b"import torch\r\nfrom lint_nograd import stop_gradient\r\nfrom torch.func import jacfwd\n\r\n\rdef f(x):\r\n"
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
                               "m.py"], capture_output=True, text=True, cwd=tmp_path)
        help = " ".join(line.strip() for line in done.stdout.splitlines() if not line.startswith("m.py"))
        assert done.returncode == 1 and "(no fix: the region's code is nested too deeply)" in help
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
    assert run(capsys, "check", "empty.ipynb")[:2] == (0, "No findings.\n")


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

    def fix_then_remove(data, display_path, codes, reach, settings, *rest):
        outcome = fix_pending(data, display_path, codes, reach, settings, *rest)
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
    from lint_nograd.fix import rewrite

    real = rewrite.fix_source

    def fails_on_bad(data, codes, display_path, settings, reach=None, torch_version=None):
        if display_path == "bad.py":
            raise RuntimeError("unexpected")
        return real(data, codes, display_path, settings, reach, torch_version)

    (project / "bad.py").write_text(FIXABLE)
    monkeypatch.setattr(rewrite, "fix_source", fails_on_bad)
    status, _, err = run(capsys, "fix")
    assert status == 2
    assert err.endswith("lint-nograd: error: failed to fix bad.py: internal error: RuntimeError: unexpected\n")
    assert (project / "bad.py").read_text() == FIXABLE and (project / "good.py").read_text() == FIXED


def test_a_damaged_cache_is_started_afresh(project, capsys, user_cache):
    (user_cache / project.name).mkdir()
    (user_cache / project.name / "findings.json").write_text("[]")
    status = cli.main(["check", "--output-format", "concise"])
    out, err = capsys.readouterr()
    assert status == 1 and GOOD_FINDING in out
    assert err == (f"lint-nograd: warning: cannot use the cache {user_cache / project.name / 'findings.json'}: "
                   "not a cache of this tool; starting afresh\n")
    assert cli.main(["check", "--output-format", "concise"]) == 1 and capsys.readouterr()[1] == ""  # rebuilt


# -- what is not a regular file: a FIFO would block a plain read forever, a device never ends ---
# These run the command in a child process with a timeout, and a memory limit where there is one.

posix = pytest.mark.skipif(os.name != "posix", reason="FIFOs and devices")


def limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))
    except (ImportError, ValueError, OSError):
        pass


def run_child(folder, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "lint_nograd", *args, "--output-format", "concise"],
                          cwd=folder, capture_output=True, text=True, timeout=60, preexec_fn=limit_memory)
    assert "Traceback" not in done.stdout + done.stderr
    return done


@posix
@pytest.mark.parametrize("command", ["check", "fix"])
@pytest.mark.parametrize("kind, make", [
    ("a FIFO", lambda path: os.mkfifo(path)),
    ("a character device", lambda path: path.symlink_to("/dev/zero")),
    ("a character device", lambda path: path.symlink_to("/dev/urandom")),
], ids=["fifo", "dev-zero", "dev-urandom"])
def test_a_named_file_that_is_not_regular_is_an_error(project, command, kind, make):
    make(project / "x.py")
    done = run_child(project, command, "--no-cache", "x.py", "good.py")
    assert done.returncode == 2 and (command == "fix" or GOOD_FINDING in done.stdout)
    assert done.stderr.endswith(f"lint-nograd: error: cannot read x.py: not a regular file ({kind})\n")
    assert (project / "good.py").read_text() == (FIXED if command == "fix" else FIXABLE)


@posix
def test_a_walk_passes_over_what_is_not_a_regular_file(project):
    os.mkfifo(project / "x.py")
    (project / "z.py").symlink_to("/dev/zero")
    done = run_child(project, "check", "--no-cache")
    assert (done.returncode, done.stderr) == (1, "") and GOOD_FINDING in done.stdout


@posix
def test_a_config_that_is_a_fifo_is_an_error(project):
    os.mkfifo(project / "settings.toml")
    done = run_child(project, "check", "--config", "settings.toml")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "lint-nograd: error: cannot read settings.toml: not a regular file (a FIFO)\n"


@posix
@pytest.mark.parametrize("kind, make", [
    ("not a regular file (a FIFO)", lambda path: os.mkfifo(path)),
    ("a symbolic link, which is not followed here", lambda path: path.symlink_to("/dev/zero")),
    ("a symbolic link, which is not followed here", lambda path: path.symlink_to("/dev/urandom")),
], ids=["fifo", "dev-zero", "dev-urandom"])
def test_a_cache_file_that_is_not_regular_is_a_warning_and_rebuilt(project, kind, make, user_cache):
    (user_cache / project.name).mkdir()
    make(user_cache / project.name / "findings.json")
    done = run_child(project, "check")
    assert done.returncode == 1 and GOOD_FINDING in done.stdout
    assert done.stderr == (f"lint-nograd: warning: cannot use the cache {user_cache / project.name / 'findings.json'}: "
                           f"{kind}; starting afresh\n")
    assert (user_cache / project.name / "findings.json").is_file()  # a regular file now
    again = run_child(project, "check")
    assert (again.returncode, again.stderr, again.stdout) == (1, "", done.stdout)


# -- what cannot be read while walking: a warning, and the summary says so -------------------------

def test_an_unreadable_folder_is_a_warning_and_the_summary_says_so(project, capsys, monkeypatch):
    (project / "locked").mkdir()
    (project / "locked" / "m.py").write_text(FIXABLE)
    scandir = os.scandir

    def refused(path):  # root may read every folder: refuse this one as a permission would
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refused)
    status, out, err = run(capsys, "check")
    assert status == 1 and out.startswith(GOOD_FINDING) and "m.py" not in out
    assert out.endswith("Part of the tree could not be read (see 1 warning).\n")
    assert err == "lint-nograd: warning: cannot read folder locked: Permission denied; its files are not checked\n"


@posix
def test_an_unreadable_gitignore_is_a_warning_and_the_summary_says_so(project, capsys):
    (project / "sub").mkdir()
    (project / "sub" / "m.py").write_text(FIXABLE)
    os.mkfifo(project / "sub" / ".gitignore")
    with deadline():
        status, out, err = run(capsys, "check")
    assert status == 1 and "sub/m.py:6:10: NG004" in out  # its patterns could not be applied
    assert out.endswith("Found 2 errors.\n[*] 2 fixable with `lint-nograd fix`.\n"
                        "Part of the tree could not be read (see 1 warning).\n")
    assert err == ("lint-nograd: warning: cannot read sub/.gitignore: not a regular file (a FIFO); "
                   "its patterns are not applied\n")
    with deadline():
        assert cli.main(["check", "--no-cache", "--output-format", "json"]) == 1
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == 2 and "sub/.gitignore" in err  # JSON stays JSON


# -- writing ------------------------------------------------------------------------------------

@symlinks
def test_fix_does_not_follow_a_folder_link_out_of_the_tree(project, capsys):
    outside = project.parent / f"{project.name}-outside"
    outside.mkdir()
    (outside / "m.py").write_text(FIXABLE)
    (project / "linked").symlink_to(outside, target_is_directory=True)
    (project / "inside").symlink_to(project / "pkg", target_is_directory=True)
    (project / "pkg").mkdir()
    (project / "pkg" / "m.py").write_text(FIXABLE)
    status, _, err = run(capsys, "fix", ".")
    assert (status, err.splitlines()[0]) == (0, "Fixed 2 regions in 2 files.")  # good.py, pkg/m.py (once, under two names)
    assert (outside / "m.py").read_text() == FIXABLE and (project / "pkg" / "m.py").read_text() == FIXED
    status, out, _ = run(capsys, "check", "linked/m.py")  # named, it is checked where it leads
    assert status == 1 and out.startswith("linked/m.py:6:10: NG004")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("full", [("stdout", "stderr"), ("stdout",), ("stderr",)], ids=["both", "stdout", "stderr"])
def test_a_report_that_cannot_be_written_is_a_failure(project, full):
    """The files are fixed, but a caller must not take a lost report for a clean run."""
    for command in ("fix", "check"):
        with open("/dev/full", "w") as device:
            streams = {name: device if name in full else subprocess.PIPE for name in ("stdout", "stderr")}
            done = subprocess.run([sys.executable, "-m", "lint_nograd", command, "--no-cache"], cwd=project,
                                  text=True, timeout=60, **streams)
        lost = command == "fix" or "stdout" in full  # fix writes to both; a clean check to stdout alone
        assert done.returncode == (2 if lost else 0) and (project / "good.py").read_text() == FIXED
        if full == ("stdout",):
            assert done.stderr.endswith("lint-nograd: error: cannot write the report: No space left on device\n")


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


@posix
@pytest.mark.parametrize("make", [os.mkfifo, lambda path: path.symlink_to("/dev/zero")], ids=["fifo", "dev-zero"])
def test_a_file_replaced_by_a_fifo_or_a_device_before_it_is_written_is_left_alone(tmp_path, make):
    path = tmp_path / "m.py"
    make(path)
    code = ("import sys\nfrom pathlib import Path\nfrom lint_nograd.fix.write import WriteError, replace_file\n"
            "try:\n    replace_file(Path(sys.argv[1]), b'new', b'old', 'm.py')\n"
            "except WriteError as error:\n    print(error)\n")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60,
                          preexec_fn=limit_memory)
    assert (done.returncode, done.stdout) == (0, "m.py is no longer a regular file; left as it is\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


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
                                            FIXED_LINES[:1] + FIXED_LINES[2:])),  # the import joins the first cell
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


def test_a_notebook_with_cr_line_endings(project, capsys):
    """Python splits lines at a lone CR too: rows count as it does, and the cells keep their breaks."""
    cr = FIXABLE.replace("\n", "\r")
    (project / "nb.ipynb").write_bytes(notebook(["x = 1\r", "y = 2\r"], cr))
    status, out, err = run(capsys, "check", "nb.ipynb")
    assert (status, err) == (1, "") and out.startswith(
        "nb.ipynb:cell 2:6:10: NG004 [*] `jacfwd(...)` ignores this `no_grad` region")
    assert related_places(capsys, "nb.ipynb") == [[(2, 11)]]  # the call that reaches it
    assert run(capsys, "fix", "nb.ipynb")[0] == 0
    assert (project / "nb.ipynb").read_bytes() == notebook(  # new lines take the first line break
        ["from lint_nograd import stop_gradient\r", "\r", "x = 1\r", "y = 2\r"],  # a blank line, as isort wants
        FIXED.replace("from lint_nograd import stop_gradient\n", "").replace("\n", "\r"))


def test_a_finding_in_a_later_cell_names_its_cell_and_row(project, capsys):
    cells = [["x = (1,\r", "2)\r", "%time x\n"], ["y = 1\n"], FIXABLE_LINES]
    (project / "nb.ipynb").write_bytes(notebook(*cells))
    status, out, _ = run(capsys, "check", "nb.ipynb")
    assert status == 1 and out.startswith("nb.ipynb:cell 3:6:10: NG004 [*] `jacfwd(...)` ignores this")
    assert related_places(capsys, "nb.ipynb") == [[(3, 11)]]


@pytest.mark.parametrize("line_break", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_a_notebook_keeps_its_line_breaks_and_magics(project, capsys, line_break):
    cells = [["%matplotlib inline\n", "import torch\n"], ["!ls \\\n", "  -l\n", "x = 1"], FIXABLE_LINES,
             ["%%bash\n", "echo hi\n"]]
    before = [[line.replace("\n", line_break) for line in lines] for lines in cells]
    (project / "nb.ipynb").write_bytes(notebook(*before))
    assert run(capsys, "fix", "nb.ipynb")[0] == 0
    after = json.loads((project / "nb.ipynb").read_text())["cells"]
    assert after[0]["source"] == ["from lint_nograd import stop_gradient" + line_break, *before[0]]
    assert after[1]["source"] == before[1] and after[3]["source"] == before[3]
    assert "".join(after[2]["source"]) == FIXED.replace("from lint_nograd import stop_gradient\n", "").replace(
        "\n", line_break)


def test_the_findings_left_by_fix_name_their_cell_and_row(project, capsys):
    """What `fix` reports counts in the notebook it wrote: an import added, regions shortened."""
    left = ["from torch.func import grad\n", "with torch.no_grad():\n", "    g = grad(f)(x)\n"]
    imported = ["from lint_nograd import stop_gradient\n", *FIXABLE_LINES]  # no import to add: a line less
    (project / "nb.ipynb").write_bytes(notebook(imported, ["y = 1\n"], left))
    status, out, _ = run(capsys, "fix", "nb.ipynb")
    assert status == 0 and out.startswith("nb.ipynb:cell 3:3:9: NG001 `grad(...)` differentiates as if the "
                                          "`no_grad` region (cell 3, line 2) were not there")  # a note
    assert related_places(capsys, "nb.ipynb") == [[(3, 2)]]


def test_a_notebook_nested_too_deeply_is_an_ng000(project, capsys):
    data = b'{"cells": [], "metadata": {"text": ' + json.dumps(FIXABLE).encode() + b', "deep": ' + \
        b"[" * 100_000 + b"]" * 100_000 + b"}}"  # the text passes the gate
    (project / "nb.ipynb").write_bytes(data)
    for command in ("check", "fix"):
        status, out, err = run(capsys, command, "nb.ipynb")
        assert (status, err) == (1, "" if command == "check" else "Nothing to fix: 1 finding has no fix.\n")
        assert out.startswith("nb.ipynb:1:1: NG000 cannot read the notebook: its JSON is nested too deeply")
    assert (project / "nb.ipynb").read_bytes() == data


def test_a_notebook_of_format_3_is_not_supported(project, capsys):
    document = {"metadata": {}, "nbformat": 3, "nbformat_minor": 0, "worksheets": [
        {"cells": [{"cell_type": "code", "input": FIXABLE, "language": "python", "metadata": {}, "outputs": []}],
         "metadata": {}}]}
    (project / "nb.ipynb").write_text(json.dumps(document))
    status, out, err = run(capsys, "check", "nb.ipynb")
    assert (status, err) == (1, "") and out.startswith(
        "nb.ipynb:1:1: NG000 notebook format 3 is not supported, only format 4 "
        "(`jupyter nbconvert --to notebook --inplace` converts it)")


def test_ipython_syntax_counts_only_at_the_start_of_a_logical_line(project, capsys):
    """`% 3)` continues a statement: it is Python, not a magic, and the cell parses."""
    (project / "nb.ipynb").write_bytes(notebook(['msg = ("%d"\n', "% 3)\n"], FIXABLE_LINES))
    status, out, err = run(capsys, "check", "nb.ipynb")
    assert (status, err) == (1, "") and out.startswith("nb.ipynb:cell 2:6:10: NG004")
    assert "NG000" not in out


@pytest.mark.parametrize("lines, masked", [
    (['msg = ("%d"', "% 3)"], []),
    (["x = [1,", "  !2]"], []),  # `!2` would be a shell escape at the start of a line
    (['s = """', "!not a command", '%not a magic"""', "%time x"], ["%time x"]),
    (["s = 'a\\", "!b'", "!ls"], ["!ls"]),  # a backslash carries the string over
    (["x = 1 + \\", "  % 2", "%who"], ["%who"]),
    (["!pip install \\", "  numpy", "x = 1"], ["!pip install \\", "  numpy"]),
    (["if x:", "    !ls", "    files = !ls"], ["    !ls", "    files = !ls"]),
    (["x = (1  # (", ")", "!ls"], ["!ls"]),  # a bracket in a comment is no bracket
    (["x = '('", "!ls"], ["!ls"]),
    (["x = (", "# lint-nograd: cell 9", ")"], ["# lint-nograd: cell 9"]),  # our marker is never code
])
def test_which_lines_are_ipython_syntax(lines, masked):
    from lint_nograd.run.notebook import Notebook

    read = Notebook.read(notebook([line + "\n" for line in lines]))
    assert read.masked == masked
    assert read.with_source(read.source) == notebook([line + "\n" for line in lines])


def test_rows_count_in_the_source_they_come_from():
    """`fix` reports on the joined source it wrote: an import above the first cell, a line less."""
    from lint_nograd.report.diagnostics import Diagnostic
    from lint_nograd.run.notebook import Notebook

    read = Notebook.read(notebook(["import torch\n", "%time x\n"], ["with torch.no_grad():\n", "    y = 1\n"],
                                  ["z = 2\n"]))
    written = "from lint_nograd import stop_gradient\n" + read.source.replace(
        "with torch.no_grad():\n    y = 1\n", "y = 1\n")
    finding = Diagnostic("NG001", "see line 10", "nb.ipynb.py", 10, 1, 10, 2, source_line="z = 2")
    located = read.locate(finding, written)
    assert (located.cell, located.row, located.message) == (3, 1, "see cell 3, line 1")
    first = replace(finding, row=1, end_row=3, message="line 4", source_line="from lint_nograd import stop_gradient")
    located = read.locate(first, written)  # the import joins the top of the first cell
    assert (located.cell, located.row, located.end_row, located.message) == (1, 1, 2, "cell 1, line 3")
    masked = replace(finding, row=4, end_row=4, source_line=written.splitlines()[3])
    assert read.locate(masked, written).source_line == "%time x"
    assert read.locate(replace(finding, row=6, end_row=6)).cell == 2  # in the source as read: `with ...`
