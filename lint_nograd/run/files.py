"""Which files `check` reads: named files always; directories walked for `*.py`, minus excludes.

Exclude globs and .gitignore files are gitignore-style patterns (`pathspec`): exclude globs are
relative to the project root, the patterns of a .gitignore relative to the folder holding it.
"""
from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lint_nograd.run.regular_file import read_regular_file

if TYPE_CHECKING:
    import pathspec

# ruff's default exclude list, plus our own cache folder.
DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints",
    ".mypy_cache", ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache",
    ".svn", ".tox", ".venv", ".vscode", "__pypackages__", "_build", "buck-out", "build", "dist",
    "node_modules", "site-packages", "venv", ".lint_nograd_cache",
)


@dataclass
class Discovery:
    files: list[tuple[Path, str]] = field(default_factory=list)  # (absolute path, path as shown)
    missing: list[str] = field(default_factory=list)  # named paths that do not exist
    unreadable: list[str] = field(default_factory=list)  # what could not be read: folders, .gitignore files


SOURCE_SUFFIXES = (".py", ".ipynb")  # what a folder is searched for


class Patterns:
    """Gitignore-style patterns. `names` when each is a plain name, as the default ones are: such a
    pattern matches a path one of whose parts has that name, which a walk tells from the last part
    (and pathspec is not even imported). Raises ValueError for a pattern that is no glob, such as
    `!` or one ending in a lone `\\`."""

    def __init__(self, lines: Iterable[str]):
        self.lines = tuple(lines)
        plain = all(re.fullmatch(r"[\w.-]+", line) and line.strip(".") for line in self.lines)
        self.names = frozenset(self.lines) if plain else None
        self._spec = None if plain else _gitignore_spec(self.lines)

    @property
    def spec(self) -> "pathspec.GitIgnoreSpec":
        if self._spec is None:
            self._spec = _gitignore_spec(self.lines)
        return self._spec

    def match_file(self, path: str) -> bool:
        """Whether the patterns match `path`, relative and with `/` (and a `/` at the end of a folder)."""
        if self.names is not None:
            return any(part in self.names for part in path.split("/"))
        return self.spec.match_file(path)


def _gitignore_spec(lines: Sequence[str]) -> "pathspec.GitIgnoreSpec":
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(lines))


@functools.lru_cache(maxsize=None)
def _pattern_class():
    """The class of pathspec's gitignore patterns: it turns a line into a regular expression."""
    return type(_gitignore_spec(["x"]).patterns[0])


def compile_patterns(patterns: Iterable[str]) -> Patterns:
    return Patterns(patterns)


def is_valid_pattern(pattern: str) -> bool:
    try:
        compile_patterns([pattern])
        return True
    except ValueError:
        return False


def match_path(path: Path, base: Path, is_dir: bool = False) -> str:
    """`path` as a pattern sees it: relative to `base`, or just its name when outside `base`."""
    try:
        relative = path.relative_to(base).as_posix()
    except ValueError:
        relative = path.name
    return relative + "/" if is_dir else relative


def shown_path(path: Path, cwd: Path, given: str | None = None, start: Path | None = None) -> str:
    """Relative to the current folder when under it, else as the user wrote it. (With strings: a
    walk shows thousands of paths, and pathlib's `relative_to` costs more than the walk.)"""
    text, folder = str(path), os.path.join(str(cwd), "")
    if text.startswith(folder):
        return text[len(folder):]
    if text == str(cwd):
        return "."
    if given is None or start is None or path == start:
        return given or text
    below = os.path.join(str(start), "")
    inside = text[len(below):] if text.startswith(below) else os.path.relpath(text, start)
    return os.path.normpath(os.path.join(given, inside))


