"""`lint-nograd fix`: rewrite a grad-disabled region into `stop_gradient(...)` on the values it computes.

    with torch.no_grad():                 ->    shift = stop_gradient(x.mean())
        shift = x.mean()

The rewrite is planned on the `ast` (which statements, which values, or why not) and the text is
produced by libcst from the region's own lines, so formatting and comments stay as they were.
Everything here is pure: text in, text and `Fix` objects out. libcst is only imported by this
module and `codemod`, never by the check path.

A value is wrapped only when the region really computes it: under `no_grad`, `y = x` keeps `x`
and its gradient, while `y = x * 2` has no graph; `stop_gradient(x)` would cut `x`, so plain
reads stay as they are and values that might be either (`batch[0]`: a view of a tensor, or a
tensor from a list) make the fix refuse. Calls are taken to compute new values from their
arguments, without reading or changing grad mode and without changing tensors in place.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Union

import libcst as cst

from lint_nograd import api, suppression
from lint_nograd.diagnostics import Diagnostic, Edit, Fix
from lint_nograd.engine import ParsedFile, ParseError, check_source, decode, parse, region_findings_of
from lint_nograd.model import GradModeChange, SemanticModel
from lint_nograd.notebook import Notebook, NotebookError

__all__ = ["FIXABLE_CODES", "FixResult", "apply_edits", "fix_source", "fix_text", "plan_fixes", "region_of"]

FIXABLE_CODES = frozenset({"NG004", "NG005", "NG006"})
MAX_PASSES = 10  # fixing a region can make the region around it fixable: re-plan, at most this often
# libcst nests `a and b and ...` one level per operand; some thousands deep, its native parser
# overflows the stack, which kills the process instead of raising
_MAX_BOOL_OPERANDS = 1000

_NAME = "stop_gradient"
_SHIM_NAMES = frozenset({"lint_nograd.stop_gradient", "lint_nograd.shim.stop_gradient"})
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as the engine splits lines
_AFTER_STATEMENT = re.compile(r"\s*;?\s*(#.*)?")

# Calls that change or read grad mode: the rewrite runs the region with grad mode on.
_GRAD_MODE_SETTERS = api.SET_GRAD_ENABLED | frozenset({
    "torch._C._set_grad_enabled", "torch._C._set_fwd_grad_enabled", "torch.autograd.forward_ad.enter_dual_level"})
_GRAD_MODE_READERS = frozenset({
    "torch.is_grad_enabled", "torch._C.is_grad_enabled", "torch.autograd.grad_mode.is_grad_enabled",
    "torch.is_inference_mode_enabled", "torch._C.is_inference_mode_enabled", "torch._C._is_fwd_grad_enabled"})
_PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# Attributes that are autograd state: on a value the region computes, they read differently after the rewrite.
_AUTOGRAD_STATE = frozenset({"requires_grad", "grad_fn", "is_leaf", "_version"})
_AUTOGRAD_STATE_METHODS = frozenset({"is_inference"})
# Attributes that compute a view of a tensor (no graph under no_grad), and ones that hold no tensor at all.
_VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "real", "imag"})
_PLAIN_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda", "names"})
# Calls that may hand back their argument itself: `x.float()` is `x` when it is float already.
_PASS_THROUGH_METHODS = frozenset({
    "to", "cuda", "cpu", "float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte",
    "char", "type", "type_as", "contiguous", "get", "pop", "setdefault", "popitem", "__getitem__",
})
_PASS_THROUGH_FUNCTIONS = frozenset({"getattr", "next", "iter"})
_PASS_THROUGH_QUALIFIED = frozenset({"torch.as_tensor", "torch.asarray", "copy.copy"})
# Calls whose result is never a tensor: wrapping it would only add noise.
_PLAIN_METHODS = frozenset({"size", "dim", "numel", "item", "tolist", "stride", "element_size", "nelement",
                            "is_floating_point", "is_complex", "data_ptr", "storage_offset", "ndimension"})
_PLAIN_FUNCTIONS = frozenset({"len", "int", "float", "bool", "str", "repr", "isinstance", "hasattr", "range",
                              "id", "type", "callable", "format"})
_IN_PLACE = re.compile(r"[A-Za-z0-9]\w*_")  # `add_`, `relu_`; not `_private` or `__dunder__`

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


# -- the plan: which statements change, or why the region stays ---------------------------------

class _Refusal(Exception):
    """Why a region cannot be rewritten without changing what the code does."""


def _source(node: ast.AST, limit: int = 40) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit - 3] + "..."


_KEEP, _DROP = "keep", "drop"
_Action = Union[str, tuple]  # _KEEP, _DROP, or ("wrap", "whole" | tuple of bools per element)


@dataclass
class _Plan:
    actions: list[_Action]  # one per statement of the region's body, in source order

    @property
    def wraps(self) -> bool:
        """Whether anything gets `stop_gradient`: if not, the region only goes away."""
        return any(isinstance(action, tuple) for action in self.actions)


class _RegionAnalysis:
    """Walks a region's body once, in order, deciding what each statement becomes."""

    def __init__(self, model: SemanticModel, region: GradModeChange):
        self.model = model
        self.scope = model.scopes.of.get(region.function, model.scopes.module)
        self.bound: dict[str, str] = {}  # names the region binds: _CUT or _READ

    # statements

    def plan(self, body: list[ast.stmt], removable: bool) -> _Plan:
        return _Plan([self.statement(statement, removable) for statement in body])

    def statement(self, statement: ast.stmt, removable: bool) -> _Action:
        if isinstance(statement, ast.Pass) or (isinstance(statement, ast.Expr)
                                               and isinstance(statement.value, ast.Constant)):
            return _DROP if removable else _KEEP
        if isinstance(statement, ast.Expr):
            self.check(statement.value)
            if isinstance(statement.value, ast.Call):
                raise _Refusal(f"call used as a statement: {_source(statement.value.func)}(...)")
            return _KEEP  # a bare expression binds nothing
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                self.check_target(target)
            return self.assignment(statement.targets, statement.value)
        if isinstance(statement, ast.AnnAssign):
            self.check_target(statement.target)
            if statement.value is None:
                return _KEEP
            return self.assignment([statement.target], statement.value)
        if isinstance(statement, ast.Return):
            if statement.value is None:
                return _KEEP
            self.check(statement.value)
            return self.wrapping(statement.value)[0]
        if isinstance(statement, ast.Assert):
            for expr in (statement.test, statement.msg):
                if expr is not None:
                    self.check(expr)
            return _KEEP
        if isinstance(statement, ast.AugAssign):
            operator = _source(ast.BinOp(ast.Name("a"), statement.op, ast.Name("b")))[2:-2]
            raise _Refusal(f"augmented assignment {_source(statement.target)} {operator}= ... "
                           "(in place on tensors)")
        if isinstance(statement, ast.Delete):
            raise _Refusal(f"del statement ({_source(statement)})")
        if isinstance(statement, (ast.Global, ast.Nonlocal)):
            word = "global" if isinstance(statement, ast.Global) else "nonlocal"
            raise _Refusal(f"{word} statement ({word} {', '.join(statement.names)})")
        for kind, word in _CONTROL_FLOW.items():
            if isinstance(statement, kind):
                raise _Refusal(f"control flow ({word}) inside the region")
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            raise _Refusal(f"definition of {statement.name} inside the region")
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            raise _Refusal("import inside the region")
        raise _Refusal(f"{type(statement).__name__} statement inside the region")

    def check_target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Attribute):
            raise _Refusal(f"store to attribute {_source(target)}")
        if isinstance(target, ast.Subscript):
            raise _Refusal(f"store to subscript {_source(target)}")
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.check_target(element)
        elif isinstance(target, ast.Starred):
            self.check_target(target.value)

    def assignment(self, targets: list[ast.expr], value: ast.expr) -> _Action:
        self.check(value)
        action, kind, elements = self.wrapping(value)
        for target in targets:
            self.bind(target, kind, elements)
        return action

    def wrapping(self, value: ast.expr) -> tuple[_Action, str, list[str]]:
        """The action for a value, its kind, and the kinds of its elements (for tuples and lists)."""
        kind, elements = self.kind_with_elements(value)
        if kind == _AMBIGUOUS:
            raise _Refusal(f"cannot tell if {_source(value)} is a new value or an existing tensor "
                           "(which the region does not cut)")
        if kind == _COMPUTED:
            return ("wrap", "whole"), kind, elements
        if kind == _MIXED:
            return ("wrap", tuple(k == _COMPUTED for k in elements)), kind, elements
        return _KEEP, kind, elements

    def bind(self, target: ast.expr, kind: str, elements: list[str]) -> None:
        if isinstance(target, ast.Name):
            # a wrapped value is cut; a tuple holding a read value is only as safe as a read
            self.bound[target.id] = _READ if kind in (_READ, _MIXED) else _CUT
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = any(isinstance(element, ast.Starred) for element in target.elts)
            if kind == _MIXED and not starred and len(elements) == len(target.elts):
                for element, element_kind in zip(target.elts, elements):
                    self.bind(element, _READ if element_kind == _READ else _CUT, [])
            else:
                for element in target.elts:
                    self.bind(element, kind, [])
        elif isinstance(target, ast.Starred):
            self.bind(target.value, kind, [])

    # expressions

    def check(self, expr: ast.expr) -> None:
        """Refuse what the rewrite would run differently: in-place calls, grad-mode calls, yields, ..."""
        for node in _in_order(expr):
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                raise _Refusal("yield inside the region")
            if isinstance(node, ast.Await):
                raise _Refusal("await inside the region")
            if isinstance(node, ast.NamedExpr):
                raise _Refusal(f"assignment expression {node.target.id} := ... inside the region")
            if isinstance(node, ast.Attribute) and node.attr in _AUTOGRAD_STATE \
                    and isinstance(node.ctx, ast.Load) and self.kind(node.value) == _COMPUTED:
                raise _Refusal(f"reads autograd state {_source(node)} of a value the region computes")
            if isinstance(node, ast.Call):
                self.check_call(node)

    def check_call(self, call: ast.Call) -> None:
        func = call.func
        callee = _source(func)
        names = self.model.qualified_names(func, self.scope)
        if names & _GRAD_MODE_SETTERS:
            raise _Refusal(f"grad-mode change {callee}(...) inside the region")
        if names & _GRAD_MODE_READERS:
            raise _Refusal(f"reads the grad mode: {callee}()")
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if last in _AUTOGRAD_STATE_METHODS:
            raise _Refusal(f"reads autograd state {callee}()")
        if names & _PARAMETER or last == "Parameter":
            raise _Refusal(f"creates a parameter {callee}(...)")
        if _IN_PLACE.fullmatch(last):
            raise _Refusal(f"in-place call {callee}(...)")
        for keyword in call.keywords:
            if keyword.arg == "out":
                raise _Refusal(f"out= argument in {callee}(...)")
            if keyword.arg == "requires_grad" and not (isinstance(keyword.value, ast.Constant)
                                                        and keyword.value.value is False):
                raise _Refusal(f"creates a tensor that requires grad: {callee}(..., requires_grad=...)")

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
            return _COMPUTED if expr.attr in _VIEW_ATTRIBUTES else _READ
        if isinstance(expr, ast.Subscript):
            base = self.kind(expr.value)
            # `x[0]` is a view of a tensor (computed) or an element of a container (read)
            return _AMBIGUOUS if base == _READ else base
        if isinstance(expr, ast.Call):
            return self._call_kind(expr)
        if isinstance(expr, ast.UnaryOp):
            return _CUT if isinstance(expr.op, ast.Not) else _COMPUTED
        if isinstance(expr, ast.BinOp):
            return _COMPUTED
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
                for name in ast.walk(generator.target):
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
        if names & _SHIM_NAMES:
            return _CUT  # cut already, e.g. by the fix of a region nested in this one
        if isinstance(func, ast.Attribute):
            if func.attr == "detach":
                return _CUT
            if func.attr in _PLAIN_METHODS:
                return _CUT
            if func.attr in _PASS_THROUGH_METHODS:
                return _passed_through(self.kind(func.value))
        if isinstance(func, ast.Name) and self.scopes_builtin(func):
            if func.id in _PLAIN_FUNCTIONS:
                return _CUT
            if func.id in _PASS_THROUGH_FUNCTIONS:  # `next(model.parameters())`: an existing tensor
                return _CUT if call.args and self.kind(call.args[0]) == _CUT else _AMBIGUOUS
        if names & _PASS_THROUGH_QUALIFIED:
            return _passed_through(self.kind(call.args[0]) if call.args else _AMBIGUOUS)
        return _COMPUTED

    def scopes_builtin(self, name: ast.Name) -> bool:
        """Whether `name` is the builtin of that name (nothing in the file rebinds it)."""
        return not self.model.scopes.lookup(self.scope, name.id, (name.lineno, name.col_offset))


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
    for child in ast.iter_child_nodes(node):
        yield from _in_order(child)


