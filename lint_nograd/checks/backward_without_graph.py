"""NG003 backward-without-graph: backward through a value computed in a grad-disabled region.

Operations under no_grad or inference_mode record no graph, so `.backward()` or
`torch.autograd.grad` on their result raises at run time. Reading tensors that already exist is
fine, and so is `torch.autograd.grad(loss, params)` inside a region on a loss built before it.
"""
from __future__ import annotations

from typing import Iterator

from lint_nograd.analysis.model import SemanticModel
from lint_nograd.analysis.releases import Behaviour
from lint_nograd.checks.finding import Finding, fit, shorten

HELP = ("Operations in a grad-disabled region record no autograd graph, so backward through their "
        "result raises `RuntimeError: element 0 of tensors does not require grad and does not have a "
        "grad_fn`. Compute the value outside the region, or call backward on another one.")


def message(name: str, api: str, where: str) -> str:
    """`loss` has no graph to backward through: computed under `no_grad` (line 6)"""
    return fit(f"`{shorten(name)}` has no graph to backward through: computed under `{api}` ({where})",
               f"`{shorten(name)}` has no graph to backward through: computed under `{api}`",
               f"`{shorten(name)}` has no graph to backward through: computed in a grad-disabled region")


def check(model: SemanticModel, codes: frozenset[str], release: Behaviour, torch_version: str) -> Iterator[Finding]:
    for backward in model.graphless_backwards:
        region = backward.region
        yield Finding("NG003", backward.call, message(backward.name, region.describe(), region.at),
                      help=HELP, related=region.related())
