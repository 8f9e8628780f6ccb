"""Diagnostics as text: `concise`, `full`, `json`, `sarif`, `github`, `gitlab` (GitLab Code
Quality), `junit` (JUnit XML) or `rdjson` (reviewdog), plus the summary lines.

A fix is `safe` or `unsafe` (as in ruff): the text formats mark with `[*]` the findings whose fix
a run would apply (unsafe ones only with `--unsafe-fixes`) and count the others as hidden; JSON and
SARIF carry every fix with its applicability.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from lint_nograd import __version__
from lint_nograd.report.diagnostics import Diagnostic, Edit, Fix, Related
from lint_nograd.report.registry import RULES, SEVERITIES, Rule

FORMATS = ("full", "concise", "json", "sarif", "github", "gitlab", "junit", "rdjson")
TEXT_FORMATS = ("full", "concise")  # the ones followed by a summary and that may use colour
WIDTH = 80  # the columns of text output that is not at a terminal, and without COLUMNS
MIN_WIDTH = 40  # a narrower terminal still gets lines this long
TOOL = "lint-nograd"
FIX_COMMAND = "lint-nograd fix"

# Installed wheels ship the pages inside the package; an editable install reads the repository's.
_PACKAGE = Path(__file__).parent.parent
_PAGE_FOLDERS = (_PACKAGE / "rule_pages", _PACKAGE.parent / "rules")


def rule_page(code: str) -> str | None:
    """The Markdown page of a rule, or None when no page was found."""
    for folder in _PAGE_FOLDERS:
        try:
            return (folder / f"{code}.md").read_text(encoding="utf-8")
        except OSError:
            continue
    return None


def rule_page_uri(code: str) -> str | None:
    """Where the page of a rule is, as a `file:` URI an editor opens; None when no page was found."""
    return next(((folder / f"{code}.md").resolve().as_uri() for folder in _PAGE_FOLDERS
                 if (folder / f"{code}.md").is_file()), None)


def render(diagnostics: Sequence[Diagnostic], output_format: str, color: bool = False,
           unsafe_fixes: bool = False, source_root: Path | None = None, width: int = WIDTH) -> str:
    """`source_root`: SARIF gives the paths of files under it relative to it, as `%SRCROOT%`;
    `width`: the columns `full` output fits in, but for source lines."""
    style = _Style(color, unsafe_fixes, width)
    if output_format == "full":
        return "".join(_full(diagnostic, style) + "\n" for diagnostic in diagnostics)
    if output_format == "concise":
        return "".join(_header(diagnostic, style) + "\n" for diagnostic in diagnostics)
    if output_format == "json":
        return json.dumps([_json(d) for d in diagnostics], indent=2, sort_keys=True) + "\n"
    if output_format == "sarif":
        return json.dumps(_sarif(diagnostics, source_root), indent=2) + "\n"
    if output_format == "github":
        return "".join(_github(diagnostic) + "\n" for diagnostic in diagnostics)
    if output_format == "gitlab":
        return json.dumps(_gitlab(diagnostics, source_root), indent=2) + "\n"
    if output_format == "junit":
        return _junit(diagnostics)
    if output_format == "rdjson":
        return json.dumps(_rdjson(diagnostics), indent=2) + "\n"
    raise ValueError(f"unknown output format: {output_format}")


def diff(display_path: str, old: bytes, new: bytes, color: bool = False) -> str:
    """What `fix --diff` shows of a file: a unified diff; of a notebook, one for each code cell that
    changed, of the cell's source, as ruff shows it (a diff of the JSON would bury it in quoting).
    `color`: removed lines red, added ones green, as git colours them."""
    texts = [data.decode("utf-8", "surrogateescape") for data in (old, new)]
    pieces = [(f"a/{display_path}", f"b/{display_path}", *texts)]
    if display_path.endswith(".ipynb"):
        cells = [_cell_sources(text) for text in texts]
        if None not in cells and len(cells[0]) == len(cells[1]):
            pieces = [(f"a/{display_path}:cell {number}", f"b/{display_path}:cell {number}", before, after)
                      for number, (before, after) in enumerate(zip(*cells), 1) if before != after]
    import difflib  # here, as the modules below: what a run needs only for some outputs is imported then

    lines = []
    for old_name, new_name, before, after in pieces:
        lines += difflib.unified_diff(_diff_lines(before), _diff_lines(after), old_name, new_name)
    lines = [line if line.endswith("\n") else line + "\n" for line in lines]
    if not color:
        return "".join(lines)
    paint = {"---": "1", "+++": "1", "@@": "36", "-": "31", "+": "32", "\\": "2"}
    return "".join(_colored(line, next((ansi for start, ansi in paint.items() if line.startswith(start)), None))
                   for line in lines)


def _colored(line: str, ansi: str | None) -> str:
    return line if ansi is None else f"\x1b[{ansi}m{line[:-1]}\x1b[0m\n"


def _diff_lines(text: str) -> list[str]:
    """The lines of a text for a diff; a last line without a line break says so, as git does."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def _cell_sources(text: str) -> list[str] | None:
    """The source of each cell of a notebook, in order; None when the text is no notebook."""
    try:
        cells = json.loads(text)["cells"]
        return ["".join(cell.get("source", "")) for cell in cells]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def applies(fix: Fix | None, unsafe_fixes: bool) -> bool:
    """Whether a run applies this fix: a safe one always, an unsafe one with `--unsafe-fixes`."""
    return fix is not None and (fix.applicability == "safe" or unsafe_fixes)


