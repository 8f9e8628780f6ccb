"""NG003 through a call: `val = evaluate(batch)` then `val.backward()`, where `evaluate` is decorated
with `@torch.no_grad()` or returns a value it computes in a region (in this module or another).
Every return of the function must hand back such a value; the project tells which function it is."""
from __future__ import annotations

from lint_nograd.checks.backward_without_graph import HELP
from lint_nograd.checks.finding import fit, shorten
from lint_nograd.project.summary import BackwardSite, Function

__all__ = ["HELP", "message", "related_message"]


def message(site: BackwardSite, function: Function) -> str:
    """`val` has no graph to backward through: `evaluate(...)` computes it under `no_grad`"""
    name, callee = shorten(site.name), shorten(site.callee_text)
    if not name:  # `evaluate(b).backward()`
        return fit(f"`{callee}(...)` returns no graph to backward through: it computes its result under "
                   f"`{function.returns_api}`", f"`{callee}(...)` returns no graph to backward through")
    return fit(f"`{name}` has no graph to backward through: `{callee}(...)` computes it under `{function.returns_api}`",
               f"`{name}` has no graph to backward through: `{callee}(...)` computes it in a region",
               f"`{name}` has no graph: `{callee}(...)` computes it in a region")


def related_message(site: BackwardSite, function: Function) -> str:
    return f"`{shorten(site.callee_text, 40)}(...)` returns what it computes in this `{function.returns_api}` region"
