"""The summary of one file: what other files need to know of it, as plain data that is cached.

Built once per file from its `SemanticModel`: the functions, methods and classes it defines, with
their grad-disabled regions; what each function calls or passes on; which transforms and tracers
it applies to what; what its imports bind. No `ast` node survives: names are turned into *refs*,
which the project (`project/linking.py`) resolves across modules.

Refs are tuples:
    ("fn", name)          a function of this module, by qualified name (`loss`, `Net.forward`)
    ("cls", name)         a class of this module
    ("imp", "a.b.c")      what an import binds (`..model.loss` when relative)
    ("imp", "a.b.c", "a") a name `from a import *` may bind: `a.b` if the module `a` exports `b`
    ("param", fn, name)   a parameter of a function of this module
    ("attr", ref, name)   an attribute: a method of a class, a submodule, ...
    ("inst", ref)         an instance of a class (calling it runs `forward`)
    ("call", ref)         what calling `ref` returns (an instance, when `ref` is a class)
    ("wrap", ref)         a wrapper that runs `ref` when called: `vmap(f)`, `partial(f, a)`, `grad(f)`
    ("box", ref)          a container holding `ref`: `nn.Sequential(Block())`, `[Block() for _ in range(3)]`
    ("item", ref)         an element of the container `ref`: `self.blocks[0]`, `block` in `for block in self.blocks`
    ("super", ref)        `super()` in a method of the class `ref`: its attributes are looked up in the bases
    ("kept", param)       a parameter stored into a module's container: what every call passes to it
    ("global", name)      the container a module binds to `name`: also what decorator factories given it store
"""
from __future__ import annotations

import ast
import bisect
import itertools
import re
import sys
from dataclasses import dataclass, field
from typing import Optional

from lint_nograd.analysis import activity, entry_points, guards, library, region_flow, torch_names, trace_uses, varied
from lint_nograd.analysis.model import (
    CALLER_STATE,
    MODULE_STATE,
    GradState,
    SemanticModel,
    TableVisitor,
    graph_sources,
    inside_comprehension,
    is_operation,
    is_torch_operation,
    word_offsets,
)
from lint_nograd.analysis.region_values import region_cuts_its_values
from lint_nograd.analysis.scopes import COMPREHENSION_NODES, Binding, Scope, walk
from lint_nograd.analysis.varied import Dependence

Ref = tuple
MODULE_BODY = ""  # the name under which the module's own code is summarised, like a function's

_MAX_DEPTH = 8
_MAX_DECORATED = 8  # the refs of one decorated function, at most


@dataclass(frozen=True, slots=True)
class Span:
    """Where something is, ready to report: 1-based rows, character columns, and the first line."""

    row: int
    col: int
    end_row: int
    end_col: int
    line: str


@dataclass(slots=True)
class Source:
    """A transform or tracer applied to something: `jacfwd(loss)`, `symbolic_trace(Net())`."""

    entry: str  # the name of the entry point (entry_points.ENTRY_POINTS)
    modes: tuple[str, ...]
    targets: tuple[Ref, ...]  # what it runs
    span: Span
    text: str  # `jacfwd(loss)`, for messages
    receivers: tuple[Ref, ...] = ()  # `tracer.trace(m)`: a finding only if `tracer` is a torch.fx.Tracer
    # which arguments it differentiates, of the function it runs: (whether it runs `partial(f, ...)`,
    # the count of arguments bound by `partial`, the keywords bound by it, `argnums` or None for every
    # free one); None when unknown (linking: `constant_params`)
    selection: Optional[tuple[bool, int, tuple[str, ...], Optional[tuple[int, ...]]]] = None
    # `make_fx` of a function of this module that returns only torch.autograd.grad's result, or
    # that runs a backward pass of its own, traced for export (region_flow.differentiates_itself)
    gradient_step: bool = False
    exported: bool = False  # a tracer's result only saved, exported or run without grad where it is bound (trace_uses)
    skips: tuple[str, ...] = ()  # the guarded branches it cannot run (analysis/guards.py): eval mode, an init done
    aux: bool = False  # `has_aux=True`: what the function returns after its first value is only handed back


@dataclass(slots=True)
class CallSite:
    """A call that passes something callable: `hvp(energy, x, v)`, for helpers' parameters."""

    callees: tuple[Ref, ...]
    args: tuple[tuple[Ref, ...], ...]  # the refs of each positional argument
    keywords: dict[str, tuple[Ref, ...]]
    span: Span
    text: str
    receiver: tuple[Ref, ...] = ()  # `net` in `net.export(x)`: the `self` of the method called
    bound: bool = False  # `partial(loss, model=net)`: what a call of its result passes, not a call made here
    decoration: bool = False  # `@dec` on a `def`: `dec(f)`, the function decorated
    star: tuple[Ref, ...] = ()  # `super().__init__(*args)`: what is unpacked after `args`, element by element


@dataclass(slots=True)
class Passing:
    """A call of the project's code and the parameters of the caller each argument depends on
    (`analysis/varied.py`), for which parameters of the callee a transform varies."""

    callees: tuple[Ref, ...]
    args: Optional[tuple[Dependence, ...]]  # None: the arguments cannot be told apart (`*args`, `checkpoint(f, x)`)
    keywords: dict[str, Dependence]
    receiver: Dependence  # what the callee is looked up on: `self` of a method, the module called
    rest: Optional[Dependence] = None  # what every positional argument after `args` depends on (`f(p, *batch)`)


@dataclass(slots=True)
class RegionCall:
    """A call made inside a grad-disabled region: what it runs runs in the region's mode, through
    every call it makes in turn."""

    callees: tuple[Ref, ...]
    api: str  # the region's, as `Region.api`
    inference: bool
    span: Span
    text: str
    region: Span  # the region's expression
    when: str = ""  # entered only on a condition (`Region.when`): "`train` is False"


@dataclass(slots=True)
class Applied:
    """A transform applied where the caller's grad mode holds: NG001 / NG002 when a caller runs the
    function inside a region."""

    transform: str  # `grad`, `jacobian`
    functional: bool  # torch.autograd.functional's
    span: Span
    text: str
    grad_enabled: bool = False  # grad mode turned back on around it (`@torch.enable_grad()`): only inference mode holds
    backward: bool = False  # `backward` or `torch.autograd.grad` on what the function computes: no graph in a region


@dataclass(slots=True)
class Function:
    params: tuple[str, ...]  # positional parameters, `self` included
    kwonly: tuple[str, ...] = ()
    calls: tuple[Ref, ...] = ()  # what its body calls, each once
    call_sites: list[CallSite] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    returns_region: Optional[Span] = None  # every return hands back a value computed in this region
    returns_api: str = ""
    reads: tuple[str, ...] = ()  # the attribute names its body loads (`x.last_norm`), for regions that only store
    region_calls: list[RegionCall] = field(default_factory=list)
    applied: list[Applied] = field(default_factory=list)
    guarded: tuple[Ref, ...] = ()  # what it calls where it turns grad mode back on: a caller's no_grad stops there
    shielded: tuple[Ref, ...] = ()  # what it calls under `inference_mode(False)`: a caller's mode stops there
    sets_grad_mode: bool = False  # `torch.set_grad_enabled(...)` as a statement: the caller's mode is not followed in
    # each return not computed in a region hands back what a call returns (`return evaluate(b)`, `y = f(b);
    # return y`): what those callees are; the function has no graph to give if each of them has none
    returns_through: tuple[Ref, ...] = ()
    passes: list[Passing] = field(default_factory=list)  # each call of the project's code (`summarise(passes=True)`)
    kind: str = ""  # "staticmethod" (never bound to what it is read from), "classmethod" (bound to the class)
    varargs: str = ""  # the name of its `*args`: a tuple of what a call passes after `params`
    varkw: str = ""  # the name of its `**kwargs`: a dict of the keywords a call passes that no parameter takes
    # what it calls only where the value goes nowhere it computes: a statement (`f(x)`, `print(f(x))`)
    # or a store into an attribute (`self.last = f(x)`): the callee -> those attributes' names
    unused_results: dict[Ref, tuple[str, ...]] = field(default_factory=dict)
    # every return hands back a tuple as long: for each element, (region, api) when each computes it in one
    element_regions: tuple[Optional[tuple[Span, str]], ...] = ()


@dataclass(slots=True)
class Class:
    bases: tuple[tuple[Ref, ...], ...]
    methods: dict[str, str]  # method name -> function name
    attributes: dict[str, tuple[Ref, ...]]  # `self.block = Block()`, class-level assignments


@dataclass(slots=True)
class Region:
    function: Optional[str]  # the function whose body it is in (None at module level)
    api: str  # `no_grad`, `set_grad_enabled(False)`, `inference_mode`
    inference: bool
    span: Span
    dual_level: Optional[Span] = None  # inside `with dual_level():` that makes duals: forward mode
    cut: bool = False  # every value leaving it is cut, as the memory-preserving fix writes it: never reported
    inert: str = ""  # why it cannot change a result in any mode ("enable_grad"), from the file alone
    # the parameters its values depend on (region_flow.STATE: the module's own state), all else constant
    inputs: Optional[tuple[str, ...]] = None
    stores: tuple[str, ...] = ()  # the attributes it only stores into, read by nothing else it does
    local_only: bool = False  # it only binds locals: no state a tracer records (region_flow)
    when: str = ""  # entered only on a condition: "`self.frozen` is True"
    assumes: tuple[str, ...] = ()  # attributes read as constants of the file (region_flow): stored nowhere else
    cut_after: bool = False  # it binds locals that every later read cuts (region_flow)
    guard: str = ""  # in a branch only training mode or a first call runs (analysis/guards.py)
    mutates: bool = False  # it changes attributes in place: torch.func transforms raise on it (region_flow)
    aux_only: bool = False  # what it computes leaves the function only after the first value returned (region_flow)
    returned_only: bool = False  # what it computes leaves the function only by its return (region_flow)
    adds: tuple[str, ...] = ()  # the attributes it only adds to or changes in place (region_flow)


@dataclass(slots=True)
class BackwardSite:
    """`y.backward()` after `y = f(...)`: NG003 if `f` returns a value computed in a region."""

    callees: tuple[Ref, ...]
    callee_text: str
    name: str
    assigned_row: int
    span: Span
    element: Optional[int] = None  # `_, y = f(...)`: the element of what `f` returns (1)


