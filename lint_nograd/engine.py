"""The pipeline for one file: read bytes -> cheap gate -> parse -> semantic model -> rules -> noqa.

Checking parses with the standard library's `ast`, which is an order of magnitude faster than
libcst; libcst is loaded only to rewrite regions (the fix of a fixable finding), where every
byte that is not rewritten must stay.
"""
from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from dataclasses import dataclass, replace

from lint_nograd import api, checks, suppression
from lint_nograd.checks import backward_through_call
from lint_nograd.checks.region_in_reached_function import first_selected, message_at_reacher, message_at_region
from lint_nograd.diagnostics import Diagnostic, Fix
from lint_nograd.model import GradModeChange, SemanticModel
from lint_nograd.notebook import Notebook, NotebookError
from lint_nograd.project import ModuleEntry, Project
from lint_nograd.registry import RULES
from lint_nograd.summary import ModuleSummary, Region, Span, display_name, span_of, summarise

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what Python's tokenizer counts as a new line


@dataclass
class ParsedFile:
    """A file that passed the gate and parsed."""

    text: str
    tree: ast.Module
    encoding: str  # as found by its BOM or coding cookie: "utf-8", "utf-8-sig", "latin-1", ...

    @functools.cached_property
    def lines(self) -> list[str]:
        """The lines as Python counts them; needed only when there is something to report."""
        return _LINE_BREAK.split(self.text)


class ParseError(Exception):
    def __init__(self, message: str, row: int = 1, col: int = 1):
        super().__init__(message)
        self.message, self.row, self.col = message, row, col


