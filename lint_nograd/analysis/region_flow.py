"""Whether a grad-disabled region can change what a transform or tracer returns: the flow rule of
NG004-NG006 is "report unless it provably cannot matter". It is activity analysis (Tapenade,
Enzyme): a region matters only by computing an active value, one that is varied (it depends on an
input being differentiated) and useful (it reaches what is differentiated). From one file:

- `enable_grad`: the whole body runs under `torch.enable_grad()` (or `set_grad_enabled(True)`), so
  the region turns nothing off in any mode;
- `inputs`: what the region computes depends only on constants (literals, modules, torch calls of
  constants, an attribute of `self` that every store in the file sets to a literal of its class),
  on values that carry no derivative whatever they read (indices, masks, shapes, new tensors,
  cuts: `analysis/activity.py`), on the module's own state (`STATE`: `self.weight`, a buffer) and
  on the parameters it names. Which parameters a transform differentiates, and whether it
  differentiates the module's state, is the project's business (`argnums`, `functools.partial`,
  `functional_call`); `()` means constants only. What is logged, and functions defined in the
  region, go nowhere it computes;
- `stores`: the region only stores values into attributes (`self.last_norm = x.norm()`) and locals
  nothing reads afterwards; if nothing the transform reaches reads those attributes, the region's
  values go nowhere the transform returns;
- `assumes`: the attributes read as constants or state of the file, which no other module may
  store into;
- `mutates`: the region changes state in place (`self.running_mean.mul_(m).add_(x)`,
  `self.u.copy_(u)`, `self.codebook[i] = x`, `self.calls += 1`): a `torch.func` transform raises on it
  ("would mutate a captured Tensor") instead of computing another result, so only other transforms
  and tracers can be misled by it;
- `local_only` and a gradient step: a region that only binds locals (no state a tracer records,
  such as an in-place update of a buffer), in code that `make_fx` traces through a function that
  returns nothing but what `torch.autograd.grad` computes (or that runs its own backward pass and
  whose trace nothing differentiates): the tracer records the backward pass that eager mode ran,
  with the region respected, so the traced gradients equal the eager ones.

Anything the walk does not know (a call into the project, a closure, a loop variable, `self`)
makes the answer "it may matter". An `inference_mode` region is never exempt: its tensors raise
when saved for backward, whatever they are computed from.
"""
from __future__ import annotations

import ast
import builtins
import copy
import weakref
from collections import deque
from dataclasses import dataclass

from lint_nograd.analysis import activity, library, torch_names
from lint_nograd.analysis.model import GradModeChange, SemanticModel
from lint_nograd.analysis.scopes import FUNCTION_NODES, Scope, child_nodes, walk

ENABLE_GRAD = "enable_grad"
NO_DERIVATIVE = "no_derivative"  # what leaves it carries no derivative: `idx = d.argmin(-1)`
# the `yield` of a grad-mode maker (`@contextmanager def frozen(): with torch.no_grad(): yield`): what
# runs in it is the body of each `with frozen():`, a region of its own, reported there
MAKES_REGIONS = "makes_regions"
# what `inputs` names for the module's own parameters, buffers and torch submodules (`self.weight`):
# constants under a transform of the module's call, varied under `functional_call` and tracers
STATE = "<state>"
_CONSTANT_MODULES = ("torch.", "math.", "numpy.", "operator.")  # calls of these, on constants, give constants
_CONSTANT_IMPORTS = frozenset({"torch", "math", "numpy", "operator", "functools"})
_BUILTINS = frozenset(dir(builtins))
_MAX_DEPTH = 12


@dataclass(frozen=True)
class Flow:
    """What the file alone says of whether a region can change a result."""

    inert: str = ""  # ENABLE_GRAD: it turns nothing off in any mode
    inputs: tuple[str, ...] | None = None  # the parameters its values depend on, all else constant
    stores: tuple[str, ...] = ()  # the attributes it only stores into (its locals read by nothing after it)
    local_only: bool = False  # it only binds locals, with no state a tracer records
    # the attributes of `self` it reads as the literals or the state its class sets: so only while
    # no other module stores into them (`net.scale = nn.Parameter(...)`: linking looks)
    assumes: tuple[str, ...] = ()
    cut_after: bool = False  # it binds locals that every later read cuts (`s.detach() + eps`)
    mutates: bool = False  # it changes what an attribute holds in place (`self.mean.mul_(m).add_(x)`)
    aux_only: bool = False  # its locals leave the function only after the first value returned (`has_aux`)
    returned_only: bool = False  # its locals leave the function only by what it returns
    # the attributes whose containers or tensors it only adds to or changes in place (`self.history.append(r)`,
    # `self.stats[k] = v`, `self.ema.mul_(d).add_(x)`): left out of the rest, as long as nothing reached reads them
    adds: tuple[str, ...] = ()


