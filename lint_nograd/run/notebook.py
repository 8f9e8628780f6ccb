"""Jupyter notebooks: their code cells as one Python file, and back.

The code cells are joined into one source, separated by marker comments, so that a transform in
one cell reaches a function defined in another, as it does when the notebook runs. IPython
syntax that is not Python (`%timeit`, `!pip install`, `x = !ls`, `%%bash` cells) is masked with
placeholders that keep the lines and their indentation, and restored when the notebook is
written back. As in IPython, such syntax counts only at the start of a logical line: a line that
continues a bracket, a string or a backslash is Python. Lines are split where Python splits them
(`\\r\\n`, `\\r`, `\\n`) and keep their own line breaks. Only the `source` of code cells that changed
is ever written; outputs, metadata, cell ids, key order, indentation and the trailing newline of
the JSON stay as they were.
"""
from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field, replace

from lint_nograd.report.diagnostics import Diagnostic, Related

_MARKER = "# lint-nograd: cell {}"
_MARKER_LINE = re.compile(r"# lint-nograd: cell (\d+)")  # a whole line
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what Python's tokenizer counts as a new line
_LAST_LINE_BREAK = re.compile(r"(?:\r\n|\r|\n)\Z")
_SUPPORTED_FORMAT = 4
# `%magic`, `!shell`, `?help`, `x = !ls`, `x = %who_ls`, `obj?`, `obj??`
_IPYTHON_LINE = re.compile(r"^(\s*)(?:[%!?]|\w+\s*=\s*[%!]|[\w.]+\?\??\s*$)")
# Cell magics whose body is Python: only their first line is masked.
_PYTHON_CELL_MAGICS = frozenset({"%%time", "%%timeit", "%%capture", "%%prun"})
_LINE_REFERENCE = re.compile(r"\bline (\d+)")
_PLACEHOLDER = re.compile(r"([^\S\r\n]*)(?:# )?__lint_nograd_ipython_(\d+)__(?:\(\))?")  # a whole line


class NotebookError(Exception):
    """The file is not a notebook lint-nograd can read or write back exactly."""


