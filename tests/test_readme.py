"""The README's copy-paste snippets, run as a user would paste them."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def blocks(section: str, language: str) -> list[str]:
    """The fenced blocks of one `## section` of the README, in one language."""
    body = re.split(r"^## ", README, flags=re.MULTILINE)
    [text] = [part for part in body if part.startswith(section + "\n")]
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """A README command line, with `lint-nograd` run by this interpreter."""
    command = command.split("  #")[0].replace("lint-nograd ", f"{sys.executable} -m lint_nograd ", 1)
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "src").mkdir()
    shutil.copy(ROOT / "examples" / "meta_learning.py", tmp_path / "src" / "model.py")
    return tmp_path


def test_try_it_checks_the_example_as_the_readme_says():
    [install_and_check, _] = blocks("Try it", "sh")
    command = install_and_check.strip().split(" && ")[1]
    done = shell(command + " --no-cache --output-format concise", ROOT)
    assert done.returncode == 1
    # what the README says: four findings, one with a safe fix and one with an unsafe fix
    assert ("Found 2 errors, 1 warning and 1 note.\n[*] 1 fixable with `lint-nograd fix` (1 hidden fix can be enabled with the "
            "`--unsafe-fixes` option).\n") in done.stdout


def test_the_test_command_is_what_ci_runs():
    [_, test_command] = blocks("Try it", "sh")
    assert test_command.strip().split(" && ")[-1] in (ROOT / ".ci" / "run").read_text()


def test_the_pre_commit_configurations_are_the_ones_the_tests_run():
    from test_precommit import HOOK_CONFIG, LOCAL_CONFIG

    assert blocks("pre-commit", "yaml") == [LOCAL_CONFIG, HOOK_CONFIG]


def test_no_install_command_needs_the_package_on_an_index():
    """lint-nograd is installed from its repository: `pip install .`, a path or a git URL."""
    arguments = [argument for found in re.findall(r"pip install((?: +[^\s`&#;]+)+)", README)
                 for argument in found.split()]
    assert "." in arguments and "'.[torch]'" in arguments
    assert [argument for argument in arguments if re.match(r"'?lint[-_]nograd\b", argument)] == []


def test_the_editor_commands(project):
    [piped] = [block for block in blocks("In your editor", "sh") if "--stdin-filename" in block]
    check, fix = piped.strip().splitlines()
    checked = shell(check + " --no-cache", project)
    assert checked.returncode == 1 and {d["code"] for d in json.loads(checked.stdout)} == {
        "NG001", "NG003", "NG004", "NG006"}
    fixed = shell(fix, project)
    # the project does not declare lint-nograd: the cut adds no dependency
    assert fixed.returncode == 1 and "scale = (prediction.std() + 1e-6).detach()" in (project / "fixed.py").read_text()
    assert "NG001" in fixed.stderr and (project / "src" / "model.py").read_text() == (
        ROOT / "examples" / "meta_learning.py").read_text()


def test_the_github_workflow_runs_and_writes_sarif(project):
    workflow = yaml.safe_load(blocks("CI", "yaml")[0])
    runs = [step["run"] for step in workflow["jobs"]["lint-nograd"]["steps"] if "run" in step]
    assert runs[0].startswith("pip install")
    annotations = shell(runs[1], project)
    assert annotations.returncode == 1
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in annotations.stdout.splitlines())
    sarif = shell(runs[2] + " --no-cache", project)
    assert sarif.returncode == 0
    log = json.loads((project / "lint-nograd.sarif").read_text())
    assert log["version"] == "2.1.0" and len(log["runs"][0]["results"]) == 4
    uploads = [step for step in workflow["jobs"]["lint-nograd"]["steps"] if "upload-sarif" in step.get("uses", "")]
    assert uploads[0]["with"]["sarif_file"] == "lint-nograd.sarif"


def test_the_notebook_example(tmp_path):
    shutil.copy(ROOT / "tests" / "fixtures" / "notebooks" / "meta_learning.ipynb", tmp_path / "analysis.ipynb")
    [command] = blocks("Notebooks", "sh")
    [shown] = blocks("Notebooks", "text")
    done = shell(command.strip() + " --no-cache --output-format concise", tmp_path)
    assert done.returncode == 1
    assert done.stdout.startswith(shown.strip().removesuffix("..."))


def test_the_runtime_shim_imports():
    namespace: dict = {}
    exec(blocks("Runtime shim", "python")[0], namespace)
    assert namespace["func"].grad is not None and callable(namespace["stop_gradient"])


def test_the_try_it_diff_shows_both_rewrites():
    done = shell("lint-nograd fix --diff --unsafe-fixes examples/ --no-cache", ROOT)
    assert done.returncode == 1
    assert "+    scale = stop_gradient(prediction.std() + 1e-6)  # meant as a constant" in done.stdout
    assert "+            baseline = stop_gradient(model(inputs).mean())" in done.stdout


def test_the_libcst_command_rewrites_a_file(project):
    [command] = blocks("Codemod: lint-nograd fix", "sh")[-1:]
    command = command.strip().replace("python ", f"{sys.executable} ", 1).replace("PATH", "src")
    done = subprocess.run(command, shell=True, cwd=project, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    text = (project / "src" / "model.py").read_text()
    assert "scale = (prediction.std() + 1e-6).detach()" in text  # the safe fix, which adds no dependency
    assert "baseline = model(inputs).mean()\n" in text  # an unsafe fix, not asked for
    (project / "pyproject.toml").write_text("[tool.lint-nograd]\nunsafe-fixes = true\n")
    done = subprocess.run(command, shell=True, cwd=project, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "baseline = model(inputs).mean().detach()" in (project / "src" / "model.py").read_text()


def test_the_editor_setups_start_the_language_server():
    vscode, jupyterlab = (json.loads(block) for block in blocks("In your editor", "json"))
    assert [vscode["glspc.server.command"], *vscode["glspc.server.commandArguments"]] == ["lint-nograd", "server"]
    spec = jupyterlab["LanguageServerManager"]["language_servers"]["lint-nograd"]
    assert spec["argv"] == ["lint-nograd", "server"] and spec["version"] == 2 and "python" in spec["languages"]
    [neovim] = blocks("In your editor", "lua")
    assert 'cmd = { "lint-nograd", "server" }' in neovim and 'vim.lsp.enable("lint_nograd")' in neovim
