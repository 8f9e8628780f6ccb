"""`lint-nograd fix`: rewrite the grad-disabled regions NG004-NG006 report; the fixes `check` shows.

    with torch.no_grad():                 ->    shift = stop_gradient(x.mean())
        shift = x.mean()

The fix is a layer of its own, above the engine: `plan` decides what a region becomes and
whether that is safe (on the `ast`, with `analysis.region_values` and `spelling`), `edit` writes it
with libcst (loaded only when a region is rewritten), and this module runs them over a file. The
engine does not import it: the command line hands `attach_fixes` to `engine.check_source`.

Everything here is linear in the size of the file and the number of its regions: the line
offsets, the statement blocks and the regions of a file are indexed once, and a file is analysed
once more after its fixes are applied (again only when a fix makes another one possible).
"""
from __future__ import annotations

import ast
import bisect
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from lint_nograd.analysis.model import GradModeChange, SemanticModel
from lint_nograd.analysis.region_values import Refusal
from lint_nograd.fix.plan import SHORT, RegionPlan, plan_region
from lint_nograd.fix.settings import UNSAFE, FixSettings
from lint_nograd.fix.spelling import Spelling, find_spelling, import_edit, line_starts, shadowed
from lint_nograd.report.diagnostics import Diagnostic, Edit, Fix
from lint_nograd.run import engine
from lint_nograd.run.engine import ParsedFile, ParseError, decode
from lint_nograd.run.notebook import Notebook, NotebookError

__all__ = ["FIXABLE_CODES", "FixResult", "FixSettings", "FixedRegion", "apply_edits", "attach_fixes",
           "check_with_fixes", "fix_source", "fix_text", "plan_fixes", "region_of"]

FIXABLE_CODES = engine.FIXABLE_CODES
MAX_PASSES = 10  # a fix can make another one possible: analyse again, at most this often
DEFAULT_SETTINGS = FixSettings()
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


# -- the fixes of one file ------------------------------------------------------------------------

def plan_fixes(parsed: ParsedFile, model: SemanticModel, regions: Sequence[GradModeChange],
               settings: FixSettings = DEFAULT_SETTINGS, traced: frozenset[int] = frozenset()
               ) -> dict[GradModeChange, Fix | str]:
    """For each region, the `Fix` that rewrites it, or the reason it cannot: a string "no fix: ...".
    `traced`: the ids of the regions a tracer may reach.

    Every `Fix` of one file that needs an import carries the identical insertion edit;
    `apply_edits` applies identical edits once. A finding's node is its region's `expr`:
    `regions_by_node(model)` gives the region to pass here.
    """
    file = _File(parsed, model, settings)
    return {region: file.fix(region, id(region) in traced) for region in regions}


