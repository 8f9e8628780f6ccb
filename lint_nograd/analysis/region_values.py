"""What each statement and value of a grad-disabled region becomes when `lint-nograd fix` rewrites it.

A value is wrapped only when the region really computes it: under `no_grad`, `y = x` keeps `x`
and its gradient, while `y = x * 2` has no graph; `stop_gradient(x)` would cut `x`, so plain
reads stay as they are and values that might be either (`batch[0]`: a view of a tensor, or a
tensor from a list) make the fix refuse. Calls must not change tensors in place or grad mode.

The walk also notes the calls the region makes (`tensor_ops`): they decide the form of the
rewrite and whether it is safe (`fix.plan`). `check` asks the same walk whether a region gives out
only values that are cut already (`region_cuts_its_values`): such a region is no finding.
"""
from __future__ import annotations

import ast
from typing import Union

from lint_nograd.analysis import tensor_ops, torch_names
from lint_nograd.analysis.model import GradModeChange, SemanticModel
from lint_nograd.analysis.scopes import child_nodes, walk


class Refusal(Exception):
    """Why a region cannot be rewritten without changing what the code does."""


# Calls that change or read grad mode: the rewrite may run the region with grad mode on.
_GRAD_MODE_SETTERS = torch_names.SET_GRAD_ENABLED | frozenset({
    "torch._C._set_grad_enabled", "torch._C._set_fwd_grad_enabled", "torch.autograd.forward_ad.enter_dual_level"})
_GRAD_MODE_READERS = frozenset({
    "torch.is_grad_enabled", "torch._C.is_grad_enabled", "torch.autograd.grad_mode.is_grad_enabled",
    "torch.is_inference_mode_enabled", "torch._C.is_inference_mode_enabled", "torch._C._is_fwd_grad_enabled"})
_PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# Attributes that are autograd state: on a value the region computes, they read differently after the rewrite.
_AUTOGRAD_STATE = frozenset({"requires_grad", "grad_fn", "is_leaf", "_version"})
_AUTOGRAD_STATE_METHODS = frozenset({"is_inference"})
# Attributes that compute a view of a tensor (no graph under no_grad), and ones that hold no tensor at all.
_VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "imag"})
_PLAIN_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda", "names"})
# Calls that may hand back their argument itself: `x.float()` is `x` when it is float already,
# `x.flatten()` when it is 1-D (`tensor_ops.IDENTITY_NAMES`), `d.get(k)` an element of `d`.
_PASS_THROUGH_METHODS = tensor_ops.IDENTITY_NAMES | frozenset({
    "get", "pop", "setdefault", "popitem", "__getitem__"})
_PASS_THROUGH_FUNCTIONS = frozenset({"getattr", "next", "iter", "min", "max"})
_PASS_THROUGH_QUALIFIED = frozenset({"copy.copy"} | {f"{module}.{name}" for name in tensor_ops.IDENTITY_NAMES
                                                      for module in ("torch", "torch.Tensor", "torch.nn.functional")})

# How a value relates to gradients, in the region as written.
_CUT = "cut"  # has no graph either way: constants, strings, names bound to values already cut
_READ = "read"  # an existing object the region only reads: it keeps its gradient, leave it alone
_COMPUTED = "computed"  # computed by the region: no graph under no_grad, so wrap it
_MIXED = "mixed"  # a tuple or list of computed and read values: wrap the computed elements
_AMBIGUOUS = "ambiguous"  # cannot tell computed from read: refuse

_CONTROL_FLOW = {ast.If: "if", ast.For: "for", ast.AsyncFor: "async for", ast.While: "while", ast.Try: "try",
                 ast.With: "with", ast.AsyncWith: "async with", ast.Raise: "raise", ast.Break: "break",
                 ast.Continue: "continue"}
for _name, _word in (("TryStar", "try"), ("Match", "match")):
    if hasattr(ast, _name):
        _CONTROL_FLOW[getattr(ast, _name)] = _word

# What each statement of the region becomes, in source order; a nested region's statements follow it.
KEEP, PASS, NESTED = "keep", "pass", "nested"  # PASS: `pass` or a docstring, dropped where lifted
Action = Union[str, tuple]  # KEEP, PASS, NESTED, or ("wrap", "whole" | tuple of bools per element)


