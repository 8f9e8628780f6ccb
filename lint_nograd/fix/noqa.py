"""`check --add-noqa`: a `# noqa: NG001` comment at the end of every line with a finding, as ruff adds them;
and NG100's fix, which takes out the codes a directive names in vain.

The codes join an existing `# noqa: E501` list; another comment stays where it is and the
directive follows it. A line whose end lies inside a string or after a backslash cannot take a
comment: it is left as it is, and its finding stays.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Sequence

from lint_nograd.fix.rewrite import apply_edits
from lint_nograd.report.diagnostics import Diagnostic
from lint_nograd.report.suppression import LINE_NOQA, removal, unused_code
from lint_nograd.run.engine import ParseError, decode, text_lines
from lint_nograd.run.notebook import Notebook, NotebookError

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what Python's tokenizer counts as a new line


class NoqaError(Exception):
    """The file was left as it was; the message says why."""


def add_noqa(data: bytes, diagnostics: Sequence[Diagnostic], notebook: bool = False) -> tuple[bytes, int]:
    """The file's bytes with a directive for each finding's line, and how many lines got one.
    In a notebook, a finding's `cell` and `row` name the line."""
    if notebook:
        return _add_to_notebook(data, diagnostics)
    text, encoding = _decoded(data)
    new, count = add_to_text(text, _codes_by_row(diagnostics, lambda d: d.row))
    return new.encode(encoding), count


def remove_unused(data: bytes, diagnostics: Sequence[Diagnostic], notebook: bool = False) -> bytes:
    """The file's bytes without the codes its NG100 findings say its directives name in vain (a
    directive left with none goes). In a notebook, a finding's `cell` and `row` name the line."""
    if not notebook:
        text, encoding = _decoded(data)
        return _remove_from_text(text, _codes_by_row(diagnostics, lambda d: d.row, unused_code)).encode(encoding)
    notebook = Notebook.read(data)
    row_of = {where: row for row, where in enumerate(notebook.cell_of_row, 1)}  # (cell, row in cell) -> row
    new = _remove_from_text(notebook.source, _codes_by_row(diagnostics, lambda d: row_of.get((d.cell, d.row)),
                                                           unused_code))
    if new == notebook.source:
        return data
    if not notebook.layout_is_kept():
        raise NotebookError("cannot write the notebook back in its own JSON layout; left as it is")
    return notebook.with_source(new)


def _remove_from_text(text: str, codes_by_row: dict[int, set[str]]) -> str:
    lines = text_lines(text)
    new = apply_edits(text, [removal(lines, row, codes)[0] for row, codes in sorted(codes_by_row.items())])
    try:
        ast.parse(new)
    except SyntaxError:  # a bug of ours: better no change than a broken file
        raise NoqaError("removing the directives would break its syntax") from None
    return new


def _decoded(data: bytes) -> tuple[str, str]:
    try:
        text, encoding = decode(data)
        if text.encode(encoding) != data:  # not so under `coding: unicode_escape`, say
            raise NoqaError("its bytes would not come back from its encoding")
    except (ParseError, LookupError, UnicodeError) as error:
        raise NoqaError(f"cannot decode it: {error}") from None
    return text, encoding


def _add_to_notebook(data: bytes, diagnostics: Sequence[Diagnostic]) -> tuple[bytes, int]:
    notebook = Notebook.read(data)
    row_of = {where: row for row, where in enumerate(notebook.cell_of_row, 1)}  # (cell, row in cell) -> row
    new, count = add_to_text(notebook.source, _codes_by_row(diagnostics, lambda d: row_of.get((d.cell, d.row))))
    if not count:
        return data, 0
    if not notebook.layout_is_kept():
        raise NotebookError("cannot write the notebook back in its own JSON layout; left as it is")
    return notebook.with_source(new), count


def _codes_by_row(diagnostics: Sequence[Diagnostic], row_of, code_of=lambda d: d.code) -> dict[int, set[str]]:
    rows: dict[int, set[str]] = {}
    for diagnostic in diagnostics:
        row = row_of(diagnostic)
        if row is not None:
            rows.setdefault(row, set()).add(code_of(diagnostic))
    return rows


def add_to_text(text: str, codes_by_row: dict[int, set[str]]) -> tuple[str, int]:
    """`text` with the codes of each row in its directive, and how many lines changed."""
    lines = _LINE_BREAK.split(text)
    breaks = _LINE_BREAK.findall(text) + [""]
    comment_at: dict[int, int] = {}  # row -> column of its comment
    line_ends: set[int] = set()  # the rows whose end is the end of a token, where a comment may go
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline="").readline):
            if token.type == tokenize.COMMENT:
                comment_at[token.start[0]] = token.start[1]
            if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                line_ends.add(token.start[0])
    except (tokenize.TokenError, SyntaxError) as error:
        raise NoqaError(f"cannot read its tokens: {error}") from None
    count = 0
    for row, codes in sorted(codes_by_row.items()):
        if row not in line_ends or row > len(lines):
            continue
        line = lines[row - 1]
        column = comment_at.get(row)
        existing = LINE_NOQA.search(line, column) if column is not None else None
        if existing and not existing.group("codes"):
            continue  # a bare `# noqa` covers every code already
        if existing:
            listed = re.split(r"[\s,]+", existing.group("codes"))
            added = sorted(codes - {code.upper() for code in listed})
            if not added:
                continue
            start, end = existing.span("codes")
            line = line[:start] + ", ".join(listed + added) + line[end:]
        else:
            line = line.rstrip(" \t") + f"  # noqa: {', '.join(sorted(codes))}"
        lines[row - 1] = line
        count += 1
    new = "".join(line + line_break for line, line_break in zip(lines, breaks))
    try:
        ast.parse(new)
    except SyntaxError:  # a bug of ours: better no change than a broken file
        raise NoqaError("adding the comments would break its syntax") from None
    return new, count