@dataclass(slots=True)
class ModuleSummary:
    functions: dict[str, Function]  # MODULE_BODY for the code at the top level
    classes: dict[str, Class]
    names: dict[str, tuple[Ref, ...]]  # what each module-level name is bound to
    regions: list[Region]
    backwards: list[BackwardSite]
    properties: list[str] = field(default_factory=list)  # the functions read as attributes: `@property`
    lambdas: dict[str, str] = field(default_factory=dict)  # each lambda -> the function or class it is written in
    returns: dict[str, tuple[Ref, ...]] = field(default_factory=dict)  # function -> what its returns (a lambda's body) hand back
    # it may differentiate a module's parameters (`functional_call`): `self.weight` is no constant
    differentiates_state: bool = False
    stored_attributes: tuple[str, ...] = ()  # every attribute name its text stores into (`x.scale = ...`)
    star_imports: tuple[str, ...] = ()  # `from .layers import *`: the modules, as written
    exports: Optional[tuple[str, ...]] = None  # a literal `__all__`: what `from it import *` binds (None: its public names)
    hooks: tuple[Ref, ...] = ()  # what it registers as hooks: run with (module, inputs, output), not a call's arguments
    # (function, parameter) -> the hooks it registers on what the parameter holds (or on a submodule of it):
    # they run whenever what a call passes runs (`attach_centering(net)`, returning only the handle)
    hooked: dict[tuple[str, str], tuple[Ref, ...]] = field(default_factory=dict)
    # (function, parameter) -> what a function nested in it stores into the container the parameter
    # holds (`def register(table, name): def deco(cls): table[name] = cls`)
    fills: dict[tuple[str, str], tuple[Ref, ...]] = field(default_factory=dict)

    def to_json(self) -> dict:
        """Plain data (dataclasses.asdict is far slower: it deep-copies every ref)."""
        def span(s):
            return None if s is None else {"row": s.row, "col": s.col, "end_row": s.end_row, "end_col": s.end_col,
                                           "line": s.line}

        def source(s):
            return {"entry": s.entry, "modes": s.modes, "targets": s.targets, "span": span(s.span), "text": s.text,
                    "receivers": s.receivers,
                    "selection": s.selection, "gradient_step": s.gradient_step, "exported": s.exported,
                    "skips": s.skips, "aux": s.aux}

        def site(c):
            return {"callees": c.callees, "args": c.args, "keywords": c.keywords, "span": span(c.span),
                    "text": c.text, "receiver": c.receiver, "bound": c.bound, "decoration": c.decoration,
                    "star": c.star}

        def region_call(c):
            return {"callees": c.callees, "api": c.api, "inference": c.inference, "span": span(c.span),
                    "text": c.text, "region": span(c.region), "when": c.when}

        def applied(a):
            return {"transform": a.transform, "functional": a.functional, "span": span(a.span), "text": a.text,
                    "grad_enabled": a.grad_enabled, "backward": a.backward}

        return {
            "functions": {name: {"params": f.params, "kwonly": f.kwonly, "calls": f.calls,
                                 "call_sites": [site(c) for c in f.call_sites], "sources": [source(x) for x in f.sources],
                                 "returns_region": span(f.returns_region), "returns_api": f.returns_api,
                                 "element_regions": [[span(e[0]), e[1]] if e else None for e in f.element_regions],
                                 "reads": f.reads, "region_calls": [region_call(c) for c in f.region_calls],
                                 "applied": [applied(a) for a in f.applied], "guarded": f.guarded,
                                 "shielded": f.shielded,
                                 "sets_grad_mode": f.sets_grad_mode, "returns_through": f.returns_through,
                                 "kind": f.kind, "varargs": f.varargs, "varkw": f.varkw,
                                 "unused_results": list(f.unused_results.items())}
                          for name, f in self.functions.items()},
            "classes": {name: {"bases": c.bases, "methods": c.methods, "attributes": c.attributes}
                        for name, c in self.classes.items()},
            "names": self.names,
            "regions": [{"function": r.function, "api": r.api, "inference": r.inference, "span": span(r.span),
                         "dual_level": span(r.dual_level), "cut": r.cut,
                         "inert": r.inert, "inputs": r.inputs, "stores": r.stores,
                         "local_only": r.local_only, "when": r.when, "assumes": r.assumes, "cut_after": r.cut_after,
                         "guard": r.guard, "mutates": r.mutates, "aux_only": r.aux_only,
                         "returned_only": r.returned_only, "adds": r.adds}
                        for r in self.regions],
            "backwards": [{"callees": b.callees, "callee_text": b.callee_text, "name": b.name,
                           "assigned_row": b.assigned_row, "span": span(b.span), "element": b.element}
                          for b in self.backwards],
            "properties": self.properties,
            "lambdas": self.lambdas,
            "returns": self.returns,
            "differentiates_state": self.differentiates_state,
            "stored_attributes": self.stored_attributes,
            "star_imports": self.star_imports,
            "exports": self.exports,
            "hooks": self.hooks,
            "hooked": [[function, parameter, refs] for (function, parameter), refs in self.hooked.items()],
            "fills": [[function, parameter, refs] for (function, parameter), refs in self.fills.items()],
        }

    @classmethod
    def from_json(cls, data: dict, shared: dict | None = None) -> "ModuleSummary":
        """Raises KeyError, TypeError or ValueError for data of another shape. `shared`: the refs
        decoded so far, kept once each (a project's summaries repeat `("imp", "torch")` thousands of times)."""
        shared = {} if shared is None else shared

        def refs(values):
            return _shared_refs(values, shared)

        def span(d):
            return Span(**d) if d is not None else None

        def source(d):
            return Source(d["entry"], tuple(d["modes"]), refs(d["targets"]), span(d["span"]), d["text"],
                          refs(d["receivers"]),
                          _selection(d.get("selection")), bool(d.get("gradient_step", False)),
                          bool(d.get("exported", False)), tuple(d.get("skips", ())), d.get("aux") is True)

        def call_site(d):
            return CallSite(refs(d["callees"]), tuple(refs(a) for a in d["args"]),
                            {k: refs(v) for k, v in d["keywords"].items()}, span(d["span"]), d["text"],
                            refs(d["receiver"]), d["bound"] is True, d.get("decoration") is True,
                            refs(d.get("star", ())))

        def region_call(d):
            return RegionCall(refs(d["callees"]), d["api"], d["inference"], span(d["span"]), d["text"],
                              span(d["region"]), d["when"])

        def applied(d):
            return Applied(d["transform"], d["functional"], span(d["span"]), d["text"], d["grad_enabled"],
                           d["backward"] is True)

        functions = {name: Function(tuple(f["params"]), tuple(f["kwonly"]), refs(f["calls"]),
                                    [call_site(c) for c in f["call_sites"]], [source(s) for s in f["sources"]],
                                    span(f["returns_region"]), f["returns_api"],
                                    tuple(map(sys.intern, f.get("reads", ()))),
                                    [region_call(c) for c in f.get("region_calls", ())],
                                    [applied(a) for a in f.get("applied", ())], refs(f.get("guarded", ())),
                                    refs(f.get("shielded", ())), bool(f.get("sets_grad_mode", False)),
                                    refs(f.get("returns_through", ())), kind=f.get("kind", ""),
                                    varargs=f.get("varargs", ""), varkw=f.get("varkw", ""),
                                    unused_results={refs([ref])[0]: tuple(attributes)
                                                    for ref, attributes in f.get("unused_results", ())},
                                    element_regions=tuple((span(e[0]), e[1]) if e else None
                                                          for e in f.get("element_regions", ())))
                     for name, f in data["functions"].items()}
        classes = {name: Class(tuple(refs(b) for b in c["bases"]), dict(c["methods"]),
                               {k: refs(v) for k, v in c["attributes"].items()})
                   for name, c in data["classes"].items()}
        regions = [Region(r["function"], r["api"], r["inference"], span(r["span"]), span(r["dual_level"]),
                          r["cut"],
                          r.get("inert", ""), None if r.get("inputs") is None else tuple(r["inputs"]),
                          tuple(r.get("stores", ())),
                          bool(r.get("local_only", False)), r.get("when", ""),
                          tuple(r.get("assumes", ())), bool(r.get("cut_after", False)),
                          r.get("guard", ""), r.get("mutates") is True, r.get("aux_only") is True,
                          r.get("returned_only") is True, tuple(r.get("adds", ())))
                   for r in data["regions"]]
        backwards = [BackwardSite(refs(b["callees"]), b["callee_text"], b["name"], b["assigned_row"],
                                  span(b["span"]), b.get("element")) for b in data["backwards"]]
        return cls(functions, classes, {k: refs(v) for k, v in data["names"].items()}, regions, backwards,
                   list(data["properties"]), dict(data.get("lambdas", {})),
                   {k: refs(v) for k, v in data.get("returns", {}).items()},
                   bool(data.get("differentiates_state", True)), tuple(data.get("stored_attributes", ())),
                   tuple(data.get("star_imports", ())),
                   None if data.get("exports") is None else tuple(data["exports"]), refs(data.get("hooks", ())),
                   {(function, parameter): refs(hooks) for function, parameter, hooks in data.get("hooked", ())},
                   {(function, parameter): refs(stored) for function, parameter, stored in data.get("fills", ())})


def display_name(name: str) -> str:
    """A function's name as a user writes it: `<lambda>` for `<lambda>@12:8`, `f` for a second `f#2`."""
    return re.sub(r"<(lambda|no_grad|inference_mode|set_grad_enabled)>@\d+:\d+", r"<\1>", name).split("#")[0]


def is_grad_mode_wrapper(function: str) -> bool:
    """Whether a function is the one `torch.no_grad()(f)` makes: `f` run in that mode (the call form
    of the decorator), named `<no_grad>@12:8` after where it is made."""
    return function.startswith(_WRAPPER_PREFIXES)


def _shared_ref(value, shared: dict) -> Ref:
    if type(value) is tuple:  # handed over by a worker process as made: nothing to convert
        return value
    ref = tuple(_shared_ref(part, shared) if type(part) is list else
                sys.intern(part) if type(part) is str else part for part in value)
    return shared.setdefault(ref, ref)


def _shared_refs(values, shared: dict) -> tuple[Ref, ...]:
    if type(values) is tuple:
        return values
    refs = tuple(_shared_ref(value, shared) for value in values)
    return shared.setdefault(refs, refs)


def column(line: str, byte_offset: int) -> int:
    """ast counts columns in UTF-8 bytes; diagnostics count characters, from 1."""
    if line.isascii() and byte_offset >= 0:  # one byte a character (most lines): no need to encode
        return min(byte_offset, len(line)) + 1
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", "replace")) + 1


def span_of(node: ast.AST, lines: list[str]) -> Span:
    line = lines[node.lineno - 1]
    end_row = node.end_lineno or node.lineno
    end_col = column(lines[end_row - 1], node.end_col_offset or node.col_offset)
    return Span(node.lineno, column(line, node.col_offset), end_row, end_col, line)


def short(node: ast.AST, lines: list[str], limit: int = 40) -> str:
    """The source of a node as written, its first line at most, shortened: `jacfwd(loss)`."""
    return _short(span_of(node, lines), limit)


def _short(span: Span, limit: int = 40) -> str:
    text = span.line[span.col - 1:span.end_col - 1] if span.end_row == span.row else span.line[span.col - 1:]
    text = text.rstrip()
    if span.end_row != span.row or len(text) > limit:
        return text[:limit - 4].rstrip() + "...)"
    return text


def _first_argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position and not isinstance(call.args[position], ast.Starred):
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _passed_on(call: ast.Call, names: frozenset[str], dependence: varied.ParameterDependence) -> tuple:
    """(args, keywords, receiver) for the function a library function calls (`library.PASSES_ON`):
    `checkpoint(self.block, x)` gives `x` and `self.block`'s object; `functional_call(net, params,
    (x, t))` gives `x`, `t`, and as `net`'s state, `params`. args is None when it cannot be told."""
    called = _first_argument(call, *library.argument_of(library.CALLS_ARGUMENT, names))
    receiver = dependence.of(called.value if type(called) is ast.Attribute else called) if called else (varied.UNKNOWN,)
    row = library.argument_of(library.PASSES_ON, names)
    if row is None or any(k.arg is None for k in call.keywords) or any(type(a) is ast.Starred for a in call.args):
        return None, {}, receiver
    if row[0] == "after":
        return (tuple([dependence.of(arg) for arg in call.args[row[1]:]]),
                {k.arg: dependence.of(k.value) for k in call.keywords if k.arg not in row[2]}, receiver)
    state = dependence.of(_first_argument(call, 1, "parameter_and_buffer_dicts"))
    receiver = tuple(sorted({*receiver, *state}))
    given, extra = _first_argument(call, row[1], row[2]), _first_argument(call, row[1] + 1, "kwargs")
    if extra is not None and not (isinstance(extra, ast.Dict) and all(isinstance(k, ast.Constant) for k in extra.keys)):
        return None, {}, receiver
    keywords = {k.value: dependence.of(v) for k, v in zip(extra.keys, extra.values)} if extra is not None else {}
    if given is None:
        return (), keywords, receiver
    if not isinstance(given, ast.Tuple) or any(type(e) is ast.Starred for e in given.elts):
        return None, {}, receiver  # a name may hold a tuple or one tensor
    return tuple([dependence.of(element) for element in given.elts]), keywords, receiver


_SUBMODULES = frozenset({"named_modules", "modules", "children", "named_children", "get_submodule"})


