"""`pytest --nograd-watch`: watch the test session and report what the watcher found at its end;
`--nograd-watch-strict` also fails the session on what `check` would fail on (errors and
warnings; notes with `exit-non-zero-on-note`), and says so. The codes are those `[tool.lint-nograd]`
of the project's pyproject.toml selects, then `--nograd-watch-select`/`--nograd-watch-ignore`.

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
                    help="as --nograd-watch, and fail the session on what `lint-nograd check` fails on")
    group.addoption("--nograd-watch-select", metavar="CODES", default=None,
                    help="the codes or prefixes to report, as `check --select` (default: [tool.lint-nograd]'s)")
    group.addoption("--nograd-watch-ignore", metavar="CODES", default="",
                    help="codes or prefixes not to report, as `check --ignore`")


def _on(config) -> bool:
    return config.getoption("nograd_watch") or config.getoption("nograd_watch_strict")


def _codes(value: str | None):
    return None if value is None else tuple(code for code in value.split(",") if code.strip())


def pytest_configure(config) -> None:
    if not _on(config):
        return
    from lint_nograd.watch.settings import SettingsError, resolve
    from lint_nograd.watch.startup import Settings, start

    settings = Settings(select=_codes(config.getoption("nograd_watch_select")),
                        ignore=_codes(config.getoption("nograd_watch_ignore")),
                        strict=config.getoption("nograd_watch_strict"))
    try:
        resolve(settings, config.rootpath)
    except SettingsError as error:
        raise pytest.UsageError(f"lint-nograd watch: {error}") from None
    start(settings, report_at_exit=False)


def _why_failed() -> str:
    from lint_nograd.watch.settings import why_failed
    from lint_nograd.watch.startup import findings, settings

    return why_failed(findings(), settings().exit_non_zero_on_note)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    if session.config.getoption("nograd_watch_strict") and exitstatus == pytest.ExitCode.OK and _why_failed():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _on(config):
        return
    from lint_nograd.watch.report import text
    from lint_nograd.watch.startup import findings

    terminalreporter.section("lint-nograd watch")
    terminalreporter.write(text(findings(), "text").removeprefix("lint-nograd watch:\n") or "No findings.\n")
    why = _why_failed() if config.getoption("nograd_watch_strict") else ""
    if why:
        terminalreporter.write_line(why.rstrip("\n"), red=True)
