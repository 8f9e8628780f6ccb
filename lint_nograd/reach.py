"""Which functions of a module a transform or tracer reaches, and how.

`grad(f)`, `jacfwd(jacrev(f))`, `vmap(grad(f))`, `partial(f, a)`, `lambda x: f(x)`, `self.loss`,
`df = grad(f)`, `symbolic_trace(Model())` all reach `f` (or `Model.forward`); so does every
function of the module that a reached function calls. Names are resolved from the scope of each
call, so two functions named `f` in different scopes stay apart.
"""
from __future__ import annotations

import ast
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Iterator, Optional

from lint_nograd import api
from lint_nograd.model import SemanticModel
from lint_nograd.scopes import Scope

FunctionNode = ast.AST  # FunctionDef, AsyncFunctionDef or Lambda
# The last names of the calls `_source` can recognise (a transform or a tracer).
_SOURCE_NAMES = api.AD_TRANSFORMS | frozenset({"symbolic_trace", "trace", "make_fx"})


@dataclass(frozen=True)
class Reacher:
    """A transform or tracer call that runs a function: `jacfwd(f)` at line 31, maybe through `g`."""

    mode: str  # "forward", "reverse" or "trace"
    name: str  # "jacfwd", "symbolic_trace", ...
    call: ast.Call
    through: Optional[str] = None  # the first function of the chain, when reached transitively

    def describe(self) -> str:
        text = f"`{self.name}(...)` at line {self.call.lineno}"
        return f"{text} through `{self.through}`" if self.through else text


def _modes(transform: str) -> tuple[str, ...]:
    if transform == "hessian":  # jacfwd(jacrev(f)): forward over reverse
        return ("forward", "reverse")
    return ("forward",) if transform in api.FORWARD_MODE else ("reverse",)


def _first_argument(call: ast.Call, keyword: str) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _is_true(call: ast.Call, keyword: str) -> bool:
    return any(k.arg == keyword and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in call.keywords)