def summary(diagnostics: Sequence[Diagnostic], unsafe_fixes: bool = False, width: int | None = None) -> str:
    """`Found 1 error, 2 warnings and 28 notes.`, then what the fixes would do; `No findings.` for
    none. With `width`, each line is wrapped to that many columns."""
    text = _summary(diagnostics, unsafe_fixes)
    if width is None:
        return text
    return "".join("\n".join(_wrap(line, width, "", "  ")) + "\n" for line in text.splitlines())


def terminal_width(stream: object = None) -> int:
    """The columns text output should fit in: `COLUMNS`, else the width of the terminal `stream`
    is, else (a file, a pipe) 80; never less than `MIN_WIDTH`."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(stream.fileno()).columns if stream.isatty() else WIDTH
        except (AttributeError, OSError, ValueError):  # no stream, a closed one, a pseudo-file
            columns = WIDTH
    return max(columns, MIN_WIDTH)


def _summary(diagnostics: Sequence[Diagnostic], unsafe_fixes: bool = False) -> str:
    if not diagnostics:
        return "No findings.\n"
    counts = Counter(diagnostic.severity for diagnostic in diagnostics)
    kinds = [f"{counts[kind]} {kind}{'s' * (counts[kind] != 1)}" for kind in SEVERITIES if counts[kind]]
    text = f"Found {' and '.join(kinds) if len(kinds) < 3 else ', '.join(kinds[:-1]) + ' and ' + kinds[-1]}.\n"
    fixes = [diagnostic.fix for diagnostic in diagnostics if diagnostic.fix is not None]
    fixable = sum(applies(fix, unsafe_fixes) for fix in fixes)
    hidden = len(fixes) - fixable
    hint = (f" ({hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the `--unsafe-fixes` option)"
            if hidden else "")
    if fixable:
        unsafe = any(fix.applicability != "safe" for fix in fixes)
        command = FIX_COMMAND + (" --unsafe-fixes" if unsafe_fixes and unsafe else "")
        text += f"[*] {fixable} fixable with `{command}`{hint}.\n"
    elif hidden:
        text += f"No fixes available{hint}.\n"
    return text


def fixed_summary(fixed: Sequence[tuple[str, Any]], files: int, imports: dict[str, set[str]],
                  show_fixes: bool, diff: bool = False) -> str:
    """What `fix` did: how many regions in how many files, each of them with `--show-fixes`, and
    the imports it added. `fixed` holds (path, region) pairs; a region has `row`, `code`, `cell`."""
    count = sum(region.code != "NG100" for _, region in fixed)
    noqa = len(fixed) - count  # NG100: unused `# noqa` codes taken out
    verb = "Would fix" if diff else "Fixed"
    what = [f"{count} region{'s' * (count != 1)}"] if count or not noqa else []
    what += [f"{noqa} unused noqa directive{'s' * (noqa != 1)}"] if noqa else []
    text = f"{verb} {' and '.join(what)} in {files} file{'s' * (files != 1)}"
    if show_fixes:
        text += ":\n" + "".join(
            f"  {path}:{f'cell {region.cell}:' if region.cell is not None else ''}{region.row}: "
            f"{region.code} ({_name(region.code)})\n"
            for path, region in sorted(fixed, key=lambda pair: (pair[0], pair[1].cell or 0, pair[1].row)))
    else:
        text += ".\n"
    verb = "Would add" if diff else "Added"
    for statement, paths in sorted(imports.items()):
        text += f"{verb} `{statement}` to {len(paths)} file{'s' * (len(paths) != 1)}.\n"
    return text


def statistics(diagnostics: Sequence[Diagnostic], output_format: str, unsafe_fixes: bool = False) -> str:
    """How many findings each rule has, most first."""
    counts = Counter(diagnostic.code for diagnostic in diagnostics)
    fixable = {diagnostic.code for diagnostic in diagnostics if applies(diagnostic.fix, unsafe_fixes)}
    rows = sorted(counts.items(), key=lambda row: (-row[1], row[0]))
    if output_format == "json":
        return json.dumps([
            {"code": code, "name": _name(code), "count": count, "fixable": code in fixable}
            for code, count in rows
        ], indent=2) + "\n"
    width = max((len(str(count)) for count in counts.values()), default=1)
    return "".join(
        f"{count:>{width}}  {code}  {'[*]' if code in fixable else '   '} {_name(code)}\n"
        for code, count in rows
    )


class _Style:
    """ANSI colours for the text formats: bold path, red code and carets; which fixes a run applies."""

    def __init__(self, color: bool, unsafe_fixes: bool = False, width: int = 80) -> None:
        self.color = color
        self.unsafe_fixes = unsafe_fixes
        self.width = width

    def _paint(self, text: str, ansi: str) -> str:
        return f"\x1b[{ansi}m{text}\x1b[0m" if self.color else text

    def path(self, text: str) -> str:
        return self._paint(text, "1")

    def code(self, text: str) -> str:
        return self._paint(text, "1;31")

    def fixable(self, text: str) -> str:
        return self._paint(text, "36")

    def carets(self, text: str) -> str:
        return self._paint(text, "31")


# Control characters but the tab: in a terminal they move the cursor, set the title, clear the screen.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _printable(text: str) -> str:
    """`text` with each control character but the tab written as an escape, `\\x1b`."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def _header(d: Diagnostic, style: _Style, width: int | None = None) -> str:
    """`path:row:col: CODE [*] message`; with `width`, the message wrapped to it, under an indent."""
    marker = "[*]" if applies(d.fix, style.unsafe_fixes) else ""
    cell = f"cell {d.cell}:" if d.cell is not None else ""
    path, message = _printable(d.path), _printable(d.message)
    prefix = f"{path}:{cell}{d.row}:{d.col}: {d.code} {marker + ' ' if marker else ''}"
    lines = [prefix + message] if width is None else _wrap(message, width, prefix, "  ")
    if lines[0].startswith(prefix):  # else the place alone is wider than a line: no colour
        colored = f"{style.path(path)}:{cell}{d.row}:{d.col}: {style.code(d.code)} "
        lines[0] = colored + (style.fixable(marker) + " " if marker else "") + lines[0][len(prefix):]
    return "\n".join(lines)




