"""Writing a fixed file so that it is never lost or left half-written.

The new bytes go to a temporary file in the same folder, with the original's mode (and owner,
where allowed), flushed to disk, then renamed over the original in one step. Just before the
rename, the original is read again: if it changed since it was checked, it is left alone.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


class WriteError(Exception):
    """The file was left as it was; the message says why."""


def replace_file(path: Path, new: bytes, original: bytes) -> None:
    try:
        status = os.stat(path)
        if not status.st_mode & 0o222:  # respected even by root, who could write anyway
            raise WriteError(f"{path} is read-only; left as it is")
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise WriteError(f"cannot write {path}: {error.strerror or error}") from None
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
        if path.read_bytes() != original:
            raise WriteError(f"{path} changed while it was being fixed; left as it is")
        os.replace(temporary, path)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise WriteError(f"cannot write {path}: {error.strerror or error}") from None
    except WriteError:
        Path(temporary).unlink(missing_ok=True)
        raise
