"""NG004, NG005, NG006: a grad-disabled region inside a function a transform or tracer reaches.

Reverse mode respects the region at every level. Forward mode ignores grad mode (pytorch issues
78961, 128600), and `torch.fx.symbolic_trace`, `torch.jit.trace`, plain `make_fx` and the other
fx-based tracers drop the region from the graph they record (pytorch issue 62043): both silently
change the results. Which calls reach which function is the project's business (`project/linking.py`);
this decides what a region so reached means, for the release `lint_nograd.analysis.releases` describes.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Optional

from lint_nograd.analysis.entry_points import DROPS, FORWARD, REVERSE
from lint_nograd.analysis.guards import MUTATES
from lint_nograd.analysis.region_flow import STATE
from lint_nograd.analysis.releases import Behaviour
from lint_nograd.checks.finding import fit, shorten
from lint_nograd.project.linking import Project, Reacher
from lint_nograd.project.summary import Region, display_name

_FIX = "Use `stop_gradient(...)` on the values instead, which every transform and tracer understands."
_WHY = {
    "forward": "Forward-mode AD does not look at grad mode (pytorch issues 78961, 128600): gradients flow "
               "through the region, and results differ from reverse mode. ",
    "traced": "The tracer records the operations but not the grad mode (pytorch issue 62043): the traced "
              "graph computes other gradients than eager mode. ",
    "exported": "The tracer records the operations but not the grad mode (pytorch issue 62043): the traced graph "
                "computes the same values, and other gradients than eager mode if it is ever differentiated; "
                "here it is only saved, exported or run without grad. ",
    "inference": "A value computed under inference_mode and saved for backward raises `RuntimeError: "
                 "Inference tensors cannot be saved for backward`. ",
    "reverse": "Reverse mode respects the region today, but tracers drop it and forward mode composed "
               "on top ignores it. ",
}


class RegionFinding(NamedTuple):
    code: str
    kind: str  # "forward", "traced", "inference" or "reverse": what the reacher does with the region
    reacher: Reacher
    severity: Optional[str] = None  # None: the rule's own severity

    @property
    def help(self) -> str:
        return _WHY[self.wording] + _FIX

    @property
    def wording(self) -> str:
        """The kind, or "exported" for a tracer whose result nothing may differentiate."""
        return "exported" if self.kind == "traced" and self.reacher.exported else self.kind


def findings_for(region: Region, reach: dict[str, Reacher], release: Behaviour,
                 cannot_matter: frozenset[str] = frozenset()) -> Iterator[RegionFinding]:
    """Every finding that applies to one region, the most severe first; none for the modes in which
    the region provably cannot change a result (`cannot_matter`, see `modes_that_cannot_matter`), nor
    where the call reaching it cannot take the branch the region is in (`analysis/guards.py`)."""
    forward, reverse, traced = (None if mode in cannot_matter or _skipped(region, reach.get(mode)) else reach.get(mode)
                                for mode in (FORWARD, REVERSE, DROPS))
    inference = region.inference
    if forward and not inference and release.inner_region_forward_mode == "ignored":
        yield RegionFinding("NG004", "forward", forward)
    if traced:  # a warning where every tracer reaching it is made for export or inference: same values
        yield RegionFinding("NG005", "traced", traced, "warning" if traced.exported else None)
    if inference and (reverse or forward and forward.entry == "hessian"):
        yield RegionFinding("NG006", "inference", reverse or forward, "error")
    elif reverse and not inference and release.inner_region_reverse_mode == "respected":
        yield RegionFinding("NG006", "reverse", reverse)


def _skipped(region: Region, reacher: Optional[Reacher]) -> bool:
    """Whether the call reaching a region cannot run it: a branch it does not take (eval mode, an
    initialisation done), or, for a torch.func transform, an in-place change of state, on which it raises."""
    skips = reacher.skips if reacher is not None else ()
    return region.guard in skips or region.mutates and MUTATES in skips


def call_name(reacher: Reacher) -> str:
    """`jacfwd(...)`, `with dual_level()`: how a message names the entry point that reaches a region."""
    return "`with dual_level()`" if reacher.entry == "dual_level" else f"`{reacher.entry}(...)`"


def message_at_region(finding: RegionFinding, region: Region) -> str:
    """`jacfwd(...)` ignores this `no_grad` region: forward-mode gradients flow through it"""
    who, api = call_name(finding.reacher), f"`{region.api}`"
    if region.when:  # a region only on a condition: say which
        return fit(*{
            "forward": [f"{who} ignores this {api} region, entered when {region.when}"],
            "traced": [f"{who} drops this {api} region, entered when {region.when}, from its graph"],
            "exported": [f"{who} drops this {api} region, entered when {region.when}: same values, other graph"],
            "inference": [f"{who} reaches this {api} region, entered when {region.when}"],
            "reverse": [f"{who} respects this {api} region (when {region.when}); forward mode would not"],
        }[finding.wording])
    return fit(*{
        "forward": [f"{who} ignores this {api} region: forward-mode gradients flow through it",
                    f"{who} ignores this {api}: forward-mode gradients flow through it"],
        "traced": [f"{who} drops this {api} region from the graph it records",
                   f"{who} drops this {api} from the graph it records"],
        "exported": [f"{who} drops this {api} region: the trace computes the same values, but records a graph "
                     "where eager mode does not",
                     f"{who} drops this {api} region: same values, a graph where eager mode has none",
                     f"{who} drops this {api}: same values, a graph where eager mode has none",
                     f"{who} drops this {api}: same values, other graph"],
        "inference": [f"{who} reaches this {api} region: values saved for backward raise"],
        "reverse": [f"{who} respects this {api} region, but tracers and forward mode would not",
                    f"{who} respects this {api}; tracers and forward mode do not"],
    }[finding.wording])


def message_at_reacher(finding: RegionFinding, region: Region, callee: str, place: str = "") -> str:
    """`jacfwd(...)` reaches the `no_grad` region of `loss` (pkg/model.py:5) in forward mode, which
    ignores it. `place` is where the region is, so that a call reaching two regions says which."""
    api = f"`{region.api}`" + (f" (when {region.when})" if region.when else "")
    name = shorten(display_name(region.function).rpartition(".")[2], 20) if region.function else ""
    wheres = [f" of `{name}`", ""] if name else [""]
    path, _, row = place.rpartition(":")
    places = [f" ({place})", f" ({path.replace(chr(92), '/').rpartition('/')[2]}:{row})"] if place else [""]
    return fit(*(way for who in (f"`{shorten(callee, 40)}`", f"`{shorten(callee, 20)}`") for where in wheres
                 for at in places for way in {
        "forward": [f"{who} reaches the {api} region{where}{at} in forward mode, which ignores it"],
        "traced": [f"{who} traces the {api} region{where}{at} and drops it from the graph"],
        "exported": [f"{who} drops the {api} region{where}{at} from a graph of the same values",
                     f"{who} drops the {api} region{where}{at}: same values, other graph"],
        "inference": [f"{who} reaches the {api} region{where}{at}: values saved for backward raise"],
        "reverse": [f"{who} reaches the {api} region{where}{at}, which only reverse mode respects"],
    }[finding.wording]))


def modes_that_cannot_matter(region: Region, project: Project | None = None,
                             module: str = "") -> frozenset[str]:
    """The modes in which a region provably cannot change what a transform or tracer returns (the
    flow rule: report unless it provably cannot matter). From the file alone: a body that turns grad
    back on, values computed from constants only, and (in forward and reverse mode) values cut
    wherever they are read after the region. With the whole project: values computed only
    from parameters no transform reaching the function in that mode differentiates, or from the
    module's own parameters and buffers (constants to a transform, unless the project uses
    `functional_call`), and a region that only stores into attributes no reached function reads.
    Never an `inference_mode` region."""
    every = frozenset({FORWARD, REVERSE, DROPS})
    if region.inference or region.function is None:
        return frozenset()
    if region.adds and (project is None or project.reached_reads(region.adds)):
        return frozenset()  # what it adds to, or changes in place, may be read by what is differentiated
    if region.inert:
        return every
    if project is not None and region.assumes and project.stored_elsewhere(module, region.assumes):
        return frozenset()  # a literal of the class that another module replaces
    if region.inputs == ():
        return every
    # cut where they are read: no derivative goes on in either mode (make_fx from torch 2.14 records
    # `.detach()` as an alias, so a tracer still may)
    cut_after = frozenset({FORWARD, REVERSE}) if region.cut_after else frozenset()
    if project is None:
        return cut_after
    if region.stores and not project.reached_reads(region.stores):
        return every
    modes = set()
    if region.inputs:
        key = (module, region.function)
        inputs = set(region.inputs)
        if STATE in inputs:  # `self.weight`: varied where the object is (`functional_call` varies it)
            inputs.discard(STATE)
            inputs.add(project.object_parameter(key) or STATE)
        for mode in (FORWARD, REVERSE, DROPS):
            if mode == DROPS and STATE in region.inputs:
                continue  # a traced module's parameters: what training the traced graph differentiates
            varied = project.varied_params(key, mode)  # None: any may be
            if varied is not None and not inputs & varied or varied is None and not inputs - {STATE} and \
                    not project.differentiates_state(module):
                modes.add(mode)
    if region.returned_only:  # what it returns goes nowhere its callers compute
        modes.update(mode for mode in every if project.result_unused((module, region.function), mode))
    if region.aux_only:  # handed back as it is by each transform (`has_aux=True`)
        modes.update(mode for mode in (FORWARD, REVERSE) if project.only_for_aux((module, region.function), mode))
    if region.local_only and project.traced_only_for_gradients((module, region.function)):
        modes.add(DROPS)  # make_fx of a training step records the backward eager mode ran
    return frozenset(modes) | cut_after


def first_selected(region: Region, reach: dict[str, Reacher], codes: frozenset[str],
                   release: Behaviour, cannot_matter: frozenset[str] = frozenset()) -> Optional[RegionFinding]:
    """The one finding of a region: that of the worst mode reaching it, when its code is selected.
    A region is one problem: ignoring its code (`--ignore`, a per-file ignore) silences it, as
    `# noqa` does, rather than bringing it back under a milder code. A region whose every value
    leaving it is cut computes the same in every mode: that is how the memory-preserving fix
    leaves a region, and it is not reported."""
    if region.cut:
        return None
    worst = next(findings_for(region, reach, release, cannot_matter), None)
    return worst if worst is not None and worst.code in codes else None


def region_code(region: Region, reach: dict[str, Reacher], release: Behaviour,
                cannot_matter: frozenset[str] = frozenset()) -> Optional[str]:
    """The code of a region's one finding, selected or not: that of the worst mode reaching it."""
    worst = next(findings_for(region, reach, release, cannot_matter), None)
    return worst.code if worst is not None else None