def _check_owner(model: SemanticModel, region: GradModeChange) -> None:
    owner = region.owner
    if isinstance(owner, ast.Expr):
        raise _Refusal("set_grad_enabled(False) called as a statement: no block to rewrite")
    if isinstance(owner, ast.AsyncWith):
        raise _Refusal("async with statement")
    if isinstance(owner, ast.With):
        item = next(item for item in owner.items if item.context_expr is region.expr)
        if item.optional_vars is not None:
            raise _Refusal(f"the region is bound to a name: as {_source(item.optional_vars)}")
    else:
        if isinstance(owner, ast.AsyncFunctionDef):
            raise _Refusal("async function: the decorator does not cover the body of a coroutine")
        if owner.decorator_list[-1] is not region.expr:
            raise _Refusal("the decorator is not the innermost one: it also covers the decorators below it")
    inside = {id(node) for statement in owner.body for node in ast.walk(statement)}
    for change in model.grad_mode_changes:
        if change is region:
            continue
        if change.owner is owner:
            raise _Refusal(f"another grad-mode change ({change.describe()}) on the same statement")
        if id(change.expr) in inside:
            raise _Refusal(f"grad-mode change {change.describe()} nested inside the region")


def _plan_region(model: SemanticModel, region: GradModeChange) -> _Plan:
    _check_owner(model, region)
    lifts_body = not region.is_decorator and len(region.owner.items) == 1
    return _RegionAnalysis(model, region).plan(region.owner.body, removable=lifts_body)


