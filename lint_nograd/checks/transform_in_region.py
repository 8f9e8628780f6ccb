"""NG001 transform-under-no-grad and NG002 transform-under-inference-mode.

A transform creates its own autograd level and turns grad mode on inside it, so a region around
the call does not stop it from differentiating; only the results come back without a graph.
Under inference_mode, releases before the fix for pytorch issue 177318 silently returned zeros.
What each release does is read from `lint_nograd.analysis.releases`: an error where the release gets it
wrong, a warning where it does not.
"""
from __future__ import annotations

from typing import Iterator

from lint_nograd.analysis.model import SemanticModel, TransformApplication
from lint_nograd.analysis.releases import Behaviour, until
from lint_nograd.checks.finding import Finding, fit, shorten

HELP_NO_GRAD = ("A transform opens its own autograd level and turns grad mode on inside it: the region "
                "does not stop it, only its results come back without a graph. Call it outside the "
                "region, which says the same plainly.")
HELP_INFERENCE = ("Before torch 2.12 a transform does not leave inference mode (pytorch issue 177318): "
                  "`grad`, `vjp`, `jvp`, `jacrev` return zeros, `jacfwd` and `hessian` raise; `linearize` "
                  "still returns zeros. Call the transform outside the region.")
_WRONG = {"zeros": "returns zeros", "raises": "raises"}


def check(model: SemanticModel, codes: frozenset[str], release: Behaviour, torch_version: str) -> Iterator[Finding]:
    for application in model.applications:
        state = application.state
        if state.inference and state.inference_region:
            region, code, help = state.inference_region, "NG002", HELP_INFERENCE
            outcome = release.outer_inference_mode.get(application.transform, "zeros")
            history = until(torch_version, lambda row: row.outer_inference_mode.get(application.transform))
        elif state.grad_enabled is False and state.grad_region:
            region, code, help = state.grad_region, "NG001", HELP_NO_GRAD
            outcome = release.outer_no_grad.get(application.transform, "correct")
            history = until(torch_version, lambda row: row.outer_no_grad.get(application.transform))
        else:
            continue
        api, line = f"`{region.describe()}`", f"(line {region.expr.lineno})"
        whats = (_what(application), f"`{application.transform}(...)`")
        if outcome in _WRONG:
            message = fit(*(f"{what} {_WRONG[outcome]} on torch {torch_version}: it runs under {api} {line}"
                            for what in whats))
        elif code == "NG001":
            message = fit(*(f"{what} ignores the {api} region {line} around it and differentiates anyway"
                            for what in whats),
                          *(f"{what} ignores the {api} region {line} around it" for what in whats))
        elif history:
            message = fit(*(f"{what} under {api} {line}: correct on torch {torch_version}, "
                            f"{history[0]} before {history[1]}" for what in whats))
        else:
            message = fit(*(f"{what} under {api} {line}: correct on torch {torch_version}" for what in whats))
        yield Finding(code, application.reported_node, message, "error" if outcome in _WRONG else "warning",
                      help, ((f"the `{region.describe()}` region", region.expr),))


def _what(application: TransformApplication) -> str:
    """`grad(...)`, or `df` (`grad(...)` of line 21) when it runs as `df(x)`."""
    what = f"`{application.transform}(...)`"
    if application.alias:
        what = f"`{shorten(application.alias, 16)}` ({what} of line {application.transform_call.lineno})"
    return what
