"""The command line: `lint-nograd check|fix|graph [PATH ...]`, `lint-nograd rule CODE | --all` and
`lint-nograd server`.

Exit status: 0 nothing found, 1 findings (notes only with `--exit-non-zero-on-note`), 2 a usage,
configuration or I/O error.
A path `-` is standard input, as with `--stdin-filename`, shown as `-`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from lint_nograd import __version__
from lint_nograd.analysis.releases import assumed_row, default_target, target
from lint_nograd.fix.fixer import Fixer
from lint_nograd.fix.settings import FixSettings, declares_lint_nograd, first_party_modules
from lint_nograd.fix.write import WriteError, replace_file, write_file
from lint_nograd.report import output, suppression
from lint_nograd.report.diagnostics import Diagnostic
from lint_nograd.report.registry import RULES
from lint_nograd.run import runner
from lint_nograd.run.cache import FOLDER_NAME, Cache, default_folder
from lint_nograd.run.config import (
    DEFAULT_SELECT,
    DEFAULT_STOP_GRADIENT,
    ConfigError,
    Projects,
    RuleSelection,
    expand_selectors,
    import_roots,
    load_config,
    project_root,
    select_rules,
)
from lint_nograd.run.files import DEFAULT_EXCLUDE, compile_patterns, discover, is_valid_pattern, repository_root
from lint_nograd.run.jobs import PARALLEL_MIN_FILES, Job, Outcome
from lint_nograd.run.notebook import NotebookError
from lint_nograd.run.regular_file import read_regular_file
from lint_nograd.run.workers import Workers

PROG = "lint-nograd"
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


@dataclass
class Plan:
    root: Path = Path(".")  # the project root: where the configuration was found; the cache lives there
    fixes: FixSettings = FixSettings()
    jobs: list[Job] = field(default_factory=list)
    project_files: list[tuple[Path, str]] = field(default_factory=list)  # (path, shown) of the whole project
    import_roots: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # reported after the run; exit 2
    warnings: list[str] = field(default_factory=list)
    unread: int = 0  # folders and .gitignore files that could not be read: the summary says so
    torch_version: str = ""  # the torch release the findings are for: "2.13"
    stdin: bytes | None = None  # the source read from standard input, if any
    assumed: str = ""  # a named release newer than the table: which row stands for it
    exit_on_note: bool = False  # a note alone makes the exit status 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        options = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, --version, or a usage error argparse already reported
        return stop.code if isinstance(stop.code, int) else EXIT_CLEAN
    if getattr(options, "paths", None) == ["-"] and not options.stdin_filename:
        options.stdin_filename = "-"  # as ruff: the one path `-` is standard input
    try:
        return options.run(options)
    except ConfigError as error:
        _report("error", str(error))
        return EXIT_ERROR
    except KeyboardInterrupt:  # workers drop their work silently: this is the one report of it
        _report("error", "interrupted")
        return 130
    except BrokenPipeError:  # the reader went away, e.g. `lint-nograd check | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except ReportLost as error:  # a full disk, say: what was done must not pass for reported
        with contextlib.suppress(ReportLost, OSError):
            _report("error", f"cannot write the report: {error}")
        for stream in (sys.stdout, sys.stderr):  # else the final flush of what is left fails again
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        return EXIT_ERROR
    except Exception as error:  # a bug of ours: one line on stderr rather than a traceback
        _report("error", f"internal error: {type(error).__name__}: {error}")
        return EXIT_ERROR


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Find torch.no_grad() regions that function transforms and tracers misread.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    check = commands.add_parser("check", parents=[shared_options()], help="report findings")
    change = check.add_mutually_exclusive_group()
    change.add_argument("--fix", action="store_true", help="apply the fixes, as `lint-nograd fix` does")
    change.add_argument("--add-noqa", action="store_true",
                        help="add `# noqa: CODE` to every line with a finding, and report nothing")
    change.add_argument("--watch", action="store_true",
                        help="check again whenever a source file changes (needs watchfiles: the check-watch "
                             "extra); the runtime watcher of a running program is python -m lint_nograd.watch")
    check.set_defaults(run=run_check, diff=False)

    fix = commands.add_parser("fix", parents=[shared_options()],
                              help="rewrite no-grad regions into stop_gradient(...), report the rest")
    fix.add_argument("--diff", action="store_true",
                     help="print the changes as a unified diff; write nothing (exit 1 when there are some)")
    fix.set_defaults(run=run_fix)

    rule = commands.add_parser("rule", help="show a rule's page, or list every rule")
    which = rule.add_mutually_exclusive_group(required=True)
    which.add_argument("code", nargs="?", help="a rule code, such as NG001")
    which.add_argument("--all", action="store_true", help="list every rule")
    rule.set_defaults(run=run_rule)

    graph = commands.add_parser("graph", parents=[shared_options()], conflict_handler="resolve",
                                help="print the call graph reach follows, or why a region is reached")
    graph.add_argument("--output-format", choices=("text", "pycg"), default="text",
                       help="text: one `caller -> callee` a line; pycg: JSON as PyCG writes it")
    graph.add_argument("--explain", metavar="FILE:LINE",
                       help="print the chains by which transforms and tracers reach the region at this line")
    graph.set_defaults(run=run_graph)

    server = commands.add_parser("server", help="run the language server (LSP over standard input and output)")
    server.set_defaults(run=run_server)
    return parser


def shared_options() -> argparse.ArgumentParser:
    """The options of every command that reads files: which files, which rules, how to report."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .)")

    rules = options.add_argument_group("rule selection (comma-separated codes or prefixes, or ALL)")
    rules.add_argument("--select", type=_comma_list, action="extend", metavar="CODES",
                       help="check only these rules (replaces the configured selection)")
    rules.add_argument("--extend-select", type=_comma_list, action="extend", default=[],
                       metavar="CODES", help="check these rules as well")
    rules.add_argument("--ignore", type=_comma_list, action="extend", default=[], metavar="CODES",
                       help="do not check these rules (applied after --select)")

    files = options.add_argument_group("file selection (gitignore-style globs)")
    files.add_argument("--exclude", type=_glob_list, action="extend", metavar="GLOBS",
                       help="exclude these instead of the default list")
    files.add_argument("--extend-exclude", type=_glob_list, action="extend", default=[],
                       metavar="GLOBS", help="exclude these as well")
    files.add_argument("--force-exclude", action="store_true",
                       help="apply the excludes to files named on the command line too (for pre-commit)")
    files.add_argument("--stdin-filename", metavar="NAME",
                       help="read the source from standard input; NAME says how to report and treat it")
    gitignore = files.add_mutually_exclusive_group()
    gitignore.add_argument("--respect-gitignore", dest="respect_gitignore", action="store_true",
                           default=None, help="skip what .gitignore files ignore (default)")
    gitignore.add_argument("--no-respect-gitignore", dest="respect_gitignore",
                           action="store_false", default=None,
                           help="check what .gitignore files ignore")

    settings = options.add_argument_group("configuration")
    settings.add_argument("--config", metavar="PATH",
                          help="read [tool.lint-nograd] from this file instead of searching "
                               "(from a lint-nograd.toml: its top level)")
    settings.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    settings.add_argument("--torch-version", type=_torch_version, metavar="X.Y",
                          help="report for this torch release (default: the torch installed, else the newest known)")

    fixes = options.add_argument_group("fixes")
    unsafe = fixes.add_mutually_exclusive_group()
    unsafe.add_argument("--unsafe-fixes", dest="unsafe_fixes", action="store_true", default=None,
                        help="apply and show the fixes that rest on what the analysis cannot see, too")
    unsafe.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false", default=None,
                        help="only safe fixes (the default)")
    fixes.add_argument("--show-fixes", action="store_true", help="list each region fixed: file, line, rule")

    report = options.add_argument_group("reporting")
    report.add_argument("--output-format", choices=output.FORMATS, default="full")
    report.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour full and concise output (auto: on a terminal, no NO_COLOR)")
    report.add_argument("--statistics", action="store_true", help="count findings per rule instead")
    report.add_argument("--exit-zero", action="store_true",
                        help="exit 0 even when there are findings (errors still exit 2)")
    report.add_argument("--exit-non-zero-on-note", action="store_true",
                        help="exit 1 when there are notes only, too (by default notes are shown and counted)")
    report.add_argument("-o", "--output-file", metavar="FILE",
                        help="write the report to FILE instead of standard output (errors stay on stderr)")
    report.add_argument("-q", "--quiet", action="count", default=0,
                        help="print the findings only, no summary or warnings; -qq: print nothing but errors")
    report.add_argument("--silent", dest="quiet", action="store_const", const=2, help="the same as -qq")

    run = options.add_argument_group("running")
    run.add_argument("--jobs", type=_positive_int, metavar="N",
                     help="worker processes (default: one per CPU)")
    run.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    run.add_argument("--cache-dir", metavar="PATH",
                     help="where to keep the cache (default: the project's folder in the user cache, "
                          "$LINT_NOGRAD_CACHE_DIR or ~/.cache/lint-nograd)")
    return options