def _submodules_of(call: ast.Call) -> ast.expr | None:
    """The model whose submodules a call gives: `model.named_modules()`, `model.get_submodule(n)`,
    and `dict(...)`, `list(...)` or `enumerate(...)` of those; None for any other call."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _SUBMODULES:
        return func.value
    if isinstance(func, ast.Name) and func.id in ("dict", "list", "enumerate") and len(call.args) == 1 \
            and isinstance(call.args[0], ast.Call):
        return _submodules_of(call.args[0])
    return None


def _function_argument(call: ast.Call, position: Optional[int], keyword: str) -> ast.expr | None:
    """The function a row of library.CALLS_ON_ELEMENTS is given: keyword-only when `position` is None."""
    if position is None:
        return next((k.value for k in call.keywords if k.arg == keyword), None)
    return _first_argument(call, position, keyword)


def _on_elements(names: frozenset[str]) -> Optional[tuple]:
    for name in names:
        row = library.CALLS_ON_ELEMENTS.get(name)
        if row is not None:
            return row
    return None


def _typing_only_import(binding: Binding) -> str:
    """`pkg.models.Head` for `Head` bound by `from pkg.models import Head` under `if TYPE_CHECKING:`
    (a binding that holds nothing at run time: `scopes` binds it to the statement, importing nothing)."""
    node = binding.node
    if binding.imported or not isinstance(node, (ast.Import, ast.ImportFrom)):
        return ""
    for alias in node.names:
        if (alias.asname or alias.name.partition(".")[0]) == binding.name:
            if isinstance(node, ast.Import):
                return alias.name if alias.asname else binding.name
            module = "." * node.level + (node.module or "")
            return f"{module}{'.' if node.module else ''}{alias.name}"
    return ""


def _literal_keywords(call: ast.Call) -> dict[str, object]:
    return {k.arg: k.value.value for k in call.keywords if k.arg and isinstance(k.value, ast.Constant)}


# what differentiates a module's parameters and buffers: a transform then varies `self.weight`
_STATELESS = re.compile(r"\b(functional_call|stateless|make_functional\w*|stack_module_state|"
                        r"combine_state_for_ensemble|make_dual|parametrize)\b")


# `net.scale = ...`, `setattr(net, "scale", ...)`; not `self.scale = ...`, which sets its own class's
# (each a pattern of its own, the first starting with `.`: searched for as a literal, far faster)
_ATTRIBUTE_STORE = re.compile(r"\.(?<!self\.)(?<!cls\.)\s*([A-Za-z_]\w*)\s*(?:=(?!=)|[-+*/@%&|^]=)")
_SETATTR_STORE = re.compile(r"\bsetattr\s*\([^,()]+,\s*['\"](\w+)")


def _differentiates_state(text: str) -> bool:
    return any(word in text for word in _STATELESS_WORDS) and bool(_STATELESS.search(text))


_STATELESS_WORDS = ("functional_call", "stateless", "make_functional", "stack_module_state",
                    "combine_state_for_ensemble", "make_dual", "parametrize")  # one needed by `_STATELESS`


def _stored_attributes(text: str | None) -> tuple[str, ...]:
    """The attribute names a module's text stores into through another object than `self`;
    ANY_ATTRIBUTE when unknown (no text, or `setattr` of a computed name)."""
    if text is None or "setattr" in text and re.search(r"\bsetattr\s*\([^,()]+,\s*[^'\"\s]", text):
        return (ANY_ATTRIBUTE,)
    return tuple(sorted({*_ATTRIBUTE_STORE.findall(text), *(_SETATTR_STORE.findall(text) if "setattr" in text else ())}))


def _literal_all(module: ast.Module) -> Optional[tuple[str, ...]]:
    """The names of a literal `__all__` (a list or tuple of strings, also `+=`, `.extend`, `.append`d
    at the top level); None when the module has none, or one not written out (then `import *` is
    taken to bind its public names)."""
    found: Optional[list[str]] = None
    for statement in module.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            func = statement.value.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "__all__":
                args = statement.value.args
                names = None if len(args) != 1 else _strings(args[0]) if func.attr == "extend" else \
                    _strings(ast.List(args)) if func.attr == "append" else None
                if found is None or names is None:
                    return None
                found += names
            continue
        if isinstance(statement, ast.Assign):
            targets, value, adding = statement.targets, statement.value, False
        elif isinstance(statement, ast.AugAssign) and isinstance(statement.op, ast.Add):
            targets, value, adding = [statement.target], statement.value, True
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value, adding = [statement.target], statement.value, False
        else:
            continue
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        names = _strings(value)
        if names is None or len(targets) > 1 or adding and found is None:
            return None
        found = found + names if adding else names
    return None if found is None else tuple(dict.fromkeys(found))


def _strings(node: ast.expr) -> Optional[list[str]]:
    if isinstance(node, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and type(e.value) is str for e in node.elts):
        return [e.value for e in node.elts]
    return None


def summarise(model: SemanticModel, lines: list[str], passes: bool = False) -> ModuleSummary:
    """The module's summary; with `passes`, what each call passes too (`Function.passes`, which
    linking asks for only in the modules a transform reaches: `passes_of`)."""
    return _Summariser(model, lines, passes).run()


def passes_to_json(summary: ModuleSummary) -> dict:
    return {name: [[c.callees, c.args, c.keywords, c.receiver, c.rest] for c in f.passes]
            for name, f in summary.functions.items() if f.passes}


def passes_from_json(data: dict, shared: dict | None = None) -> dict[str, list[Passing]]:
    """Raises KeyError, TypeError or ValueError for data of another shape."""
    shared = {} if shared is None else shared
    return {name: [Passing(_shared_refs(callees, shared), None if args is None else tuple(tuple(a) for a in args),
                           {k: tuple(v) for k, v in keywords.items()}, tuple(receiver),
                           None if rest is None else tuple(rest))
                   for callees, args, keywords, receiver, rest in passes]
            for name, passes in data.items()}


class _Summariser(TableVisitor, leaves=frozenset({ast.Name, ast.alias, ast.Pass, ast.Break, ast.Continue,
                                                 ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom})):
    """One walk over the whole module, keeping the scope and the function each call is made in."""

    def __init__(self, model: SemanticModel, lines: list[str], passes: bool = False):
        self.model, self.scopes, self.lines = model, model.scopes, lines
        self._with_passes = passes
        self._attribute_reads = _AttributeReads(lines)
        self.functions: dict[str, Function] = {MODULE_BODY: Function(())}
        self.classes: dict[str, Class] = {}
        self._calls: dict[str, dict[Ref, None]] = {MODULE_BODY: {}}
        self.scope: Scope = self.scopes.module
        self.function = MODULE_BODY
        self.method_class: Optional[str] = None  # the class of the method being walked, for `self.x = ...`
        self.dual_level: list[Span] = []  # enclosing `with dual_level():` blocks that make duals
        self.region_dual_level: dict[int, Span] = {}
        self._of_binding: dict[Binding, tuple[Ref, ...]] = {}  # the refs of each binding, once
        self.properties: list[str] = []
        self.lambdas: dict[str, str] = {}
        self._returns: dict[str, dict[Ref, None]] = {}
        self._added: dict[Binding, list[Ref]] = {}  # what `append`, `extend`, ... put in a container name
        self._overwritten: dict[Binding, set[tuple]] = {}  # the keys a store replaces in a dict literal
        self._returned_calls: dict[str, list[tuple[Ref, ...]]] = {}  # per function, each return's callees
        self.grad: GradState = MODULE_STATE  # the grad mode here, as far as this file tells
        self._guarded: dict[tuple[str, bool], dict[Ref, None]] = {}  # (function, shielded) -> refs
        self._annotation_of: Optional[dict[int, ast.expr]] = None  # `name: T = ...`: the target's annotation
        self._wrapped: list[Region] = []  # the regions `torch.no_grad()(f)` runs `f` in, after the model's
        self._scope_uses: dict[ast.AST, trace_uses.ScopeUses] = {}  # for what tracers' results are made for
        self._scope_events: dict[ast.AST, guards.ScopeEvents] = {}  # `guards.skipped_by`, once a scope
        self._region_guards: dict[ast.AST, dict[int, str]] = {}  # `guards.region_guards`, once a function
        self._dependences: dict[ast.AST, varied.ParameterDependence] = {}  # by function, for `_passing`
        self._hooks: dict[Ref, None] = {}  # `ModuleSummary.hooks`
        self._hooked: dict[tuple[str, str], dict[Ref, None]] = {}  # `ModuleSummary.hooked`
        self._fills: dict[tuple[str, str], dict[Ref, None]] = {}  # `ModuleSummary.fills`
        self._partials: Optional[dict] = None  # `_stored_partials`
        self._unused_at: dict[int, tuple[str, ...]] = {}  # a call whose value goes nowhere -> the attributes stored
        self._results: dict[str, dict[Ref, Optional[tuple[str, ...]]]] = {}  # per function: None where used
        self._states: dict = {}  # shared by `_dependences`
        self._cut_short = 0  # the times `refs` stopped at _MAX_DEPTH: a binding's refs found then are not kept

    def run(self) -> ModuleSummary:
        self._visit_all(self.model.module.body)
        for name, calls in self._calls.items():
            self.functions[name].calls = tuple(calls)
        for name, results in self._results.items():
            self.functions[name].unused_results = {ref: stored for ref, stored in results.items() if stored is not None}
        for (name, shielded), calls in self._guarded.items():
            if shielded:
                self.functions[name].shielded = tuple(calls)
            else:
                self.functions[name].guarded = tuple(calls)
        for change in self.model.grad_mode_changes:
            if isinstance(change.owner, ast.Expr) and change.function is not None:  # a statement, or on a stack
                self.functions[self.model.name_of(change.function)].sets_grad_mode = True
        self._graphless_returns()
        for backward in self.model.caller_mode_backwards:  # NG003 where a caller's region holds
            span = span_of(backward.call, self.lines)
            func = backward.call.func
            name = "backward" if isinstance(func, ast.Attribute) and func.attr == "backward" else \
                f"torch.autograd.{func.attr if isinstance(func, ast.Attribute) else func.id}"
            self.functions[self.model.name_of(backward.function)].applied.append(
                Applied(name, False, span, _short(span), backward.enable_grad, backward=True))
        module = self.scopes.module
        names = {name: refs for name, bindings in module.bindings.items()
                 if (refs := self._binding_refs(bindings, 0))}
        return ModuleSummary(self.functions, self.classes, names, self._regions() + self._wrapped, self._backwards(),
                             self.properties, self.lambdas,
                             {name: tuple(refs) for name, refs in self._returns.items() if refs},
                             self.model.text is None or _differentiates_state(self.model.text),
                             _stored_attributes(self.model.text), tuple(module.star_imports),
                             _literal_all(self.model.module), tuple(self._hooks),
                             {key: tuple(refs) for key, refs in self._hooked.items()},
                             {key: tuple(refs) for key, refs in self._fills.items()})

    # -- what an expression refers to -------------------------------------------------------------

    def refs(self, expr: ast.expr | None, scope: Scope | None = None, depth: int = 0) -> tuple[Ref, ...]:
        """Every ref `expr` may evaluate to; () when it is nothing a function could be."""
        if expr is None:
            return ()
        if depth > _MAX_DEPTH:
            self._cut_short += 1
            return ()
        if scope is None:
            scope = self.scope
        kind = type(expr)
        if kind is ast.Name:
            bindings = self.scopes.lookup(scope, expr.id, (expr.lineno, expr.col_offset))
            if len(bindings) == 1:  # most names: what `_binding_refs` returns, without the calls
                refs = self._of_binding.get(bindings[0])
                if refs is not None:
                    return refs
            elif not bindings:
                return tuple([("imp", module + ("" if module.endswith(".") else ".") + expr.id, module)
                              for module in self.scopes.module.star_imports])  # if the module exports it
            return self._binding_refs(bindings, depth)
        if kind is ast.Attribute:  # `m.loss` after `import pkg.model as m` is `pkg.model.loss`
            bases = self.refs(expr.value, scope, depth + 1)
            if not bases:
                return ()
            attr = expr.attr
            return tuple([("imp", f"{base[1]}.{attr}", *base[2:]) if base[0] == "imp" else ("attr", base, attr)
                          for base in bases])
        if kind is ast.Lambda:
            return (("fn", self.model.name_of(expr)),)
        if kind is ast.Call:
            return self._call_refs(expr, scope, depth)
        return self._container_refs(expr, scope, depth)

    def _getattr_refs(self, call: ast.Call, scope: Scope, depth: int) -> tuple[Ref, ...]:
        """`getattr(m, "forward")`, or with a name that takes only literals (`for name in ("A", "B")`):
        those attributes; `getattr(nets, cfg.name)` on a module: any name it binds (ANY_ATTRIBUTE);
        on `sys.modules[__name__]`, this module's own names."""
        names = _literal_strings(call.args[1], self.scopes, scope)
        target = call.args[0]
        if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Name) and target.slice.id == "__name__" \
                and self.scopes.qualified_names(target.value, scope) == {"sys.modules"}:
            module = self.scopes.module
            names = names if names is not None else [name for name, bindings in module.bindings.items()
                                                     if any(isinstance(b.node, (ast.ClassDef, ast.FunctionDef,
                                                                                ast.ImportFrom)) for b in bindings)]
            return tuple(dict.fromkeys(ref for name in names
                                       for ref in self._binding_refs(module.bindings.get(name, []), depth + 1)))
        refs = self.refs(target, scope, depth + 1)
        if names is None:
            return tuple([("attr", ref, ANY_ATTRIBUTE) for ref in refs if ref[0] == "imp"])
        return tuple([("attr", ref, name) for ref in refs for name in names])

    def _call_refs(self, call: ast.Call, scope: Scope, depth: int) -> tuple[Ref, ...]:
        func = call.func
        if type(func) is ast.Call and self._grad_mode_of_wrapper(call, scope) is not None:
            return (("fn", _wrapper_name(call, self._grad_mode_of_wrapper(call, scope)[0])),)  # `torch.no_grad()(f)`
        if type(func) is ast.Name and func.id == "getattr" and len(call.args) in (2, 3) \
                and not self.scopes.lookup(scope, "getattr", (func.lineno, func.col_offset)):
            return self._getattr_refs(call, scope, depth)
        callees = self.refs(func, scope, depth + 1)
        names = imports_among(callees) | (self._builtin(func, scope) if not callees else frozenset())
        if names == _TYPE and len(call.args) == 1:  # `type(self)`: the class of an instance
            return tuple([ref[1] for ref in self.refs(call.args[0], scope, depth + 1) if ref[0] == "inst"])
        on_elements = _on_elements(names) if names else None
        if on_elements is not None:  # `map(f, xs)` holds what `f` returns; `sorted(xs, key=f)`, the elements
            return self._on_elements_refs(call, on_elements, scope, depth)
        entry = entry_points.entry_point(names) if names else None
        if entry is not None and entry.name in library.RETURNS_ITS_MODEL:  # `torch.compile(net).encode`
            return self.refs(_first_argument(call, *entry.argument), scope, depth + 1)
        if entry is None and names & torch_names.PARTIAL and call.args:
            bound = self._bound_called_argument(call, scope, depth)
            if bound is not None:  # `partial(functional_call, net)` calls `net`
                return tuple([("wrap", ref) for ref in self.refs(bound, scope, depth + 1)])
        if entry is not None or names & _WRAPPERS:
            position, keyword = entry.argument if entry else (0, "func")
            return tuple([("wrap", ref)
                          for ref in self.refs(_first_argument(call, position, keyword), scope, depth + 1)])
        if isinstance(func, ast.Attribute) and func.attr in library.RETURNS_RECEIVER and not names:
            return self.refs(func.value, scope, depth + 1)  # `Net().eval()`
        if isinstance(func, ast.Attribute) and func.attr in _GETS and call.args and \
                not any(name.startswith(_NOT_THE_PROJECTS) for name in names):  # also an imported registry's
            key = _key(call.args[0])  # `MODELS.get(name)`: an element, as `MODELS[name]`, or what the method returns
            return tuple([ref for base in self.refs(func.value, scope, depth + 1)
                          for ref in (("item", base) if key is None else ("item", base, key), ("call", ("attr", base, func.attr)))])
        if names:
            argument = library.argument_of(library.RETURNS_ARGUMENT, names)  # `copy.deepcopy(net)`
            if argument is not None:
                found = self.refs(_function_argument(call, *argument), scope, depth + 1)
                argument = library.argument_of(library.RETURNS_CALL_OF, names)  # `field(default_factory=Net)`
                if argument is not None:
                    found += tuple([("call", ref) for ref in self.refs(_function_argument(call, *argument),
                                                                         scope, depth + 1)])
                return found
            argument = library.argument_of(library.WRAPS_AS_MODULE, names)  # `DistributedDataParallel(net)`
            if argument is not None:
                return tuple([("wrap", ref) for ref in self.refs(_first_argument(call, *argument), scope, depth + 1)])
        contents = self._constructed_container(call, names, scope, depth)
        if contents is not None:
            return contents
        return tuple([("call", ref) for ref in callees])

    def _bound_called_argument(self, call: ast.Call, scope: Scope, depth: int) -> ast.expr | None:
        """What `partial(f, ...)` binds to the argument `f` calls, when `f` is a library function that
        calls one of its arguments (`functional_call`, `checkpoint`)."""
        names = imports_among(self.refs(call.args[0], scope, depth + 1))
        argument = library.argument_of(library.CALLS_ARGUMENT, names) if names else None
        if argument is None or any(type(arg) is ast.Starred for arg in call.args):
            return None
        position, keyword = argument
        if position + 1 < len(call.args):
            return call.args[position + 1]
        return next((k.value for k in call.keywords if k.arg == keyword), None)

    def _on_elements_refs(self, call: ast.Call, row: tuple, scope: Scope, depth: int) -> tuple[Ref, ...]:
        (position, keyword), at, _, returns = row
        if returns in ("results", "result"):
            function = self.refs(_function_argument(call, position, keyword), scope, depth + 1)
            return tuple([("box", ("call", ref)) if returns == "results" else ("call", ref) for ref in function])
        iterable = _first_argument(call, at, "") if len(call.args) == 1 or position is not None else None
        if iterable is None:  # `max(a, b, key=f)`: one of them
            return tuple([ref for arg in call.args for ref in self.refs(arg, scope, depth + 1)])
        refs = self.refs(iterable, scope, depth + 1)
        return tuple([("item", ref) for ref in refs]) if returns == "element" else refs

    def _binding_refs(self, bindings: list[Binding], depth: int) -> tuple[Ref, ...]:
        if len(bindings) == 1:
            return self._refs_of(bindings[0], depth)
        found: list[Ref] = []
        for binding in bindings:
            found += self._refs_of(binding, depth)
        return tuple(dict.fromkeys(found))

    def _refs_of(self, binding: Binding, depth: int) -> tuple[Ref, ...]:
        """The refs of one binding, each once; found the first time it is asked for."""
        refs = self._of_binding.get(binding)
        if refs is None:
            self._of_binding[binding] = ()  # `a = b` and `b = a`: nothing
            cut_short = self._cut_short
            refs = tuple(dict.fromkeys(self._one_binding_refs(binding, depth)))
            if self._cut_short == cut_short:
                self._of_binding[binding] = refs
            else:  # found deep in another expression: what is found from nearer may be more
                del self._of_binding[binding]
        return refs

    def _one_binding_refs(self, binding: Binding, depth: int) -> tuple[Ref, ...]:
        node = binding.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self._decorated(node, binding.scope, depth)
        if isinstance(node, ast.ClassDef):
            return (("cls", self.model.name_of(node)),)
        if binding.imported:
            return (("imp", binding.imported),)
        if isinstance(node, ast.arg):  # (and what the function adds to it: a hook `attach(model)` registers)
            return tuple(self._parameter_refs(binding)) + self._default_refs(binding, depth) + \
                self._annotated(binding, depth) + tuple(self._added.get(binding, ()))
        added = tuple(self._added.get(binding, ()))  # `layers.append(Block())` after `layers = []`
        if self._annotation_of is None:
            self._annotation_of = {id(statement.target): statement.annotation
                                   for statement, _ in self.model.statements if type(statement) is ast.AnnAssign}
        annotation = self._annotation_of.get(id(node))
        if annotation is not None:  # `model: Net = load(path)`
            added += self._annotation_refs(annotation, binding.scope, depth + 1)
        if binding.iterated is not None:  # `for block in self.blocks`
            return tuple([("item", ref) for ref in self.refs(binding.iterated, binding.scope, depth + 1)])
        if binding.value is not None:
            refs = self.refs(binding.value, binding.scope, depth + 1)
            paths = self._overwritten.get(binding)
            if paths:
                refs = tuple([ref for ref in refs if not any(_under(ref, path) for path in paths)])
            if binding.scope is self.scopes.module and _empty_container(binding.value):
                added += (("global", binding.name),)  # a module's registry: decorator factories may fill it
            return refs + added
        return added

    def _annotated(self, binding: Binding, depth: int) -> tuple[Ref, ...]:
        """A parameter annotated with a class holds an instance of it (`model: Net`, `enc: "Encoder"`);
        `*models: Net`, a tuple of them."""
        node = binding.node
        if node.annotation is None:
            return ()
        refs = self._annotation_refs(node.annotation, binding.scope.parent, depth + 1)
        args = binding.scope.node.args
        return tuple([("box", ref) for ref in refs]) if node is args.vararg or node is args.kwarg else refs

    def _annotation_refs(self, expr: ast.expr | None, scope: Scope, depth: int) -> tuple[Ref, ...]:
        """What a value annotated `expr` holds: an instance of each class it names (`Net`, `Optional[Net]`,
        `Net | None`, `Union[A, B]`, `"Net"`), the class itself for `type[Net]`, a container of instances
        for `list[Net]`, `dict[str, Net]`. Classes of torch, typing and the builtins are left out."""
        if expr is None or depth > _MAX_DEPTH:
            return ()
        kind = type(expr)
        if kind is ast.Constant and type(expr.value) is str:  # a forward reference
            try:
                parsed = ast.parse(expr.value.strip(), mode="eval").body
            except (SyntaxError, ValueError):
                return ()
            return self._annotation_refs(parsed, scope, depth + 1)
        if kind is ast.BinOp and type(expr.op) is ast.BitOr:
            return self._annotation_refs(expr.left, scope, depth + 1) + self._annotation_refs(expr.right, scope, depth + 1)
        if kind is ast.Subscript:
            generic = expr.value.attr if type(expr.value) is ast.Attribute else getattr(expr.value, "id", "")
            args = expr.slice.elts if type(expr.slice) is ast.Tuple else [expr.slice]
            how = _GENERICS.get(generic)
            if how == "any":
                return tuple([ref for arg in args for ref in self._annotation_refs(arg, scope, depth + 1)])
            if how == "first":
                return self._annotation_refs(args[0], scope, depth + 1)
            if how == "class":
                return tuple([ref[1] for ref in self._annotation_refs(args[0], scope, depth + 1) if ref[0] == "inst"])
            if how in ("elements", "values"):
                held = args if how == "elements" else args[-1:]
                return tuple([("box", ref) for arg in held for ref in self._annotation_refs(arg, scope, depth + 1)])
            return ()
        if kind is ast.Name or kind is ast.Attribute:
            refs = self.refs(expr, scope, depth + 1)
            if kind is ast.Name:  # a name imported only `if TYPE_CHECKING:` names a class for annotations
                refs += tuple(dict.fromkeys(("imp", name) for binding in self.scopes.lookup(scope, expr.id, (0, 0))
                                            if (name := _typing_only_import(binding))))
            return tuple([("inst", ref) for ref in refs
                          if ref[0] == "cls" or ref[0] == "imp" and not ref[1].startswith(_NOT_THE_PROJECTS)])
        return ()

    def _default_refs(self, binding: Binding, depth: int) -> tuple[Ref, ...]:
        """A parameter may be its default value: `act` in `def forward(self, x, act=smooth)`."""
        args = binding.scope.node.args
        positional = [*args.posonlyargs, *args.args]
        pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults),
                 *zip(args.kwonlyargs, args.kw_defaults)]
        default = next((value for arg, value in pairs if arg is binding.node), None)
        if default is None or type(default) not in _MAY_REFER:
            return ()
        return self.refs(default, binding.scope.parent, depth + 1)

    def _parameter_refs(self, binding: Binding) -> list[Ref]:
        function = binding.scope.node
        name = self.model.name_of(function)
        method = self._method_kind(function)
        if method in ("method", "classmethod") and _positional(function)[:1] == [binding.node]:
            cls = self.model.name_of(binding.scope.parent.node)
            return [("inst", ("cls", cls)) if method == "method" else ("cls", cls)]  # `self`, `cls`
        return [("param", name, binding.name)]

    def _method_kind(self, function: ast.AST) -> str | None:
        scope = self.scopes.of.get(function)
        if not (scope and scope.parent and scope.parent.is_class) or isinstance(function, ast.Lambda):
            return None
        for decorator in function.decorator_list:
            if isinstance(decorator, ast.Name) and decorator.id in ("staticmethod", "classmethod"):
                return decorator.id
        return "method"

    # -- containers of modules, and `super()` -------------------------------------------------------

    def _container_refs(self, expr: ast.expr, scope: Scope, depth: int) -> tuple[Ref, ...]:
        """A literal or comprehension is a container of its elements; `c[i]` is an element of `c`
        (a slice is the container again)."""
        kind = type(expr)
        if kind in (ast.List, ast.Tuple):  # each element under its index, up to a starred one
            starred = next((at for at, e in enumerate(expr.elts) if isinstance(e, ast.Starred)), len(expr.elts))
            return self._elements(expr.elts, scope, depth, list(range(starred)))
        if kind is ast.Set:
            return self._elements(expr.elts, scope, depth)
        if kind is ast.Dict:  # each value under its key, when the key is written as a literal
            return self._elements([v if k is not None else ast.Starred(v) for k, v in zip(expr.keys, expr.values)],
                                  scope, depth, [_key(k) for k in expr.keys])
        if kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            inner = self.scopes.enter(expr, scope)
            return tuple([("box", ref) for ref in self.refs(expr.value if kind is ast.DictComp else expr.elt,
                                                             inner, depth + 1)])
        if kind is ast.Subscript:
            container = self.refs(expr.value, scope, depth + 1)
            if isinstance(expr.slice, ast.Slice):  # the container again, its elements counted from `lower`
                lower, step = expr.slice.lower, expr.slice.step
                start = 0 if lower is None else _key(lower)
                return tuple([("slice", ref, start) if step is None and isinstance(start, int) else ("slice", ref)
                              for ref in container])
            key = _key(expr.slice)
            return tuple([("item", ref) if key is None else ("item", ref, key) for ref in container])
        if kind is ast.Starred or kind is ast.NamedExpr:
            return self.refs(expr.value, scope, depth + 1)
        if kind is ast.IfExp:  # `A() if flag else B()`: either
            return self.refs(expr.body, scope, depth + 1) + self.refs(expr.orelse, scope, depth + 1)
        if kind is ast.BoolOp:  # `net or Default()`: any operand may be the value
            return tuple([ref for value in expr.values for ref in self.refs(value, scope, depth + 1)])
        return ()

    def _elements(self, elements: list, scope: Scope, depth: int, keys: list = ()) -> tuple[Ref, ...]:
        """The container holding `elements` (each under its key, when `keys` has one): a starred
        element adds the elements it holds."""
        found: list[Ref] = []
        for at, element in enumerate(elements):
            if isinstance(element, ast.Starred):
                found += self.refs(element.value, scope, depth + 1)
            else:
                key = keys[at] if at < len(keys) else None
                found += [("box", ref) if key is None else ("box", ref, key)
                          for ref in self.refs(element, scope, depth + 1)]
        return tuple(found)

    def _mapping(self, expr: ast.expr | None, scope: Scope, depth: int) -> tuple[Ref, ...]:
        """The values of what a mapping is made from: a dict, or pairs (`[("a", m), ...]`)."""
        if isinstance(expr, (ast.List, ast.Tuple)):
            return self._elements([element.elts[1] if isinstance(element, ast.Tuple) and len(element.elts) == 2
                                   else element for element in expr.elts], scope, depth)
        if isinstance(expr, ast.Call) and not expr.keywords and len(expr.args) == 1 and \
                isinstance(expr.args[0], (ast.List, ast.Tuple)):  # `OrderedDict([...])`, `dict([...])`
            return self._mapping(expr.args[0], scope, depth)
        return self.refs(expr, scope, depth + 1) if expr is not None else ()

    def _constructed_container(self, call: ast.Call, names: frozenset[str], scope: Scope,
                               depth: int) -> tuple[Ref, ...] | None:
        """What `nn.Sequential(a, b)`, `nn.ModuleList(blocks)`, `nn.ModuleDict({...})`, `list(...)`
        or `d.values()` holds; None when the call makes no container."""
        func = call.func
        how = next((_CONTAINERS[name] for name in names if name in _CONTAINERS), None)
        if how is None and isinstance(func, ast.Name) and func.id in _BUILTIN_CONTAINERS \
                and not self.scopes.lookup(scope, func.id, (func.lineno, func.col_offset)):
            how = _BUILTIN_CONTAINERS[func.id]
        if how is None:
            if isinstance(func, ast.Attribute) and func.attr == "values" and not call.args and not names:
                return self.refs(func.value, scope, depth + 1)  # iterated, a view holds the same elements
            if isinstance(func, ast.Name) and func.id == "super" and \
                    not self.scopes.lookup(scope, "super", (func.lineno, func.col_offset)):
                return self._super(call, scope, depth)
            return None
        if how == "elements":
            if len(call.args) == 1 and isinstance(call.args[0], ast.Call) and \
                    imports_among(self.refs(call.args[0].func, scope, depth + 1)) & _ORDERED_DICT:
                return self._mapping(call.args[0], scope, depth)  # `nn.Sequential(OrderedDict([...]))`
            return self._elements(call.args, scope, depth)
        argument = call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
        if how == "mapping":
            found = self._mapping(argument, scope, depth)
            return found + self._elements([k.value for k in call.keywords if k.arg], scope, depth)
        return self.refs(argument, scope, depth + 1) if argument is not None else ()

    def _super(self, call: ast.Call, scope: Scope, depth: int) -> tuple[Ref, ...]:
        """`super()` in a method (or `super(Cls, self)`): attributes looked up in the bases of its class."""
        if call.args:
            return tuple([("super", ref) for ref in self.refs(call.args[0], scope, depth + 1) if ref[0] == "cls"])
        while scope is not None and isinstance(scope.node, COMPREHENSION_NODES):
            scope = scope.parent
        if scope is None or not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                or scope.parent is None or not scope.parent.is_class:
            return ()
        return (("super", ("cls", self.model.name_of(scope.parent.node))),)

    def _container_call(self, call: ast.Call, func: ast.Attribute) -> None:
        """`blocks.append(Block())`, `self.layers.extend([...])`, `self.add_module("gate", Gate())`."""
        args = call.args
        if func.attr in ("add_module", "register_module") and len(args) == 2:
            name = args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and self.method_class is not None \
                    and self.refs(func.value) == (("inst", ("cls", self.method_class)),):
                self._attribute(self.method_class, name.value, args[1])  # a named child of this module
                return
            value = args[1]
        elif func.attr in ("append", "insert") and args or func.attr == "setdefault" and len(args) == 2:
            value = args[-1]  # `REGISTRY.append(cls)`, `MODELS.setdefault(name, cls)`
        elif func.attr == "extend" and len(args) == 1:
            self._add_to(func.value, self.refs(args[0]))
            return
        elif func.attr == "update" and len(args) == 1:
            if isinstance(args[0], ast.Dict):
                self._overwrite(func.value, [(_key(key),) for key in args[0].keys], call)
            self._add_to(func.value, self._mapping(args[0], self.scope, 0))
            return
        else:
            return
        self._add_to(func.value, tuple([("box", ref) for ref in self.refs(value)]))

    def _partial_entry(self, call: ast.Call) -> bool:
        """`trace(f)` after `trace = partial(make_fx, tracing_mode="real")`: the entry point applied to
        `f`, with the keywords `partial` bound (`pre_dispatch=True` switches make_fx's mode)."""
        func = call.func
        binding = self.scopes.only_binding(func, self.scope) if isinstance(func, ast.Name) else None
        bound = binding.value if binding is not None else None
        if not (isinstance(bound, ast.Call) and len(bound.args) == 1
                and self.scopes.qualified_names(bound.func, binding.scope) & torch_names.PARTIAL):
            return False
        entry = entry_points.entry_point(self.scopes.qualified_names(bound.args[0], binding.scope))
        if entry is None:
            return False
        self._applied(entry, call)
        modes = entry.modes_for({**_literal_keywords(bound), **_literal_keywords(call)})
        self._add_source(entry.name, modes, self.refs(_first_argument(call, *entry.argument)), call)
        return True

    def _hook(self, module: ast.expr, hook: ast.expr) -> None:
        """`net.register_forward_hook(hook)`: running `net` runs `hook` too, as a module holding it;
        on `self`, every instance of the class."""
        self._hooks.update(dict.fromkeys(self.refs(hook)))
        refs = tuple([("box", ref) for ref in self.refs(hook)])
        if refs and self.method_class is not None and self.refs(module) == (("inst", ("cls", self.method_class)),):
            known = self.classes[self.method_class].attributes.get(library.HOOKS_ATTRIBUTE, ())
            self.classes[self.method_class].attributes[library.HOOKS_ATTRIBUTE] = tuple(dict.fromkeys(known + refs))
            return
        while True:  # a submodule's hook runs with its model: `model.conv2...`, `model[1]...`,
            if isinstance(module, (ast.Subscript, ast.Attribute)) and not (  # as `model`; `self.enc...` as `self.enc`
                    isinstance(module, ast.Attribute) and isinstance(module.value, ast.Name)
                    and self.method_class is not None
                    and self.refs(module.value) == (("inst", ("cls", self.method_class)),)):
                module = module.value
            elif isinstance(module, ast.Call) and (submodule := _submodules_of(module)) is not None:
                module = submodule  # `dict(model.named_modules())[name]`, `model.get_submodule(name)`
            elif isinstance(module, ast.Name) and (binding := self.scopes.only_binding(module, self.scope)) \
                    and isinstance(binding.iterated, ast.Call) and _submodules_of(binding.iterated) is not None:
                module = _submodules_of(binding.iterated)  # `for name, m in model.named_modules():`
            else:
                break
        if refs and isinstance(module, ast.Name) and self.function != MODULE_BODY \
                and (binding := self.scopes.only_binding(module, self.scope)) is not None \
                and isinstance(binding.node, ast.arg) and binding.scope is self.scope:
            self._hooked.setdefault((self.function, module.id), {}).update(dict.fromkeys(refs))
        self._add_to(module, refs)

    def _add_to(self, container: ast.expr, refs: tuple[Ref, ...]) -> None:
        """Remember that `container` (a name, or `self.name`) holds `refs` too."""
        if not refs:
            return
        if isinstance(container, ast.Name) and (cls := self._instance_of(container)) is not None:
            if self.method_class is None:  # `self[name] = cls` in a registry's decorator: what every call passes
                refs = tuple([_kept(ref) for ref in refs])
            known = self.classes[cls].attributes.get(library.ITEMS_ATTRIBUTE, ())
            self.classes[cls].attributes[library.ITEMS_ATTRIBUTE] = tuple(dict.fromkeys(known + refs))
        elif isinstance(container, ast.Name):
            binding = self.scopes.only_binding(container, self.scope)
            if binding is not None and binding.scope is self.scopes.module and self.function != MODULE_BODY:
                refs = tuple([_kept(ref) for ref in refs])  # a registry: `MODELS[name] = cls` in `register(cls)`
            elif binding is not None and isinstance(binding.node, ast.arg) and binding.scope is not self.scope \
                    and isinstance(binding.scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = (self.model.name_of(binding.scope.node), container.id)  # a registry given to a decorator factory
                self._fills.setdefault(key, {}).update(dict.fromkeys(refs))
            if binding is not None and not binding.imported:
                own = set(self.refs(container))  # `d[k] = d.pop(j)`: its own elements add nothing
                added = self._added.setdefault(binding, [])
                new = [ref for ref in refs if ref not in added and not _holds_any(ref, own)]
                if new:
                    added.extend(new)
                    self._of_binding.clear()  # what was found for names bound to it is found again
        elif (cls := self._class_stored_into(container)) is not None:  # `self.layers.append(...)`
            if self.method_class is None and self.function != MODULE_BODY:  # `self._obj[name] = cls` in a
                refs = tuple([_kept(ref) for ref in refs])  # registry's decorator: what every call passes
            known = self.classes[cls].attributes.get(container.attr, ())
            self.classes[cls].attributes[container.attr] = tuple(dict.fromkeys(known + refs))

    def _instance_of(self, name: ast.Name) -> Optional[str]:
        """The class of this file `self` is an instance of, in its methods (and functions in them):
        a container class (`class Registry(dict)`) storing into `self[key]`."""
        if name.id != "self":
            return None
        refs = self.refs(name)
        return refs[0][1][1] if len(refs) == 1 and refs[0][0] == "inst" and refs[0][1][0] == "cls" \
            and refs[0][1][1] in self.classes else None

    def _overwrite(self, container: ast.expr, paths: list[tuple], store: ast.AST) -> None:
        """`d["a"] = f` (or `d.update({"a": f})`) after `d = {"a": g}` in the same block, with no use of
        `d` between: `d["a"]` no longer holds `g` (a strong update, the one flow-sensitive step taken:
        anything else between, a branch or a loop, keeps both)."""
        if not isinstance(container, ast.Name) or not paths or any(None in path or not path for path in paths):
            return
        binding = self.scopes.only_binding(container, self.scope)
        if binding is None or binding.scope is not self.scope or not isinstance(binding.value, ast.Dict):
            return
        body = getattr(self.scope.node, "body", [])
        made = next((at for at, statement in enumerate(body) if isinstance(statement, ast.Assign)
                     and statement.value is binding.value and len(statement.targets) == 1), None)
        stored = next((at for at, statement in enumerate(body)
                       if statement is store or isinstance(statement, ast.Expr) and statement.value is store), None)
        if made is None or stored is None or stored <= made or any(
                isinstance(node, ast.Name) and node.id == container.id
                for statement in body[made + 1:stored] for node in walk(statement)):
            return
        self._overwritten.setdefault(binding, set()).update(paths)
        self._of_binding.clear()

    # -- definitions --------------------------------------------------------------------------------

    def _enter_function(self, node: ast.AST, body: list) -> None:
        name = self.model.name_of(node)
        args = node.args
        self.functions[name] = Function(tuple(a.arg for a in _positional(node)),
                                        tuple(a.arg for a in args.kwonlyargs),
                                        varargs=args.vararg.arg if args.vararg else "",
                                        varkw=args.kwarg.arg if args.kwarg else "")
        kind = self._method_kind(node)
        if kind == "staticmethod" or kind == "classmethod":
            self.functions[name].kind = kind
        self._calls[name] = {}
        outer = (self.scope, self.function, self.method_class, self.dual_level, self.grad)
        self.scope = self.scopes.enter(node, self.scope)
        self.function = name
        self.dual_level = []  # the body runs when called, not where it is defined
        self.grad = CALLER_STATE
        for decorator in reversed(getattr(node, "decorator_list", ())):  # innermost first
            change = self.model.change_at(decorator)
            if change is not None:
                self.grad = self.grad.after(change)
        kind = self._method_kind(node)
        self.method_class = self.model.name_of(outer[0].node) if kind == "method" else None
        self._visit_all(body)
        self.functions[name].reads = self._attribute_reads.of(node)
        self.scope, self.function, self.method_class, self.dual_level, self.grad = outer

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._visit_all((*node.decorator_list, *node.args.defaults, *node.args.kw_defaults))
        target = ("fn", self.model.name_of(node))
        if any(_is_property(decorator) for decorator in node.decorator_list):
            self.properties.append(target[1])
        for decorator in node.decorator_list:  # `@jacfwd`, `@partial(jacfwd, argnums=1)`
            self._decorator_source(decorator, target)
        self._decorators_called(node)
        self._enter_function(node, node.body)

    def _decorated(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope, depth: int) -> tuple[Ref, ...]:
        """What the name a `def` binds holds: `("decorated", f, dec)` for each decorator, innermost first
        (linking takes the function itself when the decorator is none of the project's)."""
        refs: tuple[Ref, ...] = (("fn", self.model.name_of(node)),)
        for decorator in reversed(node.decorator_list):
            decorators = self.refs(decorator, scope, depth + 1)
            if decorators and len(refs) * len(decorators) <= _MAX_DECORATED:
                refs = tuple([("decorated", ref, dec) for ref in refs for dec in decorators])
        return refs

    def _decorators_called(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        """`@dec` calls `dec(f)` where the `def` is: a call of the enclosing function, passing `f`; on a
        class, `dec(Cls)` (a `register` decorator storing it into a registry)."""
        is_class = isinstance(node, ast.ClassDef)
        decorated: tuple[Ref, ...] = (("cls" if is_class else "fn", self.model.name_of(node)),)
        for decorator in reversed(node.decorator_list):
            callees = tuple([ref for ref in self.refs(decorator) if _may_run_a_function(ref)
                             and not (is_class and _root(ref)[0] == "imp" and _root(ref)[1].startswith(_NOT_THE_PROJECTS))])
            if callees:
                calls = self._calls[self.function]
                for ref in callees:
                    calls[ref] = None
                span = span_of(decorator, self.lines)
                self.functions[self.function].call_sites.append(CallSite(callees, (decorated,), {}, span, _short(span),
                                                                         decoration=True))
                decorated = tuple([("decorated", ref, dec) for ref in decorated for dec in callees])[:_MAX_DECORATED]

    visit_AsyncFunctionDef = visit_FunctionDef


    def _decorator_source(self, decorator: ast.expr, target: Ref) -> None:
        call = decorator if isinstance(decorator, ast.Call) else None
        names = self.scopes.qualified_names(call.func if call else decorator, self.scope)
        if call and names & torch_names.PARTIAL and call.args:  # partial(jacfwd, argnums=1)
            names = self.scopes.qualified_names(call.args[0], self.scope)
        entry = entry_points.entry_point(names)
        if entry is not None:
            modes = entry.modes_for(_literal_keywords(call) if call else {})
            self._add_source(entry.name, modes, (target,), decorator)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_all((*node.args.defaults, *node.args.kw_defaults))
        scope = self.scope
        while isinstance(scope.node, COMPREHENSION_NODES):
            scope = scope.parent
        self.lambdas[self.model.name_of(node)] = MODULE_BODY if scope.parent is None else self.model.name_of(scope.node)
        self._enter_function(node, [node.body])
        self._returned(self.model.name_of(node), self.refs(node.body, self.scopes.enter(node, self.scope)))

    def visit_Expr(self, node: ast.Expr) -> None:
        """`torch.set_grad_enabled(False)` called as a statement: the calls after it in the body run
        in that mode; after one in a branch or a `with`, the mode is not known."""
        if type(node.value) is ast.Call:  # `f(x)`, `print(f(x))`: nothing reads what `f` returns
            self._unused_at[id(node.value)] = ()
            calls = [arg for arg in node.value.args if type(arg) is ast.Call]
            if calls and activity.is_sink(node.value, region_flow.names_in(self.model, self.scope)):
                self._unused_at.update((id(call), ()) for call in calls)
        self.visit(node.value)
        change = self.model.change_at(node.value)
        if change is not None and not change.on_stack:
            self.grad = self.grad.after(change) if node in self.scope.node.body else CALLER_STATE

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        """`layers += [Block(), Act()]` (or `+= more`): the list holds them too, as after
        `layers.extend(...)`; `h += self.block(h)` adds up tensors."""
        self.generic_visit(node)
        if type(node.op) is ast.Add and type(node.value) in _EXTENDING:
            self._add_to(node.target, self.refs(node.value))

    def visit_Return(self, node: ast.Return) -> None:
        self.generic_visit(node)
        if node.value is not None:
            self._returned(self.function, self.refs(node.value))
        if self.function != MODULE_BODY:
            self._returned_calls.setdefault(self.function, []).append(self._returned_call(node.value))

    def _returned_call(self, value: ast.expr | None) -> tuple[Ref, ...]:
        """The callees whose results a return hands back when nothing else in it may have a graph
        (`graph_sources`): `f` for `return f(b)`, `return f(b).sum() * 2`, or `y = f(b)` then
        `return (y ** 2).mean()` (`y` bound once in the function); () for anything else."""
        sources = graph_sources(value, self._is_torch, self._bound_to_call) if value is not None else None
        if not sources:
            return ()
        found: list[Ref] = []
        for source in sources:
            if type(source) is ast.Name:
                source = self._call_bound_to(source)
                if source is None:
                    return ()
            refs = [ref for ref in self.refs(source.func) if _may_run_a_function(ref)]
            if not refs:
                return ()
            found += refs
        return tuple(found)

    def _bound_to_call(self, name: ast.Name) -> bool:
        return self._call_bound_to(name) is not None

    def _call_bound_to(self, name: ast.Name) -> Optional[ast.Call]:
        """The call whose result a name is bound to, once, in the function being walked."""
        binding = self.scopes.only_binding(name, self.scope)
        value = binding.value if binding is not None and binding.scope is self.scope else None
        return value if type(value) is ast.Call and type(value.func) in (ast.Name, ast.Attribute) else None

    def _is_torch(self, func: ast.expr) -> bool:
        return is_torch_operation(self.scopes.qualified_names(func, self.scope))

    def visit_Yield(self, node: ast.Yield) -> None:
        """Calling a generator function returns what holds the values it yields."""
        self.generic_visit(node)
        if node.value is not None:
            self._returned(self.function, tuple([("box", ref) for ref in self.refs(node.value)]))

    def visit_Raise(self, node: ast.Raise) -> None:
        """`raise Error` makes the instance: it calls the class."""
        self.generic_visit(node)
        if isinstance(node.exc, (ast.Name, ast.Attribute)):
            calls = self._calls[self.function]
            for ref in self.refs(node.exc):
                if _may_run_a_function(ref):
                    calls[ref] = None

    def visit_For(self, node: ast.For) -> None:
        """A loop over an object of the project calls its `__iter__`, then `__next__` on what that returns.
        A loop over a generator of this file that yields inside a region runs its body in that region."""
        change = self.model.change_at(node)
        if change is None:
            self.generic_visit(node)
        else:
            self._visit_all((node.target, node.iter))
            outer, self.grad = self.grad, self.grad.after(change)
            self._visit_all(node.body)
            self.grad = outer
            self._visit_all(node.orelse)
        calls = self._calls[self.function]
        for ref in self.refs(node.iter):
            if ref[0] in ("call", "inst", "attr") and _may_run_a_function(ref) or ref[0] == "param":
                calls[("attr", ref, "__iter__")] = None
                calls[("attr", ("call", ("attr", ref, "__iter__")), "__next__")] = None

    def _returned(self, function: str, refs: tuple[Ref, ...]) -> None:
        returns = self._returns.setdefault(function, {})
        for ref in refs:
            returns[ref] = None

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_all((*node.decorator_list, *node.bases, *node.keywords))
        if node.decorator_list:
            self._decorators_called(node)
        name = self.model.name_of(node)
        methods = {s.name: self.model.name_of(s) for s in node.body
                   if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.classes[name] = Class(tuple(self.refs(base) for base in node.bases), methods, {})
        outer = (self.scope, self.method_class)
        self.scope, self.method_class = self.scopes.enter(node, self.scope), None
        fields = _is_dataclass(node)
        for statement in node.body:
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        self._attribute(name, target.id, statement.value)
            elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                self._field(name, statement, fields)
            elif isinstance(statement, ast.ClassDef):  # `Outer.Inner`
                self.classes[name].attributes[statement.name] = (("cls", self.model.name_of(statement)),)
            elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    _root(ref)[0] != "imp" or not _root(ref)[1].startswith((*_NOT_THE_PROJECTS, *_STANDARD_DECORATORS))
                    for decorator in statement.decorator_list for ref in self.refs(decorator)):
                # `@without_autograd def step(self, ...)`: the method is what the project's decorator returns
                self.classes[name].attributes[statement.name] = self._decorated(statement, self.scope, 0)
            self.visit(statement)
        self.scope, self.method_class = outer

    def _field(self, cls: str, statement: ast.AnnAssign, dataclass: bool) -> None:
        """`act: Callable = smooth` in a class body; in a dataclass, also what its constructor is
        given for it (a parameter of the `__init__` it makes)."""
        if statement.value is not None:
            self._attribute(cls, statement.target.id, statement.value)
        self._add_attribute(cls, statement.target.id, self._annotation_refs(statement.annotation, self.scope, 0))
        if dataclass and _init_field(statement):
            known = self.classes[cls].attributes.get(statement.target.id, ())
            self.classes[cls].attributes[statement.target.id] = known + (
                ("param", f"{cls}.__init__", statement.target.id),)

    def _attribute(self, cls: str, attribute: str, value: ast.expr) -> None:
        self._add_attribute(cls, attribute, self.refs(value))

    def _add_attribute(self, cls: str, attribute: str, refs: tuple[Ref, ...]) -> None:
        if refs:
            known = self.classes[cls].attributes.get(attribute, ())
            self.classes[cls].attributes[attribute] = tuple(dict.fromkeys(known + refs))

    def visit_Assign(self, node: ast.Assign) -> None:
        if type(node.value) is ast.Call and len(node.targets) == 1:  # `self.last = f(x)`, `self.stats[k] = f(x)`
            target = node.targets[0]
            while type(target) is ast.Subscript:
                target = target.value
            if type(target) is ast.Attribute:
                self._unused_at[id(node.value)] = (target.attr,)
        self.generic_visit(node)
        for target in node.targets:  # `self.heads["a"] = Head()`, `layers[0] = Block()`
            refs = self.refs(node.value) if isinstance(target, ast.Subscript) else ()
            path: tuple = ()
            while isinstance(target, ast.Subscript):  # `d["a"]["b"] = f`: `d` holds, under "a", what holds `f`
                key = _key(target.slice)
                refs = tuple([("box", ref) if key is None else ("box", ref, key) for ref in refs])
                path = (key, *path)
                target = target.value
            if refs:
                self._overwrite(target, [path], node)
                self._add_to(target, refs)
        for target in node.targets:
            self._store_attributes(target, node.value)

    def _note_result(self, node: ast.Call, callees: tuple[Ref, ...], mediated: frozenset[str]) -> None:
        """Whether the call's value goes nowhere the function computes (`unused_results`)."""
        results = self._results.setdefault(self.function, {})
        stored = None if mediated else self._unused_at.get(id(node))
        for ref in callees:
            if stored is None or ref in results and results[ref] is None:
                results[ref] = None
            else:
                results[ref] = (*results.get(ref, ()), *stored)

    def _store_attributes(self, target: ast.expr, value: ast.expr) -> None:
        """`self.block = Block()`, and each of `self.a, self.b = A(), B()`."""
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                    and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts)):
                for element, part in zip(target.elts, value.elts):
                    self._store_attributes(element, part)
            return
        cls = self._class_stored_into(target)
        if cls is not None:
            self._attribute(cls, target.attr, value)

    def _class_stored_into(self, target: ast.expr) -> Optional[str]:
        """The class of this file whose attribute `target` stores into: `self.block = ...` in a method
        (or on an instance the code makes), `Holder.model = ...` or `cls.model = ...` anywhere. Every
        instance of the class holds what any such store assigns (every instance alike)."""
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
            return None
        refs = self.refs(target.value)
        if len(refs) != 1:
            return None
        ref = refs[0]
        if ref[0] == "inst" and ref[1][0] == "cls":
            ref = ref[1]
        return ref[1] if ref[0] == "cls" and ref[1] in self.classes else None

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        """`self.encoder: Encoder = build()` in a method: the attribute holds what is assigned, and an
        instance of the class annotated."""
        self.generic_visit(node)
        target = node.target
        if self.method_class is not None and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                and self.refs(target.value) == (("inst", ("cls", self.method_class)),):
            if node.value is not None:
                self._attribute(self.method_class, target.attr, node.value)
            self._add_attribute(self.method_class, target.attr, self._annotation_refs(node.annotation, self.scope, 0))

    def _comprehension(self, node) -> None:
        self.visit(node.generators[0].iter)
        outer, self.scope = self.scope, self.scopes.enter(node, self.scope)
        self._visit_all(inside_comprehension(node))
        self.scope = outer

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    # -- forward mode inside `with dual_level():` ---------------------------------------------------

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        outer = self.grad
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
            change = self.model.change_at(item.context_expr)
            if change is not None and change.disables_grad and self.dual_level:
                self.region_dual_level[id(change.expr)] = self.dual_level[-1]
            if change is not None:
                self.grad = self.grad.after(change)
        dual = any(self._names(item.context_expr) & entry_points.DUAL_LEVEL for item in node.items) \
            and self._makes_duals(node.body)
        if dual:
            self.dual_level.append(span_of(node, self.lines))
        self._visit_all(node.body)
        if dual:
            self.dual_level.pop()
        self.grad = outer

    visit_AsyncWith = visit_With

    def _names(self, expr: ast.expr) -> frozenset[str]:
        return self.scopes.qualified_names(expr.func if isinstance(expr, ast.Call) else expr, self.scope)

    def _makes_duals(self, body: list[ast.stmt]) -> bool:
        return any(isinstance(node, ast.Call) and self._names(node) & entry_points.MAKE_DUAL
                   for statement in body for node in walk(statement))

    # -- calls ------------------------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """`a.b.c`: only what the chain starts from can hold something the walk needs."""
        self._reads(node)
        value = node.value
        while type(value) is ast.Attribute:
            value = value.value
        visit = self._visitors.get(type(value))
        if visit is not None:
            visit(self, value)

    def _reads(self, node: ast.expr) -> None:
        """`self.features` read in a method: a property of the class runs when read."""
        chain = []
        while type(node) is ast.Attribute:
            chain.append(node)
            node = node.value
        if not chain or type(node) is not ast.Name or node.id != "self" or self.method_class is None:
            return
        calls = self._calls[self.function]
        for attribute in chain:
            if type(attribute.ctx) is ast.Load:
                for ref in self.refs(attribute):
                    calls[("read", ref)] = None

    def _visit_arguments(self, node: ast.Call) -> None:
        """generic_visit of a call, in the same order, with less overhead (this sees every call):
        the callee and the arguments, an attribute chain as visit_Attribute does."""
        visitors = self._visitors
        if type(node.func) is ast.Attribute:
            self._reads(node.func.value)
        for child in (node.func, *node.args):
            if type(child) is ast.Attribute and child is not node.func:
                self._reads(child)
            while type(child) is ast.Attribute:
                child = child.value
            visit = visitors.get(type(child))
            if visit is not None:
                visit(self, child)
        for keyword in node.keywords:
            child = keyword.value
            while type(child) is ast.Attribute:
                child = child.value
            visit = visitors.get(type(child))
            if visit is not None:
                visit(self, child)

    def visit_Call(self, node: ast.Call) -> None:
        self._visit_arguments(node)
        func = node.func
        if type(func) is ast.Call:
            mode = self._grad_mode_of_wrapper(node, self.scope)
            if mode is not None:  # `torch.no_grad()(f)` calls nothing yet: it makes `f` run in that mode
                self._wrapper(node, *mode)
                return
        if type(func) is ast.Attribute and func.attr in _ADDS:
            self._container_call(node, func)
        elif type(func) is ast.Attribute and func.attr in library.REGISTERS_HOOK and node.args:
            self._hook(func.value, node.args[0])
        callees = func_refs = self.refs(func)
        if type(func) is ast.Attribute or type(func) is ast.Name and self._made_elsewhere(func):
            # `self.score(x)` after `self.score = vmap(grad(logp))` in `__init__`; `score(x)` after a
            # module's `score = grad(logp)` (one made here counts where it is made: `_entry_applied`)
            made = self.model.transform_run_by(func, self.scope)
            entry = entry_points.entry_point(frozenset({f"torch.func.{made[0]}"})) if made else None
            if entry is not None:
                self._applied(entry, node)
        mediated = frozenset()  # the library function that calls the callee, with arguments of its own
        builtin = self._builtin(func, self.scope) if not callees else frozenset()
        if not callees and not builtin and not (isinstance(func, ast.Attribute) and func.attr == "trace"):
            return  # most calls of what is neither the project's nor PyTorch's: `len(x)`, `x.append(y)`
        names = imports_among(callees) | builtin
        if not names and self._partial_entry(node):
            return
        on_elements = _on_elements(names) if names else None
        if on_elements is not None:  # `map(f, xs)`, `sorted(xs, key=f)`: `f` called on the elements
            self._called_on_elements(node, on_elements)
            return
        if names:
            entries = entry_points.entries(names)  # `(jacfwd if forward else jacrev)(f)`: each may run
            for entry in entries:
                self._entry_applied(entry, node)
            if entries:  # `jac_fn(f)` with `def g(f, jac_fn=jacrev)`: a call may pass another one too
                self._parameter_called(node, callees)
                return
            if names & torch_names.PARTIAL and node.args:
                self._bound_by_partial(node)
                return
            argument = library.argument_of(library.CALLS_ARGUMENT, names)
            if argument is not None:  # `checkpoint(block, x)`, `functional_call(net, params, x)` call it
                callees = self.refs(_first_argument(node, *argument))
                mediated = names
        elif isinstance(func, ast.Attribute) and func.attr == "trace":
            receivers = self.refs(func.value)  # `Tracer().trace(model)`, checked when linked
            if receivers:
                sources = self.functions[self.function].sources
                count = len(sources)
                self._add_source("Tracer.trace", (entry_points.DROPS,), self.refs(_first_argument(node, 0, "root")),
                                 node, receivers)
                if len(sources) > count:
                    sources[-1].exported = self._made_for_export(node, 0)
            if not callees:
                return  # else a method of the project's may be named so too: `Estimator(f).trace(x)`
        callees = tuple([ref for ref in callees if _may_run_a_function(ref)])
        if not callees:
            return
        calls = self._calls[self.function]
        for ref in callees:
            calls[ref] = None
        self._note_result(node, callees, mediated)
        self._passing(node, callees, mediated)
        self._mode_of_call(callees, node)
        if self.dual_level:  # `f(dual)` inside `with dual_level():` runs `f` in forward mode
            self._add_source("dual_level", (entry_points.FORWARD,), callees, node)
        self._call_site(node, callees, self._receiver(func, func_refs))

    def _call_site(self, node: ast.Call, callees: tuple[Ref, ...], receiver: tuple[Ref, ...] = ()) -> None:
        starred = next((at for at, arg in enumerate(node.args) if type(arg) is ast.Starred), len(node.args))
        args = tuple([self.refs(arg) if type(arg) in _MAY_REFER else () for arg in node.args[:starred]])
        star = self.refs(node.args[starred].value) if starred < len(node.args) else ()  # `f(x, *rest)`
        keywords = {k.arg: refs for k in node.keywords if k.arg and (refs := self.refs(k.value))}
        if any(args) or keywords or receiver or star:
            span = span_of(node, self.lines)
            self.functions[self.function].call_sites.append(CallSite(callees, args, keywords, span, _short(span),
                                                                     receiver, star=star))

    def _parameter_called(self, node: ast.Call, callees: tuple[Ref, ...]) -> None:
        """The call site of a parameter whose default is a transform, for what a caller passes instead
        (linking: `Project.handed_transforms`)."""
        parameters = tuple([ref for ref in callees if ref[0] == "param"])
        if parameters:
            self._call_site(node, parameters)

    def _made_elsewhere(self, name: ast.Name) -> bool:
        """Whether a name is bound once, in another scope than the function's."""
        binding = self.scopes.only_binding(name, self.scope)
        return binding is not None and binding.value is not None and binding.scope is not self.scope

    def _entry_applied(self, entry: entry_points.EntryPoint, node: ast.Call) -> None:
        """A transform or tracer applied here: NG001 / NG002 where the caller's mode holds, and the
        source of the reach of what it runs."""
        self._applied(entry, node)
        position, keyword = entry.argument
        targets = self.refs(_first_argument(node, position, keyword))
        if entry.name == "torch.jit.trace_module":
            targets += self._traced_methods(node, targets)
        sources = self.functions[self.function].sources
        count = len(sources)
        self._add_source(entry.name, entry.modes_for(_literal_keywords(node)), targets, node)
        if len(sources) == count:
            return
        source = sources[-1]
        if entry_points.opens_a_level(entry):
            source.skips += (guards.MUTATES,)
        source.selection = self._selection(entry, node)
        source.exported = entry_points.DROPS in source.modes and \
            self._made_for_export(node, 1 if entry.name == "make_fx" else 0)
        source.gradient_step = entry.name == "make_fx" and self._traces_a_gradient_step(node, source.exported)
        source.aux = _literal_keywords(node).get("has_aux") is True

    def _bound_by_partial(self, call: ast.Call) -> None:
        """`partial(loss, model=net)`: a call site of `loss` passing what `partial` binds (every call
        of the result passes it on), though `loss` is not called here."""
        callees = tuple([ref for ref in self.refs(call.args[0]) if _may_run_a_function(ref)])
        args = []
        for arg in call.args[1:]:
            if type(arg) is ast.Starred:  # the places of what follows are not known
                break
            args.append(self.refs(arg) if type(arg) in _MAY_REFER else ())
        keywords = {k.arg: refs for k in call.keywords if k.arg and (refs := self.refs(k.value))}
        if callees and (any(args) or keywords):
            span = span_of(call, self.lines)
            self.functions[self.function].call_sites.append(CallSite(callees, tuple(args), keywords, span, _short(span),
                                                                     bound=True))

    def _passing(self, node: ast.Call, callees: tuple[Ref, ...], mediated: frozenset[str]) -> None:
        """Record which parameters of the function each argument of a call depends on (for a
        call that may run the project's code: not one of torch's, which the project is not)."""
        if not self._with_passes or all(ref[0] == "imp" and ref[1].startswith(_LIBRARIES) for ref in callees):
            return
        scope = self.scope
        if type(scope.node) not in _FUNCTION_KINDS:  # no transform reaches the module's or a class's body
            if type(scope.node) in COMPREHENSION_NODES:  # (its variables may be anything)
                self.functions[self.function].passes.append(Passing(callees, None, {}, (varied.UNKNOWN,)))
            return
        dependence = self._dependences.get(scope.node)
        if dependence is None:
            dependence = self._dependences[scope.node] = varied.ParameterDependence(self.model, scope, self._states)
        func = node.func
        receiver = dependence.of(func.value if type(func) is ast.Attribute else func)
        bound, where = self._partial_bound(func, scope)
        if bound is not None:  # `f(p, x)` with `f = partial(loss, model)`: `loss(model, p, x)`
            if where is not scope and type(func) is ast.Attribute:  # stored on an object: its state, as it
                given = [func.value] * (len(bound.args) - 1)  # is now (`state.loss_fn(p, x)`: `state`)
                keywords = [ast.keyword(k.arg, func.value) for k in bound.keywords]
            else:
                given, keywords = bound.args[1:], bound.keywords
            node = ast.Call(bound.args[0], [*given, *node.args], [*keywords, *node.keywords])
            names = imports_among(self.refs(bound.args[0], where))
            mediated = names if library.argument_of(library.CALLS_ARGUMENT, names) else mediated
        rest = None
        if mediated:
            args, keywords, receiver = _passed_on(node, mediated, dependence)
        elif any(k.arg is None for k in node.keywords):
            args, keywords = None, {}
        else:
            starred = next((at for at, arg in enumerate(node.args) if type(arg) is ast.Starred), len(node.args))
            args = tuple([dependence.of(arg) for arg in node.args[:starred]])
            if starred < len(node.args):  # `obj(p, *batch)`: each element of `batch`, and what follows, from there on
                rest = tuple(sorted({token for arg in node.args[starred:] for token in dependence.of(
                    arg.value if type(arg) is ast.Starred else arg)}))
            keywords = {k.arg: dependence.of(k.value) for k in node.keywords}
        self.functions[self.function].passes.append(Passing(callees, args, keywords, receiver, rest))

    def _partial_bound(self, func: ast.expr, scope: Scope) -> tuple[ast.Call | None, Scope]:
        """The `partial(f, ...)` call a name called is bound to, its one binding (`f = partial(loss,
        model)`), or an attribute the file's one store of its name sets (`self.loss_fn =
        partial(LOSSES[name], self)`, then `state.loss_fn(p, x)`): a call of it passes what the
        partial binds first. Also the scope it is written in."""
        if type(func) is ast.Name:
            bindings = self.scopes.lookup(scope, func.id, (func.lineno, func.col_offset))
            value, where = (bindings[0].value, bindings[0].scope) if len(bindings) == 1 else (None, scope)
        elif type(func) is ast.Attribute and (stored := self._stored_partials().get(func.attr)) is not None:
            value, where = stored
        else:
            return None, scope
        if not (isinstance(value, ast.Call) and value.args and type(value.args[0]) is not ast.Starred
                and imports_among(self.refs(value.func, where, 1)) & torch_names.PARTIAL):
            return None, scope
        return value, where

    def _stored_partials(self) -> dict[str, tuple[ast.Call, Scope]]:
        """name -> (the call, its scope) for each attribute name the file stores once, as
        `self.name = <a call>` in a method, and names no function of."""
        if self._partials is None:
            stores: dict[str, list] = {}
            defined = set()
            for statement, scope in self.model.statements:
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    defined.add(statement.name)
                elif type(statement) is ast.Assign:
                    for target in statement.targets:
                        for node in walk(target):
                            if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                                stores.setdefault(node.attr, []).append((node, statement, scope))
            self._partials = {name: (found[0][1].value, found[0][2]) for name, found in stores.items()
                              if len(found) == 1 and name not in defined and found[0][0] is found[0][1].targets[0]
                              and isinstance(found[0][0].value, ast.Name) and isinstance(found[0][1].value, ast.Call)}
        return self._partials

    def _grad_mode_of_wrapper(self, call: ast.Call, scope: Scope) -> Optional[tuple[str, bool]]:
        """(api, inference) for `torch.no_grad()(f)`, `torch.inference_mode()(f)`,
        `torch.set_grad_enabled(False)(f)`: the call form of the decorator, a function running `f` with
        grad mode off; None for any other call."""
        inner = call.func
        if len(call.args) != 1 or call.keywords or isinstance(call.args[0], ast.Starred):
            return None
        names = self.scopes.qualified_names(inner.func, scope)
        if not names:
            return None
        literal = inner.args[0] if inner.args else next((k.value for k in inner.keywords if k.arg == "mode"), None)
        mode = literal.value if isinstance(literal, ast.Constant) and type(literal.value) is bool else \
            None if literal is not None else "default"
        if names & torch_names.NO_GRAD and not inner.args and not inner.keywords:
            return "no_grad", False
        if names & torch_names.INFERENCE_MODE and mode in (True, "default"):
            return "inference_mode", True
        if names & torch_names.SET_GRAD_ENABLED and mode is False:
            return "set_grad_enabled(False)", False
        return None

    def _wrapper(self, call: ast.Call, api: str, inference: bool) -> None:
        """The function `torch.no_grad()(f)` makes: calling it calls `f` in a region of its own, and
        returns what `f` returns."""
        name = _wrapper_name(call, api)
        targets = self.refs(call.args[0])
        callees = tuple([ref for ref in targets if _may_run_a_function(ref)])
        self.functions[name] = Function(())
        self._calls[name] = dict.fromkeys(callees)
        span, region = span_of(call, self.lines), span_of(call.func, self.lines)
        if callees:
            self.functions[name].region_calls.append(RegionCall(callees, api, inference, span, _short(span), region))
        self._returned(name, tuple([("call", ref) for ref in targets]))
        self._wrapped.append(Region(name, api, inference, region))
        if targets and all(ref[0] == "fn" and self._keeps_grad_off(ref[1]) for ref in targets):
            # what it returns is computed in its region (NG003: `Project.graphless_callee`)
            self.functions[name].returns_region, self.functions[name].returns_api = region, api

    def _keeps_grad_off(self, function: str) -> bool:
        """Whether a function of this file, run in a region, returns only what it computes there: each
        `return` an operation (`torch.stack(ys)`, not a parameter handed back), and no API that turns
        grad mode back on (`enable_grad`, `set_grad_enabled`) nor a function of its own in it."""
        node = next((node for node, name in self.model.qualified_name.items() if name == function), None)
        if type(node) is not ast.FunctionDef:
            return False
        for inner in ast.walk(node):
            if type(inner) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda) and inner is not node \
                    or type(inner) is ast.Name and inner.id in _TURNS_GRAD_ON \
                    or type(inner) is ast.Attribute and inner.attr in _TURNS_GRAD_ON \
                    or type(inner) is ast.Return and not is_operation(inner.value) \
                    or type(inner) in (ast.Yield, ast.YieldFrom):
                return False
        return True

    def _builtin(self, func: ast.expr, scope: Scope) -> frozenset[str]:
        """`builtins.map` for `map`, when no binding of the file shadows it (only the builtins the
        library table names)."""
        if type(func) is ast.Name and func.id in _BUILTIN_CALLS and \
                not self.scopes.lookup(scope, func.id, (func.lineno, func.col_offset)):
            return frozenset({f"builtins.{func.id}"})
        return frozenset()

    def _called_on_elements(self, call: ast.Call, row: tuple) -> None:
        """`map(f, xs)`: a call of `f` made here, each time given an element of `xs` (`reduce(f, xs)`:
        two, the first what `f` returned)."""
        (position, keyword), at, taken, _ = row
        callees = tuple([ref for ref in self.refs(_function_argument(call, position, keyword))
                         if _may_run_a_function(ref)])
        if not callees:
            return
        calls = self._calls[self.function]
        for ref in callees:
            calls[ref] = None
        self._mode_of_call(callees, call)
        iterable = _first_argument(call, at, "") if position is not None or len(call.args) == 1 else None
        elements = tuple([("item", ref) for ref in self.refs(iterable)]) if iterable is not None else \
            tuple([ref for arg in call.args for ref in self.refs(arg)])  # `max(a, b, key=f)`
        if elements:
            span = span_of(call, self.lines)
            args = (elements,) if taken == 1 else (tuple([("call", ref) for ref in callees]) + elements, elements)
            self.functions[self.function].call_sites.append(CallSite(callees, args, {}, span, _short(span)))

    def _applied(self, entry: entry_points.EntryPoint, call: ast.Call) -> None:
        """A transform applied in a function where the caller's mode may hold (in a region of its own
        it is the model's, NG001 / NG002 in this file)."""
        state = self.grad
        if self.function == MODULE_BODY or state.grad_enabled is False or state.inference is not None or \
                not entry_points.differentiates(entry):
            return
        functional = entry_points.is_functional(entry)
        span = span_of(call, self.lines)
        self.functions[self.function].applied.append(Applied(entry.name, functional, span, _short(span),
                                                             state.grad_enabled is True))

    def _mode_of_call(self, callees: tuple[Ref, ...], call: ast.Call) -> None:
        """A call in a region of this function runs its callee in that mode; one where grad mode is
        turned back on does not run it under the caller's no_grad."""
        state = self.grad
        region = state.inference_region if state.may_be_inference else state.grad_region if state.grad_enabled is False \
            or state.grad_enabled is None and state.grad_region is not None and state.grad_region.when else None
        if region is not None:  # (one entered on a condition: `with torch.set_grad_enabled(train):`)
            span = span_of(call, self.lines)
            self.functions[self.function].region_calls.append(
                RegionCall(callees, region.describe(), state.may_be_inference, span, _short(span),
                           span_of(region.expr, self.lines), region.when if not state.inference else ""))
        elif state.grad_enabled is True and self.function != MODULE_BODY:
            guarded = self._guarded.setdefault((self.function, state.inference is False), {})
            for ref in callees:
                guarded[ref] = None

    def _receiver(self, func: ast.expr, func_refs: tuple[Ref, ...]) -> tuple[Ref, ...]:
        """What a method is called on (`net` in `net.export(x)`), when it may be the project's:
        a base class's method that traces or transforms `self` runs the `forward` of this object.
        Read off `func_refs`, the refs of `func`: each is one ref of the object and the name (`refs`)."""
        if type(func) is not ast.Attribute:
            return ()
        cut = len(func.attr) + 1
        refs = tuple([ref[1] if ref[0] == "attr" else ("imp", ref[1][:-cut], *ref[2:]) for ref in func_refs])
        return refs if any(_may_be_the_projects(ref) for ref in refs) else ()

    def _made_for_export(self, call: ast.Call, calls_to_module: int) -> bool:
        """Whether the scope a tracer's result is bound in only saves, exports or runs it without grad."""
        scope = self.scope
        while isinstance(scope.node, COMPREHENSION_NODES):
            scope = scope.parent
        uses = self._scope_uses.get(scope.node)
        if uses is None:
            uses = self._scope_uses[scope.node] = trace_uses.ScopeUses(scope.node)
        return trace_uses.made_for_export(call, uses, lambda expr: self.scopes.qualified_names(expr, scope),
                                          self.model.change_at, calls_to_module)

    def _traces_a_gradient_step(self, call: ast.Call, exported: bool) -> bool:
        """`make_fx(step)` where `step`, a function of this module, returns only what
        `torch.autograd.grad` computes in it; or, where nothing differentiates the trace
        (`exported`), runs a backward pass of its own, whatever it returns."""
        target = _first_argument(call, 0, "f")
        if not isinstance(target, ast.Name):
            return False
        bindings = self.scopes.lookup(self.scope, target.id, (target.lineno, target.col_offset))
        if len(bindings) != 1:
            return False
        step = bindings[0].node
        return region_flow.returns_only_gradients(self.model, step) or (
            exported and region_flow.differentiates_itself(self.model, step))

    def _selection(self, entry: entry_points.EntryPoint, call: ast.Call) -> Optional[tuple]:
        """Which arguments of the function it runs a transform differentiates: those `functools.partial`
        leaves free, and of them a literal `argnums` (torch.func's `grad`, `grad_and_value`, `jacrev`,
        `jacfwd`, `hessian`: argument 0 by default) or every one. None when unknown."""
        if entry_points.DROPS in entry.modes:
            return None
        position, keyword = entry.argument
        target = _first_argument(call, position, keyword)
        partial, bound, keywords = False, 0, ()
        if isinstance(target, ast.Name):  # `sde = partial(euler_maruyama, field)` then `jacfwd(sde)`
            target = self._partial_bound(target, self.scope)[0] or target
        if isinstance(target, ast.Call) and self.scopes.qualified_names(target.func, self.scope) & torch_names.PARTIAL:
            if any(isinstance(a, ast.Starred) for a in target.args) or any(k.arg is None for k in target.keywords):
                return None
            partial, bound, keywords = True, len(target.args) - 1, tuple(sorted(k.arg for k in target.keywords))
            target = target.args[0] if target.args else None
        if not isinstance(target, (ast.Name, ast.Attribute)):
            return None
        if not (any(name.startswith(("torch.func.", "functorch.", "torch._functorch.")) for name in entry.qualified_names)
                and entry.name in _ARGNUMS_TRANSFORMS):
            return partial, bound, keywords, None  # every positional argument is a primal (vjp, jvp, ...)
        argnums = next((k.value for k in call.keywords if k.arg == "argnums"), ast.Constant(0))
        try:
            numbers = ast.literal_eval(argnums)
        except ValueError:
            return None
        numbers = (numbers,) if isinstance(numbers, int) else numbers
        if not isinstance(numbers, tuple) or not all(isinstance(n, int) and n >= 0 for n in numbers):
            return None
        return partial, bound, keywords, numbers

    def _traced_methods(self, call: ast.Call, modules: tuple[Ref, ...]) -> tuple[Ref, ...]:
        """`trace_module(m, {"forward": x, "infer": y})` runs `m.infer` too."""
        inputs = _first_argument(call, 1, "inputs")
        if not isinstance(inputs, ast.Dict):
            return ()
        methods = [key.value for key in inputs.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)]
        return tuple(("attr", module, method) for module in modules for method in methods if method != "forward")

    def _add_source(self, entry: str, modes: tuple[str, ...], targets: tuple[Ref, ...], node: ast.AST,
                    receivers: tuple[Ref, ...] = ()) -> None:
        if not targets or entry_points.KEEPS in modes:
            return
        if entry == "dual_level":  # reported at the `with`, which is where forward mode starts
            span, text = self.dual_level[-1], "dual_level()"
        else:
            span = span_of(node, self.lines)
            text = _short(span)
        scope = self.scope
        while isinstance(scope.node, COMPREHENSION_NODES):
            scope = scope.parent
        skips = ()
        if isinstance(node, ast.Call):
            events = self._scope_events.get(scope.node)
            if events is None:
                events = self._scope_events[scope.node] = guards.ScopeEvents(scope.node)
            skips = guards.skipped_by(node, events)
        self.functions[self.function].sources.append(Source(entry, modes, targets, span, text, receivers,
                                                            skips=skips))

    # -- regions, returns, backward ---------------------------------------------------------------

    def _regions(self) -> list[Region]:
        regions = [Region(self.model.name_of(region.function) if region.function is not None else None,
                          region.describe(), region.api == "inference_mode", span_of(region.expr, self.lines),
                          self.region_dual_level.get(id(region.expr)),
                          region.function is not None and region_cuts_its_values(self.model, region))
                   for region in self.model.regions]
        for summary, region in zip(regions, self.model.regions):
            _add_flow(summary, self.model, region)
            summary.when = region.when
            if region.function is not None and isinstance(region.owner, ast.With):
                found = self._region_guards.get(region.function)
                if found is None:
                    found = self._region_guards[region.function] = guards.region_guards(region.function)
                summary.guard = found.get(id(region.owner), "")
        return regions

    def _graphless_returns(self) -> None:
        """The functions each return of which hands back a value computed in a region, or what a call
        returns (whether that has a graph, linking tells: `Project.graphless_callee`)."""
        for node, name in self.model.qualified_name.items():
            calls = self._returned_calls.get(name)
            if calls is None or type(node) is not ast.FunctionDef or self.model.yields(node):
                continue
            function = self.functions[name]
            elements = self.model.element_returns.get(node) or [None]
            if all(e is not None and len(e) == len(elements[0]) for e in elements):  # `return loss, k`, each
                function.element_regions = tuple((span_of(first[0].expr, self.lines), first[0].describe())
                                                 if all(first) else None for first in zip(*elements))
            regions = self.model.returns.get(node) or [None] * len(calls)
            if len(regions) != len(calls) or not all(r is not None or c for r, c in zip(regions, calls)):
                continue  # a return with a graph
            first = next((r for r in regions if r is not None), None)
            if first is not None:
                function.returns_region = span_of(first.expr, self.lines)
                function.returns_api = first.describe()
            function.returns_through = tuple(dict.fromkeys(ref for r, refs in zip(regions, calls) if r is None
                                                           for ref in refs))

    def _backwards(self) -> list[BackwardSite]:
        sites = []
        for backward in self.model.backwards_through_calls:
            callees = self.refs(backward.callee, backward.scope)
            if callees:
                sites.append(BackwardSite(callees, short(backward.callee, self.lines), backward.name,
                                          backward.assigned_at.lineno, span_of(backward.call, self.lines),
                                          backward.element))
        return sites


