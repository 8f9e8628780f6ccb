"""What a traced module is made for: export and inference, or something the file cannot rule out
differentiating (NG005's severity).

A tracer that drops a region (pytorch issue 62043) records a graph that computes the same values as
eager mode and other gradients: the difference shows only where the traced module is differentiated.
`made_for_export` follows the tracer's result through the scope it is bound in (a function, or the
module's own code): every use must be one of the sinks below, a computation whose result is followed
in turn, or a call made under `no_grad` / `inference_mode`. Anything else (returned, stored into an
attribute or a subscript, read by a nested function, passed to code the file cannot see into,
differentiated) means it may be trained: conservative, unknown is "not for export".
"""
from __future__ import annotations

import ast
from typing import Callable, Optional

from lint_nograd.analysis import torch_names
from lint_nograd.analysis.scopes import child_nodes

# Calls that take a traced module, or a value computed from it, and differentiate nothing through it.
EXPORT_SINKS = frozenset({
    "torch.jit.save", "torch.save", "torch.onnx.export", "torch.onnx.dynamo_export",
    "torch.allclose", "torch.equal", "torch.isclose", "torch.testing.assert_close",
    "torch.testing.assert_allclose",
})
# Calls that return another module running the same graph: its uses are followed in turn.
DERIVES_MODULE = frozenset({
    "torch.jit.freeze", "torch.jit.optimize_for_inference", "torch.jit._freeze.freeze",
    "torch.jit._freeze.optimize_for_inference",
})
# Calls that differentiate what they are given (an optimizer over `.parameters()` is caught at the
# attribute): a use of the traced module here is training, whatever else the scope does.
DIFFERENTIATES = frozenset({*torch_names.AUTOGRAD_GRAD, *torch_names.AUTOGRAD_BACKWARD})
DIFFERENTIATING_PREFIXES = ("torch.func.", "functorch.", "torch.autograd.functional.", "torch.optim.")
# Builtins that print, measure or compare (a name no import or assignment binds).
BUILTIN_SINKS = frozenset({"print", "repr", "str", "len", "isinstance", "type", "id", "hash", "format", "float",
                           "int", "bool"})
# Methods and attributes: those that give nothing differentiable back, and those that train.
CONSUMING_METHODS = frozenset({"save", "item", "tolist", "numpy", "detach", "size", "dim", "numel",
                               "print_readable", "to_folder", "print_tabular", "lint", "recompile"})
READ_ATTRIBUTES = frozenset({"graph", "code", "inlined_graph", "shape", "dtype", "device", "requires_grad",
                             "is_leaf", "ndim"})