class Reach:
    def __init__(self, model: SemanticModel):
        self.model = model
        self.scopes = model.scopes
        self.reachers: dict[FunctionNode, list[Reacher]] = defaultdict(list)
        self._propagate(self._sources())

    # -- what a call or value runs --------------------------------------------------------------

    def _source(self, call: ast.Call, scope: Scope) -> tuple[str, tuple[str, ...], ast.expr] | None:
        """(name, modes, function argument) when `call` is a transform or a tracer."""
        names = self.scopes.qualified_names(call.func, scope)
        transform = api.transform_name(names)
        if transform:
            target = _first_argument(call, "func")
            return (transform, _modes(transform), target) if target is not None else None
        if names & api.MAKE_FX and _is_true(call, "pre_dispatch"):
            return None  # pre_dispatch keeps `_set_grad_enabled` nodes
        for tracer, name, keyword in ((api.SYMBOLIC_TRACE, "symbolic_trace", "root"),
                                      (api.JIT_TRACE, "torch.jit.trace", "func"), (api.MAKE_FX, "make_fx", "f")):
            if names & tracer:
                target = _first_argument(call, keyword)
                return (name, ("trace",), target) if target is not None else None
        return None

    def functions_run_by(self, expr: ast.expr, scope: Scope, depth: int = 0) -> set[FunctionNode]:
        """The module's functions that calling `expr(...)` runs."""
        if depth > 12:
            return set()
        found: set[FunctionNode] = set()
        if isinstance(expr, ast.Lambda):
            found.add(expr)
        elif isinstance(expr, ast.Name):
            for binding in self.scopes.lookup(scope, expr.id, (expr.lineno, expr.col_offset)):
                if isinstance(binding.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.add(binding.node)
                elif binding.value is not None:  # `df = grad(f)`, `loss_fn = partial(f, y)`
                    found |= self.functions_run_by(binding.value, binding.scope, depth + 1)
        elif isinstance(expr, ast.Attribute):
            found |= self._attribute_functions(expr, scope, depth)
        elif isinstance(expr, ast.Call):
            names = self.scopes.qualified_names(expr.func, scope)
            source = self._source(expr, scope)
            if source or names & (api.VMAP | api.PARTIAL):
                inner = _first_argument(expr, "func") if not source else source[2]
                if inner is not None:  # a wrapper runs the function it wraps
                    found |= self.functions_run_by(inner, scope, depth + 1)
            else:  # calling an instance of a module class runs its forward
                for cls in self._classes(expr.func, scope):
                    found |= self._methods(cls, "forward")
        return found

    def _classes(self, expr: ast.expr, scope: Scope) -> list[ast.ClassDef]:
        if not isinstance(expr, ast.Name):
            return []
        return [b.node for b in self.scopes.lookup(scope, expr.id, (expr.lineno, expr.col_offset))
                if isinstance(b.node, ast.ClassDef)]

    @staticmethod
    def _methods(cls: ast.ClassDef, name: str) -> set[FunctionNode]:
        return {s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name}

    def _enclosing_method(self, scope: Scope) -> tuple[ast.ClassDef, str] | None:
        """The class and the `self` name of the method whose body `scope` is in."""
        while scope is not None:
            if isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope.parent \
                    and scope.parent.is_class:
                args = scope.node.args.posonlyargs + scope.node.args.args
                return (scope.parent.node, args[0].arg) if args else None
            scope = scope.parent
        return None

    def _attribute_functions(self, expr: ast.Attribute, scope: Scope, depth: int) -> set[FunctionNode]:
        if expr.attr == "forward":  # `model.forward` runs what calling `model` runs
            found = self.functions_run_by(expr.value, scope, depth + 1)
            if found:
                return found
        method = self._enclosing_method(scope)
        if not (method and isinstance(expr.value, ast.Name) and expr.value.id == method[1]):
            return set()
        cls = method[0]
        found = self._methods(cls, expr.attr)  # `self.loss`
        if not found:  # `self.block(x)` with `self.block = Block()` in __init__
            for init in self._methods(cls, "__init__"):
                init_scope = self.scopes.enter(init, self.scopes.of[cls])
                for node in ast.walk(init):
                    if isinstance(node, ast.Assign) and any(
                            isinstance(t, ast.Attribute) and t.attr == expr.attr for t in node.targets):
                        found |= self.functions_run_by(node.value, init_scope, depth + 1)
        return found

    # -- propagation -----------------------------------------------------------------------------

    def _sources(self) -> list[tuple[FunctionNode, Reacher]]:
        seeds = []
        for call, scope in self.model.calls_naming(_SOURCE_NAMES):
            source = self._source(call, scope)
            if source is None:
                continue
            name, modes, target = source
            for function in self.functions_run_by(target, scope):
                seeds += [(function, Reacher(mode, name, call)) for mode in modes]
        return seeds

    def _propagate(self, seeds: list[tuple[FunctionNode, Reacher]]) -> None:
        seen: set[tuple[FunctionNode, str, ast.Call]] = set()
        queue = deque(seeds)
        while queue:
            function, reacher = queue.popleft()
            key = (function, reacher.mode, reacher.call)
            if key in seen:
                continue
            seen.add(key)
            self.reachers[function].append(reacher)
            through = reacher.through or self.name_of(function)
            for call, scope in self.model.calls_in(function):
                callees = self.functions_run_by(call.func, scope)
                if self._source(call, scope):  # `vjp(g, x)` runs `g` right here
                    callees |= self.functions_run_by(call, scope)
                for callee in callees:
                    queue.append((callee, Reacher(reacher.mode, reacher.name, reacher.call, through)))

    def name_of(self, function: FunctionNode) -> str:
        """`f`, `Model.forward` or `<lambda>`, as a user would name the function."""
        name = getattr(function, "name", "<lambda>")
        parent = self.scopes.of[function].parent
        return f"{parent.node.name}.{name}" if parent is not None and parent.is_class else name

    def of(self, function: Optional[FunctionNode]) -> list[Reacher]:
        return self.reachers.get(function, []) if function is not None else []

    def first(self, function: Optional[FunctionNode], mode: str) -> Reacher | None:
        return next((r for r in self.of(function) if r.mode == mode), None)

    def reached_functions(self) -> Iterator[FunctionNode]:
        return iter(self.reachers)
