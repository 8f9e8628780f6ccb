"""Reading [tool.lint-nograd], and turning codes and prefixes into a rule selection."""
from __future__ import annotations

from pathlib import Path

import pytest
from lint_nograd.report.registry import RULES
from lint_nograd.run.config import (
    DEFAULT_SELECT,
    ConfigError,
    RuleSelection,
    expand_selectors,
    find_config,
    load_config,
    select_rules,
)

FIXABLE = {code for code, rule in RULES.items() if rule.fixable}


@pytest.mark.parametrize("selectors, codes", [
    (["NG001"], {"NG001"}),
    (["NG00"], {code for code in RULES if code.startswith("NG00")}),
    (["NG"], set(RULES)),
    (["ALL"], set(RULES)),
    (["ng004", " NG005 "], {"NG004", "NG005"}),
    ([], set()),
])
def test_expand_selectors(selectors, codes):
    assert expand_selectors(selectors, "--select") == codes


@pytest.mark.parametrize("selector", ["NG999", "E501", "X"])
def test_unknown_selector_names_itself_and_where(selector):
    with pytest.raises(ConfigError, match=f"`{selector}` in --ignore"):
        expand_selectors([selector], "--ignore")


def layer(select=None, extend_select=(), ignore=()):
    return RuleSelection(
        select=None if select is None else frozenset(select),
        extend_select=frozenset(extend_select),
        ignore=frozenset(ignore),
    )


@pytest.mark.parametrize("layers, codes", [
    ([], DEFAULT_SELECT),
    ([layer(select={"NG001"})], {"NG001"}),
    ([layer(select={"NG001"}, extend_select={"NG002"})], {"NG001", "NG002"}),
    ([layer(ignore={"NG001"})], DEFAULT_SELECT - {"NG001"}),
    # pyproject.toml, then the command line: a later select starts over, ignores included
    ([layer(ignore={"NG003"}), layer(select={"NG003", "NG004"})], {"NG003", "NG004"}),
    ([layer(select={"NG001", "NG002"}), layer(ignore={"NG002"})], {"NG001"}),
    ([layer(select={"NG001"}), layer(extend_select={"NG006"})], {"NG001", "NG006"}),
    ([layer(select=FIXABLE), layer(select=set(), extend_select={"NG000"})], {"NG000"}),
])
def test_select_rules_layers(layers, codes):
    assert select_rules(layers) == codes


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_find_config_takes_the_nearest_with_our_table(tmp_path):
    top = write(tmp_path / "pyproject.toml", "[tool.lint-nograd]\nselect = ['NG001']\n")
    write(tmp_path / "pkg" / "pyproject.toml", "[project]\nname = 'pkg'\n")
    inner = tmp_path / "pkg" / "src"
    inner.mkdir()
    assert find_config(inner) == top
    config = load_config(cwd=inner)
    assert config.root == tmp_path and config.path == top
    assert config.rules.select == {"NG001"}


def test_no_config_means_defaults_rooted_here(tmp_path):
    config = load_config(cwd=tmp_path, isolated=True)
    assert config.root == tmp_path and config.path is None
    assert config.stop_gradient is None and config.unsafe_fixes is None
    assert select_rules([config.rules]) == DEFAULT_SELECT


def test_every_key(tmp_path):
    write(tmp_path / "pyproject.toml", """
[tool.lint-nograd]
select = ["NG00"]
extend-select = ["NG001"]
ignore = ["NG002"]
exclude = ["generated"]
extend-exclude = ["scratch/*.py"]
respect-gitignore = false
per-file-ignores = {"tests/*" = ["NG003"], "conftest.py" = ["NG004", "NG005"], "!src/*" = ["NG006"]}
stop-gradient = "mypkg.autodiff.stop_gradient"
unsafe-fixes = true
torch-version = "2.4.1"
""")
    config = load_config(cwd=tmp_path)
    assert config.stop_gradient == "mypkg.autodiff.stop_gradient" and config.unsafe_fixes is True
    assert config.torch_version == "2.4"
    assert config.rules == layer(select=DEFAULT_SELECT, extend_select={"NG001"}, ignore={"NG002"})
    assert config.exclude == ("generated",) and config.extend_exclude == ("scratch/*.py",)
    assert config.respect_gitignore is False
    assert config.ignored_codes(tmp_path / "tests" / "test_a.py") == {"NG003", "NG006"}
    deep_conftest = tmp_path / "tests" / "deep" / "conftest.py"
    assert config.ignored_codes(deep_conftest) == {"NG003", "NG004", "NG005", "NG006"}
    assert config.ignored_codes(tmp_path / "src" / "conftest.py") == {"NG004", "NG005"}
    assert config.ignored_codes(tmp_path / "src" / "tests.py") == set()


