"""`# noqa`, `# noqa: NG001,NG003` on a line, and `# lint-nograd: noqa[: NG001]` for a whole file."""
from __future__ import annotations

import re
from typing import Iterable, Optional

from lint_nograd.report.diagnostics import Diagnostic

_CODES = r"(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?"
LINE_NOQA = re.compile(r"#\s*noqa" + _CODES, re.IGNORECASE)
_FILE_NOQA = re.compile(r"#\s*lint-nograd:\s*noqa" + _CODES, re.IGNORECASE)


def _codes(match: re.Match) -> Optional[frozenset[str]]:
    """The codes a noqa comment names; None for a bare one, which covers every code."""
    codes = match.group("codes")
    return frozenset(re.split(r"[\s,]+", codes.upper())) if codes else None


def _covers(codes: Optional[frozenset[str]], code: str) -> bool:
    return codes is None or code in codes


def unsuppressed(diagnostics: Iterable[Diagnostic], lines: list[str]) -> list[Diagnostic]:
    diagnostics = list(diagnostics)
    if not diagnostics:
        return diagnostics
    file_wide = [_codes(m) for line in lines if "lint-nograd" in line
                 for m in [_FILE_NOQA.search(line)] if m]
    kept = []
    for diagnostic in diagnostics:
        if any(_covers(codes, diagnostic.code) for codes in file_wide):
            continue
        line = lines[diagnostic.row - 1] if diagnostic.row <= len(lines) else ""
        match = LINE_NOQA.search(line) if "#" in line else None
        if match and not _FILE_NOQA.search(line) and _covers(_codes(match), diagnostic.code):
            continue
        kept.append(diagnostic)
    return kept
