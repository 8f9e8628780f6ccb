"""What `lint-nograd fix` may rewrite in a grad-disabled region, in which form, and how safely.

Decided on the `ast` alone: `check` imports this module (never libcst) to know which regions are
cut already, and `fix_edit` turns a plan into text. `fix_values` decides what each statement and
value of a region becomes, `fix_spelling` how the file names the cut. One rule picks the form
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

from lint_nograd import api, tensor_ops
from lint_nograd.fix_settings import SAFE, UNSAFE
from lint_nograd.fix_values import Action, Refusal, RegionAnalysis, nested_region_changes, source_of
from lint_nograd.model import GradModeChange, SemanticModel
from lint_nograd.scopes import Binding

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
    _check_owner(model, region)
    _check_nesting(model, region.owner.body)
    analysis = RegionAnalysis(model, region, detach)
    analysis.statements(region.owner.body)
    form = choose_form(analysis.calls)
    plan = RegionPlan(region, analysis.actions, form, applicability(analysis.calls), analysis.calls)
    if form == KEPT:
        for change in [region, *analysis.nested]:
            if change.api == "inference_mode":
                plan.no_grad_for[ast.dump(change.expr)] = _no_grad_text(model, change)
    return plan


def region_cuts_its_values(model: SemanticModel, region: GradModeChange) -> bool:
    """Whether a `no_grad` or `set_grad_enabled(False)` region gives out only values that are cut
    (or that it only reads), as the memory-preserving fix writes it. Forward mode and tracers then
    compute what reverse mode does, so NG004-NG006 do not report it. An `inference_mode` region
    never is: its tensors cannot be saved for backward, cut or not."""
    if region.api == "inference_mode" or not region.disables_grad or isinstance(region.owner, ast.Expr):
        return False
    try:
        return not plan_region(model, region).wraps
    except (Refusal, RecursionError):
        return False


# -- the owner of the region, and regions nested in it ----------------------------------------------

def _check_owner(model: SemanticModel, region: GradModeChange) -> None:
    owner = region.owner
    if isinstance(owner, ast.Expr):
        raise Refusal("set_grad_enabled(False) called as a statement: no block to rewrite")
    if isinstance(owner, ast.AsyncWith):
        raise Refusal("async with statement")
    if isinstance(owner, ast.With):
        item = next(item for item in owner.items if item.context_expr is region.expr)
        if item.optional_vars is not None:
            raise Refusal(f"the region is bound to a name: as {source_of(item.optional_vars)}")
        others = [item.context_expr for item in owner.items]
    else:
        if isinstance(owner, ast.AsyncFunctionDef):
            raise Refusal("async function: the decorator does not cover the body of a coroutine")
        if owner.decorator_list[-1] is not region.expr:
            raise Refusal("the decorator is not the innermost one: it also covers the decorators below it")
        others = owner.decorator_list
    for expr in others:
        change = model.change_at(expr)
        if change is not None and change is not region:
            raise Refusal(f"another grad-mode change ({change.describe()}) on the same statement")


def _check_nesting(model: SemanticModel, body: list[ast.stmt]) -> None:
    """Refuse any grad-mode change inside the region but nested grad-disabling `with` statements
    directly in its body. Walks statements only: grad-mode changes are `with` items, decorators
    and statements."""
    pending = [(body, True)]
    while pending:
        statements, directly_in_region = pending.pop()
        for statement in statements:
            kind = type(statement)
            if kind is ast.Expr:
                change = model.change_at(statement.value)
                if change is not None:
                    raise Refusal(f"grad-mode change {change.describe()} nested inside the region")
                continue
            exprs = ([item.context_expr for item in statement.items] if kind in (ast.With, ast.AsyncWith)
                     else getattr(statement, "decorator_list", []))
            changes = [change for change in map(model.change_at, exprs) if change is not None]
            transparent = directly_in_region and nested_region_changes(model, statement) is not None
            if changes and not transparent:
                raise Refusal(f"grad-mode change {changes[0].describe()} nested inside the region")
            for block in _blocks(statement):
                pending.append((block, transparent))


def _blocks(statement: ast.stmt) -> list[list[ast.stmt]]:
    blocks = [getattr(statement, name, None) for name in ("body", "orelse", "finalbody")]
    blocks += [handler.body for handler in getattr(statement, "handlers", ())]
    blocks += [case.body for case in getattr(statement, "cases", ())]
    return [block for block in blocks if isinstance(block, list)]


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
            if imported in api.NO_GRAD:
                found.append((name, f"{name}()", bindings))
            elif imported == "torch":
                found.append((name, f"{name}.no_grad()", bindings))
        _NO_GRAD_NAMES[model] = found
    return _NO_GRAD_NAMES[model]


_NO_GRAD_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