def plan_jobs(options: argparse.Namespace, cwd: Path | None = None, paths: list[str] | None = None) -> Plan:
    """Turn the shared options and the configuration into one job per file to check (of `paths`,
    else of the paths given)."""
    cwd = cwd or Path.cwd()
    paths = paths or options.paths or ["."]
    # standard input is checked as the file it names would be, in that file's project (as ruff does)
    config = load_config(options.config, cwd, options.isolated, [options.stdin_filename] if options.stdin_filename
                         else paths)
    command_line = RuleSelection(
        select=None if options.select is None else expand_selectors(options.select, "--select"),
        extend_select=expand_selectors(options.extend_select, "--extend-select"),
        ignore=expand_selectors(options.ignore, "--ignore"),
    )
    codes = select_rules([config.rules, command_line])
    exclude = next(globs for globs in (options.exclude, config.exclude, DEFAULT_EXCLUDE)
                   if globs is not None)
    respect_gitignore = (config.respect_gitignore if options.respect_gitignore is None
                         else options.respect_gitignore)
    given = [options.stdin_filename] if options.stdin_filename else paths
    patterns = compile_patterns([*exclude, *config.extend_exclude, *options.extend_exclude])
    found = discover(given, root=config.root, exclude=patterns, respect_gitignore=respect_gitignore, cwd=cwd,
                     force_exclude=options.force_exclude)
    if options.stdin_filename:  # the name need not exist: it says how to treat the source
        path = Path(os.path.abspath(cwd / options.stdin_filename))
        named = [(path, options.stdin_filename)] if found.files or found.missing else []
        found.files, found.missing = named, []
    fixes = FixSettings(
        stop_gradient=config.stop_gradient or DEFAULT_STOP_GRADIENT,
        unsafe_fixes=bool(config.unsafe_fixes if options.unsafe_fixes is None else options.unsafe_fixes),
    )
    plan = Plan(
        root=config.root,
        fixes=fixes,
        torch_version=options.torch_version or config.torch_version or default_target(),
        errors=[f"path does not exist: {path}" for path in found.missing],
        warnings=list(found.unreadable),
        unread=len(found.unreadable),
        exit_on_note=options.exit_non_zero_on_note or config.exit_non_zero_on_note,
    )
    named = options.torch_version or config.torch_version
    if named and assumed_row(named):
        plan.assumed = (f"torch {named} is newer than the releases lint-nograd knows: "
                        f"reporting what torch {assumed_row(named)} does")
    # the project the given files belong to: its other files are read for what they define and call
    root = project_root(config, given, cwd, options.isolated)
    plan.import_roots = import_roots(root, config.src)
    plan.fixes = replace(plan.fixes, first_party=first_party_modules(root, plan.import_roots),
                         may_add_shim=config.stop_gradient is not None or declares_lint_nograd(root),
                         torch_version=plan.torch_version)
    if [Path(os.path.abspath(cwd / path)) for path in given] == [root]:
        plan.project_files = list(found.files)
    else:
        plan.project_files = discover([str(root)], root=config.root, exclude=patterns,
                                      respect_gitignore=respect_gitignore, cwd=cwd).files
    stdin = plan.stdin = sys.stdin.buffer.read() if options.stdin_filename else None
    for path, shown in found.files:
        file_codes = codes - config.ignored_codes(path)
        if file_codes:
            plan.jobs.append(Job(path, shown, file_codes, stdin, plan.torch_version))
    return plan