def test_explicit_config_file(tmp_path):
    other = write(tmp_path / "elsewhere" / "settings.toml", "[tool.lint-nograd]\nignore = ['NG']\n")
    write(tmp_path / "pyproject.toml", "[tool.lint-nograd]\nselect = ['NG001']\n")
    config = load_config("elsewhere/settings.toml", cwd=tmp_path)
    assert config.path == other and config.root == other.parent
    assert config.rules.ignore == frozenset(RULES) and config.rules.select is None  # `NG` names NG100 too


@pytest.mark.parametrize("text, message", [
    ("[tool.lint-nograd\n", "cannot read pyproject.toml: "),
    ("[tool.lint-nograd]\nselct = ['NG001']\n", r"unknown key `selct` in \[tool.lint-nograd\] of"),
    ("[tool.lint-nograd]\nselect = 'NG001'\n", "`select` in .* must be a list of strings"),
    ("[tool.lint-nograd]\nselect = ['NG9']\n", "unknown rule code or prefix `NG9` in `select`"),
    ("[tool.lint-nograd]\nper-file-ignores = {'a.py' = ['X1']}\n", "`X1` in `per-file-ignores`"),
    ("[tool.lint-nograd]\nper-file-ignores = ['a.py']\n", "`per-file-ignores` .* a table"),
    ("[tool.lint-nograd]\nrespect-gitignore = 'no'\n", "`respect-gitignore` .* true or false"),
    ("[tool]\nlint-nograd = 3\n", "must be a table"),
    ("[tool.lint-nograd]\nunsafe-fixes = 'yes'\n", "`unsafe-fixes` .* true or false"),
    ("[tool.lint-nograd]\nstop-gradient = 'stop_gradient'\n", "`stop-gradient` .* must be `detach` or the import path"),
    ("[tool.lint-nograd]\nstop-gradient = 'mypkg.cut'\n", "names `cut`: the function must be named `stop_gradient`"),
    ("[tool.lint-nograd]\nstop-gradient = 'my-pkg.stop_gradient'\n", "must be `detach` or the import path"),
    ("[tool.lint-nograd]\nstop-gradient = 'mypkg.import.stop_gradient'\n", "must be `detach` or the import path"),
    ("[tool.lint-nograd]\nstop-gradient = ['detach']\n", "must be `detach` or the import path"),
    ("[tool.lint-nograd]\ntorch-version = 2.4\n", '`torch-version` in .* must be a string, such as "2.4", not 2.4'),
    ("[tool.lint-nograd]\ntorch-version = 'latest'\n", '`torch-version` .* must be a torch release such as "2.4"'),
    ("[tool.lint-nograd]\ntorch-version = '2.4.1+cpu'\n", "must be a torch release such as"),
    ("[tool.lint-nograd]\ntorch-version = '1.13'\n", "1.13 is older than the releases lint-nograd knows, 2.1 and newer"),
])
def test_bad_config(tmp_path, text, message):
    write(tmp_path / "pyproject.toml", text)
    with pytest.raises(ConfigError, match=message):
        load_config(cwd=tmp_path)


def test_missing_explicit_config(tmp_path):
    with pytest.raises(ConfigError, match="cannot read nope.toml: No such file"):
        load_config("nope.toml", cwd=tmp_path)
