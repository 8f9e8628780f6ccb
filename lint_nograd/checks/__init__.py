"""The rules. Each module holds one idea; the local ones yield `Finding`s from the file's `SemanticModel`."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from lint_nograd.model import SemanticModel


@dataclass(frozen=True)
class Finding:
    code: str
    node: ast.AST  # reported from its start to its end
    message: str
    severity: Optional[str] = None  # None: the rule's own severity


def _local_checks() -> list[Callable[[SemanticModel, frozenset[str]], Iterable[Finding]]]:
    from lint_nograd.checks import backward_without_graph, transform_in_region

    return [transform_in_region.check, backward_without_graph.check]


def run(model: SemanticModel, codes: frozenset[str]) -> list[Finding]:
    """The findings one file shows by itself; those that need the project (a region reached from
    elsewhere, a value returned by another function) come from `engine` once it is linked."""
    return [finding for check in _local_checks() for finding in check(model, codes) if finding.code in codes]
