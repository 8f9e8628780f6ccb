"""The semantic model of one file: grad-disabled regions, transform applications, backward calls.

Built once per file and queried by every rule. Work is spent only where a finding can be: one
walk over the statements (not their expressions) finds the grad-mode changes; only the bodies
holding a region are then walked in full; transform and tracer calls are looked for only on the
lines that spell their names. Lexical context is kept on stacks: each function body is a `Frame`
of its own (a function defined inside a region runs later, outside it), and grad-mode changes
nest inside it.
"""
from __future__ import annotations

import ast
import bisect
import itertools
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, Mapping, Optional

from lint_nograd.analysis import tensor_ops, torch_names
from lint_nograd.analysis.scopes import COMPREHENSION_NODES, FUNCTION_NODES, Scope, Scopes, child_nodes, walk

# the grad mode a call or class makes when entered: (api, enabled, whether it also decorates)
Mode = tuple[str, Optional[bool], bool]

_UNKNOWN = None  # a grad mode we cannot know statically: `set_grad_enabled(flag)`, a function's caller


@dataclass(eq=False)
class GradModeChange:
    """`torch.no_grad()`, `enable_grad()`, `set_grad_enabled(x)` or `inference_mode(x)`, as a `with` item
    or a decorator, or `set_grad_enabled(x)` called as a statement (it holds until the body ends).
    `enabled` is the literal argument: None when it is not a literal."""

    api: str  # "no_grad", "enable_grad", "set_grad_enabled" or "inference_mode"
    enabled: Optional[bool]
    expr: ast.expr  # the with item's context expression, or the decorator
    owner: ast.AST  # the `with` statement, the decorated function, or the call's statement
    function: Optional[ast.AST]  # the function whose body it covers (None at module level)
    when: str = ""  # a region entered only on a condition: "`self.frozen` is True" (`set_grad_enabled(flag)`, ...)
    # `for x in batches():` where `batches` yields inside a region: the loop's body runs in it too (the
    # generator is suspended inside the `with`); `expr` is the call, `owner` the loop, this the region
    leaked_from: Optional["GradModeChange"] = None
    # `with frozen():` where `frozen`, a class of this file, extends `torch.no_grad` or turns grad off in
    # its `__enter__`, or a function of it returns `torch.no_grad()`: its name (a rewrite would drop
    # whatever else it does)
    entered_by: str = ""

    @property
    def disables_grad(self) -> bool:
        return (self.api == "no_grad"
                or (self.api == "set_grad_enabled" and self.enabled is False)
                or (self.api == "inference_mode" and self.enabled is True))

    @property
    def on_stack(self) -> bool:
        """Entered by `stack.enter_context(...)`: it holds until the stack closes."""
        return isinstance(self.owner, ast.Expr) and self.owner.value is not self.expr

    @property
    def is_decorator(self) -> bool:
        return self.owner is self.function and isinstance(self.owner, (ast.FunctionDef, ast.AsyncFunctionDef))

    @property
    def at(self) -> str:
        """Where the region is, for messages: `line 12`; for a loop over a generator suspended in one,
        the loop's line and the generator's region."""
        if self.leaked_from is not None:
            return f"line {self.expr.lineno}, held by `{_last_name(self.expr.func)}`"
        return f"line {self.expr.lineno}"

    def related(self) -> tuple[tuple[str, ast.AST], ...]:
        """The places a finding under the region points to: the region; for a loop over a generator
        suspended in one, the loop's call and the generator's region."""
        if self.leaked_from is not None:
            name = _last_name(self.expr.func)
            return ((f"`{name}` yields inside its `{self.describe()}` region, still entered while the loop runs",
                     self.expr), *(((f"the `{self.describe()}` region of `{name}`", self.leaked_from.expr),)
                                   if self.leaked_from.expr is not self.expr else ()))  # (of another module)
        return ((f"the `{self.describe()}` region", self.expr),)

    def describe(self) -> str:
        if self.leaked_from is not None:
            return self.leaked_from.describe()
        if self.entered_by:
            return self.entered_by
        if self.api == "set_grad_enabled":
            return "set_grad_enabled(False)"
        return self.api


@dataclass(frozen=True)
class GradState:
    """Grad mode and inference mode at one point: True, False or None (unknown)."""

    grad_enabled: Optional[bool]
    inference: Optional[bool]
    # the innermost region that turned grad off (or, with grad mode unknown, may have: `change.when`)
    grad_region: Optional[GradModeChange] = None
    inference_region: Optional[GradModeChange] = None

    def after(self, change: GradModeChange) -> "GradState":
        if change.when:  # entered or not by a flag: nothing is known of the mode inside, but the region may be
            if change.api == "inference_mode":  # (`inference_region` with `inference` unknown: it may be)
                return GradState(_UNKNOWN, _UNKNOWN, None, change)
            return GradState(_UNKNOWN, self.inference, change, self.inference_region if self.inference else None)
        if change.api == "inference_mode":
            # inference_mode(True) turns grad off, inference_mode(False) turns it back on
            grad = _UNKNOWN if change.enabled is None else not change.enabled
            region = change if change.enabled else None
            return GradState(grad, change.enabled, region, region)
        grad = False if change.api == "no_grad" else True if change.api == "enable_grad" else change.enabled
        return GradState(grad, self.inference, change if grad is False else None, self.inference_region)

    @property
    def may_be_inference(self) -> bool:
        """In inference mode, or in a region entered on a flag that may be (`inference_mode(serve)`)."""
        return bool(self.inference_region) and (self.inference is True or self.inference is None
                                                and bool(self.inference_region.when))

    @property
    def graph_recorded(self) -> Optional[bool]:
        """False when values computed here certainly get no autograd graph."""
        if self.inference or self.grad_enabled is False:
            return False
        return None if self.grad_enabled is None or self.inference is None else True


MODULE_STATE = GradState(True, False)  # module code runs in the default mode
CALLER_STATE = GradState(_UNKNOWN, _UNKNOWN)  # a function body runs in its caller's mode
_CONTEXT_MANAGER_DECORATORS = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})
_READS_GRAD_MODE = frozenset({"torch.is_grad_enabled", "torch.is_inference_mode_enabled"})


@dataclass(eq=False)
class TransformApplication:
    """A transform that differentiates at this point: `grad(f)(x)`, `vjp(f, x)`, `df(x)` with `df = grad(f)`."""

    transform: str  # "grad", "jacrev", ... as in torch.func
    transform_call: ast.Call  # `grad(f)`
    applied_at: ast.Call  # the call that runs it: `grad(f)(x)`, or `vjp(f, x)` itself
    state: GradState
    alias: Optional[str] = None  # `df` when it runs as `df(x)` after `df = grad(f)`
    functional: bool = False  # torch.autograd.functional's (`jacobian`), not torch.func's

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
class BackwardInCallerMode:
    """`torch.autograd.grad(out, x)` where `out` is computed in the same function, in its caller's
    grad mode (or under `enable_grad()`, which lifts a caller's no_grad but not its inference
    mode): a caller running the function in a region leaves it no graph (linking tells)."""

    call: ast.Call
    function: ast.AST
    enable_grad: bool  # every value it differentiates is computed under `enable_grad()`


@dataclass(eq=False)
class BackwardThroughCall:
    """`y.backward()` where `y = f(...)`: a finding when `f` returns a value it computes in a
    grad-disabled region, which only linking the project can tell."""

    call: ast.Call
    name: str
    assigned_at: ast.stmt
    callee: ast.expr  # `f`
    scope: Scope  # where `f` is looked up
    element: Optional[int] = None  # `_, y = f(...)`: the element of what `f` returns (1)


@dataclass(eq=False)
class _GraphlessValue:
    assigned_at: ast.stmt
    region: Optional[GradModeChange]  # None: returned by `callee`, which may have computed it in a region
    blocks: tuple[int, ...]  # the branches the assignment sits in
    callee: Optional[ast.expr] = None
    scope: Optional[Scope] = None
    made: bool = False  # made from literals by torch's functions (`torch.randint(0, 3, (6,))`): no graph anywhere
    element: Optional[int] = None  # `loss, k = f(b)`: the element of what `callee` returns


@dataclass(eq=False)
class Frame:
    """The lexical context of one function body (or the module, or a class body)."""

    function: Optional[ast.AST]
    state: GradState
    states: list[GradState] = field(default_factory=list)  # the stack of states, innermost last
    blocks: list[int] = field(default_factory=list)  # the branches of `if`/`for`/`try` we are inside
    graphless: dict[str, _GraphlessValue] = field(default_factory=dict)
    # the names bound to an empty list (`outs = []`), until something is put in it: (statement, blocks)
    empty_lists: dict[str, tuple[ast.stmt, tuple[int, ...]]] = field(default_factory=dict)
    # the names computed by an operation where the caller's mode holds: (under `enable_grad()`, blocks)
    in_caller_mode: dict[str, tuple[bool, tuple[int, ...]]] = field(default_factory=dict)
    stacks: list[tuple[int, int]] = field(default_factory=list)  # for each ExitStack open: len(states), len(blocks)
    conditions: int = 0  # the branches of `if`/`while`/`match`/`except` we are inside (a loop's body is none)

    def push(self, change: GradModeChange | None) -> None:
        self.states.append(self.state)
        self.state = self.state.after(change) if change else self.state

    def pop(self) -> None:
        self.state = self.states.pop()

    def open_stack(self) -> None:
        """`with ExitStack() as stack:`: what its body enters holds until the body ends."""
        self.push(None)
        self.stacks.append((len(self.states), len(self.blocks)))

    def close_stack(self) -> None:
        self.stacks.pop()
        self.pop()

    def set_from_here(self, change: GradModeChange) -> None:
        """`torch.set_grad_enabled(False)` called as a statement: it holds for the rest of the body.
        Inside a branch or a `with`, what holds after it is not known: nothing is, from there on.
        `stack.enter_context(torch.no_grad())` in the body of `with ExitStack() as stack`: the same,
        until that body ends."""
        if change.on_stack and self.stacks:
            level, blocks = self.stacks[-1]
            if (level, blocks) != (len(self.states), len(self.blocks)):  # in a branch or a `with` of the body
                self.states[level:] = [CALLER_STATE] * (len(self.states) - level)
                self.state = CALLER_STATE
            else:
                self.state = self.state.after(change)
        elif self.states or self.blocks:
            self.states = [CALLER_STATE] * len(self.states)
            self.state = CALLER_STATE
        else:
            self.state = self.state.after(change)


# Fields that never hold a node a walk needs: identifiers, numbers, contexts and operators.
_NOT_NODES = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "names", "asname", "module", "level", "kind",
                        "type_comment", "conversion", "is_async", "simple", "tag", "rest"})
_NOTHING_BELOW = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


