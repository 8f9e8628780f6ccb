"""NG001 and NG002 through calls: a function called inside a region runs in the region's grad mode,
and so does every function it calls in turn, in any module. A transform such a chain applies is
the same finding as one applied in the region itself; it is reported at the call in the region,
where the mode is chosen. `enable_grad()` in the chain lifts no_grad but not inference mode, and
torch.autograd.functional never leaves inference mode: it returns zeros there on every release.
So does NG003: a backward the chain runs on what it computes in the region's mode raises.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from lint_nograd.analysis.releases import Behaviour
from lint_nograd.checks.finding import fit, shorten
from lint_nograd.checks.transform_in_region import _WRONG, help_no_grad, inference_outcome
from lint_nograd.project.linking import RunInRegion
from lint_nograd.project.summary import display_name


HELP_BACKWARD = ("Operations under no_grad or inference_mode record no autograd graph, and a function called "
                 "there runs in that mode, so backward through what it computes raises `RuntimeError: element 0 "
                 "of tensors does not require grad and does not have a grad_fn`. `enable_grad()` inside it lifts "
                 "no_grad, but not inference mode: call the function outside the region.")


class ThroughCall(NamedTuple):
    code: str
    severity: str
    message: str
    help: str


def finding(run: RunInRegion, release: Behaviour, torch_version: str) -> Optional[ThroughCall]:
    call, applied = run.call, run.applied
    callee, what = f"`{shorten(call.text.partition('(')[0], 24)}(...)`", f"`{applied.transform}(...)`"
    region = f"`{call.api}` (line {call.region.row}{f', when {call.when}' if call.when else ''})"
    if applied.backward:
        what = "`.backward()`" if applied.transform == "backward" else what
        even = " (`enable_grad()` does not lift inference mode)" if applied.grad_enabled else ""
        return ThroughCall("NG003", "error", fit(
            f"{callee} runs {what} on what it computes under {region}: no graph to differentiate{even}",
            f"{callee} runs {what} on what it computes under {region}: no graph to differentiate",
            f"{callee} runs {what} under {region}: no graph"), HELP_BACKWARD)
    if call.inference:
        outcome, help, history = inference_outcome(applied.transform, applied.functional, release, torch_version)
        if outcome in _WRONG:
            return ThroughCall("NG002", "error", fit(
                f"{callee} runs {what}, which {_WRONG[outcome]} on torch {torch_version} under {region}",
                f"{callee} runs {what}, which {_WRONG[outcome]} under {region}"), help)
        before = f", {history[0]} before {history[1]}" if history else ""
        return ThroughCall("NG002", "note", fit(
            f"{callee} runs {what} under {region}: correct on torch {torch_version}{before}",
            f"{callee} runs {what} under {region}"), help)
    if applied.functional:
        return None  # it opens no level: under no_grad it computes what it computes outside, without a graph
    outcome = release.outer_no_grad.get(applied.transform, "correct")
    if outcome in _WRONG:
        return ThroughCall("NG001", "error", fit(
            f"{callee} runs {what}, which {_WRONG[outcome]} on torch {torch_version} under {region}"), help)
    return ThroughCall("NG001", "note", fit(
        f"{callee} runs {what}, which differentiates as if the {region} region were not there",
        f"{callee} runs {what} under {region}"), help_no_grad(applied.transform))


def chain_text(run: RunInRegion, here: str) -> str:
    """`helpers.check` -> `helpers.solve`: the functions from the one called to the one applying it."""
    names = [display_name(function) if module == here else f"{module}.{display_name(function)}"
             for module, function in run.chain]
    return " -> ".join(f"`{name}`" for name in names)
