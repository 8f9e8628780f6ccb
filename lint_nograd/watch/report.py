"""What the watcher found, as `check` reports it: the same codes, messages, help and severities
(`tests/test_watch_check.py` holds them to `lint_nograd.checks`' own, which the watcher may not
import), `# noqa` read as `check` reads it, and the output formats of `lint_nograd.report.output`.
Imports no torch."""
from __future__ import annotations

import linecache
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from lint_nograd.analysis.releases import behaviour, until
from lint_nograd.report.diagnostics import Diagnostic, Related
from lint_nograd.report.output import render, summary
from lint_nograd.report.registry import RULES
from lint_nograd.report.suppression import unsuppressed

_FIX = "Use `stop_gradient(...)` on the values instead, which every transform and tracer understands."
HELP = {
    "NG001": "A transform opens its own autograd level and turns grad mode on inside it: it differentiates "
             "`f` as if the region were not there. The region only means that the result joins no outer "
             "graph (`grad_fn` is None; outside the region it is set), which is often the intent. To say "
             "so, add `# noqa: NG001`, or write `stop_gradient(grad(f)(x))` outside the region.",
    "NG001 forward": "Forward-mode AD does not look at grad mode: the transform computes the derivative "
                     "under the region (`torch.is_grad_enabled()` stays False inside it). The region only "
                     "means that the result joins no outer graph, which is often the intent. To say so, "
                     "add `# noqa: NG001`, or write `stop_gradient(jvp(f, ...))` outside the region.",
    "NG001 wrong": "On this release the transform does not compute the derivative under the region. Call "
                   "it outside the region, and `stop_gradient(...)` its result if it must join no graph.",
    "NG002": "Before torch 2.12 a transform does not leave inference mode (pytorch issue 177318): "
             "`grad`, `vjp`, `jvp`, `jacrev` return zeros, `jacfwd` and `hessian` raise; `linearize` "
             "still returns zeros. Call the transform outside the region.",
    "NG002 functional": "`torch.autograd.functional` opens no autograd level and never leaves inference mode, "
                        "not even under `enable_grad()`: every input is an inference tensor, so it returns zeros "
                        "on every release. Call it outside the region.",
    "NG004": "Forward-mode AD does not look at grad mode (pytorch issues 78961, 128600): gradients flow "
             "through the region, and results differ from reverse mode. " + _FIX,
    "NG005": "The tracer records the operations but not the grad mode (pytorch issue 62043): the traced "
             "graph computes other gradients than eager mode. " + _FIX,
}
_WRONG = {"zeros": "returns zeros", "raises": "raises"}
MAX_MESSAGE = 100  # as check's: a message fits a terminal line with its location


def fit(*ways: str) -> str:
    """The first of some ways to say a message, longest first, that fits in `MAX_MESSAGE`."""
    return next((way for way in ways if len(way) <= MAX_MESSAGE), shorten(ways[-1], MAX_MESSAGE))


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def diagnostics(settings) -> list[Diagnostic]:
    """What this process's watcher found, with the settings' codes."""
    hooks = sys.modules["lint_nograd.watch.hooks"]
    if settings.codes is None:
        from lint_nograd.watch.settings import SettingsError, resolve

        try:
            resolve(settings, Path.cwd())
        except SettingsError as error:
            sys.stderr.write(f"lint-nograd watch: {error}; reporting every code\n")
            settings.codes = frozenset(RULES)
    return diagnostics_of(hooks.WATCHER.found(), sys.modules["torch"].__version__.split("+")[0], settings.codes)


def diagnostics_of(findings: Iterable, torch_version: str, codes: Iterable[str] | None = None) -> list[Diagnostic]:
    """One diagnostic per (code, region, call), with how often it was hit; those of `codes` only
    (every code when None), and none a `# noqa` on its line (or a file's) silences."""
    codes = None if codes is None else frozenset(codes)
    release = behaviour(torch_version)
    by_file: dict[str, list[Diagnostic]] = {}
    for finding in findings:
        if codes is not None and finding.code not in codes:
            continue
        diagnostic = _diagnostic(finding, torch_version, release)
        by_file.setdefault(diagnostic.path, []).append(diagnostic)
    found = []
    for path, of_file in by_file.items():
        found += unsuppressed(of_file, [line.rstrip("\r\n") for line in linecache.getlines(path)])
    return sorted(found, key=lambda d: d.sort_key)


def _diagnostic(finding, torch_version: str, release) -> Diagnostic:
    region, site, code = finding.region, finding.site, finding.code
    who = "`with dual_level()`" if site.entry == "dual_level" else f"`{site.entry}(...)`"
    api = f"`{finding.api}`"
    severity, help = RULES[code].severity, HELP[code]
    if code in ("NG004", "NG005"):
        if code == "NG004":
            message = fit(f"{who} ignores this {api} region: forward-mode gradients flow through it",
                          f"{who} ignores this {api}: forward-mode gradients flow through it")
        else:
            message = fit(f"{who} drops this {api} region from the graph it records",
                          f"{who} drops this {api} from the graph it records")
        written = who if site.entry == "dual_level" else f"`{shorten(site.text or site.entry + '(...)', 40)}`"
        how = "reaches it in forward mode" if code == "NG004" else "traces it"
        place, related = region, Related(f"{written} {how}", *site.place)
    else:
        line = f"(line {region.row})"
        if code == "NG002":
            table = "functional_inference_mode" if site.functional else "outer_inference_mode"
            outcome = getattr(release, table).get(site.entry, "zeros")
            history = until(torch_version, lambda row: getattr(row, table).get(site.entry))
            help = HELP["NG002 functional"] if site.functional else help
        else:
            outcome = release.outer_no_grad.get(site.entry, "correct")
            history = None
        if outcome in _WRONG:
            message = f"{who} {_WRONG[outcome]} on torch {torch_version}: it runs under {api} {line}"
            help = HELP["NG001 wrong"] if code == "NG001" else help
        elif code == "NG001":
            help = HELP["NG001 forward"] if site.entry in ("jvp", "jacfwd", "linearize") else help
            message = fit(f"{who} differentiates as if the {api} region {line} were not there; its result joins no graph",
                          f"{who} differentiates as if the {api} region {line} were not there")
        elif history:
            message = fit(f"{who} under {api} {line}: correct on torch {torch_version}, {history[0]} before {history[1]}")
        else:
            message = fit(f"{who} under {api} {line}: correct on torch {torch_version}")
        severity = "error" if outcome in _WRONG else "note"
        place, related = site.place, Related(f"the {api} region", *region)
    hits = f" [{finding.hits} hit{'s' * (finding.hits != 1)}]"
    return Diagnostic(code, message + hits, place.path, place.row, place.col, place.end_row, place.end_col,
                      severity=severity, source_line=linecache.getline(place.path, place.row), help=help,
                      related=(related,))


def text(found: Sequence[Diagnostic], output_format: str) -> str:
    """The report in `text` (check's `full` output and summary), `json` or `sarif`."""
    if output_format == "text":
        if not found:
            return ""
        return "lint-nograd watch:\n" + render(found, "full") + summary(found)
    return render(found, output_format, source_root=Path.cwd() if output_format == "sarif" else None)