def _stopped(jobs: Sequence[Job]) -> str:
    names = ", ".join(job.display_path for job in jobs)
    return f"a worker process stopped unexpectedly; not checked: {names}"


def _gated(jobs: Sequence[Job], errors: list[str], reach: dict):
    """(job, bytes, codes) for each file some selected rule can have a finding in: by its own text,
    or because the project reaches a function of it."""
    from lint_nograd.run import engine  # the analysis: a check answered by the last run needs none of it

    for job in jobs:
        try:
            data = job.data if job.data is not None else read_regular_file(job.path)
        except OSError as error:  # removed since it was found, a broken link, a folder, ...
            errors.append(f"cannot read {job.display_path}: {error.strerror or error}")
            continue
        codes = engine.codes_to_check(data, job.codes)
        if reach.get(job.path):
            codes |= job.codes & engine.FIXABLE_CODES
        if codes:
            yield job, data, codes


def fix_pending(data: bytes, display_path: str, codes: frozenset[str], reach: dict | None,
                fixes: FixSettings = FixSettings(), torch_version: str | None = None):
    """(new bytes, the findings left in them, the `FixResult`), or the error for this file."""
    from lint_nograd.fix import rewrite  # the fix layer; it loads libcst only to write a fix

    try:
        result = rewrite.fix_source(data, codes, display_path, fixes, reach, torch_version)
        new = result.text.encode(result.encoding) if result.changed else data
        return (new, result.remaining, result), None
    except NotebookError as error:
        return None, f"cannot fix {display_path}: {error}"
    except Exception as error:  # a bug fixing one file must not stop the others
        return None, f"failed to fix {display_path}: internal error: {type(error).__name__}: {error}"


