"""Worker processes for `check` and `fix`, tied to the process that started them.

A caller that reads our output through pipes (pre-commit, an editor, CI) waits until every
process holding them has ended, so workers must never outlive this process: on Linux each worker
asks the kernel for SIGKILL when its parent dies; elsewhere a thread in each worker watches for
the parent to go. Ctrl-C reaches every process of the terminal's group: a worker drops the task
it is running and the ones still queued, silently, and this process reports the interruption once.
A worker is never killed mid-task: one killed while sending its result would leave a partial
message in the result pipe, which the pool waits on forever.
"""
from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_PARENT_POLL_SECONDS = 1.0  # how often a worker without a parent-death signal looks for its parent


class Workers:
    """Worker processes when asked for more than one, else this process; `submit` returns a
    function that gives the result. The processes start with the first work given to them."""

    def __init__(self, count: int):
        self.count = count
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> "Workers":
        return self

    def _start(self, count: int) -> bool:
        """Start at most `count` processes (never more than there is work for)."""
        if self._pool is None and min(self.count, count) > 1:
            # fork on Linux: the workers are children of this very process, as the parent-death
            # signal needs (a fork server would be their parent instead)
            import multiprocessing  # imported here: a run that needs no worker process spares it
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
            try:
                self._pool = ProcessPoolExecutor(max_workers=min(self.count, count), mp_context=context,
                                                 initializer=_start_worker, initargs=(os.getpid(),))
            except (OSError, NotImplementedError, ValueError):  # no worker processes on this system
                self.count = 1
        return self._pool is not None

    def map(self, function, calls: list[tuple], if_worker_stops, chunk: int = 32) -> Iterator:
        """`function(*call)` for each call, in order, `chunk` calls per task, each task's results as
        soon as they come (the caller works on them while the workers go on); `if_worker_stops(*call)`
        for those of a worker process that died. In this process when there are few."""
        chunks = [calls[start:start + chunk] for start in range(0, len(calls), chunk)]
        if len(chunks) < 2 or not self._start(len(chunks)):
            return iter(_run_chunk(function, calls))
        with _sigint_blocked():
            futures = [self._pool.submit(_run_task, _run_chunk, function, part) for part in chunks]
        return _results(chunks, futures, if_worker_stops)

    def __exit__(self, exc_type, exc, traceback) -> None:
        if self._pool is None:
            return
        if exc_type is not None:  # Ctrl-C, a closed pipe, a bug: their work is no longer wanted
            _interrupt_workers(self._pool)
        self._pool.shutdown(cancel_futures=True)

    def submit(self, function, *args, if_worker_stops):
        """Run `function(*args)`; what the returned function gives if a worker process died."""
        if self._pool is None and not self._start(self.count):
            result = function(*args)
            return lambda: result
        from concurrent.futures.process import BrokenProcessPool

        with _sigint_blocked():  # a worker forked here takes Ctrl-C only once its handler is set
            future = self._pool.submit(_run_task, function, *args)

        def outcome():
            try:
                return future.result()
            except BrokenProcessPool:
                return if_worker_stops
        return outcome


def _results(chunks: list[list[tuple]], futures: list, if_worker_stops) -> Iterator:
    from concurrent.futures.process import BrokenProcessPool

    for part, future in zip(chunks, futures):
        try:
            yield from future.result()
        except BrokenProcessPool:
            yield from (if_worker_stops(*call) for call in part)


def _run_chunk(function, calls: list[tuple]) -> list:
    with _collecting_garbage_once():
        return [function(*call) for call in calls]


@contextlib.contextmanager
def _collecting_garbage_once():
    """Parsing makes many objects and no reference cycles: the collector, run again and again
    over every syntax tree, would cost a fifth of the time. Collect once at the end, over only
    what is new: what existed before (modules, the cache) is frozen for the rest of this process.
    Under `collector_paused` (the whole run, in this process) it stays off."""
    enabled = gc.isenabled()
    gc.freeze()
    try:
        with collector_paused():
            yield
    finally:
        if enabled:
            gc.collect()


@contextlib.contextmanager
def collector_paused():
    """The cyclic garbage collector off while a run makes its many objects, which hold no cycles
    to speak of: run again and again over every summary, it costs a seventh of the run."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def _sigint_blocked():
    """SIGINT held back in this thread (and in the processes it forks) while inside."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _interrupt_workers(pool: ProcessPoolExecutor) -> None:
    """What Ctrl-C at a terminal does to them, for when it reached only this process."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.kill(process.pid, signal.SIGINT)


# In a worker: whether it runs a task now, and whether Ctrl-C came (then every task is dropped).
_in_task = False
_interrupted = False


def _run_task(function, *args):
    global _in_task
    try:
        _in_task = True  # inside the try: an interruption right here still resets it
        if _interrupted:  # Ctrl-C came before this task started
            raise KeyboardInterrupt
        return function(*args)
    finally:
        _in_task = False


def _on_interrupt(signum, frame) -> None:
    """Stop the running task; outside one (idle, or sending a result) just remember it."""
    global _in_task, _interrupted
    _interrupted = True
    if _in_task:
        _in_task = False  # one interruption per task, never one in the code that sends its result
        raise KeyboardInterrupt


def _start_worker(parent: int) -> None:
    """Runs first in each worker: take Ctrl-C quietly, and end when `parent` ends."""
    gc.enable()  # forked from a run with the collector paused: a worker collects after each task
    signal.signal(signal.SIGINT, _on_interrupt)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # one that came meanwhile is handled now
    if _kill_me_when_my_parent_dies():
        if os.getppid() != parent:  # it died before the request took effect
            os._exit(1)
        return
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="watch-parent").start()


def _kill_me_when_my_parent_dies() -> bool:
    """Linux's parent-death signal, through prctl; False where there is none."""
    if sys.platform != "linux":
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    """A worker whose parent is gone has been adopted by another process: end it."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_SECONDS)
    os._exit(1)