def decode(data: bytes) -> tuple[str, str]:
    """The file's text and encoding, by its BOM or PEP 263 coding cookie (UTF-8 otherwise)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding), encoding
    except SyntaxError as error:  # an unknown or mismatched coding cookie
        raise ParseError(f"cannot decode the file: {error.msg}") from None
    except UnicodeDecodeError as error:
        row = data.count(b"\n", 0, error.start) + 1
        raise ParseError(f"cannot decode the file as {error.encoding}: invalid byte "
                         f"{data[error.start:error.start + 1]!r}", row) from None
    except (LookupError, UnicodeError) as error:  # `coding: rot13`, `coding: undefined`: no text codec
        raise ParseError(f"cannot decode the file: {error}") from None


def parse(data: bytes) -> ParsedFile:
    text, encoding = decode(data)
    if "\0" in text:
        row = text.count("\n", 0, text.index("\0")) + 1
        raise ParseError("the file contains a NUL byte; it is not Python source", row)
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        raise ParseError(f"cannot parse: {error.msg}", error.lineno or 1, error.offset or 1) from None
    except (RecursionError, MemoryError):
        raise ParseError("cannot parse: the code is nested too deeply") from None
    return ParsedFile(text, tree, encoding)


def to_diagnostic(finding: checks.Finding, parsed: ParsedFile, display_path: str) -> Diagnostic:
    return _at(span_of(finding.node, parsed.lines), finding.code, finding.message, display_path,
               finding.severity)


def _at(span: Span, code: str, message: str, display_path: str, severity: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, message=message, path=display_path, row=span.row, col=span.col,
                      end_row=span.end_row, end_col=span.end_col, severity=severity or RULES[code].severity,
                      source_line=span.line)


def codes_to_check(data: bytes, codes: frozenset[str]) -> frozenset[str]:
    """The exact gate: the codes that can have a finding in a file with these bytes. Every finding
    needs a grad-disabling region, and every rule needs some more words."""
    return api.possible_codes(data, codes) if api.names_grad_disabling_api(data) else frozenset()


def check_source(data: bytes, display_path: str, codes: frozenset[str]) -> list[Diagnostic]:
    """Check one file on its own, as the flake8 plugin and `fix` on standard input do: the project
    is this file alone."""
    if display_path.endswith(".ipynb"):
        return _check_notebook(data, display_path, codes)
    codes = codes_to_check(data, codes)
    return analyse(data, display_path, codes) if codes else []


@dataclass
class Link:
    """The linked project, as one file of it sees it."""

    project: Project
    module: str  # this file's module
    given: frozenset[str]  # the modules whose files are being checked: a region elsewhere is reported here

    def reported_here(self) -> list[tuple[str, Region]]:
        """The reached regions of modules not given whose reaching call is in this file."""
        return self.project.reported_in(self.given).get(self.module, [])


def analyse(data: bytes, display_path: str, codes: frozenset[str], link: Link | None = None) -> list[Diagnostic]:
    """Parse and check a Python file without the gate (tests compare the two). Without `link`, the
    project is this file alone."""
    try:
        parsed = parse(data)
        model = SemanticModel(parsed.tree, parsed.text)
        summary = summarise(model, parsed.lines) if link is None else None
    except ParseError as error:
        return [_parse_error(error.message, error.row, error.col, display_path)] if "NG000" in codes else []
    except RecursionError:
        message = "cannot analyse: the code is nested too deeply"
        return [_parse_error(message, 1, 1, display_path)] if "NG000" in codes else []
    if link is None:
        link = alone(summary)
    findings = checks.run(model, codes)
    diagnostics = [to_diagnostic(finding, parsed, display_path) for finding in findings]
    region_findings = region_findings_of(model, link, codes, display_path)
    diagnostics += [diagnostic for _, diagnostic in region_findings]
    diagnostics += _linked_findings(link, codes, display_path)
    if region_findings and codes & FIXABLE_CODES:
        diagnostics = _with_fixes(diagnostics, region_findings, parsed, model)
    if not diagnostics:
        return []
    return sorted(suppression.unsuppressed(diagnostics, parsed.lines), key=lambda d: d.sort_key)


def alone(summary: ModuleSummary) -> Link:
    """The project of one file, linked."""
    project = Project({ALONE: ModuleEntry(ALONE, "", summary=summary, loaded=True)})
    project.link([ALONE])
    return Link(project, ALONE, frozenset({ALONE}))


ALONE = "<file>"  # the module name of a file checked on its own


def region_findings_of(model: SemanticModel, link: Link, codes: frozenset[str],
                     display_path: str) -> list[tuple[GradModeChange, Diagnostic]]:
    project, module = link.project, link.module
    summary = project.summary(module)
    if summary is None or not codes & REGION_CODES:
        return []
    found = []
    for region, region_summary in zip(model.regions, summary.regions):
        finding = first_selected(region_summary, project.reach_of(module, region_summary), codes)
        if finding is not None:
            message = message_at_region(finding, region_summary, lambda r: project.describe(r, module))
            found.append((region, _at(region_summary.span, finding.code, message, display_path, finding.severity)))
    return found


def _linked_findings(link: Link, codes: frozenset[str], display_path: str) -> list[Diagnostic]:
    """Findings in this file that other modules explain: a region elsewhere reached from here
    (reported at the reaching call), a backward through a value another function returns."""
    project, module = link.project, link.module
    found = []
    for region_module, region in link.reported_here():
        finding = first_selected(region, project.reach_of(region_module, region), codes)
        if finding is None:
            continue
        reacher = finding.reacher
        via_module, span, text = reacher.via or (reacher.module, reacher.span, reacher.text)
        if via_module != module:
            continue
        function = f"{region_module}.{display_name(region.function)}" if region.function else region_module
        where = project.where(region_module, region.span, module)
        found.append(_at(span, finding.code, message_at_reacher(finding, region, text, where, function),
                         display_path, finding.severity))
    summary = project.summary(module)
    if "NG003" in codes and summary is not None:
        for site in summary.backwards:
            callee = project.graphless_callee(module, site)
            if callee is not None:
                callee_module, function = callee
                where = project.where(callee_module, function.returns_region, module)
                found.append(_at(site.span, "NG003", backward_through_call.message(site, function, where),
                                 display_path))
    return found


def _check_notebook(data: bytes, display_path: str, codes: frozenset[str]) -> list[Diagnostic]:
    try:
        notebook = Notebook.read(data)
    except NotebookError as error:
        return [_parse_error(str(error), 1, 1, display_path)] if "NG000" in codes else []
    # the joined cells are checked as a .py file of the same name, then placed back in their cells
    joined = check_source(notebook.source.encode(), display_path + ".py", codes)
    return [replace(notebook.locate(d), path=display_path) for d in joined]


def _parse_error(message: str, row: int, col: int, display_path: str) -> Diagnostic:
    return Diagnostic("NG000", message, display_path, row, col, row, col, RULES["NG000"].severity)


FIXABLE_CODES = frozenset(code for code, rule in RULES.items() if rule.fixable)
REGION_CODES = frozenset({"NG004", "NG005", "NG006"})


def _with_fixes(diagnostics: list[Diagnostic], region_findings: list[tuple[GradModeChange, Diagnostic]],
                parsed: ParsedFile, model: SemanticModel) -> list[Diagnostic]:
    """Attach the rewrite `fix` would make to each fixable finding, or say why there is none."""
    from lint_nograd import fix  # loads libcst: only for files with fixable findings

    region_of = {id(diagnostic): region for region, diagnostic in region_findings
                 if diagnostic.code in FIXABLE_CODES}
    planned = fix.plan_fixes(parsed, model, list(region_of.values()))
    result = []
    for diagnostic in diagnostics:
        outcome = planned.get(region_of.get(id(diagnostic)))
        if isinstance(outcome, Fix):
            diagnostic = replace(diagnostic, fix=outcome)
        elif outcome:
            diagnostic = replace(diagnostic, message=f"{diagnostic.message} ({outcome})")
        result.append(diagnostic)
    return result