_WRAPPERS = torch_names.VMAP | torch_names.PARTIAL | torch_names.FUNCTIONALIZE
# The module containers, and what their arguments hold: elements, a container to take the
# elements of, or a mapping (`nn.ModuleDict({...})`, `nn.Sequential(OrderedDict([...]))`).
_NN = ("torch.nn.", "torch.nn.modules.container.")
_CONTAINERS = {**{prefix + "Sequential": "elements" for prefix in _NN},
               **{prefix + "ModuleList": "container" for prefix in _NN},
               **{prefix + "ModuleDict": "mapping" for prefix in _NN},
               **{prefix + "ParameterList": "container" for prefix in _NN},
               "collections.OrderedDict": "mapping"}
_BUILTIN_CONTAINERS = {"list": "container", "tuple": "container", "dict": "mapping", "reversed": "container",
                       "sorted": "container"}
# Methods that put a module into a container (or a named child into a module).
_ORDERED_DICT = frozenset({"collections.OrderedDict"})
_GETS = frozenset({"get", "pop", "setdefault"})  # methods of a dict that return one of its values
_WRAPPER_PREFIXES = ("<no_grad>@", "<inference_mode>@", "<set_grad_enabled>@")
_TURNS_GRAD_ON = frozenset({"enable_grad", "set_grad_enabled"})


