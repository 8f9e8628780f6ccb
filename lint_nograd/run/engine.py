"""The pipeline for one file: read bytes -> cheap gate -> parse -> semantic model -> rules -> noqa;
and the stages a project run takes each file through: its facts (local findings and summary),
the findings linking the project gives it, and those findings finished with fixes.

Checking parses with the standard library's `ast`, which is an order of magnitude faster than
libcst. Fixes are a layer above this one (`lint_nograd.fix.rewrite`): the command line passes its
`attach_fixes` in, and libcst is loaded only to rewrite regions, where every byte that is not
rewritten must stay.
"""
from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from dataclasses import dataclass, replace
from typing import Callable, Optional

from lint_nograd import checks
from lint_nograd.analysis import torch_names
from lint_nograd.analysis.entry_points import DROPS
from lint_nograd.analysis.model import Mode, SemanticModel
from lint_nograd.analysis.releases import behaviour, default_target
from lint_nograd.checks import backward_through_call, transform_through_call
from lint_nograd.checks.finding import Finding, shorten
from lint_nograd.checks.region_in_reached_function import (
    RegionFinding,
    call_name,
    first_selected,
    message_at_reacher,
    message_at_region,
    modes_that_cannot_matter,
    region_code,
)
from lint_nograd.project.linking import ModuleEntry, Project, Reacher, callee_text
from lint_nograd.project.summary import ModuleSummary, Span, display_name, passes_to_json, span_of, summarise
from lint_nograd.report import suppression
from lint_nograd.report.diagnostics import Diagnostic, Related
from lint_nograd.report.registry import RULES
from lint_nograd.run.notebook import Notebook, NotebookError

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
        return text_lines(self.text)


def text_lines(text: str) -> list[str]:
    return _LINE_BREAK.split(text) if "\r" in text else text.split("\n")


class ParseError(Exception):
    def __init__(self, message: str, row: int = 1, col: int = 1):
        super().__init__(message)
        self.message, self.row, self.col = message, row, col


# the codes whose fix rewrites a region (NG100's fix is an edit of a comment)
FIXABLE_CODES = frozenset(code for code, rule in RULES.items() if rule.fixable and code != suppression.UNUSED_NOQA)
LOCAL_RULES = frozenset({"NG001", "NG002"})  # a file alone decides their findings: a file alone judges their noqa
# The fix layer's hook: (diagnostics, [(region, finding)] of the fixable ones, parsed file, model) -> the
# diagnostics with their fixes.
AttachFixes = Callable[[list[Diagnostic], list, ParsedFile, SemanticModel], list[Diagnostic]]


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


def to_diagnostic(finding: Finding, parsed: ParsedFile, display_path: str) -> Diagnostic:
    related = tuple(related_at(span_of(node, parsed.lines), message, display_path)
                    for message, node in finding.related)
    return _at(span_of(finding.node, parsed.lines), finding.code, finding.message, display_path,
               finding.severity, finding.help, related)


def _at(span: Span, code: str, message: str, display_path: str, severity: str | None = None, help: str = "",
        related: tuple[Related, ...] = ()) -> Diagnostic:
    return Diagnostic(code=code, message=message, path=display_path, row=span.row, col=span.col,
                      end_row=span.end_row, end_col=span.end_col, severity=severity or RULES[code].severity,
                      source_line=span.line, help=help, related=related)


def related_at(span: Span, message: str, path: str) -> Related:
    return Related(message, path, span.row, span.col, span.end_row, span.end_col)


_NOQA_NAMING_OURS = re.compile(rb"noqa[ \t]*:[^\n]*\bNG\d", re.IGNORECASE)


