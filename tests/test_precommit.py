"""The real pre-commit runs the hooks of `.pre-commit-hooks.yaml` in new git repositories.

pre-commit installs hooks from a commit, so the working tree as it is now (tracked and untracked
files) is committed in a copy first. Every test shares one pre-commit cache: the hook environment
is built once for the module (a virtualenv with lint-nograd, libcst and pathspec; never torch).
`pre-commit try-repo` is not used: it builds a new environment in a new cache on every call.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]

BAD = ("import torch\n\nw = torch.ones(2, requires_grad=True)\n"
       "with torch.no_grad():\n    loss = (w * 2).sum()\nloss.backward()\n")  # NG003, an error
CLEAN = ("import torch\n\nmodel = torch.nn.Linear(2, 2)\n"
         "with torch.no_grad():\n    y = model(torch.ones(2))\n")
FIXABLE = ("import torch\nfrom torch.func import jacfwd\n\n\ndef f(x):\n    with torch.no_grad():\n"
           "        shift = x.mean()\n    return x - shift\n\n\njacfwd(f)\n")
# Its fix is unsafe: it assumes `teacher(x)` returns a new tensor, which the file cannot show.
UNSAFE_FIXABLE = FIXABLE.replace("def f(x):", "def f(x, teacher=torch.nn.Identity()):").replace(
    "shift = x.mean()", "shift = teacher(x)")
# The `repo: local` configuration the README shows, for lint-nograd installed where pre-commit runs.
LOCAL_CONFIG = """\
repos:
  - repo: local
    hooks:
      - id: lint-nograd
        name: lint-nograd
        entry: lint-nograd check --force-exclude
        language: system
        types_or: [python, jupyter]
        require_serial: true
"""
# The hook repository configuration docs/pre-commit.md shows; the tests put in a clone and its commit.
HOOK_CONFIG = """\
repos:
  - repo: /path/to/lint-nograd
    rev: COMMIT
    hooks:
      - id: lint-nograd
      - id: lint-nograd-fix   # optional: rewrites files; review and `git add` them again
"""


@pytest.fixture(scope="module")
def environment(tmp_path_factory) -> dict[str, str]:
    """Git and pre-commit as on a new machine: no user git config, a pre-commit cache of our own."""
    home = tmp_path_factory.mktemp("pre-commit")
    (home / "gitconfig").write_text("")
    # Drop GIT_DIR, GIT_INDEX_FILE and the like: pytest may itself be running inside a git hook.
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(GIT_CONFIG_GLOBAL=str(home / "gitconfig"), GIT_CONFIG_NOSYSTEM="1",
               PRE_COMMIT_HOME=str(home / "cache"))
    return env


def git(*args: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def new_repository(folder: Path, env: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    git("init", "-q", cwd=folder, env=env)
    git("config", "user.name", "lint-nograd tests", cwd=folder, env=env)
    git("config", "user.email", "tests@lint-nograd.invalid", cwd=folder, env=env)
    return folder


def commit_everything(folder: Path, env: dict[str, str]) -> str:
    git("add", "-A", cwd=folder, env=env)
    git("commit", "-q", "-m", "snapshot", cwd=folder, env=env)
    return git("rev-parse", "HEAD", cwd=folder, env=env).strip()


def pre_commit(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    done.output = done.stdout + done.stderr  # type: ignore[attr-defined]
    return done


@pytest.fixture(scope="module")
def hook_config(tmp_path_factory, environment) -> str:
    """A `.pre-commit-config.yaml` naming both hooks of a committed copy of the working tree."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=CHECKOUT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"{CHECKOUT.name} is not a git checkout: {listed.stderr.strip()}")
    copy = new_repository(tmp_path_factory.mktemp("hook-repository"), environment)
    for name in filter(None, listed.stdout.split("\0")):
        if (CHECKOUT / name).is_file():  # a tracked file deleted in the working tree is skipped
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(CHECKOUT / name, copy / name)
    rev = commit_everything(copy, environment)
    config = HOOK_CONFIG.replace("/path/to/lint-nograd", json.dumps(str(copy))).replace("COMMIT", rev)
    # Build the hook environment once, here, so that each test only runs the hooks.
    warm_up = new_repository(tmp_path_factory.mktemp("warm-up"), environment)
    (warm_up / ".pre-commit-config.yaml").write_text(config)
    installed = pre_commit("install-hooks", cwd=warm_up, env=environment)
    assert installed.returncode == 0, installed.output
    return config


@pytest.fixture
def project(tmp_path, environment, hook_config) -> Path:
    """A git repository whose first commit holds only the pre-commit configuration."""
    folder = new_repository(tmp_path / "project", environment)
    (folder / ".pre-commit-config.yaml").write_text(hook_config)
    commit_everything(folder, environment)
    return folder


def stage(project: Path, env: dict[str, str], **files: str) -> None:
    for name, text in files.items():
        (project / name).write_text(text)
    git("add", *files, cwd=project, env=env)


