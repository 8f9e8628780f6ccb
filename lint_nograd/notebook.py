"""Jupyter notebooks: their code cells as one Python file, and back.

The code cells are joined into one source, separated by marker comments, so that a transform in
one cell reaches a function defined in another, as it does when the notebook runs. IPython
syntax that is not Python (`%timeit`, `!pip install`, `x = !ls`, `%%bash` cells) is masked with
placeholders that keep the lines and their indentation, and restored when the notebook is
written back. Only the `source` of code cells is ever changed; outputs, metadata, cell ids, key
order, indentation and the trailing newline of the JSON stay as they were.
"""
from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field, replace

from lint_nograd.diagnostics import Diagnostic

_MARKER = "# lint-nograd: cell {}"
_MARKER_LINE = re.compile(r"^# lint-nograd: cell (\d+)$", re.MULTILINE)
# `%magic`, `!shell`, `?help`, `x = !ls`, `x = %who_ls`, `obj?`, `obj??`
_IPYTHON_LINE = re.compile(r"^(\s*)(?:[%!?]|\w+\s*=\s*[%!]|[\w.]+\?\??\s*$)")
# Cell magics whose body is Python: only their first line is masked.
_PYTHON_CELL_MAGICS = frozenset({"%%time", "%%timeit", "%%capture", "%%prun"})
_LINE_REFERENCE = re.compile(r"\bline (\d+)")
_PLACEHOLDER = re.compile(r"^([^\S\n]*)(?:# )?__lint_nograd_ipython_(\d+)__(?:\(\))?$", re.MULTILINE)


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
            cells = document["cells"]
            assert isinstance(cells, list)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AssertionError):
            raise NotebookError("not a Jupyter notebook: cannot read its cells") from None
        notebook = cls(document, text, bom=bom)
        notebook._join(cells)
        return notebook

    def _join(self, cells: list) -> None:
        lines: list[str] = []
        for number, cell in enumerate(cells, 1):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            lines.append(_MARKER.format(number))
            self.cell_of_row.append((number, 0))
            cell_lines = _cell_text(cell).split("\n")
            whole_cell_magic = cell_lines[0].startswith("%%") and \
                cell_lines[0].split()[0] not in _PYTHON_CELL_MAGICS
            for row, line in enumerate(cell_lines, 1):
                lines.append(self._mask(line, whole_cell_magic))
                self.cell_of_row.append((number, row))
        self.source = "\n".join(lines) + "\n"

    def _mask(self, line: str, whole_cell_magic: bool) -> str:
        match = _IPYTHON_LINE.match(line)
        ours = _MARKER_LINE.match(line) or _PLACEHOLDER.match(line)  # a cell spelling our own markers
        if not (whole_cell_magic or match or ours):
            return line
        self.masked.append(line)
        placeholder = f"__lint_nograd_ipython_{len(self.masked) - 1}__"
        if whole_cell_magic or not match:  # not Python, or our own marker: nothing in it may count
            return f"# {placeholder}"
        return f"{match.group(1)}{placeholder}()"  # a statement, so a block around it stays valid

    def locate(self, diagnostic: Diagnostic) -> Diagnostic:
        """The diagnostic with rows counted within its cell, and the cell's number. A fix keeps
        its message but not its edits, whose rows count in the joined source."""
        cell, row = self.cell_of_row[diagnostic.row - 1]
        _, end_row = self.cell_of_row[diagnostic.end_row - 1]
        fix = diagnostic.fix and replace(diagnostic.fix, edits=())
        message = _LINE_REFERENCE.sub(lambda match: self._where(int(match.group(1))), diagnostic.message)
        return replace(diagnostic, row=row, end_row=end_row, cell=cell, fix=fix, message=message,
                       source_line=self._unmask(diagnostic.source_line))

    def _where(self, row: int) -> str:
        """`line 21` of the joined source, as a user finds it: `cell 4, line 3`."""
        if not 0 < row <= len(self.cell_of_row):
            return f"line {row}"
        cell, row_in_cell = self.cell_of_row[row - 1]
        return f"cell {cell}, line {row_in_cell}"

    def _unmask(self, text: str) -> str:
        return _PLACEHOLDER.sub(lambda match: self.masked[int(match.group(2))], text)

    def with_source(self, source: str) -> bytes:
        """The notebook's bytes with its code cells replaced by those in `source`."""
        cells = self.document["cells"]
        pieces = [self._unmask(piece) for piece in _MARKER_LINE.split(source)]
        if len(pieces) > 2 and pieces[0]:  # an import added above the first cell goes into it
            pieces[2] = "\n" + pieces[0] + pieces[2][1:]
        for number, text in zip(pieces[1::2], pieces[2::2]):
            cell = cells[int(number) - 1]
            text = text[1:-1] if text.endswith("\n") else text[1:]  # the marker's and the last line break
            lines = text.splitlines(keepends=True)
            cell["source"] = lines if isinstance(cell.get("source"), list) else text
        return self.bom + self._dump().encode("utf-8")

    def _dump(self) -> str:
        second_line = self.text.split("\n", 2)[1] if "\n" in self.text else ""
        indent = len(second_line) - len(second_line.lstrip(" ")) or None
        text = json.dumps(self.document, indent=indent, ensure_ascii=self.text.isascii())
        return text + "\n" if self.text.endswith("\n") else text

    def layout_is_kept(self) -> bool:
        """Whether writing the notebook as read gives back its very bytes (else we do not write)."""
        return self._dump() == self.text


def _cell_text(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise NotebookError("not a Jupyter notebook: a cell's source is not text")