def codes_to_check(data: bytes, codes: frozenset[str], scan: torch_names.Scan | None = None) -> frozenset[str]:
    """The exact gate: the codes that can have a finding in a file with these bytes (`scan`: read
    already). Every finding needs a grad-disabling region, and every rule needs some more words."""
    scan = scan or torch_names.Scan(data)
    possible = scan.possible_codes(codes) if scan.regions else frozenset()
    if suppression.UNUSED_NOQA in codes and _NOQA_NAMING_OURS.search(data):  # NG100 reads every `# noqa: NG...`
        possible |= codes & {suppression.UNUSED_NOQA, "NG000"}
    return possible


def check_source(data: bytes, display_path: str, codes: frozenset[str], attach_fixes: AttachFixes | None = None,
                 reach: Reach | None = None, torch_version: str | None = None) -> list[Diagnostic]:
    """Check one file on its own, as the flake8 plugin and `fix` do: the project is this file alone,
    but for `reach` (function -> mode -> reacher, from the whole project) when given. `attach_fixes`
    (the fix layer's, given by its callers) adds to each fixable finding its fix, or why there is none.
    The findings are those of the torch release `torch_version` ("2.13"; None: the default)."""
    if display_path.endswith(".ipynb"):
        return _in_cells(data, display_path, codes, lambda source: check_source(
            source, display_path + ".py", codes, attach_fixes, reach, torch_version))
    selected, codes = codes, codes_to_check(data, codes) if not reach else codes  # reached from elsewhere: no gate
    return analyse(data, display_path, codes, attach_fixes, reach, torch_version, selected) if codes else []


def analyse(data: bytes, display_path: str, codes: frozenset[str], attach_fixes: AttachFixes | None = None,
            reach: Reach | None = None, torch_version: str | None = None,
            selected: frozenset[str] | None = None) -> list[Diagnostic]:
    """Parse and check a Python file without the gate (tests compare the two), as a project of one.
    `selected`: the codes asked for, before the gate took those the text cannot have (default `codes`)."""
    facts, parsed, model = _facts(data, display_path, codes, torch_version)
    if facts.summary is None:
        return facts.local
    project = Project({ALONE: ModuleEntry(ALONE, display_path, summary=facts.summary, loaded=True)},
                      passes=lambda entry: {name: function.passes for name, function
                                            in summarise(model, parsed.lines, passes=True).functions.items()})
    if reach is None:
        project.link([ALONE])
    else:
        project.reached.update({(ALONE, function): modes for function, modes in reach.items()})
    # with `reach` from the project, the other files' transforms and reads are not here to tell
    found = linked(project, ALONE, frozenset({ALONE}), codes, display_path, torch_version, reach is None)
    # alone, a file knows all findings of the local rules only: NG100 judges their directives
    return sorted(suppression.settle(facts.local + _finished(parsed, model, found, codes, attach_fixes),
                                     (codes if selected is None else selected) & LOCAL_RULES),
                  key=lambda d: d.sort_key)


ALONE = "<file>"  # the module name of a file checked on its own
Reach = dict[str, dict[str, Reacher]]  # function of a module -> mode -> its first reacher


# -- the stages of a project run: facts of each file, linked findings, finished findings -------------

Makers = dict[str, Mode]  # the grad-mode makers a file imports, by the name it spells them with


@dataclass
class FileFacts:
    """What one file says by itself: the findings it shows alone, and its summary for the project."""

    local: list[Diagnostic]  # with suppressions applied; in cells, for a notebook
    summary: ModuleSummary | None  # None when the file does not parse
    makers: tuple = ()  # what it defines that makes a grad mode (`region_makers`), when asked for