def _wrapper_name(call: ast.Call, api: str) -> str:
    return f"<{api.partition('(')[0]}>@{call.lineno}:{call.col_offset}"


# How an annotation's generic holds the types it is given: any of them, the first, the class itself,
# a container of them, a mapping to the last.
_GENERICS = {**dict.fromkeys(("Optional", "Union"), "any"),
             **dict.fromkeys(("Annotated", "Final", "ClassVar", "Required", "NotRequired", "ReadOnly"), "first"),
             **dict.fromkeys(("type", "Type"), "class"),
             **dict.fromkeys(("list", "List", "tuple", "Tuple", "set", "Set", "frozenset", "FrozenSet", "Sequence",
                              "MutableSequence", "Iterable", "Iterator", "Collection", "deque", "Deque"), "elements"),
             **dict.fromkeys(("dict", "Dict", "Mapping", "MutableMapping", "OrderedDict", "DefaultDict",
                              "defaultdict"), "values")}
_NOT_THE_PROJECTS = ("torch.", "functorch.", "typing.", "typing_extensions.", "collections.", "builtins.",
                     "numpy.", "dataclasses.", "enum.", "pathlib.")
_STANDARD_DECORATORS = ("functools.", "abc.", "contextlib.")  # (they hand back the function, or what calls it)
_TYPE = frozenset({"builtins.type"})
_BUILTIN_CALLS = frozenset(name.partition(".")[2] for table in (library.CALLS_ON_ELEMENTS, library.RETURNS_ARGUMENT, _TYPE)
                           for name in table if name.startswith("builtins."))