class TableVisitor(ast.NodeVisitor):
    """A NodeVisitor that dispatches through a table by the node's type, and visits only the fields
    that can hold nodes: walks over every node of a file spend most of their time dispatching.
    `leaves` (a class keyword): the types whose nodes hold nothing the walk needs, never visited."""

    _visitors: dict[type, Callable] = {}

    def __init_subclass__(cls, leaves: frozenset = frozenset(), **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls._visitors = {kind: getattr(cls, "visit_" + kind.__name__, cls.generic_visit) for kind in _NODE_TYPES
                         if kind not in leaves and kind is not ast.Constant and not issubclass(kind, _NOTHING_BELOW)}

    def visit(self, node: ast.AST | None) -> None:
        visit = self._visitors.get(type(node))
        if visit is not None:
            visit(self, node)

    def _visit_all(self, nodes) -> None:
        """Visit each of `nodes` (None skipped)."""
        visitors = self._visitors
        for node in nodes:
            visit = visitors.get(type(node))
            if visit is not None:
                visit(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        visitors = self._visitors
        for name in _CHILDREN[type(node)]:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    visit = visitors.get(type(item))
                    if visit is not None:
                        visit(self, item)
            else:
                visit = visitors.get(type(value))
                if visit is not None:
                    visit(self, value)


_NODE_TYPES = [kind for kind in vars(ast).values() if isinstance(kind, type) and issubclass(kind, ast.AST)]
_CHILDREN = {kind: tuple(name for name in kind._fields if name not in _NOT_NODES) for kind in _NODE_TYPES}


# Calls whose result is an existing object, not one computed by an operation.
_NOT_OPERATIONS = frozenset({"getattr", "next", "iter", "get", "pop", "setdefault", "popitem"})
_SCOPE_NODES = (*FUNCTION_NODES, ast.ClassDef, *COMPREHENSION_NODES)
_ALIASED = (ast.Name, ast.Attribute)  # `ng = torch.no_grad`, `self.frozen = torch.no_grad()`


class SemanticModel:
    """Finds every grad-mode change with one walk over the statements (cheap: no expressions),
    then walks in full only the bodies that hold a grad-disabling region."""

    def __init__(self, module: ast.Module, text: str | None = None, makers: Mapping[str, Mode] | None = None):
        self.module = module
        self.text = text  # the source, when known: it lets `calls_naming` skip most statements
        # what other modules of the project define that makes a grad mode when called (`region_makers`),
        # by the qualified name this file spells it with: `.utils.frozen` after `from .utils import frozen`
        self.makers = makers or {}
        self.scopes = Scopes(module)
        self.statements: list[tuple[ast.stmt, Scope]] = []  # every statement, with its scope, in order
        self.grad_mode_changes: list[GradModeChange] = []
        self.applications: list[TransformApplication] = []
        self.graphless_backwards: list[GraphlessBackward] = []
        self.caller_mode_backwards: list[BackwardInCallerMode] = []
        self._change_of: dict[ast.expr, GradModeChange] = {}
        self._frames_with_regions: dict[ast.AST, None] = {}  # an ordered set
        self._taken_names: dict[str, int] = {}
        self._candidates: list[tuple[ast.expr, Scope, ast.AST, Optional[ast.AST], ast.AST]] = []
        self._loops: list[tuple[ast.For | ast.AsyncFor, Scope, Optional[ast.AST], ast.AST]] = []  # over a call
        self._aliases: list[tuple[str, str]] = []  # (alias, the name it stands for)
        self._classes: list[tuple[ast.ClassDef, Scope]] = []  # every class, for those entering regions
        # `_class_mode`, `_mode_made_by`: of the classes and the functions looked at
        self._class_modes: dict[ast.AST, Optional[Mode]] = {}
        self._pure: dict[ast.AST, bool] = {}  # `computes_from_parameters`, of the functions looked at
        self._pure_depth = 0  # how many of them are being looked at, one inside another
        # `held_by_self`: by (class, attribute name), each store of a method into `self.<name>`
        self._self_stores: Optional[dict[tuple[ast.AST, str], list[tuple[Optional[ast.expr], Scope]]]] = None
        # `loss`, `Net.forward`, `outer.<locals>.inner` (Python's __qualname__; `f#2` for a second `f`)
        self.qualified_name: dict[ast.AST, str] = {}
        self.returns: dict[ast.AST, list[Optional[GradModeChange]]] = {}  # per walked function: graphless returns
        # per walked function, of each return: the region computing each element of a tuple it hands back
        self.element_returns: dict[ast.AST, list[Optional[tuple[Optional[GradModeChange], ...]]]] = {}
        self.backwards_through_calls: list[BackwardThroughCall] = []
        self._yield_lines: Optional[list[int]] = None  # the lines that spell `yield` (`yields`)
        self._globals: list[tuple[ast.Global, Scope]] = []  # `global` statements of functions
        self._find_candidates(module.body, self.scopes.module, module, "")
        if self._globals:
            self.scopes.bind_globals(self._globals)
        self._classify_candidates()
        if self._loops:
            self._classify_loops()
        backward = self._frames_with_backward()
        for frame_node in {**self._frames_with_regions, **backward}:
            _FrameWalker(self, frame_node, frame_node in backward).walk()

    @property
    def regions(self) -> list[GradModeChange]:
        """The regions that disable grad, and those that do when a flag says so."""
        return [change for change in self.grad_mode_changes
                if (change.disables_grad or change.when) and change.leaked_from is None]

    # -- what an expression refers to ---------------------------------------------------------

    def qualified_names(self, expr: ast.expr, scope: Scope | None = None) -> frozenset[str]:
        return self.scopes.qualified_names(expr, scope or self.scopes.module)

    def grad_mode_change(self, expr: ast.expr, scope: Scope, owner: ast.AST,
                         function: ast.AST | None) -> GradModeChange | None:
        """Classify a `with` item or decorator: `torch.no_grad()`, `@torch.inference_mode`, ...;
        or a statement: `torch.set_grad_enabled(False)`, `stack.enter_context(torch.no_grad())`."""
        entered = isinstance(owner, (ast.With, ast.AsyncWith))
        outer = expr
        if isinstance(owner, ast.Expr) and (inner := _entered_context(expr)) is not None:
            expr, entered = inner, True  # an ExitStack enters it: it holds until the stack closes
        call = expr if isinstance(expr, ast.Call) else None
        when = ""
        if entered and call is None:
            # `with frozen:` after `frozen = torch.no_grad()`; `with torch.no_grad:` is no context manager
            chosen, scope = (expr, scope) if isinstance(expr, ast.IfExp) else self._region_object(expr, scope)
            if isinstance(chosen, ast.IfExp):  # `torch.no_grad() if frozen else nullcontext()`
                chosen, when = _chosen_region(chosen)
            call = chosen
            if call is None:
                return None
        target = call.func if call else expr
        if not isinstance(target, (ast.Name, ast.Attribute)):
            return None
        api_name, entered_by = _api_named(self.scopes.qualified_names(target, scope)), ""
        if api_name is None:  # `with frozen():`, `@frozen()`, `frozen` a class or function of this file
            mode = self._mode_made_by(target, scope)
            # a decorator, only of a class that sets the mode as its grad-mode base does (not in `__enter__`)
            if mode is None or not entered and (isinstance(owner, ast.Expr) or not mode[2] or len(mode) > 3):
                return None
            api_name, enabled, entered_by = mode[0], mode[1], _last_name(target)
            if len(mode) > 3:  # `with no_grad_if(cfg.freeze):`: entered on the value of an argument
                when = _flagged_when(call, *mode[3])
                if when is None:
                    return None
                enabled = False if not when and enabled is _UNKNOWN else enabled  # (`grad_enabled(False)`)
        elif not entered and isinstance(owner, ast.Expr) and api_name != "set_grad_enabled":
            return None  # of the four, only set_grad_enabled acts when merely called
        else:
            enabled = {"no_grad": False, "enable_grad": True}.get(api_name)
        if api_name in ("set_grad_enabled", "inference_mode") and not entered_by:
            enabled = _literal_mode(call, keyword="mode", default=api_name == "inference_mode")
            # `with set_grad_enabled(self.training):`, or the call as a statement, but not the one that
            # restores the mode it found (`prev = torch.is_grad_enabled()`, then `set_grad_enabled(prev)`)
            # nor one an ExitStack enters
            if enabled is _UNKNOWN and not (isinstance(owner, ast.Expr) and owner.value is not expr):
                flag = call.args[0] if call.args else next(k.value for k in call.keywords if k.arg == "mode")
                if not (isinstance(owner, ast.Expr) and self._restores_mode(flag, scope)):
                    when = _when(flag, api_name == "inference_mode")
        if when and api_name == "enable_grad":
            return None  # chosen by a flag, it turns grad on or leaves it as it is
        change = GradModeChange(api_name, enabled, expr, owner, function, when, entered_by=entered_by)
        self.grad_mode_changes.append(change)
        self._change_of[expr] = self._change_of[outer] = change
        return change

    def _restores_mode(self, flag: ast.expr, scope: Scope) -> bool:
        """Whether `set_grad_enabled(flag)` puts back a mode read before: `flag` a name the function
        binds to `torch.is_grad_enabled()` (`prev = torch.is_grad_enabled()`), or an attribute that
        the file sets to it (`self._prev = torch.is_grad_enabled()`)."""
        if isinstance(flag, ast.Name):
            return any(self._reads_grad_mode(binding.value, binding.scope)
                       for binding in self.scopes.lookup(scope, flag.id, (flag.lineno, flag.col_offset)))
        if isinstance(flag, ast.Attribute):
            return any(self._reads_grad_mode(statement.value, where) for statement, where in self.statements
                       if isinstance(statement, ast.Assign) and any(
                           isinstance(target, ast.Attribute) and target.attr == flag.attr for target in statement.targets))
        return False

    def _reads_grad_mode(self, value: ast.expr | None, scope: Scope) -> bool:
        return isinstance(value, ast.Call) and bool(self.qualified_names(value.func, scope) & _READS_GRAD_MODE)

    def _mode_made_by(self, target: ast.expr, scope: Scope) -> Optional[Mode]:
        """The grad mode that calling what a name is bound to, alone, makes: a class of this file
        (`_class_mode`), or a function of it whose every `return` makes the same one
        (`def frozen(): return torch.no_grad()`); or one another module of the project defines
        (`makers`: `with utils.frozen():`)."""
        if self.makers and isinstance(target, (ast.Name, ast.Attribute)):
            imported = next((self.makers[name] for name in self.scopes.qualified_names(target, scope)
                             if name in self.makers), None)
            if imported is not None:
                return imported if imported[2] is not None else None  # (not a generator a loop enters)
        if type(target) is not ast.Name:
            return None
        binding = self.scopes.only_binding(target, scope)
        return self._mode_defined(binding.node, binding.scope) if binding is not None else None

    def _mode_defined(self, node: ast.AST, scope: Scope) -> Optional[Mode]:
        """`_mode_made_by` for the definition a name is bound to."""
        if type(node) is ast.ClassDef:
            return self._class_mode(node, scope)
        if type(node) is not ast.FunctionDef:
            return None
        if node in self._class_modes:
            return self._class_modes[node]
        self._class_modes[node] = None  # (a function returning what it returns makes none)
        inner = self.scopes.of.get(node, scope)
        if any(self.qualified_names(d, scope) & _CONTEXT_MANAGER_DECORATORS for d in node.decorator_list):
            found = self._class_modes[node] = self._yielded_in_mode(node, inner)
            return found
        wrapped = self._wrapper_mode(node, inner)
        if wrapped is not None:
            self._class_modes[node] = wrapped
            return wrapped
        returned = {self._made_mode(statement.value, inner) if statement.value is not None else None
                    for statement in _returns(node.body)}
        found = self._class_modes[node] = returned.pop() if len(returned) == 1 else None
        return found

    def computes_from_parameters(self, name: ast.Name, scope: Scope) -> bool:
        """Whether `name` is a function of this file whose body only binds names and returns values
        computed from its parameters by torch's functions, arithmetic and tensor methods (`def
        logp(x): return -(x ** 2).sum()`), also in a grad-mode `with` (which makes no graph): its
        result has a graph only when an argument has one. Anything else (a decorator, another
        `with`, a branch, a name of another scope, a call of another function) and it is not known."""
        binding = self.scopes.only_binding(name, scope)
        node = binding.node if binding is not None else None
        if type(node) is not ast.FunctionDef or node.decorator_list:
            return False
        if node not in self._pure:
            if self._pure_depth >= _MAX_PURE_DEPTH:  # (a chain of helpers this long is not followed)
                return False
            self._pure[node] = False  # (a function calling itself is not known)
            self._pure_depth += 1
            try:
                self._pure[node] = self._from_parameters(node, self.scopes.of.get(node, binding.scope))
            finally:
                self._pure_depth -= 1
        return self._pure[node]

    def _from_parameters(self, function: ast.FunctionDef, scope: Scope) -> bool:
        arguments = function.args
        known = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
        is_torch = lambda func: is_torch_operation(self.qualified_names(func, scope)) or \
            type(func) is ast.Name and self.computes_from_parameters(func, scope)
        body = [statement for statement in function.body if not _is_docstring(statement)]
        statements = list(reversed(body))
        while statements:
            statement = statements.pop()
            kind = type(statement)
            if kind is ast.With and all(item.optional_vars is None and type(item.context_expr) is ast.Call and
                                        self.qualified_names(item.context_expr.func, scope) & torch_names.GRAD_MODE_APIS
                                        for item in statement.items):
                statements += reversed(statement.body)  # `with torch.no_grad(): w = (1 - p) ** 2`: no new graph
                continue
            value = statement.value if kind in (ast.Assign, ast.AugAssign, ast.Return) else None
            sources = graph_sources(value, is_torch, lambda name: True) if value is not None else None
            if sources is None or not all(type(source) is ast.Name and source.id in known for source in sources):
                return False
            if kind is ast.Assign:  # `x, y = z[..., 0], z[..., 1]`: each name computed from them
                if not all(type(target) in (ast.Name, ast.Tuple, ast.List) for target in statement.targets):
                    return False
                known.update(name for target in statement.targets for name in _assigned_names(target))
            elif kind is ast.AugAssign and (type(statement.target) is not ast.Name or statement.target.id not in known):
                return False
        return bool(body) and type(body[-1]) is ast.Return

    def held_by_self(self, node: ast.Attribute, scope: Scope) -> tuple[ast.expr, Scope] | None:
        """What `self.<name>` holds, read in a method, when the methods of its class store the name
        once (`self.score = vmap(grad(logp))` in `__init__`): the value stored, and the scope it is
        computed in. None when another store may set it (two stores, `self.a, self.b = ...`,
        `self.n += 1`, `setattr`) or the class stores nothing of that name."""
        owner = scope.parent
        method = scope.node
        if not (owner is not None and owner.is_class and type(node.value) is ast.Name and type(method) in
                (ast.FunctionDef, ast.AsyncFunctionDef) and method.args.args and method.args.args[0].arg == node.value.id):
            return None
        if self._self_stores is None:
            self._self_stores = {}
            if self.text is None or "setattr" not in self.text:
                for statement, where in self.statements:
                    self._note_self_store(statement, where)
        stores = self._self_stores.get((owner.node, node.attr))
        return stores[0] if stores is not None and len(stores) == 1 and stores[0][0] is not None else None

    def _note_self_store(self, statement: ast.stmt, scope: Scope) -> None:
        owner, method = scope.parent, scope.node
        if owner is None or not owner.is_class or type(method) not in (ast.FunctionDef, ast.AsyncFunctionDef) \
                or not method.args.args:
            return
        kind = type(statement)
        targets = statement.targets if kind is ast.Assign else [statement.target] \
            if kind in (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor) else []
        itself = method.args.args[0].arg
        for target in targets:
            for node in walk(target):
                if type(node) is ast.Attribute and type(node.value) is ast.Name and node.value.id == itself:
                    known = kind in (ast.Assign, ast.AnnAssign) and node is target and len(targets) == 1
                    self._self_stores.setdefault((owner.node, node.attr), []).append(
                        (statement.value if known else None, scope))

    def transform_run_by(self, callee: ast.expr, scope: Scope) -> tuple[str, ast.Call, Optional[str]] | None:
        """The transform that `callee(...)` runs, the call making it and the name it runs as: `grad(f)`
        for `grad(f)(x)`, `vmap(grad(f))(x)`, `df(x)` after `df = grad(f)`, `self.df(x)` after
        `self.df = grad(f)` in a method (`held_by_self`)."""
        alias = None
        for _ in range(8):
            if type(callee) is ast.Name:
                binding = self.scopes.only_binding(callee, scope)
                if binding is None or binding.value is None:
                    return None
                alias = alias or callee.id
                callee, scope = binding.value, binding.scope
            elif type(callee) is ast.Attribute:
                held = self.held_by_self(callee, scope)
                if held is None:
                    return None
                alias = alias or ast.unparse(callee)
                callee, scope = held
            elif type(callee) is ast.Call:
                names = self.scopes.qualified_names(callee.func, scope)
                transform = torch_names.transform_name(names)
                if transform in torch_names.IMMEDIATE_TRANSFORMS:
                    return None
                if transform:
                    return transform, callee, alias
                if not (names & (torch_names.VMAP | torch_names.FUNCTIONALIZE) and callee.args):
                    return None
                callee = callee.args[0]  # vmap itself does not differentiate: look inside it
            else:
                return None
        return None

    def makes_grad_mode(self, function: ast.AST) -> bool:
        """Whether a function of this file makes a grad mode when called or entered (`_mode_made_by`)."""
        inner = self.scopes.of.get(function)
        return inner is not None and inner.parent is not None and self._mode_defined(function, inner.parent) is not None

    def region_makers(self) -> dict[str, Mode]:
        """The functions and classes this module defines at its top level that make a grad mode
        when called or entered (`with frozen():`, `@frozen`), by name: what modules importing them
        give their model as `makers`."""
        found = {}
        for node in self.module.body:
            if type(node) in (ast.FunctionDef, ast.ClassDef) and \
                    len(self.scopes.module.bindings.get(node.name, ())) == 1:  # bound once, by this definition
                mode = self._mode_defined(node, self.scopes.module) or self._iterated_mode(node)
                if mode is not None:
                    found[node.name] = mode
        return found

    def _iterated_mode(self, node: ast.AST) -> Optional[Mode]:
        """The mode a generator function of this file yields in (every `yield` inside the same
        disabling region, no condition), marked as one a loop over it enters (`decorates` None):
        `for x in langevin(...)` runs its body there, the generator suspended in the region."""
        if type(node) is not ast.FunctionDef or node.decorator_list or not self.yields(node):
            return None
        mode = self._yielded_in_mode(node, self.scopes.of.get(node, self.scopes.module))
        return (mode[0], mode[1], None) if mode is not None and len(mode) == 3 and GradModeChange(
            mode[0], mode[1], node, node, None).disables_grad else None

    def _wrapper_mode(self, function: ast.FunctionDef, scope: Scope,
                      factory: bool = True) -> Optional[Mode]:
        """The mode a decorator of this file runs the function it decorates in, when it returns a
        wrapper doing nothing else: `def without_autograd(fn): @wraps(fn) def wrapper(*a, **k): with
        torch.no_grad(): return fn(*a, **k)` then `return wrapper`; also a factory returning such
        a decorator (`@frozen()`). The wrapper may be decorated instead (`@torch.no_grad()` on it), and
        the decorator may return the call form (`return torch.inference_mode()(fn)`)."""
        returned = [node.value for node in _returns(function.body)]
        given = [arg.arg for arg in function.args.args]
        if len(returned) != 1:
            return None
        value = returned[0]
        if type(value) is ast.Call and type(value.func) is ast.Call and not value.keywords and \
                [type(arg) is ast.Name and arg.id for arg in value.args] == given:  # `torch.no_grad()(fn)`
            mode = self._made_mode(value.func, scope)
            return (mode[0], mode[1], True) if mode is not None else None
        inner = next((statement for statement in function.body if type(statement) is ast.FunctionDef
                      and type(value) is ast.Name and statement.name == value.id), None)
        if inner is None:
            return None
        inner_scope = self.scopes.of.get(inner, scope)
        body = [statement for statement in inner.body if not _is_docstring(statement)]
        calls_given = lambda statement: type(statement) is ast.Return and type(statement.value) is ast.Call \
            and type(statement.value.func) is ast.Name and statement.value.func.id == given[0]
        if len(given) == 1 and len(body) == 1 and type(body[0]) is ast.With and len(body[0].items) == 1 \
                and len(body[0].body) == 1 and calls_given(body[0].body[0]):
            mode = self._made_mode(body[0].items[0].context_expr, inner_scope)
            return (mode[0], mode[1], True) if mode is not None else None
        if len(given) == 1 and len(body) == 1 and calls_given(body[0]):
            for decorator in inner.decorator_list:
                mode = self._made_mode(decorator, scope, called=type(decorator) is ast.Call)
                if mode is not None:
                    return mode[0], mode[1], True
        return self._wrapper_mode(inner, inner_scope, False) if factory else None

    def _yielded_in_mode(self, function: ast.FunctionDef, scope: Scope) -> Optional[Mode]:
        """`@contextmanager def evaluating(m): ... with torch.no_grad(): yield m`: the body of
        `with evaluating(net):` runs while the generator is suspended at its `yield`, so in the mode
        every `yield` of it is in (None when they differ or one is outside every region). A mode
        entered on the value of a parameter (`if flag: with torch.no_grad(): yield`, else `yield`;
        `with torch.set_grad_enabled(enabled): yield`) is one more element: (its position, its
        name, the value that enters it), which each `with` using it reads in its arguments."""
        params = [arg.arg for arg in (*function.args.posonlyargs, *function.args.args)]
        found: set = set()  # (mode, condition): None, or (parameter, value), or () when it is not one test
        todo: list[tuple[ast.AST, Optional[tuple], Optional[tuple]]] = [(s, None, None) for s in function.body]
        while todo:
            node, mode, condition = todo.pop()
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                found.add((mode, condition))
            if isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    made = self._made_mode(item.context_expr, scope)
                    flag = _parameter_test(item.context_expr.args[0], params) if made is None and \
                        self._sets_grad_mode_by_argument(item.context_expr, scope) else None
                    if flag is not None:  # `torch.set_grad_enabled(enabled)`: off when `enabled` is False
                        made, condition = ("set_grad_enabled", _UNKNOWN, False), (flag[0], not flag[1]) \
                            if condition is None else ()
                    mode = made or mode
            if type(node) is ast.If and (flag := _parameter_test(node.test, params)) is not None:
                todo.extend((child, mode, (flag[0], flag[1]) if condition is None else ()) for child in node.body)
                todo.extend((child, mode, (flag[0], not flag[1]) if condition is None else ()) for child in node.orelse)
            elif not isinstance(node, (*FUNCTION_NODES, ast.ClassDef)):
                todo.extend((child, mode, condition) for child in ast.iter_child_nodes(node))
        entered = {(mode, condition) for mode, condition in found if mode is not None}
        if len(entered) != 1:
            return None
        (mode, condition), = entered
        others = {condition for mode, condition in found if mode is None}
        if condition is None:
            return (mode[0], mode[1], False) if not others else None
        if not condition or not all(other and other == (condition[0], not condition[1]) for other in others):
            return None
        return mode[0], mode[1], False, (params.index(condition[0]), condition[0], condition[1])

    def _class_mode(self, cls: ast.ClassDef, scope: Scope) -> Optional[Mode]:
        """(api, enabled, whether it also decorates) for the grad mode that entering an object of a
        class of this file sets, or None when it sets none we know of: that of the grad-mode class it
        extends (`class frozen(torch.no_grad)`), unless its own `__enter__` says otherwise, where the
        last change its body makes holds: `torch.set_grad_enabled(False)`, `super().__enter__()`,
        `self.context.__enter__()` on a grad-mode object. A change under a condition or in a loop
        there makes the mode unknown."""
        if cls in self._class_modes:
            return self._class_modes[cls]
        self._class_modes[cls] = None  # (a class that extends itself through its names sets none)
        inherited = None
        for base in cls.bases:
            inherited = self._made_mode(base, scope, called=False)
            if inherited is not None:
                break
        enter = _defines(cls, "__enter__")
        found = inherited
        if enter is not None:
            found, inner = None, self.scopes.of.get(enter, scope)
            for statement in enter.body:
                if type(statement) in _COMPOUND:
                    if any(type(node) is ast.Call and _last_name(node.func) in _ENTERING
                           for node in ast.walk(statement)):
                        found = None
                        break
                    continue
                call = statement.value if type(statement) in (ast.Expr, ast.Return) else None  # `return super()...`
                if type(call) is not ast.Call or _last_name(call.func) not in _ENTERING:
                    continue
                if _last_name(call.func) != "__enter__":  # `torch.set_grad_enabled(False)`
                    if _api_named(self.scopes.qualified_names(call.func, inner)) == "set_grad_enabled":
                        found = self._made_mode(call, inner)
                    continue
                entered = call.func.value
                if type(entered) is ast.Call and type(entered.func) is ast.Name and entered.func.id == "super" \
                        or any(ast.dump(entered) == ast.dump(base) for base in cls.bases):  # `Base.__enter__(self)`
                    found = inherited
                elif type(entered) is ast.Call:  # `torch.no_grad().__enter__()`
                    found = self._made_mode(entered, inner)
                else:  # `self.context.__enter__()` after `self.context = torch.no_grad()`
                    made, at = self._region_object(entered, inner)
                    found = self._made_mode(made, at) if made is not None else None
            found = found and (found[0], found[1], _decorates_by_entering(cls))
        self._class_modes[cls] = found
        return found

    def _made_mode(self, expr: ast.expr, scope: Scope,
                   called: bool = True) -> Optional[Mode]:
        """The grad mode a call (`called`) or a class sets when entered: `torch.no_grad()`,
        `torch.set_grad_enabled(False)`, `frozen()` for a class of this file (`_class_mode`); None
        for a mode a flag chooses."""
        if called and type(expr) is ast.IfExp:  # `torch.inference_mode() if serving else torch.no_grad()`
            modes = {self._made_mode(expr.body, scope), self._made_mode(expr.orelse, scope)}
            return ("no_grad", False, True) if None not in modes and all(
                GradModeChange(*mode[:2], expr, expr, None).disables_grad for mode in modes) else None
        if called:
            if type(expr) is not ast.Call:
                return None
            call, expr = expr, expr.func
        if not isinstance(expr, (ast.Name, ast.Attribute)):
            return None
        api = _api_named(self.scopes.qualified_names(expr, scope))
        if api is None:
            mode = self._mode_made_by(expr, scope)
            if mode is not None and len(mode) > 3:  # entered on an argument's value: only a literal tells
                return (mode[0], False if mode[1] is _UNKNOWN else mode[1], mode[2]) \
                    if _flagged_when(call if called else None, *mode[3]) == "" else None
            return mode
        if api in ("set_grad_enabled", "inference_mode"):
            if not called:  # extending one: the mode its `__init__` is given, not followed
                return None if api == "set_grad_enabled" else (api, True, True)
            enabled = _literal_mode(call, keyword="mode", default=api == "inference_mode")
            return None if enabled is _UNKNOWN else (api, enabled, True)
        return api, api == "enable_grad", True

    def _sets_grad_mode_by_argument(self, expr: ast.expr, scope: Scope) -> bool:
        """`torch.set_grad_enabled(enabled)`, its one argument not a literal."""
        return type(expr) is ast.Call and len(expr.args) == 1 and not expr.keywords \
            and _api_named(self.qualified_names(expr.func, scope)) == "set_grad_enabled"

    def _region_object(self, expr: ast.expr, scope: Scope) -> tuple[ast.Call | None, Scope]:
        """The call that made the object a `with` item names: `frozen = torch.no_grad()`, or
        `self.frozen = torch.no_grad()` in a method of the class (the same call in every method)."""
        if isinstance(expr, ast.Name):
            binding = self.scopes.only_binding(expr, scope)
            if binding is not None and isinstance(binding.value, (ast.Call, ast.IfExp)):
                return binding.value, binding.scope
            return None, scope
        if not (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)):
            return None, scope
        method = scope
        while method.parent is not None and not method.parent.is_class:
            method = method.parent
        if method.parent is None or not isinstance(method.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None, scope
        owner = method.parent
        values = [node.value for function in owner.node.body if isinstance(function, ast.FunctionDef)
                  for node in walk(function) if isinstance(node, ast.Assign)
                  for target in node.targets if isinstance(target, ast.Attribute) and target.attr == expr.attr
                  and isinstance(target.value, ast.Name) and target.value.id == expr.value.id
                  and not (type(node.value) is ast.Constant and node.value.value is None)]  # (`= None` first)
        if values and all(isinstance(v, (ast.Call, ast.IfExp)) and ast.dump(v) == ast.dump(values[0]) for v in values):
            return values[0], method if type(values[0]) is ast.IfExp else owner.parent
        return None, scope

    def change_at(self, expr: ast.expr) -> GradModeChange | None:
        return self._change_of.get(expr)

    # -- the statement walk -----------------------------------------------------------------------

    def _find_candidates(self, statements: list, scope: Scope, frame_node: ast.AST, prefix: str) -> None:
        """Collect the `with` items and decorators that may change grad mode, alias names, and the
        qualified name of each definition. This visits every statement of the file: it dispatches
        on the type, for speed."""
        function = frame_node if isinstance(frame_node, FUNCTION_NODES) else None
        add_statement = self.statements.append
        for node in statements:
            add_statement((node, scope))
            kind = type(node)
            if kind not in _COMPOUND:
                if kind is ast.Expr:
                    if type(node.value) is ast.Call:
                        self._candidates.append((node.value, scope, node, function, frame_node))
                elif kind is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) in _ALIASED:
                    value = node.value.func if type(node.value) is ast.Call else node.value  # `frozen = no_grad()`
                    target = node.targets[0]
                    self._aliases.append((target.id if type(target) is ast.Name else target.attr, _last_name(value)))
                elif kind is ast.Import or kind is ast.ImportFrom:
                    self._aliases += [(a.asname, a.name.rpartition(".")[2]) for a in node.names if a.asname]
                elif kind is ast.Global and function is not None:
                    self._globals.append((node, scope))
                continue
            if kind is ast.ClassDef or kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                inner = self.scopes.enter(node, scope)
                name = self._unique(prefix + node.name)
                self.qualified_name[node] = name
                if kind is not ast.ClassDef:
                    self._candidates += [(d, scope, node, node, node) for d in node.decorator_list]
                    self._find_candidates(node.body, inner, node, name + ".<locals>.")
                else:
                    self._classes.append((node, scope))
                    self._find_candidates(node.body, inner, node, name + ".")
                continue
            if kind is ast.With or kind is ast.AsyncWith:
                self._candidates += [(item.context_expr, scope, node, function, frame_node)
                                     for item in node.items]
            elif (kind is ast.For or kind is ast.AsyncFor) and type(node.iter) is ast.Call:
                self._loops.append((node, scope, function, frame_node))
            for block in _blocks(node):
                if block:
                    self._find_candidates(block, scope, frame_node, prefix)

    def _unique(self, name: str) -> str:
        if name not in self._taken_names:
            self._taken_names[name] = 1
            return name
        self._taken_names[name] += 1
        return f"{name}#{self._taken_names[name]}"

    def yields(self, function: ast.AST) -> bool:
        """Whether a function is a generator (`yields_in` its body), walking only a function whose
        lines spell `yield`."""
        if self.text is not None:
            if self._yield_lines is None:
                self._yield_lines = _lines_of(self.text, word_offsets(self.text, ("yield",)))
            lines = self._yield_lines
            index = bisect.bisect_left(lines, function.lineno)
            if index == len(lines) or lines[index] > (function.end_lineno or function.lineno):
                return False
        return yields_in(function.body)

    def name_of(self, function: ast.AST) -> str:
        """A function's qualified name in its module (a lambda is named by its position)."""
        if isinstance(function, ast.Lambda):
            return f"<lambda>@{function.lineno}:{function.col_offset}"
        return self.qualified_name[function]

    def _frames_with_backward(self) -> dict[ast.AST, None]:
        """The bodies that call `.backward()` or `torch.autograd.grad`/`backward` (for NG003)."""
        if self.text is not None and "backward" not in self.text and "autograd" not in self.text:
            return {}
        frames: dict[ast.AST, None] = {}
        for call, scope in self.calls_naming(("backward", "grad")):
            func = call.func
            if (isinstance(func, ast.Attribute) and func.attr == "backward") or \
                    self.scopes.qualified_names(func, scope) & (torch_names.AUTOGRAD_GRAD | torch_names.AUTOGRAD_BACKWARD):
                while isinstance(scope.node, (ast.Lambda, *COMPREHENSION_NODES)):
                    scope = scope.parent
                frames[scope.node] = None
        return frames

    def _with_aliases(self, names) -> set[str]:
        """The names, and every name bound to one of them: `ng` after `ng = torch.no_grad`."""
        words = set(names)
        while True:
            more = {alias for alias, name in self._aliases if name in words} - words
            if not more:
                return words
            words |= more

    def _classify_candidates(self) -> None:
        """Resolve the candidates whose last name may be a grad-mode API: only those cost a lookup."""
        words = self._with_aliases({*torch_names.GRAD_MODE_WORDS, *(name.rpartition(".")[2] for name in self.makers)})
        if self._classes:
            words = self._with_aliases(words | self._region_class_names(words))
        for expr, scope, owner, function, frame_node in self._candidates:
            entered = _entered_context(expr) if isinstance(owner, ast.Expr) else None
            named = entered if entered is not None else expr
            if _last_name(named.func if isinstance(named, ast.Call) else named) not in words and not (
                    type(owner) in (ast.With, ast.AsyncWith) and type(named) is ast.Call
                    and type(named.func) is ast.Name and self._mode_made_by(named.func, scope) is not None
                    or type(owner) in (ast.FunctionDef, ast.AsyncFunctionDef)  # a decorator of this file
                    and type(target := named.func if type(named) is ast.Call else named) is ast.Name
                    and self._mode_made_by(target, scope) is not None):  # `with frozen():`, a factory
                continue
            change = self.grad_mode_change(expr, scope, owner, function)
            if change and (change.disables_grad or change.when):  # (one a flag chooses may be entered)
                self._frames_with_regions[frame_node] = None

    def _region_class_names(self, words: set[str]) -> set[str]:
        """The names of the classes of this file that set a grad mode when entered (`_class_mode`):
        only those extending a class named in `words` or in turn, or with an `__enter__`, are looked up."""
        names: set[str] = set()
        more = True
        while more:  # a class may extend one defined below it
            more = False
            for cls, scope in self._classes:
                if cls.name not in names and (any(_last_name(base) in words or _last_name(base) in names
                                                  for base in cls.bases) or _defines(cls, "__enter__")) \
                        and self._class_mode(cls, scope) is not None:
                    names.add(cls.name)
                    more = True
        return names

    def _classify_loops(self) -> None:
        """`for x in batches(...)` (or `enumerate(batches(...))`) where `batches`, a function of this
        file, yields inside a grad-disabling `with`: the loop's body runs in that region."""
        leaking = {}
        for change in self.grad_mode_changes:
            if (change.disables_grad or change.when) and type(change.owner) in (ast.With, ast.AsyncWith) \
                    and change.function is not None and yields_in(change.owner.body):
                leaking.setdefault(change.function, change)
        iterated = {name: mode for name, mode in self.makers.items() if mode[2] is None}
        if not leaking and not iterated:
            return
        for loop, scope, function, frame_node in self._loops:
            for call in _iterated_calls(loop.iter):
                region = leaking.get(self._local_function(call.func, scope))
                imported = next((iterated[name] for name in self.qualified_names(call.func, scope) if name in iterated),
                                None) if iterated and region is None else None
                if imported is not None:  # another module's generator: its region stands at the call
                    region = GradModeChange(imported[0], imported[1], call, call, None)
                if region is not None:
                    change = GradModeChange(region.api, region.enabled, call, loop, function, region.when, region)
                    self.grad_mode_changes.append(change)
                    self._change_of[loop] = change
                    self._frames_with_regions[frame_node] = None
                    break

    def _local_function(self, func: ast.expr, scope: Scope) -> Optional[ast.AST]:
        """The `def` of this file a callee names: `batches`, or `self.batches` in a method."""
        if type(func) is ast.Name:
            binding = self.scopes.only_binding(func, scope)
            return binding.node if binding is not None and type(binding.node) in FUNCTION_NODES else None
        if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":
            while scope.parent is not None and not scope.parent.is_class:
                scope = scope.parent
            if scope.parent is not None:
                return next((node for node in scope.parent.node.body
                             if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef) and node.name == func.attr), None)
        return None

    # -- calls -------------------------------------------------------------------------------------

    def calls_naming(self, names) -> list[tuple[ast.Call, Scope]]:
        """Every call whose callee is spelled with one of `names` (or an alias of one), with its
        scope, among others: only the statements on whose lines such a name is written are walked
        (every statement, when the text is not known)."""
        finder = _CallFinder(self.scopes, self.scopes.module)
        if self.text is None:
            for statement in self.module.body:
                finder.visit(statement)
            return finder.calls
        lines = _lines_of(self.text, word_offsets(self.text, self._with_aliases(names)))
        for index in self._statements_on(lines):
            statement, finder.scope = self.statements[index]
            for part in _header(statement):
                finder.visit(part)
        return finder.calls

    def _statements_on(self, lines: list[int]) -> list[int]:
        """The indexes in `statements` of the statements whose header (all of a simple statement)
        is on one of `lines`, in order. The walk met the statements in the order of the source, so
        their header lines only grow: the first header reaching a line is found by bisection."""
        statements, found = self.statements, {}
        for line in lines:
            index = bisect.bisect_left(statements, line, key=_last_header_line)
            while index < len(statements):
                first, last = _header_lines(statements[index][0])
                if first > line:
                    break
                found[index] = None  # first <= line <= last
                index += 1
        return sorted(found)


