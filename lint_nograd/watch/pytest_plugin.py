"""`pytest --nograd-watch`: watch the test session and report what the watcher found at its end;
`--nograd-watch-strict` also fails the session when it found something.

Registered through the `pytest11` entry point, so pytest loads it in every session of an
environment where lint-nograd is installed: it imports nothing heavy (no torch) unless asked.
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("lint-nograd")
    group.addoption("--nograd-watch", action="store_true",
                    help="report grad-disabling regions that transforms or tracers misread while the tests run")
    group.addoption("--nograd-watch-strict", action="store_true",
                    help="as --nograd-watch, and fail the session when there is a finding")


def _on(config) -> bool:
    return config.getoption("nograd_watch") or config.getoption("nograd_watch_strict")


def pytest_configure(config) -> None:
    if _on(config):
        from lint_nograd.watch.startup import Settings, start

        start(Settings(), report_at_exit=False)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    if session.config.getoption("nograd_watch_strict") and exitstatus == pytest.ExitCode.OK:
        from lint_nograd.watch.startup import findings

        if findings():
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _on(config):
        return
    from lint_nograd.watch.report import text
    from lint_nograd.watch.startup import findings

    found = findings()
    terminalreporter.section("lint-nograd watch")
    terminalreporter.write(text(found, "text").removeprefix("lint-nograd watch:\n") or "No findings.\n")