class _File:
    """What rewriting the regions of one parsed file needs, each computed at most once."""

    def __init__(self, parsed: ParsedFile, model: SemanticModel, settings: FixSettings):
        self.parsed, self.model, self.settings = parsed, model, settings
        self._all_regions: dict[int, bool] = {}  # id(block) -> whether every statement in it is a region

    @cached_property
    def spelling(self) -> Spelling | str:
        return find_spelling(self.model, self.parsed.tree, self.settings.stop_gradient)

    @cached_property
    def line_starts(self) -> list[int]:
        return line_starts(self.parsed.text)

    @cached_property
    def import_edit(self) -> Edit:
        newline = _LINE_BREAK.search(self.parsed.text)
        return import_edit(self.parsed.tree, self.parsed.lines, self.spelling.import_line,
                           newline.group() if newline else "\n", self.settings.first_party)

    @cached_property
    def owners(self) -> set[int]:
        return {id(region.owner) for region in self.model.regions}

    @cached_property
    def block_of(self) -> dict[int, list[ast.stmt]]:
        """The statement list each statement of the file is in, by id."""
        found: dict[int, list[ast.stmt]] = {}
        pending = [self.parsed.tree.body]
        while pending:
            block = pending.pop()
            for statement in block:
                found[id(statement)] = block
                for name in ("body", "orelse", "finalbody"):
                    inner = getattr(statement, name, None)
                    if isinstance(inner, list):
                        pending.append(inner)
                pending += [part.body for part in (*getattr(statement, "handlers", ()),
                                                   *getattr(statement, "cases", ()))]
        return found

    def keep_valid(self, owner: ast.stmt) -> bool:
        """Whether the statement is the last of a block whose statements are all regions: other
        regions of it may go away in the same run, so this one leaves a `pass` if it goes."""
        block = self.block_of.get(id(owner), [owner])
        if block[-1] is not owner:
            return False
        if id(block) not in self._all_regions:
            self._all_regions[id(block)] = all(id(statement) in self.owners for statement in block)
        return self._all_regions[id(block)]

    def fix(self, region: GradModeChange, traced: bool = False) -> Fix | str:
        spelling = self.spelling
        if self.settings.may_add_shim or isinstance(spelling, Spelling) and not spelling.import_line:
            return spelling if isinstance(spelling, str) else self._fix(region, spelling)
        # The project does not declare lint-nograd: `.detach()` needs nothing new, and cuts in every
        # mode and under every tracer but `make_fx` from torch 2.14, which records it as `aten.alias`.
        if not traced or self.settings.make_fx_keeps_detach:
            fixed = self._fix(region, _DETACH)
            if isinstance(fixed, Fix):
                return fixed
        if isinstance(spelling, str):  # the names the import needs are taken
            return spelling
        fixed = self._fix(region, spelling, adds_dependency=True)
        return replace(fixed, applicability=UNSAFE) if isinstance(fixed, Fix) and len(fixed.edits) > 1 else fixed

    def _fix(self, region: GradModeChange, spelling: Spelling, adds_dependency: bool = False) -> Fix | str:
        try:
            if region.function is None:
                raise Refusal("the region is not inside a function")
            if shadowed(self.model, region, spelling):
                raise Refusal(f"{spelling.root} means something else in {getattr(region.function, 'name', '')}")
            plan = plan_region(self.model, region, spelling.detach)
            from lint_nograd.fix.edit import region_edit  # loads libcst: only once a region is rewritten

            edit = region_edit(self.parsed.text, self.parsed.lines, self.line_starts, plan, spelling,
                               self.keep_valid(region.owner))
        except Refusal as refusal:
            return f"no fix: {refusal}"
        except RecursionError:  # our walks of the region, or libcst's
            return "no fix: the region's code is nested too deeply"
        edits = (edit, self.import_edit) if plan.wraps and spelling.import_line else (edit,)
        return Fix(_message(plan, spelling, adds_dependency and len(edits) > 1), edits, plan.applicability)


_DETACH = Spelling("", "")


def _message(plan: RegionPlan, spelling: Spelling, adds_dependency: bool = False) -> str:
    region = plan.region
    name = region.describe()
    what = f"`@{name}` decorator" if region.is_decorator else f"`{name}` region"
    cut = spelling.cut()
    values = "the values returned" if region.is_decorator else "its values"
    heavy = f"`{plan.heavy_call}`"
    if plan.form == SHORT and not plan.wraps:
        message = f"Remove the {what}: it computes nothing to cut"
    elif plan.form == SHORT:
        message = f"Replace the {what} with {cut}" + (" on the values returned" if region.is_decorator else "")
    elif region.api == "inference_mode":
        message = f"Turn the {what} into `no_grad`, so that {heavy} records no graph, and cut {values} with {cut}"
    else:
        message = f"Keep the {what}, so that {heavy} records no graph, and cut {values} with {cut}"
    unsafe = [f"assumes `{plan.unknown_call}` returns new tensors"] if plan.applicability == UNSAFE else []
    if adds_dependency:
        unsafe.append("adds a dependency on lint-nograd, which the project does not declare")
    return f"{message} (unsafe: {'; '.join(unsafe)})" if unsafe else message


def regions_by_node(model: SemanticModel) -> dict[int, GradModeChange]:
    """The regions of a file by the id of their `expr`, the node NG004-NG006 findings report."""
    return {id(region.expr): region for region in model.regions}


def region_of(model: SemanticModel, node: ast.AST) -> GradModeChange | None:
    """The region a NG004-NG006 finding reports (for one node; `regions_by_node` for many)."""
    return regions_by_node(model).get(id(node))