def is_cut(names: frozenset[str], func: ast.expr) -> bool:
    """Whether a call cuts its value: `stop_gradient(...)` (lint_nograd's, or any function of that
    name), or `.detach()`."""
    if isinstance(func, ast.Attribute) and func.attr == "detach":
        return True
    return bool(names & torch_names.SHIM_NAMES) or any(name.rpartition(".")[2] == torch_names.STOP_GRADIENT
                                                   for name in names)


def source_of(node: ast.AST, limit: int = 40) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def callee_of(func: ast.expr, limit: int = 40) -> str:
    """How a message names what a call calls: `self.encoder.norm`, `transform_to(...)` for
    `transform_to(c)(x)`; the arguments of inner calls and indexes are `...`, and a long name loses
    its first parts, so that no text is cut inside parentheses."""
    def text(node: ast.expr) -> str:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return f"{text(node.value)}.{node.attr}"
        if isinstance(node, ast.Call):
            return f"{text(node.func)}({chr(0) if node.args or node.keywords else ''})"
        if isinstance(node, ast.Subscript):
            return f"{text(node.value)}[\0]"
        return "(\0)"
    parts = text(func).split(".")  # inner arguments are `\0` until the end: no dots in them
    while len(parts) > 1 and len(".".join(parts)) > limit - 3:
        parts.pop(0)
    written = ".".join(parts).replace("\0", "...")
    return written if len(parts) == len(text(func).split(".")) else "..." + written


def nested_region_changes(model: SemanticModel, statement: ast.stmt) -> list[GradModeChange] | None:
    """The changes of a `with` nested in a region that only turns grad off further (every item a
    grad-disabling region, none bound to a name): it is rewritten with the region around it."""
    if type(statement) is not ast.With:
        return None
    changes = [model.change_at(item.context_expr) for item in statement.items]
    if all(change is not None and change.disables_grad for change in changes) \
            and all(item.optional_vars is None for item in statement.items):
        return changes
    return None