_ADDS = frozenset({"append", "extend", "insert", "add_module", "register_module", "update", "setdefault"})
_EXTENDING = frozenset({ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp, ast.Name})  # `layers += ...`
# what `refs` finds anything in: names, calls, and containers (`f([Net()], x)` passes the model in a list)
_MAY_REFER = frozenset({ast.Name, ast.Attribute, ast.Lambda, ast.Call, ast.IfExp, ast.BoolOp, ast.List, ast.Tuple,
                        ast.Set, ast.Dict, ast.Subscript, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp})


def imports_among(refs: tuple[Ref, ...]) -> frozenset[str]:
    """The qualified names among refs: what a call of them is, if it is PyTorch's; also an element
    of a container written out (`TRANSFORMS[mode]` after `TRANSFORMS = {"fwd": jacfwd, ...}`)."""
    names = []
    for ref in refs:
        while ref[0] == "item" and ref[1][0] == "box" and (len(ref) < 3 or len(ref[1]) < 3 or ref[2] == ref[1][2]):
            ref = ref[1][1]
        if ref[0] == "imp":
            names.append(ref[1])
    return frozenset(names)


_ARGNUMS_TRANSFORMS = frozenset({"grad", "grad_and_value", "jacrev", "jacfwd", "hessian"})


def _selection(data) -> Optional[tuple]:
    return None if data is None else (bool(data[0]), data[1], tuple(data[2]), None if data[3] is None else tuple(data[3]))