def _full(d: Diagnostic, style: _Style) -> str:
    """The concise line, then the source line with carets under the reported columns, then a
    `note` for each related place, the `help` and the fix."""
    lines = [_header(d, style, style.width)]
    gutter = " " * len(str(d.row))
    source = d.source_line.rstrip("\r\n")
    if source:
        start = min(max(d.col, 1), len(source) + 1) - 1
        end = min(d.end_col - 1, len(source)) if d.end_row == d.row else len(source)
        # Copy the tabs before the span so the carets line up whatever the tab width.
        padding = "".join("\t" if char == "\t" else " " * len(_printable(char)) for char in source[:start])
        lines += [
            f"{gutter} |",
            f"{d.row} | {_printable(source)}",
            f"{gutter} | {padding}{style.carets('^' * max(len(_printable(source[start:end])), 1))}",
            f"{gutter} |",
        ]
    for related in d.related:
        lines += _wrapped(f"{gutter} = note: ", f"{_related_place(related)}: {related.message}", style.width)
    if d.help:
        lines += _wrapped(f"{gutter} = help: ", d.help, style.width)
    if d.fix is not None:
        hidden = "" if applies(d.fix, style.unsafe_fixes) else " (an unsafe fix: `--unsafe-fixes` applies it)"
        lines += _wrapped(f"{gutter} = fix: ", f"{d.fix.message}{hidden}", style.width)
    return "\n".join(lines) + "\n"