class RegionAnalysis:
    """Walks a region's body once, in order, deciding what each statement becomes."""

    def __init__(self, model: SemanticModel, region: GradModeChange, detach: bool):
        self.model = model
        self.detach = detach
        self.scope = model.scopes.of.get(region.function, model.scopes.module)
        self.bound: dict[str, str] = {}  # names the region binds: _CUT or _READ
        self.plain: set[str] = set()  # names the region binds to plain values (numbers, strings)
        self.actions: list[Action] = []
        self.nested: list[GradModeChange] = []
        self.calls: list[tuple[str, str]] = []  # (the call as written, its `tensor_ops` kind), in order

    def statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            changes = nested_region_changes(self.model, statement)
            if changes is not None:
                self.actions.append(NESTED)
                self.nested += changes
                self.statements(statement.body)
            else:
                self.actions.append(self.statement(statement))

    def statement(self, statement: ast.stmt) -> Action:
        if isinstance(statement, ast.Pass) or (isinstance(statement, ast.Expr)
                                               and isinstance(statement.value, ast.Constant)):
            return PASS
        if isinstance(statement, ast.Expr):
            self.check(statement.value)
            if isinstance(statement.value, ast.Call):
                raise Refusal(f"call used as a statement: {callee_of(statement.value.func)}(...)")
            return KEEP  # a bare expression binds nothing
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                self.check_target(target)
            return self.assignment(statement.targets, statement.value)
        if isinstance(statement, ast.AnnAssign):
            self.check_target(statement.target)
            if statement.value is None:
                return KEEP
            return self.assignment([statement.target], statement.value)
        if isinstance(statement, ast.Return):
            if statement.value is None:
                return KEEP
            self.check(statement.value)
            return self.wrapping(statement.value)[0]
        if isinstance(statement, ast.Assert):
            for expr in (statement.test, statement.msg):
                if expr is not None:
                    self.check(expr)
            return KEEP
        if isinstance(statement, ast.AugAssign):
            operator = source_of(ast.BinOp(ast.Name("a"), statement.op, ast.Name("b")))[2:-2]
            raise Refusal(f"augmented assignment {source_of(statement.target)} {operator}= ... "
                          "(in place on tensors)")
        if isinstance(statement, ast.Delete):
            raise Refusal(f"del statement ({source_of(statement)})")
        if isinstance(statement, (ast.Global, ast.Nonlocal)):
            word = "global" if isinstance(statement, ast.Global) else "nonlocal"
            raise Refusal(f"{word} statement ({word} {', '.join(statement.names)})")
        for kind, word in _CONTROL_FLOW.items():
            if isinstance(statement, kind):
                raise Refusal(f"control flow ({word}) inside the region")
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            raise Refusal(f"definition of {statement.name} inside the region")
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            raise Refusal("import inside the region")
        raise Refusal(f"{type(statement).__name__} statement inside the region")

    def check_target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Attribute):
            raise Refusal(f"store to attribute {source_of(target)}")
        if isinstance(target, ast.Subscript):
            raise Refusal(f"store to subscript {source_of(target)}")
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.check_target(element)
        elif isinstance(target, ast.Starred):
            self.check_target(target.value)

    def assignment(self, targets: list[ast.expr], value: ast.expr) -> Action:
        self.check(value)
        action, kind, elements = self.wrapping(value)
        for target in targets:
            self.bind(target, kind, elements, value)
        return action

    def wrapping(self, value: ast.expr) -> tuple[Action, str, list[str]]:
        """The action for a value, its kind, and the kinds of its elements (for tuples and lists)."""
        kind, elements = self.kind_with_elements(value)
        if kind == _AMBIGUOUS:
            raise Refusal(f"cannot tell if {source_of(value)} is a new value or an existing tensor "
                          "(which the region does not cut)")
        if kind == _COMPUTED and not (self.detach and isinstance(value, (ast.Tuple, ast.List))):
            if self.detach:
                self.check_single_tensor(value)
            return ("wrap", "whole"), kind, elements
        if kind in (_COMPUTED, _MIXED):  # `.detach()` goes on each element that needs it
            wrap = tuple(k == _COMPUTED for k in elements)
            if self.detach:
                for element, wrapped in zip(value.elts, wrap):
                    if wrapped:
                        self.check_single_tensor(element)
            return ("wrap", wrap), kind, elements
        return KEEP, kind, elements

    def bind(self, target: ast.expr, kind: str, elements: list[str], value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            # a wrapped value is cut; a tuple holding a read value is only as safe as a read
            self.bound[target.id] = _READ if kind in (_READ, _MIXED) else _CUT
            if value is not None and not self.maybe_tensor(value):
                self.plain.add(target.id)
            else:
                self.plain.discard(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = any(isinstance(element, ast.Starred) for element in target.elts)
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and not starred \
                and len(value.elts) == len(target.elts) else [None] * len(target.elts)
            if kind == _MIXED and not starred and len(elements) == len(target.elts):
                for element, element_kind, element_value in zip(target.elts, elements, values):
                    self.bind(element, _READ if element_kind == _READ else _CUT, [], element_value)
            else:
                for element, element_value in zip(target.elts, values):
                    self.bind(element, kind, [], element_value)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, kind, [], None)

    # expressions

    def check(self, expr: ast.expr) -> None:
        """Refuse what the rewrite would run differently: in-place calls, grad-mode calls, yields, ..."""
        for node in _in_order(expr):
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                raise Refusal("yield inside the region")
            if isinstance(node, ast.Await):
                raise Refusal("await inside the region")
            if isinstance(node, ast.NamedExpr):
                raise Refusal(f"assignment expression {node.target.id} := ... inside the region")
            if isinstance(node, ast.Attribute) and node.attr in _AUTOGRAD_STATE \
                    and isinstance(node.ctx, ast.Load) and self.kind(node.value) == _COMPUTED:
                raise Refusal(f"reads autograd state {source_of(node)} of a value the region computes")
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                self.calls.append((source_of(node), tensor_ops.KNOWN))
            if isinstance(node, ast.Call):
                self.check_call(node)

    def check_call(self, call: ast.Call) -> None:
        func = call.func
        callee = callee_of(func)
        names = self.model.qualified_names(func, self.scope)
        if names & _GRAD_MODE_SETTERS:
            raise Refusal(f"grad-mode change {callee}(...) inside the region")
        if names & _GRAD_MODE_READERS:
            raise Refusal(f"reads the grad mode: {callee}()")
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if last in _AUTOGRAD_STATE_METHODS:
            raise Refusal(f"reads autograd state {callee}()")
        if names & _PARAMETER or last == "Parameter":
            raise Refusal(f"creates a parameter {callee}(...)")
        if torch_names.in_place(last):
            raise Refusal(f"in-place call {callee}(...)")
        for keyword in call.keywords:
            if keyword.arg == "out":
                raise Refusal(f"out= argument in {callee}(...)")
            if keyword.arg == "requires_grad" and not (isinstance(keyword.value, ast.Constant)
                                                       and keyword.value.value is False):
                raise Refusal(f"creates a tensor that requires grad: {callee}(..., requires_grad=...)")
        self.calls.append((f"{callee}(...)", self.call_kind(call, names)))

    def call_kind(self, call: ast.Call, names: frozenset[str]) -> str:
        """LIGHT, KNOWN or UNKNOWN (`tensor_ops`): what running the call with grad mode on may cost."""
        func = call.func
        if is_cut(names, func):
            return tensor_ops.LIGHT
        if names:
            kinds = {tensor_ops.kind_of_function(name) for name in names}
            return next(k for k in (tensor_ops.UNKNOWN, tensor_ops.KNOWN, tensor_ops.LIGHT) if k in kinds)
        if isinstance(func, ast.Attribute):
            return tensor_ops.kind_of_method(func.attr)
        if isinstance(func, ast.Name) and func.id in tensor_ops.LIGHT_BUILTINS and self.is_builtin(func):
            return tensor_ops.LIGHT
        return tensor_ops.UNKNOWN

    def kind(self, expr: ast.expr) -> str:
        """The kind of a value used inside another one: a mixed tuple there cannot be split."""
        kind = self.kind_with_elements(expr)[0]
        return _AMBIGUOUS if kind == _MIXED else kind

    def kind_with_elements(self, expr: ast.expr) -> tuple[str, list[str]]:
        if isinstance(expr, (ast.Tuple, ast.List)):
            elements = []
            for element in expr.elts:
                if isinstance(element, ast.Starred):
                    inner = self.kind(element.value)
                    # `*stop_gradient(gen)` would not cut what a generator yields: only whole tuples
                    elements.append("starred-computed" if inner == _COMPUTED else inner)
                else:
                    elements.append(self.kind(element))
            kinds = set(elements)
            if "starred-computed" in kinds:
                if self.detach:
                    raise Refusal(f"`.detach()` needs a single tensor, and {source_of(expr)} unpacks values")
                kinds.discard("starred-computed")
                return (_AMBIGUOUS if _READ in kinds or _AMBIGUOUS in kinds else _COMPUTED), elements
            if _AMBIGUOUS in kinds:
                return _AMBIGUOUS, elements
            if _COMPUTED in kinds:
                return (_MIXED if _READ in kinds else _COMPUTED), elements
            return (_READ if _READ in kinds else _CUT), elements
        return self._kind(expr), []

    def _kind(self, expr: ast.expr) -> str:  # one case per kind of expression
        if isinstance(expr, (ast.Constant, ast.JoinedStr, ast.Compare)):
            return _CUT  # comparisons give booleans, which never carry a gradient
        if isinstance(expr, ast.Name):
            return self.bound.get(expr.id, _READ)
        if isinstance(expr, ast.Attribute):
            if expr.attr in _PLAIN_ATTRIBUTES:
                return _CUT
            base = self.kind(expr.value)
            if base in (_CUT, _AMBIGUOUS, _COMPUTED):
                return base
            if expr.attr in tensor_ops.IDENTITY_ATTRIBUTES:
                return _passed_through(base)
            return _COMPUTED if expr.attr in _VIEW_ATTRIBUTES else _READ
        if isinstance(expr, ast.Subscript):
            base = self.kind(expr.value)
            # `x[0]` is a view of a tensor (computed) or an element of a container (read)
            return _AMBIGUOUS if base == _READ else base
        if isinstance(expr, ast.Call):
            return self._call_kind(expr)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.UAdd) and self.maybe_tensor(expr):
            return _passed_through(self.kind(expr.operand))  # `+x` is `x` itself
        if isinstance(expr, (ast.UnaryOp, ast.BinOp)):  # arithmetic on plain numbers gives a plain number
            plain = isinstance(expr.op, ast.Not) or not self.maybe_tensor(expr)
            return _CUT if plain else _COMPUTED
        if isinstance(expr, ast.BoolOp):
            return _one_of([self.kind(value) for value in expr.values])
        if isinstance(expr, ast.IfExp):
            return _one_of([self.kind(expr.body), self.kind(expr.orelse)])
        if isinstance(expr, (ast.Dict, ast.Set)):
            values = expr.values if isinstance(expr, ast.Dict) else expr.elts
            return _one_of([self.kind(value.value if isinstance(value, ast.Starred) else value)
                            for value in values])
        if isinstance(expr, (ast.ListComp, ast.SetComp, ast.DictComp)):
            saved = dict(self.bound)
            for generator in expr.generators:
                for name in walk(generator.target):
                    if isinstance(name, ast.Name):
                        self.bound.pop(name.id, None)  # loop variables read elements: _READ
            kind = self.kind(expr.value if isinstance(expr, ast.DictComp) else expr.elt)
            self.bound = saved
            return _AMBIGUOUS if kind == _READ else kind
        if isinstance(expr, ast.GeneratorExp):
            # runs when consumed, after the region, in either version; only its first iterable runs here
            return _AMBIGUOUS if self.kind(expr.generators[0].iter) in (_COMPUTED, _AMBIGUOUS) else _READ
        if isinstance(expr, ast.Lambda):
            defaults = [*expr.args.defaults, *[d for d in expr.args.kw_defaults if d is not None]]
            return _AMBIGUOUS if any(self.kind(d) in (_COMPUTED, _AMBIGUOUS) for d in defaults) else _READ
        return _COMPUTED

    def _call_kind(self, call: ast.Call) -> str:
        func = call.func
        names = self.model.qualified_names(func, self.scope)
        if is_cut(names, func):
            return _CUT  # cut already, e.g. by the fix of a region nested in this one
        if isinstance(func, ast.Attribute):
            if func.attr in tensor_ops.PLAIN_METHODS:
                return _CUT
            if func.attr in _PASS_THROUGH_METHODS:
                return _passed_through(self.kind(func.value))
        if isinstance(func, ast.Name) and self.is_builtin(func):
            if func.id in tensor_ops.PLAIN_BUILTINS:
                return _CUT
            if func.id in _PASS_THROUGH_FUNCTIONS:  # `next(model.parameters())`: an existing tensor
                cut = call.args and all(self.kind(arg) == _CUT for arg in call.args)
                return _CUT if cut else _AMBIGUOUS
        if names & _PASS_THROUGH_QUALIFIED:
            return _passed_through(_one_of([self.kind(arg) for arg in call.args]) if call.args else _AMBIGUOUS)
        return _COMPUTED

    def is_builtin(self, name: ast.Name) -> bool:
        """Whether `name` is the builtin of that name (nothing in the file rebinds it)."""
        return not self.model.scopes.lookup(self.scope, name.id, (name.lineno, name.col_offset))

    # `.detach()` on each value: only where a value is one tensor

    def check_single_tensor(self, value: ast.expr) -> None:
        reason = self.not_single_tensor(value)
        if reason:
            raise Refusal(f"`.detach()` needs a single tensor, and {reason}")

    def not_single_tensor(self, value: ast.expr) -> str | None:
        """Why `value` may not be one tensor (None when it is one, as far as the file tells)."""
        if isinstance(value, ast.Call):
            func = value.func
            names = self.model.qualified_names(func, self.scope)
            last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            callee = f"{callee_of(func)}(...)"
            if self.call_kind(value, names) == tensor_ops.UNKNOWN:
                return f"{callee} may return a tuple or another object"
            if last in tensor_ops.TUPLE_ALWAYS or (last in tensor_ops.TUPLE_WITH_ARGUMENTS
                                                   and (value.args or value.keywords)):
                return f"{callee} returns a tuple"
            if isinstance(func, ast.Name) and last in tensor_ops.LIGHT_BUILTINS \
                    or any(name.startswith("math.") for name in names):
                return None if self.maybe_tensor(value) else f"{source_of(value)} may be a number"
            return None
        if isinstance(value, (ast.BinOp, ast.UnaryOp)):
            return None if self.maybe_tensor(value) else f"{source_of(value)} may be a number"
        if isinstance(value, ast.Attribute):  # a view: `x.T`
            return None
        if isinstance(value, ast.Subscript):
            return self.not_single_tensor(value.value) if isinstance(value.value, ast.Call) \
                else f"{source_of(value)} may not be a tensor"
        return f"{source_of(value)} may not be a single tensor"

    def maybe_tensor(self, expr: ast.expr) -> bool:
        """Whether `expr` may be a tensor; names the region did not bind are taken to be tensors."""
        if isinstance(expr, ast.Constant) or isinstance(expr, ast.JoinedStr):
            return False
        if isinstance(expr, ast.Name):
            return expr.id not in self.plain
        if isinstance(expr, ast.Attribute):
            return expr.attr not in _PLAIN_ATTRIBUTES
        if isinstance(expr, ast.BinOp):
            return self.maybe_tensor(expr.left) or self.maybe_tensor(expr.right)
        if isinstance(expr, ast.UnaryOp):
            return self.maybe_tensor(expr.operand)
        if isinstance(expr, ast.Subscript):  # `x.shape[0]`
            return self.maybe_tensor(expr.value)
        if isinstance(expr, ast.Call):
            func = expr.func
            names = self.model.qualified_names(func, self.scope)
            if any(name.startswith("math.") for name in names):
                return False
            if isinstance(func, ast.Attribute):
                return func.attr not in tensor_ops.PLAIN_METHODS
            if isinstance(func, ast.Name) and self.is_builtin(func):
                if func.id in tensor_ops.PLAIN_BUILTINS:
                    return False
                return any(self.maybe_tensor(arg) for arg in expr.args)
            return True
        return True