def flow_of(model: SemanticModel, region: GradModeChange) -> Flow:
    """The flow facts of a `no_grad` or `set_grad_enabled(False)` region, from one walk of its body."""
    if region.api == "inference_mode" or isinstance(region.owner, ast.Expr) or region.function is None:
        return Flow()
    if enables_grad_throughout(model, region):
        return Flow(inert=ENABLE_GRAD)
    if any(isinstance(node, (ast.Yield, ast.YieldFrom)) for statement in region.owner.body for node in walk(statement)) \
            and model.makes_grad_mode(region.function):
        return Flow(inert=MAKES_REGIONS)
    scope = model.scopes.of.get(region.function)
    if scope is None:
        return Flow()
    names_of = names_in(model, scope)
    body, later = [], []  # what the region computes now; calls whose values go nowhere it reads
    adds: dict[str, None] = {}
    for statement in region.owner.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom)) \
                or _enables_grad(model, statement, region):
            continue  # a function's body runs when it is called, in its caller's grad mode; a `with
            # enable_grad()` block runs as outside the region
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) \
                and (activity.is_sink(statement.value, names_of) or _adds_cut_values(statement.value, names_of)) \
                or _adds_to_unread_global(model, statement):
            sink = isinstance(statement, ast.Expr)  # (the sink's call itself aside)
            calls = [node for node in walk(statement.value if sink else statement) if isinstance(node, ast.Call)]
            later += calls[1:] if sink else calls
        elif (added := _attribute_added(statement)) is not None:
            adds[added[0]] = None  # (what it is given is computed: the calls in it are looked at)
            later += [node for given in added[1] for node in walk(given) if isinstance(node, ast.Call)]
        elif not _is_docstring_or_pass(statement):
            body.append(statement)
    nodes = [node for statement in body for node in walk(statement)] + later
    harmless = _calls_are_harmless(model, nodes, scope)
    try:
        inputs = _inputs(model, _reads(model, body, scope) + later, scope)
    except RecursionError:
        inputs = None
    plain = harmless and all(isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None for s in body)
    targets = [t for s in body for t in (s.targets if isinstance(s, ast.Assign) else [s.target])] if plain else []
    local_only = plain and not any(isinstance(n, ast.keyword) and n.arg == "out" for n in nodes) and all(
        isinstance(node, (ast.Name, ast.Tuple, ast.List, ast.Store)) for t in targets for node in walk(t))
    assumes = tuple(sorted({name for node in nodes if isinstance(node, ast.Attribute)
                            for name in _assumed(model, node, scope)}))
    bound = {node.id for target in targets for node in walk(target) if isinstance(node, ast.Name)}
    # (`with torch.no_grad(): return h.abs().mean()` gives its value back the same way)
    returning = harmless and bool(body) and isinstance(body[-1], ast.Return) and body[-1].value is not None \
        and all(isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None and all(
            isinstance(node, (ast.Name, ast.Tuple, ast.List, ast.Store)) for target in (
                s.targets if isinstance(s, ast.Assign) else [s.target]) for node in walk(target)) for s in body[:-1])
    inside = {id(node) for statement in region.owner.body if not _enables_grad(model, statement, region)
              for node in walk(statement)} if plain or returning else set()  # (what only these read: a `with
    # enable_grad()` block in the region is read outside)
    cut_after = local_only and bool(bound) and _cut_after(region, bound, inside)
    mutates = any(_changes_state_in_place(node) for statement in region.owner.body for node in walk(statement)
                  if isinstance(node, ast.stmt))
    aux_only = local_only and bool(bound) and _only_in_aux(region, bound, inside)
    returned_only = (local_only and bool(bound) or returning) and _only_returned(region, bound, inside)
    if (local_only and bound or returning) and not any(isinstance(node, ast.Attribute) and node.attr in _AUTOGRAD_STATE
                                                        for node in nodes) \
            and _read_after_only_without_derivative(region, body, bound, inside, names_of):
        return Flow(inert=NO_DERIVATIVE)  # (`(x * 2).requires_grad` reads what grad mode makes: not so)
    return Flow("", inputs, _stores(region, targets, inside) if plain else (), local_only, assumes, cut_after, mutates,
                aux_only, returned_only, tuple(adds))


_ADDING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "appendleft", "setdefault"})


def _adds_to_unread_global(model: SemanticModel, statement: ast.stmt) -> bool:
    """`STATS.append(output.abs().mean())`, `NORMS[name].append(...)`, `LAST[name] = ...`: a statement
    adding to a module-level container that nothing in the file reads (every use of its name adds
    to it), as a hook recording statistics does. What it is given goes nowhere the computation
    reads, as what is printed."""
    base = _added_to(statement)
    return base is not None and base.id in _write_only_globals(model)


def _adds_cut_values(call: ast.Call, names_of) -> bool:
    """`self.history["loss"].append(loss.detach().clone())`, `seen.add(idx.item())`: a container is
    given only values that carry no derivative (`analysis/activity.py`), which go nowhere a
    derivative can follow."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr in _ADDING_METHODS and bool(call.args) \
        and not call.keywords and all(activity.no_derivative(arg, names_of) for arg in call.args)


def _attribute_added(statement: ast.stmt) -> tuple[str, list[ast.expr]] | None:
    """The attribute a statement only adds to or changes in place, and what it gives it: `history`
    for `self.cfg.history.append(r)`, `stats` for `self.stats[k] = v`, `ema` for `self.ema.mul_(d).add_(x)`."""
    given: list[ast.expr] = []
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        node = statement.value
        if isinstance(node.func, ast.Attribute) and node.func.attr in _ADDING_METHODS:
            given += [*node.args, *(k.value for k in node.keywords)]
            node = node.func.value
        while type(node) is ast.Call and type(node.func) is ast.Attribute and torch_names.in_place(node.func.attr):
            given += [*node.args, *(k.value for k in node.keywords)]
            node = node.func.value  # `a.mul_(m).add_(x)`: down to `a`
        if node is statement.value:
            return None
    elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
            and isinstance(statement.targets[0], ast.Subscript):
        node = statement.targets[0]
        given.append(statement.value)
    else:
        return None
    while isinstance(node, ast.Subscript):
        given.append(node.slice)
        node = node.value
    if isinstance(node, ast.Attribute) and node.attr not in ("data", "grad"):
        return node.attr, given
    return None


def _added_to(statement: ast.stmt) -> ast.Name | None:
    """The name a statement adds to: `NAME.append(...)` or `NAME[key]...append(...)`, `NAME[key] = ...`."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        func = statement.value.func
        if not (isinstance(func, ast.Attribute) and func.attr in _ADDING_METHODS):
            return None
        base = func.value
    elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
            and isinstance(statement.targets[0], ast.Subscript):
        base = statement.targets[0]
    else:
        return None
    while isinstance(base, ast.Subscript):
        base = base.value
    return base if isinstance(base, ast.Name) else None


