"""`read_regular_file` reads regular files only, within a size bound, and never blocks.

What would block (a FIFO) or never end (a device) runs in a child process with a timeout, so a
regression fails the test instead of hanging the suite.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from deadline import deadline
from lint_nograd.run.regular_file import FileTooLargeError, NotRegularFileError, read_regular_file

posix = pytest.mark.skipif(os.name != "posix", reason="FIFOs, devices and sockets")


def read_in_child(path, *args: str) -> str:
    """What `read_regular_file(path, ...)` gives, as `ok <length>` or `<error class>: <strerror>`."""
    code = ("import sys\nfrom lint_nograd.run.regular_file import read_regular_file\n"
            "try:\n    print('ok', len(read_regular_file(sys.argv[1], *map(int, sys.argv[2:]))))\n"
            "except OSError as error:\n    print(f'{type(error).__name__}: {error.strerror}')\n")
    done = subprocess.run([sys.executable, "-c", code, str(path), *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_regular_file_is_read_whole(tmp_path):
    (tmp_path / "a.py").write_bytes(b"x = 1\n" * 50_000)
    assert read_regular_file(tmp_path / "a.py") == b"x = 1\n" * 50_000
    assert read_regular_file(tmp_path / "a.py", 300_000) == b"x = 1\n" * 50_000  # exactly the bound


def test_a_file_over_the_bound_is_refused(tmp_path):
    (tmp_path / "a.py").write_bytes(b"x" * 101)
    with pytest.raises(FileTooLargeError) as caught:
        read_regular_file(tmp_path / "a.py", 100)
    assert caught.value.strerror == "larger than 100 bytes"


@posix
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "x.py")
    assert read_in_child(tmp_path / "x.py") == "NotRegularFileError: not a regular file (a FIFO)"


@posix
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_endless_device_is_refused_even_through_a_link(tmp_path, device):
    (tmp_path / "x.py").symlink_to(device)
    assert read_in_child(tmp_path / "x.py") == "NotRegularFileError: not a regular file (a character device)"
    assert read_in_child(tmp_path / "x.py", "1000") == "NotRegularFileError: not a regular file (a character device)"


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(NotRegularFileError) as caught:
        read_regular_file(tmp_path)
    assert caught.value.strerror == "not a regular file (a folder)"


@posix
def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s.py"
    with socket.socket(socket.AF_UNIX) as server:
        try:
            server.bind(str(path))
        except OSError:  # a path too long for a socket address
            pytest.skip("no socket at this path")
        with pytest.raises(NotRegularFileError) as caught:
            read_regular_file(path)
    assert caught.value.strerror == "not a regular file (a socket)"


@posix
def test_a_link_is_refused_only_when_asked(tmp_path):
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    assert read_regular_file(tmp_path / "link.json") == b"{}"
    with pytest.raises(NotRegularFileError) as caught:
        read_regular_file(tmp_path / "link.json", follow_symlinks=False)
    assert caught.value.strerror == "a symbolic link, which is not followed here"


def test_a_missing_file_is_the_usual_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "gone.py")


@posix
def test_no_file_handle_is_left_open(tmp_path):
    os.mkfifo(tmp_path / "x.py")
    (tmp_path / "a.py").write_text("x = 1\n")
    before = len(os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"))
    with deadline():
        for _ in range(50):
            read_regular_file(tmp_path / "a.py")
            with pytest.raises(NotRegularFileError):
                read_regular_file(tmp_path / "x.py")
            with pytest.raises(FileTooLargeError):
                read_regular_file(tmp_path / "a.py", 2)
    assert len(os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd")) == before