@dataclass
class Notebook:
    document: dict
    text: str  # the JSON as read
    source: str = ""  # the code cells joined, IPython syntax masked
    cell_of_row: list[tuple[int, int]] = field(default_factory=list)  # per source row: (cell, row in cell)
    masked: list[str] = field(default_factory=list)  # the original lines behind the placeholders
    bom: bytes = b""

    @classmethod
    def read(cls, data: bytes) -> "Notebook":
        try:
            text = data.decode("utf-8-sig")
            bom = codecs.BOM_UTF8 if data.startswith(codecs.BOM_UTF8) else b""
            document = json.loads(text)
        except RecursionError:
            raise NotebookError("cannot read the notebook: its JSON is nested too deeply") from None
        except (UnicodeDecodeError, ValueError):
            raise NotebookError("not a Jupyter notebook: cannot read its cells") from None
        version = document.get("nbformat") if isinstance(document, dict) else None
        if isinstance(version, int) and version != _SUPPORTED_FORMAT:
            raise NotebookError(f"notebook format {version} is not supported, only format {_SUPPORTED_FORMAT} "
                                "(`jupyter nbconvert --to notebook --inplace` converts it)")
        cells = document.get("cells") if isinstance(document, dict) else None
        if not isinstance(cells, list):
            raise NotebookError("not a Jupyter notebook: cannot read its cells")
        notebook = cls(document, text, bom=bom)
        notebook._join(cells)
        return notebook

    def _join(self, cells: list) -> None:
        code = [(number, _cell_text(cell)) for number, cell in enumerate(cells, 1)
                if isinstance(cell, dict) and cell.get("cell_type") == "code"]
        # the first line break of the code: `fix` writes its new lines with the joined source's first
        breaks = (_LINE_BREAK.search(text) for _, text in code)
        first_break = next((found.group() for found in breaks if found), "\n")
        parts: list[str] = []
        for number, text in code:
            parts.append(_MARKER.format(number) + first_break)
            lines = _lines(text)
            whole_cell_magic = lines[0][0].startswith("%%") and lines[0][0].split()[0] not in _PYTHON_CELL_MAGICS
            python = _LogicalLines()  # each cell is compiled alone
            magic_goes_on = False  # the line before was IPython syntax ending in a backslash
            for line, line_break in lines:
                if whole_cell_magic or magic_goes_on:
                    masked = self._mask_whole(line)
                else:
                    masked = self._mask(line, python.at_start())
                magic_goes_on = masked is not None and line.endswith("\\")
                if masked is None:
                    python.feed(line)
                parts.append((line if masked is None else masked) + (line_break or first_break))
        self.source = "".join(parts)
        self.cell_of_row = _rows_of(self.source)

    def _mask(self, line: str, logical_line_start: bool) -> str | None:
        """A placeholder for a line of IPython syntax or one spelling our own markers; else None."""
        if _MARKER_LINE.fullmatch(line) or _PLACEHOLDER.fullmatch(line):  # nothing in it may count
            return self._mask_whole(line)
        match = logical_line_start and _IPYTHON_LINE.match(line)  # IPython reads escapes only there
        if not match:
            return None
        self.masked.append(line)
        return f"{match.group(1)}__lint_nograd_ipython_{len(self.masked) - 1}__()"  # a block around it stays valid

    def _mask_whole(self, line: str) -> str:
        self.masked.append(line)
        return f"# __lint_nograd_ipython_{len(self.masked) - 1}__"

    def locate(self, diagnostic: Diagnostic, source: str | None = None) -> Diagnostic:
        """The diagnostic with rows counted within its cell, and the cell's number. `source` is the
        joined source its rows count in, if not the one read (`fix` reports on what it wrote). A
        fix keeps its message but not its edits, whose rows count in the joined source."""
        rows = self.cell_of_row if source is None else _rows_of(source)
        cell, row = _row_in_cell(rows, diagnostic.row)
        _, end_row = _row_in_cell(rows, diagnostic.end_row)
        fix = diagnostic.fix and replace(diagnostic.fix, edits=())
        message = _LINE_REFERENCE.sub(lambda match: _where(rows, int(match.group(1))), diagnostic.message)
        related = tuple(self._locate_related(r, rows) if r.path == diagnostic.path else r
                        for r in diagnostic.related)
        return replace(diagnostic, row=row, end_row=end_row, cell=cell, fix=fix, message=message,
                       source_line=self._unmask(diagnostic.source_line), related=related)

    @staticmethod
    def _locate_related(related: Related, rows) -> Related:
        """A place in the same cells, with its rows counted within its cell."""
        cell, row = _row_in_cell(rows, related.row)
        _, end_row = _row_in_cell(rows, related.end_row)
        message = _LINE_REFERENCE.sub(lambda match: _where(rows, int(match.group(1))), related.message)
        return replace(related, row=row, end_row=end_row, cell=cell, message=message)

    def _unmask(self, line: str) -> str:
        placeholder = _PLACEHOLDER.fullmatch(line)
        return self.masked[int(placeholder.group(2))] if placeholder else line

    def with_source(self, source: str) -> bytes:
        """The notebook's bytes with its code cells replaced by those in `source`."""
        cells = self.document["cells"]
        above: list[str] = []  # an import added above the first cell goes into it
        texts: dict[int, list[str]] = {}
        current = above
        for line, line_break in _lines(source):
            marker = _MARKER_LINE.fullmatch(line)
            if marker:
                current = texts[int(marker.group(1))] = [] if texts else above
            else:
                current.append(self._unmask(line) + line_break)
        for number, lines in texts.items():
            cell = cells[number - 1]
            text = _LAST_LINE_BREAK.sub("", "".join(lines), count=1)  # the one the joined source added
            if text == _cell_text(cell):
                continue  # as it was, in the layout it had
            lines = [line + line_break for line, line_break in _lines(text) if line or line_break]
            cell["source"] = lines if isinstance(cell.get("source"), list) else text
        return self.bom + self._dump().encode("utf-8")

    def _dump(self) -> str:
        second_line = self.text.split("\n", 2)[1] if "\n" in self.text else ""
        indent = len(second_line) - len(second_line.lstrip(" ")) or None
        try:
            text = json.dumps(self.document, indent=indent, ensure_ascii=self.text.isascii())
        except RecursionError:
            raise NotebookError("cannot write the notebook back: its JSON is nested too deeply") from None
        return text + "\n" if self.text.endswith("\n") else text

    def layout_is_kept(self) -> bool:
        """Whether writing the notebook as read gives back its very bytes (else we do not write)."""
        return self._dump() == self.text