class _CallFinder(TableVisitor, leaves=frozenset({ast.Name})):
    """Collects calls with the scope each is made in."""

    def __init__(self, scopes: Scopes, scope: Scope):
        self.scopes, self.scope = scopes, scope
        self.calls: list[tuple[ast.Call, Scope]] = []

    def visit_Call(self, node: ast.Call) -> None:
        self.calls.append((node, self.scope))
        self.generic_visit(node)

    def _nested(self, node: ast.AST, parts: list) -> None:
        outer, self.scope = self.scope, self.scopes.enter(node, self.scope)
        self._visit_all(parts)
        self.scope = outer

    def visit_FunctionDef(self, node) -> None:
        self._visit_all((*node.decorator_list, *node.args.defaults, *node.args.kw_defaults))
        self._nested(node, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_all((*node.decorator_list, *node.bases, *node.keywords))
        self._nested(node, node.body)  # a class body runs where it stands

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_all((*node.args.defaults, *node.args.kw_defaults))
        self._nested(node, [node.body])

    def _comprehension(self, node) -> None:
        self.visit(node.generators[0].iter)
        self._nested(node, inside_comprehension(node))

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension


class _FrameWalker(TableVisitor):
    """Walks one body that holds a region: grad state, values without a graph, transform calls."""

    def __init__(self, model: SemanticModel, frame_node: ast.AST, backward: bool = False):
        self.model = model
        # it calls backward: the values it computes in its caller's mode are followed (`in_caller_mode`)
        self._follows_caller_mode = backward and isinstance(frame_node, FUNCTION_NODES)
        self.scopes = model.scopes
        self.frame_node = frame_node
        self._scope: Scope = model.scopes.of[frame_node]
        function = frame_node if isinstance(frame_node, FUNCTION_NODES) else None
        state = MODULE_STATE if isinstance(frame_node, ast.Module) else CALLER_STATE
        for decorator in reversed(getattr(frame_node, "decorator_list", ())):  # innermost first
            change = model.change_at(decorator)
            if change:
                state = state.after(change)
        self._frame = Frame(function, state)
        self._branch_ids = itertools.count()

    def walk(self) -> None:
        self._visit_all(self.frame_node.body)

    def qualified_names(self, expr: ast.expr) -> frozenset[str]:
        return self.scopes.qualified_names(expr, self._scope)

    def _branch(self, statements: list[ast.stmt], condition: bool = True) -> int:
        block = next(self._branch_ids)
        self._frame.blocks.append(block)
        self._frame.conditions += condition
        self._visit_all(statements)
        self._frame.conditions -= condition
        self._frame.blocks.pop()
        return block

    # -- nested scopes: their bodies run later, or are walked as frames of their own -----------

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._visit_all([*node.decorator_list, *node.args.defaults, *node.args.kw_defaults])
        self._frame.graphless.pop(node.name, None)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_all([*node.decorator_list, *node.bases, *node.keywords])
        self._frame.graphless.pop(node.name, None)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_all([*node.args.defaults, *node.args.kw_defaults])

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self.visit(node.generators[0].iter)  # the rest runs when consumed, maybe outside the region

    def _visit_comprehension(self, node) -> None:
        self.visit(node.generators[0].iter)
        outer, self._scope = self._scope, self.scopes.enter(node, self._scope)
        self._visit_all(inside_comprehension(node))
        self._scope = outer

    visit_ListComp = visit_SetComp = visit_DictComp = _visit_comprehension

    # -- regions --------------------------------------------------------------------------------

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        closes = []
        for item in node.items:
            self.visit(item.context_expr)
            change = self.model.change_at(item.context_expr)
            if change:
                self._frame.push(change)
                closes.append(self._frame.pop)
            elif isinstance(item.context_expr, ast.Call) and _last_name(item.context_expr.func) in _EXIT_STACKS:
                self._frame.open_stack()
                closes.append(self._frame.close_stack)
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
        self._visit_all(node.body)
        for close in reversed(closes):
            close()

    visit_AsyncWith = visit_With

    def visit_Expr(self, node: ast.Expr) -> None:
        self.visit(node.value)
        change = self.model.change_at(node.value)
        if change:
            self._frame.set_from_here(change)

    # -- branches (for "straight-line flow" in NG003) ------------------------------------------

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        self._branch(node.body)
        self._branch(node.orelse)

    visit_While = visit_If

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._visit_all([node.iter, node.target])
        change = self.model.change_at(node)  # a generator suspended in a region runs the body in it
        if change:
            self._frame.push(change)
        body = self._branch(node.body, condition=False)
        if change:
            self._frame.pop()  # exhausted (or closed by `break`): the generator has left its region
        self._held_after(node, body)
        self._branch(node.orelse, condition=False)

    def _held_after(self, loop: ast.For | ast.AsyncFor, body: int) -> None:
        """After a loop, a name its body binds (not in a branch of it) and nothing else in the
        function binds holds what the last pass gave it (`vloss, acc = evaluate(m)` in the loop,
        `vloss.backward()` after it), if the loop ran at all: else the name is not bound."""
        inner = (*self._frame.blocks, body)
        end = loop.end_lineno or loop.lineno
        for name, value in list(self._frame.graphless.items()):
            if value.blocks == inner and all(loop.lineno <= getattr(binding.node, "lineno", 0) <= end
                                             for binding in self._scope.bindings.get(name, ())):
                self._frame.graphless[name] = replace(value, blocks=tuple(self._frame.blocks))

    visit_AsyncFor = visit_For

    def visit_Try(self, node) -> None:
        self._visit_all(node.body)  # the path without an exception is straight-line
        for handler in node.handlers:
            self._visit_all([handler.type])
            self._branch(handler.body)
        self._visit_all(node.orelse)
        self._visit_all(node.finalbody)

    visit_TryStar = visit_Try

    def visit_Match(self, node) -> None:
        self.visit(node.subject)
        for case in node.cases:
            self._visit_all([case.pattern, case.guard])
            self._branch(case.body)

    # -- values without a graph (NG003) ---------------------------------------------------------

    def _region_computing(self, value: ast.expr | None) -> GradModeChange | None:
        """The region in which `value` is computed here, if it certainly gets no graph."""
        state = self._frame.state
        region = state.inference_region if state.inference else state.grad_region
        return region if state.graph_recorded is False and region is not None and is_operation(value) else None

    def _assign(self, statement: ast.stmt, targets: list[ast.expr], value: ast.expr | None) -> None:
        region = self._region_computing(value)
        blocks = tuple(self._frame.blocks)
        graphless = _GraphlessValue(statement, region, blocks) if region is not None else None
        if region is None and value is not None and len(targets) == 1 and (type(targets[0]) is ast.Name or (
                type(targets[0]) in (ast.Tuple, ast.List) and type(value) is ast.Call)):
            # `loss = (y ** 2).mean()`, `y = evaluate(b)`; `loss, acc = evaluate(b)`, each of whose
            # returns hands back what a region computes, all of it (`return loss, acc`)
            source = self._graphless_source(value, statement)
            if source is not None:
                graphless = _GraphlessValue(statement, source.region, blocks, source.callee, source.scope)
        if graphless is None and value is not None and not _holds_a_container(value) \
                and graph_sources(value, self._is_torch, self._is_made) == []:
            graphless = _GraphlessValue(statement, None, blocks, made=True)  # `scale = 0.5`, `y = torch.randint(...)`
        computed = None  # computed by an operation where the caller's mode holds (NG003 across calls)
        if self._computed_in_caller_mode(value):
            computed = (self._frame.state.grad_enabled is True, blocks)
        for target in targets:
            for name in _assigned_names(target):
                if type(target) is ast.Name and type(value) is ast.List and not value.elts:
                    self._frame.empty_lists[name] = (statement, blocks)
                else:
                    self._frame.empty_lists.pop(name, None)
                if graphless is not None:
                    self._frame.graphless[name] = graphless if type(target) is ast.Name or graphless.callee is None \
                        else _element(graphless, target, name)
                else:
                    self._frame.graphless.pop(name, None)
                if computed is not None and len(targets) == 1 and isinstance(target, ast.Name):
                    self._frame.in_caller_mode[name] = computed
                else:
                    self._frame.in_caller_mode.pop(name, None)
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
            self._frame.empty_lists.pop(node.id, None)
            self._frame.in_caller_mode.pop(node.id, None)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load):  # `y[0] = model(x)` copies a graph into `y`
            base = node.value
            while type(base) in (ast.Subscript, ast.Attribute):
                base = base.value
            if type(base) is ast.Name:
                self._frame.graphless.pop(base.id, None)
                self._frame.in_caller_mode.pop(base.id, None)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name):
            self._frame.graphless.pop(node.value.id, None)  # `y.requires_grad = True`
            self._frame.in_caller_mode.pop(node.value.id, None)
        elif node.attr == "requires_grad_" and isinstance(node.value, ast.Name):
            self._frame.in_caller_mode.pop(node.value.id, None)  # `y.requires_grad_()`: a leaf to differentiate
        self.visit(node.value)

    def _computed_in_caller_mode(self, value: ast.expr | None) -> bool:
        """Whether an operation computes `value` here where the caller's mode holds: in a caller's
        `no_grad`, it has no graph, whatever its inputs have."""
        state = self._frame.state
        return self._follows_caller_mode and state.inference is None and state.grad_enabled is not False \
            and is_operation(value) and graph_sources(value, self._is_torch, lambda name: True) is not None

    def _value_of(self, name: ast.Name) -> ast.expr | None:
        """The value a name is bound to, when it is bound once."""
        binding = self.scopes.only_binding(name, self._scope)
        return binding.value if binding is not None else None

    def _in_caller_mode(self, name: ast.Name) -> bool:
        """Whether a name holds a value computed here where the caller's mode holds (`in_caller_mode`)."""
        value = self._frame.in_caller_mode.get(name.id)
        return value is not None and tuple(self._frame.blocks)[:len(value[1])] == value[1]

    def _graphless_source(self, expr: ast.expr, at: ast.AST) -> _GraphlessValue | None:
        """What says that `expr` has no graph here: a value computed in a region that it is computed
        from (`graph_sources`), with nothing else that may have one but at most one call of another
        function (`y = evaluate(b)`, `evaluate(b).sum()`), whose result linking looks into then."""
        sources = graph_sources(expr, self._is_torch, self._is_graphless, self._value_of)
        if not sources:
            return None
        in_region, called = None, None
        for source in sources:
            if isinstance(source, ast.Name):
                value = self._frame.graphless.get(source.id) if self._is_graphless(source) else None
                if value is None:
                    return None
                if value.made:
                    continue  # (the labels of `F.cross_entropy(logits, y)`)
            else:
                value = _GraphlessValue(at, None, tuple(self._frame.blocks), source.func, self._scope)
            if value.region is None:
                if called is not None:
                    return None  # two calls: both would have to return no graph
                called = value
            elif in_region is None:
                in_region = value
        return called or in_region

    def _filled(self, name: str, value: ast.expr) -> None:
        """`outs.append(model(b))` in a region, `outs` bound to `[]` before: a list with no graph in it,
        while everything put in it is computed so (anything else put in it, and it may have one)."""
        empty = self._frame.empty_lists.get(name)
        if empty is None:
            return
        region = self._region_computing(value)
        if region is None and type(value) is ast.Name and self._is_graphless(value):
            region = self._frame.graphless[value.id].region
        known = self._frame.graphless.get(name)
        if region is None or known is not None and known.region is None:
            self._frame.empty_lists.pop(name)
            self._frame.graphless.pop(name, None)
        elif known is None:
            self._frame.graphless[name] = _GraphlessValue(empty[0], region, empty[1])

    def _computed_here(self, value: ast.expr) -> bool:
        """Whether `value` is the result of an operation of torch's run here (arithmetic, `y.sum()`,
        `F.mse_loss(y, t)`), not what a call of another function returns (which may turn grad on)."""
        if type(value) in (ast.BinOp, ast.UnaryOp):
            return True
        func = value.func if type(value) is ast.Call else None
        return func is not None and (type(func) is ast.Attribute and _tensor_method(func.attr) or self._is_torch(func))

    def _is_made(self, name: ast.Name) -> bool:
        return self._is_graphless(name) and self._frame.graphless[name.id].made

    def _is_graphless(self, name: ast.Name) -> bool:
        """Whether a name holds a value without a graph here (as far as straight-line code tells)."""
        value = self._frame.graphless.get(name.id)
        blocks = tuple(self._frame.blocks)
        return value is not None and blocks[:len(value.blocks)] == value.blocks

    def _is_torch(self, func: ast.expr) -> bool:
        """A callee that computes from its arguments alone: one of torch's functions, or a function of
        this file that only does what they do with its parameters (`computes_from_parameters`)."""
        return is_torch_operation(self.qualified_names(func)) or \
            type(func) is ast.Name and self.model.computes_from_parameters(func, self._scope)

    def _check_backward(self, call: ast.Call) -> None:
        func = call.func
        names = self.qualified_names(func)
        if names & (torch_names.AUTOGRAD_GRAD | torch_names.AUTOGRAD_BACKWARD):
            keyword = "outputs" if names & torch_names.AUTOGRAD_GRAD else "tensors"
            first = call.args[0] if call.args else next(
                (k.value for k in call.keywords if k.arg == keyword), None)
            outputs = list(first.elts) if isinstance(first, (ast.Tuple, ast.List)) else [first]
        elif isinstance(func, ast.Attribute) and func.attr == "backward":
            outputs = [func.value]
        else:
            return
        # computed here, in the caller's mode: a caller's region leaves no graph (a backward under a
        # condition, `if self.mode == TRAIN: loss.backward()`, may be one the caller's region never runs)
        for output in outputs if not self._frame.conditions else ():
            if self._computed_in_caller_mode(output):  # `torch.autograd.grad((x ** 2).sum(), x)`
                self.model.caller_mode_backwards.append(BackwardInCallerMode(
                    call, self._frame.function, self._frame.state.grad_enabled is True))
                break
            sources = graph_sources(output, self._is_torch, self._in_caller_mode) if output is not None else None
            if sources and all(isinstance(source, ast.Name) and self._in_caller_mode(source) for source in sources):
                self.model.caller_mode_backwards.append(BackwardInCallerMode(
                    call, self._frame.function, all(self._frame.in_caller_mode[source.id][0] for source in sources)))
                break
        for output in outputs:  # `torch.autograd.grad(energy(x).sum(), x)` in the region: computed there
            region = self._region_computing(output) if output is not None and self._computed_here(output) else None
            if region is not None:
                self.model.graphless_backwards.append(GraphlessBackward(call, ast.unparse(output), call, region))
                return
        for output in outputs:
            value = self._graphless_source(output, call) if output is not None else None
            if value is None:
                continue
            # the name it is computed from: `y` for `y.sum().backward()`
            name = next((node.id for node in walk(output) if isinstance(node, ast.Name) and self._is_graphless(node)
                         and not self._is_made(node)), "")
            if value.region is not None:
                self.model.graphless_backwards.append(GraphlessBackward(call, name or ast.unparse(output),
                                                                        value.assigned_at, value.region))
            else:  # `evaluate(b).backward()`, `y.backward()` after `y = evaluate(b)`: linking tells
                self.model.backwards_through_calls.append(
                    BackwardThroughCall(call, name, value.assigned_at, value.callee, value.scope, value.element))
            return

    def visit_Return(self, node: ast.Return) -> None:
        """Record whether each return of a function hands back a value computed in a region."""
        self._visit_all([node.value])
        if self._frame.function is None or node.value is None:
            return
        region = self._returned_region(node.value, node)
        regions = None
        if type(node.value) is ast.Tuple and node.value.elts and \
                not any(type(element) is ast.Starred for element in node.value.elts):  # `return loss, acc.item()`
            regions = tuple([self._returned_region(element, node) for element in node.value.elts])
            region = region or (regions[0] if all(regions) else None)
        self.model.returns.setdefault(self._frame.function, []).append(region)
        self.model.element_returns.setdefault(self._frame.function, []).append(regions)

    def _returned_region(self, value: ast.expr, node: ast.Return) -> GradModeChange | None:
        region = self._region_computing(value)
        if region is None:
            source = self._graphless_source(value, node)
            region = source.region if source is not None else None
        return region

    # -- transforms (NG001, NG002) --------------------------------------------------------------

    def _applied_transform(self, callee: ast.expr, at: ast.Call) -> TransformApplication | None:
        """The transform that `callee(...)` runs (`transform_run_by`)."""
        made = self.model.transform_run_by(callee, self._scope)
        return TransformApplication(made[0], made[1], at, self._frame.state, made[2]) if made else None

    def visit_Call(self, node: ast.Call) -> None:
        names = self.qualified_names(node.func)
        transform = torch_names.transform_name(names)
        if transform in torch_names.IMMEDIATE_TRANSFORMS:
            self.model.applications.append(TransformApplication(transform, node, node, self._frame.state))
        functional = torch_names.functional_name(names)
        if functional:
            self.model.applications.append(TransformApplication(functional, node, node, self._frame.state,
                                                                functional=True))
        applied = self._applied_transform(node.func, node)
        if applied is not None:
            self.model.applications.append(applied)
        self._check_backward(node)
        func = node.func
        if type(func) is ast.Attribute and func.attr in _FILLS and type(func.value) is ast.Name and node.args:
            self._filled(func.value.id, node.args[-1])
        elif self._frame.empty_lists and not (self._is_torch(func) or type(func) is ast.Name and func.id in _READS_A_LIST):
            for arg in (*node.args, *(k.value for k in node.keywords)):  # `fill(outs)` may put anything in it
                if type(arg) is ast.Name and self._frame.empty_lists.pop(arg.id, None):
                    self._frame.graphless.pop(arg.id, None)
        if (isinstance(func, ast.Attribute) and torch_names.in_place(func.attr) and isinstance(func.value, ast.Name)
                and self._frame.state.graph_recorded is not False):
            self._frame.graphless.pop(func.value.id, None)  # `y.requires_grad_()`, `y.mul_(w)`
        self.generic_visit(node)