def _related_place(related: Related) -> str:
    cell = f"cell {related.cell}:" if related.cell is not None else ""
    return f"{_printable(related.path)}:{cell}{related.row}:{related.col}"


def _wrapped(label: str, text: str, width: int) -> list[str]:
    """`label` then `text`, wrapped at `width` columns under the text's start."""
    return _wrap(_printable(text), width, label, " " * len(label)) or [label.rstrip()]


def _wrap(text: str, width: int, first: str, indent: str) -> list[str]:
    """`text` after `first` in lines of at most `width` columns, the others after `indent`; a word
    longer than a line (a long path, say) is cut where the line ends."""
    if len(indent) > width // 2:  # a deep label on a narrow terminal: the text goes on under a short one
        indent = indent[: width // 4]
    if len(first) >= width:
        return [*_wrap(first.rstrip(), width, "", indent), *_wrap(text, width, indent, indent)]
    import textwrap

    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=indent,
                         break_long_words=True, break_on_hyphens=False)


def _name(code: str) -> str:
    rule = RULES.get(code)
    return rule.name if rule else code


def _location(row: int, column: int) -> dict[str, int]:
    return {"row": row, "column": column}


def _json(d: Diagnostic) -> dict[str, Any]:
    """One finding with ruff's JSON keys."""
    return {
        "code": d.code,
        "name": _name(d.code),
        "message": d.message,
        "severity": d.severity,
        "filename": d.path,
        "cell": d.cell,  # in a notebook: the cell the rows count in
        "location": _location(d.row, d.col),
        "end_location": _location(d.end_row, d.end_col),
        "noqa_row": d.row,
        "help": d.help or None,
        "related": [{
            "message": related.message,
            "filename": related.path,
            "cell": related.cell,
            "location": _location(related.row, related.col),
            "end_location": _location(related.end_row, related.end_col),
        } for related in d.related],
        "url": None,  # there is no documentation site; `lint-nograd rule CODE` shows the page
        "fix": None if d.fix is None else {
            "applicability": d.fix.applicability,
            "message": d.fix.message,
            "edits": [_json_edit(edit) for edit in d.fix.edits],
        },
    }


def _json_edit(edit: Edit) -> dict[str, Any]:
    return {
        "content": edit.content,
        "location": _location(edit.row, edit.col),
        "end_location": _location(edit.end_row, edit.end_col),
    }


