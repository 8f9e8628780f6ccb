"""Reading a file that must be a regular file, safely, whatever the path turns out to name.

`Path.read_bytes()` on a FIFO blocks until a writer comes, and on `/dev/zero` or `/dev/urandom`
reads until memory runs out. A repository, a cache folder or a command line can name either.
"""
from __future__ import annotations

import errno
import os
import stat

# O_NONBLOCK: opening a FIFO waits for a writer without it. O_NOCTTY: a terminal never becomes ours.
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class NotRegularFileError(OSError):
    """The path names a folder, a FIFO, a device or a socket, not a regular file."""


class FileTooLargeError(OSError):
    """The file holds more bytes than the reader accepts."""


def read_regular_file(path: str | os.PathLike, max_bytes: int | None = None, *,
                      follow_symlinks: bool = True) -> bytes:
    """The bytes of `path`, which must be a regular file of at most `max_bytes` bytes.

    It is opened without blocking and checked with `fstat` before anything is read, so a FIFO,
    a device, a folder or a socket is an error at once: `NotRegularFileError`. A file larger than
    `max_bytes` (or growing past it while read) is `FileTooLargeError`. With
    `follow_symlinks=False`, a symbolic link is an error too (`ELOOP`, where `O_NOFOLLOW` exists).
    Every error is an `OSError` whose `strerror` reads well after "cannot read NAME: ".
    """
    flags = _OPEN_FLAGS | (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    try:
        handle = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP and not follow_symlinks:
            raise NotRegularFileError(errno.ELOOP, "a symbolic link, which is not followed here",
                                      os.fspath(path)) from None
        try:  # a socket cannot even be opened: say what it is
            mode = os.stat(path).st_mode
        except OSError:
            raise error from None
        _check_regular(mode, path)
        raise
    try:
        _check_regular(os.fstat(handle).st_mode, path)
        stream = open(handle, "rb", closefd=True)
    except BaseException:
        os.close(handle)
        raise
    with stream:
        data = stream.read() if max_bytes is None else stream.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise FileTooLargeError(errno.EFBIG, f"larger than {max_bytes} bytes", os.fspath(path))
    return data


def _check_regular(mode: int, path: str | os.PathLike) -> None:
    if not stat.S_ISREG(mode):
        kind = next((f" ({name})" for is_kind, name in _KINDS if is_kind(mode)), "")
        raise NotRegularFileError(errno.EINVAL, f"not a regular file{kind}", os.fspath(path))