# -- the spelling of stop_gradient, and the import -----------------------------------------------

@dataclass(frozen=True)
class _Spelling:
    text: str  # `stop_gradient`, `sg`, `lint_nograd.stop_gradient`
    root: str  # the name it needs in scope: `stop_gradient`, `sg`, `lint_nograd`
    import_edit: Edit | None  # None when the module imports it already
    binding: object | None = None  # the existing import's binding


def _spelling(parsed: ParsedFile, model: SemanticModel, newline: str) -> _Spelling | str:
    """How the file can name `stop_gradient`: an import it has (under any alias), or one to add."""
    module = model.scopes.module
    top_level = {id(statement) for statement in parsed.tree.body}  # not under `if TYPE_CHECKING:`
    for imported, spell in ((_SHIM_NAMES, lambda name: name),
                            (frozenset({"lint_nograd"}), lambda name: f"{name}.{_NAME}")):
        for name, bindings in module.bindings.items():
            if len(bindings) == 1 and bindings[0].imported in imported and id(bindings[0].node) in top_level:
                return _Spelling(spell(name), name, None, bindings[0])
    if _NAME not in module.bindings:
        return _Spelling(_NAME, _NAME, _import_edit(parsed, f"from lint_nograd import {_NAME}", newline))
    if "lint_nograd" not in module.bindings:
        return _Spelling(f"lint_nograd.{_NAME}", "lint_nograd",
                         _import_edit(parsed, "import lint_nograd", newline))
    return f"no fix: the names {_NAME} and lint_nograd are both taken in this module"


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None)
    return min([statement.lineno] + [d.lineno for d in decorators or []])