def is_masked(line: str) -> bool:
    """Whether a line of the joined source stands for a line of IPython syntax."""
    return _PLACEHOLDER.fullmatch(line) is not None


def _lines(text: str) -> list[tuple[str, str]]:
    """(line, its line break) as Python splits them; the last line's break is empty."""
    pieces = _LINE_BREAK.split(text)
    breaks = _LINE_BREAK.findall(text) + [""]
    return list(zip(pieces, breaks))


def _rows_of(source: str) -> list[tuple[int, int]]:
    """Per row of a joined source: (cell, row in cell). Rows above the first marker (an import
    added by `fix`) go to the top of the first cell, whose rows then count after them."""
    rows: list[tuple[int, int]] = []
    above = 0
    cell = row = None
    for line, _ in _lines(source):
        marker = _MARKER_LINE.fullmatch(line)
        if marker:
            cell, row = int(marker.group(1)), above if cell is None else 0
            rows.append((cell, 0))
        elif cell is None:
            above += 1
            rows.append((-1, above))  # the first cell's number is filled in below
        else:
            row += 1
            rows.append((cell, row))
    first = next((cell for cell, _ in rows if cell != -1), 1)
    return [(first, row) if cell == -1 else (cell, row) for cell, row in rows]


def _row_in_cell(rows: list[tuple[int, int]], row: int) -> tuple[int, int]:
    return rows[min(max(row, 1), len(rows)) - 1] if rows else (1, row)


def _where(rows: list[tuple[int, int]], row: int) -> str:
    """`line 21` of the joined source, as a user finds it: `cell 4, line 3`."""
    if not 0 < row <= len(rows):
        return f"line {row}"
    cell, row_in_cell = rows[row - 1]
    return f"cell {cell}, line {row_in_cell}"


class _LogicalLines:
    """Whether a physical line starts a logical line, as Python's tokenizer decides: not inside
    brackets, nor a string that goes on, nor after a backslash. Fed the Python lines one by one."""

    def __init__(self) -> None:
        self.depth = 0  # open brackets
        self.quote: str | None = None  # the quote of a string still open at the end of the last line
        self.backslash = False

    def at_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.backslash

    def feed(self, line: str) -> None:
        self.backslash = False
        position, end = 0, len(line)
        while position < end:
            if self.quote is not None:
                position = self._string_end(line, position)
                continue
            char = line[position]
            if char == "#":
                return
            if char in "\"'":
                self.quote = char * 3 if line.startswith(char * 3, position) else char
                position += len(self.quote)
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(self.depth - 1, 0)
            elif char == "\\" and position == end - 1:
                self.backslash = True
            position += 1

    def _string_end(self, line: str, position: int) -> int:
        """Past the end of the open string, or the end of the line if it goes on."""
        quote, end = self.quote, len(line)
        while position < end:
            if line[position] == "\\":
                position += 2
            elif line.startswith(quote, position):
                self.quote = None
                return position + len(quote)
            else:
                position += 1
        if len(quote) == 1 and position == end:  # no backslash before the line break: an error, closed here
            self.quote = None
        return end


def _cell_text(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise NotebookError("not a Jupyter notebook: a cell's source is not text")