def _workers(options: argparse.Namespace) -> int:
    return options.jobs or getattr(os, "process_cpu_count", os.cpu_count)() or 1  # the first honours affinity


def run_check(options: argparse.Namespace) -> int:
    if options.stdin_filename and (options.add_noqa or options.watch):
        option = "--add-noqa" if options.add_noqa else "--watch"
        raise ConfigError(f"{option} works on files: it cannot read standard input")
    if options.fix:
        return run_fix(options)
    if options.watch:
        return watch(options)
    projects = _projects(options)
    outcome = Outcome()
    for project, cache in projects:
        found = runner.check(project.jobs, project.project_files, project.import_roots, _workers(options), cache,
                             Fixer(project.fixes))
        outcome.diagnostics += found.diagnostics
        outcome.errors += found.errors
        _warn_about_cache(options, cache)
    outcome.diagnostics.sort(key=lambda d: d.sort_key)
    plan = options.planned = _joined([project for project, _ in projects])
    if options.add_noqa:
        return _add_noqa(options, plan, outcome.diagnostics, plan.errors + outcome.errors)
    return _finish(options, outcome.diagnostics, plan.errors + outcome.errors, unread=plan.unread,
                   unsafe_fixes=plan.fixes.unsafe_fixes, root=plan.root, exit_on_note=plan.exit_on_note)


def _projects(options: argparse.Namespace) -> list[tuple[Plan, Cache]]:
    """A plan and a cache for each project the files checked belong to, found for each file as ruff
    finds settings (`Projects`): each is linked on its own, with its settings and import roots. A
    folder given that holds another project below it is two projects."""
    if options.stdin_filename or options.config or options.isolated:
        return [_plan_and_cache(options)]
    projects, finder = [], Projects()
    of = finder.of
    for key, paths in finder.group(options.paths or ["."], Path.cwd()).items():
        plan, cache = _plan_and_cache(options, paths)
        nested: dict[tuple, list[str]] = {}
        for job in plan.jobs:
            if (inner := of(job.path.parent)) != key:
                nested.setdefault(inner, []).append(job.display_path)
        if nested:  # the files of projects below this one are theirs
            plan.jobs = [job for job in plan.jobs if of(job.path.parent) == key]
            plan.project_files = [(path, shown) for path, shown in plan.project_files if of(path.parent) == key]
        if plan.jobs or plan.errors or not nested:
            projects.append((plan, cache))
        projects += [_plan_and_cache(options, paths) for paths in nested.values()]
    return projects


def _joined(plans: list[Plan]) -> Plan:
    """The plans of several projects as one, to report on (the first one's root and settings)."""
    first = plans[0]
    if len(plans) == 1:
        return first
    return replace(first, jobs=[job for plan in plans for job in plan.jobs],
                   project_files=[file for plan in plans for file in plan.project_files],
                   errors=[error for plan in plans for error in plan.errors], unread=sum(plan.unread for plan in plans),
                   exit_on_note=any(plan.exit_on_note for plan in plans))


def _plan_and_cache(options: argparse.Namespace, paths: list[str] | None = None) -> tuple[Plan, Cache]:
    plan = plan_jobs(options, paths=paths)
    options.planned = plan  # --watch watches the folders it found
    for warning in plan.warnings:
        _warn(options, warning)
    if plan.assumed and not getattr(options, "said_assumed", False):  # once, however often --watch plans
        options.said_assumed = True
        _warn(options, plan.assumed)
    # a folder the user names is used where it leads; the default one may be a link planted in the repository
    cache = Cache(None if options.no_cache else Path(os.path.realpath(options.cache_dir)) if options.cache_dir
                  else default_folder(plan.root))
    if getattr(options, "output_file", None):
        _check_output_file(options.output_file, plan, cache.folder or default_folder(plan.root))
    return plan, cache


