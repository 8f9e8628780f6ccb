"""Writing a fixed file so that it is never lost or left half-written.

The new bytes go to a temporary file in the same folder, with the original's mode (and owner,
where allowed), flushed to disk, then renamed over the original in one step. Just before the
rename, the original is read again: if it changed since it was checked, it is left alone. A
symbolic link is written through, to the file it names, and stays a link. A report
(`--output-file`) is written the same way, all at once or not at all.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from lint_nograd.run.regular_file import read_regular_file


class WriteError(Exception):
    """The file was left as it was; the message says why."""


def replace_file(path: Path, new: bytes, original: bytes, shown: str | None = None) -> None:
    """Write `new` over `path`, which held `original` when it was read; `shown` names it in messages."""
    target = Path(os.path.realpath(path))
    shown = shown or str(path)
    try:
        status = os.stat(target)
        if not stat.S_ISREG(status.st_mode):  # replaced by a FIFO or a device since it was read
            raise WriteError(f"{shown} is no longer a regular file; left as it is")
        if not status.st_mode & 0o222:  # respected even by root, who could write anyway
            raise WriteError(f"{shown} is read-only; left as it is")
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as error:
        raise WriteError(f"cannot write {shown}: {error.strerror or error}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(new)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, status.st_mode & 0o7777)
        try:
            os.chown(temporary, status.st_uid, status.st_gid)
        except OSError:
            pass  # only the owner's group or root may keep the owner: the mode is what matters
        current = read_regular_file(target)  # a FIFO put there meanwhile must not block us
        if current == new:  # already fixed, under another name of the same file (a link)
            Path(temporary).unlink()
            return
        if current != original:
            raise WriteError(f"{shown} changed while it was being fixed; left as it is")
        os.replace(temporary, target)
    except BaseException as error:  # also Ctrl-C: never leave the temporary file behind
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise WriteError(f"cannot write {shown}: {error.strerror or error}") from None
        raise


def write_file(path: Path, data: bytes) -> None:
    """Create or replace `path` with `data` in one step (a report: `--output-file`), with the
    mode a new file gets; its folder is made if missing. A `path` that exists and is not a
    regular file (`/dev/null`, a FIFO, a terminal) is opened and written, never replaced."""
    if _write_in_place(path, data):
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise WriteError(f"cannot write {path}: {error.strerror or error}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException as error:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise WriteError(f"cannot write {path}: {error.strerror or error}") from None
        raise


def _write_in_place(path: Path, data: bytes) -> bool:
    """Write `data` into `path` if it exists and is not a regular file; False if it is one, or is missing."""
    try:
        status = os.stat(path)
    except OSError:
        return False
    if stat.S_ISREG(status.st_mode):
        return False
    if stat.S_ISDIR(status.st_mode):
        raise WriteError(f"cannot write {path}: it is a folder")
    try:
        # neither created nor truncated: it exists; a FIFO waits here for its reader
        handle = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise WriteError(f"cannot write {path}: {error.strerror or error}") from None
    with os.fdopen(handle, "wb") as stream:
        if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):  # became a regular file meanwhile
            return False
        try:
            stream.write(data)
            stream.flush()
        except OSError as error:
            raise WriteError(f"cannot write {path}: {error.strerror or error}") from None
    return True