_MAX_PURE_DEPTH = 32  # helpers calling helpers, looked into by `computes_from_parameters`
_TRY_STAR = (ast.TryStar,) if hasattr(ast, "TryStar") else ()
_COMPOUND = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.With, ast.AsyncWith, ast.If,
                       ast.While, ast.For, ast.AsyncFor, ast.Try, *_TRY_STAR,
                       *([ast.Match] if hasattr(ast, "Match") else [])})
_EXIT_STACKS = frozenset({"ExitStack", "AsyncExitStack"})
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what Python's tokenizer counts as a new line


def _holds_a_container(value: ast.expr) -> bool:
    """`out = []`, `a, b = [], {}`: what is put in it later may have a graph."""
    return type(value) in (ast.List, ast.Dict, ast.Set) or \
        type(value) is ast.Tuple and any(_holds_a_container(element) for element in value.elts)


def graph_sources(expr: ast.expr, is_torch: Callable[[ast.expr], bool], is_value: Callable[[ast.Name], bool],
                  value_of: Callable[[ast.Name], Optional[ast.expr]] = lambda name: None) -> Optional[list[ast.expr]]:
    """The names, and the calls of other functions, that a value is computed from when nothing else
    in it can carry an autograd graph, in the order written: through subscripts, arithmetic, a
    value's methods (`y.mean(0)`, `f(b).sum()`, with `is_value(y)`) and torch's functions
    (`F.mse_loss(y, z)`, told by `is_torch` of the callee) whose other arguments are literals or
    computed so too; the labels a loss is given (`F.cross_entropy(logits, y)`) unless a model
    computes them (there, or in the value `value_of` a name tells). None when anything else may carry one (a dict,
    `requires_grad=True`, a call of a call). An operation records a graph only when one of its
    inputs has one: the caller tells whether the names and calls have one."""
    found: list[ast.expr] = []
    todo = [expr]
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind is ast.Constant or kind is ast.Compare:  # (a comparison's result has no graph)
            continue
        if kind is ast.Name:
            found.append(node)
        elif kind is ast.IfExp:  # `p if y > 0 else 1 - p`
            todo += [node.orelse, node.body]
        elif kind is ast.BinOp:
            todo += [node.right, node.left]
        elif kind is ast.UnaryOp:
            todo.append(node.operand)
        elif kind is ast.Tuple or kind is ast.List:  # `torch.cat([y, z])`, a shape `(2, 3)`
            todo += reversed(node.elts)
        elif kind is ast.Subscript or kind is ast.Attribute:  # (indices carry no derivative)
            todo.append(node.value)
        elif kind is ast.Call:
            func = node.func
            if any(k.arg in (None, "requires_grad") for k in node.keywords) or \
                    any(type(arg) is ast.Starred for arg in node.args):
                return None
            arguments = [*node.args, *(k.value for k in node.keywords)]
            if type(func) is ast.Attribute and func.attr in _GRAPH_MAKING:
                return None
            if type(func) is ast.Attribute and func.attr in _INDEXING_METHODS:
                todo.append(func.value)  # `logits.gather(1, target[:, None])`: indices carry no graph
            elif type(func) is ast.Name and func.id in _COUNTING_BUILTINS:
                continue  # `len(losses)`: a number
            elif type(func) is ast.Name and func.id == "sum" and len(arguments) == 1 or is_torch(func):
                name = func.attr if type(func) is ast.Attribute else getattr(func, "id", "")
                if name in _LABELLED_LOSSES and not _calls_a_model(node, is_torch, value_of):
                    # `F.cross_entropy(logits, y)`: the labels carry no graph (unless a model computes them here)
                    arguments = [*node.args[:1], *node.args[2:], *(k.value for k in node.keywords if k.arg != "target")]
                if name not in tensor_ops.CREATION:
                    todo += reversed(arguments)  # (what `torch.zeros(x.shape)` is given is no graph of it)
            elif type(func) is ast.Attribute and _tensor_method(func.attr) \
                    and (type(func.value) is ast.Name and is_value(func.value) or type(func.value) in _VALUES) \
                    and _plain(arguments, is_torch, is_value):
                todo += [*reversed(arguments), func.value]  # a method of a value, given no graph: `y.mean(0)`
            elif type(func) in (ast.Name, ast.Attribute):  # else (`net.solve(x)`, `Evaluator(m).score(b)`), what
                found.append(node)  # another function returns: whether it has a graph, linking tells
            else:
                return None
        else:
            return None
    return found