def _check_output_file(name: str, plan: Plan, cache_folder: Path) -> None:
    """The report must not overwrite a file it reports on, nor land in the cache (exit 2)."""
    target = os.path.realpath(name)
    inputs = {os.path.realpath(path) for path, _ in plan.project_files}
    inputs |= {os.path.realpath(job.path) for job in plan.jobs if job.data is None}  # not standard input
    if target in inputs:
        raise ConfigError(f"--output-file {name} is one of the files being checked; choose another file")
    cache = os.path.realpath(cache_folder)
    if target == cache or target.startswith(cache.rstrip(os.sep) + os.sep):
        raise ConfigError(f"--output-file {name} is inside the cache folder {cache_folder}; choose another file")


def _warn_about_cache(options: argparse.Namespace, cache: Cache) -> None:
    """Once, when the run has found that the cache could not be used (it is read when first needed)."""
    if cache.problem:
        _warn(options, cache.problem)
        cache.problem = None


def _add_noqa(options: argparse.Namespace, plan: Plan, diagnostics: list[Diagnostic], errors: list[str]) -> int:
    """Write `# noqa: CODE` on each line with a finding, as ruff's `--add-noqa` does: exit 0 unless errors."""
    from lint_nograd.fix.noqa import NoqaError, add_noqa

    by_file: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        if diagnostic.code != "NG000":  # a file that does not parse takes no comment
            by_file.setdefault(diagnostic.path, []).append(diagnostic)
    jobs = {job.display_path: job for job in plan.jobs}
    added = 0
    for shown, found in by_file.items():
        job = jobs.get(shown)
        if job is None:
            continue
        try:
            data = read_regular_file(job.path)
            new, count = add_noqa(data, found, notebook=shown.endswith(".ipynb"))
            if count:
                replace_file(job.path, new, data, shown)
                added += count
        except WriteError as error:
            errors.append(str(error))
        except (OSError, NoqaError, NotebookError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            errors.append(f"cannot add noqa directives to {shown}: {reason}")
    if added and not options.quiet:
        _write(sys.stderr, f"Added {added} noqa directive{'s' * (added != 1)}.\n")
    for error in errors:
        _report("error", error)
    return EXIT_ERROR if errors else EXIT_CLEAN


def watch(options: argparse.Namespace) -> int:
    """Check, then check again each time a source file, a configuration file or a folder holding
    them changes, until Ctrl-C (exit 130, as any run stopped so)."""
    try:
        import watchfiles
    except ImportError:
        raise ConfigError("--watch needs the watchfiles package: pip install watchfiles "
                          "(or the check-watch extra)") from None
    options.watch = False
    root = load_config(options.config, Path.cwd(), options.isolated).root
    # a file given is watched through its folder: a file deleted is no longer watched, nor is it when it comes back
    paths = {root, *(Path(os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path) or "."))
                     for path in options.paths if os.path.exists(path))}
    folders: set[str] = set()  # the folders the last run found files in
    cache_dir = os.path.realpath(options.cache_dir or default_folder(root))

    class Sources(watchfiles.PythonFilter):
        """A source file; or a folder, which a rename or move reports alone, not the files in it."""

        def __call__(self, change: watchfiles.Change, path: str) -> bool:
            if not watchfiles.DefaultFilter.__call__(self, change, path):  # .git, __pycache__, venvs
                return False
            if FOLDER_NAME in Path(path).parts or Path(path).is_relative_to(cache_dir):
                return False  # what a check writes itself
            return (super().__call__(change, path) or change != watchfiles.Change.deleted and os.path.isdir(path)
                    or change == watchfiles.Change.deleted and path in folders)

    def check() -> int:
        status = run_check(options)
        folders.clear()
        for path, _ in getattr(options, "planned", Plan()).project_files:
            folders.update(str(folder) for folder in Path(os.path.abspath(path)).parents)
        return status

    status = check()
    _write(sys.stderr, "Watching for file changes.\n")
    sources = Sources(extra_extensions=(".ipynb", ".toml"))
    for _ in watchfiles.watch(*sorted(paths), debounce=200, step=50, watch_filter=sources):
        _write(sys.stderr, "File change detected: checking again.\n")
        status = check()
        _write(sys.stderr, "Watching for file changes.\n")
    return status  # the watched folders are gone


