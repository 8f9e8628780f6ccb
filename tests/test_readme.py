"""The copy-paste snippets of README.md and docs/, run as a user would paste them (every link,
and the syntax of every example: tests/test_docs.py)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
DOCS = {path.name: path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}


def blocks(section: str, language: str, page: str = "README.md") -> list[str]:
    """The fenced blocks of one section (`## section`, or the page's `# title`) of README.md or of
    a page of docs/, in one language."""
    text = README if page == "README.md" else DOCS[page]
    body = re.split(r"^#+ ", text, flags=re.MULTILINE)
    [part] = [part for part in body if part.startswith(section + "\n")]
    return [textwrap.dedent(block) for block in re.findall(rf"^ *```{language}\n(.*?)^ *```", part,
                                                           re.MULTILINE | re.DOTALL)]


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
    [install_and_check, _, _] = blocks("Try it", "sh")
    command = install_and_check.strip().split(" && ")[1]
    done = shell(command + " --no-cache --output-format concise", ROOT)
    assert done.returncode == 1
    # what the README says: four findings, one with a safe fix and one with an unsafe fix
    assert ("Found 2 errors, 1 warning and 1 note.\n[*] 1 fixable with `lint-nograd fix` (1 hidden fix can be enabled with the "
            "`--unsafe-fixes` option).\n") in done.stdout


def test_the_test_command_is_what_ci_runs():
    [_, test_command, fast] = blocks("Try it", "sh")
    assert test_command.strip().split(" && ")[-1] in (ROOT / ".ci" / "run").read_text()
    assert blocks("Development", "sh", "development.md") == [test_command, fast]


def test_the_fast_command_leaves_out_the_modules_that_import_torch():
    [_, _, fast] = blocks("Try it", "sh")
    marker = re.search(r'-m "(.*)"', fast).group(1)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", marker,
                           "tests/test_fix_dependency.py", "tests/test_fix_dependency_torch.py", "tests/test_layers.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    collected = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    assert collected == {"tests/test_fix_dependency.py", "tests/test_layers.py"}, done.stdout + done.stderr


def test_what_it_finds_is_what_check_and_fix_print(tmp_path):
    [source] = blocks("What it finds", "python")
    check, fix = blocks("What it finds", "sh")
    [shown] = blocks("What it finds", "text")
    [diff] = blocks("What it finds", "diff")
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "model.py").write_text(source)
    checked = shell(check.strip() + " --no-cache", tmp_path)
    assert (checked.returncode, checked.stdout) == (1, shown)
    fixed = shell(fix.strip() + " --no-cache", tmp_path)
    # (a diff's blank context lines are one space, which editors take off a page)
    assert (fixed.returncode, [line.rstrip() for line in fixed.stdout.splitlines()]) == (1, diff.splitlines())


def test_the_pre_commit_configurations_are_the_ones_the_tests_run():
    from test_precommit import HOOK_CONFIG, LOCAL_CONFIG

    assert blocks("pre-commit", "yaml") == [LOCAL_CONFIG]
    assert blocks("pre-commit", "yaml", "pre-commit.md") == [LOCAL_CONFIG, HOOK_CONFIG]


def test_no_install_command_needs_the_package_on_an_index():
    """lint-nograd is installed from its repository: `pip install .`, a path or a git URL."""
    arguments = [argument for text in (README, *DOCS.values())
                 for found in re.findall(r"pip install((?: +[^\s`&#;]+)+)", text)
                 for argument in found.split()]
    assert "." in arguments and "'.[torch]'" in arguments
    assert [argument for argument in arguments if re.match(r"'?lint[-_]nograd\b", argument)] == []


def test_the_editor_commands(project):
    [piped] = [block for block in blocks("In your editor", "sh", "editor.md") if "--stdin-filename" in block]
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
    workflow = yaml.safe_load(blocks("CI: annotations, SARIF and other formats", "yaml", "ci.md")[0])
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
    [command] = blocks("Notebooks", "sh", "notebooks.md")
    [shown] = blocks("Notebooks", "text", "notebooks.md")
    done = shell(command.strip() + " --no-cache --output-format concise", tmp_path)
    assert done.returncode == 1
    assert done.stdout.startswith(shown.strip().removesuffix("..."))


def test_the_runtime_shim_imports():
    namespace: dict = {}
    exec(blocks("The runtime shim and torch releases", "python", "shim.md")[0], namespace)
    exec(blocks("Four faces", "python")[0], namespace)
    assert namespace["func"].grad is not None and callable(namespace["stop_gradient"])


def test_the_try_it_diff_shows_both_rewrites():
    done = shell("lint-nograd fix --diff --unsafe-fixes examples/ --no-cache", ROOT)
    assert done.returncode == 1
    assert "+    scale = stop_gradient(prediction.std() + 1e-6)  # meant as a constant" in done.stdout
    assert "+            baseline = stop_gradient(model(inputs).mean())" in done.stdout


def test_the_libcst_command_rewrites_a_file(project):
    [command] = blocks("The same rewrite as a libcst codemod", "sh", "fixes.md")
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
    vscode, jupyterlab = (json.loads(block) for block in blocks("In your editor", "json", "editor.md"))
    assert [vscode["glspc.server.command"], *vscode["glspc.server.commandArguments"]] == ["lint-nograd", "server"]
    spec = jupyterlab["LanguageServerManager"]["language_servers"]["lint-nograd"]
    assert spec["argv"] == ["lint-nograd", "server"] and spec["version"] == 2 and "python" in spec["languages"]
    [neovim] = blocks("In your editor", "lua", "editor.md")
    assert 'cmd = { "lint-nograd", "server" }' in neovim and 'vim.lsp.enable("lint_nograd")' in neovim