def _import_edit(parsed: ParsedFile, line: str, newline: str) -> Edit:
    """Insert `line` after the docstring, `__future__` imports and the imports at the top of the file."""
    body = parsed.tree.body
    index = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        index = 1
    while index < len(body) and isinstance(body[index], (ast.Import, ast.ImportFrom)):
        index += 1
    if index == 0:
        row = _first_line(body[0]) if body else len(parsed.lines)
        return Edit(line + newline, row, 1, row, 1)
    row = body[index - 1].end_lineno
    if row < len(parsed.lines):
        return Edit(line + newline, row + 1, 1, row + 1, 1)
    end_col = len(parsed.lines[row - 1]) + 1  # the last line, without a line break
    return Edit(newline + line, row, end_col, row, end_col)


def _shadowed(model: SemanticModel, region: GradModeChange, spelling: _Spelling) -> bool:
    """Whether, where the region is, `spelling.root` means something else than the module's import."""
    scope = model.scopes.of.get(region.function, model.scopes.module)
    found = model.scopes.lookup(scope, spelling.root, (region.owner.lineno, region.owner.col_offset))
    if spelling.binding is None:
        return bool(found)
    return found != [spelling.binding]


# -- producing the text with libcst --------------------------------------------------------------

def _newline(text: str) -> str:
    match = _LINE_BREAK.search(text)
    return match.group() if match else "\n"


