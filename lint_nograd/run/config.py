"""Settings from `[tool.lint-nograd]` in pyproject.toml, and the rules a run selects.

Rule selection is layered like ruff's: the defaults, then pyproject.toml, then the command line.
In each layer `select` replaces what the layer below chose, `extend-select` adds, `ignore` removes.
"""
from __future__ import annotations

import keyword
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lint_nograd.analysis import torch_names
from lint_nograd.analysis.releases import target
from lint_nograd.report.registry import OFF_BY_DEFAULT, RULES
from lint_nograd.run.files import is_valid_pattern, match_path, shown_path
from lint_nograd.run.regular_file import read_regular_file

if TYPE_CHECKING:
    import pathspec

TABLE = "lint-nograd"  # read from [tool.lint-nograd]
STANDALONE = "lint-nograd.toml"  # `--config` may name one: the same settings, at its top level
HIDDEN_STANDALONE = ".lint-nograd.toml"  # read as the one above, as ruff reads `.ruff.toml`
DEFAULT_SELECT = frozenset(RULES) - OFF_BY_DEFAULT
DEFAULT_STOP_GRADIENT = "lint_nograd.stop_gradient"
DETACH = "detach"


def stop_gradient_setting_error(value: object) -> str | None:
    """Why a `stop-gradient` setting cannot be used, or None. A helper must be named `stop_gradient`:
    that is how `check` knows its calls as cuts, in any file and under any alias."""
    if value == DETACH:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+", value) \
            or any(keyword.iskeyword(part) for part in value.split(".")):
        return "must be `detach` or the import path of a function, such as `mypkg.autodiff.stop_gradient`"
    name = value.rpartition(".")[2]
    if name != torch_names.STOP_GRADIENT:
        return (f"names `{name}`: the function must be named `{torch_names.STOP_GRADIENT}`, which is how `check` "
                "knows its calls as cuts")
    return None


class ConfigError(Exception):
    """A setting that cannot be used; the command line reports it and exits 2."""


@dataclass(frozen=True)
class RuleSelection:
    """One layer of rule selection; `select=None` keeps what the layer below chose."""

    select: frozenset[str] | None = None
    extend_select: frozenset[str] = frozenset()
    ignore: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PerFileIgnore:
    """`glob = [codes]`; like ruff, `!glob` turns the codes off for the files it does not match."""

    glob: str
    codes: frozenset[str]

    @cached_property
    def _spec(self) -> "pathspec.GitIgnoreSpec":
        import pathspec  # imported here: most runs have no per-file ignores

        return pathspec.GitIgnoreSpec.from_lines([self.glob.removeprefix("!")])

    def matches(self, relative: str) -> bool:
        return self._spec.match_file(relative) != self.glob.startswith("!")


@dataclass(frozen=True)
class Config:
    root: Path  # relative globs start here: the folder of the pyproject.toml, else the current one
    path: Path | None = None
    rules: RuleSelection = RuleSelection()
    exclude: tuple[str, ...] | None = None  # None keeps the default list
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[PerFileIgnore, ...] = ()
    respect_gitignore: bool = True
    src: tuple[str, ...] = (".", "src")  # the import roots, relative to the project root (as ruff's `src`)
    stop_gradient: str | None = None  # None keeps the default: `lint_nograd.stop_gradient`
    unsafe_fixes: bool | None = None  # None: only when the command line asks
    torch_version: str | None = None  # "2.4"; None: the torch installed, else the newest release known
    exit_non_zero_on_note: bool = False  # a note alone makes the exit status 1

    def ignored_codes(self, path: Path) -> frozenset[str]:
        """The codes `per-file-ignores` turns off for `path`."""
        if not self.per_file_ignores:
            return frozenset()
        relative = match_path(path, self.root)
        ignored: frozenset[str] = frozenset()
        for entry in self.per_file_ignores:
            if entry.matches(relative):
                ignored |= entry.codes
        return ignored


def expand_selectors(selectors: Iterable[str], where: str) -> frozenset[str]:
    """Turn codes and prefixes (`NG`, `NG00`, `NG001`, `ALL`) into the codes they name."""
    codes: set[str] = set()
    for selector in selectors:
        prefix = selector.strip().upper()
        if not prefix:
            continue
        matched = {code for code in RULES if prefix == "ALL" or code.startswith(prefix)}
        if not matched:
            raise ConfigError(f"unknown rule code or prefix `{selector.strip()}` in {where}")
        codes |= matched
    return frozenset(codes)


