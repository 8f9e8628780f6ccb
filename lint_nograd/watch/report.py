"""What the watcher found, as `check` reports it: the same codes, messages of the same shape, and
the output formats of `lint_nograd.report.output`. Imports no torch."""
from __future__ import annotations

import linecache
from collections.abc import Iterable, Sequence
from pathlib import Path

from lint_nograd.analysis.releases import behaviour
from lint_nograd.report.diagnostics import Diagnostic, Related
from lint_nograd.report.output import render, summary
from lint_nograd.report.registry import RULES

FORMATS = ("text", "json", "sarif")

_WAY_OUT = "Use `stop_gradient(...)` on the values instead, which every transform and tracer understands."
HELP = {
    "NG001": "A transform opens its own autograd level and turns grad mode on inside it: the region does not "
             "stop it, only its results come back without a graph. Call it outside the region.",
    "NG002": "Before torch 2.12 a transform does not leave inference mode (pytorch issue 177318): `grad`, "
             "`vjp`, `jvp`, `jacrev` return zeros, `jacfwd` and `hessian` raise; `linearize` still returns "
             "zeros. Call the transform outside the region.",
    "NG004": "Forward-mode AD does not look at grad mode (pytorch issues 78961, 128600): gradients flowed "
             "through the region, and results differ from reverse mode. " + _WAY_OUT,
    "NG005": "The tracer records the operations but not the grad mode (pytorch issue 62043): the traced graph "
             "computes other gradients than eager mode. " + _WAY_OUT,
}
_WRONG = {"zeros": "returns zeros", "raises": "raises"}


def selected(code: str, select: Sequence[str]) -> bool:
    """`--select` takes codes or prefixes, as `check` does: `NG`, `NG00`, `NG004`, `ALL`."""
    return any(prefix == "ALL" or code.startswith(prefix) for prefix in select)


def diagnostics(findings: Iterable, torch_version: str, select: Sequence[str] = ("NG",)) -> list[Diagnostic]:
    """One diagnostic per (code, region, call), with how often it was hit."""
    found = []
    for finding in findings:
        if not selected(finding.code, select):
            continue
        region, site = finding.region, finding.site
        call = "`with dual_level()`" if site.entry == "dual_level" else f"`{site.entry}(...)`"
        api = f"`{finding.api}`"
        hits = f" [{finding.hits} hit{'s' * (finding.hits != 1)}]"
        severity = RULES[finding.code].severity
        if finding.code in ("NG004", "NG005"):
            message = (f"{call} ignores this {api} region: forward-mode gradients flow through it"
                       if finding.code == "NG004" else f"{call} drops this {api} region from the graph it records")
            how = "reaches it in forward mode" if finding.code == "NG004" else "traces it"
            place, related = region, Related(f"{call} {how}", *site.place)
        else:
            outcome = "correct"
            if finding.code == "NG002":
                outcome = behaviour(torch_version).outer_inference_mode.get(site.entry, "zeros")
                severity = "error" if outcome in _WRONG else "warning"
            if outcome in _WRONG:
                message = f"{call} {_WRONG[outcome]} on torch {torch_version}: it runs under {api} (line {region.row})"
            elif finding.code == "NG001":
                message = f"{call} ignores the {api} region (line {region.row}) around it and differentiates anyway"
            else:
                message = f"{call} under {api} (line {region.row}): correct on torch {torch_version}"
            place, related = site.place, Related(f"the {api} region", *region)
        found.append(Diagnostic(
            finding.code, message + hits, place.path, place.row, place.col, place.end_row, place.end_col,
            severity=severity, source_line=linecache.getline(place.path, place.row), help=HELP[finding.code],
            related=(related,)))
    return sorted(found, key=lambda d: d.sort_key)


def text(found: Sequence[Diagnostic], output_format: str) -> str:
    """The report in `text` (check's `full` output and summary), `json` or `sarif`."""
    if output_format == "text":
        if not found:
            return ""
        return "lint-nograd watch:\n" + render(found, "full") + summary(found)
    return render(found, output_format, source_root=Path.cwd() if output_format == "sarif" else None)
