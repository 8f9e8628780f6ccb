"""Name resolution: which imports and definitions a name in a file may refer to.

One pass over the module records every binding per scope; `Scopes.qualified_names` then answers
"what does this expression refer to?" from any scope, the way Python resolves names: the nearest
enclosing function scope that binds the name wins, class scopes do not enclose their methods,
`global` and `nonlocal` redirect. In the scope of the use, the last binding before it counts.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Optional, Union

ScopeNode = Union[ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                  ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp]
FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
COMPREHENSION_NODES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(eq=False)
class Binding:
    name: str
    node: ast.AST  # the import, def, class, assignment or parameter that binds the name
    scope: "Scope"
    imported: Optional[str] = None  # the qualified name an import binds: `torch.func.grad`
    value: Optional[ast.expr] = None  # for `name = value`: the value, to follow aliases

    @property
    def position(self) -> tuple[int, int]:
        return (getattr(self.node, "lineno", 0), getattr(self.node, "col_offset", 0))


@dataclass(eq=False)
class Scope:
    node: ScopeNode
    parent: Optional["Scope"]
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    global_names: set[str] = field(default_factory=set)
    nonlocal_names: set[str] = field(default_factory=set)
    star_imports: list[str] = field(default_factory=list)

    @property
    def is_class(self) -> bool:
        return isinstance(self.node, ast.ClassDef)

    def bind(self, name: str, node: ast.AST, imported: str | None = None, value: ast.expr | None = None):
        self.bindings.setdefault(name, []).append(Binding(name, node, self, imported, value))


class Scopes(ast.NodeVisitor):
    """Every scope of a module, keyed by the node that opens it."""

    def __init__(self, module: ast.Module):
        self.module = Scope(module, None)
        self.of: dict[ast.AST, Scope] = {module: self.module}
        self._current = self.module
        for statement in module.body:
            self.visit(statement)

    # -- building -----------------------------------------------------------------------------

    def _enter(self, node: ScopeNode, visit_inside) -> None:
        scope = Scope(node, self._current)
        self.of[node] = scope
        outer, self._current = self._current, scope
        visit_inside()
        self._current = outer

    def _visit_all(self, nodes) -> None:
        for node in nodes:
            if node is not None:
                self.visit(node)

    def _bind_arguments(self, args: ast.arguments) -> None:
        for arg in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg):
            if arg is not None:
                self._current.bind(arg.arg, arg)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._visit_all(node.decorator_list)
        self._visit_all(node.args.defaults)
        self._visit_all(node.args.kw_defaults)
        self._current.bind(node.name, node)

        def inside():
            self._bind_arguments(node.args)
            self._visit_all(node.body)

        self._enter(node, inside)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_all(node.args.defaults)
        self._visit_all(node.args.kw_defaults)

        def inside():
            self._bind_arguments(node.args)
            self.visit(node.body)

        self._enter(node, inside)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_all(node.decorator_list)
        self._visit_all(node.bases)
        self._visit_all(node.keywords)
        self._current.bind(node.name, node)
        self._enter(node, lambda: self._visit_all(node.body))

    def _visit_comprehension(self, node) -> None:
        # The first iterable is evaluated in the enclosing scope.
        self.visit(node.generators[0].iter)

        def inside():
            for index, generator in enumerate(node.generators):
                self.visit(generator.target)
                if index:
                    self.visit(generator.iter)
                self._visit_all(generator.ifs)
            self._visit_all([getattr(node, "elt", None), getattr(node, "key", None),
                             getattr(node, "value", None)])

        self._enter(node, inside)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self._current.bind(alias.asname, node, imported=alias.name)
            else:  # `import torch.func` binds `torch`
                top = alias.name.partition(".")[0]
                self._current.bind(top, node, imported=top)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                self._current.star_imports.append(module)
            else:
                self._current.bind(alias.asname or alias.name, node, imported=f"{module}.{alias.name}")

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self._current.bind(node.targets[0].id, node, value=node.value)
        else:
            self._visit_all(node.targets)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._visit_all([node.annotation, node.value])
        if isinstance(node.target, ast.Name) and node.value is not None:
            self._current.bind(node.target.id, node, value=node.value)
        else:
            self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        scope = self._current  # `:=` in a comprehension binds in the enclosing scope
        while isinstance(scope.node, COMPREHENSION_NODES) and scope.parent:
            scope = scope.parent
        scope.bind(node.target.id, node, value=node.value)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self._current.bind(node.id, node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._current.bind(node.name, node)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self._current.global_names.update(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self._current.nonlocal_names.update(node.names)

    def visit_MatchAs(self, node) -> None:
        if node.name:
            self._current.bind(node.name, node)
        self.generic_visit(node)

    def visit_MatchStar(self, node) -> None:
        if node.name:
            self._current.bind(node.name, node)

    def visit_MatchMapping(self, node) -> None:
        if node.rest:
            self._current.bind(node.rest, node)
        self.generic_visit(node)

    # -- resolving ----------------------------------------------------------------------------

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
                    return before[-1:] or bindings
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