def select_rules(layers: Sequence[RuleSelection]) -> frozenset[str]:
    codes = DEFAULT_SELECT
    for layer in layers:
        if layer.select is not None:
            codes = layer.select
        codes = (codes | layer.extend_select) - layer.ignore
    return codes


def find_config(start: Path) -> Path | None:
    """The nearest settings, from `start` upwards, as ruff finds them: `.lint-nograd.toml` or
    `lint-nograd.toml` (settings at the top level), else a pyproject.toml with a [tool.lint-nograd] table."""
    for directory in (start, *start.parents):
        for name in HIDDEN_STANDALONE, STANDALONE:
            if (directory / name).is_file():
                return directory / name
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and TABLE in _tool_tables(_read_toml(candidate, start)):
            return candidate
    return None


def search_start(given: Sequence[str], cwd: Path) -> Path:
    """Where settings and the project root are looked for: the folder that holds every path
    given (`check ../other/pkg` is checked as `other` is configured), else the current folder."""
    paths = [Path(os.path.abspath(cwd / path)) for path in given if path != "-"]
    folders = [path if path.is_dir() else path.parent for path in paths]
    if not folders:
        return cwd
    try:
        return Path(os.path.commonpath(folders))
    except ValueError:  # on different drives
        return cwd


def project_root(config: Config, given: Sequence[str], cwd: Path, isolated: bool) -> Path:
    """Where the project's modules are looked for, as ruff finds it: the folder of the nearest
    pyproject.toml (or settings file) above the paths given, else of the settings, else the one
    folder given, else the current folder. `--config` naming a file elsewhere (in a subfolder, say)
    keeps the root of the project checked."""
    start = search_start(given, cwd)
    if config.path is not None and config.root in (start, *start.parents):
        return config.root
    nearest = None if isolated else Projects().of(start)[1]
    if nearest is not None:
        return nearest
    if config.path is not None:
        return config.root
    folders = [Path(os.path.abspath(cwd / path)) for path in given]
    if len(folders) == 1 and folders[0].is_dir():
        return folders[0]
    return cwd


def import_roots(root: Path, src: Sequence[str]) -> list[Path]:
    """The folders module names start from: `src` under the project root; when the root is itself a
    package (one folder given, with an `__init__.py`), the folder above its top package instead of
    the root, as Python imports it: `from pkg.models import make` in `pkg/train.py` names
    `pkg/models.py` when `pkg` is checked. A folder whose name Python cannot import (`my-pkg`,
    `2024`) is no package to name from."""
    roots = [Path(os.path.normpath(root / name)) for name in src]
    top = root
    while (top / "__init__.py").is_file() and top.name.isidentifier() and top.parent != top:
        top = top.parent
    return roots if top == root else [top, *[folder for folder in roots if folder != root]]


class Projects:
    """What a file in a folder is checked as part of, as ruff finds it for each file: the nearest
    settings above it and the nearest project root (a pyproject.toml or a settings file). Each
    folder is looked at once (a run may check thousands of files)."""

    def __init__(self) -> None:
        self._found: dict[Path, tuple[Path | None, Path | None]] = {}

    def of(self, folder: Path) -> tuple[Path | None, Path | None]:
        found = self._found.get(folder)
        if found is None:
            settings = next((folder / name for name in (HIDDEN_STANDALONE, STANDALONE) if (folder / name).is_file()),
                            None)
            pyproject = folder / "pyproject.toml"
            if settings is None and pyproject.is_file() and TABLE in _tool_tables(_read_toml(pyproject, folder)):
                settings = pyproject
            root = folder if settings is not None or pyproject.is_file() else None
            if (settings is None or root is None) and folder.parent != folder:
                above = self.of(folder.parent)
                settings, root = settings or above[0], root or above[1]
            found = self._found[folder] = (settings, root)
        return found

    def group(self, given: Sequence[str], cwd: Path) -> dict[tuple, list[str]]:
        """The paths given, by the project each belongs to: `check a/x.py b/y.py` with a project in
        `a` and another in `b` gives two groups."""
        groups: dict[tuple, list[str]] = {}
        for path in given:
            groups.setdefault(self.of(search_start([path], cwd)), []).append(path)
        return groups


