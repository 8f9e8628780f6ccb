"""`# noqa`, `# noqa: NG001,NG003` on a line, and `# lint-nograd: noqa[: NG001]` for a whole file.

Only comments are directives, as in ruff: `"# noqa"` inside a string is text (the comments are read
with `tokenize`).

NG100 (unused-noqa, as ruff's RUF100): a line's findings come from two stages (what the file shows
alone, and what linking the project gives it), each suppressed where it is made. With NG100 on,
each stage keeps the findings a directive silenced, marked `suppressed`, and the file's first
stage adds a candidate for each code a line directive names; `settle`, once a file's findings are
all there, drops the candidates whose code silenced something on their line, then the silenced."""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import replace
from typing import Iterable, Optional

from lint_nograd.report.diagnostics import Diagnostic, Edit, Fix

UNUSED_NOQA = "NG100"

_CODES = r"(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?"
LINE_NOQA = re.compile(r"#\s*noqa" + _CODES, re.IGNORECASE)
_FILE_NOQA = re.compile(r"#\s*lint-nograd:\s*noqa" + _CODES, re.IGNORECASE)


def _codes(match: re.Match) -> Optional[frozenset[str]]:
    """The codes a noqa comment names; None for a bare one, which covers every code."""
    codes = match.group("codes")
    return frozenset(re.split(r"[\s,]+", codes.upper())) if codes else None


def _covers(codes: Optional[frozenset[str]], code: str) -> bool:
    return codes is None or code in codes


def comment_tokens(lines: list[str]) -> dict[int, tuple[int, str]]:
    """The comment of each row that has one: (0-based column, text), read with `tokenize`. Source
    that does not tokenize (it parsed, so this is rare) is read line by line, from the first `#`."""
    if not any("#" in line for line in lines):
        return {}
    try:
        return {token.start[0]: (token.start[1], token.string)
                for token in tokenize.generate_tokens(io.StringIO("\n".join(lines)).readline)
                if token.type == tokenize.COMMENT}
    except (tokenize.TokenError, SyntaxError):
        return {row: (line.index("#"), line[line.index("#"):]) for row, line in enumerate(lines, 1) if "#" in line}


def unsuppressed(diagnostics: Iterable[Diagnostic], lines: list[str], keep: bool = False) -> list[Diagnostic]:
    """The findings no directive silences; `keep`: the silenced ones too, marked `suppressed` (for NG100)."""
    diagnostics = list(diagnostics)
    if not diagnostics:
        return diagnostics
    found = {row: text for row, (_, text) in comment_tokens(lines).items()}
    file_wide = [_codes(m) for comment in found.values() if "lint-nograd" in comment
                 for m in [_FILE_NOQA.search(comment)] if m]
    kept = []
    for diagnostic in diagnostics:
        comment = found.get(diagnostic.row, "")
        match = LINE_NOQA.search(comment) if comment else None
        if any(_covers(codes, diagnostic.code) for codes in file_wide) or (
                match and not _FILE_NOQA.search(comment) and _covers(_codes(match), diagnostic.code)):
            if keep:
                kept.append(replace(diagnostic, suppressed=True))
            continue
        kept.append(diagnostic)
    return kept


def silences(lines: list[str], row: int, code: str) -> bool:
    """Whether a directive of the file with these lines silences a finding of `code` on `row`."""
    probe = Diagnostic(code, "", "", row, 1, row, 1, "error", lines[row - 1] if row <= len(lines) else "")
    return not unsuppressed([probe], lines)


# -- NG100 unused-noqa --------------------------------------------------------------------------------

_CANDIDATE = re.compile(r"^Unused `noqa` directive: no `(?P<code>[A-Z]+[0-9]+)` finding on this line$")
HELP_UNUSED = ("The directive names a code that has no finding on its line, so it silences nothing: it was "
               "left behind by a fix or a move, or names the wrong line. Remove it (the fix does), or "
               "move it to the line it was meant for.")


def unused_candidates(lines: list[str], path: str, rules: Iterable[str]) -> list[Diagnostic]:
    """One NG100 candidate for each lint-nograd code (among `rules`) a line's `# noqa: ...` names,
    with the fix that takes the code out (the whole directive when it is the only code)."""
    rules = frozenset(rules) - {UNUSED_NOQA}
    found = []
    for row, (column, comment) in comment_tokens(lines).items():
        match = LINE_NOQA.search(comment)
        codes = match and match.group("codes")
        if not codes or _FILE_NOQA.search(comment):
            continue
        start, end = column + match.start(), column + match.end()
        for code in dict.fromkeys(re.split(r"[\s,]+", codes.upper())):
            if code in rules:
                edit, whole = removal(lines, row, {code})
                found.append(Diagnostic(
                    UNUSED_NOQA, f"Unused `noqa` directive: no `{code}` finding on this line", path, row,
                    start + 1, row, end + 1, "warning", lines[row - 1],
                    Fix("Remove the unused `noqa` directive" if whole else f"Remove `{code}` from the directive",
                        (edit,)), help=HELP_UNUSED))
    return found


def removal(lines: list[str], row: int, drop: set[str]) -> tuple[Edit, bool]:
    """The edit that takes the codes `drop` out of the `# noqa: ...` of a row, and whether the whole
    directive goes (with the spaces before it when it ends the line after some code)."""
    column, comment = comment_tokens(lines)[row]
    match = LINE_NOQA.search(comment)
    line, start, end = lines[row - 1], column + match.start(), column + match.end()
    named = re.split(r"[\s,]+", match.group("codes"))
    rest = [code for code in named if code.upper() not in drop]
    if rest:
        text = line[start:end]
        return Edit(text[:text.index(":") + 1] + " " + ", ".join(rest), row, start + 1, row, end + 1), False
    if end == len(line.rstrip()) and line[:start].strip():
        gap = len(line[:start]) - len(line[:start].rstrip())
        return Edit("", row, start - gap + 1, row, len(line.rstrip()) + 1), True
    return Edit("", row, start + 1, row, end + 1), True


def unused_code(diagnostic: Diagnostic) -> str | None:
    """The code an NG100 finding says its line's directive names in vain."""
    match = _CANDIDATE.match(diagnostic.message) if diagnostic.code == UNUSED_NOQA else None
    return match.group("code") if match else None


def settle(diagnostics: Iterable[Diagnostic], judged: Iterable[str]) -> list[Diagnostic]:
    """A file's findings from every stage: an NG100 candidate stays when its code is among `judged`
    (the codes checked, whose findings this run knows) and silenced nothing on its line; the
    silenced findings go."""
    diagnostics = list(diagnostics)
    if not any(d.suppressed or d.code == UNUSED_NOQA for d in diagnostics):
        return diagnostics
    judged = frozenset(judged)
    used = {(d.path, d.cell, d.row, d.code) for d in diagnostics if d.suppressed}
    kept = []
    for diagnostic in diagnostics:
        if diagnostic.suppressed:
            continue
        code = unused_code(diagnostic)
        if code and (code not in judged or (diagnostic.path, diagnostic.cell, diagnostic.row, code) in used):
            continue
        kept.append(diagnostic)
    return kept