def _line_starts(text: str) -> list[int]:
    return [0] + [match.end() for match in _LINE_BREAK.finditer(text)]


def _chars(line: str, byte_offset: int) -> int:
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", "replace"))


class _Rewriter:
    """Rewrites one region's statement, given as the source text of its lines."""

    def __init__(self, plan: _Plan, spelling: str, region: GradModeChange):
        self.plan = plan
        self.func = cst.parse_expression(spelling)
        self.region = region
        self.actions = iter(plan.actions)

    # values

    def call(self, value: cst.BaseExpression) -> cst.Call:
        if isinstance(value, cst.Tuple) and not value.lpar:
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        elif (len(value.lpar) == 1 and not isinstance(value, (cst.Tuple, cst.GeneratorExp))
              and isinstance(value.lpar[0].whitespace_after, cst.SimpleWhitespace)
              and isinstance(value.rpar[0].whitespace_before, cst.SimpleWhitespace)):
            value = value.with_changes(lpar=[], rpar=[])  # stop_gradient(x) rather than stop_gradient((x))
        return cst.Call(func=self.func, args=[cst.Arg(value=value)])

    def wrapped(self, value: cst.BaseExpression, how) -> cst.BaseExpression:
        if how == "whole":
            return self.call(value)
        elements = [element.with_changes(value=self.call(element.value)) if wrap else element
                    for element, wrap in zip(value.elements, how)]
        return value.with_changes(elements=elements)

    def small_statement(self, statement: cst.BaseSmallStatement) -> cst.BaseSmallStatement | None:
        action = next(self.actions)
        if action == _DROP:
            return None
        if action == _KEEP:
            return statement
        changes = {"value": self.wrapped(statement.value, action[1])}
        if isinstance(statement, cst.Return) and isinstance(statement.whitespace_after_return, cst.SimpleWhitespace) \
                and not statement.whitespace_after_return.value:
            changes["whitespace_after_return"] = cst.SimpleWhitespace(" ")  # `return(x)`
        return statement.with_changes(**changes)

    # statements

    def body(self, block: cst.BaseSuite) -> list[cst.SimpleStatementLine]:
        """The statements of a `with` body, rewritten, as lines of the block around it."""
        if isinstance(block, cst.SimpleStatementSuite):  # `with no_grad(): a = f(x)`
            lines = [cst.SimpleStatementLine(body=block.body, trailing_whitespace=block.trailing_whitespace)]
        else:
            lines = list(block.body)
        new_lines = []
        for line in lines:
            if not isinstance(line, cst.SimpleStatementLine):
                raise _Refusal("internal: a compound statement in a planned region")
            kept = [s for s in (self.small_statement(s) for s in line.body) if s is not None]
            if not kept and _has_comment(line):
                kept = list(line.body)  # `pass  # why`: keep the line, and its comment
            if kept:
                kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
                new_lines.append(line.with_changes(body=kept))
        return new_lines

    def block(self, block: cst.BaseSuite) -> cst.BaseSuite:
        """A body rewritten in place (a function's, or a `with` that keeps other items)."""
        if isinstance(block, cst.SimpleStatementSuite):
            return block.with_changes(body=[self.small_statement(s) for s in block.body])
        return block.with_changes(body=self.body(block))

    def statement(self, node: cst.BaseStatement) -> list[cst.BaseStatement]:
        if isinstance(node, cst.FunctionDef):
            decorators = list(node.decorators)
            removed = decorators.pop()  # the innermost, checked by the plan
            # the comments on and above the removed decorator stay where it was
            comments = list(removed.leading_lines)
            if removed.trailing_whitespace.comment is not None:
                comments.append(cst.EmptyLine(comment=removed.trailing_whitespace.comment))
            lines_after = [*comments, *node.lines_after_decorators] if decorators \
                else list(node.lines_after_decorators)
            leading = node.leading_lines if decorators else [*node.leading_lines, *comments]
            return [node.with_changes(decorators=decorators, body=self.block(node.body),
                                      leading_lines=leading, lines_after_decorators=lines_after)]
        if not isinstance(node, cst.With):
            raise _Refusal("internal: the region's statement is not where the plan put it")
        if len(node.items) > 1:
            index = [_is_region_item(item, self.region) for item in node.items].index(True)
            items = [*node.items[:index], *node.items[index + 1:]]
            # `with (a, no_grad(),):` keeps its trailing comma; `with a, no_grad():` cannot have one
            comma = node.items[-1].comma if isinstance(node.lpar, cst.LeftParen) else cst.MaybeSentinel.DEFAULT
            items[-1] = items[-1].with_changes(comma=comma)
            return [node.with_changes(items=items, body=self.block(node.body))]
        return self.body(node.body)