def attach_fixes(diagnostics: list[Diagnostic], region_findings: list[tuple[GradModeChange, Diagnostic]],
                 parsed: ParsedFile, model: SemanticModel, settings: FixSettings = DEFAULT_SETTINGS) -> list[Diagnostic]:
    """Attach the rewrite `fix` would make to each fixable finding, or say why there is none (at
    the end of its `help`). The engine calls it (as `attach_fixes=`) with the findings of a file's regions."""
    region_of_finding = {id(diagnostic): region for region, diagnostic in region_findings}
    traced = frozenset(id(region) for region, diagnostic in region_findings if engine.may_be_traced(diagnostic))
    planned = plan_fixes(parsed, model, list({id(r): r for r in region_of_finding.values()}.values()), settings,
                         traced)
    result = []
    for diagnostic in diagnostics:
        outcome = planned.get(region_of_finding.get(id(diagnostic)))
        if isinstance(outcome, Fix):
            diagnostic = replace(diagnostic, fix=outcome)
        elif outcome:
            diagnostic = replace(diagnostic, help=f"{diagnostic.help} ({outcome})".lstrip())
        result.append(diagnostic)
    return result


def check_with_fixes(data: bytes, display_path: str, codes: frozenset[str],
                     settings: FixSettings = DEFAULT_SETTINGS, reach: engine.Reach | None = None,
                     torch_version: str | None = None) -> list[Diagnostic]:
    """What `check` reports on one file: the engine's findings, each fixable one with its fix or why
    there is none; `reach` is what reaches the file's functions in the whole project (else the file
    alone tells); `torch_version` the release they are for (None: the default)."""
    attach = functools.partial(attach_fixes, settings=settings)
    return engine.check_source(data, display_path, codes, attach_fixes=attach, reach=reach,
                               torch_version=torch_version)


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply edits in position order; an identical edit counts once, one overlapping an edit
    already applied is skipped."""
    starts = line_starts(text)

    def offset(row: int, col: int) -> int:
        return min(starts[min(row, len(starts)) - 1] + col - 1, len(text))

    spans = sorted({(offset(e.row, e.col), offset(e.end_row, e.end_col), e.content) for e in edits},
                   key=lambda span: (span[0], span[1]))
    pieces, position = [], 0
    for start, end, content in spans:
        if start < position:
            continue  # overlaps an edit already applied
        pieces += [text[position:start], content]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


# -- fixing a whole file ----------------------------------------------------------------------------

@dataclass(frozen=True)
class FixedRegion:
    """A region `fix_source` rewrote: where it was in the original file, and the finding it fixed."""

    row: int
    code: str
    cell: int | None = None  # in a notebook: the cell, which `row` counts in


@dataclass
class FixResult:
    """What `fix_source` did to one file."""

    text: str  # the new text (equal to the input text when nothing changed)
    encoding: str  # write `text.encode(encoding)`: the file's own encoding, BOM included
    changed: bool
    fixed: int  # regions rewritten
    remaining: list[Diagnostic]  # the findings of `codes` still in the new text, with their fixes
    regions: list[FixedRegion] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)  # the import statements it added


def fix_source(data: bytes, codes: frozenset[str] = FIXABLE_CODES, display_path: str = "-",
               settings: FixSettings = DEFAULT_SETTINGS, reach: engine.Reach | None = None,
               torch_version: str | None = None) -> FixResult:
    """Rewrite every NG004/NG005/NG006 region of `codes` whose fix `settings` applies (safe ones,
    and unsafe ones with `unsafe_fixes`), until nothing changes.

    A region reported under a `# noqa` is left alone. `remaining` is what `check` reports on the
    result for `codes`, refusals included. A file that does not parse comes back unchanged, with
    its NG000 diagnostic when NG000 is in `codes`. `reach` is what reaches the file's functions in
    the whole project (else the file alone tells): it names functions, which fixes do not rename.
    `torch_version` is the release the findings are for (None: the default).
    """
    if display_path.endswith(".ipynb"):
        return _fix_notebook(data, codes, display_path, settings, reach, torch_version)
    try:
        text, encoding = decode(data)
        faithful = text.encode(encoding) == data  # not so under `coding: unicode_escape`, say
    except (ParseError, LookupError, UnicodeError):
        faithful = False
    if not faithful:  # latin-1 maps bytes to text one to one: the bytes come back unchanged
        return FixResult(data.decode("latin-1"), "latin-1", False, 0,
                         check_with_fixes(data, display_path, codes, settings, reach, torch_version))
    original, regions, imports, row_maps = text, [], set(), []
    for _ in range(MAX_PASSES + 1):
        remaining = check_with_fixes(text.encode(encoding), display_path, codes, settings, reach, torch_version)
        chosen = _non_overlapping([d for d in remaining if d.fix is not None and d.fix.edits
                                   and settings.applies(d.fix.applicability)])
        if not chosen or len(row_maps) == MAX_PASSES:
            break
        edits = sorted({edit for d in chosen for edit in d.fix.edits}, key=lambda e: (e.row, e.col, e.end_row))
        new_text = apply_edits(text, edits)
        try:
            ast.parse(new_text)
            new_text.encode(encoding)
        except (SyntaxError, UnicodeEncodeError):  # a bug of ours: better no change than a broken file
            break
        for diagnostic in chosen:
            row = diagnostic.row
            for row_map in reversed(row_maps):
                row = row_map.original(row)
            regions.append(FixedRegion(row, diagnostic.code))
        imports.update(edit.content.strip() for d in chosen for edit in d.fix.edits[1:])
        row_maps.append(_RowMap(edits))
        text = new_text
    return FixResult(text, encoding, text != original, len(regions), remaining,
                     sorted(regions, key=lambda r: r.row), sorted(imports))


def _non_overlapping(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """The fixes to apply together: by position, each one whose region edit does not overlap the
    previous one (a region nested in another is rewritten with it)."""
    chosen, end = [], (0, 0)
    for diagnostic in sorted(diagnostics, key=lambda d: (d.fix.edits[0].row, d.fix.edits[0].col)):
        edit = diagnostic.fix.edits[0]
        if (edit.row, edit.col) >= end:
            chosen.append(diagnostic)
            end = (edit.end_row, edit.end_col)
    return chosen


class _RowMap:
    """Maps the rows of a text after some edits back to the rows before them."""

    def __init__(self, edits: list[Edit]):  # sorted by position, not overlapping
        self.new_starts: list[int] = []
        self.spans: list[tuple[int, int, int]] = []  # (old row, rows it became, shift after it)
        shift = 0
        for edit in edits:
            added = len(_LINE_BREAK.findall(edit.content))
            self.new_starts.append(edit.row + shift)
            shift += added - (edit.end_row - edit.row)
            self.spans.append((edit.row, added, shift))

    def original(self, row: int) -> int:
        index = bisect.bisect_right(self.new_starts, row) - 1
        if index < 0:
            return row
        old_row, added, shift = self.spans[index]
        return old_row if row <= self.new_starts[index] + added else row - shift


def _fix_notebook(data: bytes, codes: frozenset[str], display_path: str, settings: FixSettings,
                  reach: engine.Reach | None, torch_version: str | None) -> FixResult:
    """Fix the code cells of a notebook as one source; only their `source` fields change."""
    unchanged = FixResult(data.decode("latin-1"), "latin-1", False, 0, [])
    try:
        notebook = Notebook.read(data)
    except NotebookError:
        return replace(unchanged, remaining=check_with_fixes(data, display_path, codes, settings, reach,
                                                             torch_version))
    result = fix_source(notebook.source.encode(), codes, display_path + ".py", settings, reach, torch_version)
    remaining = [engine.in_notebook(notebook, d, display_path) for d in result.remaining]
    if not result.changed:
        return replace(unchanged, remaining=remaining)
    if not notebook.layout_is_kept():
        raise NotebookError("cannot write the notebook back in its own JSON layout; left as it is")
    regions = []
    for region in result.regions:
        where = notebook.locate(Diagnostic(region.code, "", display_path, region.row, 1, region.row, 1))
        regions.append(FixedRegion(where.row, region.code, where.cell))
    new = notebook.with_source(result.text)
    return FixResult(new.decode("latin-1"), "latin-1", True, result.fixed, remaining, regions, result.imports)


def fix_text(text: str, codes: frozenset[str] = FIXABLE_CODES, settings: FixSettings = DEFAULT_SETTINGS,
             reach: engine.Reach | None = None) -> str:
    """`fix_source` for text already decoded (the libcst codemod's entry); `reach`, what reaches
    its functions in the whole project."""
    data = text.encode("utf-8")
    try:
        _, encoding = decode(data)
        data = text.encode(encoding)
    except (ParseError, LookupError, UnicodeEncodeError):
        return text
    return fix_source(data, codes, settings=settings, reach=reach).text
