"""Turning the watcher on in a process: the hooks go in once the program imports torch (never
before: importing torch is the program's business), and the report is written at exit.

`LINT_NOGRAD_WATCH=1` turns it on at interpreter start (the `lint_nograd_watch.pth` file the package
installs calls `from_environment`); `LINT_NOGRAD_WATCH_OUTPUT=FILE` writes the report to `FILE`
(`{pid}` in it becomes the process id), `LINT_NOGRAD_WATCH_FORMAT` chooses text, json or sarif.
"""
from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.util
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field

from lint_nograd.watch.report import FORMATS, diagnostics, text


@dataclass
class Settings:
    output_format: str = "text"
    output: str | None = None  # a file; None: standard error
    select: Sequence[str] = field(default_factory=lambda: ("NG",))


_started: Settings | None = None


def start(settings: Settings, report_at_exit: bool = True) -> None:
    """Watch this process from now on; report at exit unless the caller reports itself. Started
    again (`python -m lint_nograd.watch` with LINT_NOGRAD_WATCH set), the last settings hold."""
    global _started
    again, _started = _started is not None, settings
    if again:
        return
    if "torch" in sys.modules and hasattr(sys.modules["torch"], "autograd"):
        _install()
    else:
        sys.meta_path.insert(0, _AfterTorch())
    if report_at_exit:
        atexit.register(write_report)


def _install():
    from lint_nograd.watch import hooks

    return hooks.install()


def findings() -> list:
    """What the watcher found so far, as diagnostics of the selected codes."""
    hooks = sys.modules.get("lint_nograd.watch.hooks")
    watcher = hooks and hooks.WATCHER
    if watcher is None:
        return []
    import torch

    with watcher.lock:
        found = list(watcher.findings.values())
    return diagnostics(found, torch.__version__.split("+")[0], (_started or Settings()).select)


def write_report() -> None:
    settings = _started or Settings()
    report = text(findings(), settings.output_format)
    if settings.output is None:
        if report:
            with contextlib.suppress(OSError, ValueError):  # the program closed its standard error
                sys.stderr.write(report)
                sys.stderr.flush()
        return
    path = settings.output.replace("{pid}", str(os.getpid()))
    try:  # in one step: a reader never sees half a report
        folder = os.path.dirname(os.path.abspath(path))
        with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp", encoding="utf-8") as out:
            out.write(report)
        os.replace(out.name, path)
    except OSError as error:
        sys.stderr.write(f"lint-nograd watch: cannot write {path}: {error}\n")


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when `torch` is imported, it lets the other finders find it and
    installs the hooks once its module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, original = spec.loader, spec.loader.exec_module

        def exec_module(module):
            original(module)
            del loader.exec_module  # the loader as it was
            _install()

        loader.exec_module = exec_module
        return spec


def from_environment() -> None:
    """The `.pth` hook: start when `LINT_NOGRAD_WATCH` is set to anything but empty or 0."""
    if os.environ.get("LINT_NOGRAD_WATCH", "") in ("", "0"):
        return
    output_format = os.environ.get("LINT_NOGRAD_WATCH_FORMAT", "text")
    start(Settings(output_format if output_format in FORMATS else "text",
                   os.environ.get("LINT_NOGRAD_WATCH_OUTPUT") or None))
