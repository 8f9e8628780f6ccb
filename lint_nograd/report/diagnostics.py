"""What a check reports: one `Diagnostic` per finding, with an optional `Fix`."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Edit:
    """Replace the text between two 1-based (row, column) positions with `content`."""

    content: str
    row: int
    col: int
    end_row: int
    end_col: int


@dataclass(frozen=True)
class Fix:
    message: str
    edits: tuple[Edit, ...] = ()
    applicability: str = "safe"


@dataclass(frozen=True)
class Related:
    """A place a finding points at besides its own: the call that reaches a region, the region a
    call reaches in another file. Rows and columns as in `Diagnostic`."""

    message: str
    path: str
    row: int
    col: int
    end_row: int
    end_col: int
    cell: int | None = None  # in a notebook: the cell `row` counts in


@dataclass(frozen=True)
class Diagnostic:
    """One finding. Rows and columns are 1-based; columns count characters. `message` is one short
    sentence on what is wrong at that line; `help` says why and the way out; `related` points at
    the other places the finding involves."""

    code: str
    message: str
    path: str
    row: int
    col: int
    end_row: int
    end_col: int
    severity: str = "error"  # "error", "warning" or "note"
    source_line: str = ""  # the text of `row`, for the `full` output format
    fix: Fix | None = field(default=None, compare=False)
    cell: int | None = None  # in a notebook: the 1-based number of the cell; rows count within it
    help: str = ""
    related: tuple[Related, ...] = ()
    suppressed: bool = False  # silenced by a `# noqa`, kept until NG100 has seen it (report/suppression.py)

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.row, self.col, self.code)
