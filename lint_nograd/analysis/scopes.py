"""Name resolution: which imports and definitions a name in a file may refer to.

`Scopes.qualified_names` answers "what does this expression refer to?" from any scope, the way
Python resolves names: the nearest enclosing function scope that binds the name wins, class scopes
do not enclose their methods, `global` and `nonlocal` redirect. In the scope of the use, the last
binding before it counts, and the one before a `while` loop that binds it again (the loop may run
no turn), and those later in a loop around the use (the next turn reads them: `model =
model.module` in a `while`). A scope's bindings are collected the first time a name is looked up
in it, from its statements alone, so functions nobody asks about cost nothing.
"""
from __future__ import annotations

import ast
import weakref
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Optional

FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
COMPREHENSION_NODES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# The fields of compound statements that hold more statements.
_BODIES = ("body", "orelse", "finalbody", "handlers")


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes`, as a list, about twice as fast (analyses walk large region bodies)."""
    found = []
    for name in node._fields:
        value = getattr(node, name, None)
        if type(value) is list:
            found += [item for item in value if isinstance(item, ast.AST)]
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk`: the same nodes in the same order (breadth first), about twice as fast."""
    todo = deque([node])
    pop, append, node_type = todo.popleft, todo.append, ast.AST
    while todo:
        node = pop()
        for name in node._fields:  # (child_nodes, inline)
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, node_type):
                        append(item)
            elif isinstance(value, node_type):
                append(value)
        yield node


@dataclass(eq=False, slots=True)
class Binding:
    name: str
    node: ast.AST  # the import, def, class, assignment, target or parameter that binds the name
    _scope: "weakref.ReferenceType[Scope]"  # weak: no reference cycle, so no garbage collector needed
    imported: Optional[str] = None  # the qualified name an import binds: `torch.func.grad`
    value: Optional[ast.expr] = None  # for `name = value`: the value, to follow aliases
    # (line, column) from where it holds, compared with every use: of `node`, or of the end of the
    # value it is assigned (`model = model.eval()` reads the binding before it)
    position: tuple[int, int] = (0, 0)
    iterated: Optional[ast.expr] = None  # for `for name in it`: `it`, whose elements the name takes
    # the blocks around it that may not run, outermost first: (start, end, loop, skippable) of each,
    # `loop` the start of the loop statement whose body it is (None for a branch), `skippable` for a
    # `while` body
    blocks: tuple = ()

    @property
    def scope(self) -> "Scope":
        return self._scope()


@dataclass(eq=False)
class Scope:
    node: ast.AST  # Module, FunctionDef, AsyncFunctionDef, Lambda, ClassDef or a comprehension
    parent: Optional["Scope"]
    _bindings: Optional[dict[str, list[Binding]]] = None
    global_names: set[str] = field(default_factory=set)
    nonlocal_names: set[str] = field(default_factory=set)
    star_imports: list[str] = field(default_factory=list)
    # What a name not bound here refers to, by name: found in the enclosing scopes once.
    _from_enclosing: dict[str, list[Binding]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.is_class = isinstance(self.node, ast.ClassDef)

    @property
    def bindings(self) -> dict[str, list[Binding]]:
        if self._bindings is None:
            self._bindings = {}
            _Binder(self).collect()
        return self._bindings


class _Binder:
    """Collects the bindings of one scope from its own statements (not from nested scopes)."""

    def __init__(self, scope: Scope):
        self.scope = scope
        self._ref = weakref.ref(scope)
        self._bindings = scope._bindings
        self._after: ast.expr | None = None  # what is evaluated before the names bound now hold
        self._blocks: tuple = ()  # the blocks that may not run around the statement walked (`Binding.blocks`)

    def bind(self, name: str, node: ast.AST, imported: str | None = None, value: ast.expr | None = None,
             iterated: ast.expr | None = None):
        after = self._after
        position = (after.end_lineno, after.end_col_offset) if after is not None else \
            (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        binding = Binding(name, node, self._ref, imported, value, position, iterated, self._blocks)
        bindings = self._bindings.get(name)
        if bindings is None:
            self._bindings[name] = [binding]
        else:
            bindings.append(binding)

    def collect(self) -> None:
        node = self.scope.node
        if isinstance(node, FUNCTION_NODES):
            args = node.args
            for arg in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg):
                if arg is not None:
                    self.bind(arg.arg, arg)
        if isinstance(node, COMPREHENSION_NODES):
            for generator in node.generators:
                self.elements(generator.target, generator.iter)
        elif isinstance(node, ast.Lambda):
            pass
        else:
            self.statements(node.body)

    def targets(self, target: ast.AST | None, value: ast.expr | None = None) -> None:
        if isinstance(target, ast.Name):
            self.bind(target.id, target, value=value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element, part in zip(target.elts, _unpacked(target.elts, value)):
                self.targets(element, part)
        elif isinstance(target, ast.Starred):
            self.targets(target.value, value)

    def statements(self, statements: list) -> None:
        for statement in statements:
            kind = type(statement)
            if kind in _DEFINITIONS:
                self.bind(statement.name, statement)
                continue
            bind = _BIND.get(kind)
            if bind is not None:
                bind(self, statement)
            if kind is ast.If and _type_checking(statement.test):
                self.typing_only(statement.body)
                self.statements(statement.orelse)
                continue
            for field_name in _BODIES_OF.get(kind, ()):
                body = getattr(statement, field_name)
                if not body or kind in _ALWAYS_RUN or field_name in ("finalbody", "handlers", "cases"):
                    self.statements(body)
                    continue
                outer = self._blocks
                loop = (statement.lineno, statement.col_offset) if kind in _LOOPS and field_name == "body" else None
                skippable = kind is ast.While and field_name == "body"
                self._blocks = (*outer, ((body[0].lineno, body[0].col_offset),
                                         (body[-1].end_lineno, body[-1].end_col_offset), loop, skippable))
                self.statements(body)
                self._blocks = outer

    def typing_only(self, statements: list) -> None:
        """`if TYPE_CHECKING:` runs only for type checkers: its imports bind a name to nothing
        the code can run (a later binding, or none, is what runs)."""
        for statement in statements:
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                for alias in statement.names:
                    if alias.name != "*":
                        self.bind(alias.asname or alias.name.partition(".")[0], statement)

    def import_(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.bind(alias.asname, node, imported=alias.name)
            else:  # `import torch.func` binds `torch`
                top = alias.name.partition(".")[0]
                self.bind(top, node, imported=top)

    def import_from(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                self.scope.star_imports.append(module)
            else:
                # `from . import model` binds `.model`; `from .model import f`, `.model.f`
                separator = "." if node.module else ""
                self.bind(alias.asname or alias.name, node, imported=f"{module}{separator}{alias.name}")

    def assign(self, node: ast.Assign) -> None:
        self._after = node.value  # `model = model.eval()`: the value reads the name bound before
        for target in node.targets:  # `a = b = f`, `a, b = f, g`
            self.targets(target, node.value)
        self._after = None

    def ann_assign(self, node: ast.AnnAssign) -> None:
        self._after = node.value
        self.targets(node.target, node.value)
        self._after = None

    def for_(self, node: ast.For | ast.AsyncFor) -> None:
        self._after = node.iter  # `for batch in batches(batch)`
        if isinstance(node.target, ast.Name) and isinstance(node.iter, (ast.Tuple, ast.List)) and node.iter.elts:
            # `for f in (f1, f2):` binds `f` to each element in turn: one binding per element
            for element in node.iter.elts:
                self.bind(node.target.id, node.target, value=element)
        else:
            self.elements(node.target, node.iter)
        self._after = None

    def elements(self, target: ast.AST, iterable: ast.expr) -> None:
        """`for target in iterable`: a name takes the elements of what it iterates, through
        `enumerate(it)`, `zip(a, b)` and `d.items()` (`for i, block in enumerate(self.blocks)`)."""
        if isinstance(target, ast.Name):
            self.bind(target.id, target, iterated=iterable)
            return
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(iterable, ast.Call) and not iterable.keywords:
            func, args, elts = iterable.func, iterable.args, target.elts
            if isinstance(func, ast.Name) and func.id == "enumerate" and len(args) == 1 and len(elts) == 2:
                self.targets(elts[0])
                self.elements(elts[1], args[0])
                return
            if isinstance(func, ast.Name) and func.id == "zip" and len(args) == len(elts) \
                    and not any(isinstance(a, ast.Starred) for a in (*args, *elts)):
                for element, arg in zip(elts, args):
                    self.elements(element, arg)
                return
            if isinstance(func, ast.Attribute) and func.attr == "items" and not args and len(elts) == 2:
                self.targets(elts[0])
                self.elements(elts[1], func.value)  # the values of a mapping are its elements
                return
            if isinstance(func, ast.Attribute) and func.attr.startswith("named_") and len(elts) == 2:
                self.targets(elts[0])  # `for name, m in model.named_modules()`: `m` takes the elements of the pairs
                self.elements(elts[1], iterable)
                return
        self.targets(target)

    def aug_assign(self, node: ast.AugAssign) -> None:
        """`layers += [Block()]` changes the list the name holds (a tensor too): no new binding, but
        for a name this scope binds nowhere else (it is local then)."""
        if not (isinstance(node.target, ast.Name) and node.target.id in self._bindings):
            self.targets(node.target)

    def with_(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.targets(item.optional_vars)

    def except_handler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bind(node.name, node)

    def delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.targets(target)

    def global_(self, node: ast.Global) -> None:
        self.scope.global_names.update(node.names)

    def nonlocal_(self, node: ast.Nonlocal) -> None:
        self.scope.nonlocal_names.update(node.names)

    def match_case(self, node) -> None:
        for pattern in ast.walk(node.pattern):
            name = getattr(pattern, "name", None) or getattr(pattern, "rest", None)
            if name:
                self.bind(name, pattern)


_ALWAYS_RUN = (ast.With, ast.AsyncWith)  # statements whose body runs whenever they do
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_DEFINITIONS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})  # bind their name, no more
# How each kind of statement binds names (dispatched on the type: this sees every statement of every scope).
_BIND = {ast.Import: _Binder.import_, ast.ImportFrom: _Binder.import_from, ast.Assign: _Binder.assign,
         ast.AnnAssign: _Binder.ann_assign, ast.For: _Binder.for_, ast.AsyncFor: _Binder.for_,
         ast.AugAssign: _Binder.aug_assign, ast.With: _Binder.with_, ast.AsyncWith: _Binder.with_,
         ast.ExceptHandler: _Binder.except_handler, ast.Delete: _Binder.delete, ast.Global: _Binder.global_,
         ast.Nonlocal: _Binder.nonlocal_, ast.match_case: _Binder.match_case}
# The statement lists inside each kind of statement, in the order they are walked (handlers after finalbody).
_BODIES_OF = {kind: fields for kind in vars(ast).values()
              if isinstance(kind, type) and issubclass(kind, ast.AST) and kind not in _DEFINITIONS
              and (fields := tuple(f for f in (*_BODIES, "cases") if f in kind._fields))
              and (issubclass(kind, (ast.stmt, ast.excepthandler)) or kind.__name__ == "match_case")}


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

    def bind_globals(self, declared: list[tuple[ast.Global, Scope]]) -> None:
        """`global X` then `X = Net()` in a function assigns the module's `X`: the module's name
        holds it too (a model made once, lazily, by a getter that returns it or by an `init()`)."""
        bindings = self.module.bindings
        for statement, scope in declared:
            for name in statement.names:
                assigned = scope.bindings.get(name, [])
                known = bindings.setdefault(name, [])
                known += [binding for binding in assigned if binding not in known]

    def lookup(self, scope: Scope, name: str, position: tuple[int, int]) -> list[Binding]:
        """The bindings `name` may refer to when used at `position` in `scope`."""
        # A scope's `global` and `nonlocal` names are known once its bindings are collected: the
        # first lookup in a scope sees none of them.
        if name in scope.global_names:
            scope = self.module
        elif name in scope.nonlocal_names and scope.parent:
            scope = scope.parent
        bindings = (scope._bindings if scope._bindings is not None else scope.bindings).get(name)
        if bindings and len(bindings) == 1 and not scope.is_class:
            return bindings  # before the use or not, it is the one
        if not bindings or scope.is_class:
            return self._in_order(scope, name, bindings, position)
        found, after = [], []
        for binding in bindings:
            (found if binding.position <= position else after).append(binding)
        if found:  # the last one, and before it, past those in a `while` body the use comes after
            last = len(found) - 1
            while last > 0 and _skipped_loop(found[last], position):
                last -= 1
            while last > 0 and found[last - 1].node is found[last].node:  # `for f in (f1, f2)`: both
                last -= 1
            found = found[last:]
        found += [b for b in after if b.blocks and any(loop is not None and loop <= position <= end
                                                      for _, end, loop, _ in b.blocks)]
        return found or bindings

    def _in_order(self, scope: Scope, name: str, bindings: list[Binding] | None,
                  position: tuple[int, int]) -> list[Binding]:
        """The last binding before the use, for a class body (which runs once, in order) and a name
        this scope does not bind."""
        before = [b for b in bindings if b.position <= position] if bindings else None
        if not before:
            # a class body reads the enclosing scope's name until it binds its own (`act = staticmethod(act)`)
            enclosing = scope._from_enclosing.get(name)
            if enclosing is None:
                enclosing = scope._from_enclosing[name] = _enclosing_bindings(scope.parent, name)
            return enclosing or bindings or []
        if not before:
            return bindings
        # the last binding before the use; a loop over a tuple binds several at once
        last = before[-1].node
        return [b for b in before if b.node is last]

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


def _unpacked(targets: list[ast.expr], value: ast.expr | None) -> list[ast.expr | None]:
    """The value each of `targets` takes from `value`: its elements when it is a tuple or list written
    out (`a, *b = f, g, h`: `b` takes `[g, h]`); else, up to a starred target, the element at its
    place (`model, opt = setup()`: `setup()[0]`, `setup()[1]`); else unknown (None)."""
    if value is not None and not isinstance(value, (ast.Tuple, ast.List)):
        starred = next((at for at, target in enumerate(targets) if isinstance(target, ast.Starred)), len(targets))
        return [ast.copy_location(ast.Subscript(value, ast.copy_location(ast.Constant(at), value), ast.Load()), value)
                if at < starred else None for at in range(len(targets))]
    if not isinstance(value, (ast.Tuple, ast.List)) or any(isinstance(e, ast.Starred) for e in value.elts):
        return [None] * len(targets)
    starred = [index for index, target in enumerate(targets) if isinstance(target, ast.Starred)]
    elements = value.elts
    if not starred:
        return list(elements) if len(elements) == len(targets) else [None] * len(targets)
    at, after = starred[0], len(targets) - starred[0] - 1
    if len(starred) > 1 or len(elements) < at + after:
        return [None] * len(targets)
    rest = ast.copy_location(ast.List(elts=elements[at:len(elements) - after], ctx=ast.Load()), value)
    return [*elements[:at], rest, *elements[len(elements) - after:]]


def _type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING`."""
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or \
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _skipped_loop(binding: Binding, position: tuple[int, int]) -> bool:
    """Whether a binding before `position` is in the body of a loop that may run no turn on the way
    there (the use is after the loop). A branch is not looked past: `if` rebinding is too common for
    the refs of every name to take both."""
    outside = [skippable for start, end, _, skippable in binding.blocks if not start <= position <= end]
    return bool(outside) and all(outside)


def _enclosing_bindings(scope: Scope | None, name: str) -> list[Binding]:
    """The bindings of `name` in `scope` or the nearest scope enclosing it that binds it (class
    bodies do not enclose): all of them, wherever the use is."""
    while scope is not None:
        if not scope.is_class:
            bindings = scope.bindings.get(name)
            if bindings:
                return bindings
        scope = scope.parent
    return []