def _is_region_item(item: cst.WithItem, region: GradModeChange) -> bool:
    code = cst.Module(body=[]).code_for_node(item.item)
    try:
        return ast.dump(ast.parse(code, mode="eval").body) == ast.dump(region.expr)
    except SyntaxError:
        return False


def _has_comment(node: cst.CSTNode) -> bool:
    return bool(_comments_in(_EMPTY.code_for_node(node)))


_EMPTY = cst.Module(body=[])


def _comments_in(code: str) -> list[str]:
    """The comments of some code, in order (tokens: far cheaper than visiting libcst nodes)."""
    if "#" not in code:
        return []
    try:
        tokens = tokenize.generate_tokens(io.StringIO(code).readline)
        return [token.string for token in tokens if token.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):  # a fragment that tokenize cannot finish
        return re.findall(r"#[^\r\n]*", code)


def _rewrite(fragment: str, indent: str, newline: str, rewriter: _Rewriter, keep_valid: bool) -> str:
    """The new text of a statement given as the full text of its lines, `indent` deep."""
    if "\r" in fragment or newline != "\n":  # libcst loses lone carriage returns: work in "\n", give back `newline`
        return _rewrite(_LINE_BREAK.sub("\n", fragment), indent, "\n", rewriter, keep_valid).replace("\n", newline)
    source = f"if 1:{newline}{fragment}" if indent else fragment
    module = cst.parse_module(source)
    outer = module.body[0]
    node = outer.body.body[0] if indent else outer
    statements = rewriter.statement(node)
    if not statements and keep_valid:
        statements = [cst.SimpleStatementLine(body=[cst.Pass()])]
    code = _code(module, outer, statements, indent, newline)
    lost = Counter(_comments_in(fragment))
    lost.subtract(_comments_in(code))
    lost_comments = [comment for comment in dict.fromkeys(_comments_in(fragment)) for _ in range(lost[comment])]
    if not lost_comments:
        return code
    # e.g. the comment after `with torch.no_grad():`: keep it above the first statement
    extra = [cst.EmptyLine(comment=cst.Comment(comment)) for comment in lost_comments]
    statements = statements or [cst.SimpleStatementLine(body=[cst.Pass()])]
    statements[0] = statements[0].with_changes(leading_lines=[*extra, *statements[0].leading_lines])
    return _code(module, outer, statements, indent, newline)


def _code(module: cst.Module, outer: cst.CSTNode, statements: list, indent: str, newline: str) -> str:
    if not statements:
        return ""
    if indent:
        new_module = module.with_changes(body=[outer.with_changes(body=outer.body.with_changes(body=statements))])
        code = new_module.code
        return code[code.index(newline) + len(newline):]
    return module.with_changes(body=statements).code


def _enclosing_block(function: ast.AST, owner: ast.stmt) -> list[ast.stmt]:
    for node in ast.walk(function):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and any(statement is owner for statement in block):
                return block
    return [owner]