def _sarif(diagnostics: Sequence[Diagnostic], source_root: Path | None) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run; every rule is listed, found or not."""
    index = {code: position for position, code in enumerate(RULES)}
    base = {} if source_root is None else {
        "originalUriBaseIds": {SOURCE_ROOT: {"uri": source_root.as_uri().rstrip("/") + "/"}}}
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": TOOL,
                "version": __version__,
                "rules": [_sarif_rule(rule) for rule in RULES.values()],
            }},
            **base,
            "columnKind": "unicodeCodePoints",  # our columns count characters
            "results": [_sarif_result(d, index, source_root) for d in diagnostics],
        }],
    }


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.summary},
        "defaultConfiguration": {"level": _sarif_level(rule.severity)},
    }
    page = rule_page(rule.code)
    if page is not None:
        entry["help"] = {"text": page, "markdown": page}
    return entry


def _sarif_result(d: Diagnostic, index: dict[str, int], source_root: Path | None) -> dict[str, Any]:
    if d.cell is None:
        message = d.message
        region = {"startLine": d.row, "startColumn": d.col, "endLine": d.end_row, "endColumn": d.end_col}
    else:  # rows count within the cell, not in the notebook's file: the message names the place
        message = f"cell {d.cell}, line {d.row}, column {d.col}: {d.message}"
        region = {"startLine": 1}
    result: dict[str, Any] = {
        "ruleId": d.code,
        "level": _sarif_level(d.severity),
        "message": {"text": message},
        "locations": [{"physicalLocation": {
            "artifactLocation": _artifact(d.path, source_root),
            "region": region,
        }}],
    }
    if d.related:
        result["relatedLocations"] = [_sarif_related(number, r, source_root) for number, r in enumerate(d.related)]
    if d.help:
        result.setdefault("properties", {})["help"] = d.help
    if d.code in index:
        result["ruleIndex"] = index[d.code]
    if d.fix is not None:
        result.setdefault("properties", {})["fixApplicability"] = d.fix.applicability
        if d.fix.edits:  # a notebook's fixes have none: their rows count in the joined cells
            result["fixes"] = [_sarif_fix(d, source_root)]
    return result


def _sarif_related(number: int, r: Related, source_root: Path | None) -> dict[str, Any]:
    """A place the finding points at; in a notebook, named by cell as the finding is."""
    if r.cell is None:
        message = r.message
        region = {"startLine": r.row, "startColumn": r.col, "endLine": r.end_row, "endColumn": r.end_col}
    else:
        message = f"cell {r.cell}, line {r.row}, column {r.col}: {r.message}"
        region = {"startLine": 1}
    return {"id": number, "message": {"text": message},
            "physicalLocation": {"artifactLocation": _artifact(r.path, source_root), "region": region}}


def _sarif_fix(d: Diagnostic, source_root: Path | None) -> dict[str, Any]:
    return {
        "description": {"text": d.fix.message},
        "artifactChanges": [{
            "artifactLocation": _artifact(d.path, source_root),
            "replacements": [{
                "deletedRegion": {"startLine": edit.row, "startColumn": edit.col,
                                  "endLine": edit.end_row, "endColumn": edit.end_col},
                "insertedContent": {"text": edit.content},
            } for edit in d.fix.edits],
        }],
        "properties": {"applicability": d.fix.applicability},
    }


def _sarif_level(severity: str) -> str:
    return severity if severity in SEVERITIES else "error"  # SARIF's levels: error, warning, note


SOURCE_ROOT = "%SRCROOT%"


def _artifact(path: str, source_root: Path | None) -> dict[str, str]:
    """A file under `source_root` relative to it (so code scanning finds it wherever the command
    ran), any other one by its absolute URI; without a root, as it is shown."""
    if source_root is not None:
        absolute = Path(os.path.abspath(path))
        if absolute.is_relative_to(source_root):
            return {"uri": _uri(str(absolute.relative_to(source_root))), "uriBaseId": SOURCE_ROOT}
        return {"uri": _uri(str(absolute))}
    return {"uri": _uri(path)}


def _uri(path: str) -> str:
    if Path(path).is_absolute():
        return Path(path).as_uri()
    return quote(Path(path).as_posix(), safe="/", errors="surrogateescape")


def _github(d: Diagnostic) -> str:
    """A GitHub Actions workflow command, which the runner shows as an annotation."""
    kind = _GITHUB_COMMAND.get(d.severity, "error")
    # in a notebook, rows count within a cell: the annotation goes on the file, the message says where
    place = () if d.cell is not None else (
        ("line", d.row), ("col", d.col), ("endLine", d.end_row), ("endColumn", d.end_col))
    properties = ",".join(f"{key}={_escape_property(str(value))}" for key, value in (
        ("title", f"{TOOL} ({d.code})"), ("file", d.path), *place))
    cell = f"cell {d.cell}:" if d.cell is not None else ""
    message = f"{d.path}:{cell}{d.row}:{d.col}: {d.code} {d.message}"
    return f"::{kind} {properties}::{_escape_data(message)}"


_GITHUB_COMMAND = {"error": "error", "warning": "warning", "note": "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


# -- GitLab Code Quality: a Code Climate subset (docs.gitlab.com, ci/testing/code_quality) -----------

_GITLAB_SEVERITY = {"error": "major", "warning": "minor", "note": "info"}
_ROW_IN_MESSAGE = re.compile(r"(line |\.pyi?:)\d+")  # "the region (line 40)": it moves with the finding


def _gitlab(diagnostics: Sequence[Diagnostic], source_root: Path | None) -> list[dict[str, Any]]:
    """One issue per finding, its path relative to the repository. The fingerprint leaves out the
    rows, so that a finding moved by an edit above it is the same finding in a merge request."""
    issues, seen = [], Counter()
    for d in diagnostics:
        path = _repository_path(d.path, source_root)
        key = (d.code, path, d.cell, d.source_line.strip(), _ROW_IN_MESSAGE.sub(r"\1#", d.message))
        seen[key] += 1
        fingerprint = hashlib.sha256(json.dumps([*key, seen[key]]).encode()).hexdigest()
        where = f"cell {d.cell}, line {d.row}: " if d.cell is not None else ""
        lines = {"begin": 1} if d.cell is not None else {"begin": d.row, "end": d.end_row}
        issue: dict[str, Any] = {
            "type": "issue",
            "check_name": d.code,
            "description": f"{where}{d.message}",
            "severity": _GITLAB_SEVERITY.get(d.severity, "major"),
            "categories": ["Bug Risk"],
            "fingerprint": fingerprint,
            "location": {"path": path, "lines": lines},
        }
        if d.help:
            issue["content"] = {"body": d.help}
        issues.append(issue)
    return issues


def _repository_path(path: str, source_root: Path | None) -> str:
    """A plain path, not a URI (GitLab shows it as it is): from the repository's root when inside it."""
    absolute = Path(os.path.abspath(path))
    if source_root is not None and absolute.is_relative_to(source_root):
        return absolute.relative_to(source_root).as_posix()
    return Path(path).as_posix()


