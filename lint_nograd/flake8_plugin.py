"""The flake8 plugin: `flake8 --select NG` reports what `lint-nograd check --output-format concise`
prints for a file: `CODE [*] message` for a finding with a safe fix, `CODE message` for the others.

flake8 chooses the rules (`--select`, `--extend-ignore`, `--per-file-ignores`) and applies its own
`# noqa`. `check_source` applies lint-nograd's comments before that (`# noqa: NG001` and the
file-wide `# lint-nograd: noqa`), so flake8's `--disable-noqa` does not bring those findings back.
"""
from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator, Sequence

from lint_nograd import __version__
from lint_nograd.fix import rewrite
from lint_nograd.report.output import applies
from lint_nograd.report.registry import OFF_BY_DEFAULT, RULES

ALL_CODES = frozenset(RULES) - OFF_BY_DEFAULT  # flake8's selection chooses among the default rules


class Plugin:
    name = "lint-nograd"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str, lines: Sequence[str]):
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        for found in rewrite.check_with_fixes(source_bytes(self.lines), self.filename, ALL_CODES):
            marker = "[*] " if applies(found.fix, unsafe_fixes=False) else ""
            yield found.row, found.col - 1, f"{found.code} {marker}{found.message}", type(self)


def source_bytes(lines: Sequence[str]) -> bytes:
    """The file's bytes again from flake8's decoded lines, in the encoding its cookie names."""
    text = "".join(lines)
    data = text.encode("utf-8")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return text.encode(encoding)
    except (SyntaxError, LookupError, UnicodeError):  # the engine reports the bad cookie as NG000
        return data
