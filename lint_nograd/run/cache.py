"""What earlier runs learned of each file, so that an unchanged file is neither read nor parsed again.

By default the cache of a project lives in the user's cache folder (as pip's and pre-commit's do),
one folder per project name (`default_folder`): every checkout and branch of the project shares
it, so that a fresh clone, a CI job that restores that folder, or a branch switch reads only what
changed. One file per cache folder, read once by each process that needs it and written atomically
at the end of a run (concurrent runs each write a whole file; the last one stays). Entries are stored under a hash of a file's bytes and of this tool's code: an edit
or a new version misses. An entry holds what is known of those bytes: the text index, the
summary, what the calls of a module linking follows pass, the local findings per rule selection,
the finished findings per link. A second index maps a file's path and status (size, modification
and change times, inode) to that hash, as git does, so that a warm run only looks at file status.
A file modified shortly before its entry was recorded may have changed again within the same
timestamp tick: its bytes are hashed again before the entry is trusted.

The file keeps a section per version of this tool (two installed versions may share a project):
the section of this version is checked entry by entry when read, and a cache that does not fit
is dropped with one warning. The folder and its files are never written through a symbolic link.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path

from lint_nograd.analysis.torch_names import TextIndex
from lint_nograd.report.diagnostics import Diagnostic, Edit, Fix, Related
from lint_nograd.report.registry import RULES, SEVERITIES
from lint_nograd.run.files import shown_path
from lint_nograd.run.regular_file import read_regular_file

FOLDER_NAME = ".lint_nograd_cache"
_FILE_NAME = "findings.json"
_LAST_RUN = "last_run.json"  # what the last run found: small, read first
_FORMAT = 3  # {"format", "versions": {tool: {"written", "entries", "files"}}}
_MAX_ENTRIES = 50_000  # past this, keep only the entries this run used
_MAX_BYTES = 256 * 2**20  # a larger file is no cache of ours; reading it could exhaust memory
_OTHER_VERSIONS = 3  # sections of other versions kept, the most recently written first
RACY_NS = 2_000_000_000  # coarser than any file system's timestamps (FAT's are 2 s)

FileStatus = tuple[int, int, int, int]  # (modification time in ns, size, inode, change time in ns)


class DamagedCache(ValueError):
    """The cache file is not what this tool writes."""


@functools.lru_cache(maxsize=None)
def _tool_fingerprint() -> bytes:
    """The version, and every source file of the package: an edited checkout is a new version."""
    from lint_nograd import __version__

    package = Path(__file__).parent.parent
    parts = [__version__]
    for source in sorted(package.rglob("*.py")):
        status = source.stat()
        parts.append(f"{source.relative_to(package)}:{status.st_size}:{status.st_mtime_ns}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=16).digest()


def default_folder(root: Path) -> Path:
    """The cache folder of the project at `root`: `<user cache>/lint-nograd/<the root's name>`,
    where the user cache is $LINT_NOGRAD_CACHE_DIR, else the platform's ($XDG_CACHE_HOME or
    ~/.cache, ~/Library/Caches, %LOCALAPPDATA%); `.lint_nograd_cache` in the project when there
    is no home folder to find one in."""
    base = os.environ.get("LINT_NOGRAD_CACHE_DIR")
    if not base:
        if sys.platform == "win32":
            user = os.environ.get("LOCALAPPDATA") or os.path.expanduser(r"~\AppData\Local")
        elif sys.platform == "darwin":
            user = os.path.expanduser("~/Library/Caches")
        else:
            xdg = os.environ.get("XDG_CACHE_HOME", "")
            # the XDG spec: a relative path is invalid and must be ignored
            user = xdg if os.path.isabs(xdg) else os.path.expanduser("~/.cache")
        if not os.path.isabs(user):  # no home folder
            return (root / FOLDER_NAME).absolute()
        base = os.path.join(user, "lint-nograd")
    name = re.sub(r"[^\w.-]", "_", Path(os.path.abspath(root)).name).strip(".") or "root"
    return Path(os.path.abspath(base)) / name


def content_key(data: bytes) -> str:
    """The name of a file's bytes as this version of the tool knows them."""
    return _key(data)


