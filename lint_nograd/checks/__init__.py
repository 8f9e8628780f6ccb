"""The rules. Each module holds one idea; the local ones yield `Finding`s (`finding`) from the
file's `SemanticModel`, and `region_in_reached_function` and `backward_through_call` read what the
linked project gives.

May import `project/`, `analysis/` and `report/`.
"""
from __future__ import annotations

from lint_nograd.analysis.model import SemanticModel
from lint_nograd.analysis.releases import behaviour, default_target
from lint_nograd.checks import backward_without_graph, transform_in_region
from lint_nograd.checks.finding import Finding

_LOCAL_CHECKS = (transform_in_region.check, backward_without_graph.check)


def run(model: SemanticModel, codes: frozenset[str], torch_version: str | None = None) -> list[Finding]:
    """The findings one file shows by itself, for the torch release `torch_version` ("2.13"; None:
    the default); those that need the project (a region reached from elsewhere, a value returned by
    another function) come from `engine` once it is linked."""
    torch_version = torch_version or default_target()
    row = behaviour(torch_version)
    return [finding for check in _LOCAL_CHECKS for finding in check(model, codes, row, torch_version)
            if finding.code in codes]
