"""Findings of earlier runs, so that an unchanged file is neither read nor parsed again.

One file per cache folder, read once by each process that needs it and written atomically at the
end of a run. Findings are stored under a hash of the file's bytes, this tool's code and the
rules checked in it: an edit, a new version or another configuration misses. A second index maps
a file's path, size and modification time to that hash, as ruff and git do, so that a warm run
only looks at file status. A file modified shortly before its entry was recorded may have changed
again within the same timestamp tick: its bytes are hashed again before the entry is trusted.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from lint_nograd.diagnostics import Diagnostic, Edit, Fix

FOLDER_NAME = ".lint_nograd_cache"
_FILE_NAME = "findings.json"
_MAX_ENTRIES = 50_000  # past this, keep only the entries this run used
_RACY_NS = 2_000_000_000  # coarser than any file system's timestamps (FAT's are 2 s)

FileStatus = tuple[int, int]  # (modification time in ns, size)


def _tool_fingerprint() -> bytes:
    """The version, and every source file of the package: an edited checkout is a new version."""
    from lint_nograd import __version__

    package = Path(__file__).parent
    parts = [__version__]
    for source in sorted(package.rglob("*.py")):
        stat = source.stat()
        parts.append(f"{source.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns}")
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
    return status.st_mtime_ns, status.st_size


class Cache:
    def __init__(self, folder: Path | None, settings: bytes = b""):
        """`settings`: the configuration findings depend on besides the rules (the fixes' `stop-gradient`)."""
        self.folder = folder
        self._fingerprint = hashlib.blake2b(_tool_fingerprint() + b"\0" + settings, digest_size=16).digest()
        self._findings: dict[str, list[dict]] = {}  # content key -> findings
        self._files: dict[str, list] = {}  # file key -> [content key, when it was recorded]
        self._used_findings: dict[str, list[dict]] = {}
        self._used_files: dict[str, list] = {}
        if folder is not None:
            try:
                stored = json.loads((folder / _FILE_NAME).read_text(encoding="utf-8"))
                self._findings, self._files = dict(stored["findings"]), dict(stored["files"])
            except (OSError, ValueError, TypeError, KeyError):
                pass  # no cache yet, or a damaged one: start afresh

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
        if not entry or not isinstance(entry, list) or len(entry) != 2:
            return None
        content_key, recorded = entry
        if not isinstance(recorded, int) or status[0] + _RACY_NS >= recorded:
            return None  # modified just before it was recorded: it may have changed since
        found = self.get(content_key, display_path)
        if found is not None:
            self._used_files[self._file_key(path, status, codes)] = entry
        return found

    def get(self, content_key: str, display_path: str) -> list[Diagnostic] | None:
        entry = self._findings.get(content_key)
        if entry is None:
            return None
        try:
            diagnostics = [_diagnostic(found, display_path) for found in entry]
        except (TypeError, KeyError, AttributeError):  # an entry of another shape: a miss
            return None
        self._used_findings[content_key] = entry
        return diagnostics

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
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            ignore = self.folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Created by lint-nograd.\n*\n")
            handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=".findings-")
        except OSError:
            return
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump({"findings": findings, "files": files}, stream)
            os.replace(temporary, self.folder / _FILE_NAME)
        except OSError:
            Path(temporary).unlink(missing_ok=True)


def _diagnostic(found: dict, display_path: str) -> Diagnostic:
    found = dict(found)
    fix = found.pop("fix")
    if fix is not None:
        fix = Fix(fix["message"], tuple(Edit(**edit) for edit in fix["edits"]), fix["applicability"])
    return Diagnostic(**{**found, "path": display_path}, fix=fix)