def _calls_a_model(loss: ast.Call, is_torch: Callable[[ast.expr], bool],
                   value_of: Callable[[ast.Name], Optional[ast.expr]]) -> bool:
    """Whether the labels given to a loss are computed by a call of something else than torch's
    functions and tensor methods (`F.cross_entropy(x, teacher(b).softmax(-1))`), there or in the
    value a name of them holds (`value_of`)."""
    todo = loss.args[1:2] or [k.value for k in loss.keywords if k.arg == "target"]
    for _ in range(4):
        names = []
        for node in (node for label in todo for node in walk(label)):
            if type(node) is ast.Call and not is_torch(node.func) and not (
                    type(node.func) is ast.Attribute and _tensor_method(node.func.attr)):
                return True
            if type(node) is ast.Name and (value := value_of(node)) is not None:
                names.append(value)
        todo = names
    return False


def _element(value: _GraphlessValue, target: ast.Tuple | ast.List, name: str) -> _GraphlessValue:
    """What `name` holds of what a call returns, unpacked into `target` (`loss, k = f(b)`): the
    element in its place, when the target is flat names (else the whole, as told of every element)."""
    names = [element.id if type(element) is ast.Name else None for element in target.elts]
    if None in names or names.count(name) != 1:
        return value
    return replace(value, element=names.index(name))