def test_a_staged_finding_fails_the_hook(project, environment):
    stage(project, environment, **{"train.py": BAD})
    done = pre_commit("run", "lint-nograd", "--color", "never", cwd=project, env=environment)
    assert done.returncode == 1, done.output
    assert "train.py:6:1: NG003" in done.output


def test_a_clean_file_passes(project, environment):
    stage(project, environment, **{"clean.py": CLEAN, "notes.txt": BAD})  # only Python is checked
    done = pre_commit("run", "lint-nograd", "--color", "never", cwd=project, env=environment)
    assert done.returncode == 0, done.output
    assert "Passed" in done.output


def test_a_staged_notebook_is_checked(project, environment):
    notebook = (Path(__file__).parent / "fixtures" / "notebooks" / "meta_learning.ipynb").read_text()
    stage(project, environment, **{"explore.ipynb": notebook})
    done = pre_commit("run", "lint-nograd", "--color", "never", cwd=project, env=environment)
    assert done.returncode == 1, done.output
    assert "explore.ipynb:cell 6:2:13: NG001" in done.output


def test_the_projects_excludes_apply_to_staged_files(project, environment):
    stage(project, environment, **{"pyproject.toml": '[tool.lint-nograd]\nextend-exclude = ["vendored_*.py"]\n',
                                   "vendored_model.py": BAD})
    done = pre_commit("run", "lint-nograd", "--color", "never", cwd=project, env=environment)
    assert done.returncode == 0, done.output


def test_nothing_staged_skips_the_hooks(project, environment):
    done = pre_commit("run", "--color", "never", cwd=project, env=environment)
    assert done.returncode == 0, done.output
    assert "(no files to check)Skipped" in done.output


def test_the_hook_environment_has_no_torch(hook_config, environment):
    """torch is an extra: the environment pre-commit builds holds the checker and what it needs."""
    [package] = Path(environment["PRE_COMMIT_HOME"]).glob("*/py_env-*/**/site-packages/lint_nograd")
    installed = {path.name for path in package.parent.iterdir()}
    assert {"libcst", "pathspec"} <= installed
    assert "torch" not in installed


def test_the_fix_hook_rewrites_a_fixable_file(project, environment, tmp_path):
    fix = [sys.executable, "-m", "lint_nograd", "fix"]
    expected = tmp_path / "expected" / "model.py"
    expected.parent.mkdir()
    expected.write_text(FIXABLE)
    # from a folder of its own: run from this repository, `lint_nograd` would be a first-party import
    direct = subprocess.run([*fix, "--isolated", str(expected)], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert direct.returncode == 0, direct.stdout + direct.stderr
    # a folder that does not declare lint-nograd: the fix adds no dependency on it
    assert ".detach()" in expected.read_text() and "lint_nograd" not in expected.read_text()

    stage(project, environment, **{"model.py": FIXABLE})
    fixed = pre_commit("run", "lint-nograd-fix", "--color", "never", cwd=project, env=environment)
    assert fixed.returncode == 1, fixed.output  # pre-commit fails a hook that changes files
    assert "files were modified by this hook" in fixed.output
    assert (project / "model.py").read_text() == expected.read_text()

    git("add", "model.py", cwd=project, env=environment)
    again = pre_commit("run", "--color", "never", cwd=project, env=environment)
    assert again.returncode == 0, again.output


def test_the_fix_hook_leaves_unsafe_fixes_alone_unless_asked(project, environment):
    stage(project, environment, **{"distil.py": UNSAFE_FIXABLE})
    left = pre_commit("run", "lint-nograd-fix", "--color", "never", cwd=project, env=environment)
    assert left.returncode == 1, left.output  # the finding remains
    assert "files were modified by this hook" not in left.output
    # (the `full` format wraps the summary at 80 columns: compare the words)
    assert ("No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option)."
            in " ".join(left.output.split()))
    assert (project / "distil.py").read_text() == UNSAFE_FIXABLE

    stage(project, environment, **{"pyproject.toml": "[tool.lint-nograd]\nunsafe-fixes = true\n"})
    fixed = pre_commit("run", "lint-nograd-fix", "--color", "never", cwd=project, env=environment)
    assert "files were modified by this hook" in fixed.output
    assert "shift = stop_gradient(teacher(x))" in (project / "distil.py").read_text()


def test_the_local_system_hook_of_the_readme(tmp_path, environment):
    """`repo: local` with `language: system` runs the lint-nograd installed next to this Python."""
    scripts = sysconfig.get_path("scripts")
    if shutil.which("lint-nograd", path=scripts) is None:
        pytest.skip("the lint-nograd console script is not installed next to this interpreter")
    env = dict(environment, PATH=scripts + os.pathsep + environment.get("PATH", ""))
    folder = new_repository(tmp_path / "project", env)
    (folder / ".pre-commit-config.yaml").write_text(LOCAL_CONFIG)
    commit_everything(folder, env)
    stage(folder, env, **{"train.py": BAD, "clean.py": CLEAN})
    done = pre_commit("run", "--color", "never", cwd=folder, env=env)
    assert done.returncode == 1, done.output
    assert "train.py:6:1: NG003" in done.output and "clean.py" not in done.output
