"""What a rule reports, and how a message is kept short."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Finding:
    code: str
    node: ast.AST  # reported from its start to its end
    message: str  # one short sentence: what is wrong here
    severity: Optional[str] = None  # None: the rule's own severity
    help: str = ""  # why, and the way out
    related: tuple[tuple[str, ast.AST], ...] = ()  # (what it is, where) in the same file


MAX_MESSAGE = 100  # characters: a finding's message fits a terminal line with its location


def fit(*ways: str) -> str:
    """The first of some ways to say a message, longest first, that fits in `MAX_MESSAGE`."""
    for way in ways:
        if len(way) <= MAX_MESSAGE:
            return way
    return shorten(ways[-1], MAX_MESSAGE)


def shorten(text: str, limit: int = 24) -> str:
    """A name or some code as written, cut to `limit` characters so that a message stays short."""
    return text if len(text) <= limit else text[:limit - 3] + "..."