def _write_only_globals(model: SemanticModel) -> frozenset[str]:
    """The module-level names bound once to an empty container (`STATS = []`, `{}`, `set()`,
    `defaultdict(list)`) that every other use in the file adds to (`STATS.append(...)` as a statement)."""
    found = _WRITE_ONLY.get(model)
    if found is not None:
        return found
    candidates = {name for name, bindings in model.scopes.module.bindings.items()
                  if len(bindings) == 1 and _empty_container(bindings[0].value)}
    adding = {id(base) for node in walk(model.module) if isinstance(node, ast.stmt)
              and (base := _added_to(node)) is not None}
    for node in walk(model.module):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            candidates.difference_update(node.names)
        elif isinstance(node, ast.Name) and node.id in candidates and isinstance(node.ctx, ast.Load) \
                and id(node) not in adding:
            candidates.discard(node.id)  # read: what is added may come back
    found = _WRITE_ONLY[model] = frozenset(candidates)
    return found


def _empty_container(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.List, ast.Set)):
        return not value.elts
    if isinstance(value, ast.Dict):
        return not value.keys
    return activity.makes_container(value)


_WRITE_ONLY: weakref.WeakKeyDictionary[SemanticModel, frozenset[str]] = weakref.WeakKeyDictionary()


def _changes_state_in_place(statement: ast.stmt) -> bool:
    """`self.mean.mul_(m).add_(x)`, `self.u.data.copy_(u)`, `self.codebook[i] = x`, `self.calls += 1`:
    an in-place change of the tensor an attribute holds."""
    if isinstance(statement, (ast.Assign, ast.AugAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) for t in targets) or \
            isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Attribute)
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        return False
    node = statement.value
    while type(node) is ast.Call and type(node.func) is ast.Attribute and torch_names.in_place(node.func.attr):
        node = node.func.value  # `a.mul_(m).add_(x)`: down to `a`
    if isinstance(node, ast.Attribute) and node.attr == "data":
        node = node.value
    return node is not statement.value and isinstance(node, ast.Attribute)


def enables_grad_throughout(model: SemanticModel, region: GradModeChange) -> bool:
    """Whether every statement of the region's body (a docstring and `pass` aside) is a `with` that
    turns grad back on."""
    if region.api == "inference_mode" or isinstance(region.owner, ast.Expr):
        return False
    body = [s for s in region.owner.body if not _is_docstring_or_pass(s)]
    return bool(body) and all(_enables_grad(model, statement, region) for statement in body)


def _enables_grad(model: SemanticModel, statement: ast.stmt, region: GradModeChange) -> bool:
    """Whether a statement of the region is a `with` that turns grad back on."""
    return isinstance(statement, ast.With) and any(
        (change := model.change_at(item.context_expr)) is not None and change is not region
        and (change.api == "enable_grad" or change.api == "set_grad_enabled" and change.enabled is True)
        for item in statement.items)


def _inputs(model: SemanticModel, nodes: list[ast.AST], scope: Scope) -> tuple[str, ...] | None:
    """The parameters of the region's function that what it computes depends on, when everything
    else it reads is a constant; None when it reads anything else."""
    found: dict = {}  # the parameters, and the bindings looked into (a loop reads what it binds: once each)
    for node in nodes:  # a name the region binds is looked up too: `x = x * 2` in a loop reads `x`
        if not _reads_only_constants(model, node, scope, found, 0):
            return None
    return tuple(name for name in found if type(name) is str)


def _reads(model: SemanticModel, statements: list[ast.AST], scope: Scope) -> list[ast.AST]:
    """The nodes of `statements`, those below a constant attribute of `self` left out, and the
    names read below an operation whose value carries no derivative (`x.argmax()`, `x.shape[0]`,
    `mask = x > 0`: `analysis/activity.py`), whose calls are still looked at. A `lambda` is a
    function value: its body runs when it is called."""
    names_of = names_in(model, scope)
    found, todo = [], deque(statements)  # in the order of ast.walk
    while todo:
        node = todo.popleft()
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.AugAssign):  # `s += 1`, `self.steps += 1` read what they update
            target = copy.copy(node.target)
            target.ctx = ast.Load()
            todo.extend((target, node.op, node.value))
            continue
        found.append(node)
        if isinstance(node, ast.Attribute) and (_constant_attribute(model, node, scope) or module_state(
                model, node, scope) or _inherited_state(model, node, scope)):
            continue
        if isinstance(node, ast.expr) and activity.no_derivative(node, names_of):
            found += [below for below in walk(node) if below is not node and isinstance(below, _STILL_LOOKED_AT)]
            continue
        if isinstance(node, ast.Subscript):  # `self.codebook[idx]`: no derivative flows through an index
            found += [below for below in walk(node.slice) if isinstance(below, _STILL_LOOKED_AT)]
            todo.append(node.value)
            continue
        todo.extend(child_nodes(node))
    return found


def names_in(model: SemanticModel, scope: Scope):
    """For `analysis/activity.py`: the qualified names an expression may refer to; None for a
    builtin, an empty set for what the program binds."""
    def names_of(expr: ast.expr):
        names = model.scopes.qualified_names(expr, scope)
        if names:
            return names
        if isinstance(expr, ast.Name) and expr.id in _BUILTINS \
                and not model.scopes.lookup(scope, expr.id, (expr.lineno, expr.col_offset)):
            return None
        return frozenset()
    return names_of


def _constant_attribute(model: SemanticModel, node: ast.Attribute, scope: Scope) -> bool:
    """`self.scale` read in a method of a class whose methods set it only to a literal
    (`self.scale = 3.0`), or whose body does (`scale = 3.0`), and which nothing else in the file
    stores into."""
    base = node.value
    method = scope.node
    if not (isinstance(base, ast.Name) and isinstance(node.ctx, ast.Load) and scope.parent is not None
            and scope.parent.is_class and isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
            and method.args.args and method.args.args[0].arg == base.id):
        return False
    bindings = model.scopes.lookup(scope, base.id, (base.lineno, base.col_offset))
    return len(bindings) == 1 and bindings[0].node is method.args.args[0] \
        and _literal_attributes(model).get(node.attr) is scope.parent.node


