"""Which codes the watcher reports and which fail a run, read as `check` reads them: from the
nearest `.lint-nograd.toml`, `lint-nograd.toml` or pyproject.toml with a `[tool.lint-nograd]`
table (`select`, `extend-select`, `ignore`, `exit-non-zero-on-note`; the other keys are about
files, which a running program does not choose), then the command line's `--select`/`--ignore`.
The same layering as `lint_nograd.run.config`, which the watcher may not import."""
from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from lint_nograd.report.registry import OFF_BY_DEFAULT, RULES, SEVERITIES

TABLE = "lint-nograd"
STANDALONE = (".lint-nograd.toml", "lint-nograd.toml")  # their settings are at the top level
DEFAULT_SELECT = frozenset(RULES) - OFF_BY_DEFAULT


class SettingsError(Exception):
    """A setting that cannot be used: reported with its place, exit status 2."""


def expand(selectors: Iterable[str], where: str) -> frozenset[str]:
    """Codes and prefixes (`NG`, `NG00`, `NG004`, `ALL`) -> the codes they name."""
    codes: set[str] = set()
    for selector in selectors:
        prefix = selector.strip().upper()
        if not prefix:
            continue
        matched = {code for code in RULES if prefix == "ALL" or code.startswith(prefix)}
        if not matched:
            raise SettingsError(f"unknown rule code or prefix `{selector.strip()}` in {where}")
        codes |= matched
    return frozenset(codes)


def find(start: Path) -> tuple[Path, dict] | None:
    """The nearest settings at or above `start`, and their table."""
    for folder in (start, *start.parents):
        for name in STANDALONE:
            if (folder / name).is_file():
                return folder / name, _read(folder / name)
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            tool = _read(pyproject).get("tool")
            if isinstance(tool, dict) and TABLE in tool:
                return pyproject, tool[TABLE]
    return None


def resolve(settings, start: Path) -> None:
    """Set `settings.codes` and `settings.exit_non_zero_on_note` from the settings found above
    `start` and the command line's choices on `settings`; SettingsError when one cannot be used."""
    codes, on_note = DEFAULT_SELECT, False
    found = find(start)
    if found is not None:
        path, table = found
        where = f"{path.name} ({path.parent})" if path.name in STANDALONE else f"[tool.{TABLE}] of {path}"
        if not isinstance(table, dict):
            raise SettingsError(f"{where} must be a table")
        if "select" in table:
            codes = expand(_strings(table, "select", where), f"`select` of {where}")
        codes = (codes | expand(_strings(table, "extend-select", where), f"`extend-select` of {where}")) - expand(
            _strings(table, "ignore", where), f"`ignore` of {where}")
        on_note = table.get("exit-non-zero-on-note", False)
        if not isinstance(on_note, bool):
            raise SettingsError(f"`exit-non-zero-on-note` in {where} must be true or false")
    if settings.select is not None:
        codes = expand(settings.select, "--select")
    settings.codes = codes - expand(settings.ignore, "--ignore")
    if settings.exit_non_zero_on_note is None:
        settings.exit_non_zero_on_note = on_note


def failing(found: Sequence, exit_non_zero_on_note: bool) -> list:
    """The findings that make `check` exit 1: errors and warnings, notes when asked."""
    return [d for d in found if d.severity != "note" or exit_non_zero_on_note]


def why_failed(found: Sequence, exit_non_zero_on_note: bool) -> str:
    """`lint-nograd watch failed: 1 error (NG004), as check would` or "" when nothing fails."""
    failed = failing(found, exit_non_zero_on_note)
    if not failed:
        return ""
    parts = []
    for severity in SEVERITIES:
        of_it = [d for d in failed if d.severity == severity]
        if of_it:
            codes = ", ".join(sorted({d.code for d in of_it}))
            parts.append(f"{len(of_it)} {severity}{'s' * (len(of_it) != 1)} ({codes})")
    notes = "" if exit_non_zero_on_note else "; notes alone fail only with exit-non-zero-on-note"
    return f"lint-nograd watch failed: {', '.join(parts)}, as `check` would fail{notes}\n"


def _read(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # ValueError: not UTF-8, not TOML
        raise SettingsError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from None


def _strings(table: dict, key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SettingsError(f"`{key}` in {where} must be a list of strings")
    return tuple(value)
