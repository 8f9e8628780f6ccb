"""Which parameters of a function each argument of its calls depends on: the "varied" half of
activity analysis (Tapenade, Enzyme), across calls. A transform differentiates only its inputs,
so a callee's parameter is varied only where the argument passed to it depends on a varied
parameter of the caller. Linking carries that along each chain of reach (`Project.varied_params`),
so that a region computing only from a parameter no transform varies (a time `t` beside the `x`
that `jvp` pushes forward, the weights a spectral norm reads) is seen not to matter.

Flow-insensitive within a function, and conservative: a local depends on every value bound to it;
module-level names, imports and builtins on nothing (no transform differentiates them); the
module's own state (`self.weight`, a submodule, a literal: `region_flow.held_constant`) on `self`; any other
attribute of `self`, a comprehension variable, a function or lambda value, `*args` and `**kwargs`
on anything (UNKNOWN); a variable of an enclosing function on what the enclosing function is
varied in (CAPTURED), but on nothing when the enclosing function computes it from constants alone
(`model = Net()`) and it is no container the closure may fill.
"""
from __future__ import annotations

import ast
import builtins
from typing import Optional

from lint_nograd.analysis import activity
from lint_nograd.analysis.model import SemanticModel
from lint_nograd.analysis.region_flow import held_constant
from lint_nograd.analysis.scopes import FUNCTION_NODES, Scope

UNKNOWN = "*"  # may depend on anything
CAPTURED = "^"  # a variable of an enclosing function

Dependence = tuple[str, ...]  # parameter names, UNKNOWN, CAPTURED; sorted