def facts(data: bytes, display_path: str, codes: frozenset[str], torch_version: str | None = None,
          makers: Makers | None = None, find_makers: bool = False) -> FileFacts:
    """Parse a file and summarise it; `codes` are the local rules to check (none: only summarise);
    `makers`: the grad-mode makers it imports (`SemanticModel.makers`); `find_makers`: find those it
    defines too (`region_makers`)."""
    if display_path.endswith(".ipynb"):
        try:
            notebook = Notebook.read(data)
        except NotebookError as error:
            return FileFacts([_parse_error(str(error), 1, 1, display_path)] if "NG000" in codes else [], None)
        source = notebook.source.encode()
        found = facts(source, display_path + ".py", codes_to_check(source, codes), torch_version, makers)
        return FileFacts([in_notebook(notebook, d, display_path) for d in found.local], found.summary)
    found, _, model = _facts(data, display_path, codes, torch_version, makers)
    return replace(found, makers=_makers_of(model)) if find_makers and model is not None else found


def region_makers(data: bytes) -> tuple[tuple, ...]:
    """What a file defines that makes a grad mode when called (`SemanticModel.region_makers`), as the
    text index keeps it; none when it cannot be read as Python."""
    try:
        parsed = parse(data)
        return _makers_of(SemanticModel(parsed.tree, parsed.text))
    except (ParseError, RecursionError):
        return ()


def _makers_of(model: SemanticModel) -> tuple[tuple, ...]:
    return tuple((name, *mode) for name, mode in sorted(model.region_makers().items()))


def passes(data: bytes, display_path: str, makers: Makers | None = None) -> dict:
    """What each call of a file's functions passes (`summary.passes_of`), as JSON: asked only for
    the modules a transform or tracer reaches, so not part of the summary. Empty when the file
    cannot be read as Python."""
    if display_path.endswith(".ipynb"):
        try:
            data = Notebook.read(data).source.encode()
        except NotebookError:
            return {}
    try:
        parsed = parse(data)
        return passes_to_json(summarise(SemanticModel(parsed.tree, parsed.text, makers), parsed.lines, passes=True))
    except (ParseError, RecursionError):
        return {}


def _facts(data: bytes, display_path: str, codes: frozenset[str], torch_version: str | None = None,
           makers: Makers | None = None):
    try:
        parsed = parse(data)
        model = SemanticModel(parsed.tree, parsed.text, makers)
        summary = summarise(model, parsed.lines)
    except ParseError as error:
        return FileFacts([_parse_error(error.message, error.row, error.col, display_path)]
                         if "NG000" in codes else [], None), None, None
    except RecursionError:
        message = "cannot analyse: the code is nested too deeply"
        return FileFacts([_parse_error(message, 1, 1, display_path)] if "NG000" in codes else [], None), None, None
    local = [to_diagnostic(finding, parsed, display_path)
             for finding in checks.run(model, codes, torch_version)]
    unused_noqa = suppression.UNUSED_NOQA in codes
    if unused_noqa:  # candidates, settled once the linked findings are there too
        local += suppression.unused_candidates(parsed.lines, display_path, RULES)
    local = sorted(suppression.unsuppressed(local, parsed.lines, keep=unused_noqa), key=lambda d: d.sort_key)
    return FileFacts(local, summary), parsed, model


Linked = tuple[Optional[int], Diagnostic]  # a finding linking gives a file, and the index of its region