def run_fix(options: argparse.Namespace) -> int:
    """Rewrite what can be rewritten, then report what remains, as `check` would."""
    projects = _projects(options)
    plan = _joined([project for project, _ in projects])
    project_of = {job.path: project for project, _ in projects for job in project.jobs}
    # what reaches each region is a fact of the whole project: a region is fixed in the file that holds it
    reach, errors = {}, list(plan.errors)
    for project, cache in projects:
        found, failed = runner.reach(project.jobs, project.project_files, project.import_roots, _workers(options),
                                     cache)
        reach.update(found)
        errors += failed
        _warn_about_cache(options, cache)
    remaining: list[Diagnostic] = []
    fixed: list[tuple[str, object]] = []  # (display path, FixedRegion)
    imports: dict[str, set[str]] = {}  # import statement -> the files it was added to
    fixed_files = 0
    in_memory = bool(options.diff or options.stdin_filename)  # nothing is written: the fixed bytes are kept
    kept: dict[Path, tuple[bytes, bytes]] = {}  # in memory: the bytes read and fixed, of each file gated in
    workers = min(_workers(options), len(plan.jobs)) if len(plan.jobs) > PARALLEL_MIN_FILES else 1
    with Workers(workers) as pool:
        pending = [(job, data, pool.submit(fix_pending, data, job.display_path, codes, reach.get(job.path),
                                           project_of[job.path].fixes, job.torch_version,
                                           if_worker_stops=(None, _stopped([job]))))
                   for job, data, codes in _gated(plan.jobs, errors, reach)]
        for job, data, result in pending:
            outcome, error = result()
            if error is not None:
                errors.append(error)
                continue
            new, left, done = outcome
            remaining += left
            if in_memory:
                kept[job.path] = data, new
            elif new == data:
                continue
            else:
                try:
                    replace_file(job.path, new, data, job.display_path)
                except WriteError as failure:
                    errors.append(str(failure))
                    continue
            if new != data:
                fixed_files += 1
                fixed += [(job.display_path, region) for region in done.regions]
                for statement in done.imports:
                    imports.setdefault(statement, set()).add(job.display_path)
    # what remains, as the whole project shows it; an unused `# noqa` is a fact of the whole project:
    # its removal is applied from the project's check, to the files written or to the bytes kept
    if not in_memory or any(suppression.UNUSED_NOQA in job.codes for job in plan.jobs):
        remaining = []
        for project, cache in projects:
            jobs = [replace(job, data=kept[job.path][1]) if job.path in kept else job for job in project.jobs]
            outcome = runner.check(jobs, project.project_files, project.import_roots, _workers(options),
                                   cache, Fixer(project.fixes))
            _warn_about_cache(options, cache)
            removed, rewritten = _remove_unused_noqa(project, jobs, outcome.diagnostics, errors, write=not in_memory)
            if removed:
                kept.update({path: (kept[path][0], new) for path, new in rewritten.items() if path in kept})
                fixed_files += len({path for path, _ in removed} - {path for path, _ in fixed})
                fixed += removed
                errors += outcome.errors
                jobs = [replace(job, data=kept[job.path][1]) if job.path in kept else job for job in project.jobs]
                outcome = runner.check(jobs, project.project_files, project.import_roots, _workers(options),
                                       cache, Fixer(project.fixes))
            remaining += outcome.diagnostics
            errors += outcome.errors
    if options.stdin_filename:  # the fixed source goes to standard output, the rest to stderr
        # nothing to fix, an excluded name, or an error: standard input comes back as it was (as ruff does)
        sys.stdout.buffer.write(next(iter(kept.values()))[1] if kept else plan.stdin or b"")
        sys.stdout.flush()
    elif options.diff:
        color = _use_color(options.color, sys.stdout)
        for job in plan.jobs:
            data, new = kept.get(job.path, (b"", b""))
            if new != data:
                _write(sys.stdout, output.diff(job.display_path, data, new, color))
    remaining.sort(key=lambda d: d.sort_key)
    text_format = options.output_format in output.TEXT_FORMATS
    if text_format and fixed_files and not options.quiet:
        _write(sys.stderr, output.fixed_summary(fixed, fixed_files, imports, options.show_fixes, options.diff))
    elif text_format and not options.quiet and not options.stdin_filename and (remaining or options.diff):
        _write(sys.stderr, _nothing_fixed(remaining, plan.fixes))
    if options.diff:
        for error in errors:
            _report("error", error)
        if errors:
            return EXIT_ERROR
        return EXIT_FINDINGS if fixed_files and not options.exit_zero else EXIT_CLEAN
    return _finish(options, remaining, errors, sys.stderr if options.stdin_filename else sys.stdout, plan.unread,
                   plan.fixes.unsafe_fixes, plan.root, plan.exit_on_note)


