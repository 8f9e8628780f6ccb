"""The rules. Each module holds one idea and yields `Finding`s from the file's `SemanticModel`."""
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


def _all_checks() -> list[Callable[[SemanticModel, frozenset[str]], Iterable[Finding]]]:
    from lint_nograd.checks import backward_without_graph, region_in_reached_function, transform_in_region

    return [transform_in_region.check, backward_without_graph.check, region_in_reached_function.check]


def run(model: SemanticModel, codes: frozenset[str]) -> list[Finding]:
    return [finding for check in _all_checks() for finding in check(model, codes) if finding.code in codes]