def linked(project: Project, module: str, given: frozenset[str], codes: frozenset[str],
           display_path: str, torch_version: str | None = None, whole_project: bool = True,
           lines_of: Callable[[str], Optional[list[str]]] | None = None) -> list[Linked]:
    """The findings linking gives one file: its regions that transforms or tracers reach; regions of
    modules not `given` whose reaching call is here, unless a directive of the region's file silences
    the region (`lines_of`: a module's lines); backward through what another function returns.
    Without fixes or suppressions yet: `finish` adds them, with the file's text."""
    summary = project.summary(module)
    if summary is None:
        return []
    release = behaviour(torch_version or default_target())
    found: list[Linked] = []
    whole = project if whole_project else None  # what only the whole project can tell
    for index, region in enumerate(summary.regions):
        reach, cannot_matter = project.reach_of(module, region), modes_that_cannot_matter(region, whole, module)
        finding = first_selected(region, reach, codes, release, cannot_matter)
        if finding is not None:
            related = _reacher_related(project, finding, module)
            traced = reach.get(DROPS) if finding.kind == "forward" and DROPS not in cannot_matter else None
            if traced is not None:  # one finding, the worst mode's: the tracer is named too (and the fix reads it)
                related += (related_at(traced.span, f"`{shorten(traced.text, 40)}` {_TRACES_TOO}",
                                       project.path(traced.module)),)
            found.append((index, _at(region.span, finding.code, message_at_region(finding, region), display_path,
                                     finding.severity, finding.help, related)))
    for region_module, region, reach in project.reported_in(given).get(module, []):
        cannot_matter = modes_that_cannot_matter(region, whole, region_module)
        finding = first_selected(region, reach, codes, release, cannot_matter)
        # one problem, one code: a call is told of a region in the mode that is the region's worst
        if finding is None or finding.code != region_code(region, project.reach_of(region_module, region), release,
                                                          cannot_matter):
            continue
        # silenced where it is, as `check .` silences it: the call is not told either
        region_lines = lines_of(region_module) if lines_of is not None else None
        if region_lines is not None and suppression.silences(region_lines, region.span.row, finding.code):
            continue
        reacher = finding.reacher
        at_module, span, text = reacher.via or (reacher.module, reacher.span, reacher.text)
        if at_module == module:
            function = f"{region_module}.{display_name(region.function)}" if region.function else region_module
            related = (related_at(region.span, f"the `{region.api}` region in `{function}`",
                                  project.path(region_module)),)
            if reacher.via is not None:
                related += (related_at(reacher.span, f"where {call_name(reacher)} applies it",
                                       project.path(reacher.module)),)
            message = message_at_reacher(finding, region, callee_text(text),
                                         f"{project.path(region_module)}:{region.span.row}")
            found.append((None, _at(span, finding.code, message, display_path, finding.severity, finding.help,
                                    related)))
    if codes & {"NG001", "NG002", "NG003"}:  # (a backward run in the region's mode: NG003)
        found += _run_in_regions(project, module, codes, display_path, release, torch_version or default_target())
    if "NG003" in codes:
        for site in summary.backwards:
            callee = project.graphless_callee(module, site)
            if callee is not None:
                callee_module, function = callee
                related = (related_at(function.returns_region, backward_through_call.related_message(site, function),
                                      project.path(callee_module)),)
                found.append((None, _at(site.span, "NG003", backward_through_call.message(site, function),
                                        display_path, help=backward_through_call.HELP, related=related)))
    return found


def _run_in_regions(project: Project, module: str, codes: frozenset[str], display_path: str, release,
                    torch_version: str) -> list[Linked]:
    """NG001 / NG002 (and NG003) at each call in a region that runs a transform (or a backward) in the
    region's mode: one a call and rule, an error before a note."""
    by_call: dict[tuple[Span, str], tuple] = {}
    for run in project.run_in_regions(module):
        finding = transform_through_call.finding(run, release, torch_version)
        if finding is not None and finding.code in codes:
            known = by_call.get((run.call.span, finding.code))
            if known is None or known[1].severity == "note" and finding.severity == "error":
                by_call[(run.call.span, finding.code)] = (run, finding)
    found: list[Linked] = []
    for run, finding in by_call.values():
        where = transform_through_call.chain_text(run, module)
        related = (related_at(run.call.region, f"the `{run.call.api}` region", display_path),
                   related_at(run.applied.span, f"`{shorten(run.applied.text, 40)}`, run through {where}",
                              project.path(run.module)))
        found.append((None, _at(run.call.span, finding.code, finding.message, display_path, finding.severity,
                                finding.help, related)))
    return found


_TRACES_TOO = "traces it too"


def may_be_traced(diagnostic: Diagnostic) -> bool:
    """Whether a tracer reaches the region of a NG004-NG006 finding (a finding names the worst mode's
    first reacher: NG005 a tracer, NG004 a forward-mode transform and then any tracer too)."""
    return diagnostic.code == "NG005" or any(r.message.endswith(_TRACES_TOO) for r in diagnostic.related)


