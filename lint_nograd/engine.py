"""The pipeline for one file: read bytes -> cheap gate -> parse -> semantic model -> rules -> noqa.

Checking parses with the standard library's `ast`, which is an order of magnitude faster than
libcst. Fixes are a layer above this one (`lint_nograd.fix`): the command line passes its
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
from typing import Callable

from lint_nograd import api, checks, suppression
from lint_nograd.diagnostics import Diagnostic
from lint_nograd.model import SemanticModel
from lint_nograd.notebook import Notebook, NotebookError
from lint_nograd.registry import RULES

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


FIXABLE_CODES = frozenset(code for code, rule in RULES.items() if rule.fixable)
# The fix layer's hook: (diagnostics, findings, parsed file, model) -> the diagnostics with their fixes.
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


def _column(line: str, byte_offset: int) -> int:
    """ast counts columns in UTF-8 bytes; diagnostics count characters, from 1."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", "replace")) + 1


def to_diagnostic(finding: checks.Finding, parsed: ParsedFile, display_path: str) -> Diagnostic:
    node = finding.node
    line = parsed.lines[node.lineno - 1]
    end_row = node.end_lineno or node.lineno
    end_line = parsed.lines[end_row - 1]
    return Diagnostic(
        code=finding.code, message=finding.message, path=display_path,
        row=node.lineno, col=_column(line, node.col_offset),
        end_row=end_row, end_col=_column(end_line, node.end_col_offset or node.col_offset),
        severity=finding.severity or RULES[finding.code].severity, source_line=line)


def codes_to_check(data: bytes, codes: frozenset[str]) -> frozenset[str]:
    """The exact gate: the codes that can have a finding in a file with these bytes. Every finding
    needs a grad-disabling region, and every rule needs some more words."""
    return api.possible_codes(data, codes) if api.names_grad_disabling_api(data) else frozenset()


def check_source(data: bytes, display_path: str, codes: frozenset[str],
                 attach_fixes: AttachFixes | None = None) -> list[Diagnostic]:
    """The findings of a file. `attach_fixes` (the fix layer's, given by the command line) adds to
    each fixable finding its fix, or why there is none."""
    if display_path.endswith(".ipynb"):
        return _check_notebook(data, display_path, codes, attach_fixes)
    codes = codes_to_check(data, codes)
    return analyse(data, display_path, codes, attach_fixes) if codes else []


def analyse(data: bytes, display_path: str, codes: frozenset[str],
            attach_fixes: AttachFixes | None = None) -> list[Diagnostic]:
    """Parse and check a Python file without the gate (tests compare the two)."""
    try:
        parsed = parse(data)
    except ParseError as error:
        return [_parse_error(error.message, error.row, error.col, display_path)] if "NG000" in codes else []
    try:
        model = SemanticModel(parsed.tree, parsed.text)
    except RecursionError:
        message = "cannot analyse: the code is nested too deeply"
        return [_parse_error(message, 1, 1, display_path)] if "NG000" in codes else []
    findings = checks.run(model, codes)
    diagnostics = [to_diagnostic(finding, parsed, display_path) for finding in findings]
    if attach_fixes is not None and any(finding.code in FIXABLE_CODES for finding in findings):
        diagnostics = attach_fixes(diagnostics, findings, parsed, model)
    if not diagnostics:
        return []
    return sorted(suppression.unsuppressed(diagnostics, parsed.lines), key=lambda d: d.sort_key)


def _check_notebook(data: bytes, display_path: str, codes: frozenset[str],
                    attach_fixes: AttachFixes | None) -> list[Diagnostic]:
    try:
        notebook = Notebook.read(data)
    except NotebookError as error:
        return [_parse_error(str(error), 1, 1, display_path)] if "NG000" in codes else []
    # the joined cells are checked as a .py file of the same name, then placed back in their cells
    joined = check_source(notebook.source.encode(), display_path + ".py", codes, attach_fixes)
    return [replace(notebook.locate(d), path=display_path) for d in joined]


def _parse_error(message: str, row: int, col: int, display_path: str) -> Diagnostic:
    return Diagnostic("NG000", message, display_path, row, col, row, col, RULES["NG000"].severity)