def _nothing_fixed(remaining: list[Diagnostic], fixes: FixSettings) -> str:
    """What a `fix` that changed nothing says, as ruff does: how many findings have no fix, and
    how many fixes `--unsafe-fixes` would apply."""
    if not remaining:
        return "Nothing to fix: no findings.\n"
    unfixed = sum(d.fix is None for d in remaining)
    hidden = sum(d.fix is not None and not fixes.applies(d.fix.applicability) for d in remaining)
    parts = [f"{unfixed} finding{'s have' if unfixed != 1 else ' has'} no fix"] if unfixed else []
    if hidden:
        parts.append(f"{hidden} hidden fix{'es' * (hidden != 1)} can be enabled with the `--unsafe-fixes` option")
    return f"Nothing to fix: {', '.join(parts) or 'no fix applies'}.\n"


def _remove_unused_noqa(plan: Plan, jobs: list[Job], diagnostics: list[Diagnostic], errors: list[str],
                       write: bool = True) -> tuple[list[tuple[str, object]], dict[Path, bytes]]:
    """Apply the fixes of NG100 findings (unused `# noqa` codes) the project's check of `jobs` gives:
    (display path, FixedRegion) for each, and the new bytes of each file changed. Each file is
    written in one step (`write`), or only kept."""
    from lint_nograd.fix.noqa import NoqaError, remove_unused
    from lint_nograd.fix.rewrite import FixedRegion

    by_path: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        if diagnostic.code == "NG100" and diagnostic.fix is not None \
                and plan.fixes.applies(diagnostic.fix.applicability):
            by_path.setdefault(diagnostic.path, []).append(diagnostic)
    by_shown = {job.display_path: job for job in jobs if write is (job.data is None)}
    removed: list[tuple[str, object]] = []
    rewritten: dict[Path, bytes] = {}
    for shown, found in sorted(by_path.items()):
        job = by_shown.get(shown)
        if job is None:
            continue
        try:
            data = job.data if job.data is not None else read_regular_file(job.path)
            new = remove_unused(data, found, notebook=shown.endswith(".ipynb"))
            if write:
                replace_file(job.path, new, data, shown)
        except (OSError, NoqaError, NotebookError) as error:
            errors.append(f"cannot remove unused noqa directives from {shown}: {error}")
            continue
        except WriteError as error:
            errors.append(str(error))
            continue
        rewritten[job.path] = new
        removed += [(shown, FixedRegion(row, "NG100", cell)) for cell, row in sorted({(d.cell, d.row) for d in found},
                                                                                        key=lambda w: (w[0] or 0, w[1]))]
    return removed, rewritten


def _finish(options: argparse.Namespace, diagnostics: list[Diagnostic], errors: list[str],
            stream: TextIO | None = None, unread: int = 0, unsafe_fixes: bool = False,
            root: Path = Path("."), exit_on_note: bool = False) -> int:
    """Report the findings and errors of a run (to `--output-file`, if given); the exit status: a
    note alone fails a run only when asked."""
    stream = stream or sys.stdout
    text_format = options.output_format in output.TEXT_FORMATS and not options.quiet  # -q: findings only
    width = output.terminal_width(None if options.output_file else stream)  # a file: COLUMNS, else 80
    if options.statistics:
        text = output.statistics(diagnostics, options.output_format, unsafe_fixes)
    else:
        color = options.color == "always" if options.output_file else _use_color(options.color, stream)
        # SARIF and GitLab name files from the repository's root, which is where CI looks for them
        source_root = repository_root(root.absolute()) if options.output_format in ("sarif", "gitlab") else None
        text = output.render(diagnostics, options.output_format, color, unsafe_fixes, source_root, width)
    if text_format and (diagnostics or not errors):
        text += output.summary(diagnostics, unsafe_fixes, width if options.output_format == "full" else None)
    if text_format and unread:
        text += f"Part of the tree could not be read (see {unread} warning{'s' * (unread != 1)}).\n"
    if options.output_file:
        try:
            write_file(Path(options.output_file), text.encode("utf-8"))
        except WriteError as error:
            errors = [*errors, str(error)]
    elif options.quiet < 2:
        _write(stream, text)
    for error in errors:
        _report("error", error)

    if errors:
        return EXIT_ERROR
    failing = any(exit_on_note or diagnostic.severity != "note" for diagnostic in diagnostics)
    return EXIT_FINDINGS if failing and not options.exit_zero else EXIT_CLEAN