DIFFERENTIATING_METHODS = frozenset({"backward", "parameters", "named_parameters", "train", "requires_grad_",
                                     "register_hook", "retain_grad", "grad"})

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_FOLLOWED = (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred, ast.Await,
             ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_MAX_USES = 200  # a value used more often than that is not followed: not for export


class ScopeUses:
    """The parents of every node of one scope's code, and where each name is read (in a nested
    function or class, or not). Built once per scope."""

    def __init__(self, scope: ast.AST):
        self.scope = scope
        self.parents: dict[ast.AST, ast.AST] = {}
        self.reads: dict[str, list[tuple[ast.Name, bool]]] = {}
        self.declared: set[str] = set()  # `global` / `nonlocal` names: stored where the file cannot follow
        body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
        stack = [(statement, scope, False) for statement in body]
        while stack:
            node, parent, nested = stack.pop()
            self.parents[node] = parent
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.reads.setdefault(node.id, []).append((node, nested))
            elif isinstance(node, (ast.Global, ast.Nonlocal)) and not nested:
                self.declared.update(node.names)
            inner = nested or isinstance(node, _NESTED)
            stack.extend((child, node, inner) for child in child_nodes(node))


def made_for_export(call: ast.expr, uses: ScopeUses, names_of: Callable[[ast.expr], frozenset[str]],
                    change_at: Callable[[ast.expr], object], calls_to_module: int = 0) -> bool:
    """Whether every use of what `call` (a tracer's call) returns, in its scope, is export or
    inference. `calls_to_module`: how many calls turn the result into the traced module (1 for
    `make_fx(f)`, which `make_fx(f)(x)` traces); `change_at`: the grad-mode change of a `with` item."""
    return _Walk(uses, names_of, change_at).run(call, calls_to_module)


class _Walk:
    def __init__(self, uses: ScopeUses, names_of, change_at):
        self.uses, self.names_of, self.change_at = uses, names_of, change_at
        self.pending: list[tuple[ast.AST, int]] = []
        self.bound: dict[str, int] = {}

    def run(self, call: ast.expr, calls_to_module: int) -> bool:
        self.pending.append((call, calls_to_module))
        steps = 0
        while self.pending:
            node, level = self.pending.pop()
            steps += 1
            if steps > _MAX_USES or not self._use(node, level):
                return False
        return True

    def _follow(self, node: ast.AST, level: int) -> bool:
        self.pending.append((node, level))
        return True

    def _bind(self, target: ast.expr, level: int) -> bool:
        """A name (or names) bound to the value: each read of it is a use. An attribute or a subscript
        stores it where the file cannot follow it."""
        if isinstance(target, (ast.Tuple, ast.List)):
            return all(self._bind(element, level) for element in target.elts)
        if isinstance(target, ast.Starred):
            return self._bind(target.value, level)
        if not isinstance(target, ast.Name) or target.id in self.uses.declared:
            return False
        if target.id in self.bound and self.bound[target.id] >= level:
            return True
        self.bound[target.id] = level
        for read, nested in self.uses.reads.get(target.id, ()):
            if nested:
                return False
            self.pending.append((read, level))
        return True

    def _use(self, node: ast.AST, level: int) -> bool:
        parent = self.uses.parents.get(node)
        if isinstance(parent, ast.Attribute):
            return self._attribute(parent, level)
        if isinstance(parent, ast.Call):
            if parent.func is node:
                if level > 0:
                    return self._follow(parent, level - 1)
                return self._under_no_grad(parent) or self._follow(parent, 0)
            return self._argument(parent, level)
        if isinstance(parent, ast.keyword):
            return self._argument(self.uses.parents.get(parent), level)
        if isinstance(parent, (ast.Compare, ast.JoinedStr, ast.FormattedValue, ast.Slice, ast.Assert, ast.Expr)):
            return True  # compared, formatted, an index, asserted, discarded
        if isinstance(parent, (ast.If, ast.While)) or isinstance(parent, ast.IfExp) and parent.test is node:
            return True
        if isinstance(parent, ast.Subscript):
            return parent.value is not node or self._follow(parent, level)
        if isinstance(parent, (ast.IfExp, *_FOLLOWED)):
            return self._follow(parent, level)
        if isinstance(parent, ast.NamedExpr):
            return self._bind(parent.target, level) and self._follow(parent, level)
        if isinstance(parent, ast.Assign):
            return all(self._bind(target, level) for target in parent.targets)
        if isinstance(parent, (ast.AnnAssign, ast.AugAssign)):
            return parent.value is node and self._bind(parent.target, level)
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)):
            return parent.iter is not node or self._bind(parent.target, level)
        return False  # returned, yielded, raised, a `with` item, ...

    def _attribute(self, attribute: ast.Attribute, level: int) -> bool:
        outer = self.uses.parents.get(attribute)
        called = isinstance(outer, ast.Call) and outer.func is attribute
        if attribute.attr in DIFFERENTIATING_METHODS:
            return False
        if called and attribute.attr in CONSUMING_METHODS or not called and attribute.attr in READ_ATTRIBUTES:
            return True
        return self._follow(outer if called else attribute, level)  # `out.sum()`, `traced.eval()`

    def _argument(self, call: Optional[ast.AST], level: int) -> bool:
        if not isinstance(call, ast.Call):
            return False
        func = call.func
        names = self.names_of(func)
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if names & DERIVES_MODULE:
            return self._follow(call, level)
        if names & DIFFERENTIATES or any(name.startswith(DIFFERENTIATING_PREFIXES) for name in names):
            return False
        if names & EXPORT_SINKS or last.startswith("assert"):
            return True  # `torch.jit.save(traced, ...)`, `self.assertEqual(traced(x), y)`
        if not names and isinstance(func, ast.Name) and func.id in BUILTIN_SINKS:
            return True
        if names and all(name.startswith("torch.") for name in names):
            return self._follow(call, level)  # a tensor operation: what it computes is followed
        return False

    def _under_no_grad(self, node: ast.AST) -> bool:
        """Called where the innermost grad-mode change around it (a `with` item, or a decorator of the
        scope's function) turns grad off for certain: its output has no graph to differentiate."""
        child, parent = node, self.uses.parents.get(node)
        while parent is not None:
            if isinstance(parent, (ast.With, ast.AsyncWith)) and child not in parent.items:
                for item in reversed(parent.items):
                    change = self.change_at(item.context_expr)
                    if change is not None:
                        return change.disables_grad and not change.when
            if parent is self.uses.scope:
                for decorator in getattr(parent, "decorator_list", ()):
                    change = self.change_at(decorator)
                    if change is not None:
                        return change.disables_grad and not change.when
                return False
            child, parent = parent, self.uses.parents.get(parent)
        return False