def _key(*parts: bytes) -> str:
    digest = hashlib.blake2b(_tool_fingerprint(), digest_size=20)
    for part in parts:
        digest.update(part + b"\0")
    return digest.hexdigest()


def file_status(path: Path) -> FileStatus | None:
    try:
        status = path.stat()
    except OSError:
        return None  # reported when the file is read
    return status.st_mtime_ns, status.st_size, status.st_ino, status.st_ctime_ns


class Cache:
    """What earlier runs learned, in `folder`; `None` for no cache. `problem` says why a cache that
    was there could not be used (the caller reports it once); the next save replaces it."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.problem: str | None = None
        self._entries: dict[str, dict] = {}  # content key -> entry
        self._files: dict[str, list] = {}  # file key -> [content key, when it was recorded]
        self._used_entries: dict[str, dict] = {}
        self._used_files: dict[str, list] = {}
        self._other_versions: dict[str, dict] = {}  # the sections of other versions, as read
        self._loaded = True  # the file is read when an entry is first needed: the last run may need none
        if folder is None:
            return
        if _is_link(folder):
            self.folder = None
            self.problem = f"the cache folder {shown_path(folder, Path.cwd())} is a symbolic link; not used"
            return
        self._loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            self._read(read_regular_file(self.folder / _FILE_NAME, _MAX_BYTES, follow_symlinks=False))
        except FileNotFoundError:
            pass  # no cache yet
        except (OSError, DamagedCache) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            shown = shown_path(self.folder / _FILE_NAME, Path.cwd())
            self.problem = f"cannot use the cache {shown}: {reason}; starting afresh"
            self._entries, self._files, self._other_versions = {}, {}, {}

    def _read(self, data: bytes) -> None:
        try:
            stored = json.loads(data)
        except (ValueError, RecursionError):  # also invalid UTF-8
            raise DamagedCache("not JSON") from None
        if not isinstance(stored, dict) or stored.get("format") != _FORMAT:
            if isinstance(stored, dict) and isinstance(stored.get("format", 0), int) and "versions" in stored:
                return  # written in the layout of another version of this tool: of no use to this one
            if isinstance(stored, dict) and stored.keys() == {"findings", "files"}:
                return  # the layout before sections
            raise DamagedCache("not a cache of this tool")
        versions = stored.get("versions")
        if not isinstance(versions, dict):
            raise DamagedCache("not a cache of this tool")
        for section in versions.values():
            if not (isinstance(section, dict) and isinstance(section.get("written"), int)
                    and isinstance(section.get("entries"), dict) and isinstance(section.get("files"), dict)):
                raise DamagedCache("a section of another shape")
        ours = versions.pop(_tool_fingerprint().hex(), None)
        self._other_versions = versions
        if ours is not None:
            _check_entries(ours["entries"])
            _check_files(ours["files"])
            self._entries, self._files = ours["entries"], ours["files"]

    @staticmethod
    def _file_key(path: Path, status: FileStatus) -> str:
        return _key(os.fsencode(path), repr(status).encode())

    def known(self, path: Path) -> str | None:
        """The content key of a file whose status is that of a file seen before, without reading it."""
        self._load()
        status = self.folder is not None and file_status(path)
        file_key = status and self._file_key(path, status)
        entry = file_key and self._files.get(file_key)
        if not entry:
            return None
        content_key, recorded = entry
        if status[0] + RACY_NS >= recorded or content_key not in self._entries:
            return None  # modified just before it was recorded: it may have changed since
        self._used_files[file_key] = entry
        return content_key

    def entry(self, content_key: str) -> dict:
        """What is known of these bytes; the caller adds to it, and it is saved."""
        if not content_key:
            return {}
        self._load()
        entry = self._used_entries.get(content_key)
        if entry is None:
            entry = self._used_entries[content_key] = dict(self._entries.get(content_key, {}))
        return entry

    def peek(self, content_key: str) -> dict | None:
        """The entry of these bytes, to read only."""
        self._load()
        return self._used_entries.get(content_key) or self._entries.get(content_key)

    def record(self, path: Path, status: FileStatus | None, content_key: str) -> None:
        """`path`, which had `status` when it was read, holds the bytes of `content_key`."""
        if self.folder is not None and content_key and status is not None:
            self._used_files[self._file_key(path, status)] = [content_key, time.time_ns()]

    def save(self) -> None:
        """Write the cache; a folder that cannot be written just means no cache next time."""
        if self.folder is None or not (self._used_entries or self._used_files):
            return
        self._load()
        entries = {**self._entries, **self._used_entries}
        files = {**self._files, **self._used_files}
        if len(entries) + len(files) > _MAX_ENTRIES:
            entries, files = self._used_entries, self._used_files
        fingerprint = _tool_fingerprint().hex()
        others = sorted(self._other_versions.items(), key=lambda item: item[1]["written"], reverse=True)
        versions = {fingerprint: {"written": time.time_ns(), "entries": entries, "files": files},
                    **dict(others[:_OTHER_VERSIONS])}
        text = json.dumps({"format": _FORMAT, "versions": versions}, separators=(",", ":"))
        if len(text) > _MAX_BYTES:  # then it could not be read back: this run's entries alone
            versions = {fingerprint: {"written": time.time_ns(), "entries": self._used_entries,
                                      "files": self._used_files}}
            text = json.dumps({"format": _FORMAT, "versions": versions}, separators=(",", ":"))
        self._write(_FILE_NAME, text)

    def last_run(self, key: str) -> dict | None:
        """What the last run with the options `key` left (see runner), unless the cache file changed since."""
        if self.folder is None:
            return None
        try:
            stored = json.loads(read_regular_file(self.folder / _LAST_RUN, _MAX_BYTES, follow_symlinks=False))
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(stored, dict) or stored.get("key") != key or stored.get("cache") != self._file_status():
            return None
        return stored

    def save_last_run(self, record: dict) -> None:
        """Keep what this run found for the next one (after `save`: it names the cache file's status)."""
        if self.folder is not None:
            self._write(_LAST_RUN, json.dumps({**record, "cache": self._file_status()}, separators=(",", ":")))

    def _file_status(self) -> list | None:
        status = file_status(self.folder / _FILE_NAME)
        return list(status) if status else None

    def _write(self, name: str, text: str) -> None:
        """Replace `name` in the folder whole, or leave it as it was."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if _is_link(self.folder):
                return
            if len(text) > _MAX_BYTES:
                (self.folder / name).unlink(missing_ok=True)
                return
            _create_gitignore(self.folder)
            handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=f".{name}-")  # O_EXCL
        except OSError:
            return
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(temporary, self.folder / name)  # replaces a link itself, never its target
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


def diagnostics_to_json(diagnostics: list[Diagnostic]) -> list[dict]:
    """As `dataclasses.asdict` makes them, ten times faster: a finding's fields are its `__dict__`."""
    return [_finding_to_json(d) for d in diagnostics]


def _finding_to_json(diagnostic: Diagnostic) -> dict:
    found = dict(diagnostic.__dict__)
    if diagnostic.fix is not None:
        fix = found["fix"] = dict(diagnostic.fix.__dict__)
        fix["edits"] = tuple(dict(edit.__dict__) for edit in diagnostic.fix.edits)
    found["related"] = tuple(dict(related.__dict__) for related in diagnostic.related)
    return found


def diagnostics_from_json(found: object, display_path: str) -> list[Diagnostic] | None:
    """The diagnostics stored for a file, shown under `display_path`; None when there are none."""
    if not isinstance(found, list) or not all(_is_finding(entry) for entry in found):
        return None
    return [_diagnostic(entry, display_path) for entry in found]


# -- what this version writes, checked when read: a finding is Diagnostic's fields -----------------

_ENTRY_KEYS = frozenset({"index", "summary", "local", "finished", "mentions", "passes"})
_SUMMARY_KEYS = frozenset({"functions", "classes", "names", "regions", "backwards"})
_FINDING_KEYS = frozenset(field.name for field in fields(Diagnostic))
_EDIT_KEYS = frozenset(field.name for field in fields(Edit))
_FIX_KEYS = frozenset(field.name for field in fields(Fix))
_RELATED_KEYS = frozenset(field.name for field in fields(Related))
_POSITIONS = ("row", "col", "end_row", "end_col")


def _check_entries(entries: dict) -> None:
    """The shape of every entry (a summary's inside is checked when it is used)."""
    for entry in entries.values():
        if not (isinstance(entry, dict) and entry.keys() <= _ENTRY_KEYS
                and ("index" not in entry or _is_index(entry["index"]))
                and (entry.get("summary") is None or isinstance(entry["summary"], dict)
                     and entry["summary"].keys() >= _SUMMARY_KEYS)  # later fields are read when used
                and all(isinstance(entry.get(key, {}), dict) for key in ("local", "finished", "mentions", "passes"))
                and all(isinstance(found, list) and all(_is_finding(f) for f in found)
                        for key in ("local", "finished") for found in entry.get(key, {}).values())
                and all(isinstance(value, bool) for value in entry.get("mentions", {}).values())):
            raise DamagedCache("an entry of another shape")


def _is_index(index: object) -> bool:
    try:
        TextIndex.from_json(index)
    except (TypeError, ValueError):
        return False
    return True


def _check_files(files: dict) -> None:
    for entry in files.values():
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and _is_count(entry[1])):
            raise DamagedCache("a file entry of another shape")