def _literal_attributes(model: SemanticModel) -> dict[str, ast.ClassDef | None]:
    """For each attribute name stored into in the file, the class whose methods (through their first
    parameter) or body set it, when every store is a literal of that class; else None. One look at
    the targets of each statement; nothing when the file calls `setattr` (or its text is unknown)."""
    found = _LITERAL_ATTRIBUTES.get(model)
    if found is not None:
        return found
    found = _LITERAL_ATTRIBUTES[model] = {}
    if model.text is None or "setattr" in model.text:
        return found
    for statement, scope in model.statements:
        kind, value = type(statement), getattr(statement, "value", None)
        if kind is ast.Assign:
            targets = statement.targets
        elif kind is ast.AnnAssign or kind is ast.AugAssign or kind is ast.For or kind is ast.AsyncFor:
            targets = [statement.target]
        elif kind is ast.With or kind is ast.AsyncWith:
            targets = [item.optional_vars for item in statement.items if item.optional_vars is not None]
        elif kind is ast.Delete:
            targets = statement.targets
        elif scope.is_class and kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            found[statement.name] = None  # a method or a property of that name: no constant
            continue
        else:
            continue
        # `self.step += 1` keeps a number a number
        literal = kind in (ast.Assign, ast.AnnAssign, ast.AugAssign) and len(targets) == 1 and value is not None \
            and _is_literal(value)
        for target in targets:
            for node in walk(target):
                if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                    owner = scope.parent.node if literal and node is target and _first_parameter(scope, node) else None
                    found[node.attr] = owner if found.get(node.attr, owner) is owner else None
                elif scope.is_class and isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    owner = scope.node if literal and node is target else None
                    found[node.id] = owner if found.get(node.id, owner) is owner else None
    return found


def _assumed(model: SemanticModel, node: ast.Attribute, scope: Scope) -> tuple[str, ...]:
    """The attribute names whose stores in this file make `node` a constant or the module's state."""
    if _constant_attribute(model, node, scope):
        return (node.attr,)
    if module_state(model, node, scope):
        return (node.attr, node.value.attr) if isinstance(node.value, ast.Attribute) else (node.attr,)
    return (node.attr,) if _inherited_state(model, node, scope) else ()


def module_state(model: SemanticModel, node: ast.Attribute, scope: Scope, submodules: bool = False) -> bool:
    """`self.weight` (a parameter or buffer), `self.lin.weight` (anything of a torch submodule;
    with `submodules`, `self.lin` itself) read in a method of the class that makes them in
    `__init__`, and stores nowhere else in the file: state a transform of the module's call does
    not differentiate."""
    if not isinstance(node.ctx, ast.Load) or node.attr in _AUTOGRAD_STATE:
        return False
    own = node.value if isinstance(node.value, ast.Attribute) else node  # `self.lin` of `self.lin.weight`
    if not (isinstance(own.value, ast.Name) and _first_parameter(scope, own)):
        return False
    bindings = model.scopes.lookup(scope, own.value.id, (own.lineno, own.col_offset))
    if not (len(bindings) == 1 and bindings[0].node is scope.node.args.args[0]):
        return False
    kind = _state_kind(model, own, scope)
    return kind in (_HELD if own is node else ("module",)) or submodules and own is node and kind == "module"


_HELD = ("tensor", "buffer", "given", "number")


def constant_state(model: SemanticModel, node: ast.Attribute, scope: Scope) -> bool:
    """`self.inv_freq` made by `register_buffer` or by a torch function in `__init__` (not a
    parameter): a tensor that requires no grad; `self.eps = eps` given a number (`eps: float`,
    `eps=1e-6`): constants to every transform and tracer."""
    return isinstance(node.value, ast.Name) and _state_kind(model, node, scope) in ("buffer", "number")


def _state_kind(model: SemanticModel, own: ast.Attribute, scope: Scope) -> str | None:
    """What `self.<name>` holds in a method of its class, as `__init__` makes it (`_state_attributes`);
    in a class that stores nothing of that name (a mixin's method reading what the class it is mixed
    into sets), what every class of the file storing it makes, when they agree."""
    kinds = _state_attributes(model).get(own.attr)
    if kinds is None or scope.parent is None:
        return None
    if scope.parent.node in kinds:
        return kinds[scope.parent.node]
    made = set(kinds.values())
    return made.pop() if len(made) == 1 else None


def held_constant(model: SemanticModel, node: ast.Attribute, scope: Scope) -> bool:
    """`self.<name>` read in a method, that no transform of the module's call differentiates: its
    state or a submodule (`module_state`), a literal of its class, or what a torch base class
    makes (`self.weight` of a subclass of `nn.Linear`) when nothing in the file stores the name."""
    return module_state(model, node, scope, submodules=True) or _constant_attribute(model, node, scope) \
        or _inherited_state(model, node, scope)


def _inherited_state(model: SemanticModel, node: ast.Attribute, scope: Scope) -> bool:
    """`self.weight` in a subclass of `nn.Linear` whose file stores no attribute of that name: what
    the torch base class makes (a parameter, a buffer, a number)."""
    owner = scope.parent
    if owner is None or not owner.is_class or not _first_parameter(scope, node) or node.attr in _AUTOGRAD_STATE \
            or not isinstance(node.ctx, ast.Load) or model.text is None or "setattr" in model.text \
            or node.attr in _state_attributes(model):
        return False
    bases = owner.node.bases
    return bool(bases) and all(name.startswith("torch.nn.") for base in bases
                               for name in model.scopes.qualified_names(base, owner.parent) or ("",))