# -- JUnit XML: a test suite per file, a failed test case per finding, as ruff writes it -------------

_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    """`text` with each character XML 1.0 cannot hold written as an escape, `\\x1b`."""
    return _NOT_XML.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def _junit(diagnostics: Sequence[Diagnostic]) -> str:
    from xml.etree import ElementTree

    root = ElementTree.Element("testsuites", name=TOOL, tests=str(max(len(diagnostics), 1)),
                               failures=str(len(diagnostics)), errors="0")
    by_file: dict[str, list[Diagnostic]] = {}
    for d in diagnostics:
        by_file.setdefault(d.path, []).append(d)
    if not by_file:  # a run without findings is a passed test, which CI shows as such
        suite = ElementTree.SubElement(root, "testsuite", name=TOOL, tests="1", failures="0", errors="0")
        ElementTree.SubElement(suite, "testcase", name="No findings", classname=TOOL)
    for path, found in by_file.items():
        failing = [d for d in found if d.severity != "note"]  # a note is shown, not failed
        suite = ElementTree.SubElement(root, "testsuite", name=_xml(path), tests=str(len(found)),
                                       failures=str(len(failing)), errors="0")
        for d in found:
            cell = f"cell {d.cell}, " if d.cell is not None else ""
            case = ElementTree.SubElement(suite, "testcase", name=f"{TOOL}.{d.code}", classname=_xml(path),
                                          file=_xml(path), line=str(d.row), column=str(d.col))
            failure = ElementTree.SubElement(case, "failure", message=_xml(d.message), type=d.severity) \
                if d.severity != "note" else ElementTree.SubElement(case, "system-out")
            failure.text = _xml(f"{cell}line {d.row}, col {d.col}: {d.code} {d.message}"
                                      + (f"\n{d.help}" if d.help else ""))
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