def _region_edit(parsed: ParsedFile, model: SemanticModel, region: GradModeChange, plan: _Plan,
                 spelling: str) -> tuple[Edit, str]:
    """The edit replacing the region's lines, and a description of what it does."""
    owner = region.owner
    first_row = _first_line(owner)
    end_row = owner.end_lineno
    first_line, last_line = parsed.lines[first_row - 1], parsed.lines[end_row - 1]
    indent = first_line[:len(first_line) - len(first_line.lstrip())]
    if region.is_decorator:
        starts_line = first_line.lstrip().startswith("@")
    else:
        starts_line = not first_line[:_chars(first_line, owner.col_offset)].strip()
    if not starts_line:
        raise _Refusal("the statement does not start its line")
    if not _AFTER_STATEMENT.fullmatch(last_line[_chars(last_line, owner.end_col_offset):]):
        raise _Refusal("the statement does not end its line")
    starts = _line_starts(parsed.text)
    start = starts[first_row - 1]
    has_line_break = end_row < len(starts)
    end = starts[end_row] if has_line_break else len(parsed.text)
    newline = _newline(parsed.text)
    # sibling regions may go away in the same pass: when only regions are left, the last keeps a `pass`
    owners = {id(change.owner) for change in model.regions}
    block = _enclosing_block(region.function, owner)
    keep_valid = block[-1] is owner and all(id(statement) in owners for statement in block)
    if sum(len(node.values) for node in ast.walk(owner) if isinstance(node, ast.BoolOp)) > _MAX_BOOL_OPERANDS:
        raise _Refusal("the region's code is nested too deeply")
    rewriter = _Rewriter(plan, spelling, region)
    try:
        content = _rewrite(parsed.text[start:end], indent, newline, rewriter, keep_valid)
    except cst.ParserSyntaxError:
        raise _Refusal("libcst cannot parse the region's lines") from None
    if content:
        try:
            ast.parse(f"if 1:{newline}{content}" if indent else content)
        except SyntaxError:
            raise _Refusal("internal: the rewritten region does not parse") from None
    if has_line_break:
        edit = Edit(content, first_row, 1, end_row + 1, 1)
    else:
        edit = Edit(content, first_row, 1, end_row, len(last_line) + 1)
    name = region.describe()
    if not plan.wraps:
        what = f"`@{name}` decorator" if region.is_decorator else f"`{name}` region"
        return edit, f"Remove the {what}: it computes nothing to cut"
    if region.is_decorator:
        return edit, f"Replace the `@{name}` decorator with `{_NAME}(...)` on the values returned"
    return edit, f"Replace the `{name}` region with `{_NAME}(...)`"


# -- public entry points ---------------------------------------------------------------------------

def plan_fixes(parsed: ParsedFile, model: SemanticModel,
               regions: Sequence[GradModeChange]) -> dict[GradModeChange, Fix | str]:
    """For each region, the `Fix` that rewrites it, or the reason it cannot: a string "no fix: ...".

    Every `Fix` of one file that needs the `stop_gradient` import carries the identical insertion
    edit; `apply_edits` applies identical edits once. A finding's node is its region's `expr`, so
    `region_of(model, finding.node)` gives the region to pass here.
    """
    newline = _newline(parsed.text)
    spelling = _spelling(parsed, model, newline)
    planned: dict[GradModeChange, Fix | str] = {}
    for region in regions:
        if isinstance(spelling, str):
            planned[region] = spelling
            continue
        try:
            if region.function is None:
                raise _Refusal("the region is not inside a function")
            if _shadowed(model, region, spelling):
                raise _Refusal(f"{spelling.root} means something else in {getattr(region.function, 'name', '')}")
            plan = _plan_region(model, region)
            edit, message = _region_edit(parsed, model, region, plan, spelling.text)
        except _Refusal as refusal:
            planned[region] = f"no fix: {refusal}"
            continue
        except RecursionError:  # our walks of the region, or libcst's
            planned[region] = "no fix: the region's code is nested too deeply"
            continue
        edits = (edit, spelling.import_edit) if plan.wraps and spelling.import_edit else (edit,)
        planned[region] = Fix(message, edits, "safe")
    return planned


