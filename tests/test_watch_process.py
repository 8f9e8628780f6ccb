"""The watcher in the ways a program runs: forked children report their own findings, a symlinked
script and a folder with `__main__.py` run as under `python`, and `LINT_NOGRAD_WATCH=1` costs a
process that never imports torch nothing (and stays silent once lint_nograd is gone)."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from test_watch import ROOT, rows, run, write

FORKS = """\
    import multiprocessing, os
    import torch, torch.func as tf

    def f(x):
        with torch.no_grad():  # parent region
            s = x * x
        return s * x

    def g(x):
        with torch.no_grad():  # child region
            s = x * x
        return s * x

    def h(x):
        with torch.no_grad():  # multiprocessing region
            s = x * x
        return s * x

    def in_child(function):
        print(function.__name__, tf.jvp(function, (torch.tensor(1.5),), (torch.tensor(1.0),))[1].item(), flush=True)

    in_child(f)
    pid = os.fork()
    if pid == 0:
        in_child(g)
        os._exit(0)
    os.waitpid(pid, 0)
    child = multiprocessing.get_context("fork").Process(target=in_child, args=(h,))
    child.start(); child.join()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_each_forked_process_writes_its_own_report(tmp_path):
    pytest.importorskip("torch")
    script = write(tmp_path, "program.py", FORKS)
    done = run([sys.executable, "program.py"], tmp_path, {
        "LINT_NOGRAD_WATCH": "1", "LINT_NOGRAD_WATCH_FORMAT": "json",
        "LINT_NOGRAD_WATCH_OUTPUT": str(tmp_path / "report-{pid}.json")})
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split("\n")) == ["", "f 6.75", "g 6.75", "h 6.75"]  # forward mode ignored each region
    at = rows(script)
    reports = [json.loads(path.read_text()) for path in tmp_path.glob("report-*.json")]
    assert sorted([d["location"]["row"] for d in report] for report in reports) == sorted(
        [[at["parent region"]], [at["child region"]], [at["multiprocessing region"]]])


def test_a_symlinked_script_and_a_folder_run_as_under_python(tmp_path):
    write(tmp_path, "real/helper.py", "NAME = 'helper'\n")
    write(tmp_path, "real/script.py", """\
        import os, sys
        import helper
        print(helper.NAME, sys.argv, os.path.basename(sys.path[0]), __file__, __name__)
    """)
    (tmp_path / "linked.py").symlink_to(tmp_path / "real" / "script.py")
    write(tmp_path, "appdir/__main__.py", """\
        import sys
        import sibling
        print(sibling.NAME, sys.argv, sys.path[0], __file__, __name__, __spec__.name)
    """)
    write(tmp_path, "appdir/sibling.py", "NAME = 'sibling'\n")
    for program in (["linked.py", "a"], ["appdir", "-b"], ["./appdir"]):
        plain = run([sys.executable, *program], tmp_path)
        watched = run([sys.executable, "-m", "lint_nograd.watch", *program], tmp_path)
        assert plain.returncode == 0 and plain.stdout, plain.stderr
        assert (watched.stdout, watched.stderr, watched.returncode) == (plain.stdout, plain.stderr, plain.returncode)


def _modules(env: dict) -> list[str]:
    listed = run([sys.executable, "-c", "import sys; print(sorted(sys.modules))"], ROOT, env)
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    return json.loads(listed.stdout.replace("'", '"'))


def test_the_startup_hook_costs_a_process_without_torch_nothing_and_writes_no_report(tmp_path):
    added = set(_modules({"LINT_NOGRAD_WATCH": "1"})) - set(_modules({}))
    assert added <= {"__future__", "atexit", "lint_nograd", "lint_nograd.watch", "lint_nograd.watch.startup"}
    for output_format in ("text", "json", "sarif"):
        done = run([sys.executable, "-c", "print('no torch')"], tmp_path, {
            "LINT_NOGRAD_WATCH": "1", "LINT_NOGRAD_WATCH_FORMAT": output_format})
        assert (done.returncode, done.stdout, done.stderr) == (0, "no torch\n", "")
    run([sys.executable, "-c", "print('no torch')"], tmp_path, {
        "LINT_NOGRAD_WATCH": "1", "LINT_NOGRAD_WATCH_OUTPUT": str(tmp_path / "{pid}.json")})
    assert list(tmp_path.glob("*.json")) == []


def test_the_startup_hook_is_silent_where_lint_nograd_cannot_be_imported(tmp_path):
    """The hook as site runs it, in an interpreter that has no lint_nograd (it was uninstalled)."""
    shutil.copy(ROOT / "lint_nograd" / "watch" / "lint_nograd_watch.pth", tmp_path)
    base = getattr(sys, "_base_executable", sys.executable)
    check = f"import site, sys; site.addsitedir({str(tmp_path)!r}); print('lint_nograd' in sys.modules)"
    done = run([base, "-I", "-c", check], tmp_path, {"LINT_NOGRAD_WATCH": "1"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "False\n", "")
    # and where it can, the same file turns the watcher on
    on = run([sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); " + check.replace(
        "'lint_nograd' in sys.modules", "sys.modules['lint_nograd.watch.startup']._started is not None")],
        tmp_path, {"LINT_NOGRAD_WATCH": "1"})
    assert (on.returncode, on.stdout, on.stderr) == (0, "True\n", "")
