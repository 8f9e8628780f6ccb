"""Turning the watcher on in a process: the hooks go in once the program imports torch (never
before: importing torch is the program's business), and the report is written at exit.

`LINT_NOGRAD_WATCH=1` turns it on at interpreter start (the `lint_nograd_watch.pth` file the package
installs calls `from_environment`); `LINT_NOGRAD_WATCH_OUTPUT=FILE` writes the report to `FILE`
(`{pid}` in it becomes the process id), `LINT_NOGRAD_WATCH_FORMAT` chooses text, json or sarif.
This module imports only `os` and `sys`: a process that never imports torch pays nothing else,
and writes no report.
"""
from __future__ import annotations

import os
import sys

FORMATS = ("text", "json", "sarif")


class Settings:
    """How the report is written, and which findings fail a run (see `watch.settings`)."""

    def __init__(self, output_format: str = "text", output: str | None = None, select=None,
                 ignore=(), strict: bool = False, exit_non_zero_on_note: bool | None = None) -> None:
        self.output_format = output_format
        self.output = output  # a file; None: standard error
        self.select = select  # codes or prefixes; None: [tool.lint-nograd]'s, else check's defaults
        self.ignore = tuple(ignore)
        self.strict = strict  # a finding `check` would fail on makes the exit status 1
        self.exit_non_zero_on_note = exit_non_zero_on_note  # None: [tool.lint-nograd]'s, else False
        self.codes: frozenset[str] | None = None  # the codes reported, once resolved


_started: Settings | None = None
_forked = False  # this process is a forked child of a watched one
_reported = False  # the report is written once: by the runner, else at exit


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
        import atexit

        atexit.register(write_report)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork)


def settings() -> Settings:
    return _started or Settings()


def _install():
    from lint_nograd.watch import hooks

    return hooks.install()


def watched() -> bool:
    """Whether the hooks went in: the program imported torch."""
    return getattr(sys.modules.get("lint_nograd.watch.hooks"), "WATCHER", None) is not None


def findings() -> list:
    """What the watcher found so far, as diagnostics of the selected codes, `# noqa` applied."""
    if not watched():
        return []
    from lint_nograd.watch.report import diagnostics

    return diagnostics(settings())


def write_report() -> None:
    """The report, at exit: none when the program never imported torch (nothing was watched)."""
    global _reported
    if not watched() or _reported:
        return
    _reported = True
    from lint_nograd.watch.report import text

    current = settings()
    found = findings()
    output = current.output
    if _forked and output is not None and "{pid}" not in output:
        return  # one file for every process: the parent's report is the one written there
    if output is None:
        report = text(found, current.output_format)
        if report:
            try:
                sys.stderr.write(report)
                sys.stderr.flush()
            except (OSError, ValueError):  # the program closed its standard error
                pass
        return
    path = output.replace("{pid}", str(os.getpid()))
    try:  # in one step: a reader never sees half a report
        import tempfile

        folder = os.path.dirname(os.path.abspath(path))
        with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp", encoding="utf-8") as out:
            out.write(text(found, current.output_format))
        os.replace(out.name, path)
    except OSError as error:
        sys.stderr.write(f"lint-nograd watch: cannot write {path}: {error}\n")


def _after_fork() -> None:
    """A forked child reports what it finds itself, also when it ends with `os._exit` (as
    multiprocessing's children do): what the parent found before the fork is the parent's."""
    global _forked, _reported
    _forked, _reported = True, False
    hooks = sys.modules.get("lint_nograd.watch.hooks")
    if hooks is not None and hooks.WATCHER is not None:
        hooks.WATCHER.forked()
    exit_now = os._exit
    if getattr(exit_now, "_lint_nograd_reports", False):
        return

    def _exit(status):
        try:
            write_report()
        finally:
            exit_now(status)

    _exit._lint_nograd_reports = True
    os._exit = _exit


class _AfterTorch:
    """A finder that finds nothing itself: when `torch` is imported, it lets the other finders
    find it and installs the hooks once its module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        import importlib.util

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