def _state_attributes(model: SemanticModel) -> dict[str, dict[ast.ClassDef, str | None] | None]:
    """For each attribute name stored in the file, by class: "tensor" when every store of the
    class is in its `__init__` and makes a tensor (`nn.Parameter(...)`, a torch function,
    `register_buffer`), "module" for a torch submodule (`nn.Linear(...)`), "given" for what the
    constructor is given (`self.alpha = alpha`, `self.eps = float(cfg.eps)`); None for the name
    when another store may set it. Nothing when the file calls `setattr`."""
    found = _STATE_ATTRIBUTES.get(model)
    if found is not None:
        return found
    found = _STATE_ATTRIBUTES[model] = {}
    if model.text is None or "setattr" in model.text:
        return found

    def note(name: str, owner: ast.ClassDef | None, kind: str | None) -> None:
        kinds = found.setdefault(name, {})
        if kinds is not None and owner is not None and kind is not None:
            kinds[owner] = kind if kinds.get(owner, kind) == kind else None
        else:
            found[name] = None

    for node, scope in model.statements:
        if isinstance(node, ast.AugAssign) and _is_literal(node.value):
            continue  # `self.steps += 1`: a buffer stays what it was
        stores = [t for t in node.targets] if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)) else []
        registered = _registered(node) if isinstance(node, ast.Expr) else None
        init = isinstance(scope.node, ast.FunctionDef) and scope.node.name == "__init__" \
            and scope.parent is not None and scope.parent.is_class
        if registered is not None:
            note(registered[0], scope.parent.node if init else None, registered[1])
        for target in stores:
            # `self.a = A()`, `self.a, self.b = A(), B()`: what each attribute is given
            values = dict(_paired(target, node.value)) if init and isinstance(node, ast.Assign) else {}
            for below in walk(target):
                if isinstance(below, ast.Attribute) and not isinstance(below.ctx, ast.Load):
                    value = values.get(below)
                    kind = _made(model, value, scope) if value is not None and _first_parameter(scope, below) else None
                    note(below.attr, scope.parent.node if init else None, kind)
    return found


def _registered(statement: ast.Expr) -> tuple[str, str] | None:
    """`self.register_buffer("mean", ...)`, `self.register_parameter("w", ...)`: the name, and
    "buffer" or "tensor"."""
    call = statement.value
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
            and call.func.attr in ("register_buffer", "register_parameter") and call.args \
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value, "buffer" if call.func.attr == "register_buffer" else "tensor"
    return None


def _paired(target: ast.expr, value: ast.expr) -> list[tuple[ast.expr, ast.expr]]:
    """Each target with the value it is given: `a, b = f(), g()` unpacked element by element."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts) \
            and not any(isinstance(node, ast.Starred) for node in (*target.elts, *value.elts)):
        return [pair for element, part in zip(target.elts, value.elts) for pair in _paired(element, part)]
    return [(target, value)]


def _made(model: SemanticModel, value: ast.expr, scope: Scope) -> str | None:
    """"tensor" for `nn.Parameter(...)`, "buffer" for a torch function's result (that does not
    require grad), "module" for a torch module, "given" for a value computed from the parameters
    of `__init__` alone, "number" when those are numbers."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in library.RETURNS_RECEIVER and isinstance(value.func.value, ast.Call):
        value = value.func.value  # `nn.Linear(d, d).double()`: the module made
    given = _given(model, value, scope)
    if given is not None:
        return "number" if given else "given"
    if not isinstance(value, ast.Call):
        return None
    names = model.scopes.qualified_names(value.func, scope)
    if not names:
        return None
    if all(name.startswith("torch.nn.") and name.rpartition(".")[2][:1].isupper() for name in names):
        return "tensor" if all(name.endswith(".Parameter") for name in names) else "module"
    if not all(name.startswith("torch.") and name.rpartition(".")[2][:1].islower() for name in names):
        return None
    return "tensor" if any(k.arg == "requires_grad" for k in value.keywords) else "buffer"


_STATE_ATTRIBUTES: weakref.WeakKeyDictionary[SemanticModel, dict] = weakref.WeakKeyDictionary()
_GIVEN_NODES = (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp,
                ast.Compare, ast.IfExp, ast.Tuple, ast.Call, ast.keyword, ast.operator, ast.unaryop, ast.boolop,
                ast.cmpop, ast.expr_context)


