"""The project as Python sees it: module names from the nearest import root (`src` layout), the
first root winning when two hold one module, and the project root and settings found above the
paths checked, never from the working directory."""
from __future__ import annotations

import functools
import os
import re
import shutil
from pathlib import Path

from lint_nograd import cli
from lint_nograd.project.linking import module_name_and_root
from lint_nograd.run.config import import_roots

PROJECTS = Path(__file__).parent / "fixtures" / "projects"


def check(cwd: Path, args: list[str], capsys) -> tuple[str, int]:
    old = Path.cwd()
    os.chdir(cwd)
    try:
        status = cli.main(["check", "--no-cache", "--output-format", "concise", *args])
    finally:
        os.chdir(old)
    out, _ = capsys.readouterr()
    return out, status


def test_a_file_under_src_is_named_from_src(tmp_path):
    roots = [tmp_path, tmp_path / "src"]
    assert module_name_and_root(tmp_path / "src" / "pkg" / "model.py", roots) == ("pkg.model", False, 1)
    assert module_name_and_root(tmp_path / "pkg" / "__init__.py", roots) == ("pkg", True, 0)
    assert module_name_and_root(tmp_path.parent / "elsewhere.py", roots)[2] == 2


def test_the_first_root_wins_when_two_hold_one_module(tmp_path, capsys):
    """`pkg/model.py` at the top and in `src/`: `from pkg.model import loss` is the first one,
    as on `sys.path = [".", "src"]`."""
    project = tmp_path / "project"
    shutil.copytree(PROJECTS / "src_layout", project)
    shutil.copytree(project / "src" / "pkg", project / "pkg")
    (project / "pkg" / "train.py").unlink()
    (project / "pkg" / "model.py").write_text("def loss(x):\n    return (x ** 3).sum()\n")
    out, status = check(project, ["src/pkg/train.py"], capsys)
    assert (out, status) == ("No findings.\n", 0)
    (project / "pkg" / "model.py").unlink()
    (project / "pkg" / "__init__.py").unlink()
    out, status = check(project, ["src/pkg/train.py"], capsys)
    assert "NG004 `jacfwd(...)` reaches the `no_grad` region of `loss`" in out and status == 1


def test_the_same_findings_from_inside_another_project(tmp_path, capsys):
    project = tmp_path / "project"
    shutil.copytree(PROJECTS / "cross_module", project)
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text("[tool.lint-nograd]\nignore = [\"NG004\"]\n")
    expected, status = check(project, ["pkg/train.py", "pkg/forms.py"], capsys)
    assert status == 1 and "NG004" in expected
    got, _ = check(other, ["../project/pkg/train.py", "../project/pkg/forms.py"], capsys)
    shown = got.partition("pkg/")[0]  # how paths outside the working directory are shown
    # a message names the region's place shorter when a long path would not fit in 100 characters
    short = functools.partial(re.sub, r"\((?:[^()\s]*/)?([\w.]+\.py:\d+)\)", r"(\1)")
    assert short(got) == short(expected.replace("pkg/", f"{shown}pkg/")) and shown.rstrip("/").endswith("project")


def test_settings_files_at_a_project_root_are_read_like_ruff_toml(tmp_path, capsys):
    project = tmp_path / "project"
    shutil.copytree(PROJECTS / "cross_module", project)
    everything, _ = check(project, ["pkg"], capsys)
    assert "NG006" in everything
    for name in ("lint-nograd.toml", ".lint-nograd.toml"):
        (project / name).write_text("ignore = [\"NG006\"]\ntorch-version = \"2.13\"\n")
        got, _ = check(project / "pkg", ["."], capsys)
        assert "NG006" not in got and "NG004" in got, name
        (project / name).unlink()


def test_a_config_in_a_subfolder_keeps_the_import_roots_of_the_project(tmp_path, capsys):
    project = tmp_path / "project"
    shutil.copytree(PROJECTS / "cross_module", project)
    (project / "settings").mkdir()
    (project / "settings" / "lint-nograd.toml").write_text("torch-version = \"2.13\"\n")
    expected, _ = check(project, ["pkg/train.py"], capsys)
    got, _ = check(project, ["--config", "settings/lint-nograd.toml", "pkg/train.py"], capsys)
    assert got == expected and "reaches the `no_grad` region of `loss`" in got


