"""NG004, NG005, NG006: a grad-disabled region inside a function a transform or tracer reaches.

Reverse mode respects the region at every level. Forward mode ignores grad mode (pytorch issues
78961, 128600), and `torch.fx.symbolic_trace`, `torch.jit.trace`, plain `make_fx` and the other
fx-based tracers drop the region from the graph they record (pytorch issue 62043): both silently
change the results. Which calls reach which function is the project's business (`project.py`);
this decides what a region so reached means.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Iterator, NamedTuple, Optional

from lint_nograd.entry_points import DROPS, FORWARD, REVERSE
from lint_nograd.project import Reacher
from lint_nograd.summary import Region, display_name

_FIX = "use `stop_gradient(...)` on the values instead, which every transform and tracer understands"


class RegionFinding(NamedTuple):
    code: str
    message: str  # what follows the naming of the region and of its reacher
    reacher: Reacher
    severity: Optional[str] = None  # None: the rule's own severity


def findings_for(region: Region, reach: dict[str, Reacher]) -> Iterator[RegionFinding]:
    """Every finding that applies to one region, the most severe first."""
    forward, reverse, traced = (reach.get(mode) for mode in (FORWARD, REVERSE, DROPS))
    inference = region.inference
    if forward and not inference:
        yield RegionFinding("NG004", "forward-mode AD ignores no_grad (pytorch issues 78961, 128600), so "
                                     "gradients flow through it and results differ from reverse mode", forward)
    if traced:
        yield RegionFinding("NG005", "the tracer drops the region (pytorch issue 62043), so the traced graph "
                                     "computes other gradients than eager mode", traced)
    if inference and (reverse or forward and forward.entry == "hessian"):
        yield RegionFinding("NG006", "a value computed under inference_mode and saved for backward raises "
                                     "`RuntimeError: Inference tensors cannot be saved for backward`",
                            reverse or forward, "error")
    elif reverse and not inference:
        yield RegionFinding("NG006", "reverse mode respects it today, but tracers drop it and forward mode "
                                     "composed on top ignores it", reverse)


_HOW = {"NG004": "reached in forward mode by", "NG005": "traced by", "NG006": "reached by"}


def message_at_region(finding: RegionFinding, region: Region, describe: Callable[[Reacher], str]) -> str:
    """`no_grad` region in `f`, reached in forward mode by `jacfwd(...)` at line 9: ..."""
    where = f"in `{display_name(region.function)}`" if region.function is not None else "at the top level"
    return (f"`{region.api}` region {where}, {_HOW[finding.code]} {describe(finding.reacher)}: "
            f"{finding.message}; {_FIX}")


def message_at_reacher(finding: RegionFinding, region: Region, text: str, where: str, function: str) -> str:
    """`jacfwd(loss)` reaches a `no_grad` region at pkg/model.py:4 (in `pkg.model.loss`): ..."""
    how = {"NG004": "in forward mode ", "NG005": "and traces "}.get(finding.code, "")
    return (f"`{text}` reaches {how}the `{region.api}` region in `{function}` at {where}: "
            f"{finding.message}; there, {_FIX}")


def first_selected(region: Region, reach: dict[str, Reacher], codes: frozenset[str]) -> Optional[RegionFinding]:
    """The most severe finding of a region among the selected codes. A region whose every value
    leaving it is cut computes the same in every mode: that is how the memory-preserving fix
    leaves a region, and it is not reported."""
    if region.cut:
        return None
    return next((f for f in findings_for(region, reach) if f.code in codes), None)