def _given(model: SemanticModel, value: ast.expr, scope: Scope) -> bool | None:
    """`alpha`, `cfg.alpha`, `dim // heads`, `cfg.get("eps", 1e-6)`, `Dynamics(dim)`: a value
    `__init__` computes from its parameters (not `self`), literals and the module's classes alone;
    True when those parameters are numbers (annotated `int`, `float` or `bool`, or a number by
    default: `eps=1e-6`), or `float(...)` or `int(...)` makes it one; None for any other value. As
    the object's own state, what the caller gave is a constant to a transform of the object's call,
    as a parameter (which `functional_call` varies) would be; a number is a constant to tracers too."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _NUMBER_TYPES \
            and not model.scopes.lookup(scope, value.func.id, (value.lineno, value.col_offset)):
        return True if _given(model, ast.Tuple(value.args, ast.Load()), scope) is not None else None
    numbers = None
    arguments = scope.node.args
    defaults = dict(zip([a.arg for a in (*arguments.posonlyargs, *arguments.args)][::-1], arguments.defaults[::-1]))
    defaults.update((a.arg, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None)
    made = {id(node.func) for node in walk(value) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    for node in walk(value):
        if not isinstance(node, _GIVEN_NODES):
            return None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            bindings = model.scopes.lookup(scope, node.id, (node.lineno, node.col_offset))
            if not bindings and node.id in activity.INTEGER_BUILTINS | _NUMBER_BUILTINS \
                    or len(bindings) == 1 and bindings[0].imported == "copy":
                continue  # (`copy.deepcopy(student)`: a copy of what it is given)
            if id(node) in made and bindings and all(b.scope is model.scopes.module for b in bindings):
                numbers = False  # `Dynamics(dim)`, `solver or RK23()`: an object made of what it is given
                continue
            if not bindings or not all(b.scope is scope and isinstance(b.node, ast.arg) for b in bindings) \
                    or node.id == arguments.args[0].arg:
                return None
            annotation, default = bindings[0].node.annotation, defaults.get(node.id)
            number = isinstance(annotation, ast.Name) and annotation.id in _NUMBER_TYPES or isinstance(
                default, ast.Constant) and type(default.value) in (int, float, bool)
            numbers = number if numbers is None else numbers and number
    return numbers


_NUMBER_TYPES = frozenset({"int", "float", "bool"})
_NUMBER_BUILTINS = frozenset({"abs", "min", "max", "round", "tuple", "sum"})


def _first_parameter(scope: Scope, node: ast.Attribute) -> bool:
    """Whether `node` is `self.attr` in a method (`self` its first parameter)."""
    method = scope.node
    return scope.parent is not None and scope.parent.is_class and isinstance(node.value, ast.Name) \
        and isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and bool(method.args.args) \
        and method.args.args[0].arg == node.value.id


_LITERAL_ATTRIBUTES: weakref.WeakKeyDictionary[SemanticModel, dict] = weakref.WeakKeyDictionary()


def _stores(region: GradModeChange, targets: list[ast.expr], inside: set[int]) -> tuple[str, ...]:
    """The attribute names the region stores into (`x.attr = ...`, `x.attr[key] = ...`), when the
    rest of what it binds is locals nothing outside it reads; () otherwise."""
    attributes: dict[str, None] = {}
    locals_: set[str] = set()
    for target in targets:
        base = target.value if isinstance(target, ast.Subscript) else target
        if isinstance(base, ast.Attribute):
            attributes[base.attr] = None
        elif isinstance(target, ast.Name):
            locals_.add(target.id)
        else:
            return ()
    if not attributes or _read_outside(region, locals_, inside):
        return ()
    return tuple(attributes)


def _is_docstring_or_pass(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Pass) or (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))


def _reads_only_constants(model: SemanticModel, node: ast.AST, scope: Scope, found: dict, depth: int) -> bool:
    """Whether one node reads only constants and parameters of the function (added to `found`), and
    touches no autograd state (grad mode, `requires_grad`, a parameter made, an in-place change)."""
    if isinstance(node, _UNKNOWABLE):
        return False
    if isinstance(node, ast.Call):
        return (_constant_callee(model, node.func, scope) or _called_parameter(model, node.func, scope)) \
            and not _touches_autograd(model, node, scope)
    if isinstance(node, ast.Attribute):
        if node.attr in _AUTOGRAD_STATE:
            return False
        if module_state(model, node, scope) and not constant_state(model, node, scope) \
                or _inherited_state(model, node, scope):
            found[STATE] = None  # (a buffer, or a number: no tensor that requires grad)
        return True
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        return _name_only_on(model, node, scope, found, depth)
    return True


# What no constant is: autograd state and grad mode, read or set (as region_values refuses them).
_AUTOGRAD_STATE = frozenset({"requires_grad", "grad_fn", "is_leaf", "_version", "grad", "data"})
_AUTOGRAD_CALLS = frozenset({
    "torch.set_grad_enabled", "torch.is_grad_enabled", "torch._C._set_grad_enabled", "torch._C.is_grad_enabled",
    "torch.is_inference_mode_enabled", "torch.nn.Parameter", "torch.nn.parameter.Parameter",
    "torch.autograd.grad_mode.set_grad_enabled", "torch.autograd.grad_mode.is_grad_enabled",
    "torch._C._set_fwd_grad_enabled", "torch._C._is_fwd_grad_enabled", "torch.enable_grad", "torch.no_grad",
    "torch.inference_mode"})


def _touches_autograd(model: SemanticModel, call: ast.Call, scope: Scope) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and (func.attr.endswith("_") and not func.attr.startswith("_")
                                            or func.attr in ("requires_grad_", "retain_grad", "backward")):
        return True  # in place: state a later read sees
    if any(keyword.arg in ("requires_grad", "out") for keyword in call.keywords):
        return True
    return bool(model.scopes.qualified_names(func, scope) & _AUTOGRAD_CALLS)


def _depends_only_on(model: SemanticModel, value: ast.AST, scope: Scope, found: dict, depth: int) -> bool:
    """Whether every value `value` reads is a constant or a parameter of the function (added to `found`)."""
    if depth > _MAX_DEPTH:
        return False
    return all(_reads_only_constants(model, node, scope, found, depth) for node in _reads(model, [value], scope))


_UNKNOWABLE = (*FUNCTION_NODES, ast.ClassDef, ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal,
               ast.NamedExpr)
_STILL_LOOKED_AT = (ast.Call, *_UNKNOWABLE)  # below an index or a value with no derivative: whether calls are harmless


def _constant_callee(model: SemanticModel, func: ast.expr, scope: Scope) -> bool:
    """A call that computes from its arguments alone: a torch or math function, a builtin, or a
    method of a value (whose base the walk looks at as any other read). `self.f(x)`, a function of
    the project, may read anything."""
    if isinstance(func, ast.Attribute):
        names = model.scopes.qualified_names(func, scope)
        if names:
            return all(name.startswith(_CONSTANT_MODULES) for name in names)
        if module_state(model, func, scope, submodules=True) and _state_kind(model, func, scope) in ("module", "given"):
            return True  # `self.teacher(x)`: a torch submodule, or a module given, computes from `x` and its state
        base = func.value
        while isinstance(base, (ast.Attribute, ast.Subscript, ast.Call)):
            if isinstance(base, ast.Attribute) and (module_state(model, base, scope) and _state_kind(
                    model, base, scope) != "number" or _inherited_state(model, base, scope)):
                return True  # `self.weight.norm()`, `self.teacher.features(x)`: methods of its state
            base = base.func if isinstance(base, ast.Call) else base.value
        return not (isinstance(base, ast.Name) and base.id in ("self", "cls"))
    if isinstance(func, ast.Name):
        names = model.scopes.qualified_names(func, scope)
        if names:
            return all(name.startswith(_CONSTANT_MODULES) for name in names)
        return not model.scopes.lookup(scope, func.id, (func.lineno, func.col_offset)) and func.id in _BUILTINS
    return False


def _called_parameter(model: SemanticModel, func: ast.expr, scope: Scope) -> bool:
    """`teacher(x)` in `def loss(p, x, teacher)`: a call of what the function is given computes from
    it and from its arguments, each of them read as the parameter it is (the project says whether a
    transform varies it: a function made inside the transformed code, a lambda, may be anything)."""
    if not isinstance(func, ast.Name) or func.id in ("self", "cls"):
        return False
    bindings = model.scopes.lookup(scope, func.id, (func.lineno, func.col_offset))
    return bool(bindings) and all(binding.scope is scope and isinstance(binding.node, ast.arg) for binding in bindings)


def _name_only_on(model: SemanticModel, name: ast.Name, scope: Scope, found: dict, depth: int) -> bool:
    bindings = model.scopes.lookup(scope, name.id, (name.lineno, name.col_offset))
    if not bindings:
        return name.id in _BUILTINS and name.id not in ("globals", "locals", "vars", "eval", "exec")
    for binding in bindings:
        owner = binding.scope
        if binding.imported:
            if binding.imported.partition(".")[0] in _CONSTANT_IMPORTS:
                continue  # torch, math: a module or a function of one (calling it is judged as a call)
            return False  # `from pkg.consts import W`: W may be a tensor that requires grad
        node = binding.node
        if isinstance(node, ast.arg):
            if owner is not scope or node.arg in ("self", "cls"):
                return False  # a closure's parameter, or the instance: may be anything
            found[node.arg] = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        elif isinstance(binding.value, _MUTABLE):
            return False  # `seen = []`, then `seen.append(x.mean())`: it holds what code puts in
        elif binding.value is not None and (owner is scope or owner.node is model.module):
            # a local computed from ..., or a module-level name: only as constant as its value
            if binding in found:  # `u = normalize(w @ v)` and `v = normalize(w.t() @ u)` in a loop
                continue
            if owner is scope:
                found[binding] = None
            if owner.node is model.module and _rebound_elsewhere(model, binding):
                return False
            if not _depends_only_on(model, binding.value, owner, found if owner is scope else {}, depth + 1):
                return False
            if owner is not scope and not _is_literal(binding.value):
                return False  # a module-level tensor may require grad: only literals count
        else:
            return False
    return True


_MUTABLE = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def _is_literal(value: ast.expr) -> bool:
    """A number, a string, a tuple of them, arithmetic on them: a global constant. Not a list,
    which code may append to (`self.history = []`, then `self.history.append(x.mean())`)."""
    return all(isinstance(node, (ast.Constant, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.operator,
                                 ast.unaryop, ast.Load, ast.expr_context))
               for node in walk(value))


def _rebound_elsewhere(model: SemanticModel, binding) -> bool:
    """A module-level name assigned more than once, or through `global` in a function: no constant."""
    if len(model.scopes.module.bindings.get(binding.name, ())) > 1:
        return True
    declared = _GLOBALS.get(model)
    if declared is None:
        declared = _GLOBALS[model] = {name for node in walk(model.module) if isinstance(node, ast.Global)
                                      for name in node.names}
    return binding.name in declared


_GLOBALS: weakref.WeakKeyDictionary[SemanticModel, set[str]] = weakref.WeakKeyDictionary()  # once a file


def _calls_are_harmless(model: SemanticModel, nodes: list[ast.AST], scope: Scope) -> bool:
    """Calls of torch, math and builtins, and methods of values, none of them in place."""
    for node in nodes:
        if isinstance(node, ast.Call):
            func = node.func
            if not _constant_callee(model, func, scope) or _touches_autograd(model, node, scope):
                return False
        elif isinstance(node, _UNKNOWABLE):
            return False
    return True


def _read_outside(region: GradModeChange, names: set[str], inside: set[int]) -> bool:
    """Whether the function reads one of `names` outside the region's statements."""
    if not names:
        return False
    return any(isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load)
               and id(node) not in inside for node in walk(region.function))