def _is_finding(found: object) -> bool:
    return (isinstance(found, dict) and found.keys() == _FINDING_KEYS
            and found["code"] in RULES and found["severity"] in SEVERITIES
            and all(isinstance(found[key], str) for key in ("message", "path", "source_line", "help"))
            and all(_is_count(found[key]) for key in _POSITIONS)
            and (found["cell"] is None or _is_count(found["cell"]))
            and (found["fix"] is None or _is_fix(found["fix"]))
            and isinstance(found["related"], (list, tuple)) and all(_is_related(r) for r in found["related"]))


def _is_related(related: object) -> bool:
    return (isinstance(related, dict) and related.keys() == _RELATED_KEYS
            and isinstance(related["message"], str) and isinstance(related["path"], str)
            and all(_is_count(related[key]) for key in _POSITIONS)
            and (related["cell"] is None or _is_count(related["cell"])))


def _is_fix(fix: object) -> bool:
    return (isinstance(fix, dict) and fix.keys() == _FIX_KEYS
            and isinstance(fix["message"], str) and isinstance(fix["applicability"], str)
            and isinstance(fix["edits"], (list, tuple)) and all(
                isinstance(edit, dict) and edit.keys() == _EDIT_KEYS and isinstance(edit["content"], str)
                and all(_is_count(edit[key]) for key in _POSITIONS) for edit in fix["edits"]))


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0  # bool is no count


def _diagnostic(found: dict, display_path: str) -> Diagnostic:
    found = dict(found)
    fix = found.pop("fix")
    if fix is not None:
        fix = Fix(fix["message"], tuple(Edit(**edit) for edit in fix["edits"]), fix["applicability"])
    # a place in the same file is shown under the same path
    related = tuple(Related(**{**r, "path": display_path} if r["path"] == found["path"] else r)
                    for r in found.pop("related"))
    return Diagnostic(**{**found, "path": display_path}, fix=fix, related=related)