def _tensor_method(name: str) -> bool:
    """A method tensors have (`y.mean(0)`, `y.float()`): else (`model.evaluate(x)`) one of an object's."""
    return tensor_ops.kind_of_method(name) != tensor_ops.UNKNOWN or name in tensor_ops.IDENTITY_NAMES


def _plain(arguments: list[ast.expr], is_torch: Callable[[ast.expr], bool],
           is_value: Callable[[ast.Name], bool]) -> bool:
    """Whether each argument is computed only from literals and values (`graph_sources`)."""
    return all((inner := graph_sources(argument, is_torch, is_value)) is not None
               and all(type(source) is not ast.Name or is_value(source) for source in inner) for argument in arguments)


def is_torch_operation(names: frozenset[str]) -> bool:
    """Whether a callee is one of torch's functions, which compute from their arguments alone."""
    return any(name.startswith("torch.") and not name.startswith(_NOT_OPERATIONS_OF_TORCH) for name in names)


_VALUES = (ast.Call, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.Attribute)  # `out.max(-1).values.sum()`
# torch's names that make a leaf or a module rather than compute a value from their arguments
_NOT_OPERATIONS_OF_TORCH = ("torch.nn.parameter.", "torch.nn.Parameter", "torch.autograd.", "torch.func.",
                            "torch.nn.Module", "torch.enable_grad", "torch.set_grad_enabled")
