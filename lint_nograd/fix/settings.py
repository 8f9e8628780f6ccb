"""The settings a fix depends on, read by the command line before any analysis (this module
imports nothing heavy: a warm run answered from the cache needs no more)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lint_nograd.run.config import DEFAULT_STOP_GRADIENT, DETACH, parse_toml
from lint_nograd.run.regular_file import read_regular_file

SAFE, UNSAFE = "safe", "unsafe"


@dataclass(frozen=True)
class FixSettings:
    """`stop-gradient` and `unsafe-fixes` of `[tool.lint-nograd]`, or their command-line options."""

    stop_gradient: str = DEFAULT_STOP_GRADIENT  # "detach", or the import path of a function
    unsafe_fixes: bool = False
    # the top-level modules isort and ruff file as first-party: where an added import goes
    first_party: frozenset[str] = frozenset()
    # whether a fix may add `from lint_nograd import ...`: `stop-gradient` names it, or the project
    # declares lint-nograd (`declares_lint_nograd`); if not, a cut that needs nothing new, where exact
    may_add_shim: bool = True
    torch_version: str | None = None  # the release the findings are for; None: the default

    @property
    def detach(self) -> bool:
        return self.stop_gradient == DETACH

    @property
    def make_fx_keeps_detach(self) -> bool:
        """Whether `make_fx` records `.detach()` as a cut on the release (not from 2.14: pytorch PR 186845)."""
        from lint_nograd.analysis.releases import behaviour, default_target

        return behaviour(self.torch_version or default_target()).make_fx_keeps_detach

    def applies(self, applicability: str) -> bool:
        return applicability == SAFE or self.unsafe_fixes

    @property
    def cache_key(self) -> bytes:
        """What a cached finding's fix depends on (the applicability does not depend on `unsafe_fixes`)."""
        return (f"stop-gradient={self.stop_gradient};first-party={','.join(sorted(self.first_party))};"
                f"may-add-shim={self.may_add_shim};torch={self.torch_version}").encode()


# a requirement's name: `-e URL#egg=name`, else PEP 508's leading name
_NAME = re.compile(r".*[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)|\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def declares_lint_nograd(root: Path) -> bool:
    """Whether the project at `root` may import lint_nograd at run time: it is lint-nograd, or names
    it in `dependencies` or `optional-dependencies` of its pyproject.toml, or in a requirements file
    (`requirements*.txt`, `requirements/*.txt`)."""
    try:
        project = parse_toml(read_regular_file(root / "pyproject.toml").decode()).get("project", {})
    except (OSError, ValueError):
        project = {}
    project = project if isinstance(project, dict) else {}
    lines = [project.get("name", "")]
    for requirements in (project.get("dependencies"), *_values(project.get("optional-dependencies"))):
        lines += requirements if isinstance(requirements, list) else []
    for path in sorted([*root.glob("requirements*.txt"), *root.glob("requirements/*.txt")]):
        try:
            lines += read_regular_file(path).decode(errors="replace").splitlines()
        except OSError:
            continue
    return any(_is_lint_nograd(line) for line in lines if isinstance(line, str))


def _values(table: object) -> list:
    return list(table.values()) if isinstance(table, dict) else []


def _is_lint_nograd(requirement: str) -> bool:
    match = _NAME.match(requirement)
    name = match and (match.group(1) or match.group(2))
    return bool(name) and re.sub(r"[-_.]+", "-", name).lower() == "lint-nograd"


def first_party_modules(root: Path, import_roots: list[Path]) -> frozenset[str]:
    """The modules the project's isort settings call first-party (`known-first-party` of
    `[tool.ruff.lint.isort]`, `[tool.ruff.isort]` or `[tool.isort]` in its pyproject.toml), and the
    packages (with an `__init__.py`) and modules at the top of its import roots, as ruff finds them."""
    found: set[str] = set()
    try:
        tool = parse_toml(read_regular_file(root / "pyproject.toml").decode()).get("tool", {})
    except (OSError, ValueError):
        tool = {}
    ruff = tool.get("ruff", {}) if isinstance(tool, dict) else {}
    ruff = ruff if isinstance(ruff, dict) else {}
    lint = ruff.get("lint", {}) if isinstance(ruff.get("lint"), dict) else {}
    for table, key in ((lint.get("isort"), "known-first-party"), (ruff.get("isort"), "known-first-party"),
                       (tool.get("isort") if isinstance(tool, dict) else None, "known_first_party")):
        names = table.get(key, []) if isinstance(table, dict) else []
        found |= {name.partition(".")[0] for name in (names if isinstance(names, list) else [])
                  if isinstance(name, str)}
    for folder in import_roots:
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        # packages only: a `build/` or `__pycache__/` appearing must not change every cached fix
        found |= {entry.name for entry in entries if entry.name.isidentifier() and (entry / "__init__.py").is_file()}
        found |= {entry.stem for entry in entries if entry.suffix == ".py" and entry.stem.isidentifier()}
    return frozenset(found)
