"""NG003 backward-without-graph: backward through a value computed in a grad-disabled region.

Operations under no_grad or inference_mode record no graph, so `.backward()` or
`torch.autograd.grad` on their result raises at run time. Reading tensors that already exist is
fine, and so is `torch.autograd.grad(loss, params)` inside a region on a loss built before it.
"""
from __future__ import annotations

from typing import Iterator

from lint_nograd.checks import Finding
from lint_nograd.model import SemanticModel


def check(model: SemanticModel, codes: frozenset[str]) -> Iterator[Finding]:
    for backward in model.graphless_backwards:
        region = backward.region
        yield Finding(
            "NG003", backward.call,
            f"`{backward.name}` was computed in the `{region.describe()}` region at line "
            f"{region.expr.lineno} and has no autograd graph: backward through it raises "
            "`RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`")