def test_each_path_is_checked_in_its_own_project(tmp_path, capsys):
    """Two projects that both name their package `pkg`, one with `src/`, the other ignoring NG004,
    checked in one run from a third folder: each file links within its own project (the two
    `pkg.model` modules never mix) and takes its own project's settings, as ruff finds them."""
    first, second, elsewhere = tmp_path / "first", tmp_path / "second", tmp_path / "elsewhere"
    shutil.copytree(PROJECTS / "src_layout", first)
    shutil.copytree(PROJECTS / "cross_module", second)
    elsewhere.mkdir()
    alone = {name: check(root, [path], capsys)[0]
             for name, root, path in (("first", first, "src/pkg/train.py"), ("second", second, "pkg/train.py"))}
    assert "NG004" in alone["first"] and "NG004" in alone["second"]
    given = ["../first/src/pkg/train.py", "../second/pkg/train.py"]
    together, status = check(elsewhere, given, capsys)
    findings = [line for line in together.splitlines() if " NG0" in line]
    assert status == 1 and findings == [line.replace("src/", "../first/src/", 1) for line in alone["first"].splitlines()
                                        if " NG0" in line] + [line.replace("pkg/", "../second/pkg/", 1)
                                                             for line in alone["second"].splitlines() if " NG0" in line]
    (second / "pyproject.toml").write_text("[tool.lint-nograd]\ntorch-version = \"2.13\"\nignore = [\"NG004\"]\n")
    together, _ = check(elsewhere, given, capsys)
    codes = {(line.partition("/")[2].partition("/")[0], line.split()[1]) for line in together.splitlines()
             if " NG0" in line}
    assert ("first", "NG004") in codes and ("second", "NG005") in codes and ("second", "NG004") not in codes


def test_a_project_below_the_folder_checked_is_a_project_of_its_own(tmp_path, capsys):
    """`check .` at the top of a repository that holds a package with its own pyproject.toml: that
    package's files take its settings and import roots (its `src/`), and it is linked on its own."""
    top = tmp_path / "repo"
    shutil.copytree(PROJECTS / "cross_module", top)
    shutil.copytree(PROJECTS / "src_layout", top / "packages" / "inner")
    (top / "packages" / "inner" / "pyproject.toml").write_text(
        "[tool.lint-nograd]\ntorch-version = \"2.13\"\nignore = [\"NG006\"]\n")
    alone, _ = check(top / "packages" / "inner", ["."], capsys)
    outer, _ = check(top, ["pkg"], capsys)
    both, status = check(top, ["."], capsys)
    inner = [line.replace("src/", "packages/inner/src/", 1) for line in alone.splitlines() if " NG0" in line]
    assert inner and status == 1
    assert sorted(line for line in both.splitlines() if " NG0" in line) == sorted(
        [line for line in outer.splitlines() if " NG0" in line] + inner)


def test_a_package_given_alone_is_named_as_python_imports_it(tmp_path, capsys):
    """`pkg` (a folder with `__init__.py`) checked alone, with no settings file above it, from its
    parent or from inside: `from pkg.model import loss` in `pkg/train.py` is still `pkg/model.py`,
    so its regions are reached as when the whole project is checked. A folder that is no package
    keeps naming its modules from itself (`import model` in a script beside it)."""
    project = tmp_path / "project"
    shutil.copytree(PROJECTS / "cross_module", project)
    (project / "pyproject.toml").unlink()
    expected, status = check(project, ["--isolated", "."], capsys)
    assert status == 1 and expected.count("NG004") == 2
    assert check(project, ["--isolated", "pkg"], capsys)[0] == expected
    assert check(project / "pkg", ["--isolated", "."], capsys)[0] == expected.replace("pkg/", "")
    assert check(tmp_path, ["--isolated", "project/pkg"], capsys)[0] == expected.replace("pkg/", "project/pkg/")
    odd = project / "pkg-v2"  # a name Python cannot import: its modules are named from the folder itself
    shutil.copytree(project / "pkg", odd)
    assert import_roots(odd, (".", "src")) == [odd, odd / "src"]
    assert import_roots(project / "pkg", (".", "src")) == [project, project / "pkg" / "src"]
    (project / "pkg" / "__init__.py").unlink()  # scripts: `from pkg.model import ...` names nothing here
    scripts, _ = check(project / "pkg", ["--isolated", "."], capsys)
    assert "NG004" not in scripts and "NG005" in scripts


def test_a_script_inside_a_package_imports_beside_itself(tmp_path, capsys):
    """`from nested.ops import scale` in `app/main.py`, `app` a package checked alone: the name no
    import root holds is `app.nested.ops`, as when `main.py` runs as a script from its folder, so
    the region there is reached; an import that names nothing beside the file stays unresolved."""
    app = tmp_path / "app"
    (app / "nested").mkdir(parents=True)
    for folder in (app, app / "nested"):
        (folder / "__init__.py").write_text("")
    (app / "nested" / "ops.py").write_text(
        "import torch\n\n\ndef scale(x):\n    with torch.no_grad():\n        s = x.norm()\n    return x * s\n")
    (app / "main.py").write_text(
        "from torch.func import jacfwd\n\nfrom nested.ops import scale\n\n\ndef run(x):\n    return jacfwd(scale)(x)\n")
    found, status = check(app, ["--isolated", "."], capsys)
    assert status == 1 and found.count("NG004") == 1 and "nested/ops.py:5" in found
    (app / "main.py").write_text(
        "from torch.func import jacfwd\n\nfrom elsewhere.ops import scale\n\n\ndef run(x):\n    return jacfwd(scale)(x)\n")
    assert "NG004" not in check(app, ["--isolated", "."], capsys)[0]
