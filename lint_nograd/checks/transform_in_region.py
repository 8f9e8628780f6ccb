"""NG001 transform-under-no-grad and NG002 transform-under-inference-mode.

A transform creates its own autograd level and turns grad mode on inside it, so a region around
the call does not stop it from differentiating; only the results come back without a graph.
Under inference_mode, releases before the fix for pytorch issue 177318 silently returned zeros.
"""
from __future__ import annotations

from typing import Iterator

from lint_nograd.checks import Finding
from lint_nograd.model import SemanticModel


def check(model: SemanticModel, codes: frozenset[str]) -> Iterator[Finding]:
    for application in model.applications:
        state = application.state
        what = f"`{application.transform}(...)`"
        if application.alias:
            what = f"`{application.alias}`, {what} from line {application.transform_call.lineno},"
        if state.inference and state.inference_region:
            yield Finding(
                "NG002", application.reported_node,
                f"{what} runs inside an `inference_mode` region (line "
                f"{state.inference_region.expr.lineno}): PyTorch releases before the fix for pytorch "
                "issue 177318 silently return zeros here; call the transform outside the region")
        elif state.grad_enabled is False and state.grad_region:
            region = state.grad_region
            yield Finding(
                "NG001", application.reported_node,
                f"{what} runs inside a `{region.describe()}` region (line {region.expr.lineno}), "
                "which it ignores: the transform opens its own autograd level and computes "
                "gradients anyway; only its results come back without a graph")