def _cut_after(region: GradModeChange, names: set[str], inside: set[int]) -> bool:
    """Whether every read of `names` outside the region is cut where it is read: `s.detach()`, or
    an argument of `stop_gradient(...)`. What the region computes then carries no derivative on."""
    cut: set[int] = set()
    for node in walk(region.function):
        if isinstance(node, ast.Attribute) and node.attr == "detach":
            cut.add(id(node.value))
        elif isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords and (
                isinstance(node.func, ast.Name) and node.func.id == torch_names.STOP_GRADIENT
                or isinstance(node.func, ast.Attribute) and node.func.attr == torch_names.STOP_GRADIENT):
            cut.add(id(node.args[0]))
    return all(id(node) in cut or id(node) in inside for node in walk(region.function)
               if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load))


def _only_in_aux(region: GradModeChange, names: set[str], inside: set[int]) -> bool:
    """Whether the locals a region binds leave the function only after the first value it returns
    (`return loss, {"norm": n}`), directly or through locals computed from them (`stats = {"n": n}`,
    `stats["n"] = n`): what a transform given `has_aux=True` hands back as it is, differentiating
    none of it. Any other read (an argument, a condition, a closure) may reach the first value."""
    function = region.function
    nodes = [node for node in walk(function) if id(node) not in inside]
    returns = [node for node in _own_nodes(function) if isinstance(node, ast.Return)]
    if not returns or not all(isinstance(r.value, ast.Tuple) and len(r.value.elts) > 1 for r in returns):
        return False
    allowed = {id(node) for r in returns for element in r.value.elts[1:] for node in walk(element)}
    assigns = [node for node in _own_nodes(function) if isinstance(node, ast.Assign) and id(node) not in inside]
    names = set(names)
    grown = True
    while grown:  # locals computed from them hold them too
        grown = False
        for assign in assigns:
            read = {id(n) for n in walk(assign.value)}
            if id(assign) in allowed or not any(isinstance(n, ast.Name) and n.id in names for n in walk(assign.value)):
                continue
            bases = [t.value if isinstance(t, ast.Subscript) else t for t in assign.targets]
            if not all(isinstance(base, ast.Name) for base in bases):
                return False
            allowed |= read | {id(assign)} | {id(n) for target in assign.targets for n in walk(target)}
            names |= {base.id for base in bases}
            grown = True
    return all(id(node) in allowed for node in nodes
               if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load))


