"""README.md and docs/: every link and anchor resolves, and every example is one that still works:
Python parses, TOML, JSON and YAML load (a `[tool.lint-nograd]` table as the configuration), and
each command line names a real command with real options. (The examples a user runs as they are,
with their outputs, are run by tests/test_readme.py.)"""
from __future__ import annotations

import ast
import json
import re
import shlex
import sys
import textwrap
from importlib.util import find_spec
from pathlib import Path

import pytest
import yaml
from lint_nograd import cli
from lint_nograd.run.config import load_config, parse_toml

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^ *```(\w*)\n(.*?)^ *```", re.MULTILINE | re.DOTALL)


def examples(language: str) -> list[tuple[str, str]]:
    """(page, block) for every fenced block of one language in README.md and docs/."""
    return [(page.relative_to(ROOT).as_posix(), textwrap.dedent(body)) for page in PAGES
            for found, body in FENCE.findall(page.read_text()) if found == language]


def prose(text: str) -> str:
    """The text without its code blocks and inline code, where a `[link](...)` is no link."""
    return re.sub(r"``.*?``|`[^`\n]*`", "", FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a page: lower case, punctuation dropped, spaces as -."""
    headings = re.findall(r"^#+ (.*)$", FENCE.sub("", path.read_text()), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


LINKS = [(page, target) for page in PAGES for target in re.findall(r"\]\(([^)\s]+)\)", prose(page.read_text()))]


def test_the_pages_exist_and_readme_is_a_front_door():
    assert len(PAGES) > 10 and len((ROOT / "README.md").read_text().splitlines()) < 250
    assert {target for page, target in LINKS if page.name == "README.md" and target.startswith("docs/")} >= {
        f"docs/{page.name}" for page in PAGES[1:]}  # README links every page


@pytest.mark.parametrize("page, target", LINKS, ids=[f"{p.name}:{t}" for p, t in LINKS])
def test_every_link_and_anchor_resolves(page: Path, target: str):
    if re.match(r"https?://", target):
        return  # no network in the tests
    path, _, anchor = target.partition("#")
    resolved = (page.parent / path).resolve() if path else page
    assert resolved.exists(), f"{page.name}: {target} names no file"
    if anchor:
        assert anchor in anchors(resolved), f"{page.name}: {target}: no such heading in {resolved.name}"


def test_the_anchor_rule_is_githubs():
    assert anchors(ROOT / "docs" / "fixes.md") >= {"where-stop_gradient-comes-from", "safe-and-unsafe-fixes"}


PYTHON = [(page, block) for page, block in examples("python") if " -> " not in block]  # not the before/after pictures


@pytest.mark.parametrize("page, block", PYTHON, ids=[page for page, _ in PYTHON])
def test_python_examples_parse(page: str, block: str):
    ast.parse(block)


@pytest.mark.parametrize("page, block", examples("toml"), ids=[page for page, _ in examples("toml")])
def test_configuration_examples_load(tmp_path, page: str, block: str):
    table = parse_toml(block)
    if "lint-nograd" in table.get("tool", {}):
        (tmp_path / "pyproject.toml").write_text(block)
        assert load_config(cwd=tmp_path).path == tmp_path / "pyproject.toml"


def test_json_and_yaml_examples_load():
    assert [json.loads(block) for _, block in examples("json")]
    assert [yaml.safe_load(block) for _, block in examples("yaml")]


def commands() -> list[tuple[str, list[str]]]:
    """(page, words) for each command of the shell examples: `&&` parts, without comments,
    redirections and leading `VAR=value` assignments."""
    found = []
    for page, block in examples("sh"):
        for line in block.splitlines():
            for part in line.split("  #")[0].split(" && "):
                words = shlex.split(part.replace("[PATH ...]", ""))
                words = words[:next((i for i, w in enumerate(words) if w in ("<", ">")), len(words))]
                while words and re.match(r"[A-Z_]+=", words[0]):
                    assert words[0].startswith("LINT_NOGRAD_WATCH"), words[0]
                    words = words[1:]
                if words:
                    found.append((page, words))
    return found


EXTRAS = parse_toml((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
WATCH_OPTIONS = (ROOT / "lint_nograd" / "watch" / "pytest_plugin.py").read_text()


@pytest.mark.parametrize("page, words", commands(), ids=[f"{p}:{' '.join(w)[:50]}" for p, w in commands()])
def test_shell_examples_name_real_commands_and_options(page: str, words: list[str]):
    program, *arguments = words
    if program == "lint-nograd":
        try:
            cli.build_parser().parse_args(arguments)
        except SystemExit as stop:
            pytest.fail(f"{page}: `{' '.join(words)}` is no valid command line (exit {stop.code})")
    elif program == "pip":
        assert arguments[0] == "install"
        for argument in arguments[1:]:
            extras = re.fullmatch(r"\.\[([\w,-]+)\]", argument)
            for extra in extras.group(1).split(",") if extras else ():
                assert extra in EXTRAS, f"{page}: no extra {extra}"
    elif program == "python" and arguments[0] == "-m":
        assert find_spec(arguments[1]) is not None, arguments[1]
        if arguments[1] == "lint_nograd.watch":
            from lint_nograd.watch.__main__ import parse

            parse(arguments[2:])  # SystemExit on an option it does not know
    elif program == "python":
        assert (ROOT / arguments[0]).is_file(), arguments[0]
    elif program == "pytest":
        assert all(f'"{option}"' in WATCH_OPTIONS for option in arguments if option.startswith("--nograd"))
    elif program == "flake8":
        assert 'NG = "lint_nograd.flake8_plugin:Plugin"' in (ROOT / "pyproject.toml").read_text()
    else:
        assert program == "git" and arguments[0] == "clone", f"{page}: an example of an unknown program: {words}"


def test_every_page_is_in_the_tests_that_run_its_commands():
    """A page whose commands tests/test_readme.py runs is read there by its name."""
    readme_test = (ROOT / "tests" / "test_readme.py").read_text()
    for name in ("editor.md", "ci.md", "notebooks.md", "shim.md", "fixes.md", "pre-commit.md", "development.md"):
        assert f'"{name}"' in readme_test, name


def test_no_page_names_this_interpreters_paths():
    for page in PAGES:
        assert sys.prefix not in page.read_text() and str(ROOT) not in page.read_text(), page.name
