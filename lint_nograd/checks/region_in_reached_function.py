"""NG004, NG005, NG006: a grad-disabled region inside a function a transform or tracer reaches.

Reverse mode respects the region at every level. Forward mode ignores grad mode (pytorch issues
78961, 128600), and `torch.fx.symbolic_trace`, `torch.jit.trace` and plain `make_fx` drop the
region from the graph they record (pytorch issue 62043): both silently change the results.
A region whose every value leaving it is cut (`stop_gradient`, `.detach()`) computes the same in
every mode, and is not reported: that is how the memory-preserving fix leaves a region.
"""
from __future__ import annotations

from typing import Iterator

from lint_nograd.checks import Finding
from lint_nograd.fix_plan import region_cuts_its_values
from lint_nograd.model import GradModeChange, SemanticModel
from lint_nograd.reach import Reach

_FIX = "use `stop_gradient(...)` on the values instead, which every transform and tracer understands"


def _where(region: GradModeChange, reach: Reach) -> str:
    return f"`{region.describe()}` region in `{reach.name_of(region.function)}`"


def findings_for(region: GradModeChange, reach: Reach) -> Iterator[Finding]:
    """Every finding that applies to one region, the most severe first."""
    forward, reverse, traced = (reach.first(region.function, mode) for mode in ("forward", "reverse", "trace"))
    inference = region.api == "inference_mode"
    if forward and not inference:
        yield Finding("NG004", region.expr,
                      f"{_where(region, reach)}, reached in forward mode by {forward.describe()}: forward-mode "
                      "AD ignores no_grad (pytorch issues 78961, 128600), so gradients flow through "
                      f"it and results differ from reverse mode; {_FIX}")
    if traced:
        yield Finding("NG005", region.expr,
                      f"{_where(region, reach)}, traced by {traced.describe()}: the tracer drops the region "
                      "(pytorch issue 62043), so the traced graph computes other gradients than eager "
                      f"mode; {_FIX}")
    if inference and (reverse or forward and forward.name == "hessian"):
        reacher = reverse or forward
        yield Finding("NG006", region.expr,
                      f"{_where(region, reach)}, reached by {reacher.describe()}: a value computed under "
                      "inference_mode and saved for backward raises `RuntimeError: Inference tensors "
                      f"cannot be saved for backward`; {_FIX}", severity="error")
    elif reverse and not inference:
        yield Finding("NG006", region.expr,
                      f"{_where(region, reach)}, reached by {reverse.describe()}: reverse mode respects it "
                      "today, but tracers drop it and forward mode composed on top ignores it; "
                      f"{_FIX}")


def check(model: SemanticModel, codes: frozenset[str]) -> Iterator[Finding]:
    regions = [region for region in model.regions if region.function is not None]
    if not regions:
        return
    reach = Reach(model)
    for region in regions:
        selected = [f for f in findings_for(region, reach) if f.code in codes]
        if selected and not region_cuts_its_values(model, region):
            yield selected[0]
