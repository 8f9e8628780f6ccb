"""The rules. Each module holds one idea; the local ones yield `Finding`s from the file's `SemanticModel`."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from lint_nograd.model import SemanticModel
from lint_nograd.releases import Behaviour


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


def _local_checks() -> list[Callable[[SemanticModel, frozenset[str], Behaviour, str], Iterable[Finding]]]:
    from lint_nograd.checks import backward_without_graph, transform_in_region

    return [transform_in_region.check, backward_without_graph.check]


def run(model: SemanticModel, codes: frozenset[str], torch_version: str | None = None) -> list[Finding]:
    """The findings one file shows by itself, for the torch release `torch_version` ("2.13"; None:
    the default); those that need the project (a region reached from elsewhere, a value returned by
    another function) come from `engine` once it is linked."""
    from lint_nograd.releases import behaviour, default_target

    torch_version = torch_version or default_target()
    row = behaviour(torch_version)
    return [finding for check in _local_checks() for finding in check(model, codes, row, torch_version)
            if finding.code in codes]
