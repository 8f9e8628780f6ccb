"""Findings of earlier runs, so that an unchanged file is neither read nor parsed again.

One file per cache folder, read once by each process that needs it and written atomically at the
end of a run. Findings are stored under a hash of the file's bytes, this tool's code and the
rules checked in it: an edit, a new version or another configuration misses. A second index maps
a file's path and status (size, modification and change times, inode) to that hash, as git does,
so that a warm run only looks at file status. A file modified shortly before its entry was
recorded may have changed again within the same timestamp tick: its bytes are hashed again
before the entry is trusted.

The file keeps a section per version of this tool (two installed versions may share a project):
the section of this version is checked entry by entry when read, and a cache that does not fit
is dropped with one warning. The folder and its files are never written through a symbolic link.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from dataclasses import asdict, fields
from pathlib import Path

from lint_nograd.diagnostics import Diagnostic, Edit, Fix
from lint_nograd.files import shown_path
from lint_nograd.regular_file import read_regular_file
from lint_nograd.registry import RULES

FOLDER_NAME = ".lint_nograd_cache"
_FILE_NAME = "findings.json"
_FORMAT = 2  # the layout of the file: {"format", "versions": {tool: {"written", "findings", "files"}}}
_MAX_ENTRIES = 50_000  # past this, keep only the entries this run used
_MAX_BYTES = 256 * 2**20  # a larger file is no cache of ours; reading it could exhaust memory
_OTHER_VERSIONS = 3  # sections of other versions kept, the most recently written first
_RACY_NS = 2_000_000_000  # coarser than any file system's timestamps (FAT's are 2 s)

FileStatus = tuple[int, int, int, int]  # (modification time in ns, size, inode, change time in ns)


class DamagedCache(ValueError):
    """The cache file is not what this tool writes."""


def _tool_fingerprint() -> bytes:
    """The version, and every source file of the package: an edited checkout is a new version."""
    from lint_nograd import __version__

    package = Path(__file__).parent
    parts = [__version__]
    for source in sorted(package.rglob("*.py")):
        status = source.stat()
        parts.append(f"{source.relative_to(package)}:{status.st_size}:{status.st_mtime_ns}")
    return "\n".join(parts).encode()


def cache_version(folder: Path) -> tuple[int, int] | None:
    """Changes whenever the cache file of `folder` is written."""
    try:
        status = (folder / _FILE_NAME).stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def file_status(path: Path) -> FileStatus | None:
    try:
        status = path.stat()
    except OSError:
        return None  # reported when the file is read
    return status.st_mtime_ns, status.st_size, status.st_ino, status.st_ctime_ns


class Cache:
    """The findings of earlier runs in `folder`; `None` for no cache. `problem` says why a cache
    that was there could not be used (the caller reports it once); the next save replaces it."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.problem: str | None = None
        self._fingerprint = hashlib.blake2b(_tool_fingerprint(), digest_size=16).digest()
        self._findings: dict[str, list[dict]] = {}  # content key -> findings
        self._files: dict[str, list] = {}  # file key -> [content key, when it was recorded]
        self._used_findings: dict[str, list[dict]] = {}
        self._used_files: dict[str, list] = {}
        self._other_versions: dict[str, dict] = {}  # the sections of other versions, as read
        if folder is None:
            return
        if _is_link(folder):
            self.folder = None
            self.problem = f"the cache folder {shown_path(folder, Path.cwd())} is a symbolic link; not used"
            return
        try:
            self._read(read_regular_file(folder / _FILE_NAME, _MAX_BYTES, follow_symlinks=False))
        except FileNotFoundError:
            pass  # no cache yet
        except (OSError, DamagedCache) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            shown = shown_path(folder / _FILE_NAME, Path.cwd())
            self.problem = f"cannot use the cache {shown}: {reason}; starting afresh"
            self._findings, self._files, self._other_versions = {}, {}, {}

    def _read(self, data: bytes) -> None:
        try:
            stored = json.loads(data)
        except (ValueError, RecursionError):  # also invalid UTF-8
            raise DamagedCache("not JSON") from None
        if isinstance(stored, dict) and stored.keys() == {"findings", "files"}:
            return  # written by a version before sections: of no use to this one
        versions = stored.get("versions") if isinstance(stored, dict) and stored.get("format") == _FORMAT else None
        if not isinstance(versions, dict):
            raise DamagedCache("not a cache of this tool")
        for section in versions.values():
            if not (isinstance(section, dict) and isinstance(section.get("written"), int)
                    and isinstance(section.get("findings"), dict) and isinstance(section.get("files"), dict)):
                raise DamagedCache("a section of another shape")
        ours = versions.pop(self._fingerprint.hex(), None)
        self._other_versions = versions
        if ours is not None:
            _check_findings(ours["findings"])
            _check_files(ours["files"])
            self._findings, self._files = ours["findings"], ours["files"]

    def _key(self, *parts: bytes) -> str:
        digest = hashlib.blake2b(self._fingerprint, digest_size=20)
        for part in parts:
            digest.update(part + b"\0")
        return digest.hexdigest()

    def content_key(self, data: bytes, codes: frozenset[str]) -> str:
        if self.folder is None:
            return ""  # no cache: nothing to look up
        return self._key(",".join(sorted(codes)).encode(), data)

    def _file_key(self, path: Path, status: FileStatus, codes: frozenset[str]) -> str:
        return self._key(",".join(sorted(codes)).encode(), os.fsencode(path), repr(status).encode())

    def known(self, path: Path, display_path: str, codes: frozenset[str]) -> list[Diagnostic] | None:
        """The findings of a file whose status is that of a file checked before, without reading it."""
        status = self.folder is not None and file_status(path)
        entry = status and self._files.get(self._file_key(path, status, codes))
        if not entry:
            return None
        content_key, recorded = entry
        if status[0] + _RACY_NS >= recorded:
            return None  # modified just before it was recorded: it may have changed since
        found = self.get(content_key, display_path)
        if found is not None:
            self._used_files[self._file_key(path, status, codes)] = entry
        return found

    def get(self, content_key: str, display_path: str) -> list[Diagnostic] | None:
        entry = self._findings.get(content_key)
        if entry is None:
            return None
        self._used_findings[content_key] = entry
        return [_diagnostic(found, display_path) for found in entry]

    def put(self, path: Path, status: FileStatus | None, codes: frozenset[str], content_key: str,
            diagnostics: list[Diagnostic]) -> None:
        if self.folder is None or not content_key:
            return
        self._used_findings[content_key] = [asdict(d) for d in diagnostics]
        if status is not None:
            self._used_files[self._file_key(path, status, codes)] = [content_key, time.time_ns()]

    def save(self) -> None:
        """Write the cache; a folder that cannot be written just means no cache next time."""
        if self.folder is None or not (self._used_findings or self._used_files):
            return
        findings = {**self._findings, **self._used_findings}
        files = {**self._files, **self._used_files}
        if len(findings) + len(files) > _MAX_ENTRIES:
            findings, files = self._used_findings, self._used_files
        others = sorted(self._other_versions.items(), key=lambda item: item[1]["written"], reverse=True)
        versions = {self._fingerprint.hex(): {"written": time.time_ns(), "findings": findings, "files": files},
                    **dict(others[:_OTHER_VERSIONS])}
        text = json.dumps({"format": _FORMAT, "versions": versions})
        if len(text) > _MAX_BYTES:  # then it could not be read back: this run's entries alone
            versions = {self._fingerprint.hex(): {"written": time.time_ns(), "findings": self._used_findings,
                                                  "files": self._used_files}}
            text = json.dumps({"format": _FORMAT, "versions": versions})
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if _is_link(self.folder):
                return
            if len(text) > _MAX_BYTES:
                (self.folder / _FILE_NAME).unlink(missing_ok=True)
                return
            _create_gitignore(self.folder)
            handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=".findings-")  # O_EXCL
        except OSError:
            return
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(temporary, self.folder / _FILE_NAME)  # replaces a link itself, never its target
        except OSError:
            Path(temporary).unlink(missing_ok=True)