def region_of(model: SemanticModel, node: ast.AST) -> GradModeChange | None:
    """The region a NG004-NG006 finding reports (its node is the region's `expr`)."""
    return next((region for region in model.regions if region.expr is node), None)


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply edits in position order; an identical edit counts once, one overlapping an edit
    already applied is skipped (the caller re-plans on the result and applies again)."""
    starts = _line_starts(text)

    def offset(row: int, col: int) -> int:
        return min(starts[min(row, len(starts)) - 1] + col - 1, len(text))

    spans = sorted({(offset(e.row, e.col), offset(e.end_row, e.end_col), e.content) for e in edits},
                   key=lambda span: (span[0], span[1]))
    pieces, position = [], 0
    for start, end, content in spans:
        if start < position:
            continue  # overlaps an edit already applied
        pieces += [text[position:start], content]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


@dataclass
class FixResult:
    """What `fix_source` did to one file."""

    text: str  # the new text (equal to the input text when nothing changed)
    encoding: str  # write `text.encode(encoding)`: the file's own encoding, BOM included
    changed: bool
    fixed: int  # regions rewritten
    remaining: list[Diagnostic]  # the findings of `codes` still in the new text


def fix_source(data: bytes, codes: frozenset[str] = FIXABLE_CODES, display_path: str = "-",
               reach: dict | None = None) -> FixResult:
    """Rewrite every NG004/NG005/NG006 region of `codes` that can be rewritten safely, until nothing changes.

    A region reported under a `# noqa` is left alone. `remaining` is what `check` reports on the
    result for `codes`, refusals included. A file that does not parse comes back unchanged, with
    its NG000 diagnostic when NG000 is in `codes`.
    """
    if display_path.endswith(".ipynb"):
        return _fix_notebook(data, codes, display_path, reach)
    try:
        text, encoding = decode(data)
        faithful = text.encode(encoding) == data  # not so under `coding: unicode_escape`, say
    except (ParseError, LookupError, UnicodeError):
        faithful = False
    if not faithful:  # latin-1 maps bytes to text one to one: the bytes come back unchanged
        return FixResult(data.decode("latin-1"), "latin-1", False, 0, check_source(data, display_path, codes))
    original, fixed = text, 0
    for _ in range(MAX_PASSES):
        new_text, count = _one_pass(text, encoding, codes & FIXABLE_CODES, reach)
        if count == 0 or new_text == text:
            break
        text, fixed = new_text, fixed + count
    remaining = check_source(text.encode(encoding), display_path, codes)
    return FixResult(text, encoding, text != original, fixed, remaining)


def _fix_notebook(data: bytes, codes: frozenset[str], display_path: str, reach: dict | None) -> FixResult:
    """Fix the code cells of a notebook as one source; only their `source` fields change."""
    unchanged = FixResult(data.decode("latin-1"), "latin-1", False, 0, [])
    try:
        notebook = Notebook.read(data)
    except NotebookError:
        return replace(unchanged, remaining=check_source(data, display_path, codes))
    result = fix_source(notebook.source.encode(), codes, display_path + ".py", reach)
    remaining = [replace(notebook.locate(d), path=display_path) for d in result.remaining]
    if not result.changed:
        return replace(unchanged, remaining=remaining)
    if not notebook.layout_is_kept():
        raise NotebookError("cannot write the notebook back in its own JSON layout; left as it is")
    new = notebook.with_source(result.text)
    return FixResult(new.decode("latin-1"), "latin-1", True, result.fixed, remaining)


def fix_text(text: str, codes: frozenset[str] = FIXABLE_CODES) -> str:
    """`fix_source` for text already decoded (the libcst codemod's entry)."""
    data = text.encode("utf-8")
    try:
        _, encoding = decode(data)
        data = text.encode(encoding)
    except (ParseError, LookupError, UnicodeEncodeError):
        return text
    return fix_source(data, codes).text


def _one_pass(text: str, encoding: str, codes: frozenset[str], reach: dict | None) -> tuple[str, int]:
    """Plan and apply the fixes of one parse; the count of regions rewritten."""
    if not codes:
        return text, 0
    try:
        parsed = parse(text.encode(encoding))
        model = SemanticModel(parsed.tree, parsed.text)
        region_findings = region_findings_of(parsed, model, codes, reach=reach)
    except (ParseError, RecursionError, UnicodeEncodeError):
        return text, 0
    kept = {id(diagnostic) for diagnostic in suppression.unsuppressed([d for _, d in region_findings], parsed.lines)}
    regions = [region for region, diagnostic in region_findings
               if id(diagnostic) in kept and diagnostic.code in FIXABLE_CODES]
    fixes = [fix for fix in plan_fixes(parsed, model, regions).values() if isinstance(fix, Fix)]
    if not fixes:
        return text, 0
    new_text = apply_edits(text, [edit for fix in fixes for edit in fix.edits])
    try:
        ast.parse(new_text)
    except SyntaxError:  # a bug of ours: better no change than a broken file
        return text, 0
    return new_text, len(fixes)
