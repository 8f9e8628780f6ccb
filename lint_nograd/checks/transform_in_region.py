"""NG001 transform-under-no-grad and NG002 transform-under-inference-mode.

A transform creates its own autograd level and turns grad mode on inside it, so a region around
the call does not stop it from differentiating; only the results come back without a graph, which
is often what the code means. Under inference_mode, releases before the fix for pytorch issue
177318 silently returned zeros. What each release does is read from `lint_nograd.analysis.releases`:
an error where the release gets it wrong, a note where it does not.
"""
from __future__ import annotations

from typing import Iterator

from lint_nograd.analysis.model import SemanticModel, TransformApplication
from lint_nograd.analysis.releases import Behaviour, until
from lint_nograd.checks.finding import Finding, fit, shorten

HELP_NO_GRAD = ("A transform opens its own autograd level and turns grad mode on inside it: it differentiates "
                "`f` as if the region were not there. The region only means that the result joins no outer "
                "graph (`grad_fn` is None; outside the region it is set), which is often the intent. To say "
                "so, add `# noqa: NG001`, or write `stop_gradient(grad(f)(x))` outside the region.")
# inside jvp, jacfwd and linearize grad mode stays off: forward mode does not look at it (pytorch issue 78961)
HELP_NO_GRAD_FORWARD = ("Forward-mode AD does not look at grad mode: the transform computes the derivative "
                        "under the region (`torch.is_grad_enabled()` stays False inside it). The region only "
                        "means that the result joins no outer graph, which is often the intent. To say so, "
                        "add `# noqa: NG001`, or write `stop_gradient(jvp(f, ...))` outside the region.")
FORWARD_ONLY = frozenset({"jvp", "jacfwd", "linearize"})  # no reverse level inside: grad mode is left off


def help_no_grad(transform: str) -> str:
    """NG001's help: a reverse-mode transform turns grad mode on inside; a forward-mode one leaves it."""
    return HELP_NO_GRAD_FORWARD if transform in FORWARD_ONLY else HELP_NO_GRAD


HELP_NO_GRAD_WRONG = ("On this release the transform does not compute the derivative under the region. Call "
                      "it outside the region, and `stop_gradient(...)` its result if it must join no graph.")
HELP_INFERENCE = ("Before torch 2.12 a transform does not leave inference mode (pytorch issue 177318): "
                  "`grad`, `vjp`, `jvp`, `jacrev` return zeros, `jacfwd` and `hessian` raise; `linearize` "
                  "still returns zeros. Call the transform outside the region.")
HELP_FUNCTIONAL = ("`torch.autograd.functional` opens no autograd level and never leaves inference mode, not even "
                   "under `enable_grad()`: every input is an inference tensor, so it returns zeros on every release. "
                   "Call it outside the region.")
_WRONG = {"zeros": "returns zeros", "raises": "raises"}


def inference_outcome(transform: str, functional: bool, release: Behaviour, torch_version: str):
    """What a transform gives called under inference_mode on a release: the outcome, the help, and
    (outcome, release) of the last older release where it differed, if any."""
    if functional:
        outcome = release.functional_inference_mode.get(transform, "zeros")
        return outcome, HELP_FUNCTIONAL, until(torch_version, lambda row: row.functional_inference_mode.get(transform))
    outcome = release.outer_inference_mode.get(transform, "zeros")
    return outcome, HELP_INFERENCE, until(torch_version, lambda row: row.outer_inference_mode.get(transform))


def check(model: SemanticModel, codes: frozenset[str], release: Behaviour, torch_version: str) -> Iterator[Finding]:
    for application in model.applications:
        state = application.state
        if state.may_be_inference:
            region, code = state.inference_region, "NG002"
            outcome, help, history = inference_outcome(application.transform, application.functional, release,
                                                       torch_version)
        elif application.functional:
            continue  # it opens no level: under no_grad it computes what it computes outside, without a graph
        elif state.grad_region and (state.grad_enabled is False or state.grad_region.when):
            region, code = state.grad_region, "NG001"
            outcome = release.outer_no_grad.get(application.transform, "correct")
            help = HELP_NO_GRAD_WRONG if outcome in _WRONG else help_no_grad(application.transform)
            history = until(torch_version, lambda row: row.outer_no_grad.get(application.transform))
        else:
            continue
        api = f"`{region.describe()}`"
        when = f", entered when {region.when}" if region.when else ""
        ways = [(what, line) for line in dict.fromkeys((f"({region.at}{when})", f"(line {region.expr.lineno}{when})"))
                for what in (_what(application), f"`{application.transform}(...)`")]
        if outcome in _WRONG:
            message = fit(*(f"{what} {_WRONG[outcome]} on torch {torch_version}: it runs under {api} {line}"
                            for what, line in ways))
        elif code == "NG001":
            message = fit(*(f"{what} differentiates as if the {api} region {line} were not there; "
                            f"its result joins no graph" for what, line in ways),
                          *(f"{what} differentiates as if the {api} region {line} were not there"
                            for what, line in ways),
                          *(f"`{application.transform}(...)` ignores the {api} region (line {region.expr.lineno}, "
                            f"when {region.when})" for _ in when[:1]))
        elif history:
            message = fit(*(f"{what} under {api} {line}: correct on torch {torch_version}, "
                            f"{history[0]} before {history[1]}" for what, line in ways))
        else:
            message = fit(*(f"{what} under {api} {line}: correct on torch {torch_version}" for what, line in ways))
        yield Finding(code, application.reported_node, message, "error" if outcome in _WRONG else "note",
                      help, region.related())


def _what(application: TransformApplication) -> str:
    """`grad(...)`, or `df` (`grad(...)` of line 21) when it runs as `df(x)`."""
    what = f"`{application.transform}(...)`"
    if application.alias:
        what = f"`{shorten(application.alias, 16)}` ({what} of line {application.transform_call.lineno})"
    return what