class ParameterDependence:
    """The dependence of expressions of one function body on its parameters: the names it binds
    form a graph (`x = g(y)`: `x` on `y`), whose closure each name's dependence is."""

    def __init__(self, model: SemanticModel, scope: Scope, states: Optional[dict] = None):
        """`states`: `module_state` of `self.<name>` by (class, name), shared by the methods of a file."""
        self.model, self.scope = model, scope
        self._state = {} if states is None else states
        self._direct: dict[str, tuple[set[str], set[str]]] = {}  # a local -> (its own tokens, the locals it reads)
        self._closed: Optional[dict[str, frozenset[str]]] = None  # `_closure`
        self._names: dict[str, bool | frozenset[str]] = {}  # `_name`, by name
        self._assigned: Optional[dict[str, list[ast.expr]]] = None  # `_values`
        self._outer: dict[Scope, ParameterDependence] = {}  # `_captured`: of the enclosing functions

    def of(self, expr: Optional[ast.expr]) -> Dependence:
        """The parameters `expr` depends on (UNKNOWN, CAPTURED), sorted."""
        if expr is None or type(expr) is ast.Constant:
            return ()
        tokens, names = self._reads(expr)
        for name in names:
            tokens |= self._closure(name)
        return tuple(sorted(tokens))

    def _reads(self, expr: ast.expr) -> tuple[set[str], set[str]]:
        """The tokens an expression reads, and the locals of the function it reads."""
        tokens: set[str] = set()
        names: set[str] = set()
        todo = [expr]
        while todo:
            node = todo.pop()
            kind = type(node)
            if kind is ast.Name:
                if type(node.ctx) is ast.Load:
                    found = self._resolved(node)
                    if found is True:
                        names.add(node.id)
                    elif found:
                        tokens |= found
                continue
            if kind is ast.Constant or node is None:  # (a dict's `**d` has no key)
                continue
            if kind is ast.Compare or kind is ast.Attribute and node.attr in activity.PLAIN_ATTRIBUTES \
                    or kind is ast.Call and self._integer_call(node) \
                    or kind is ast.BinOp and type(node.op) is ast.FloorDiv:
                continue  # `x.shape[0]`, `x.size(1)`, `len(x)`, `x > 0`: no derivative, whatever it reads
            if kind is ast.Attribute and type(node.value) is ast.Name and node.value.id == "self" \
                    and self._resolved(node.value) is True:  # (a captured `self` is read as any name)
                key = (self.scope.parent.node, node.attr)
                state = self._state.get(key)
                if state is None:  # `self.cache`: what a method may have stored there
                    state = self._state[key] = held_constant(self.model, node, self.scope)
                if not state:
                    return {UNKNOWN}, set()
            elif kind in _UNKNOWABLE:
                return {UNKNOWN}, set()
            for field in _FIELDS[kind]:
                value = getattr(node, field)
                if type(value) is list:
                    todo += value
                elif value is not None:
                    todo.append(value)
        return tokens, names

    def _integer_call(self, call: ast.Call) -> bool:
        """`x.size(0)`, `x.argmax()`, `len(x)`, `int(n)`: a number or an index (`analysis/activity.py`)."""
        func = call.func
        if type(func) is ast.Attribute:
            return func.attr in activity.INTEGER_METHODS
        return type(func) is ast.Name and func.id in activity.INTEGER_BUILTINS and self._resolved(func) == _NOTHING

    def _resolved(self, name: ast.Name) -> bool | frozenset[str]:
        found = self._names.get(name.id)
        if found is None:
            found = self._names[name.id] = self._name(name)
        return found

    def _name(self, name: ast.Name) -> bool | frozenset[str]:
        """True for a name bound in the function (its bindings are then followed), else what it
        depends on. A function's names resolve alike wherever they are read (flow-insensitive)."""
        bindings = self.model.scopes.lookup(self.scope, name.id, (name.lineno, name.col_offset))
        if not bindings:  # a builtin; or bound by `:=`, which no binding shows
            return _NOTHING if name.id in _BUILTINS else _ANYTHING
        owner = bindings[0].scope
        if owner is self.scope:
            return True
        if isinstance(owner.node, FUNCTION_NODES):
            return self._captured(owner, name.id)
        # module level, a class body: no transform's input; a comprehension's variable: anything
        return _NOTHING if owner.node is self.model.module or owner.is_class else _ANYTHING

    def _captured(self, owner: Scope, name: str) -> frozenset[str]:
        """A variable of an enclosing function: varied where the enclosing function's value of it may
        be (CAPTURED); nowhere when the enclosing function computes it from constants alone
        (`model = Net()`, `x, teacher = torch.randn(4), nn.Linear(4, 4)`), unless it is a container
        the closure may fill (`outs = []`)."""
        outer = self._outer.get(owner)
        if outer is None:
            outer = self._outer[owner] = ParameterDependence(self.model, owner, self._state)
        values = outer._values().get(name, ())
        if not values or any(not isinstance(b.node, ast.Name) for b in owner.bindings.get(name, ())) \
                or any(_container(value) for value in values) or outer._closure(name):
            return _ENCLOSING
        return _NOTHING

    def _closure(self, start: str) -> frozenset[str]:
        """What a local depends on, through the locals it is computed from: found for every local of
        the function at once, to a fixpoint (a local's tokens only grow)."""
        if self._closed is None:
            names = set(self._values()) | set(self.scope.bindings)
            found = {name: set(self._direct_of(name)[0]) for name in names}
            readers: dict[str, list[str]] = {}
            for name in names:
                for read in self._direct_of(name)[1]:
                    readers.setdefault(read, []).append(name)
            todo = list(names)
            while todo:
                name = todo.pop()
                for reader in readers.get(name, ()):
                    if not found[name] <= found[reader]:
                        found[reader] |= found[name]
                        todo.append(reader)
            self._closed = {name: frozenset(tokens) for name, tokens in found.items()}
        return self._closed.get(start, _NOTHING)

    def _direct_of(self, name: str) -> tuple[set[str], set[str]]:
        found = self._direct.get(name)
        if found is not None:
            return found
        tokens: set[str] = set()
        names: set[str] = set()
        for binding in self.scope.bindings.get(name, ()):
            node = binding.node
            if isinstance(node, ast.arg):
                arguments = self.scope.node.args
                tokens.add(UNKNOWN if node is arguments.vararg or node is arguments.kwarg else node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler)) \
                    or isinstance(node, _PATTERNS):
                tokens.add(UNKNOWN)
        for value in self._values().get(name, ()):
            more, reads = self._reads(value)
            tokens |= more
            names |= reads
        found = self._direct[name] = (tokens, names)
        return found

    def _values(self) -> dict[str, list[ast.expr]]:
        """What each name the function's statements assign takes: the value (the whole of it for
        `a, b = f(x)`), what a loop iterates, the context of `with ... as`; `x += y` adds `y`."""
        if self._assigned is None:
            self._assigned = {}
            body = self.scope.node.body
            todo = list(body) if type(body) is list else []  # (a lambda binds nothing)
            while todo:
                statement = todo.pop()
                kind = type(statement)
                if kind is ast.Assign or kind is ast.AnnAssign or kind is ast.AugAssign:
                    targets = statement.targets if kind is ast.Assign else [statement.target]
                    self._assign(targets, statement.value)
                elif kind is ast.For or kind is ast.AsyncFor:
                    self._assign([statement.target], statement.iter)
                elif kind is ast.With or kind is ast.AsyncWith:
                    for item in statement.items:
                        self._assign([item.optional_vars], item.context_expr)
                if kind not in _DEFINITIONS:
                    todo += [child for field in _BLOCKS for child in getattr(statement, field, ())]
                    todo += getattr(statement, "handlers", ())
                    todo += [inner for case in getattr(statement, "cases", ()) for inner in case.body]
        return self._assigned

    def _assign(self, targets: list, value: Optional[ast.expr]) -> None:
        todo = [target for target in targets if target is not None and value is not None]
        while todo:
            target = todo.pop()
            if type(target) is ast.Name:
                self._assigned.setdefault(target.id, []).append(value)
            elif type(target) in (ast.Tuple, ast.List):
                todo += target.elts
            elif type(target) is ast.Starred:
                todo.append(target.value)  # (`self.x = ...`, `d[k] = ...` bind no name)


def _container(value: ast.expr) -> bool:
    """A list, dict or set, written out or made by a builtin or `collections` (code may add to it)."""
    return isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) \
        or activity.makes_container(value)


_NOTHING, _ANYTHING, _ENCLOSING = frozenset(), frozenset({UNKNOWN}), frozenset({CAPTURED})
# the fields of each kind of expression that hold expressions (not contexts, operators or names)
_FIELDS = {kind: tuple(name for name in kind._fields if name not in ("ctx", "op", "ops", "attr", "id", "arg",
                                                                     "conversion", "kind", "is_async"))
           for kind in vars(ast).values() if isinstance(kind, type) and issubclass(kind, ast.AST)}
_BLOCKS = ("body", "orelse", "finalbody")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_PATTERNS = tuple(getattr(ast, kind) for kind in ("MatchAs", "MatchStar", "MatchMapping") if hasattr(ast, kind))
_BUILTINS = frozenset(dir(builtins))
_UNKNOWABLE = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Starred, ast.NamedExpr,
               ast.Yield, ast.YieldFrom, ast.Await)
