"""The semantic model of one file: grad-disabled regions, transform applications, backward calls.

Built once per file in one walk over the `ast`, after `Scopes` has resolved names; every rule
queries it. Lexical context is kept on stacks: each function body is a `Frame` of its own (a
function defined inside a region runs later, outside it), and grad-mode changes nest inside it.
"""
from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field
from typing import Optional

from lint_nograd import api
from lint_nograd.scopes import FUNCTION_NODES, Scope, Scopes

_UNKNOWN = None  # a grad mode we cannot know statically: `set_grad_enabled(flag)`, a function's caller


@dataclass(eq=False)
class GradModeChange:
    """`torch.no_grad()`, `enable_grad()`, `set_grad_enabled(x)` or `inference_mode(x)`, as a `with` item
    or a decorator. `enabled` is the literal argument: None when it is not a literal."""

    api: str  # "no_grad", "enable_grad", "set_grad_enabled" or "inference_mode"
    enabled: Optional[bool]
    expr: ast.expr  # the with item's context expression, or the decorator
    owner: ast.AST  # the `with` statement, or the decorated function
    function: Optional[ast.AST]  # the function whose body it covers (None at module level)

    @property
    def disables_grad(self) -> bool:
        return (self.api == "no_grad"
                or (self.api == "set_grad_enabled" and self.enabled is False)
                or (self.api == "inference_mode" and self.enabled is True))

    @property
    def is_decorator(self) -> bool:
        return self.owner is self.function and not isinstance(self.owner, (ast.With, ast.AsyncWith))

    def describe(self) -> str:
        if self.api == "set_grad_enabled":
            return "set_grad_enabled(False)"
        return self.api


@dataclass(frozen=True)
class GradState:
    """Grad mode and inference mode at one point: True, False or None (unknown)."""

    grad_enabled: Optional[bool]
    inference: Optional[bool]
    grad_region: Optional[GradModeChange] = None  # the innermost region that turned grad off
    inference_region: Optional[GradModeChange] = None

    def after(self, change: GradModeChange) -> "GradState":
        if change.api == "inference_mode":
            # inference_mode(True) turns grad off, inference_mode(False) turns it back on
            grad = _UNKNOWN if change.enabled is None else not change.enabled
            region = change if change.enabled else None
            return GradState(grad, change.enabled, region, region)
        grad = False if change.api == "no_grad" else True if change.api == "enable_grad" else change.enabled
        return GradState(grad, self.inference, change if grad is False else None, self.inference_region)

    @property
    def graph_recorded(self) -> Optional[bool]:
        """False when values computed here certainly get no autograd graph."""
        if self.inference or self.grad_enabled is False:
            return False
        return None if self.grad_enabled is None or self.inference is None else True


MODULE_STATE = GradState(True, False)  # module code runs in the default mode
CALLER_STATE = GradState(_UNKNOWN, _UNKNOWN)  # a function body runs in its caller's mode


@dataclass(eq=False)
class TransformApplication:
    """A transform that differentiates at this point: `grad(f)(x)`, `vjp(f, x)`, `df(x)` with `df = grad(f)`."""

    transform: str  # "grad", "jacrev", ... as in torch.func
    transform_call: ast.Call  # `grad(f)`
    applied_at: ast.Call  # the call that runs it: `grad(f)(x)`, or `vjp(f, x)` itself
    state: GradState
    alias: Optional[str] = None  # `df` when it runs as `df(x)` after `df = grad(f)`

    @property
    def reported_node(self) -> ast.Call:
        return self.applied_at if self.alias else self.transform_call


@dataclass(eq=False)
class GraphlessBackward:
    """`y.backward()` or `torch.autograd.grad(y, ...)` where `y` was computed in a grad-disabled region."""

    call: ast.Call
    name: str
    assigned_at: ast.stmt
    region: GradModeChange


