"""NG003 through a call: `val = evaluate(batch)` then `val.backward()`, where `evaluate` is decorated
with `@torch.no_grad()` or returns a value it computes in a region (in this module or another).
Every return of the function must hand back such a value; the project tells which function it is."""
from __future__ import annotations

from lint_nograd.summary import BackwardSite, Function


def message(site: BackwardSite, function: Function, where: str) -> str:
    return (f"`{site.name}` comes from `{site.callee_text}(...)`, which computes it in the "
            f"`{function.returns_api}` region at {where}, so it has no autograd graph: backward through it "
            "raises `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`")