def _read_after_only_without_derivative(region: GradModeChange, body: list[ast.stmt], bound: set[str],
                                        inside: set[int], names_of) -> bool:
    """Whether nothing the region computes leaves it with a derivative, in any mode: what it returns
    carries none (`return int(h)`), and each local it binds that code after it reads is either read
    only below an operation whose value carries none (`n = int(h)`, `if err < tol:`) or assigned,
    each time in the region, a value that carries none (`d = dist(z, codebook)` then
    `idx = d.argmin(-1)`, only `idx` read after)."""
    returned = body[-1].value if body and isinstance(body[-1], ast.Return) else None
    if returned is not None and not activity.no_derivative(returned, names_of):
        return False
    statements = body[:-1] if returned is not None else body
    cut = set()  # the reads below an operation whose value is a number or a boolean (a cut by `.detach()`
    for node in walk(region.function):  # or `stop_gradient` is the fix's own form: `_cut_after`)
        if isinstance(node, ast.expr) and id(node) not in inside and activity.no_derivative(node, names_of) \
                and not _cuts(node, names_of):
            cut.update(id(below) for below in walk(node))
    read = {node.id for node in walk(region.function) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
            and node.id in bound and id(node) not in inside and id(node) not in cut}
    values: dict[str, list[ast.expr]] = {}
    for statement in statements:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        for target in targets:
            if not isinstance(target, ast.Name):
                if any(isinstance(n, ast.Name) and n.id in read for n in walk(target)):
                    return False  # (unpacked: which element is which is not told)
                continue
            values.setdefault(target.id, []).append(statement.value)
    read_cut = any(isinstance(node, ast.Name) and node.id in bound and id(node) in cut for node in walk(region.function))
    return (bool(read) or returned is not None or read_cut) and all(
        activity.no_derivative(value, names_of) for name in read for value in values.get(name, [None]))


def _cuts(node: ast.expr, names_of) -> bool:
    """`x.detach()`, `stop_gradient(x)`: a tensor, cut from the graph."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return isinstance(func, ast.Attribute) and func.attr in ("detach", "detach_") or \
        any(name.rpartition(".")[2] == "stop_gradient" for name in names_of(func) or ())


def _only_returned(region: GradModeChange, names: set[str], inside: set[int]) -> bool:
    """Whether the locals a region binds are read after it only in the function's `return`
    statements (`return entropy`): what it computes goes where the callers take the value."""
    returned = {id(node) for statement in _own_nodes(region.function) if isinstance(statement, ast.Return)
                for node in walk(statement)}
    return all(id(node) in inside or id(node) in returned for node in walk(region.function)
               if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load))


def _own_nodes(function: ast.AST):
    """The nodes of a function's body, not those of the functions and classes defined in it."""
    todo = list(getattr(function, "body", []))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (*FUNCTION_NODES, ast.ClassDef)):
            todo.extend(child_nodes(node))


_AUTOGRAD_GRAD = frozenset({"torch.autograd.grad"})


def differentiates_itself(model: SemanticModel, function: ast.AST) -> bool:
    """Whether a function runs a backward pass of its own (`torch.autograd.grad`, `.backward()`),
    none with `create_graph`: traced by `make_fx`, its graph records the backward eager mode ran,
    regions respected, so what it returns equals eager mode's values (until differentiated again)."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or function not in model.scopes.of:
        return False
    scope, found = model.scopes.of[function], False
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (*FUNCTION_NODES, ast.ClassDef)):
            continue
        if isinstance(node, ast.Call):
            if any(k.arg == "create_graph" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                   for k in node.keywords):
                return False
            found = found or isinstance(node.func, ast.Attribute) and node.func.attr == "backward" or bool(
                model.scopes.qualified_names(node.func, scope) & _AUTOGRAD_BACKWARD)
        stack += list(child_nodes(node))
    return found


_AUTOGRAD_BACKWARD = frozenset({"torch.autograd.grad", "torch.autograd.backward"})


def returns_only_gradients(model: SemanticModel, function: ast.AST) -> bool:
    """Whether a function differentiates (`torch.autograd.grad`, without `create_graph`) and returns
    nothing but what that computes: names bound to its result (or unpacked from it), subscripts of
    them, tuples and lists of these, and `None`."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    scope = model.scopes.of.get(function)
    if scope is None:
        return False
    gradients: set[str] = set()
    returns: list[ast.Return] = []
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (*FUNCTION_NODES, ast.ClassDef)):
            continue
        if isinstance(node, ast.Call) and any(k.arg == "create_graph" and not (
                isinstance(k.value, ast.Constant) and k.value.value is False) for k in node.keywords):
            return False  # second-order gradients through the traced graph differ from eager ones
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and model.scopes.qualified_names(node.value.func, scope) & _AUTOGRAD_GRAD:
            for target in node.targets:
                gradients.update(n.id for n in walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Return):
            returns.append(node)
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            return False
        stack += list(child_nodes(node))
    return bool(gradients) and bool(returns) and all(
        r.value is not None and _only_gradients(r.value, gradients) for r in returns)


def _only_gradients(value: ast.expr, gradients: set[str]) -> bool:
    if isinstance(value, (ast.Tuple, ast.List)):
        return all(_only_gradients(element, gradients) for element in value.elts)
    if isinstance(value, ast.Subscript):
        return _only_gradients(value.value, gradients)
    if isinstance(value, ast.Name):
        return value.id in gradients
    return isinstance(value, ast.Constant) and value.value is None
