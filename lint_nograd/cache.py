"""Findings of earlier runs, so that an unchanged file is neither read nor parsed again.

One file per cache folder, read once by each process that needs it and written atomically at the
end of a run. Findings are stored under a hash of the file's bytes, this tool's code and the
rules checked in it: an edit, a new version or another configuration misses. A second index maps
a file's path, size and modification time to that hash, as ruff and git do, so that a warm run
only looks at file status. A file modified shortly before its entry was recorded may have changed
again within the same timestamp tick: its bytes are hashed again before the entry is trusted.
"""
from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=None)
def _tool_fingerprint() -> bytes:
    """The version, and every source file of the package: an edited checkout is a new version."""
    from lint_nograd import __version__

    package = Path(__file__).parent
    parts = [__version__]
    for source in sorted(package.rglob("*.py")):
        stat = source.stat()
        parts.append(f"{source.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=16).digest()


def content_key(data: bytes) -> str:
    """The name of a file's bytes as this version of the tool knows them."""
    return _key(data)


def _key(*parts: bytes) -> str:
    digest = hashlib.blake2b(_tool_fingerprint(), digest_size=20)
    for part in parts:
        digest.update(part + b"\0")
    return digest.hexdigest()


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
    """Entries keyed by the hash of a file's bytes (and of this tool's code); each entry is a dict
    of what is known of those bytes: "index" (the text index), "summary", "local" findings per
    rule selection, "finished" findings per link. A second index knows files by their status."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self._entries: dict[str, dict] = {}  # content key -> entry
        self._files: dict[str, list] = {}  # file key -> [content key, when it was recorded]
        self._used_entries: dict[str, dict] = {}
        self._used_files: dict[str, list] = {}
        if folder is not None:
            try:
                stored = json.loads((folder / _FILE_NAME).read_text(encoding="utf-8"))
                entries, files = stored["entries"], stored["files"]
                if isinstance(entries, dict) and isinstance(files, dict):
                    self._entries, self._files = entries, files
            except (OSError, ValueError, TypeError, KeyError):
                pass  # no cache yet, or a damaged one: start afresh

    @staticmethod
    def _file_key(path: Path, status: FileStatus) -> str:
        return _key(os.fsencode(path), repr(status).encode())

    def known(self, path: Path) -> str | None:
        """The content key of a file whose status is that of a file seen before, without reading it."""
        status = self.folder is not None and file_status(path)
        file_key = status and self._file_key(path, status)
        entry = file_key and self._files.get(file_key)
        if not entry or not isinstance(entry, list) or len(entry) != 2:
            return None
        content_key, recorded = entry
        if not isinstance(recorded, int) or status[0] + _RACY_NS >= recorded:
            return None  # modified just before it was recorded: it may have changed since
        if not isinstance(self._entries.get(content_key), dict):
            return None
        self._used_files[file_key] = entry
        return content_key

    def entry(self, content_key: str) -> dict:
        """What is known of these bytes; the caller adds to it, and it is saved."""
        if not content_key:
            return {}
        entry = self._used_entries.get(content_key)
        if entry is None:
            entry = self._entries.get(content_key)
            entry = dict(entry) if isinstance(entry, dict) else {}
            self._used_entries[content_key] = entry
        return entry

    def peek(self, content_key: str) -> dict | None:
        """The entry of these bytes, to read only."""
        return self._used_entries.get(content_key) or self._entries.get(content_key)

    def record(self, path: Path, status: FileStatus | None, content_key: str) -> None:
        """`path`, which had `status` when it was read, holds the bytes of `content_key`."""
        if self.folder is not None and content_key and status is not None:
            self._used_files[self._file_key(path, status)] = [content_key, time.time_ns()]

    def save(self) -> None:
        """Write the cache; a folder that cannot be written just means no cache next time."""
        if self.folder is None or not (self._used_entries or self._used_files):
            return
        entries = {**self._entries, **self._used_entries}
        files = {**self._files, **self._used_files}
        if len(entries) + len(files) > _MAX_ENTRIES:
            entries, files = self._used_entries, self._used_files
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
                json.dump({"entries": entries, "files": files}, stream, separators=(",", ":"))
            os.replace(temporary, self.folder / _FILE_NAME)
        except OSError:
            Path(temporary).unlink(missing_ok=True)


def diagnostics_to_json(diagnostics: list[Diagnostic]) -> list[dict]:
    return [asdict(d) for d in diagnostics]


def diagnostics_from_json(found: object, display_path: str) -> list[Diagnostic] | None:
    """The diagnostics stored for a file, shown under `display_path`; None for data of another shape."""
    try:
        return [_diagnostic(entry, display_path) for entry in found]
    except (TypeError, KeyError, AttributeError, ValueError):
        return None


def _diagnostic(found: dict, display_path: str) -> Diagnostic:
    found = dict(found)
    fix = found.pop("fix")
    if fix is not None:
        fix = Fix(fix["message"], tuple(Edit(**edit) for edit in fix["edits"]), fix["applicability"])
    return Diagnostic(**{**found, "path": display_path}, fix=fix)