@dataclass(eq=False)
class _GraphlessValue:
    assigned_at: ast.stmt
    region: GradModeChange
    blocks: tuple[int, ...]  # the branches the assignment sits in


@dataclass(eq=False)
class Frame:
    """The lexical context of one function body (or the module, or a class body)."""

    function: Optional[ast.AST]
    state: GradState
    states: list[GradState] = field(default_factory=list)  # the stack of states, innermost last
    blocks: list[int] = field(default_factory=list)  # the branches of `if`/`for`/`try` we are inside
    graphless: dict[str, _GraphlessValue] = field(default_factory=dict)

    def push(self, change: GradModeChange) -> None:
        self.states.append(self.state)
        self.state = self.state.after(change)

    def pop(self) -> None:
        self.state = self.states.pop()


# Calls whose result is an existing object, not one computed by an operation.
_NOT_OPERATIONS = frozenset({"getattr", "next", "iter", "get", "pop", "setdefault", "popitem"})


class SemanticModel(ast.NodeVisitor):
    def __init__(self, module: ast.Module):
        self.module = module
        self.scopes = Scopes(module)
        self.grad_mode_changes: list[GradModeChange] = []
        self.applications: list[TransformApplication] = []
        self.graphless_backwards: list[GraphlessBackward] = []
        self.calls: list[tuple[ast.Call, Scope]] = []  # every call, with the scope it is made in
        self._scope: Scope = self.scopes.module
        self._frame = Frame(None, MODULE_STATE)
        self._branch_ids = itertools.count()
        for statement in module.body:
            self.visit(statement)

    @property
    def regions(self) -> list[GradModeChange]:
        return [change for change in self.grad_mode_changes if change.disables_grad]

    # -- what an expression refers to ---------------------------------------------------------

    def qualified_names(self, expr: ast.expr, scope: Scope | None = None) -> frozenset[str]:
        return self.scopes.qualified_names(expr, scope or self._scope)

    def grad_mode_change(self, expr: ast.expr, owner: ast.AST, function) -> GradModeChange | None:
        """Classify a `with` item or decorator: `torch.no_grad()`, `@torch.inference_mode`, ..."""
        call = expr if isinstance(expr, ast.Call) else None
        names = self.qualified_names(call.func if call else expr)
        if not names:
            return None
        for api_name, spellings in (("no_grad", api.NO_GRAD), ("enable_grad", api.ENABLE_GRAD),
                                    ("set_grad_enabled", api.SET_GRAD_ENABLED),
                                    ("inference_mode", api.INFERENCE_MODE)):
            if names & spellings:
                break
        else:
            return None
        if isinstance(owner, (ast.With, ast.AsyncWith)) and call is None:
            return None  # `with torch.no_grad:` is not a context manager at all
        enabled = {"no_grad": False, "enable_grad": True}.get(api_name)
        if api_name in ("set_grad_enabled", "inference_mode"):
            enabled = _literal_mode(call, keyword="mode", default=api_name == "inference_mode")
        return GradModeChange(api_name, enabled, expr, owner, function)

    def transform_of(self, call: ast.Call) -> str | None:
        return api.transform_name(self.qualified_names(call.func))

    # -- scopes and frames --------------------------------------------------------------------

    def _in_scope(self, node: ast.AST, visit_inside) -> None:
        outer, self._scope = self._scope, self.scopes.of[node]
        visit_inside()
        self._scope = outer

    def _in_frame(self, frame: Frame, visit_inside) -> None:
        outer, self._frame = self._frame, frame
        visit_inside()
        self._frame = outer

    def _visit_all(self, nodes) -> None:
        for node in nodes:
            if node is not None:
                self.visit(node)

    def _branch(self, statements: list[ast.stmt]) -> None:
        self._frame.blocks.append(next(self._branch_ids))
        self._visit_all(statements)
        self._frame.blocks.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._visit_all(node.decorator_list)
        self._visit_all([*node.args.defaults, *node.args.kw_defaults])
        frame = Frame(node, CALLER_STATE)
        for decorator in reversed(node.decorator_list):  # the innermost decorator applies first
            change = self.grad_mode_change(decorator, node, node)
            if change:
                self.grad_mode_changes.append(change)
                frame.state = frame.state.after(change)
        self._in_scope(node, lambda: self._in_frame(frame, lambda: self._visit_all(node.body)))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_all([*node.args.defaults, *node.args.kw_defaults])
        frame = Frame(node, CALLER_STATE)
        self._in_scope(node, lambda: self._in_frame(frame, lambda: self.visit(node.body)))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_all([*node.decorator_list, *node.bases, *node.keywords])
        frame = Frame(None, self._frame.state)  # a class body runs where it stands
        self._in_scope(node, lambda: self._in_frame(frame, lambda: self._visit_all(node.body)))

    def _visit_comprehension(self, node) -> None:
        self.visit(node.generators[0].iter)
        rest = [node.generators[0].target, *node.generators[0].ifs]
        for generator in node.generators[1:]:
            rest += [generator.target, generator.iter, *generator.ifs]
        rest += [getattr(node, name, None) for name in ("elt", "key", "value")]
        if isinstance(node, ast.GeneratorExp):  # runs when consumed, maybe outside the region
            frame = Frame(self._frame.function, CALLER_STATE)
            self._in_scope(node, lambda: self._in_frame(frame, lambda: self._visit_all(rest)))
        else:
            self._in_scope(node, lambda: self._visit_all(rest))

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension

    # -- regions --------------------------------------------------------------------------------

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        pushed = 0
        for item in node.items:
            self.visit(item.context_expr)
            change = self.grad_mode_change(item.context_expr, node, self._frame.function)
            if change:
                self.grad_mode_changes.append(change)
                self._frame.push(change)
                pushed += 1
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
        self._visit_all(node.body)
        for _ in range(pushed):
            self._frame.pop()

    visit_AsyncWith = visit_With

    # -- branches (for "straight-line flow" in NG003) ------------------------------------------

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        self._branch(node.body)
        self._branch(node.orelse)

    visit_While = visit_If

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._visit_all([node.iter, node.target])
        self._branch(node.body)
        self._branch(node.orelse)

    visit_AsyncFor = visit_For

    def visit_Try(self, node) -> None:
        self._branch(node.body)
        for handler in node.handlers:
            self._visit_all([handler.type])
            self._branch(handler.body)
        self._branch(node.orelse)
        self._branch(node.finalbody)

    visit_TryStar = visit_Try

    def visit_Match(self, node) -> None:
        self.visit(node.subject)
        for case in node.cases:
            self._visit_all([case.pattern, case.guard])
            self._branch(case.body)

    # -- values without a graph (NG003) ---------------------------------------------------------

    def _assign(self, statement: ast.stmt, targets: list[ast.expr], value: ast.expr | None) -> None:
        state = self._frame.state
        region = state.inference_region if state.inference else state.grad_region
        computed_here = state.graph_recorded is False and region is not None and _is_operation(value)
        for target in targets:
            for name in _assigned_names(target):
                if computed_here:
                    self._frame.graphless[name] = _GraphlessValue(statement, region, tuple(self._frame.blocks))
                else:
                    self._frame.graphless.pop(name, None)
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                self.visit(target)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        self._assign(node, node.targets, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._visit_all([node.value])
        self._assign(node, [node.target], node.value)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):  # any other binding: when in doubt, forget
            self._frame.graphless.pop(node.id, None)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name):
            self._frame.graphless.pop(node.value.id, None)  # `y.requires_grad = True`
        self.visit(node.value)

    def _graphless_root(self, expr: ast.expr) -> str | None:
        """`y` when `expr` is computed from `y` alone and `y` certainly has no graph here."""
        while True:
            if isinstance(expr, ast.Name):
                value = self._frame.graphless.get(expr.id)
                blocks = tuple(self._frame.blocks)
                if value and blocks[:len(value.blocks)] == value.blocks:
                    return expr.id
                return None
            if isinstance(expr, ast.Subscript):
                expr = expr.value
            elif (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
                  and all(isinstance(arg, ast.Constant) for arg in expr.args) and not expr.keywords):
                expr = expr.func.value  # `y.sum()`, `y.mean(0)`
            else:
                return None

    def _check_backward(self, call: ast.Call) -> None:
        func = call.func
        names = self.qualified_names(func)
        if names & (api.AUTOGRAD_GRAD | api.AUTOGRAD_BACKWARD):
            keyword = "outputs" if names & api.AUTOGRAD_GRAD else "tensors"
            first = call.args[0] if call.args else next(
                (k.value for k in call.keywords if k.arg == keyword), None)
            outputs = list(first.elts) if isinstance(first, (ast.Tuple, ast.List)) else [first]
        elif isinstance(func, ast.Attribute) and func.attr == "backward":
            outputs = [func.value]
        else:
            return
        for output in outputs:
            name = output is not None and self._graphless_root(output)
            if name:
                value = self._frame.graphless[name]
                self.graphless_backwards.append(GraphlessBackward(call, name, value.assigned_at, value.region))
                return

    # -- transforms (NG001, NG002) --------------------------------------------------------------

    def _applied_transform(self, callee: ast.expr, at: ast.Call) -> TransformApplication | None:
        """The transform that `callee(...)` runs: `grad(f)` for `grad(f)(x)`, `vmap(grad(f))(x)`
        or `df(x)` after `df = grad(f)`."""
        scope, alias = self._scope, None
        for _ in range(8):
            if isinstance(callee, ast.Name):
                binding = self.scopes.only_binding(callee, scope)
                if binding is None or binding.value is None:
                    return None
                alias = alias or callee.id
                callee, scope = binding.value, binding.scope
            elif isinstance(callee, ast.Call):
                names = self.qualified_names(callee.func, scope)
                transform = api.transform_name(names)
                if transform in api.IMMEDIATE_TRANSFORMS:
                    return None
                if transform:
                    return TransformApplication(transform, callee, at, self._frame.state, alias)
                if not (names & api.VMAP and callee.args):
                    return None
                callee = callee.args[0]  # vmap itself does not differentiate: look inside it
            else:
                return None
        return None

    def visit_Call(self, node: ast.Call) -> None:
        self.calls.append((node, self._scope))
        transform = self.transform_of(node)
        if transform in api.IMMEDIATE_TRANSFORMS:
            self.applications.append(TransformApplication(transform, node, node, self._frame.state))
        applied = self._applied_transform(node.func, node)
        if applied is not None:
            self.applications.append(applied)
        self._check_backward(node)
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr.endswith("_") and not func.attr.startswith("_")
                and isinstance(func.value, ast.Name) and self._frame.state.graph_recorded is not False):
            self._frame.graphless.pop(func.value.id, None)  # `y.requires_grad_()`, `y.mul_(w)`
        self.generic_visit(node)


def _literal_mode(call: ast.Call | None, keyword: str, default: bool) -> Optional[bool]:
    """The literal True/False a mode is set to; None when it is not a literal."""
    if call is None:
        return default  # bare decorator: `@torch.inference_mode`
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == keyword), None)
    if arg is None:
        return default
    if isinstance(arg, ast.Constant) and isinstance(arg.value, bool):
        return arg.value
    return _UNKNOWN


def _is_operation(value: ast.expr | None) -> bool:
    """Whether `value` computes something (and so has no graph under no_grad), not just reads it."""
    if isinstance(value, (ast.BinOp, ast.UnaryOp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return name not in _NOT_OPERATIONS
    return False


def _assigned_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _assigned_names(element)]
    if isinstance(target, ast.Starred):
        return _assigned_names(target.value)
    return []
