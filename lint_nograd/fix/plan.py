"""What `lint-nograd fix` may rewrite in a grad-disabled region, in which form, and how safely.

Decided on the `ast` alone; `edit` turns a plan into text. `analysis.region_values` decides what
each statement and value of a region becomes (and tells `check` which regions are cut already),
`spelling` how the file names the cut. One rule picks the form
(`choose_form`), from the calls the region makes:

- the short form, when every call the region makes is a light operation (`tensor_ops`:
  elementwise, reductions, views on tensors): the region goes, each value it computes is cut.

      with torch.no_grad():               ->    shift = stop_gradient(x.mean())
          shift = x.mean()

  Those operations save for backward only tensors of the statement itself, and their graph is
  freed at the cut, at the end of the statement: a model's activations are never kept.
- the memory-preserving form, for anything heavier (a module call, a call of the user's code,
  `@`, a transform): the region stays, so eager reverse mode records nothing there, as before,
  and its values are cut inside it, for forward mode and tracers.

      with torch.no_grad():               ->    with torch.no_grad():
          target = self.teacher(x)                  target = stop_gradient(self.teacher(x))

  An `inference_mode` region becomes `no_grad()` in this form: a tensor made in inference mode
  cannot be saved for backward, cut or not.

Applicability, as in ruff: `safe` when every call is an operation `tensor_ops` knows, so values,
gradients and peak memory in eager mode stay as they were (but for a short form's few tensors of
its own statement); `unsafe` when the region calls code the analysis cannot see into: the rewrite
assumes such a call returns new tensors (not its argument or a parameter, which `stop_gradient`
would then cut where `no_grad` did not).
"""
from __future__ import annotations

import ast
import weakref
from dataclasses import dataclass, field

from lint_nograd.analysis import tensor_ops, torch_names
from lint_nograd.analysis.model import GradModeChange, SemanticModel
from lint_nograd.analysis.region_values import Action, Refusal, RegionAnalysis, check_nesting, check_owner
from lint_nograd.analysis.scopes import Binding
from lint_nograd.fix.settings import SAFE, UNSAFE

SHORT, KEPT = "short", "kept"


@dataclass
class RegionPlan:
    """How one region is rewritten."""

    region: GradModeChange
    actions: list[Action]
    form: str  # SHORT or KEPT
    applicability: str  # SAFE or UNSAFE
    calls: list[tuple[str, str]]  # (the call as written, its `tensor_ops` kind), in source order
    # KEPT: the no_grad text each inference_mode expression of the region becomes, by `ast.dump`
    no_grad_for: dict[str, str] = field(default_factory=dict)

    @property
    def heavy_call(self) -> str | None:
        """The first call heavier than a light operation: why the region is kept."""
        return next((call for call, kind in self.calls if kind != tensor_ops.LIGHT), None)

    @property
    def unknown_call(self) -> str | None:
        """The first call into code the analysis cannot see: why the fix is unsafe."""
        return next((call for call, kind in self.calls if kind == tensor_ops.UNKNOWN), None)

    @property
    def wraps(self) -> bool:
        """Whether any value gets cut: if not, the region only goes away."""
        return any(isinstance(action, tuple) for action in self.actions)


def choose_form(calls: list[tuple[str, str]]) -> str:
    """The rule for the form: short when every call of the region is a light operation (its graph
    holds only tensors of its own statement), else memory-preserving (the region stays)."""
    return SHORT if all(kind == tensor_ops.LIGHT for _, kind in calls) else KEPT


def applicability(calls: list[tuple[str, str]]) -> str:
    """Safe when every call is an operation `tensor_ops` knows; unsafe when one calls code the
    analysis cannot see, which the rewrite assumes returns new tensors."""
    return UNSAFE if any(kind == tensor_ops.UNKNOWN for _, kind in calls) else SAFE


def plan_region(model: SemanticModel, region: GradModeChange, detach: bool = False) -> RegionPlan:
    """The plan for a region, or `Refusal`. `detach`: the cut is `.detach()`, which needs a single tensor."""
    if region.entered_by:
        raise Refusal(f"entered through `{region.entered_by}`: a rewrite would drop what else it does")
    check_owner(model, region)
    check_nesting(model, region.owner.body)
    analysis = RegionAnalysis(model, region, detach)
    analysis.statements(region.owner.body)
    form = choose_form(analysis.calls)
    plan = RegionPlan(region, analysis.actions, form, applicability(analysis.calls), analysis.calls)
    if form == KEPT:
        for change in [region, *analysis.nested]:
            if change.api == "inference_mode":
                plan.no_grad_for[ast.dump(change.expr)] = _no_grad_text(model, change)
    return plan


def _no_grad_text(model: SemanticModel, change: GradModeChange) -> str:
    """What an `inference_mode` expression becomes in the kept form: `torch.no_grad()` for
    `torch.inference_mode()`, or the file's own name for `no_grad` when it imported the function."""
    target = change.expr.func if isinstance(change.expr, ast.Call) else change.expr
    if isinstance(target, ast.Attribute):  # torch, torch.autograd and grad_mode all define no_grad
        return f"{ast.unparse(target.value)}.no_grad()"
    scope = model.scopes.of.get(change.function, model.scopes.module)
    position = (change.expr.lineno, change.expr.col_offset)
    for name, text, bindings in _no_grad_names(model):
        if model.scopes.lookup(scope, name, position) == bindings:
            return text
    raise Refusal("no name for torch.no_grad in this module, to turn the inference_mode region into")


def _no_grad_names(model: SemanticModel) -> list[tuple[str, str, list[Binding]]]:
    """The module's names for `torch.no_grad` and for `torch`, with how each spells `no_grad()`;
    found once per file."""
    if model not in _NO_GRAD_NAMES:
        found = []
        for name, bindings in model.scopes.module.bindings.items():
            imported = bindings[0].imported if len(bindings) == 1 else None
            if imported in torch_names.NO_GRAD:
                found.append((name, f"{name}()", bindings))
            elif imported == "torch":
                found.append((name, f"{name}.no_grad()", bindings))
        _NO_GRAD_NAMES[model] = found
    return _NO_GRAD_NAMES[model]


_NO_GRAD_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
