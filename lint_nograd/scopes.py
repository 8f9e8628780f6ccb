"""Name resolution: which imports and definitions a name in a file may refer to.

`Scopes.qualified_names` answers "what does this expression refer to?" from any scope, the way
Python resolves names: the nearest enclosing function scope that binds the name wins, class scopes
do not enclose their methods, `global` and `nonlocal` redirect. In the scope of the use, the last
binding before it counts. A scope's bindings are collected the first time a name is looked up in
it, from its statements alone, so functions nobody asks about cost nothing.
"""
from __future__ import annotations

import ast
import weakref
from dataclasses import dataclass, field
from typing import Optional

FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
COMPREHENSION_NODES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# The fields of compound statements that hold more statements.
_BODIES = ("body", "orelse", "finalbody", "handlers")


@dataclass(eq=False)
class Binding:
    name: str
    node: ast.AST  # the import, def, class, assignment, target or parameter that binds the name
    _scope: "weakref.ReferenceType[Scope]"  # weak: no reference cycle, so no garbage collector needed
    imported: Optional[str] = None  # the qualified name an import binds: `torch.func.grad`
    value: Optional[ast.expr] = None  # for `name = value`: the value, to follow aliases

    @property
    def scope(self) -> "Scope":
        return self._scope()

    @property
    def position(self) -> tuple[int, int]:
        return (getattr(self.node, "lineno", 0), getattr(self.node, "col_offset", 0))


@dataclass(eq=False)
class Scope:
    node: ast.AST  # Module, FunctionDef, AsyncFunctionDef, Lambda, ClassDef or a comprehension
    parent: Optional["Scope"]
    _bindings: Optional[dict[str, list[Binding]]] = None
    global_names: set[str] = field(default_factory=set)
    nonlocal_names: set[str] = field(default_factory=set)
    star_imports: list[str] = field(default_factory=list)

    @property
    def is_class(self) -> bool:
        return isinstance(self.node, ast.ClassDef)

    @property
    def bindings(self) -> dict[str, list[Binding]]:
        if self._bindings is None:
            self._bindings = {}
            _Binder(self).collect()
        return self._bindings

    def bind(self, name: str, node: ast.AST, imported: str | None = None, value: ast.expr | None = None):
        self._bindings.setdefault(name, []).append(Binding(name, node, weakref.ref(self), imported, value))


class _Binder:
    """Collects the bindings of one scope from its own statements (not from nested scopes)."""

    def __init__(self, scope: Scope):
        self.scope = scope

    def collect(self) -> None:
        node = self.scope.node
        if isinstance(node, FUNCTION_NODES):
            args = node.args
            for arg in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg):
                if arg is not None:
                    self.scope.bind(arg.arg, arg)
        if isinstance(node, COMPREHENSION_NODES):
            for generator in node.generators:
                self.targets(generator.target)
        elif isinstance(node, ast.Lambda):
            pass
        else:
            self.statements(node.body)

    def targets(self, target: ast.AST | None, value: ast.expr | None = None) -> None:
        if isinstance(target, ast.Name):
            self.scope.bind(target.id, target, value=value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.targets(element)
        elif isinstance(target, ast.Starred):
            self.targets(target.value)

    def statements(self, statements: list) -> None:
        for statement in statements:
            self.statement(statement)

    def statement(self, node: ast.AST) -> None:
        scope = self.scope
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope.bind(node.name, node)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    scope.bind(alias.asname, node, imported=alias.name)
                else:  # `import torch.func` binds `torch`
                    top = alias.name.partition(".")[0]
                    scope.bind(top, node, imported=top)
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    scope.star_imports.append(module)
                else:
                    # `from . import model` binds `.model`; `from .model import f`, `.model.f`
                    separator = "." if node.module else ""
                    scope.bind(alias.asname or alias.name, node, imported=f"{module}{separator}{alias.name}")
        elif isinstance(node, ast.Assign):
            single = len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            for target in node.targets:
                self.targets(target, node.value if single else None)
        elif isinstance(node, ast.AnnAssign):
            self.targets(node.target, node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, ast.Name) \
                and isinstance(node.iter, (ast.Tuple, ast.List)) and node.iter.elts:
            # `for f in (f1, f2):` binds `f` to each element in turn: one binding per element
            for element in node.iter.elts:
                scope.bind(node.target.id, node.target, value=element)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor)):
            self.targets(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.targets(item.optional_vars)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.bind(node.name, node)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                self.targets(target)
        elif isinstance(node, ast.Global):
            scope.global_names.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            scope.nonlocal_names.update(node.names)
        elif type(node).__name__ == "match_case":
            for pattern in ast.walk(node.pattern):
                name = getattr(pattern, "name", None) or getattr(pattern, "rest", None)
                if name:
                    scope.bind(name, pattern)
        for field_name in _BODIES:
            self.statements(getattr(node, field_name, ()))
        self.statements(getattr(node, "cases", ()))


class Scopes:
    """The scopes of a module, keyed by the node that opens them, registered as they are met."""

    def __init__(self, module: ast.Module):
        self.module = Scope(module, None)
        self.of: dict[ast.AST, Scope] = {module: self.module}

    def enter(self, node: ast.AST, parent: Scope) -> Scope:
        scope = self.of.get(node)
        if scope is None:
            scope = self.of[node] = Scope(node, parent)
        return scope

    def lookup(self, scope: Scope, name: str, position: tuple[int, int]) -> list[Binding]:
        """The bindings `name` may refer to when used at `position` in `scope`."""
        if name in scope.global_names:
            scope = self.module
        elif name in scope.nonlocal_names and scope.parent:
            scope = scope.parent
        own_scope = scope
        while scope is not None:
            if scope.is_class and scope is not own_scope:
                scope = scope.parent
                continue
            bindings = scope.bindings.get(name)
            if bindings:
                if scope is own_scope:
                    before = [b for b in bindings if b.position <= position]
                    if not before:
                        return bindings
                    # the last binding before the use; a loop over a tuple binds several at once
                    return [b for b in before if b.node is before[-1].node]
                return bindings
            scope = scope.parent
        return []

    def qualified_names(self, expr: ast.expr, scope: Scope, _depth: int = 0) -> frozenset[str]:
        """Every qualified name `expr` may refer to: {'torch.no_grad'} for `T.no_grad` after `import torch as T`."""
        if _depth > 8:
            return frozenset()
        if isinstance(expr, ast.Attribute):
            return frozenset(f"{base}.{expr.attr}"
                             for base in self.qualified_names(expr.value, scope, _depth + 1))
        if not isinstance(expr, ast.Name):
            return frozenset()
        bindings = self.lookup(scope, expr.id, (expr.lineno, expr.col_offset))
        if not bindings:
            return frozenset(f"{module}.{expr.id}" for module in self.module.star_imports)
        names: set[str] = set()
        for binding in bindings:
            if binding.imported:
                names.add(binding.imported)
            elif isinstance(binding.value, (ast.Name, ast.Attribute)):  # `ng = torch.no_grad`
                names |= self.qualified_names(binding.value, binding.scope, _depth + 1)
        return frozenset(names)

    def only_binding(self, name: ast.Name, scope: Scope) -> Binding | None:
        """The binding `name` refers to, when there is exactly one it may refer to."""
        bindings = self.lookup(scope, name.id, (name.lineno, name.col_offset))
        return bindings[0] if len(bindings) == 1 else None