_INDEXING_METHODS = frozenset({"gather", "index_select", "take_along_dim", "masked_select"})
_GRAPH_MAKING = frozenset({"requires_grad_", "backward"})  # methods whose result is no plain operation
_FILLS = frozenset({"append", "extend", "insert"})  # methods that put values into a list
_READS_A_LIST = frozenset({"len", "sum", "list", "tuple", "sorted", "reversed", "enumerate", "zip", "print"})
# losses whose second argument is the labels, given no graph (class indices, or targets)
_LABELLED_LOSSES = frozenset({"cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits"})
_COUNTING_BUILTINS = frozenset({"len", "range", "isinstance"})  # builtins whose result carries no graph


def yields_in(statements: list[ast.stmt]) -> bool:
    """Whether the statements yield, outside the functions and classes they define."""
    stack = list(statements)
    while stack:
        node = stack.pop()
        if type(node) in (ast.Yield, ast.YieldFrom):
            return True
        if type(node) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef):
            stack.extend(child_nodes(node))
    return False


def _iterated_calls(iterable: ast.Call) -> list[ast.Call]:
    """The calls whose results a loop takes elements from: `batches()`, and the calls `enumerate`
    and `zip` are given."""
    if type(iterable.func) is ast.Name and iterable.func.id in ("enumerate", "zip"):
        return [arg for arg in iterable.args if type(arg) is ast.Call]
    return [iterable]