def constant_params(selection: Optional[tuple], function: Function, bound_method: bool) -> frozenset[str]:
    """The parameters of `function` that a transform with this `selection` does not differentiate."""
    if selection is None:
        return frozenset()
    _, bound, keywords, argnums = selection
    params = function.params[1:] if bound_method else function.params
    free = [name for name in params[bound:] if name not in keywords]
    if argnums is not None and any(n >= len(free) for n in argnums):
        return frozenset()
    differentiated = set(free) if argnums is None else {free[n] for n in argnums}
    return frozenset(name for name in (*params, *function.kwonly) if name not in differentiated)


def _add_flow(summary: Region, model: SemanticModel, region) -> None:
    """What the file alone says of whether the region can change a result (`analysis/region_flow.py`)."""
    if region.function is None or summary.cut or summary.inference:
        return
    flow = region_flow.flow_of(model, region)
    summary.inert, summary.inputs, summary.stores, summary.local_only, summary.assumes, summary.cut_after = (
        flow.inert, flow.inputs, flow.stores, flow.local_only, flow.assumes, flow.cut_after)
    summary.mutates, summary.aux_only, summary.returned_only = flow.mutates, flow.aux_only, flow.returned_only
    summary.adds = flow.adds


ANY_ATTRIBUTE = "*"
# Where the words they start with are (str.find is many times faster than a pattern with no literal
# prefix): `getattr(x, "name")` reads `name`, `getattr(x, name)`, `vars(x)`, `x.__dict__` may read any
_GETATTR = re.compile(r"getattr\s*\([^,()]+,\s*(?:['\"](\w+)['\"]|[^'\"\s])")
_VARS = re.compile(r"vars\s*\(")
_ANY_READ = ("__dict__", "__getattribute__")
# `.name`, but `.name = ...`, and what only adds to it or changes it in place (`.name.append(`, `.name[k] =`,
# `.name.mul_(`: `Region.adds`)
_ATTRIBUTE_READ = re.compile(r"\.\s*([A-Za-z_]\w*)\b(?!\s*=(?!=))"
                             r"(?!\s*\.\s*(?:append|extend|insert|add|appendleft|update|[a-z]\w*[a-z0-9]_)\s*\()"
                             r"(?!\s*\[[^\]\n]*\]\s*=(?!=))")