def run_graph(options: argparse.Namespace) -> int:
    """The call graph of each project the paths belong to, built as `check --no-cache` with every file
    summarised; or, with --explain, what reaches the region at a line."""
    from lint_nograd.project.callgraph import CallGraph
    from lint_nograd.run.stages import Run

    explain = None
    if options.explain:
        name, _, line = options.explain.rpartition(":")
        if not name or not line.isdigit():
            raise ConfigError(f"--explain takes FILE:LINE, not {options.explain}")
        explain = (Path(os.path.realpath(name)), int(line))
        if not explain[0].is_file():
            raise ConfigError(f"--explain: no such file: {name}")
        options.paths = options.paths or [name]
    graphs, errors = [], []
    for plan, cache in _projects(options):
        if plan.errors:
            raise ConfigError(plan.errors[0])
        with Workers(_workers(options)) as pool:
            run = Run(plan.jobs, plan.project_files, plan.import_roots, pool, cache, everything=True)
            graphs.append((CallGraph(run.linked()), run))
            errors += run.outcome.errors
        cache.save()
    for error in errors:
        _report("error", error)
    if explain is not None:
        for graph, run in graphs:
            file = next((f for path, f in run.files.items() if os.path.realpath(path) == str(explain[0])), None)
            if file is not None and run.by_module.get(file.module) is file:
                found = graph.explain(file.module, explain[1])
                if found is None:
                    summary = graph.project.summary(file.module)
                    rows = sorted({r.span.row for r in summary.regions}) if summary else []
                    where = f"; its regions start at line {', '.join(map(str, rows))}" if rows else "; it has none"
                    raise ConfigError(f"--explain: no grad-disabled region at {options.explain}{where}")
                _write(sys.stdout, "".join(line + "\n" for line in found))
                return EXIT_ERROR if errors else EXIT_CLEAN
        raise ConfigError(f"--explain: {explain[0].name} is not a module of the projects given")
    if options.output_format == "pycg":
        named = {caller: callees for graph, _ in graphs for caller, callees in graph.named().items()}
        _write(sys.stdout, json.dumps(dict(sorted(named.items())), indent=4) + "\n")
    else:
        _write(sys.stdout, "".join(graph.text() for graph, _ in graphs))
    return EXIT_ERROR if errors else EXIT_CLEAN


def run_rule(options: argparse.Namespace) -> int:
    if options.all:
        _write(sys.stdout, _rule_table())
        return EXIT_CLEAN
    rule = RULES.get(options.code.upper()) or next(
        (rule for rule in RULES.values() if rule.name == options.code), None)
    if rule is None:
        _report("error", f"unknown rule: {options.code} (see `{PROG} rule --all`)")
        return EXIT_ERROR
    page = output.rule_page(rule.code) or f"# {rule.code} ({rule.name})\n\n{rule.summary}\n"
    _write(sys.stdout, page if page.endswith("\n") else page + "\n")
    return EXIT_CLEAN


def run_server(options: argparse.Namespace) -> int:
    try:
        from lint_nograd import server  # pygls and lsprotocol: only the `server` extra installs them
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in ("pygls", "lsprotocol"):
            raise
        _report("error", f"the language server needs pygls and lsprotocol: pip install '{PROG}[server]'")
        return EXIT_ERROR
    return server.main()


def _rule_table() -> str:
    rows = [("CODE", "NAME", "SEVERITY", "DEFAULT", "FIX")] + [
        (rule.code, rule.name, rule.severity, "on" if rule.code in DEFAULT_SELECT else "off",
         "yes" if rule.fixable else "no")
        for rule in RULES.values()
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    return "".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + f"  {row[4]}\n"
        for row in rows
    )


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _glob_list(text: str) -> list[str]:
    globs = _comma_list(text)
    for glob in globs:
        if not is_valid_pattern(glob):
            raise argparse.ArgumentTypeError(f"`{glob}` is not a valid glob")
    return globs


def _torch_version(text: str) -> str:
    try:
        return target(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive_int(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return number


def _use_color(choice: str, stream: TextIO) -> bool:
    if choice != "auto":
        return choice == "always"
    return not os.environ.get("NO_COLOR") and stream.isatty()


def _report(kind: str, message: str) -> None:
    _write(sys.stderr, f"{PROG}: {kind}: {message}\n")


def _warn(options: argparse.Namespace, message: str) -> None:
    if not options.quiet:
        _report("warning", message)


class ReportLost(Exception):
    """Standard output or standard error could not be written."""


def _write(stream: TextIO, text: str) -> None:
    try:
        try:
            stream.write(text)
        except UnicodeEncodeError:  # a file name the terminal's encoding cannot show
            encoding = getattr(stream, "encoding", None) or "utf-8"
            stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        raise ReportLost(error.strerror or error) from None