def inside_comprehension(node) -> list:
    """What a comprehension evaluates in its own scope: all but its first iterable, which the
    enclosing scope evaluates."""
    inside = [node.generators[0].target, *node.generators[0].ifs]
    for generator in node.generators[1:]:
        inside += [generator.target, generator.iter, *generator.ifs]
    return inside + [getattr(node, name, None) for name in ("elt", "key", "value")]


def word_offsets(text: str, words) -> list[int]:
    """Where `words` are written as whole words in `text`, in order: the starts of the matches of
    `\b(?:word|...)\b`, on the same lines (str.find is many times faster than such a pattern)."""
    offsets = []
    for word in words:
        at = text.find(word)
        while at >= 0:
            if _word_boundary(text, at) and _word_boundary(text, at + len(word)):
                offsets.append(at)
            at = text.find(word, at + 1)
    return sorted(offsets)


def _word_boundary(text: str, at: int) -> bool:
    """Whether `at` is a word boundary, as `\b` sees one in a `str` pattern."""
    before = at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_")
    after = at < len(text) and (text[at].isalnum() or text[at] == "_")
    return before != after


def _lines_of(text: str, offsets: list[int]) -> list[int]:
    """The line numbers (from 1) of increasing character offsets into `text`."""
    if "\r" in text:  # lone carriage returns end lines too: find every line start
        starts = [0] + [match.end() for match in _LINE_BREAK.finditer(text)]
        return sorted({bisect.bisect_right(starts, offset) for offset in offsets})
    lines, line, position = [], 1, 0
    for offset in offsets:
        line += text.count("\n", position, offset)
        position = offset
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


def _blocks(statement: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists inside a compound statement other than a definition."""
    if type(statement) in (ast.Try, *_TRY_STAR):
        return [statement.body, *[handler.body for handler in statement.handlers], statement.orelse,
                statement.finalbody]
    if hasattr(statement, "cases"):
        return [case.body for case in statement.cases]
    return [statement.body, getattr(statement, "orelse", [])]


def _header_lines(statement: ast.stmt) -> tuple[int, int]:
    """The lines of a statement, or of a compound statement's header (decorators included)."""
    kind = type(statement)
    if kind not in _COMPOUND:
        return statement.lineno, statement.end_lineno or statement.lineno
    first = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", ())])
    body = statement.cases[0].body if hasattr(statement, "cases") else statement.body
    return first, max(statement.lineno, body[0].lineno - 1)


def _last_header_line(entry: tuple[ast.stmt, Scope]) -> int:
    return _header_lines(entry[0])[1]


def _header(statement: ast.stmt) -> list[ast.AST]:
    """What a statement evaluates where it stands: all of a simple one, the header of a compound one."""
    if type(statement) not in _COMPOUND:
        return [statement]
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = statement.args
        return [*statement.decorator_list, *args.defaults, *[d for d in args.kw_defaults if d is not None]]
    if isinstance(statement, ast.ClassDef):
        return [*statement.decorator_list, *statement.bases, *statement.keywords]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [part for item in statement.items for part in (item.context_expr, item.optional_vars) if part]
    if isinstance(statement, (ast.If, ast.While)):
        return [statement.test]
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return [statement.target, statement.iter]
    if hasattr(statement, "subject"):  # match
        return [statement.subject, *[case.guard for case in statement.cases if case.guard]]
    return [handler.type for handler in statement.handlers if handler.type]  # try


_APIS = (("no_grad", torch_names.NO_GRAD), ("enable_grad", torch_names.ENABLE_GRAD),
         ("set_grad_enabled", torch_names.SET_GRAD_ENABLED), ("inference_mode", torch_names.INFERENCE_MODE))
_ENTERING = frozenset({*torch_names.GRAD_MODE_WORDS, "__enter__"})  # the calls that may set a mode in `__enter__`


def _returns(statements: list[ast.stmt]) -> Iterator[ast.Return]:
    """The `return` statements of a function body, outside the functions and classes it defines;
    none for a generator."""
    if yields_in(statements):
        return
    stack = list(statements)
    while stack:
        node = stack.pop()
        if type(node) is ast.Return:
            yield node
        elif type(node) in _COMPOUND and type(node) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            stack += [statement for block in _blocks(node) for statement in block]


def _decorates_by_entering(cls: ast.ClassDef) -> bool:
    """Whether the class's `__call__(self, fn)` returns a wrapper running `fn` inside `with self:`
    (or a new object of the class: `with type(self)(...)`, `with self.__class__(...)`)."""
    call = _defines(cls, "__call__")
    if call is None or len(call.args.args) != 2:
        return False
    itself, given = call.args.args[0].arg, call.args.args[1].arg
    returned = [node.value for node in _returns(call.body)]
    inner = next((node for node in call.body if type(node) is ast.FunctionDef and len(returned) == 1
                  and type(returned[0]) is ast.Name and returned[0].id == node.name), None)
    body = [statement for statement in inner.body if not _is_docstring(statement)] if inner is not None else []
    if len(body) != 1 or type(body[0]) is not ast.With or len(body[0].items) != 1 or len(body[0].body) != 1:
        return False
    entered, run = body[0].items[0].context_expr, body[0].body[0]
    maker = entered.func if type(entered) is ast.Call else None
    return (type(entered) is ast.Name and entered.id == itself or type(maker) is ast.Name and maker.id == cls.name
            or type(maker) is ast.Attribute and maker.attr == "__class__" or type(maker) is ast.Call
            and type(maker.func) is ast.Name and maker.func.id == "type") \
        and type(run) is ast.Return and type(run.value) is ast.Call and type(run.value.func) is ast.Name \
        and run.value.func.id == given


def _defines(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    """The method `name` a class body defines, if any."""
    return next((node for node in cls.body if type(node) is ast.FunctionDef and node.name == name), None)


def _api_named(names: frozenset[str]) -> str | None:
    """"no_grad" for {"torch.no_grad"}: the grad-mode API one of the qualified names is, if any."""
    return next((api for api, spellings in _APIS if names & spellings), None)


def _entered_context(expr: ast.expr) -> ast.expr | None:
    """`torch.no_grad()` for `stack.enter_context(torch.no_grad())` (contextlib's ExitStack)."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "enter_context" \
            and len(expr.args) == 1 and not expr.keywords:
        return expr.args[0]
    return None


def _last_name(expr: ast.expr) -> str:
    """`no_grad` for `torch.no_grad` or `no_grad`; the call's in a branch of `a if flag else b` that
    makes one (`torch.no_grad() if frozen else nullcontext()`); "" for anything else."""
    if isinstance(expr, ast.IfExp):
        chosen = _chosen_region(expr)[0]
        return _last_name(chosen.func) if chosen is not None else ""
    return expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""


def _chosen_region(choice: ast.IfExp) -> tuple[ast.Call | None, str]:
    """The grad-mode call one branch of `a if flag else b` makes, and when it is made; None when
    both or neither branch is a call (told apart by what they call, not resolved here), but for
    one turning grad back on (`torch.enable_grad() if train else torch.no_grad()`: the other)."""
    branches = [(branch, _when(choice.test, taken))
                for branch, taken in ((choice.body, True), (choice.orelse, False))
                if isinstance(branch, ast.Call) and _names_grad_mode(branch.func)]
    if len(branches) == 2:
        branches = [branch for branch in branches if not _enables_grad(branch[0])]
    return branches[0] if len(branches) == 1 else (None, "")


def _enables_grad(call: ast.Call) -> bool:
    """`enable_grad()`, `set_grad_enabled(True)`: a call that turns grad mode on."""
    name = _last_name(call.func)
    return name == "enable_grad" or name == "set_grad_enabled" and _literal_mode(call, "mode", False) is True


def _parameter_test(test: ast.expr, params: list[str]) -> Optional[tuple[str, bool]]:
    """(parameter, the value it has where the test holds) for `flag`, `not flag` or `bool(flag)`, a
    parameter."""
    value = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) or _is_bool_of(test):
        test, value = (test.operand, not value) if isinstance(test, ast.UnaryOp) else (test.args[0], value)
    return (test.id, value) if isinstance(test, ast.Name) and test.id in params else None


def _is_bool_of(test: ast.expr) -> bool:
    """`bool(flag)`."""
    return type(test) is ast.Call and type(test.func) is ast.Name and test.func.id == "bool" \
        and len(test.args) == 1 and not test.keywords


def _flagged_when(call: ast.Call | None, position: int, name: str, value: bool) -> Optional[str]:
    """When a mode entered on the value of a parameter is entered by this call: always ("" when its
    argument is that literal), never (None: another literal, or not given), or when the argument
    has that value ("`cfg.freeze` is True")."""
    if call is None or any(type(arg) is ast.Starred for arg in call.args):
        return None
    given = call.args[position] if position < len(call.args) else \
        next((k.value for k in call.keywords if k.arg == name), None)
    if isinstance(given, ast.Constant) and type(given.value) is bool:
        return "" if given.value is value else None
    return _when(given, value) if given is not None else None


def _when(flag: ast.expr, value: bool) -> str:
    """"`frozen` is True" for `frozen` and True, or for `not frozen` and False."""
    while isinstance(flag, ast.UnaryOp) and isinstance(flag.op, ast.Not):
        flag, value = flag.operand, not value
    return f"`{ast.unparse(flag)}` is {value}"


def _names_grad_mode(func: ast.expr) -> bool:
    return not isinstance(func, ast.IfExp) and _last_name(func) in torch_names.GRAD_MODE_WORDS


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


def is_operation(value: ast.expr | None) -> bool:
    """Whether `value` computes something (and so has no graph under no_grad), not just reads it: a
    comprehension too, whose every element is computed so (`[model(x).mean() for x in batches]`)."""
    if isinstance(value, (ast.BinOp, ast.UnaryOp)):
        return True
    if isinstance(value, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        return is_operation(value.elt)
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return name not in _NOT_OPERATIONS
    if isinstance(value, ast.Subscript):  # `model(x)[0]`: an element of what an operation computed
        return is_operation(value.value)
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Call):
        # a field of what an operation returns (`out.max(-1).values`, `model(x).logits`), not an
        # attribute of an object a call hands back (`get_layer(model).weight`, a parameter)
        func = value.value.func
        return (value.attr in _RESULT_FIELDS or type(func) is ast.Attribute and _tensor_method(func.attr)) \
            and is_operation(value.value)
    return False


# fields of what torch's operations (torch.return_types) and models' forward passes return
_RESULT_FIELDS = frozenset({"values", "indices", "logits", "loss", "last_hidden_state", "hidden_states",
                            "pooler_output", "sample", "prev_sample", "pred_original_sample"})


def _assigned_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _assigned_names(element)]
    if isinstance(target, ast.Starred):
        return _assigned_names(target.value)
    return []


def _is_docstring(statement: ast.stmt) -> bool:
    return type(statement) is ast.Expr and type(statement.value) is ast.Constant and type(statement.value.value) is str