def _passed_through(kind: str) -> str:
    """The kind of a call that returns its argument when nothing needs converting."""
    return _AMBIGUOUS if kind == _READ else kind


def _one_of(kinds: list[str]) -> str:
    """The kind of an expression that evaluates to one of several values: `a or b`, `a if c else b`."""
    found = set(kinds)
    if _AMBIGUOUS in found or {_COMPUTED, _READ} <= found:
        return _AMBIGUOUS
    if _COMPUTED in found:
        return _COMPUTED
    return _READ if _READ in found else _CUT


def _in_order(node: ast.AST):
    """The nodes of a tree in source order (ast.walk goes breadth first)."""
    yield node
    for child in child_nodes(node):
        yield from _in_order(child)


def region_cuts_its_values(model: SemanticModel, region: GradModeChange) -> bool:
    """Whether a `no_grad` or `set_grad_enabled(False)` region gives out only values that are cut
    (or that it only reads), as the memory-preserving fix writes it. Forward mode and tracers then
    compute what reverse mode does, so NG004-NG006 do not report it. An `inference_mode` region
    never is: its tensors cannot be saved for backward, cut or not."""
    if region.api == "inference_mode" or not region.disables_grad or region.when or isinstance(region.owner, ast.Expr):
        return False
    try:
        check_owner(model, region)
        check_nesting(model, region.owner.body)
        analysis = RegionAnalysis(model, region, detach=False)
        analysis.statements(region.owner.body)
    except (Refusal, RecursionError):
        return False
    return not any(isinstance(action, tuple) for action in analysis.actions)


# -- the owner of the region, and regions nested in it ----------------------------------------------

def check_owner(model: SemanticModel, region: GradModeChange) -> None:
    owner = region.owner
    if region.when:
        raise Refusal(f"a region only when {region.when}: a cut would hold always")
    if isinstance(owner, ast.Expr):
        raise Refusal("entered on an ExitStack: no block to rewrite" if region.on_stack
                      else "set_grad_enabled(False) called as a statement: no block to rewrite")
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


def check_nesting(model: SemanticModel, body: list[ast.stmt]) -> None:
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