def discover(
    paths: Sequence[str],
    root: Path,
    exclude: Patterns,
    respect_gitignore: bool = True,
    cwd: Path | None = None,
    force_exclude: bool = False,
) -> Discovery:
    """Every file to check, sorted by shown path; a file named twice is checked once."""
    cwd = cwd or Path.cwd()
    result = Discovery()
    found: dict[Path, str] = {}
    for given in paths:
        start = Path(os.path.abspath(cwd / given))
        walk = _Walk(root, exclude, respect_gitignore, result.unreadable, cwd)
        if not start.exists():  # also a broken symlink
            result.missing.append(given)
        elif start.is_dir():
            for path in walk.python_files(start):
                found.setdefault(path, shown_path(path, cwd, given, start))
        elif not (force_exclude and walk.excluded(start)):
            # a named file is checked whatever its name, and excludes apply only when forced (ruff)
            found.setdefault(start, shown_path(start, cwd, given, start))
    result.files = sorted(found.items(), key=lambda item: item[1])
    result.unreadable = list(dict.fromkeys(result.unreadable))  # a .gitignore above many named files: once
    return result


_GROUP_NAME = re.compile(r"\(\?P<[a-zA-Z_]\w*>")


class _GitIgnore:
    """The patterns of one .gitignore, as one regular expression: the last pattern that matches
    decides, so they are tried last first, and a path that none matches costs one search. One
    expression is compiled, not one per pattern (a .gitignore may hold hundreds)."""

    def __init__(self, folder: Path, lines: Iterable[str]):
        self.folder = folder
        self.prefix = os.path.join(str(folder), "")
        to_regex = _pattern_class().pattern_to_regex
        parts, self._includes = [], []
        for line in lines:
            try:
                regex, include = to_regex(line)
            except ValueError:  # git skips a pattern it cannot read, and so do we
                continue
            if include is not None:
                # each pattern's own groups lose their names (they repeat): the alternatives are named
                parts.append(f"(?P<p{len(parts)}>{_GROUP_NAME.sub('(?:', regex)})")
                self._includes.append(include)
        self._regex = re.compile("|".join(reversed(parts))) if parts else None

    def verdict(self, path: Path, is_dir: bool) -> bool | None:
        """True if ignored, False if re-included by a `!` pattern, None if no pattern matches."""
        return self.verdict_for(match_path(path, self.folder, is_dir))

    def verdict_for(self, relative: str) -> bool | None:
        match = self._regex.match(relative) if self._regex is not None else None
        if match is None:
            return None
        return self._includes[int(match.lastgroup[1:])]