def _is_link(folder: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(folder).st_mode)
    except OSError:
        return False  # not there yet


def _create_gitignore(folder: Path) -> None:
    """`*` in the folder's .gitignore, unless something is there already (even a link to nowhere)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        handle = os.open(folder / ".gitignore", flags, 0o644)
    except FileExistsError:
        return
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write("# Created by lint-nograd.\n*\n")


# -- what this version writes, checked when read: a finding is Diagnostic's fields -----------------

_FINDING_KEYS = frozenset(field.name for field in fields(Diagnostic))
_EDIT_KEYS = frozenset(field.name for field in fields(Edit))
_FIX_KEYS = frozenset(field.name for field in fields(Fix))
_POSITIONS = ("row", "col", "end_row", "end_col")


def _check_findings(findings: dict) -> None:
    for entry in findings.values():
        if not isinstance(entry, list) or not all(_is_finding(found) for found in entry):
            raise DamagedCache("findings of another shape")


def _check_files(files: dict) -> None:
    for entry in files.values():
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and _is_count(entry[1])):
            raise DamagedCache("a file entry of another shape")


def _is_finding(found: object) -> bool:
    return (isinstance(found, dict) and found.keys() == _FINDING_KEYS
            and found["code"] in RULES and found["severity"] in ("error", "warning")
            and all(isinstance(found[key], str) for key in ("message", "path", "source_line"))
            and all(_is_count(found[key]) for key in _POSITIONS)
            and (found["cell"] is None or _is_count(found["cell"]))
            and (found["fix"] is None or _is_fix(found["fix"])))


def _is_fix(fix: object) -> bool:
    return (isinstance(fix, dict) and fix.keys() == _FIX_KEYS
            and isinstance(fix["message"], str) and isinstance(fix["applicability"], str)
            and isinstance(fix["edits"], list) and all(
                isinstance(edit, dict) and edit.keys() == _EDIT_KEYS and isinstance(edit["content"], str)
                and all(_is_count(edit[key]) for key in _POSITIONS) for edit in fix["edits"]))


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0  # bool is no count


def _diagnostic(found: dict, display_path: str) -> Diagnostic:
    found = dict(found)
    fix = found.pop("fix")
    if fix is not None:
        fix = Fix(fix["message"], tuple(Edit(**edit) for edit in fix["edits"]), fix["applicability"])
    return Diagnostic(**{**found, "path": display_path}, fix=fix)