# -- rdjson: reviewdog's Diagnostic Format (proto/rdf in the reviewdog repository) -------------------

_RDJSON_SEVERITY = {"error": "ERROR", "warning": "WARNING", "note": "INFO"}
_RDJSON_ORDER = ("INFO", "WARNING", "ERROR")


def _rdjson(diagnostics: Sequence[Diagnostic]) -> dict[str, Any]:
    """Columns count UTF-8 bytes here, not characters: each position is converted with its line."""
    return {
        "source": {"name": TOOL},
        "severity": max((_RDJSON_SEVERITY[d.severity] for d in diagnostics), key=_RDJSON_ORDER.index, default="INFO"),
        "diagnostics": [_rdjson_diagnostic(d) for d in diagnostics],
    }


def _rdjson_diagnostic(d: Diagnostic) -> dict[str, Any]:
    found: dict[str, Any] = {"message": d.message, "severity": _RDJSON_SEVERITY[d.severity],
                             "code": {"value": d.code}}
    if d.cell is not None:  # rows count within the cell: the message names the place
        found["message"] = f"cell {d.cell}, line {d.row}, column {d.col}: {d.message}"
        found["location"] = {"path": d.path, "range": {"start": {"line": 1}}}
        return found
    line = functools.partial(_line, d)
    found["location"] = {"path": d.path, "range": _rdjson_range(line, d.row, d.col, d.end_row, d.end_col)}
    if d.fix is not None and d.fix.edits:
        found["suggestions"] = [{"range": _rdjson_range(line, e.row, e.col, e.end_row, e.end_col), "text": e.content}
                                for e in d.fix.edits]
    if d.help:
        found["original_output"] = d.help
    return found


def _rdjson_range(line, row: int, col: int, end_row: int, end_col: int) -> dict[str, Any]:
    return {"start": {"line": row, "column": _byte_column(line(row), col)},
            "end": {"line": end_row, "column": _byte_column(line(end_row), end_col)}}


def _byte_column(text: str | None, col: int) -> int:
    """The 1-based UTF-8 byte column of a 1-based character column (as is when the line is unknown)."""
    if text is None:
        return col
    return len(text[:col - 1].encode("utf-8", "surrogatepass")) + 1 + max(col - 1 - len(text), 0)


def _line(d: Diagnostic, row: int) -> str | None:
    """The text of a row of the finding's file: its own line, else read from the file."""
    if row == d.row and d.source_line:
        return d.source_line
    lines = _file_lines(d.path)
    return lines[row - 1] if lines is not None and 0 < row <= len(lines) else None


@functools.lru_cache(maxsize=64)
def _file_lines(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as file:
            return file.read().decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):  # standard input, a file gone since: columns as they are
        return None