_REACHES = {"forward": "reaches it in forward mode", "traced": "traces it", "inference": "reaches it",
            "reverse": "reaches it"}


def _reacher_related(project: Project, finding: RegionFinding, here: str) -> tuple[Related, ...]:
    """Where the call that reaches a region is, and the call that handed the function on to it."""
    reacher = finding.reacher
    text = "`with dual_level()`" if reacher.entry == "dual_level" else f"`{shorten(reacher.text, 40)}`"
    message = f"{text} {_REACHES[finding.kind]}"
    if reacher.through is not None:
        through_module, function = reacher.through
        function = display_name(function)
        message += f" through `{function if through_module == here else f'{through_module}.{function}'}`"
    related = (related_at(reacher.span, message, project.path(reacher.module)),)
    if reacher.via is not None:
        via_module, via_span, via_text = reacher.via
        related += (related_at(via_span, f"given to `{shorten(callee_text(via_text), 40)}` here",
                               project.path(via_module)),)
    if reacher.assumed is not None:
        assumed_module, assumed_span, note = reacher.assumed
        related += (related_at(assumed_span, note, project.path(assumed_module)),)
    return related


def finish(data: bytes, display_path: str, codes: frozenset[str], found: list[Linked],
           attach_fixes: AttachFixes | None = None, makers: Makers | None = None) -> list[Diagnostic]:
    """The linked findings of a file with the fixes of fixable ones (or why there is none), and
    its suppressions applied; placed in their cells for a notebook."""
    if display_path.endswith(".ipynb"):
        return _in_cells(data, display_path, codes,
                         lambda source: finish(source, display_path + ".py", codes, found, attach_fixes, makers))
    try:
        parsed = parse(data)
        model = SemanticModel(parsed.tree, parsed.text, makers)
    except (ParseError, RecursionError):
        return []  # changed since it was summarised; the next run sees it again
    return _finished(parsed, model, found, codes, attach_fixes)


def _finished(parsed: ParsedFile, model: SemanticModel, found: list[Linked], codes: frozenset[str],
              attach_fixes: AttachFixes | None) -> list[Diagnostic]:
    diagnostics = [diagnostic for _, diagnostic in found]
    regions = model.regions  # a list made on each read: once
    fixable = [(regions[index], diagnostic) for index, diagnostic in found
               if index is not None and index < len(regions) and diagnostic.code in FIXABLE_CODES]
    if fixable and attach_fixes is not None:
        diagnostics = attach_fixes(diagnostics, fixable, parsed, model)
    return suppression.unsuppressed(diagnostics, parsed.lines, keep=suppression.UNUSED_NOQA in codes)


def _in_cells(data: bytes, display_path: str, codes: frozenset[str], check) -> list[Diagnostic]:
    """Check a notebook's code cells joined as one file, then place each finding back in its cell."""
    try:
        notebook = Notebook.read(data)
    except NotebookError as error:
        return [_parse_error(str(error), 1, 1, display_path)] if "NG000" in codes else []
    return [in_notebook(notebook, d, display_path) for d in check(notebook.source.encode())]


def in_notebook(notebook: Notebook, diagnostic: Diagnostic, display_path: str) -> Diagnostic:
    """A finding in the joined cells of a notebook, placed in its cell and shown under the notebook's
    path; so is each place it points at in the same cells."""
    located = notebook.locate(diagnostic)
    related = tuple(replace(r, path=display_path) if r.path == diagnostic.path else r for r in located.related)
    return replace(located, path=display_path, related=related)


def _parse_error(message: str, row: int, col: int, display_path: str) -> Diagnostic:
    return Diagnostic("NG000", message, display_path, row, col, row, col, RULES["NG000"].severity)
