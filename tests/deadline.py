"""A bound on how long a test may block: a regression that hangs fails instead of stopping the suite."""
from __future__ import annotations

import contextlib
import signal

SECONDS = 60


class Hung(BaseException):
    """Not an OSError nor an Exception: no `except` of the code under test swallows it."""


@contextlib.contextmanager
def deadline(seconds: int = SECONDS):
    """Raise `Hung` in this (main) thread after `seconds`, and every second after that; SIGALRM
    interrupts a blocking open or read, such as opening a FIFO that no one writes to. POSIX only."""
    def expire(signum, frame):
        raise Hung(f"still running after {seconds} s: it hangs")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
