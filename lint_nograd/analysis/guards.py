"""Branches a transform or tracer does not run, so that a region in them cannot change what it returns:

- TRAINING: a region under `if self.training:` (running statistics, an EMA update), where the module is
  traced or transformed in eval mode: `torch.jit.trace(model.eval(), x)`, or `model.eval()` earlier
  in the same scope with no `model.train()` between;
- ONCE: a one-time initialisation, a region under `if not self.initialized:` whose branch sets the
  flag (data-dependent init, as ActNorm does), where the same scope calls the module eagerly before
  tracing or transforming it: the trace never takes that branch.

`region_guards` reads the regions' side; `skipped_by` the call's. Both are what the file says; linking
pairs them (`Reacher.skips`).
"""
from __future__ import annotations

import ast

from lint_nograd.analysis.scopes import child_nodes, walk

TRAINING, ONCE = "training", "once"
# not a branch: a region that changes state in place (region_flow `mutates`), which a torch.func
# transform cannot run (it raises)
MUTATES = "mutates"
_SETS_FLAG = frozenset({"fill_", "copy_", "add_", "data"})  # `self.initialized.fill_(1)`, `.data.fill_(...)`


def region_guards(function: ast.AST) -> dict[int, str]:
    """For each `with` statement of the function (by id), TRAINING or ONCE when it sits in a branch
    that only runs in training mode, or only until its flag is set (the innermost such branch)."""
    found: dict[int, str] = {}

    def walk(body: list[ast.stmt], guard: str) -> None:
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(statement, (ast.With, ast.AsyncWith)) and guard:
                found[id(statement)] = guard
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                block = getattr(statement, name, None)
                if not isinstance(block, list):
                    continue
                inner = _guard_of(statement) or guard if isinstance(statement, ast.If) and name == "body" else guard
                for part in [item.body for item in block] if name in ("handlers", "cases") else [block]:
                    walk(part, inner)

    walk(function.body, "")
    return found


def _guard_of(branch: ast.If) -> str:
    if _reads_training(branch.test):
        return TRAINING
    flag = _unset_flag(branch.test)
    return ONCE if flag is not None and _sets(branch.body, flag) else ""


def _is_self_attribute(node: ast.expr, name: str | None = None) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (name is None or node.attr == name)


def _reads_training(test: ast.expr) -> bool:
    """`self.training`, or `self.training and ...`."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_reads_training(value) for value in test.values)
    return _is_self_attribute(test, "training")


def _unset_flag(test: ast.expr) -> str | None:
    """`not self.initialized` (also `.item()`, `bool(...)`), `self.initialized == 0`, `... is False`:
    the flag's name."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        value = test.operand
        if isinstance(value, ast.Call) and not value.args:  # `self.initialized.item()`
            value = value.func.value if isinstance(value.func, ast.Attribute) else value
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "bool" \
                and len(value.args) == 1:
            value = value.args[0]
        return value.attr if _is_self_attribute(value) and value.attr != "training" else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and _is_self_attribute(test.left) \
            and isinstance(test.ops[0], (ast.Eq, ast.Is)) and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value in (0, False):
        return test.left.attr
    return None


def _sets(body: list[ast.stmt], flag: str) -> bool:
    """Whether the branch stores into `self.<flag>`: assigned, or filled in place."""
    for node in (node for statement in body for node in walk(statement)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        if any(_is_self_attribute(target, flag) for target in targets):
            return True
        if isinstance(node, ast.Attribute) and node.attr in _SETS_FLAG and _is_self_attribute(node.value, flag):
            return True
    return False


def skipped_by(call: ast.Call, events: "ScopeEvents") -> tuple[str, ...]:
    """The guards whose branch the module a transform or tracer call runs cannot take: TRAINING
    when it runs in eval mode, ONCE when the scope called it eagerly before."""
    if not call.args:
        return ()
    target = call.args[0]
    if _sets_eval(target):
        return (TRAINING,)
    if not isinstance(target, (ast.Name, ast.Attribute)):
        return ()
    start = (call.lineno, call.col_offset)
    eval_mode, called = False, False
    for _, kind, node in events.of.get(ast.dump(target), ()):
        if (node.end_lineno, node.end_col_offset) > start:
            break
        if kind == "bound":
            eval_mode, called = _sets_eval(node.value), False  # bound again: what it was bound to
        elif kind == "mode":
            eval_mode = _sets_eval(node)
        else:
            called = True
    return (TRAINING,) * eval_mode + (ONCE,) * called


class ScopeEvents:
    """What the scope's own code (not nested functions) does to each name or attribute, in order:
    binds it, sets its mode (`m.eval()`, `m.train()`), calls it (`m(x)`, `m.forward(x)`). Made once
    a scope, so that each transform or tracer call looks up only its own target's."""

    def __init__(self, scope: ast.AST):
        self.of: dict[str, list] = {}
        body = getattr(scope, "body", [])
        todo = list(body) if isinstance(body, list) else [body]  # a lambda's body is one expression
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, (ast.Name, ast.Attribute)):
                        self._add(target, "bound", node)
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in ("eval", "train"):
                    self._add(func.value, "mode", node)
                elif isinstance(func, ast.Attribute) and func.attr == "forward":
                    self._add(func.value, "called", node)
                elif isinstance(func, (ast.Name, ast.Attribute)):
                    self._add(func, "called", node)
            todo.extend(child_nodes(node))
        for events in self.of.values():
            events.sort(key=lambda event: event[0])

    def _add(self, key: ast.expr, kind: str, node: ast.AST) -> None:
        if isinstance(key, (ast.Name, ast.Attribute)):
            self.of.setdefault(ast.dump(key), []).append(((node.end_lineno, node.end_col_offset), kind, node))


def _sets_eval(node: ast.expr) -> bool:
    """`m.eval()`, `m.train(False)`, `m.train(mode=False)`, `Net().eval()`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr == "eval" and not node.args and not node.keywords:
        return True
    given = [*node.args, *(k.value for k in node.keywords if k.arg == "mode")]
    return node.func.attr == "train" and len(given) == 1 and isinstance(given[0], ast.Constant) \
        and given[0].value is False