class _Walk:
    def __init__(self, root: Path, exclude: Patterns, respect_gitignore: bool,
                 unreadable: list[str], cwd: Path) -> None:
        self.root = root
        self._root_prefix = os.path.join(str(root), "")
        self.exclude = exclude
        self.respect_gitignore = respect_gitignore
        self.unreadable = unreadable  # messages: what could not be read, and what that means
        self.cwd = cwd
        self.visited: set[tuple[int, int]] = set()

    def python_files(self, start: Path) -> Iterator[Path]:
        """The source files under `start`, in a stable order. Paths are strings inside the walk
        (pathlib objects for each of thousands of entries cost more than the rest of it).
        A folder link is followed only to a folder inside `start`: `fix` writes what it finds."""
        tree = os.path.join(os.path.realpath(start), "")
        gitignores = self._gitignores_above(start)
        stack = [(start, self._matches(start, True, gitignores), gitignores)]
        while stack:
            folder, folder_matches, gitignores = stack.pop()
            entries = self._list(folder)
            if entries is None:
                continue
            if self.respect_gitignore:
                gitignores = gitignores + self._gitignore_in(folder)
            for entry in entries:
                try:
                    is_dir, is_file = entry.is_dir(), entry.is_file()
                except OSError:  # vanished, or a symlink loop
                    continue
                if is_dir:
                    if entry.is_symlink() and not os.path.join(os.path.realpath(entry.path), "").startswith(tree):
                        continue
                    if os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):  # a virtual environment
                        continue
                    matches = self._matches_entry(entry.path, True, gitignores, folder_matches)
                    # a match inherited from the parent means the user named an excluded folder: walk it
                    if not matches or folder_matches:
                        stack.append((Path(entry.path), matches, gitignores))
                elif is_file and entry.name.endswith(SOURCE_SUFFIXES):
                    if folder_matches or not self._matches_entry(entry.path, False, gitignores):
                        yield Path(entry.path)

    def _matches_entry(self, path: str, is_dir: bool, gitignores: tuple[_GitIgnore, ...],
                       in_match: bool = False) -> bool:
        """`_matches` for a path below the folders of `gitignores`, given as a string; `in_match`: its
        folder matches."""
        root = self._root_prefix
        suffix = "/" if is_dir else ""
        if self.exclude.names is not None and not in_match:  # the folders above did not match
            if os.path.basename(path) in self.exclude.names:
                return True
        elif self.exclude.match_file((path[len(root):] if path.startswith(root) else os.path.basename(path))
                                     .replace(os.sep, "/") + suffix):
            return True
        for gitignore in reversed(gitignores):  # the deepest .gitignore decides first
            verdict = gitignore.verdict_for(path[len(gitignore.prefix):].replace(os.sep, "/") + suffix)
            if verdict is not None:
                return verdict
        return False

    def _list(self, folder: Path) -> list[os.DirEntry] | None:
        try:
            status = folder.stat()
            if (status.st_dev, status.st_ino) in self.visited:  # a symlink loop, or a second link
                return None
            self.visited.add((status.st_dev, status.st_ino))
            with os.scandir(folder) as entries:
                return sorted(entries, key=lambda entry: entry.name)
        except FileNotFoundError:  # vanished while we walked
            return None
        except OSError as error:
            self.unreadable.append(f"cannot read folder {shown_path(folder, self.cwd)}: "
                                   f"{error.strerror or error}; its files are not checked")
            return None

    def excluded(self, path: Path) -> bool:
        """Whether a named file, or a folder above it inside the project, is excluded."""
        gitignores = self._gitignores_above(path)
        folders = [folder for folder in path.parents if self.root in folder.parents]
        return self._matches(path, False, gitignores) or any(
            self._matches(folder, True, gitignores) for folder in folders)

    def _matches(self, path: Path, is_dir: bool, gitignores: tuple[_GitIgnore, ...]) -> bool:
        if path != self.root and self.exclude.match_file(match_path(path, self.root, is_dir)):
            return True
        for gitignore in reversed(gitignores):  # the deepest .gitignore decides first
            if path == gitignore.folder or gitignore.folder not in path.parents:
                continue
            verdict = gitignore.verdict(path, is_dir)
            if verdict is not None:
                return verdict
        return False

    def _gitignores_above(self, start: Path) -> tuple[_GitIgnore, ...]:
        """The .gitignore files from the project root down to just above `start`."""
        if not self.respect_gitignore or self.root not in start.parents:
            return ()
        folders = [folder for folder in reversed(start.parents)
                   if folder == self.root or self.root in folder.parents]
        return tuple(gitignore for folder in folders for gitignore in self._gitignore_in(folder))

    def _gitignore_in(self, folder: Path) -> tuple[_GitIgnore, ...]:
        path = folder / ".gitignore"
        try:
            text = read_regular_file(path).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ()
        except OSError as error:  # as git does: say so, and go on without its patterns
            self.unreadable.append(f"cannot read {shown_path(path, self.cwd)}: "
                                   f"{error.strerror or error}; its patterns are not applied")
            return ()
        return (_GitIgnore(folder, text.splitlines()),)


def repository_root(start: Path) -> Path:
    """The nearest folder from `start` upwards that holds `.git` (a folder, or a worktree's file); else `start`."""
    return next((folder for folder in (start, *start.parents) if (folder / ".git").exists()), start)