def load_config(
    explicit: str | None = None, cwd: Path | None = None, isolated: bool = False,
    paths: Sequence[str] = (),
) -> Config:
    """Read the settings from `explicit` if given, else the nearest settings above the `paths`
    checked (the current folder when none is given)."""
    cwd = cwd or Path.cwd()
    if isolated:
        return Config(root=cwd)
    path = Path(os.path.abspath(cwd / explicit)) if explicit else find_config(search_start(paths, cwd))
    if path is None:
        return Config(root=cwd)
    document = _read_toml(path, cwd)
    if path.name in (STANDALONE, HIDDEN_STANDALONE):  # its settings are at the top level, as in ruff.toml
        return _parse_table(document, path, shown_path(path, cwd), where=shown_path(path, cwd))
    tables = _tool_tables(document)
    if TABLE not in tables:  # only an explicit file can lack it: a typo must not pass for no settings
        raise ConfigError(f"{shown_path(path, cwd)} has no [tool.{TABLE}] table (nor is it a {STANDALONE})")
    return _parse_table(tables[TABLE], path, shown_path(path, cwd))


def parse_toml(text: str) -> dict[str, Any]:
    """Raises ValueError (as tomllib.TOMLDecodeError). tomllib is imported only when a file is read."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    return tomllib.loads(text)


def _read_toml(path: Path, cwd: Path) -> dict[str, Any]:
    try:
        return parse_toml(read_regular_file(path).decode())  # a FIFO or a device is an error, not a hang
    except (OSError, ValueError) as error:  # ValueError: not UTF-8, not TOML
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise ConfigError(f"cannot read {shown_path(path, cwd)}: {reason}") from None


def _tool_tables(document: dict[str, Any]) -> dict[str, Any]:
    tool = document.get("tool")
    return tool if isinstance(tool, dict) else {}


def _parse_table(table: Any, path: Path, shown: str, where: str | None = None) -> Config:
    where = where or f"[tool.{TABLE}] of {shown}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"unknown key `{unknown[0]}` in {where}")

    def selectors(key: str) -> frozenset[str]:
        return expand_selectors(_strings(table, key, where), f"`{key}` of {where}")

    per_file = table.get("per-file-ignores", {})
    ignores = f"`per-file-ignores` of {where}"
    if not isinstance(per_file, dict):
        raise ConfigError(f"`per-file-ignores` in {where} must be a table of glob = [codes]")
    _globs([glob.removeprefix("!") for glob in per_file], "per-file-ignores", where)
    respect_gitignore = table.get("respect-gitignore", True)
    if not isinstance(respect_gitignore, bool):
        raise ConfigError(f"`respect-gitignore` in {where} must be true or false")
    unsafe_fixes = table.get("unsafe-fixes")
    if unsafe_fixes is not None and not isinstance(unsafe_fixes, bool):
        raise ConfigError(f"`unsafe-fixes` in {where} must be true or false")
    stop_gradient = table.get("stop-gradient")
    problem = None if stop_gradient is None else stop_gradient_setting_error(stop_gradient)
    if problem:
        raise ConfigError(f"`stop-gradient` in {where} {problem}")
    on_note = table.get("exit-non-zero-on-note", False)
    if not isinstance(on_note, bool):
        raise ConfigError(f"`exit-non-zero-on-note` in {where} must be true or false")
    torch_version = table.get("torch-version")
    if torch_version is not None:
        try:
            torch_version = target(torch_version)
        except ValueError as error:
            raise ConfigError(f"`torch-version` in {where} {error}") from None
    return Config(
        root=path.parent,
        path=path,
        rules=RuleSelection(
            select=selectors("select") if "select" in table else None,
            extend_select=selectors("extend-select"),
            ignore=selectors("ignore"),
        ),
        exclude=_globs(_strings(table, "exclude", where), "exclude", where) if "exclude" in table else None,
        extend_exclude=_globs(_strings(table, "extend-exclude", where), "extend-exclude", where),
        per_file_ignores=tuple(
            PerFileIgnore(glob, expand_selectors(_strings(per_file, glob, ignores), ignores))
            for glob in per_file
        ),
        respect_gitignore=respect_gitignore,
        src=_strings(table, "src", where) if "src" in table else Config.src,
        stop_gradient=stop_gradient,
        unsafe_fixes=unsafe_fixes,
        torch_version=torch_version,
        exit_non_zero_on_note=on_note,
    )


_KEYS = {"select", "extend-select", "ignore", "exclude", "extend-exclude", "per-file-ignores",
         "respect-gitignore", "src", "stop-gradient", "unsafe-fixes", "torch-version",
         "exit-non-zero-on-note"}


def _globs(globs: Sequence[str], key: str, where: str) -> tuple[str, ...]:
    for glob in globs:
        if not is_valid_pattern(glob):
            raise ConfigError(f"`{key}` in {where}: `{glob}` is not a valid glob")
    return tuple(globs)


def _strings(table: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"`{key}` in {where} must be a list of strings")
    return tuple(value)