class _AttributeReads:
    """The attribute names each line of a file reads (`x.last_norm`, not `x.last_norm = ...`,
    `getattr(x, "last_norm")`): found in the text, strings and comments included, so never fewer
    than its code loads. ANY_ATTRIBUTE where it may read any: `vars(x)`, `x.__dict__`, `getattr`
    of a computed name. The text is searched once; a function reads what its lines read."""

    def __init__(self, lines: list[str]):
        text = "\n".join(lines)
        found = [(match.start(), match.group(1)) for match in _ATTRIBUTE_READ.finditer(text)]
        for offset in word_offsets(text, ("getattr",)):
            if match := _GETATTR.match(text, offset):
                found.append((offset, match.group(1) or ANY_ATTRIBUTE))
        found += [(offset, ANY_ATTRIBUTE) for offset in word_offsets(text, ("vars",)) if _VARS.match(text, offset)]
        for word in _ANY_READ:
            at = text.find(word)
            while at >= 0:
                found.append((at, ANY_ATTRIBUTE))
                at = text.find(word, at + 1)
        found.sort()
        self._starts = [start for start, _ in found]
        self._names = [name for _, name in found]
        self._line_starts = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))

    def of(self, function: ast.AST) -> tuple[str, ...]:
        """What the lines of `function` read."""
        begin = self._line_starts[function.lineno - 1]
        last = function.end_lineno or function.lineno
        end = self._line_starts[min(last, len(self._line_starts) - 1)]
        names = self._names[bisect.bisect_left(self._starts, begin):bisect.bisect_left(self._starts, end)]
        return tuple(sorted(set(map(sys.intern, names))))  # kept once in each process


def _literal_strings(node: ast.expr, scopes, scope: Scope) -> list[str] | None:
    """The strings an expression may be: a literal, or a name each binding of which is one or takes
    the elements of a literal tuple or list of them (`for name in ("A", "B")`); None for any other."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else None
    if not isinstance(node, ast.Name):
        return None
    found: list[str] = []
    for binding in scopes.lookup(scope, node.id, (node.lineno, node.col_offset)) or [None]:
        given = binding and (binding.iterated if binding.iterated is not None else binding.value)
        elements = given.elts if isinstance(given, (ast.Tuple, ast.List)) and binding.iterated is not None else [given]
        if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elements):
            return None
        found += [e.value for e in elements]
    return found


def _key(node: ast.expr | None):
    """The key or index a literal spells (`d["a"]`, `ls[0]`), else None."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, str):
        return node.value
    return None


def _under(ref: Ref, path: tuple) -> bool:
    """Whether `ref` is an element under the keys of `path` (outermost first) of a container."""
    for key in path:
        if ref[0] != "box" or len(ref) < 3 or ref[2] != key:
            return False
        ref = ref[1]
    return True


def _empty_container(value: ast.expr) -> bool:
    """`{}`, `[]`, `dict()`, `defaultdict(list)`: what a registry starts as."""
    kind = type(value)
    if kind is ast.Dict or kind is ast.List:
        return not (value.keys if kind is ast.Dict else value.elts)
    return activity.makes_container(value) and not value.keywords and all(
        type(arg) is not ast.Dict and type(arg) is not ast.List for arg in value.args)


def _kept(ref: Ref) -> Ref:
    """A parameter stored into a module's container (`MODELS[name] = cls`) as ("kept", parameter):
    what every call passes to it stays there after the call."""
    if ref[0] == "param":
        return ("kept", ref)
    if ref[0] == "box" and ref[1][0] == "param":
        return ("box", ("kept", ref[1]), *ref[2:])
    return ref


def _root(ref: Ref) -> Ref:
    """The ref a chain of attributes, calls and elements starts from."""
    while ref[0] in ("attr", "call", "inst", "box", "item", "wrap", "slice"):
        ref = ref[1]
    return ref


_FUNCTION_KINDS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_LIBRARIES = ("torch.", "functorch.", "numpy.", "math.", "builtins.", "einops.", "typing.", "collections.")


def _may_run_a_function(ref: Ref) -> bool:
    """Whether calling `ref` may run one of the project's functions: calling a parameter may, and a
    method of one (`model.encode(x)`, `net.encoder.block(x)`) unless torch or Python name it for
    their own values (`x.mean()`, `names.append(n)`: library.FOREIGN_METHODS)."""
    if ref[0] == "param" or ref[0] == "item" and ref[1][0] == "param":  # `f()`, `handlers[name]()`
        return True
    if ref[0] == "attr" and ref[2] not in library.FOREIGN_METHODS:
        base = ref[1]
        while base[0] == "attr":
            base = base[1]
        if base[0] == "param":
            return True
    while ref[0] in ("attr", "call", "inst", "box", "item", "super", "slice"):
        ref = ref[1]
    return ref[0] != "param"


def _is_dataclass(node: ast.ClassDef) -> bool:
    """`@dataclass`, `@dataclasses.dataclass(frozen=True)`, ..."""
    for decorator in node.decorator_list:
        decorator = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = decorator.attr if isinstance(decorator, ast.Attribute) else getattr(decorator, "id", "")
        if name == "dataclass":
            return True
    return False


def _holds_any(ref: Ref, refs: set) -> bool:
    """Whether `ref` is one of `refs` or made from one (`("box", ("item", r), "k")` from `r`)."""
    return ref in refs or any(type(part) is tuple and _holds_any(part, refs) for part in ref[1:])


def _init_field(statement: ast.AnnAssign) -> bool:
    """Whether a dataclass's annotated name is a parameter of the `__init__` it makes: not a
    `ClassVar`, nor `field(init=False)`."""
    annotation = statement.annotation
    base = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    if (base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")) == "ClassVar" \
            or isinstance(annotation, ast.Constant) and str(annotation.value).startswith("ClassVar"):
        return False
    value = statement.value
    return not (isinstance(value, ast.Call) and any(
        k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False for k in value.keywords))


def _is_property(decorator: ast.expr) -> bool:
    """`@property`, `@functools.cached_property`, `@cached_property`."""
    name = decorator.attr if isinstance(decorator, ast.Attribute) else getattr(decorator, "id", "")
    return name in ("property", "cached_property")


def _may_be_the_projects(ref: Ref) -> bool:
    """Whether a ref may stand for an instance of a class of the project made elsewhere: `Net()`, an
    element of a container, `self.net`; not `self` (its class is known), a parameter (what it is, is
    not followed), a module, or torch's."""
    if ref[0] == "attr" and ref[1][0] == "inst":
        ref = ref[1]
    elif ref[0] not in ("call", "item"):
        return False
    while ref[0] in ("attr", "call", "inst", "box", "item", "wrap"):
        ref = ref[1]
    return ref[0] == "cls" or ref[0] == "imp" and not ref[1].startswith(("torch.", "functorch."))


def _positional(function: ast.AST) -> list[ast.arg]:
    return [*function.args.posonlyargs, *function.args.args]
