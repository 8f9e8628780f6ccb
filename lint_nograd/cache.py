"""Findings of earlier runs, keyed by file content, tool version and the rules checked.

One file per cache folder, read once at the start and written atomically at the end. A file's
entry is found by a hash of its bytes, this tool's code and the codes checked in it, so an edit,
a new version or another configuration misses the cache instead of reusing stale findings.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from lint_nograd.diagnostics import Diagnostic, Edit, Fix

FOLDER_NAME = ".lint_nograd_cache"
_FILE_NAME = "findings.json"
_MAX_ENTRIES = 50_000  # past this, keep only the entries this run used


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


class Cache:
    def __init__(self, folder: Path | None):
        self.folder = folder
        self._fingerprint = hashlib.blake2b(_tool_fingerprint(), digest_size=16).digest()
        self._entries: dict[str, list[dict]] = {}
        self._used: dict[str, list[dict]] = {}
        if folder is not None:
            try:
                entries = json.loads((folder / _FILE_NAME).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                entries = {}  # no cache yet, or a damaged one: start afresh
            self._entries = entries if isinstance(entries, dict) else {}

    def key(self, data: bytes, codes: frozenset[str]) -> str:
        if self.folder is None:
            return ""  # no cache: nothing to look up
        digest = hashlib.blake2b(self._fingerprint, digest_size=20)
        digest.update(",".join(sorted(codes)).encode() + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def get(self, key: str, display_path: str) -> list[Diagnostic] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        try:
            diagnostics = [_diagnostic(found, display_path) for found in entry]
        except (TypeError, KeyError, AttributeError):  # an entry of another shape: a miss
            return None
        self._used[key] = entry
        return diagnostics

    def put(self, key: str, diagnostics: list[Diagnostic]) -> None:
        if self.folder is not None:
            self._used[key] = [asdict(d) for d in diagnostics]

    def save(self) -> None:
        """Write the cache; a folder that cannot be written just means no cache next time."""
        if self.folder is None or not self._used:
            return
        entries = {**self._entries, **self._used}
        if len(entries) > _MAX_ENTRIES:
            entries = self._used
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
                json.dump(entries, stream)
            os.replace(temporary, self.folder / _FILE_NAME)
        except OSError:
            Path(temporary).unlink(missing_ok=True)


def _diagnostic(found: dict, display_path: str) -> Diagnostic:
    found = dict(found)
    fix = found.pop("fix")
    if fix is not None:
        fix = Fix(fix["message"], tuple(Edit(**edit) for edit in fix["edits"]), fix["applicability"])
    return Diagnostic(**{**found, "path": display_path}, fix=fix)
