"""The whole project: module names from the import roots, the summaries of its files linked into
one call graph, and the reach of every transform and tracer over it.

Linking is a pure step over summaries (`summary`): refs are resolved to values (a function,
a class, an instance, a module, or a name outside the project), helpers' parameters are solved
to a fixpoint, and reach is a worklist over functions in which each function is visited once per
mode, keeping the first reaching call for the message. Both are linear in the size of the call
graph. A module is loaded (summarised) the first time a ref leads into it, so files no chain
touches are never parsed. Nothing here imports or runs the project's code.
"""
from __future__ import annotations

import bisect
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path, PurePath
from typing import NamedTuple, Optional

from lint_nograd.analysis import entry_points, library, torch_names
from lint_nograd.analysis.entry_points import DROPS, FORWARD, REVERSE
from lint_nograd.analysis.varied import CAPTURED, UNKNOWN
from lint_nograd.project.summary import (
    ANY_ATTRIBUTE,
    MODULE_BODY,
    Applied,
    BackwardSite,
    CallSite,
    Function,
    ModuleSummary,
    Ref,
    Region,
    RegionCall,
    Source,
    Span,
    constant_params,
    display_name,
    imports_among,
)

Value = tuple  # ("F", module, function, bound) ("C", module, class) ("I", module, class) ("M", module)
#               ("X", qualified name) ("XI", qualified class name) ("W", value) ("P", module, function, parameter)
#               ("B", value): a container holding value; ("S", module, class): `super()` in a method of class;
#               ("K", value): a function a decorator's wrapper runs; ("G", module, name): a container a module binds
FunctionKey = tuple[str, str]  # (module, function)
EVERY = frozenset({UNKNOWN})  # every parameter may be varied
ANY_OBJECT = frozenset({None})  # a method runs on an object of any class
_CAPTURED = frozenset({CAPTURED})
_MAX_DEPTH = 24
_MAX_OPEN = 48  # refs resolved one inside another (the depth above restarts at a helper's call site): Python's stack
_MAX_ROUNDS = 4  # a cycle of refs is resolved again at most so often, until it finds no more
_MAX_OVERRIDES = 4  # subclasses' methods a call on `self` in a base class may run; more tell nothing
_MAX_HANDED = 3  # functions a parameter holding a transform is handed on through, at most
_MAX_TYPED_BY_USE = 4  # classes a parameter may be taken to hold by what is asked of it; more tell nothing
_NO_CYCLE = 1 << 30  # `Project._low` when no open ref was met


class _Through(NamedTuple):
    """A call in a closure a transform runs, passing a captured parameter on: `render(field, o)` in
    `linearize(lambda o: render(field, o), ...)`: what the callee calls of it runs under the transform."""

    site: object  # CallSite
    mode: str
    reacher: object  # Reacher


class ParameterUse(NamedTuple):
    """What a function does with a parameter (`Project.parameter`)."""

    called: frozenset[str]  # the attribute paths it calls: "" for the parameter itself, "encode", ...
    sourced: dict  # (path, mode) -> the first Reacher of the transforms it hands that path to
    # the (path, mode) of those a transform is given itself (directly or by other helpers), not only
    # called in a closure a transform runs (`jvp(lambda p: obj(p, x))`: varied as that call passes)
    given: frozenset = frozenset()


@dataclass(frozen=True)
class Reacher:
    """The call that makes a function run under a transform or a tracer, and how it gets there."""

    mode: str  # FORWARD, REVERSE or DROPS
    entry: str  # `jacfwd`, `torch.jit.trace`, ...
    module: str  # the module of that call
    span: Span
    text: str  # `jacfwd(loss)`
    through: Optional[FunctionKey] = None  # the first function of the chain, when reached transitively
    via: Optional[tuple[str, Span, str]] = None  # (module, span, text): the call of the helper that passed it on
    exported: bool = False  # a tracer whose result is only saved, exported or run without grad (Source.exported)
    skips: tuple[str, ...] = ()  # the guarded branches it cannot run (Source.skips)
    # (module, span, note): a parameter no call tells of, taken to hold the classes that have what it
    # is asked for (`Project._seed_typed_by_use`)
    assumed: Optional[tuple[str, Span, str]] = None


@dataclass(frozen=True)
class RunInRegion:
    """A transform that runs in a region's mode because a call in the region leads to it: NG001
    under no_grad, NG002 under inference_mode."""

    call: RegionCall  # the call in the region
    module: str  # of the function applying the transform
    applied: Applied
    chain: tuple[FunctionKey, ...]  # the functions from the one called to the one applying it


@dataclass
class ModuleEntry:
    name: str  # `pkg.model`; a file no import can name gets `<path>`
    path: str  # as shown in messages
    is_package: bool = False
    summary: Optional[ModuleSummary] = None
    loaded: bool = False  # the summary was asked for (it may still be None: the file does not parse)


def module_name(path: Path, roots: Sequence[Path]) -> tuple[str, bool]:
    """The dotted name a file is imported under from the nearest import root that holds it (with
    roots `.` and `src`, `src/pkg/model.py` is `pkg.model`, as Python imports it), and whether it
    is a package (`__init__.py`); `<path>` when no root holds it."""
    name, package, _ = module_name_and_root(path, roots)
    return name, package


def module_name_and_root(path: Path, roots: Sequence[Path]) -> tuple[str, bool, int]:
    """`module_name`, and the index of the root it is named from (len(roots) when none): when two
    files have one name, the first root in order wins, as on `sys.path`."""
    found: tuple[str, bool, int] = (f"<{path}>", False, len(roots))
    for index, root in enumerate(roots):
        try:
            parts = list(PurePath(path).relative_to(root).with_suffix("").parts)
        except ValueError:
            continue
        package = parts[-1:] == ["__init__"]
        if package:
            parts = parts[:-1]
        if parts and all(part.isidentifier() for part in parts) and path.suffix == ".py" and \
                (found[2] == len(roots) or len(parts) < found[0].count(".") + 1):
            found = (".".join(parts), package, index)
    return found


class Project:
    """Summaries linked across modules. `load(entry)` summarises a module on first use.

    `leads` names the modules whose imports lead to one that names a grad-disabling API, and
    `transforms` those that may apply a transform or tracer, or import one that may (None: all of
    them). Only the first can hold a function that leads to a region, so only they are loaded to
    follow a chain; to learn whether a helper transforms its parameter, the second are too; and a
    call in a reached function that hands on something leading to a region may load any module
    (a helper may call its parameter). `read` names the modules the first import, directly or not:
    a name a chain reads there (a registry that a module with regions fills by calling into it,
    `MODELS[name]()`) may hold what leads to a region, so they are loaded too."""

    def __init__(self, modules: dict[str, ModuleEntry],
                 load: Callable[[ModuleEntry], Optional[ModuleSummary]] | None = None,
                 leads: Optional[set[str]] = None, transforms: Optional[set[str]] = None,
                 toward_transforms: Optional[set[str]] = None, read: Optional[set[str]] = None,
                 passes: Callable[[ModuleEntry], dict] | None = None):
        self.modules = modules
        self._read_passes = passes  # what each call of a module passes, asked when a transform reaches it
        self._passes: dict[str, dict] = {}
        self._read = read
        self._loaded: Optional[list[str]] = None  # `loaded()`, until a module is loaded
        self._module_order = {name: position for position, name in enumerate(modules)}
        # the modules loaded, in their order (`loaded()` hands out a copy), and those not in `_by_last_name` yet
        self._loaded_in_order = [name for name, entry in modules.items() if entry.loaded and entry.summary is not None]
        self._not_indexed = list(self._loaded_in_order)
        self._load = load
        self._leads, self._transforms = leads, transforms
        self._toward_transforms = toward_transforms  # the modules whose imports lead to one applying a transform
        self._imports_of: dict[str, set[str]] = {}  # `_import_closure`
        self._applied_below: dict[tuple[FunctionKey, bool], tuple] = {}
        self._permissive = 0  # 1 while learning what a helper transforms; 2 while following a chain
        self._refused = 0  # loads refused so far: a resolution that met one is not remembered
        self._resolved: dict[tuple[str, Ref], tuple[Value, ...]] = {}
        # What a ref stands for outside a chain of reach, where an attribute set from a parameter is
        # not looked for (`_stored`): the only refusals met; asked again only outside a chain. On
        # torch's sources, half the refs resolved were resolved before, for that alone.
        self._outside_chains: dict[tuple[str, Ref], tuple[Value, ...]] = {}
        self._outside_chain = 0  # how many of `_refused` were only outside a chain
        self._open: dict[tuple[str, Ref], int] = {}  # the refs being resolved -> their place on that stack
        self._low = _NO_CYCLE  # the lowest place on the stack of an open ref met by what is being resolved
        self._provisional: dict[tuple[str, Ref], tuple[tuple[Value, ...], int]] = {}  # in an open cycle: (values, low)
        self._pending: list[tuple[str, Ref]] = []  # the refs in `_provisional`, in the order found
        self._seeds: dict[tuple[str, Ref], tuple[Value, ...]] = {}  # an open ref -> what the round before found
        self._met: list[tuple[tuple[str, Ref], tuple[Value, ...]]] = []  # open refs met again, and what they were given
        self._runs: dict[Value, tuple[Value, ...]] = {}
        self._parameters: dict[tuple[str, str, str], ParameterUse] = {}
        self._whole_graph = False  # `call_graph`: a method of a parameter is looked up on what every call passes
        self._uses: dict[str, dict[tuple, list]] = {}  # module -> parameter -> how its functions use it
        self._passed: dict[tuple[str, str, str], tuple[Value, ...]] = {}  # what calls pass to a parameter
        self._passed_elements: dict[tuple, tuple[Value, ...]] = {}  # (parameter, key) -> the elements passed
        self._by_last_name: dict[str, list] = defaultdict(list)  # a callee's last name -> (module, call site)
        self._following = False  # reach is being propagated
        self._self_transforming: Optional[set[str]] = None  # the names of methods that transform `self`
        self._helper_names: Optional[set[str]] = None  # see `_transforming_helpers`
        self._origins: dict = {}  # import, or (importer, import) when relative -> module
        self.reached: dict[FunctionKey, dict[str, Reacher]] = defaultdict(dict)
        self._varied: dict[tuple[FunctionKey, str], frozenset[str]] = {}  # see `_reach`, `varied_params`
        self._aux: dict[tuple[FunctionKey, str], bool] = {}  # see `_reach`, `only_for_aux`
        self._closures: dict[Value, tuple[Value, ...]] = {}  # `_passed_closure`
        self._called_of: dict[Value, tuple[Value, ...]] = {}  # `_called`, for parameters
        self._bound: dict[int, tuple] = {}  # `_helpers`, by call site
        self._typed: dict[tuple[str, str, str], tuple[list, set]] = {}  # `_typed_by_use`
        self._having: tuple[int, dict, dict] = (-1, {}, {})  # `_classes_defining`
        self._decorations: list[tuple[str, tuple[Ref, ...], tuple[Ref, ...]]] = []  # `_filled`, from the
        self._decorations_seen = 0  # first modules loaded
        self._applying_names: Optional[set[str]] = None  # `_names_applying`
        self._given_applying: dict[tuple[str, str, str], bool] = {}  # `_given_what_applies`
        self._overridden: dict[tuple, list] = {}  # `_overrides`
        self._receivers: dict[tuple[FunctionKey, str], frozenset] = {}  # see `_reach`, `_dispatched`
        self._edges: dict[tuple[FunctionKey, str], set[FunctionKey]] = defaultdict(set)  # the calls reach followed
        self._callers_in: dict[str, dict] = {}  # `_solve_varied`: by mode, the reverse of `_edges`
        self._varied_found: dict[tuple[FunctionKey, str], frozenset[str]] = {}  # `varied_params`
        self._queue: deque = deque()
        self._reported_in: Optional[tuple[frozenset[str], dict]] = None
        self._flow: _FlowFacts | None = None  # the flow rule's facts, read once after linking
        self._mros: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._unnamed_callees: dict[int, list[Value]] = {}  # by call site
        self._unnamed_by_callee: dict[FunctionKey, list[tuple[int, Value]]] = defaultdict(list)  # see `_unnamed_calls`
        self._unnamed_pending: dict[int, None] = {}  # the unnamed call sites not remembered yet, by position
        self._unnamed_listed = 0  # the unnamed call sites met so far
        # as `_outside_chains`: the unnamed call sites found so, and what they call
        self._unnamed_outside_by_site: dict[int, None] = {}
        self._unnamed_outside_by_callee: dict[FunctionKey, list[tuple[int, Value]]] = defaultdict(list)
        self._passing: set[tuple[str, str, str]] = set()  # the parameters whose values are being found
        self._passed_open: set[tuple[str, str, str]] = set()  # found in a cycle of refs not done: found again
        self._unnamed_depth = 0  # how many unnamed call sites are being resolved, one inside another
        self._wanted: dict[FunctionKey, None] = {}  # see `callers_wanted`
        self._hooks: Optional[set[Value]] = None  # `_hook_functions`
        self._hooked_seen = 0  # `_hooks_given`: the hooks registered on parameters, in the first modules loaded,
        self._hooked: dict[tuple[str, str], list[tuple[str, tuple[Ref, ...]]]] = {}  # and by the class given them
        # the parameters whose values finding another's asked for (at the depth it was found at)
        self._needs: dict[tuple[str, str, str], set[tuple[str, str, str]]] = {}
        self._asking: list[tuple[int, set]] = []  # (depth, asked) of each `passed` being found
        self._wanted_keys: set[tuple[str, str, str]] = set()  # (`_want`)
        # class -> its direct subclasses, in the modules indexed for good (`_subclasses`)
        self._subclass_index: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        self._subclass_settled: set[str] = set()
        self._subclass_unsettled: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._subclass_sorted: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._subclass_count = -1  # the modules loaded when they were last indexed

    # -- modules ------------------------------------------------------------------------------------

    def summary(self, module: str) -> Optional[ModuleSummary]:
        entry = self.modules.get(module)
        if entry is None:
            return None
        if not entry.loaded:
            if not (self.leads(module) or self._permissive == 2 or self._read is not None and module in self._read
                    or self._permissive == 1 and (
                    self._transforms is None or module in self._transforms)):
                self._refused += 1
                return None
            entry.loaded = True
            if entry.summary is None and self._load is not None:
                entry.summary = self._load(entry)
            if entry.summary is not None:
                self._loaded = None
                bisect.insort(self._loaded_in_order, module, key=self._module_order.__getitem__)
                self._not_indexed.append(module)
        return entry.summary

    def leads(self, module: str) -> bool:
        """Whether a function of `module` may lead to a region."""
        return self._leads is None or module in self._leads

    def loaded(self) -> list[str]:
        """The modules loaded so far (found again only after a load: it is asked for at every call site)."""
        if self._loaded is None:
            self._loaded = list(self._loaded_in_order)
        return self._loaded

    def function(self, key: FunctionKey) -> Optional[Function]:
        summary = self.summary(key[0])
        return summary.functions.get(key[1]) if summary else None

    def _absolute(self, module: str, name: str) -> str | None:
        """`pkg.model.loss` for `.model.loss` imported in `pkg.train`; `scripts.config` for `config`
        imported in `scripts/train.py`, a folder without `__init__.py` (`script_relative`)."""
        if not name.startswith("."):
            return script_relative(module, name, self.modules)
        rest = name.lstrip(".")
        level = len(name) - len(rest)
        entry = self.modules.get(module)
        if entry is None or entry.name.startswith("<"):
            return None
        package = entry.name.split(".") if entry.is_package else entry.name.split(".")[:-1]
        if level - 1 > len(package):
            return None
        base = package[:len(package) - (level - 1)]
        return ".".join([*base, rest] if rest else base)

    def _qualified(self, name: str) -> tuple[Value, ...]:
        """The value of a dotted name: a module of the project and attributes of it, or outside."""
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            module = ".".join(parts[:end])
            if module in self.modules:
                values: tuple[Value, ...] = (("M", module),)
                for attribute in parts[end:]:
                    values = tuple(v for value in values for v in self.attribute(value, attribute))
                return values
        return (("X", name),)

    # -- values -------------------------------------------------------------------------------------

    def resolve(self, module: str, ref: Ref, depth: int = 0) -> tuple[Value, ...]:
        """What a ref of `module` stands for. Remembered unless a load was refused on the way: the
        modules it looked into were loaded then, and a module once loaded stays so, so looking again
        would find the same; a refused load may be allowed later (looking into a helper), and then
        the ref is looked at again."""
        key = (module, ref)
        values = self._resolved.get(key)
        if values is not None:
            return values
        if not self._following:
            values = self._outside_chains.get(key)
            if values is not None:
                self._refused += 1
                self._outside_chain += 1
                return values
        at = self._open.get(key)
        if at is not None:  # met again while it is resolved: what the round before found of it; the cycle stays open
            if at < self._low:
                self._low = at
            values = self._seeds.get(key, ())
            self._met.append((key, values))
            return values
        known = self._provisional.get(key)
        if known is not None:  # found inside a cycle that is still open: good until it closes
            if known[1] < self._low:
                self._low = known[1]
            return known[0]
        if depth > _MAX_DEPTH or len(self._open) > _MAX_OPEN:
            return ()
        return self._resolve_cycle(key, depth)

    def _resolve_cycle(self, key: tuple[str, Ref], depth: int) -> tuple[Value, ...]:
        """Resolve `key`, keeping the refs being resolved on a stack (`_open`). A ref that meets one
        below it on the stack is part of that one's cycle: its values are provisional until the first
        ref of the cycle is done (what it meets was not complete yet). That first ref is resolved
        again, each ref of the cycle met given what the round before found of it, until every ref
        met was given what it finds (linear in the cycle's refs a round), and then they are remembered."""
        position = len(self._open)
        self._open[key] = position
        outer_low, mark, met, refused = self._low, len(self._pending), len(self._met), self._refused
        outside = self._outside_chain
        seeded: dict = {}
        try:
            for _ in range(_MAX_ROUNDS):
                self._low = _NO_CYCLE
                values = tuple(dict.fromkeys(self._resolve(key[0], key[1], depth)))
                if self._low != position:
                    break
                found = {other: known[0] for other in self._pending[mark:]
                         if (known := self._provisional.get(other)) is not None}
                found[key] = values
                if all(found.get(other, self._resolved.get(other, given)) == given for other, given in self._met[met:]):
                    break  # each ref met again was given all it finds
                seeded.update(found)
                self._seeds.update(found)
                self._drop_pending(mark, False)
                del self._met[met:]
        finally:
            del self._open[key]
            for other in seeded:
                self._seeds.pop(other, None)
        low = self._low
        self._low = low if low < outer_low else outer_low
        if low < position:  # in a cycle still open below
            if self._refused == refused:
                self._provisional[key] = (values, low)
                self._pending.append(key)
            else:
                self._provisional.pop(key, None)
            return values
        if self._refused == refused:  # a module not loaded: another look, with more allowed, may find more
            self._resolved[key] = values
        elif self._refused - refused == self._outside_chain - outside and not self._following:
            self._outside_chains[key] = values
        self._drop_pending(mark, True)  # (each was found with no load refused, as a ref is remembered)
        del self._met[met:]
        return values

    def _drop_pending(self, mark: int, remembered: bool) -> None:
        """Forget (or remember, once their cycle is done) the provisional values found since `mark`."""
        for key in self._pending[mark:]:
            known = self._provisional.pop(key, None)
            if remembered and known is not None:
                if len(key) == 3:  # what is passed to a parameter
                    self._passed[key] = known[0]
                    self._passed_open.discard(key)
                else:
                    self._resolved[key] = known[0]
        del self._pending[mark:]

    def _resolve(self, module: str, ref: Ref, depth: int) -> Iterator[Value]:
        kind = ref[0]
        if kind == "fn":
            yield ("F", module, ref[1], False)
        elif kind == "cls":
            yield ("C", module, ref[1])
        elif kind == "imp":
            name = self._absolute(module, ref[1])
            if name is not None and (len(ref) == 2 or self._star_binds(module, ref[2], name)):
                yield from self._qualified(name)
        elif kind == "param":
            yield ("P", module, ref[1], ref[2])
        elif kind == "attr":
            for value in self.resolve(module, ref[1], depth + 1):
                yield from self.attribute(value, ref[2], depth + 1)
        elif kind == "inst":
            for value in self.resolve(module, ref[1], depth + 1):
                if value[0] == "C":
                    yield ("I", value[1], value[2])
        elif kind == "call":  # calling a class makes an instance; a function, what it returns
            for value in self.resolve(module, ref[1], depth + 1):
                if value[0] == "C":
                    yield ("I", value[1], value[2])
                elif value[0] == "X":
                    yield ("XI", value[1])
                elif value[0] == "F" and value[3] and ref[1][0] == "attr" and \
                        getattr(self.function((value[1], value[2])), "kind", "") == "classmethod":
                    yield from self._made_by_classmethod(module, ref[1], value, depth)
                else:
                    for function in self.runs(value):
                        yield from self.returned(function, depth + 1)
        elif kind == "wrap":
            for value in self.resolve(module, ref[1], depth + 1):
                yield ("W", value)
        else:
            yield from self._resolve_more(module, ref, depth)

    def _made_by_classmethod(self, module: str, callee: Ref, method: Value, depth: int) -> Iterator[Value]:
        """`A.from_config(cfg)`, with `from_config` a classmethod of a base class returning `cls(...)`:
        an instance of the class it is called on (of each class `MODELS[name]` may be), not of the
        base class that defines it."""
        owner = (method[1], method[2].rpartition(".")[0])
        classes = [(value[1], value[2]) for value in self.resolve(module, callee[1], depth + 1) if value[0] == "C"]
        receivers = [("I", *cls) for cls in classes
                     if cls != owner and method in self._member(*cls, callee[2], True, set())]
        for value in self.returned(method, depth + 1):
            if value[0] == "I" and (value[1], value[2]) == owner and receivers:
                yield from receivers
                if owner not in classes:
                    continue
            yield value

    def _resolve_more(self, module: str, ref: Ref, depth: int) -> Iterator[Value]:
        """Containers and their elements, `super()`."""
        kind = ref[0]
        if kind == "box":  # ("B", value) or ("B", value, key): under its index or key
            for value in self.resolve(module, ref[1], depth + 1):
                yield ("B", value, *ref[2:])
        elif kind == "item":
            for value in self.resolve(module, ref[1], depth + 1):
                yield from self._elements_of(value, depth + 1, ref[2] if len(ref) > 2 else None)
        elif kind == "star":  # an element of what `*args` holds, in its place, handed on to an `__init__`
            for value in self.resolve(module, ref[1], depth + 1):
                yield from self._elements_passed(value, depth, ref[2]) if value[0] == "P" and depth < _MAX_DEPTH \
                    else self._elements_of(value, depth + 1, ref[2])
        elif kind == "slice":  # `ls[1:]`: the elements from index 1 are from 0 in it; other slices lose their order
            for value in self.resolve(module, ref[1], depth + 1):
                if value[0] == "B" and len(value) > 2:
                    if len(ref) > 2 and type(value[2]) is int:
                        if value[2] >= ref[2]:
                            yield ("B", value[1], value[2] - ref[2])
                    else:
                        yield ("B", value[1])
                else:
                    yield value
        elif kind == "super":
            for value in self.resolve(module, ref[1], depth + 1):
                if value[0] == "C":
                    yield ("S", value[1], value[2])
        elif kind == "decorated":
            yield from self._decorated(module, ref, depth)
        elif kind == "global":  # a module's container (`_filled`)
            yield ("G", module, ref[1])
        elif kind == "kept":  # `MODELS[name] = cls` in `register(cls)`: every class the calls register
            yield ("P", module, ref[1][1], ref[1][2])
            yield from self.passed(module, ref[1][1], ref[1][2])
        elif kind == "read":  # `self.features` runs its getter when it is a property
            read = ref[1]
            if read[0] != "attr":
                return
            for base in self.resolve(module, read[1], depth + 1):
                if base[0] == "I":
                    for value in self._member(base[1], base[2], read[2], True, set()):
                        if value[0] == "F" and value[3] and value[2] in self._properties(value[1]):
                            yield value

    def _elements_of(self, value: Value, depth: int, key=None) -> Iterator[Value]:
        """What indexing (by `key`, when a literal) or iterating `value` gives: a container's elements,
        what `__getitem__` returns, what `__next__` of what `__iter__` returns, the elements of what
        the calls pass to a parameter."""
        kind = value[0]
        if kind == "B":
            if key is None or len(value) < 3 or value[2] == key:
                yield value[1]
        elif kind == "I" and depth < _MAX_DEPTH:  # (an object may hold itself: `self[name] = self`)
            for held in self._member(value[1], value[2], library.ITEMS_ATTRIBUTE, False, set()):
                yield from self._elements_of(held, depth + 1, key)  # `self[name] = cls` in its methods
            for getter in self._member(value[1], value[2], "__getitem__", True, set()):
                yield from self.returned(getter, depth + 1)  # `return self._items[key]`
            for iterator in self._member(value[1], value[2], "__iter__", True, set()):
                for made in self.returned(iterator, depth + 1):
                    if made[0] == "B":  # a generator
                        yield made[1]
                    elif made[0] == "I":
                        for step in self._member(made[1], made[2], "__next__", True, set()):
                            yield from self.returned(step, depth + 1)
        elif kind == "P" and self._following and depth < _MAX_DEPTH:
            yield from self._elements_passed(value, depth, key)
        elif kind == "G":
            yield from self._filled(value)

    def _filled(self, container: Value) -> Iterator[Value]:
        """What decorator factories given a module's container store into it, told where each
        decorates: `@register(FIELDS, "mlp") class Mlp` with `def register(table, name): def deco(cls):
        table[name] = cls` stores `Mlp` into what that call gives `table`, and nothing into the
        other containers the factory is given elsewhere."""
        loaded = self.loaded()
        if self._decorations_seen < len(loaded):
            fresh, self._decorations_seen = loaded[self._decorations_seen:], len(loaded)
            for module in fresh:
                summary = self.summary(module)
                for function, _ in summary.fills:  # the modules calling a factory are read in the next round
                    self._wanted[(module, function)] = None
                for function in summary.functions.values():
                    self._decorations += self._factory_stores(module, function.call_sites)
        for module, decorated, table in self._decorations:
            if container in self._values(module, table):
                yield from self._values(module, decorated)

    def _factory_stores(self, module: str, sites: list) -> list[tuple[str, tuple[Ref, ...], tuple[Ref, ...]]]:
        """(module, what a decorator decorates, what its factory's call gives the container it
        stores that into) for each decorator of `sites` made by a call of such a factory."""
        found = []
        calls = {site.span: site for site in sites if not site.decoration}
        for site in sites:
            # the factory's own call, `register(FIELDS, "mlp")`, spans the decorator
            made = calls.get(site.span) if site.decoration and any(ref[0] == "call" for ref in site.callees) else None
            if made is not None:
                for factory in self._functions(module, made.callees):
                    fills = self.summary(factory[1]).fills
                    inner = factory[2] + ".<locals>."
                    tables = {parameter for (function, parameter), stored in fills.items() if function == factory[2]
                              and any(_unboxed(ref)[0] == "param" and _unboxed(ref)[1].startswith(inner) for ref in stored)}
                    bound: list = []
                    self._bind(factory, made, bound)
                    found += [(module, site.args[0], refs) for _, name, refs in bound if name in tables]
        return found

    def _elements_passed(self, value: Value, depth: int, key) -> tuple[Value, ...]:
        """The elements of what the calls pass to a parameter, found once (remembered as `resolve`
        remembers): a parameter passed on through many callers is looked into once, not once a chain."""
        memo = (value, key)
        found = self._passed_elements.get(memo)
        if found is not None:
            return found
        self._passed_elements[memo] = ()  # a parameter passed back to itself adds nothing more
        refused = self._refused
        found = tuple(dict.fromkeys(element for passed in self.passed(value[1], value[2], value[3])
                                    for element in self._elements_of(passed, depth + 1, key)))
        if self._refused == refused:
            self._passed_elements[memo] = found
        else:
            del self._passed_elements[memo]
        return found

    def _decorated(self, module: str, ref: Ref, depth: int) -> Iterator[Value]:
        """`@dec def f`: what `dec(f)` returns (`f` where it returns its parameter); `f` itself when
        `dec` is none of the project's functions (`@torch.no_grad()`, `@functools.wraps(g)`)."""
        plain = True
        for decorator in self.resolve(module, ref[2], depth + 1):
            if decorator[0] == "C":  # a class decorating a function: an instance holding it
                plain = False
                yield ("I", decorator[1], decorator[2])
                continue
            for function in self.runs(decorator):
                plain = False
                params = self.function((function[1], function[2])).params[1 if function[3] else 0:]
                given = ("P", function[1], function[2], params[0]) if params else None
                for value in self.returned(function, depth + 1):
                    if value == given:
                        yield from self.resolve(module, ref[1], depth + 1)
                        continue
                    yield value
                    wrapper = self.function((value[1], value[2])) if value[0] == "F" else None
                    if given and wrapper and ("param", given[2], given[3]) in wrapper.calls:
                        # a wrapper calling what it was given runs `f` (which one, a closure alone does not
                        # tell): reach follows into `f`, the graph only through the wrapper's own call
                        yield from (("K", kept) for kept in self.resolve(module, ref[1], depth + 1))
        if plain:
            yield from self.resolve(module, ref[1], depth + 1)

    def _star_binds(self, module: str, star: str, name: str) -> bool:
        """Whether `from star import *` in `module` binds the first name of `name` after `star`."""
        imported = self._absolute(module, star)
        if imported is None or not name.startswith(imported + "."):
            return False
        return self._exports(imported, name[len(imported) + 1:].partition(".")[0], set())

    def _exports(self, module: str, name: str, seen: set) -> bool:
        """Whether `from module import *` binds `name`: a name of its literal `__all__`, else a public
        name it binds (imports included, and what its own star imports bind)."""
        summary = self.summary(module)
        if summary is None or module in seen:  # outside the project, or not loaded: as if it does
            return summary is None
        if summary.exports is not None:
            return name in summary.exports
        if name.startswith("_"):
            return False
        seen.add(module)
        return name in summary.names or f"{module}.{name}" in self.modules or any(
            (other := self._absolute(module, star)) is not None and self._exports(other, name, seen)
            for star in summary.star_imports)

    def returned(self, function: Value, depth: int = 0) -> Iterator[Value]:
        """What a function of the project may return."""
        summary = self.summary(function[1])
        for ref in summary.returns.get(function[2], ()) if summary else ():
            yield from self.resolve(function[1], ref, depth + 1)

    def _properties(self, module: str) -> frozenset[str]:
        summary = self.summary(module)
        return frozenset(summary.properties) if summary else frozenset()

    def attribute(self, value: Value, name: str, depth: int = 0) -> tuple[Value, ...]:
        kind = value[0]
        if kind == "M" and name == ANY_ATTRIBUTE:  # `getattr(nets, cfg.name)`: each class and function it defines
            summary = self.summary(value[1])
            return tuple([("C", value[1], cls) for cls in summary.classes if "." not in cls] +
                         [("F", value[1], function, False) for function in summary.functions
                          if function and called_as(function) == function]) if summary else ()
        if kind == "M":
            submodule = f"{value[1]}.{name}"
            if submodule in self.modules:
                return (("M", submodule),)
            summary = self.summary(value[1])
            refs = summary.names.get(name, ()) if summary else ()
            if not refs and summary and summary.star_imports:  # `from .layers import *` in a package
                refs = tuple([("imp", star + ("" if star.endswith(".") else ".") + name, star)
                              for star in summary.star_imports])
            return tuple(v for ref in refs for v in self.resolve(value[1], ref, depth + 1))
        if kind in ("C", "I"):
            found = self._member(value[1], value[2], name, kind == "I", set())
            if not found and kind == "I" and name == "__call__":  # `model.__call__`: calling the object
                return (value,)  # (nn.Module's own, which runs `forward`)
            if kind == "I" and any(f[0] == "F" and f[3] and f[2] in self._properties(f[1]) for f in found):
                return tuple(dict.fromkeys(v for f in found for v in (  # a property: what its getter returns
                    self.returned(f, depth + 1) if f[0] == "F" and f[2] in self._properties(f[1]) else (f,))))
            return found
        if kind == "X":
            return (("X", f"{value[1]}.{name}"),)
        if kind == "W" and name == library.WRAPPED_ATTRIBUTE:  # `ddp.module` is what it wraps
            return (value[1],)
        if kind == "S":  # `super().forward`: the first class after this one, in its MRO, that has it
            return self._member_in(self.mro(value[1], value[2])[1:], name, True) or self._after_mixin(value, name)
        if kind == "P":  # `model.encode(x)` in `def loss(model, x)`: in the graph, on what every call passes
            if not self._whole_graph:  # reach asks the call that passes it (`parameter`)
                return ()
            return tuple(dict.fromkeys(found for passed in self._passed_on(value, set())
                                       for found in self.attribute(passed, name, depth + 1)))
        return ()

    def _after_mixin(self, value: Value, name: str) -> tuple[Value, ...]:
        """`super().forward(x)` in a mixin none of whose bases has `forward`: what the class after the
        mixin in the MRO of each class of the project deriving from it has (`class Block(Residual,
        Body)`), as on an object of that class (`_dispatched` tells which when it knows the object)."""
        found: dict[Value, None] = {}
        todo, seen = [(value[1], value[2])], set()
        while todo:
            cls = todo.pop()
            for sub in self._subclasses(*cls):
                if sub not in seen:
                    seen.add(sub)
                    todo.append(sub)
                    found.update(dict.fromkeys(self._after_in_mro(sub, (value[1], value[2]), name)))
        return tuple(found)

    def _after_in_mro(self, of: tuple[str, str], cls: tuple[str, str], name: str) -> tuple[Value, ...]:
        """What `super()` in `cls` finds named `name` on an object of the class `of`: the first class
        after `cls` in `of`'s MRO that has it (nothing when `cls` is not in it)."""
        order = self.mro(*of)
        return self._member_in(order[order.index(cls) + 1:], name, True) if cls in order else ()

    def _passed_on(self, value: Value, seen: set) -> Iterator[Value]:
        """What the calls pass to a parameter, through parameters that pass it on."""
        if value not in seen:
            seen.add(value)
            for passed in self.passed(value[1], value[2], value[3]):
                if passed[0] == "P":
                    yield from self._passed_on(passed, seen)
                else:
                    yield passed

    def _member(self, module: str, cls: str, name: str, bound: bool, seen: set) -> tuple[Value, ...]:
        """A method or attribute of a class, looked up in its MRO (across modules). On an instance, a
        name no class of it defines may be an attribute its subclasses set (`self.child()` in a base
        class, `self.child = ...` in each subclass); a method is not looked for so (which subclass
        `self` is, the call that reaches the method tells)."""
        if (module, cls) in seen or len(seen) > _MAX_DEPTH:
            return ()
        seen.add((module, cls))
        found = self._member_in(self.mro(module, cls), name, bound)
        if found or not bound:
            return found
        return tuple(dict.fromkeys(self._set_by_subclasses(module, cls, name, seen)))

    def _set_by_subclasses(self, module: str, cls: str, name: str, seen: set) -> Iterator[Value]:
        for sub in self._subclasses(module, cls):
            if sub in seen or len(seen) > _MAX_DEPTH:
                continue
            seen.add(sub)
            info = self.summary(sub[0]).classes[sub[1]]
            if name in info.methods:
                continue
            if name in info.attributes:
                for ref in info.attributes[name]:
                    yield from self._stored(sub[0], ref)
            else:
                yield from self._set_by_subclasses(*sub, name, seen)

    def _member_in(self, order: list[tuple[str, str]], name: str, bound: bool) -> tuple[Value, ...]:
        """The first class of `order` that defines `name`: its method; or, for an attribute, what each
        class of `order` sets it to (a base's method may set it on this instance)."""
        for module, cls in order:
            summary = self.summary(module)
            info = summary.classes.get(cls) if summary else None
            if info is None:
                continue
            if name in info.methods and name in info.attributes:  # decorated by a decorator of the project:
                found = [value for ref in info.attributes[name] for value in self.resolve(module, ref)]  # what it
                return tuple((*value[:3], bound) if value[0] == "F" else value for value in found)  # returns
            if name in info.methods:
                function = summary.functions.get(info.methods[name])
                kind = function.kind if function is not None else ""
                return (("F", module, info.methods[name], kind == "classmethod" or bound and kind != "staticmethod"),)
            if name in info.attributes:
                found: list[Value] = []
                for other_module, other in order:
                    other_summary = self.summary(other_module)
                    other_info = other_summary.classes.get(other) if other_summary else None
                    for ref in other_info.attributes.get(name, ()) if other_info else ():
                        found += self._stored(other_module, ref)
                return tuple(dict.fromkeys(found))
        return ()

    def mro(self, module: str, cls: str) -> list[tuple[str, str]]:
        """The class and its bases of the project in Python's order (C3); depth first where C3 finds
        no order. Remembered as `resolve` remembers."""
        key = (module, cls)
        found = self._mros.get(key)
        if found is not None:
            return found
        self._mros[key] = [key]  # a class among its own bases: itself
        refused = self._refused
        bases = [(base[1], base[2]) for base in self._bases(module, cls) if base[0] == "C"]
        lines = [list(self.mro(*base)) for base in bases] + [bases]
        order = [key]
        while True:
            lines = [line for line in lines if line]
            if not lines:
                break
            head = next((line[0] for line in lines if not any(line[0] in other[1:] for other in lines)), lines[0][0])
            if head not in order:
                order.append(head)
            for line in lines:
                if line[0] == head:
                    del line[0]
        if self._refused == refused:
            self._mros[key] = order
        else:
            del self._mros[key]
        return order

    def _subclasses(self, module: str, cls: str) -> list[tuple[str, str]]:
        """The classes of the loaded modules that name this one among their bases, in the order of
        the modules. Each module is indexed once, when loaded, but for one whose bases met a refused
        load: indexed again when more modules are loaded (as `resolve` remembers)."""
        loaded = self.loaded()
        if self._subclass_count != len(loaded):
            self._subclass_count = len(loaded)
            self._subclass_sorted = {}
            unsettled: dict[tuple[str, str], list] = defaultdict(list)
            for other_module in loaded:
                if other_module in self._subclass_settled:
                    continue
                refused = self._refused
                found = [(base, other) for other in self.summary(other_module).classes
                         for base in self._bases(other_module, other) if base[0] == "C"
                         and (base[1], base[2]) != (other_module, other)]
                settled = self._refused == refused
                if settled:
                    self._subclass_settled.add(other_module)
                for base, other in found:
                    (self._subclass_index if settled else unsettled)[(base[1], base[2])].append((other_module, other))
            self._subclass_unsettled = unsettled
        key = (module, cls)
        found = self._subclass_sorted.get(key)
        if found is None:
            order = self._module_order
            found = self._subclass_sorted[key] = sorted(  # (stable: a module's classes in their order)
                self._subclass_index.get(key, []) + self._subclass_unsettled.get(key, []), key=lambda c: order[c[0]])
        return found

    def _stored(self, module: str, ref: Ref) -> Iterator[Value]:
        """What an attribute holds: `self.residual = residual` in `__init__(self, residual)` holds
        what every construction of the class passes (`Block(residual=smooth)`), across modules; a
        field of a dataclass (`act: Callable = smooth`), what its constructions pass by its name too."""
        yield from self.resolve(module, ref)
        if ref[0] == "param":
            if self._following:  # (a parameter of the function making the object: what its calls pass,
                given = list(dict.fromkeys(self.passed(module, ref[1], ref[2])))  # `Averaged(model)` in
                at = 0  # `def f(model)`), in order, each once
                while at < len(given) and at < _MAX_CLOSURE:
                    value, at = given[at], at + 1
                    yield value
                    if value[0] == "P":
                        given += [found for found in self.passed(*value[1:]) if found not in given]
            else:  # asked outside a chain (most attributes nothing reaches): not looked for, not remembered
                self._refused += 1  # (but outside chains, as `_outside_chains` says)
                self._outside_chain += 1

    def passed(self, module: str, function: str, parameter: str) -> tuple[Value, ...]:
        """What the calls of the loaded modules pass to a parameter (found once: linking asks
        after the modules that call `function` by name are summarised; see `callers_wanted`)."""
        key = (module, function, parameter)
        if self._asking and self._asking[-1][0] == self._unnamed_depth:
            self._asking[-1][1].add(key)
        if key in self._passing:  # asked while it is found: what depends on it is not remembered
            self._refused += 1
            return self._passed[key]
        if key in self._passed and key not in self._passed_open:
            if not self._unnamed_depth:  # found first for an unnamed call site: a chain asks now
                self._want(key)
            return self._passed[key]
        known = self._provisional.get(key)
        if known is not None:  # found inside a cycle of refs still open (see `_resolve_cycle`)
            if known[1] < self._low:
                self._low = known[1]
            return known[0]
        self._passed.setdefault(key, ())
        if not self._unnamed_depth:
            self._wanted[(module, function)] = None
        self._passing.add(key)
        self._asking.append((self._unnamed_depth, self._needs.setdefault(key, set())))
        outer_low, self._low, start = self._low, _NO_CYCLE, len(self._open)
        owner = function.rpartition(".")[0]
        position = self._field_position(module, owner, parameter) if function.endswith(".__init__") else None
        found: list[Value] = []
        for caller, site in self._sites_named(called_as(function) or _last_name(("fn", function))):
            found += self._passed_at(caller, site, key)
            if function.endswith(".__init__") and (parameter in site.keywords or position is not None and position < len(site.args)) and any(
                    v[0] == "C" and v[1] == module and v[2] == owner for v in self._values(caller, site.callees)):
                # a dataclass's field, by name or by its place among the fields
                found += self._values(caller, site.keywords.get(parameter) or site.args[position])
        for caller, site, callee in self._unnamed_calls((module, function)):  # `a(f)` with `a` a parameter, `make()(f)`
            bound_here: list = []
            self._bind(callee, site, bound_here)
            found += [v for _, bound, refs in bound_here if bound == parameter for v in self._values(caller, refs)]
        self._passing.discard(key)
        self._asking.pop()
        values = self._passed[key] = tuple(dict.fromkeys(found))
        low = self._low
        self._low = low if low < outer_low else outer_low
        if low < start:  # it met a ref still being resolved: found again once that is done
            self._provisional[key] = (values, low)
            self._pending.append(key)
            self._passed_open.add(key)
        else:
            self._passed_open.discard(key)
        return values

    def _want(self, key: tuple[str, str, str]) -> None:
        """Want the callers of a parameter's function, and of those its values were found from."""
        todo = [key]
        while todo:
            found = todo.pop()
            if found not in self._wanted_keys:
                self._wanted_keys.add(found)
                self._wanted[found[:2]] = None
                todo += self._needs.get(found, ())

    def _constructed_with(self, module: str, init: str, parameter: str,
                          objects: Optional[frozenset] = None) -> tuple[Value, ...]:
        """What the constructions of a class (of `objects`, the classes of the object, when known) give
        a parameter of its `__init__`, when every one that gives something gives the same (which
        object a call is made on is not told apart): one site may give several (`Integrator(energy,
        FORCES[cfg.forces])`), two sites giving different ones leave it unknown. The sites are those
        calling the class (`passed`), or a subclass inheriting its `__init__` (`Euler(energy,
        forces)`), and `super().__init__(...)` in a subclass's own."""
        key = (module, init, parameter)
        cls = init.rpartition(".")[0]
        names = (called_as(init), *self._inheriting(module, cls, "__init__")) if objects is None else \
            [name.rpartition(".")[2] for _, name in sorted(objects)]
        sites = [site for name in names for site in self._sites_named(name)]
        for sub in self._subclasses(module, cls) if objects is None else sorted(objects):  # `super().__init__(*args)`
            function = self.function((sub[0], f"{sub[1]}.__init__"))
            sites += [(sub[0], site) for site in (function.call_sites if function is not None else ())
                      if any(_last_name(ref) == "__init__" for ref in site.callees)]
        groups = [found for caller, site in sites if (found := self._passed_at(caller, site, key))]
        known = {value for found in groups for value in found}
        if objects is None:  # (other calls: one more)
            groups.append([value for value in self.passed(*key) if value not in known])
        groups = [found for found in groups if found]
        return tuple(dict.fromkeys(groups[0])) if groups and all(set(found) == set(groups[0]) for found in groups) \
            else ()

    def _passed_at(self, caller: str, site, key: tuple[str, str, str]) -> list[Value]:
        """What one call site passes to the parameter `key` (module, function, name), if it calls that function."""
        return [value for callee, bound, refs in self._helpers(caller, site)
                if (callee[1], callee[2], bound) == key for value in self._values(caller, refs)]

    def _inheriting(self, module: str, cls: str, method: str) -> list[str]:
        """The names of the subclasses of a class, at any depth, that define no `method` of their own
        (nor does a class between): calling them runs the class's (a few: as `_overrides`)."""
        found, todo, seen = [], [(module, cls)], {(module, cls)}
        while todo:
            for sub in self._subclasses(*todo.pop()):
                summary = self.summary(sub[0])
                if sub not in seen and summary is not None and f"{sub[1]}.{method}" not in summary.functions:
                    if len(found) == _MAX_OVERRIDES:
                        return []  # (`nn.Module`'s hundreds: which one an object is, is not told)
                    seen.add(sub)
                    found.append(sub[1].rpartition(".")[2])
                    todo.append(sub)
        return found

    def _field_position(self, module: str, cls: str, field: str) -> Optional[int]:
        """Where a field of a dataclass is among the parameters of the `__init__` it makes (its
        fields in the order of the class body), for a class with no base (whose fields would come
        first) and no `__init__` of its own; None otherwise."""
        summary = self.summary(module)
        found = summary.classes.get(cls)
        init = f"{cls}.__init__"
        if found is None or found.bases or init in summary.functions:
            return None
        fields = [name for name, refs in found.attributes.items() if ("param", init, name) in refs]
        return fields.index(field) if field in fields else None

    def _sites_named(self, name: str) -> list[tuple[str, object]]:
        """The call sites of the loaded modules whose callee ends with `name` (indexed once a module)."""
        if self._not_indexed:
            self._not_indexed.sort(key=self._module_order.__getitem__)
            fresh, self._not_indexed = self._not_indexed, []
            for module in fresh:
                for function in self.summary(module).functions.values():
                    for site in function.call_sites:
                        for last in {_last_name(ref) for ref in site.callees}:
                            self._by_last_name[last].append((module, site))
        return self._by_last_name.get(name, []) if name else []

    def _unnamed_calls(self, callee: FunctionKey) -> list[tuple[str, object, Value]]:
        """The call sites whose callee no name tells (a parameter, what a call returns, an element)
        that may call the function `callee` (a parameter's: what is passed to it), in the order of the
        sites: (caller, site, the value called). A site's callees are found once, when remembered (as
        `resolve` remembers), and kept by callee; the others are looked at again at each question."""
        self._sites_named("")  # every loaded module indexed
        sites = self._by_last_name[""]
        pending = self._unnamed_pending
        for position in range(self._unnamed_listed, len(sites)):
            pending[position] = None
        self._unnamed_listed = len(sites)
        found = []
        outside = not self._following  # (what `_unnamed_outside_chains` holds counts)
        if self._unnamed_depth >= _MAX_UNNAMED_DEPTH:  # a parameter passed through a chain this long
            if any(position not in self._unnamed_outside_by_site or not outside for position in pending):
                self._refused += 1  # (not remembered)
        else:
            for position in list(pending):
                if position in pending:  # (else settled while another site was resolved)
                    found += self._unnamed_site(position, sites[position], callee)
        if outside:
            found += [(position, value) for position, value in self._unnamed_outside_by_callee.get(callee, ())
                      if position in pending]
            if any(position in pending for position in self._unnamed_outside_by_site):
                self._refused += 1
                self._outside_chain += 1
        found += self._unnamed_by_callee.get(callee, ())
        found.sort(key=lambda call: call[0])
        return [(*sites[position], value) for position, value in found]

    def _unnamed_site(self, position: int, caller_site: tuple, callee: FunctionKey) -> list[tuple[int, Value]]:
        """Find what an unnamed call site may call: kept by callee when remembered (then nothing is
        returned: the index answers), else the values that are `callee`."""
        caller, site = caller_site
        callees = self._unnamed_callees.get(id(site))
        if callees is not None:  # being resolved: a site asked again while it is resolved calls nothing more
            return []
        if not self._following and position in self._unnamed_outside_by_site:
            return []  # (the index of what it calls outside chains answers)
        self._unnamed_callees[id(site)] = []
        refused, outer_low, self._low, start = self._refused, self._low, _NO_CYCLE, len(self._open)
        outside = self._outside_chain
        self._unnamed_depth += 1
        try:
            callees = list(dict.fromkeys(value for called in self._values(caller, site.callees)
                                         for value in self._called(called)))
        finally:
            self._unnamed_depth -= 1
            low = self._low
            self._low = low if low < outer_low else outer_low
        if self._refused == refused and low >= start:  # (not in a cycle of refs still open)
            self._unnamed_callees[id(site)] = callees
            del self._unnamed_pending[position]
            for value in callees:
                self._unnamed_by_callee[(value[1], value[2])].append((position, value))
            return []
        del self._unnamed_callees[id(site)]
        if self._refused - refused == self._outside_chain - outside and low >= start and not self._following:
            self._unnamed_outside_by_site[position] = None
            for value in callees:
                self._unnamed_outside_by_callee[(value[1], value[2])].append((position, value))
            return []
        return [(position, value) for value in callees if value[1] == callee[0] and value[2] == callee[1]]

    def callers_wanted(self) -> list[tuple[str, str]]:
        """The functions whose callers' arguments were asked for, (module, function), but for those
        asked only to tell what an unnamed call site may call (`a(f)` with `a` a parameter): the
        files calling those are not summarised for it (on torch's sources, that alone would more
        than double the files linking reads)."""
        return list(self._wanted)

    def _bases(self, module: str, cls: str) -> list[Value]:
        summary = self.summary(module)
        info = summary.classes.get(cls) if summary else None
        if info is None:
            return []
        return [v for refs in info.bases for ref in refs for v in self.resolve(module, ref)]

    def is_tracer(self, value: Value, depth: int = 0) -> bool:
        """Whether `value` is a `torch.fx.Tracer` (or an instance of a subclass of it)."""
        if depth > _MAX_DEPTH:
            return False
        if value[0] in ("X", "XI"):
            return value[1] in entry_points.TRACER_CLASSES
        if value[0] in ("C", "I"):
            return any(self.is_tracer(base, depth + 1) for base in self._bases(value[1], value[2]))
        return False

    def runs(self, value: Value) -> tuple[Value, ...]:
        """The functions calling `value` runs: a function itself, an instance's `forward`, ...
        (remembered as `resolve` remembers)."""
        functions = self._runs.get(value)
        if functions is not None:
            return functions
        self._runs[value] = ()
        refused = self._refused
        functions = tuple(self._functions_run(value))
        if self._refused == refused:
            self._runs[value] = functions
        else:
            del self._runs[value]
        return functions

    def _functions_run(self, value: Value) -> Iterator[Value]:
        kind = value[0]
        if kind == "F":
            if self.function((value[1], value[2])) is not None:
                yield value
        elif kind == "I":
            for hooks in self._member(value[1], value[2], library.HOOKS_ATTRIBUTE, True, set()):
                yield from self.runs(hooks)  # registered on `self`: they run whenever the module does
            for module, hooks in self._hooks_given(value[1], value[2]):
                for hook in self._values(module, hooks):
                    yield from self.runs(hook)
            for method in ("forward", "__call__"):
                found = self._member(value[1], value[2], method, True, set())
                if found:
                    yield from (v for f in found for v in self.runs(f))
                    return
        elif kind == "B" and value[1][0] == "P":  # a parameter held by what outlives the call (a hook
            for passed in self.passed(*value[1][1:]):  # `hooked(hook)` registers on the model it
                yield from self.runs(passed)  # returns): what any call passes to it
        elif kind == "P" and value[2].endswith(".__init__"):  # `self.force_fn = force_fn`: what the object
            for passed in self._constructed_with(*value[1:]):  # holds is what its constructions give
                yield from self.runs(passed)
        elif kind in ("W", "B", "K"):  # calling `nn.Sequential(...)` runs each module it holds
            yield from self.runs(value[1])

    def _hooks_given(self, module: str, cls: str) -> list[tuple[str, tuple[Ref, ...]]]:
        """The hooks that functions of the loaded modules register on what a parameter holds, or on a
        submodule of it (`attach_centering(net)`, returning only the handle), for the objects of a
        class that calls pass them: (the function's module, the hooks)."""
        loaded = self.loaded()
        if self._hooked_seen < len(loaded):
            new = [(name, function, parameter, hooks) for name in loaded[self._hooked_seen:]
                   if (summary := self.summary(name)).regions  # (a hook that may enter a region: its module has one)
                   for (function, parameter), hooks in summary.hooked.items()]
            self._hooked_seen = len(loaded)
            for name, function, parameter, hooks in new:
                if not any(self._has_region((hook[1], hook[2])) for value in self._values(name, hooks)
                           for hook in self.runs(value)):
                    continue  # a hook with no region of its own: what it changes, reach need not follow
                given, seen = list(self.passed(name, function, parameter)), set()
                while given:  # through the callers' own parameters (`def setup(model): attach(model)`)
                    value = given.pop()
                    if value in seen or len(seen) > _MAX_CLOSURE:
                        continue
                    seen.add(value)
                    if value[0] == "I":
                        self._hooked.setdefault((value[1], value[2]), []).append((name, hooks))
                    elif value[0] == "P":
                        given += self.passed(*value[1:])
        return self._hooked.get((module, cls), [])

    def _has_region(self, key: FunctionKey) -> bool:
        summary = self.summary(key[0])
        return bool(summary) and any(region.function == key[1] for region in summary.regions)

    def _values(self, module: str, refs: Iterable[Ref]) -> Iterator[Value]:
        """Lazily: a caller that stops at the first value it wants resolves no more refs."""
        for ref in refs:
            yield from self.resolve(module, ref)

    def _functions(self, module: str, refs: Iterable[Ref]) -> list[Value]:
        """The functions the refs run, in order: resolved and run in the order a lazy walk would
        take, all at once (the callers use them all)."""
        found: list[Value] = []
        for ref in refs:
            for value in self.resolve(module, ref):
                found += self.runs(value)
        return found

    def _functions_along(self, module: str, refs: Iterable[Ref], path: str,
                         caller: Optional[FunctionKey] = None, objects: Optional[dict] = None) -> list[Value]:
        """The functions that calling the attribute `path` of what the refs hold runs (`path` ""
        for what they hold itself; "[]" an element of it, "[0]" or "[encoder]" the one under that
        index or key: `_parameter_element`). In `caller`, a parameter of another function that a call
        returns (`attach(Net())` with `def attach(model): return model`) is what the call passes.
        `objects`, when given, takes the classes of the objects each function runs on (`_dispatched`)."""
        values = [value for ref in refs for value in self.resolve(module, ref)]
        if not path:  # (what the transform is given itself: varied as its arguments; a method a closure
            if caller is not None:  # calls is followed from the closure, where the call tells what is varied)
                values = [passed for value in values for passed in (self._passed_here(value, caller)
                          if value[0] == "P" and (value[1], value[2]) != caller else (value,))]
            if objects is not None:  # a method of a base class runs on the subclass's object (`self.raw(...)`)
                for value in values:
                    of = frozenset({(value[1], value[2])}) if value[0] == "I" else ANY_OBJECT
                    for function in self.runs(value):
                        objects[function] = objects.get(function, frozenset()) | of
            return list(dict.fromkeys(function for value in values for function in self.runs(value)))
        for name in path.split("."):
            if name[:1] == "[":
                key = _element_key(name)
                values = [found for value in values for found in self._elements_of(value, 0, key)]
            else:
                values = [found for value in values for found in self.attribute(value, name)]
        return [function for value in values for function in self.runs(value)]

    def _bind(self, callee: Value, site, found: list) -> None:
        """Add to `found` (callee, parameter, refs) for each parameter of `callee` that a call site
        passes something to. The callee's module is loaded (`runs` found the function in it), so
        this looks at nothing new."""
        function = self.function((callee[1], callee[2]))
        if function is None:
            return
        params = function.params
        offset = 1 if callee[3] else 0
        if offset and params and site.receiver:  # `net.export(x)`: `self` is `net`
            found.append((callee, params[0], site.receiver))
        for index, refs in enumerate(site.args, offset):
            if refs and index < len(params):
                found.append((callee, params[index], refs))
            elif refs and function.varargs:  # `def f(*models)`: a tuple of them, in their places
                found.append((callee, function.varargs, tuple([("box", ref, index - len(params)) for ref in refs])))
        if site.star and callee[2].endswith(".__init__"):  # `super().__init__(*args)`: each parameter from
            start = len(site.args) + offset  # there on takes an element, in order
            for index in range(start, len(params)):
                found.append((callee, params[index], tuple([("star", ref, index - start) for ref in site.star])))
        for keyword, refs in site.keywords.items():
            if keyword in params or keyword in function.kwonly:
                found.append((callee, keyword, refs))
            elif function.varkw:  # `def f(**models)`: a dict of them, by keyword
                found.append((callee, function.varkw, tuple([("box", ref, keyword) for ref in refs])))

    # -- linking ------------------------------------------------------------------------------------

    def link(self, modules: Iterable[str]) -> None:
        """Compute the reach of every transform and tracer of `modules`, and of the helpers they call."""
        modules = sorted(module for module in modules if self.summary(module) is not None)
        for module in modules:  # in a fixed order: the first reacher of a function does not depend on the run
            for name, function in self.summary(module).functions.items():
                for source in function.sources:
                    self._seed(module, source, name)
                for site in function.call_sites:
                    if self._may_transform(module, site) and self._passes_a_lead(module, site):
                        self._seed_helper_call(module, site, name)
                    self._seed_transformed_call(module, function, site)
                    self._seed_handed(module, name, site)
        self._propagate()
        for module in modules:
            self._seed_typed_by_use(module)
        self._propagate()
        for module in modules:  # what objects a region's calls run on (`self.residual.pde_residual(z)`):
            for name, function in self.summary(module).functions.items():  # their makers' callers wanted
                for call in function.region_calls:
                    self._mode_callees(module, call.callees, (module, name))

    def modules_to_look_into(self, module: str, summary: ModuleSummary) -> set[str]:
        """The modules linking is likely to look into from `module`: those of what its transforms
        and tracers are applied to (when they may lead to a region), and of the callees of its calls
        that may transform and hand on a lead or a parameter (told from the refs alone; a guess, to
        summarise them ahead in worker processes: it changes no result)."""
        found: set[str] = set()
        for function in summary.functions.values():
            for source in function.sources:
                found.update(m for ref in source.targets if (m := self._module_of(module, ref)) and self.leads(m))
            for site in function.call_sites:
                if self._may_transform(module, site) and (self._passes_a_lead(module, site, guess=True) or any(
                        _parameter(module, ref) for refs in _arguments(site) for ref in refs)):
                    found.update(m for ref in site.callees if (m := self._module_of(module, ref)) is not None)
        return found - {module}

    def _passes_a_lead(self, module: str, site, guess: bool = False) -> bool:
        """Whether a call hands on something defined in a module that may lead to a region: told
        from the refs alone. What an object holds is a lead where the callee is named as a helper;
        with `guess` (to summarise ahead), wherever: then nothing is loaded to answer."""
        leads = self._leads
        arguments = _arguments(site) if not site.receiver or self._may_take_self(site) else \
            chain(site.args, site.keywords.values())
        held = False
        for refs in arguments:
            for ref in refs:
                found = self._module_of(module, ref)
                if found is not None and (leads is None or found in leads):
                    return True
                held = held or _attribute_read(ref) or self._calls_what_its_maker_got(module, ref)
        # what an object holds (`helper(self.net, x)`, with `self.net` set from what built it) may be
        # anything: looked into when the callee is named as a helper handing its parameter to a transform
        return held and (guess or any(_last_name(ref) in self._transforming_helpers() for ref in site.callees))

    def _calls_what_its_maker_got(self, module: str, ref: Ref) -> bool:
        """Whether a ref is a closure that calls a parameter of the function it is made in
        (`def f(p): return loss_fn(p)` in `estimate(self, model, loss_fn)`): it runs whatever that
        function is given, which may lead anywhere, as what an object holds does."""
        if ref[0] != "fn" or ".<locals>." not in ref[1]:
            return False
        function = self.function((module, ref[1]))
        return function is not None and any(
            (called := _parameter_path(module, call)) is not None and ref[1].startswith(f"{called[0][1]}.<locals>.")
            for call in function.calls)

    def _transforming_helpers(self) -> set[str]:
        """The names of the functions of the loaded modules (when first asked) that hand a parameter
        to a transform or tracer, directly, in a closure or through other helpers."""
        if self._helper_names is None:
            self._helper_names = {called_as(key[1]) for key in self.transformed_parameters()}
        return self._helper_names

    def _may_take_self(self, site) -> bool:
        """Whether the method a call names may trace or transform `self` (`Net().export(x)` with
        `def export(self, x): return torch.jit.trace(self, x)` in a base class), told by its name
        among the methods of the loaded modules that do."""
        if self._self_transforming is None:
            self._self_transforming = {called_as(key[1]) for module in self.loaded()
                                       for key, uses in self._uses_of(module).items()
                                       if "." in key[1] and any(isinstance(use, tuple) for use in uses)
                                       and (function := self.function(key[:2])) is not None
                                       and function.params[:1] == (key[2],)}  # (not a lambda)
        return any(_last_name(ref) in self._self_transforming for ref in site.callees)

    def _may_transform(self, module: str, site) -> bool:
        """Whether a call's callee may be a helper that transforms its parameter: one of a module
        that may apply a transform, or import one that may (told from the refs: nothing loaded)."""
        transforms = self._transforms
        if transforms is None:
            return True
        for ref in site.callees:
            if self._module_of(module, ref) in transforms:
                return True
        return False

    def _module_of(self, module: str, ref: Ref) -> Optional[str]:
        """The module a ref's value comes from: this one (also a registry of it: what its container
        holds, or what a function storing into it is given), or the one its import names."""
        kind = ref[0]
        while kind in _WRAPPING and kind != "kept":
            ref = ref[1]
            kind = ref[0]
        if kind != "imp":
            return module if kind in ("fn", "cls", "global", "kept") else None
        # Which module an import names depends on the module names alone, which do not change:
        # remembered, as every call site's refs are looked at; by the name alone when absolute.
        name = ref[1]
        key = (module, name) if name[:1] == "." or name.partition(".")[0] not in self.modules else name
        found = self._origins.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = self._absolute(module, name)
            while found and found not in self.modules:
                found = found.rpartition(".")[0]
            found = self._origins[key] = found or None
        return found

    def _helpers(self, module: str, site) -> tuple[tuple[Value, str, tuple[Ref, ...]], ...]:
        """(callee, parameter, refs) for each parameter of a helper a call site passes something to
        (remembered as `runs` remembers: a site is asked of once for each parameter it may pass)."""
        return self._remembered(self._bound, id(site), lambda: tuple(self._bound_at(module, site)))

    def _remembered(self, table: dict, key, find: Callable[[], tuple]) -> tuple:
        """`find()`, kept in `table` as `runs` keeps what it finds: not when something was refused,
        nor inside a cycle of refs still open."""
        found = table.get(key)
        if found is None:
            refused, outer_low, self._low, start = self._refused, self._low, _NO_CYCLE, len(self._open)
            try:
                found = find()
            finally:
                low = self._low
                self._low = low if low < outer_low else outer_low
            if self._refused == refused and low >= start:
                table[key] = found
        return found

    def _bound_at(self, module: str, site) -> list[tuple[Value, str, tuple[Ref, ...]]]:
        outer = self._permissive
        self._permissive = max(outer, 1)  # looking into helpers: modules that may transform are loaded
        try:
            callees = self._functions(module, site.callees) + self._constructors(module, site.callees)
            for ref in site.callees:  # `self.hvp(f, p, v)` in a base class runs a subclass's too
                if ref[0] == "attr" and ref[1][0] == "inst" and ref[1][1][0] == "cls":
                    callees += self._overrides(module, ref[1][1][1], ref[2])
        finally:
            self._permissive = outer
        found: list[tuple[Value, str, tuple[Ref, ...]]] = []
        for callee in callees:
            self._bind(callee, site, found)
        return found

    def _constructors(self, module: str, refs: Iterable[Ref]) -> list[Value]:
        """The `__init__` that calling a class of the project runs (`Trainer(net)` binds its `net`)."""
        found: list[Value] = []
        for ref in refs:
            for value in self.resolve(module, ref):
                if value[0] == "C":  # (a decorated `__init__` may hold what is no function of the project)
                    found += [init for init in self._member(value[1], value[2], "__init__", True, set())
                              if init[0] == "F"]
        return found

    # -- the call graph ------------------------------------------------------------------------------

    def call_graph(self) -> dict[FunctionKey, list[FunctionKey]]:
        """What every function of the loaded modules may call (`callees`), the modules it leads
        into loaded too."""
        graph: dict[FunctionKey, list[FunctionKey]] = {}
        self._following = True  # what attributes hold is looked for in every call that passes it
        self._whole_graph = True
        self._resolved.clear()
        self._called_of.clear()
        self._bound.clear()
        try:
            while len(graph) < sum(len(self.summary(module).functions) for module in self.loaded()):
                for module in sorted(self.loaded()):
                    for name in self.summary(module).functions:
                        if (module, name) not in graph:
                            graph[(module, name)] = self.callees((module, name))
        finally:
            self._following = self._whole_graph = False
            self._resolved.clear()
            self._called_of.clear()
            self._bound.clear()
        return graph

    def callees(self, key: FunctionKey) -> list[FunctionKey]:
        """The functions running `key` may call, as reach resolves them: what its calls run (calling
        a class runs its `__init__`; calling a parameter, what the calls of the loaded modules pass
        to it), and what the transforms and tracers it applies run."""
        function = self.function(key)
        if function is None:
            return []
        found: dict[FunctionKey, None] = {}
        for ref in chain(function.calls, (target for source in function.sources for target in source.targets)):
            for value in self.resolve(key[0], ref):
                for callee in self._called(value):
                    found[(callee[1], callee[2])] = None
        return list(found)

    def _called(self, value: Value) -> tuple[Value, ...]:
        """The functions calling `value` runs; for a parameter, what the calls pass to it (and to
        the parameters passed on to it), remembered as `runs` remembers."""
        if value[0] != "P":
            return self._called_through(value)
        return self._remembered(self._called_of, value, lambda: self._called_through(value))

    def _called_through(self, value: Value) -> tuple[Value, ...]:
        found: list[Value] = []
        seen: set[Value] = set()  # a parameter passed on to itself, or two that pass each other
        todo = [value]
        while todo:  # depth first, in the order of what is passed
            value = todo.pop()
            kind = value[0]
            if kind == "P":
                if value not in seen:
                    seen.add(value)
                    todo += reversed(self.passed(value[1], value[2], value[3]))
            elif kind == "C":  # making an instance runs `__new__`, then `__init__`
                for method in ("__new__", "__init__"):
                    for member in self._member(value[1], value[2], method, method == "__init__", set()):
                        found += self.runs(member)
            elif kind == "W" or kind == "B":
                todo.append(value[1])
            elif kind != "K":  # what a wrapper runs is its callee's edge, not its caller's
                found += self.runs(value)
        return tuple(dict.fromkeys(found))

    def parameter(self, key: tuple[str, str, str]) -> ParameterUse:
        """What a function does with its parameter, directly or through other helpers (found when
        first asked): the attribute paths it calls ("" for the parameter itself, "encode" for
        `model.encode(x)`), and the first reacher of each (path, mode) of the transforms it hands
        them to."""
        if key in self._parameters:
            return self._parameters[key]
        self._parameters[key] = ParameterUse(frozenset(), {})  # passed back to itself: what is known so far
        called: set[str] = set()
        sourced: dict[tuple[str, str], Reacher] = {}
        given: set[tuple[str, str]] = set()
        for use in self._uses_of(key[0]).get(key, ()):
            if isinstance(use, _Through):  # passed on in a closure a transform runs: what is called runs under it
                for callee, name, refs in self._helpers(key[0], use.site):
                    if self._hands_on(key, refs):
                        for path in self.parameter((callee[1], callee[2], name)).called:
                            given.add((path, use.mode))  # (no edge of the closure reaches what the helper calls)
                            if _rather(sourced.get((path, use.mode)), use.reacher):
                                sourced[(path, use.mode)] = use.reacher
            elif isinstance(use, str):  # the path called
                called.add(use)
            elif isinstance(use, tuple):  # (mode, reacher, path, whether in a closure)
                if _rather(sourced.get((use[2], use[0])), use[1]):
                    sourced[(use[2], use[0])] = use[1]
                if not use[3]:
                    given.add((use[2], use[0]))
            elif called or self._may_transform(key[0], use) or self._permissive == 2:  # passed to a helper
                for callee, name, refs in self._helpers(key[0], use):
                    if self._hands_on(key, refs):
                        more = self.parameter((callee[1], callee[2], name))
                        called |= more.called
                        given |= more.given
                        for path_mode, reacher in more.sourced.items():
                            if _rather(sourced.get(path_mode), reacher):
                                sourced[path_mode] = reacher
        found = self._parameters[key] = ParameterUse(frozenset(called), sourced, frozenset(given))
        return found

    def _hands_on(self, key: tuple[str, str, str], refs: tuple[Ref, ...]) -> bool:
        """Whether an argument's refs stand for the parameter `key`: the parameter, or what a call
        in its function returns when that call hands back the parameter it is given (`unwrap(model)`
        with `def unwrap(m): ... return m`, `prepare(model)` returning `m.eval()`)."""
        if _passes(key, refs):
            return True
        calls = [ref[1] for ref in refs if ref[0] == "call"]
        function = self.function((key[0], key[1])) if calls else None
        for site in function.call_sites if function else ():
            if not any(callee in calls for callee in site.callees) or not any(_passes(key, refs) for refs in site.args):
                continue
            bound: list = []
            for callee in self._functions(key[0], site.callees):
                self._bind(callee, site, bound)
            for callee, name, passed in bound:  # (what its returns spell: the parameter itself, or `m.eval()`)
                summary = self.summary(callee[1])
                if _passes(key, passed) and ("param", callee[2], name) in summary.returns.get(callee[2], ()):
                    return True
        return False

    def transformed_parameters(self) -> list[tuple[str, str, str]]:
        """The parameters that the functions of the loaded modules hand to a transform or tracer,
        directly, in a closure or through other helpers: what a call passes to them is reached. A
        parameter is looked into only where a call names a function found so far (for speed)."""
        uses_of = {key: uses for module in self.loaded() for key, uses in self._uses_of(module).items()
                   if called_as(key[1])}
        found = {key for key, uses in uses_of.items() if any(isinstance(use, tuple) for use in uses)}
        passing: dict[str, set] = defaultdict(set)  # a callee's name -> the parameters passed to it
        for key, uses in uses_of.items():
            for use in uses:
                if key not in found and not isinstance(use, (str, tuple)):
                    for ref in use.callees:
                        passing[_last_name(ref)].add(key)
        names, seen = [called_as(key[1]) for key in found], set()
        while names:
            name = names.pop()
            if name not in seen:
                seen.add(name)
                for key in passing.get(name, ()):
                    if key not in found and self.parameter(key).sourced:
                        found.add(key)
                        names.append(called_as(key[1]))
        return [key for key in uses_of if key in found]

    def helpers(self) -> list[tuple[tuple[str, str, str], tuple[bool, dict[str, Reacher]]]]:
        """The parameters of helpers looked into so far, with what their functions do with them."""
        return list(self._parameters.items())

    def _uses_of(self, module: str) -> dict[tuple, list]:
        """For each parameter of the module's functions: "called", (mode, reacher) for a transform
        applied to it, and the call sites that pass it on."""
        if module not in self._uses:
            uses: dict[tuple, list] = defaultdict(list)
            summary = self.summary(module)
            for function in summary.functions.values() if summary else ():
                for ref in function.calls:
                    if (called := _parameter_path(module, ref)) is not None:
                        uses[called[0]].append(called[1])
                for source in function.sources:
                    for ref in source.targets:
                        found = _parameter_element(module, ref)  # `jvp(model)`, `for m in models: jvp(m)`
                        if found is not None:
                            uses[found[0]] += [(mode, _reacher(mode, module, source), found[1], False)
                                               for mode in source.modes]
                handed: dict[Ref, dict] = {}  # what a call passing parameters returns may be one of them
                for site in function.call_sites:
                    passed = {}  # each parameter the site passes, once
                    for refs in _arguments(site):
                        for ref in refs:
                            if ref[0] in _PASSED and (parameter := _parameter(module, ref)) is not None:
                                passed[parameter] = None
                            elif ref[0] == "call" and ref[1] in handed:  # (`Project._hands_on` decides)
                                passed.update(handed[ref[1]])
                    for parameter in passed:
                        uses[parameter].append(site)
                    for callee in site.callees if passed else ():
                        handed.setdefault(callee, {}).update(passed)
            for name, function in summary.functions.items() if summary else ():
                for source in function.sources:  # `jvp(lambda z: model(z), ...)` runs the parameter `model`
                    reachers = [(mode, _reacher(mode, module, source)) for mode in source.modes]
                    for (parameter, path), unreached in _closure_parameters(summary, module, name, source.targets).items():
                        uses[parameter] += [(mode, reacher, path, not unreached) for mode, reacher in reachers]
                    for parameter, site in _closure_sites(summary, module, source.targets):
                        uses[parameter] += [_Through(site, mode, reacher) for mode, reacher in reachers]
            self._uses[module] = uses
        return self._uses[module]

    def _reach(self, function: Value, mode: str, reacher: Reacher, varied: frozenset[str] = EVERY,
               receivers: frozenset = ANY_OBJECT, caller: Optional[FunctionKey] = None, aux: bool = False) -> None:
        """`function` runs under a transform or tracer in `mode`, on objects of the classes
        `receivers` when it is a method (the union over the chains reaching it: followed again when
        either grows). Called by `caller` (an edge, along which `varied_params` carries what is
        varied), or given by a transform with its parameters `varied` (and `has_aux=True`: `aux`)."""
        key = (function[1], function[2])
        if caller is None:  # given to a transform (or a helper's): with `has_aux=True` each time?
            self._aux[(key, mode)] = aux and self._aux.get((key, mode), True)
        better = _rather(self.reached[key].get(mode), reacher)  # at most twice a mode: export, then not
        if better:
            self.reached[key][mode] = reacher
        if caller is not None:
            self._edges[(caller, mode)].add(key)
        else:
            known = self._varied.get((key, mode))
            self._varied[(key, mode)] = varied if known is None else known | varied
        known = self._receivers.get((key, mode))
        if known is None or not receivers <= known:
            self._receivers[(key, mode)] = receivers if known is None else known | receivers
        elif not better:
            return
        self._queue.append((key, mode))

    def _seed_handed(self, module: str, function: str, site) -> None:
        for where, applier, source, at in self.handed_transforms(module, function, site):
            self._seed(where, source, applier, (at, (module, site.span, site.text), (module, function)))

    def handed_transforms(self, module: str, function: str, site) -> list[tuple[str, str, Source, str]]:
        """`logdet(jacfwd, flow.transform, x)` with `def logdet(jac_fn, f, x): return jac_fn(f)(x)`:
        a call hands a transform or tracer to a parameter that the function called calls (or a
        function nested in it, or one it hands the parameter on to): a source there, each as
        (module, function, source, the module the source is written in), spelled where it can be in
        the caller's terms (`flow.transform`)."""
        return [(*place, inner[0]) for entry, inner, call, levels in self._handed(module, site)
                for place in _in_callers_terms((module, function), _handed_source(entry, call), levels)]

    def _handed_applied(self, module: str, site) -> list[tuple[str, Applied, FunctionKey]]:
        """The transforms a call hands on (`handed_transforms`), as applied where the caller's grad
        mode holds: (module, Applied, the function applying it)."""
        found = []
        for entry, inner, call, _ in self._handed(module, site):
            function = self.function(inner)
            if not entry_points.differentiates(entry) or any(region_call.span == call.span
                                                             for region_call in function.region_calls):
                continue  # a tracer, or in a region of the function's own: that region's mode
            enabled = any(ref in function.guarded for ref in call.callees)
            found.append((inner[0], Applied(entry.name, entry_points.is_functional(entry), call.span, call.text,
                                            enabled), inner))
        return found

    def _handed(self, module: str, site) -> Iterator[tuple[entry_points.EntryPoint, FunctionKey, CallSite, list]]:
        """For each transform a call hands to a parameter that is called: the entry point, the
        function calling it, that call, and the levels it was handed through (`_parameter_calls`)."""
        if not _hands_a_transform(site):
            return  # (nearly every call)
        bound = self._helpers(module, site)
        for callee, name, refs in bound:
            key = (callee[1], callee[2])
            given = {parameter: passed for other, parameter, passed in bound if other == callee}
            for entry in _entries_in(refs):
                for inner, call, levels in self._parameter_calls(key, name, [(key, given)]):
                    yield entry, inner, call, levels

    def _parameter_calls(self, key: FunctionKey, name: str, levels: list) -> list[tuple[FunctionKey, CallSite, list]]:
        """The calls of what the parameter `name` of `key` holds, in it or a function nested in it,
        and where it is handed on to a parameter of another function, there; each with the function
        it is in and the levels of calls it was handed through: (function, what the call binds to
        each of its parameters). A constructor's parameter that it stores (`self.jac_fn = jac_fn`) is
        called where a method of the class calls that attribute (`self.jac_fn(f)`)."""
        parameter, found = ("param", key[1], name), []
        summary = self.summary(key[0])
        owner, _, method = key[1].rpartition(".")
        held = summary.classes.get(owner) if method == "__init__" else None
        stored = {("attr", ("inst", ("cls", owner)), attribute)
                  for attribute, refs in (held.attributes.items() if held else ()) if parameter in refs}
        for inner, function in summary.functions.items():
            if inner != key[1] and not inner.startswith(f"{owner if stored else key[1]}."):
                continue
            for site in function.call_sites:
                if parameter in site.callees or not stored.isdisjoint(site.callees):
                    found.append(((key[0], inner), site, levels))
                elif len(levels) <= _MAX_HANDED and any(parameter in refs for refs in _arguments(site)):
                    bound = self._helpers(key[0], site)
                    for callee, handed, refs in bound:
                        if parameter in refs:
                            given = {p: passed for other, p, passed in bound if other == callee}
                            level = ((callee[1], callee[2]), given)
                            found += self._parameter_calls(level[0], handed, [*levels, level])
        return found

    def _seed(self, module: str, source, function: str, handed: Optional[tuple] = None) -> None:
        """What a transform or tracer is given runs under it: `jacfwd(loss)`, `jvp(m, ...)` for each
        `m` of what the calls pass (`for m in models:`), looked for as along a chain. `handed`, for a
        transform a call handed on (`handed_transforms`): the module of the source, that call, and
        its function, whose calls tell what a parameter of another function takes (the object the
        call built: `Estimator(jacfwd).trace(f, x)`)."""
        following, self._following = self._following, True
        try:
            self._seed_source(module, source, function, handed)
        finally:
            self._following = following

    def _seed_source(self, module: str, source, function: str, handed: Optional[tuple]) -> None:
        if source.receivers and not any(self.is_tracer(v) for v in self._values(module, source.receivers)):
            return
        # `f` or `partial(f, w)` as written: `g` bound to `partial(f, w)` shifts the arguments
        partial = source.selection is not None and source.selection[0]
        direct = all(v[0] == "W" and v[1][0] == "F" if partial else v[0] == "F"
                     for v in self._values(module, source.targets))
        reachers = {mode: _reacher(mode, module, source) for mode in source.modes} if handed is None else \
            {mode: replace(_reacher(mode, handed[0], source), via=handed[1]) for mode in source.modes}
        own = self._method_class((module, function))
        objects = ANY_OBJECT
        for ref in source.targets:  # `jacfwd(self.energy)`
            if own is not None and ref[0] == "attr" and ref[1] == ("inst", ("cls", own)):
                objects = self._objects_calling(module, own, function.rpartition(".")[2], ref[2])
        dispatched = self._dispatched(module, source.targets, handed[2] if handed else (module, function), objects)
        for run, receivers in dispatched:
            called = self.function((run[1], run[2]))
            constant = constant_params(source.selection if direct else None, called, run[3])
            params = called.params[1:] if run[3] else called.params
            # what the transform is given is varied, not the object of a method (its parameters and
            # buffers vary only through `functional_call`, whose calls vary everything), nor what the
            # function captures
            varied = frozenset(name for name in (*params, *called.kwonly) if name not in constant)
            for mode in source.modes:  # (a tracer records the object's parameters, which training differentiates)
                given = varied | frozenset(called.params[:1]) if mode == DROPS and run[3] else varied
                self._reach(run, mode, reachers[mode], given, receivers, aux=source.aux and direct)
        self._seed_bound(module, function, {(run[1], run[2]) for run, _ in dispatched}, reachers)

    def _seed_bound(self, module: str, function: str, given: set[FunctionKey], reachers: dict[str, Reacher]) -> None:
        """`jvp(partial(loss, model=net), ...)`, or `loss_fn = partial(loss, net)` then `jvp(loss_fn,
        ...)` (or `probe(partial(loss, net), ...)`, a helper transforming it) in the same function: what
        `partial` binds to a function the transform is given is what that function calls (`model(x)`):
        reached as the call a helper is given (`_follow`)."""
        owner = self.function((module, function))
        for site in owner.call_sites if owner else ():
            if not site.bound or not any((f[1], f[2]) in given for f in self._functions(module, site.callees)):
                continue
            outer = self._permissive
            self._permissive = 2  # following a chain: any module may be loaded
            try:
                helpers = [((callee[1], callee[2]), use, refs) for callee, parameter, refs in self._helpers(module, site)
                           if (use := self.parameter((callee[1], callee[2], parameter))).called]
            finally:
                self._permissive = outer
            for mode, reacher in reachers.items():
                reacher = replace(reacher, via=(module, site.span, site.text))
                for bound, use, refs in helpers:  # (called by the function bound: varied as its calls pass)
                    caller = bound if bound in given and mode in self.reached.get(bound, {}) else None
                    for path in use.called:
                        for passed in self._functions_along(module, refs, path):
                            self._reach(passed, mode, reacher, caller=caller)

    def _seed_transformed_call(self, module: str, function: Function, site) -> None:
        """`jacfwd(loss)(x, Net())`: the function a transform is given is called here, and what it
        calls of what this call passes (`model(x)` in `def loss(x, model)`) runs under the transform,
        as the calls of `loss` (an edge from it, so that what is varied is carried along)."""
        wrapped = {ref[1] for ref in site.callees if ref[0] == "wrap"}
        sources = [source for source in function.sources if wrapped.intersection(source.targets)
                   and (source.span.row, source.span.col) == (site.span.row, site.span.col)]
        if not sources or not self._passes_a_lead(module, site):
            return
        following, self._following = self._following, True
        try:
            for callee, name, refs in self._helpers(module, site):
                for path in self.parameter((callee[1], callee[2], name)).called:
                    for passed in self._functions_along(module, refs, path):
                        for source in sources:
                            for mode in source.modes:
                                self._reach(passed, mode, _reacher(mode, module, source), caller=(callee[1], callee[2]))
        finally:
            self._following = following

    def _objects_calling(self, module: str, cls: str, method: str, name: str) -> frozenset:
        """For a method of `cls` giving a transform its own method `name`, the classes of the objects
        it runs on (ANY_OBJECT where no class of its family defines that method): those the calls
        of the method are made on (`LennardJones().force(x)`, a subclass's object), or `cls` and
        every subclass where a call's object is not known (`self.force(x)`, a parameter)."""
        family, todo = {(module, cls)}, [(module, cls)]
        while todo:
            for sub in self._subclasses(*todo.pop()):
                if sub not in family:
                    family.add(sub)
                    todo.append(sub)
        if not any(name in self.summary(c[0]).classes[c[1]].methods for c in family):
            return ANY_OBJECT
        found = set()
        for caller, site in self._sites_named(method):
            if not site.receiver:
                continue
            values = self._values(caller, site.receiver)
            if not values or any(ref[0] == "inst" for ref in site.receiver):
                return frozenset(family)
            found.update(c for value in values if value[0] == "I" and (c := (value[1], value[2])) in family)
        return frozenset(found or family)

    def _seed_helper_call(self, module: str, site, caller: str) -> None:
        """`hvp(energy, x, v)` with `def hvp(f, x, v): return jvp(grad(f), ...)` reaches `energy`
        (for a call that may transform and passes a lead)."""
        for callee, name, refs in self._helpers(module, site):
            use = self.parameter((callee[1], callee[2], name))
            for (path, mode), inner in use.sourced.items():
                reacher = replace(inner, via=(module, site.span, site.text))
                following, self._following = self._following, True  # what it hands on is on a chain
                try:
                    objects: dict[Value, frozenset] = {}
                    functions = self._functions_along(module, refs, path, (module, caller), objects)
                finally:
                    self._following = following
                for function in functions:  # what the helper's transform is given: its arguments, and its
                    called = self.function((function[1], function[2]))  # object only through `functional_call`
                    params = called.params[1:] if function[3] and mode != DROPS \
                        and not self.differentiates_state(function[1]) else called.params
                    # called in a closure the transform runs: varied as that call passes (the closure's edge)
                    varied = frozenset((*params, *called.kwonly)) if (path, mode) in use.given else frozenset()
                    self._reach(function, mode, reacher, varied, objects.get(function, ANY_OBJECT))
                if functions and not path:  # `probe(partial(loss, net), ...)`: what `partial` binds
                    self._seed_bound(module, caller, {(f[1], f[2]) for f in functions}, {mode: inner})

    def _seed_typed_by_use(self, module: str) -> None:
        """A helper that nothing in the loaded modules calls (`def flow_jacobian(model, z): return
        jacfwd(model.solve)(z)`, called from scripts outside the project) hands a transform an
        attribute of a parameter no call tells of: the parameter is taken to hold the classes of the
        loaded modules that have every attribute the function asks of it, when it asks at least one
        that only classes of the project define (typing by use, in a closed world). Seeded after
        every other chain, so that a chain the project spells is the one a finding names."""
        for key, uses in self._uses_of(module).items():
            if not any(isinstance(use, tuple) for use in uses):
                continue
            use = self.parameter(key)
            sourced = [(path, mode, reacher) for (path, mode), reacher in use.sourced.items() if path[:1] != "["]
            classes, asked = self._typed_by_use(key) if any(path for path, _, _ in sourced) else ([], set())
            shown = ", ".join(f"`.{name}`" for name in sorted(asked))
            for cls_module, cls in classes:
                for path, mode, inner in sourced:
                    note = (inner.module, inner.span, f"nothing calls `{display_name(key[1])}`: `{key[2]}` is taken "
                                                      f"to be a `{cls}`, which has {shown}")
                    objects: dict[Value, frozenset] = {}
                    found = self._functions_along(cls_module, (("inst", ("cls", cls)),), path, None, objects)
                    for callee in found:
                        called = self.function((callee[1], callee[2]))
                        params = called.params[1:] if callee[3] else called.params
                        varied = frozenset((*params, *called.kwonly)) if (path, mode) in use.given else EVERY
                        self._reach(callee, mode, replace(inner, assumed=note), varied,
                                    objects.get(callee, ANY_OBJECT))

    def _typed_by_use(self, key: tuple[str, str, str]) -> tuple[list[tuple[str, str]], set[str]]:
        """The classes a parameter is taken to hold when no call of the loaded modules runs its
        function (`_seed_typed_by_use`), and the attributes asked of it."""
        found = self._typed.get(key)
        if found is None:
            name = called_as(key[1])
            if not name or self._called_anywhere(key[:2], name):
                found = [], set()
            else:
                use = self.parameter(key)
                asked = {path.split(".")[0] for path in chain(use.called, (path for path, _ in use.sourced))} - {""}
                found = self._classes_having(asked), asked
            self._typed[key] = found
        return found

    def _called_anywhere(self, key: FunctionKey, name: str) -> bool:
        """Whether a call of the loaded modules may run the function `key` (`m.loss(...)` with `m`
        a module given at run time tells nothing)."""
        return any(function[1:3] == key for module, site in self._sites_named(name)
                   for function in self._functions(module, site.callees))

    def _classes_having(self, names: set[str]) -> list[tuple[str, str]]:
        """The classes of the loaded modules whose MRO in the project defines each of `names` that
        some class of the project defines, and each of the others too unless a base outside the
        project may give it (`.parameters()` of an `nn.Module`); none when no name is the project's,
        or when more than a few classes have them all."""
        defining, by_name = self._classes_defining()
        for name in names - by_name.keys():
            by_name[name] = [cls for cls, defined in defining.items() if name in defined]
        known = {name for name in names if by_name[name]}
        if not known:
            return []
        found = [cls for cls in by_name[min(known, key=lambda name: len(by_name[name]))]
                 if known <= defining[cls] and (names <= defining[cls] or self._extends_outside(self.mro(*cls)))]
        return found if len(found) <= _MAX_TYPED_BY_USE else []

    def _classes_defining(self) -> tuple[dict[tuple[str, str], frozenset[str]], dict[str, list[tuple[str, str]]]]:
        """What each class of the loaded modules defines (methods and attributes), itself or through
        its bases in the project, and the classes defining each name asked for so far; found again
        once more modules are loaded."""
        count, defining, by_name = self._having
        if count != len(self.loaded()):
            count = len(self.loaded())
            own = {(module, cls): frozenset((*info.methods, *info.attributes))
                   for module in self.loaded() for cls, info in self.summary(module).classes.items()}
            defining = {cls: frozenset().union(*(own[base] for base in self.mro(*cls) if base in own)) for cls in own}
            by_name = {}
            self._having = count, defining, by_name
        return defining, by_name

    def _extends_outside(self, order: list[tuple[str, str]]) -> bool:
        """Whether a class of an MRO has a base outside the project (`nn.Module`)."""
        for module, cls in order:
            summary = self.summary(module)
            info = summary.classes.get(cls) if summary else None
            if info is not None and any(value[0] == "X" for refs in info.bases for ref in refs
                                        for value in self.resolve(module, ref)):
                return True
        return False

    def _propagate(self) -> None:
        self._following = True  # what attributes hold is looked for only along a chain
        try:
            self._follow()
        finally:
            self._following = False

    def _follow(self) -> None:
        while self._queue:
            key, mode = self._queue.popleft()
            module, name = key
            function = self.function(key)
            reacher = self.reached[key][mode]
            onward = reacher if reacher.through else replace(reacher, through=key)
            for callee, receivers in self._dispatched(module, function.calls, key, self._receivers[(key, mode)]):
                self._reach(callee, mode, onward, receivers=receivers, caller=key)
            for source in function.sources:  # an inner transform runs its function under this one too,
                for callee in self._functions(module, source.targets):  # given what the call of what it
                    self._reach(callee, mode, onward, caller=key)  # makes passes (`grad(f)(p, x)`)
            for site in function.call_sites:  # a helper that calls (or transforms) what it is given
                if not self._passes_a_lead(module, site):
                    continue
                outer = self._permissive
                self._permissive = 2  # following a chain: any module may be loaded
                try:
                    helpers = [((callee[1], callee[2]), use, refs)
                               for callee, parameter, refs in self._helpers(module, site)
                               if (use := self.parameter((callee[1], callee[2], parameter))).called or use.sourced]
                finally:
                    self._permissive = outer
                for helper, use, refs in helpers:
                    # what a helper this function calls calls (`m(x)` in `apply(m, x)`) is varied as the
                    # helper's calls pass it (an edge); what it transforms is seeded by `_seed_helper_call`
                    caller = helper if helper in self._edges.get((key, mode), ()) else None
                    for path in use.called | {path for path, _ in use.sourced}:
                        via = caller if path in use.called else None
                        for passed in self._functions_along(module, refs, path):
                            self._reach(passed, mode, onward, caller=via)

    def _dispatched(self, module: str, refs: Iterable[Ref], caller: Optional[FunctionKey] = None,
                    receivers: frozenset = ANY_OBJECT) -> list[tuple[Value, frozenset]]:
        """The functions calling `refs` runs (`_functions`), each with the classes of the object it
        runs on when it is a method (ANY_OBJECT when unknown). A method of `self` in a method
        `caller` runs on the objects `caller` runs on: `self.energy(q)` in `Base.forward` runs the
        `energy` of each class whose objects reach `forward` (a subclass's override). A parameter
        of another function (a callee returning it, `def prepare(m): return m.eval()`) or of an
        enclosing one (`net` in `def make_energy(net): def energy(q): return net(q)`) takes what
        the calls of that function pass; what `caller`'s own parameters take, the call reaching
        it tells (`parameter`)."""
        own = self._method_class(caller) if caller is not None else None
        known = [cls for cls in receivers if cls is not None]
        found: list[tuple[Value, frozenset]] = []
        for ref in refs:
            on_self = own is not None and ref[0] == "attr" and ref[1] == ("inst", ("cls", own))
            if on_self and known:  # dispatched on the object's class (a submodule it holds, on the submodule's)
                for cls in known:
                    for member in self._member(*cls, ref[2], True, set()):
                        held = _held_object(member)
                        of = frozenset({(held[1], held[2])}) if held[0] == "I" else frozenset({cls})
                        found += [(function, of) for function in self.runs(member)]
                if None not in receivers:
                    continue
            if known and ref[0] == "attr" and ref[1] == ("super", ("cls", own)):  # `super().forward(x)` in a
                for cls in known:  # mixin: the class after this one in the MRO of the object's class
                    for member in self._after_in_mro(cls, (module, own), ref[2]):
                        found += [(function, frozenset({cls})) for function in self.runs(member)]
                if None not in receivers:
                    continue
            objects = ANY_OBJECT
            if on_self or own is not None and ref[0] == "attr" and ref[1][0] == "super":
                objects = receivers  # (`super().forward(x)` runs the base's method on the same object)
            elif ref[0] == "attr":
                bases = self.resolve(module, ref[1])
                if bases and all(base[0] == "I" for base in bases):
                    objects = frozenset((base[1], base[2]) for base in bases)
            values = self.resolve(module, ref)
            if caller is not None and any(value[0] == "P" for value in values):
                values = [passed for value in values for passed in (
                    self._passed_here(value, caller) if value[0] == "P" and (value[1], value[2]) != caller
                    else (value,))]
            if caller is not None and ref[0] == "attr":  # `prepare(net).encode`, `prepare` returning its `m`
                values = [*values, *(member for base in self.resolve(module, ref[1])
                                     if base[0] == "P" and (base[1], base[2]) != caller
                                     for passed in self._passed_here(base, caller)
                                     for member in self.attribute(passed, ref[2]))]
            for value in values:
                of = frozenset({(value[1], value[2])}) if value[0] == "I" else objects
                found += [(function, of) for function in self.runs(value)]
        return found

    def _passed_here(self, parameter: Value, caller: FunctionKey) -> list[Value]:
        """What a parameter of another function takes where `caller` holds what that function returns
        (`model = prepare(Net())` with `def prepare(m): return m.eval()`): what the calls in
        `caller` pass to it, else what every call passes (a closure of a factory, made elsewhere)."""
        function = self.function(caller)
        found: list[Value] = []
        for site in function.call_sites if function else ():
            bound: list = []
            for callee in self._functions(caller[0], site.callees):
                if callee[1] == parameter[1] and callee[2] == parameter[2]:
                    self._bind(callee, site, bound)
            found += [value for _, name, refs in bound if name == parameter[3] for value in self._values(caller[0], refs)]
        if found:
            return found
        # a closure of a factory, made elsewhere; a decorator's wrapper runs the function it decorates
        # (`_decorated` follows into it): not what the decorator is given elsewhere
        decorated = self._decorated_by(parameter) if (parameter[1], parameter[2]) == _enclosing(caller) else ()
        return [value for value in self._passed_on(parameter, set()) if value not in decorated]

    def _decorated_by(self, parameter: Value) -> frozenset[Value]:
        """The functions a decorator is given where it decorates a `def` (`@dec`, `@make(...)`), by its parameter."""
        key = (parameter[1], parameter[2])
        sites = [(caller, site, None) for caller, site in self._sites_named(called_as(parameter[2]))]
        found: list[Value] = []
        for caller, site, callee in sites + self._unnamed_calls(key):
            if site.decoration:
                bound: list = []
                for function in [callee] if callee else self._functions(caller, site.callees):
                    if (function[1], function[2]) == key:
                        self._bind(function, site, bound)
                found += [v for _, name, refs in bound if name == parameter[3] for v in self._values(caller, refs)]
        return frozenset(found)

    def _method_class(self, key: FunctionKey) -> Optional[str]:
        """The class `key` is a method of (its name in the module), or None."""
        owner, _, method = key[1].rpartition(".")
        summary = self.summary(key[0])
        info = summary.classes.get(owner) if summary and owner else None
        return owner if info is not None and info.methods.get(method) == key[1] else None

    def _passed_varied(self, key: FunctionKey, function: Function, varied: frozenset[str]) -> dict:
        """For each function `key` calls, the parameters its calls vary, given those of `key` that
        are varied (`analysis/varied.py`); a callee missing here (or all, where what the module's
        calls pass cannot be read) may have any varied."""
        module = key[0]
        found: dict[FunctionKey, frozenset[str]] = {}
        summary = self.summary(module)
        for passing in self._passes_of(module).get(key[1], ()):
            mapped_callees = [pair for value in self._values(module, passing.callees)
                              for pair in self._runs_mapped_passed(value)]
            if not mapped_callees:  # `train(net).loss(p, x)`, `train` returning its `m`: as linking follows it
                mapped_callees = [(callee, all(ref[0] == "attr" for ref in passing.callees))
                                  for callee, _ in self._dispatched(module, passing.callees, key)]
            for callee, mapped in mapped_callees:
                called = self.function((callee[1], callee[2]))
                given = _varied_by(passing, called, callee[3], varied) if mapped and called else EVERY
                if callee[2] in summary.lambdas or "<locals>" in callee[2]:
                    given |= _CAPTURED  # a closure: what it captures may be varied
                found[(callee[1], callee[2])] = found.get((callee[1], callee[2]), frozenset()) | given
        return found

    def _passes_of(self, module: str) -> dict:
        """What each call of the module's functions passes (`Function.passes`), by function; {}
        when it cannot be asked (each callee then may have any parameter varied)."""
        found = self._passes.get(module)
        if found is None:
            entry = self.modules.get(module)
            found = self._passes[module] = self._read_passes(entry) if entry and self._read_passes else {}
        return found

    def _runs_mapped_passed(self, value: Value) -> Iterator[tuple[Value, bool]]:
        """`_runs_mapped`, and for a parameter called (`m(x)` in `def apply(m, x)`), of what the calls
        pass to it: the object it is given is its receiver, whatever call gave it."""
        if value[0] != "P":
            yield from self._runs_mapped(value)
            return
        for passed in self._passed_on(value, set()):
            yield from self._runs_mapped(passed)

    def _runs_mapped(self, value: Value) -> Iterator[tuple[Value, bool]]:
        """The functions calling `value` runs (`runs`), and whether they take the call's arguments
        as it passes them: not a forward hook, nor what a decorator's wrapper runs."""
        if value[0] in ("W", "B"):  # `DataParallel(net)(x)`, `nn.Sequential(a, b)(x)`: each takes x (or what follows)
            yield from self._runs_mapped(value[1])
            return
        hooks = () if value[0] != "I" else {hook for hooks in self._member(value[1], value[2], library.HOOKS_ATTRIBUTE,
                                                                           True, set()) for hook in self.runs(hooks)}
        for function in self.runs(value):
            yield function, value[0] in ("F", "I") and function not in hooks and function not in self._hook_functions()

    def _hook_functions(self) -> set[Value]:
        """The functions the loaded modules register as hooks (asked once linking is done): what
        running a module gives them is not what its call passes."""
        if self._hooks is None:
            self._hooks = {function for module in self.loaded()
                           for value in self._values(module, self.summary(module).hooks) for function in self.runs(value)}
        return self._hooks

    # -- grad mode carried across calls ----------------------------------------------------------------

    def run_in_regions(self, module: str) -> list[RunInRegion]:
        """The transforms that calls in the regions of `module` run in the region's mode, through any
        chain of calls in any module (a callee that turns grad mode back on keeps inference mode)."""
        summary = self.summary(module)
        found: list[RunInRegion] = []
        for name, function in summary.functions.items() if summary else ():
            for call in function.region_calls:
                seen = set()
                receivers: dict = {}  # (in a method: `self.step(x)` runs a subclass's too)
                for callee in self._mode_callees(module, call.callees, (module, name), receivers=receivers):
                    for where, applied, chain in self._applied_in_mode((callee[1], callee[2]), call.inference,
                                                                       objects=receivers.get(callee)):
                        if (where, applied.span) not in seen:
                            seen.add((where, applied.span))
                            found.append(RunInRegion(call, where, applied, chain))
                for site in function.call_sites:  # `logdet(jacfwd, f, x)`: the transform it hands on
                    if site.span == call.span:
                        found += [RunInRegion(call, where, applied, (inner,))
                                  for where, applied, inner in self._handed_applied(module, site)
                                  if (call.inference or not applied.grad_enabled) and (where, applied.span) not in seen]
        return found

    def _mode_callees(self, module: str, refs: Iterable[Ref], caller: Optional[FunctionKey] = None,
                      objects: Optional[frozenset] = None, receivers: Optional[dict] = None) -> list[Value]:
        """The functions refs run (in `caller`), looking only where a chain may lead to a transform. A
        decorator's wrapper calling what the decorator was given runs the function it decorates, which
        its caller runs already (`_decorated`): not every function the decorator decorates. A method
        called on `self` runs the one the object's class has (of `objects`, the classes `caller` runs
        on, when known; else any subclass's); `receivers`, when given, takes the classes the functions
        found run on, where a call names them (`PlainEstimator().estimate(f, x)`)."""
        toward = self._toward_transforms
        refs = list(refs)
        named = [ref for ref in refs  # (what a call returns may be what another module stored: `get_residual(name)`)
                 if (m := self._module_of(module, ref)) is not None and (toward is None or m in toward or ref[0] == "call")]
        on_parameters = [ref for ref in refs if (called := _parameter_path(module, ref)) is not None  # `learner.adapt`
                         and (called[1] and called[1].rpartition(".")[2] in self.names_applying()
                              or not called[1] and self._given_what_applies(called[0]))]  # `field(z)`, given
        on_held = [ref for ref in refs if ref[0] == "attr" and ref not in on_parameters
                   and ref[2] in self.names_applying()]  # `self.residual.pde_residual(z)`, the object given
        if not named and not on_parameters and not on_held:
            return []
        outer = self._permissive
        self._permissive = 2
        try:
            found = []
            own = self._method_class(caller) if caller is not None and named else None
            for ref in named:
                if own is not None and ref[0] == "attr" and ref[1] == ("inst", ("cls", own)):  # `self.hvp(f, p, v)`
                    held = [m for cls in sorted(objects) for m in self._member(*cls, ref[2], True, set())] \
                        if objects is not None else [*self._functions(module, [ref]), *self._overrides(module, own, ref[2])]
                    functions = [function for member in held for function in (
                        self.runs(member) if objects is None or member[0] != "P" or not member[2].endswith(".__init__")
                        else (f for given in self._constructed_with(*member[1:], objects) for f in self.runs(given)))]
                    of = objects
                else:
                    functions = self._functions(module, [ref])
                    bases = self.resolve(module, ref[1]) if ref[0] == "attr" else ()
                    of = frozenset((base[1], base[2]) for base in bases) \
                        if bases and all(base[0] == "I" for base in bases) else None
                found += functions
                if receivers is not None and of is not None:
                    for function in functions:
                        receivers[function] = receivers.get(function, frozenset()) | of
            for ref in on_parameters:
                parameter = _parameter_path(module, ref)[0]
                skip = self._decorated_by(("P", *parameter)) if caller is not None \
                    and (module, parameter[1]) == _enclosing(caller) else frozenset()
                found += [f for f in self._run_on_parameter(module, ref, skip) if toward is None or f[1] in toward]
            for ref in on_held:
                found += self._called_on_held(module, ref, receivers)
            return list(dict.fromkeys(found))
        finally:
            self._permissive = outer

    def _overrides(self, module: str, cls: str, name: str) -> list[Value]:
        """The methods named `name` that the subclasses of a class define, at any depth: a strategy's
        few (`ForwardOverReverse.hvp`); none when there are more (`nn.Module.forward`'s hundreds),
        which would say nothing of the one an object runs."""
        key = (module, cls, name, len(self.loaded()))
        if key in self._overridden:
            return self._overridden[key]
        found, todo, seen = [], [(module, cls)], {(module, cls)}
        while todo and len(found) <= _MAX_OVERRIDES and len(seen) <= _MAX_CLOSURE:
            for sub in self._subclasses(*todo.pop()):
                if sub not in seen:
                    seen.add(sub)
                    todo.append(sub)
                    method = self.summary(sub[0]).classes[sub[1]].methods.get(name)
                    if method is not None:
                        found.append(("F", sub[0], method, True))
        self._overridden[key] = found = found if len(found) <= _MAX_OVERRIDES and len(seen) <= _MAX_CLOSURE else []
        return found

    def _called_on_held(self, module: str, ref: Ref, receivers: Optional[dict] = None) -> list[Value]:
        """What calling a method of what a parameter (or an attribute set from one) is given runs
        (`self.residual.pde(z)`, `certifier.margin(x)`): on what every call passes (asked once
        linking is done). `receivers`, when given, takes the class of the object each runs on."""
        if ref[0] != "attr":
            return []
        found = []
        for base in self.resolve(module, ref[1]):
            for held in (self._passed_closure(base) if base[0] == "P" else (base,)):
                functions = [function for member in self.attribute(held, ref[2]) for function in self.runs(member)]
                found += functions
                if receivers is not None and held[0] == "I":
                    for function in functions:
                        receivers[function] = receivers.get(function, frozenset()) | {(held[1], held[2])}
        return found

    def _given_what_applies(self, parameter: tuple[str, str, str]) -> bool:
        """Whether a call of the parameter's function, named so in the loaded modules, may pass it a
        function named as one that applies a transform (`leapfrog(self.vector_field, z, dt)`), a
        lambda or closure applying one, what a call returns when a closure applies one, or an object
        of the project made there when a `forward` applies one (`encode(Flow(d), x)`): told by names
        alone, for speed, before what the calls pass is looked for."""
        found = self._given_applying.get(parameter)
        if found is None:
            applying = self.names_applying()  # ("": a closure applies one: what a call returns may be it)
            modules = "forward" in applying or "__call__" in applying  # (an object given: what calling it runs)
            found = self._given_applying[parameter] = any(
                _last_name(ref) in applying or modules and ref[0] == "call" and (  # a class of the project
                    ref[1][0] == "cls" or ref[1][0] == "imp" and self._module_of(caller, ref[1]) is not None)
                or ref[0] == "fn" and not called_as(ref[1]) and self._applies((caller, ref[1]))  # a lambda, a closure
                for caller, site in self._sites_named(called_as(parameter[1])) for refs in _arguments(site)
                for ref in refs)
        return found

    def _applies(self, key: FunctionKey) -> bool:
        """Whether a function (a lambda, a closure) applies a transform, itself or by calling a function
        of a name that does (`lambda u: hvp(model, u)`), as `names_applying` tells."""
        function = self.function(key)
        return function is not None and (bool(function.applied) or any(
            (name := _last_name(ref)) and name in self.names_applying() for ref in function.calls))

    def names_applying(self) -> set[str]:
        """The names of the functions of the loaded modules that apply a transform, themselves or
        by calling a function of such a name (told by names alone, one call away; a dunder method
        is called by every other): what a method called on an object in a region must be named to
        be looked for (for speed)."""
        if self._applying_names is None:
            functions = [(called_as(name), {_last_name(ref) for ref in function.calls}, bool(function.applied))
                         for module in self.loaded() for name, function in self.summary(module).functions.items()]
            applying = {name for name, _, applied in functions if applied}  # ("" for a closure, a lambda)
            named = applying - {""}
            self._applying_names = applying | {name for name, calls, _ in functions if name
                                               and not name.startswith("__") and not calls.isdisjoint(named)}
        return self._applying_names

    def handed_what_applies(self) -> set[str]:
        """The modules of the functions and classes that a call of a loaded module hands a function
        applying a transform (`VelocityVerlet(energy, func_forces, dt)`, or an element of a registry
        holding one): a region there may run it (`self.force_fn(e, x)` under `@torch.no_grad()`)."""
        names = self.names_applying() - {""}
        found: set[str] = set()
        for module in list(self.loaded()):
            for function in self.summary(module).functions.values():
                for site in function.call_sites:
                    refs = [ref for refs in (*_arguments(site), site.star) for ref in refs] if not site.decoration else ()
                    if any(_last_name(ref) in names or ref[0] == "item" and ref[1][0] == "imp" for ref in refs) and any(
                            value[0] == "F" and called_as(value[2]) in names for value in self._values(module, refs)):
                        found.update(value[1] for value in self._values(module, site.callees) if value[0] in ("F", "C"))
        return found

    def _applied_in_mode(self, key: FunctionKey, inference: bool, depth: int = 0,
                         objects: Optional[frozenset] = None) -> tuple:
        """(module, Applied, chain) for each transform that running `key` in a caller's no_grad (or
        inference mode) applies in that mode, itself or through its calls; found once per function
        (and the classes of the objects it runs on, when known: `_mode_callees`)."""
        memo = (key, inference, objects)
        if memo in self._applied_below:
            return self._applied_below[memo]
        self._applied_below[memo] = ()  # a cycle adds nothing more
        function = self.function(key)
        if function is None or function.sets_grad_mode or depth > _MAX_DEPTH:
            return ()
        found = [(key[0], applied, (key,)) for applied in function.applied if inference or not applied.grad_enabled]
        stops = function.shielded if inference else (*function.guarded, *function.shielded)
        own_regions = {call.span for call in function.region_calls}
        for site in function.call_sites:  # `logdet(jacfwd, f, x)`: the transform it hands on
            if site.span not in own_regions and not any(ref in stops for ref in site.callees):
                found += [(where, applied, (key, inner)) for where, applied, inner in self._handed_applied(key[0], site)
                          if inference or not applied.grad_enabled]
        refs = [ref for ref in function.calls if ref not in stops]
        receivers: dict = {}
        for callee in self._mode_callees(key[0], refs, key, objects, receivers):
            for where, applied, chain in self._applied_in_mode((callee[1], callee[2]), inference, depth + 1,
                                                               receivers.get(callee)):
                found.append((where, applied, (key, *chain)))
        self._applied_below[memo] = tuple(found)
        return self._applied_below[memo]

    # -- what the rules ask -------------------------------------------------------------------------

    def reach_of(self, module: str, region: Region) -> dict[str, Reacher]:
        """The first reacher per mode of the function a region is in."""
        found = dict(self.reached.get((module, region.function), {})) if region.function is not None else {}
        if region.dual_level is not None and FORWARD not in found:
            found[FORWARD] = Reacher(FORWARD, "dual_level", module, region.dual_level, "dual_level()")
        return found

    def reported_in(self, given: frozenset[str]) -> dict[str, list[tuple[str, Region, dict[str, Reacher]]]]:
        """By module: the reached regions of modules not `given` that a call in it reaches, with what
        that call reaches them with, so that a commit that starts differentiating old code is told
        where it does. Every reaching call of a given module is told, also when another call (of
        this module or of one not given) reaches the same region: each is followed by itself."""
        if self._reported_in is None or self._reported_in[0] != given:
            found: dict[str, list] = defaultdict(list)
            if not any(module not in given and self.summary(module).regions for module in self.loaded()):
                self._reported_in = (given, {})  # every region is in a file given (`check .`): reported there
                return {}
            calls = [(module, name, call) for module in sorted(given) if (summary := self.summary(module)) is not None
                     for name, function in summary.functions.items()
                     for call in (*function.sources, *[site for site in function.call_sites if _hands_a_transform(site)
                                                       or self._may_transform(module, site)
                                                       and self._passes_a_lead(module, site)])]
            groups = [calls] if len(calls) > _MAX_CALLS_FOLLOWED_ALONE else [[call] for call in calls]
            whole = (self.reached, self._queue, self._varied, self._receivers, self._edges, self._aux)
            try:
                for group in groups:
                    self.reached, self._queue, self._varied, self._receivers, self._edges, self._aux = \
                        defaultdict(dict), deque(), {}, {}, defaultdict(set), {}
                    for module, name, call in group:
                        if isinstance(call, Source):
                            self._seed(module, call, name)
                        else:
                            if self._may_transform(module, call) and self._passes_a_lead(module, call):
                                self._seed_helper_call(module, call, name)
                            self._seed_handed(module, name, call)
                    self._propagate()
                    self._report_reached(given, found)
            finally:
                self.reached, self._queue, self._varied, self._receivers, self._edges, self._aux = whole
            self._reported_in = (given, dict(found))
        return self._reported_in[1]

    def _report_reached(self, given: frozenset[str], found: dict[str, list]) -> None:
        """Add to `found` the regions of modules not given in what `self.reached` holds, by the module
        of the call reaching them (or of the call of the helper that passed the function on)."""
        for (module, function), modes in self.reached.items():
            if module in given:
                continue
            for region in self.summary(module).regions:
                if region.function == function:
                    reach = dict(modes)
                    for reporter in {(r.via or (r.module,))[0] for r in reach.values()} & given:
                        if (module, region, reach) not in found[reporter]:
                            found[reporter].append((module, region, reach))

    def graphless_callee(self, module: str, site: BackwardSite) -> Optional[tuple[str, Function]]:
        """The function, returning values it computes in a region, that a backward site's value comes
        from: directly, or through functions each return of which hands back what such a call returns."""
        for value in self._values(module, site.callees):  # lazily: the first found is the answer
            if value[0] == "P":  # `encoder(x)` with `encoder` a parameter: what every call passes, if each has none
                found = [self._graphless_run(passed, site.element) for passed in self.passed(*value[1:])]
                if found and all(found):
                    return found[0]
            found = self._graphless_run(value, site.element)
            if found is not None:
                return found
        for ref in site.callees:  # `certifier.margin(x, y)`, a method of what a parameter is given
            for callee in self._called_on_held(module, ref):
                found = self._graphless((callee[1], callee[2]), set())
                if found is not None:
                    return found
        return None

    def _graphless_run(self, value: Value, element: Optional[int]) -> Optional[tuple[str, Function]]:
        """`_graphless` (or `_graphless_element`) of the first function running `value` runs."""
        for callee in self.runs(value):
            key = (callee[1], callee[2])
            found = self._graphless(key, set()) or self._graphless_element(key, element)
            if found is not None:
                return found
        return None

    def _graphless_element(self, key: FunctionKey, element: Optional[int]) -> Optional[tuple[str, Function]]:
        """(module, the function, as if it returned only that element) when each return of `key`
        hands back a tuple whose `element` it computes in a region (`_, k = encoder(a, b)`)."""
        function = self.function(key) if element is not None else None
        found = function.element_regions[element] if function is not None and element < len(function.element_regions) \
            else None
        return (key[0], replace(function, returns_region=found[0], returns_api=found[1])) if found else None

    def _graphless(self, key: FunctionKey, seen: set) -> Optional[tuple[str, Function]]:
        """(module, the function whose region computes it) when nothing `key` returns has a graph."""
        function = self.function(key)
        if function is None or key in seen or len(seen) > _MAX_DEPTH or \
                function.returns_region is None and not function.returns_through:
            return None
        seen.add(key)
        found = (key[0], function) if function.returns_region is not None else None
        for ref in function.returns_through:  # each callee a return hands on must have no graph either
            callees = [callee for value in self.resolve(key[0], ref) for callee in self.runs(value)]
            if not callees:
                return None
            for callee in callees:
                inner = self._graphless((callee[1], callee[2]), seen)
                if inner is None:
                    return None
                found = found or inner
        return found

    # -- the flow rule: what the whole project says of whether a region can change a result ----------
    # Read once, after linking, from the modules linking loaded (later loads change no answer).

    def varied_params(self, key: FunctionKey, mode: str) -> Optional[frozenset[str]]:
        """The parameters of a function that the transforms reaching it in `mode` may vary: what
        each transform differentiates (`argnums`, `functools.partial`), carried along every chain
        of calls by what each argument depends on (`analysis/varied.py`); None when any may be."""
        if (key, mode) not in self._varied_found:
            self._solve_varied(key, mode)
        varied = self._varied_found[(key, mode)]
        return None if UNKNOWN in varied else varied

    def only_for_aux(self, key: FunctionKey, mode: str, seen: frozenset = frozenset()) -> bool:
        """Whether every transform reaching a function in `mode` is given it with `has_aux=True`,
        directly or through functions that only return what it returns (`lambda v: score(net, v)`):
        what it returns after its first value is not differentiated."""
        direct = self._aux.get((key, mode))
        callers = self._callers(mode).get(key, ())
        if direct is False or direct is None and not callers or key in seen:
            return False
        return all(self._forwards(caller, key) and self.only_for_aux(caller, mode, seen | {key}) for caller in callers)

    def _forwards(self, caller: FunctionKey, key: FunctionKey) -> bool:
        """Whether `caller` does nothing but return what calling `key` returns."""
        function, summary = self.function(caller), self.summary(caller[0])
        returns = summary.returns.get(caller[1], ()) if summary else ()
        return bool(function) and len(function.calls) == 1 and returns == (("call", function.calls[0]),) \
            and [(f[1], f[2]) for f in self._functions(caller[0], function.calls)] == [key]

    def result_unused(self, key: FunctionKey, mode: str) -> bool:
        """Whether no transform or tracer is given a function itself in `mode`, and each function
        calling it in that mode takes what it returns nowhere it computes: a statement, or a store
        into attributes no reached function reads (`self.last_entropy = entropy(attn)`)."""
        callers = self._callers(mode).get(key, ())
        if (key, mode) in self._aux or not callers:
            return False
        stored: set[str] = set()
        for caller in callers:
            function = self.function(caller)
            calls = [ref for ref in function.calls
                     if key in [(f[1], f[2]) for f in self._functions(caller[0], [ref])]] if function else ()
            if not calls or any(ref not in function.unused_results for ref in calls):
                return False
            stored.update(name for ref in calls for name in function.unused_results[ref])
        return not stored or not self.reached_reads(sorted(stored))

    def _callers(self, mode: str) -> dict[FunctionKey, list[FunctionKey]]:
        """The functions that reach each function in `mode` by a call (`_edges`, reversed)."""
        callers = self._callers_in.get(mode)
        if callers is None:
            callers = self._callers_in[mode] = defaultdict(list)
            for (caller, edge_mode), callees in self._edges.items():
                if edge_mode == mode:
                    for callee in callees:
                        callers[callee].append(caller)
        return callers

    def object_parameter(self, key: FunctionKey) -> Optional[str]:
        """The parameter a method's object is bound to (`self`), None for a function."""
        function = self.function(key)
        return function.params[0] if function and function.params and self._method_class(key) else None

    def _solve_varied(self, key: FunctionKey, mode: str) -> None:
        """What is varied in `key` and in each function reaching it in `mode`: what the transforms
        give each (`_reach`), carried along the calls between them to a fixpoint (what each call
        passes is read for these functions only: `_passes_of`)."""
        callers = self._callers(mode)
        varied = {key: set(self._varied.get((key, mode), ()))}
        todo = [key]
        while todo:  # every function reaching `key`
            for caller in callers.get(todo.pop(), ()):
                if caller not in varied:
                    varied[caller] = set(self._varied.get((caller, mode), ()))
                    todo.append(caller)
        todo = list(varied)
        while todo:
            caller = todo.pop()
            given = varied[caller]
            if not given:
                continue
            passed = {} if UNKNOWN in given else self._passed_varied(caller, self.function(caller), frozenset(given))
            for callee in self._edges.get((caller, mode), ()):
                if callee in varied and not (more := passed.get(callee, EVERY)) <= varied[callee]:
                    varied[callee] |= more
                    todo.append(callee)
        for function, found in varied.items():  # (each found whole: all that reach it are in `varied`)
            self._varied_found[(function, mode)] = frozenset(found)

    def stored_elsewhere(self, module: str, attributes: Sequence[str]) -> bool:
        """Whether a loaded module other than `module` may store into one of these attribute names
        (`net.scale = nn.Parameter(...)` in a script, for a literal `self.scale` of the model)."""
        wanted = {*attributes, ANY_ATTRIBUTE}
        return any(not wanted.isdisjoint(self.summary(other).stored_attributes)
                   for other in self.loaded() if other != module)

    def differentiates_state(self, module: str) -> bool:
        """Whether the project may differentiate the parameters and buffers of `module`'s classes
        (`functional_call`, `make_functional`, `stack_module_state`): a module doing so that is
        `module` or imports it, directly or through other modules (it must get hold of the model).
        Transforms of a module's call otherwise hold them constant."""
        return any(module in self._import_closure(other) for other in self.loaded()
                   if self.summary(other).differentiates_state)

    def _import_closure(self, start: str) -> set[str]:
        """The loaded modules `start` imports, directly or not, and itself."""
        if start not in self._imports_of:
            seen, todo = {start}, [start]
            while todo:
                summary = self.summary(todo.pop())
                refs = [*summary.names.values(), *(function.calls for function in summary.functions.values())]
                for name in _imported_names(refs):
                    parts = name.split(".")
                    for end in range(1, len(parts) + 1):
                        prefix = ".".join(parts[:end])
                        entry = self.modules.get(prefix)
                        if entry is not None and entry.loaded and entry.summary is not None and prefix not in seen:
                            seen.add(prefix)
                            todo.append(prefix)
            self._imports_of[start] = seen
        return self._imports_of[start]

    def reached_reads(self, attributes: Sequence[str]) -> bool:
        """Whether a function some transform or tracer reaches may load one of these attribute names:
        one that does, or a call into code outside the project (but torch's), which may read anything."""
        facts = self._flow_facts()
        if facts.reads is None:  # followed when first asked: it may load many modules
            facts.reads, facts.external = self._reads_of_reached()
        return facts.external or ANY_ATTRIBUTE in facts.reads or bool(facts.reads.intersection(attributes))

    def traced_only_for_gradients(self, key: FunctionKey) -> bool:
        """Whether every tracer that drops regions and reaches a function is `make_fx` of a function
        that returns only what `torch.autograd.grad` computes in it (a training step): the traced graph
        then records the backward pass eager mode ran, with every region respected."""
        facts = self._flow_facts()
        if facts.traced_plainly is None:  # followed when first asked
            facts.traced_plainly = self._reached_from(facts.plain_tracings)
        return key not in facts.traced_plainly

    def _flow_facts(self) -> _FlowFacts:
        if self._flow is None:
            facts = _FlowFacts()
            for module in self.loaded():
                for function in self.summary(module).functions.values():
                    for source in function.sources:
                        targets = self._functions(module, source.targets) or [  # `jit.trace(model)` in a helper
                            f for ref in source.targets for f in self._run_on_parameter(module, ref)]
                        if DROPS in source.modes and not (source.gradient_step and targets):
                            facts.plain_tracings += [(value[1], value[2]) for value in targets] or [None]
            self._flow = facts
        return self._flow

    def _reached_from(self, starts: list) -> set:
        """The functions `starts` call, run or hand on, transitively, in every module (a superset of
        what linking reaches from them); every function when a start is unknown (None)."""
        if None in starts:
            return _EVERYTHING

        def step(key: FunctionKey, function, refs: list) -> list:
            return [(f[1], f[2]) for f in (*self._functions(key[0], refs),
                                           *(f for ref in refs for f in self._run_on_parameter(key[0], ref)))]

        following, self._following = self._following, True  # what attributes hold is looked for too
        try:
            return self._walk(starts, step)
        finally:
            self._following = following

    def _run_on_parameter(self, module: str, ref: Ref, skip: frozenset[Value] = frozenset()) -> list[Value]:
        """What calling a parameter (or a method of it: `model.rollout(x)`, `learner.adapt(w, x)`)
        runs, on what every call passes to it (but `skip`)."""
        called = _parameter_path(module, ref)
        if called is None:
            return []
        values = [value for value in self._passed_closure(("P", *called[0])) if value not in skip]
        for name in called[1].split(".") if called[1] else ():
            values = [member for value in values for member in self.attribute(value, name)]
        return [function for value in values for function in self.runs(value)]

    def _passed_closure(self, parameter: Value) -> tuple[Value, ...]:
        """`_passed_on`, remembered: asked once linking is done (what the calls pass is found then).
        When no call tells, an instance of each class it is taken to hold by what its function asks
        of it (`_typed_by_use`)."""
        found = self._closures.get(parameter)
        if found is None:
            seen, todo, values = {parameter}, [parameter], {}
            while todo:
                for passed in self.passed(*todo.pop()[1:]):
                    if passed[0] != "P":
                        values[passed] = None
                    elif passed not in seen:
                        seen.add(passed)
                        todo.append(passed)
            if not values and not any(self.passed(*value[1:]) for value in seen):
                values = {("I", *cls): None for cls in self._typed_by_use(parameter[1:])[0]}
            found = self._closures[parameter] = tuple(values)
        return found

    def _reads_of_reached(self) -> tuple[set[str], bool]:
        """The attribute names the reached functions load, following their calls into every module
        (linking looks only where a region may be), and whether one calls code outside the project."""
        reads: set[str] = set()

        def step(key: FunctionKey, function, refs: list) -> Optional[list]:
            reads.update(function.reads)
            following = []
            for value in self._values(key[0], refs):
                if value[0] in ("X", "XI") and not value[1].startswith(_LIBRARIES_THAT_READ_NOTHING):
                    return None  # code outside the project may read anything
                following += [(v[1], v[2]) for v in self.runs(value)]
            return following

        external = self._walk(self.reached, step) is None
        return reads, external

    def _walk(self, starts, step) -> Optional[set]:
        """Breadth first from `starts` over the functions of every module (any may be loaded):
        `step(key, function, refs)` gives the functions to go on to, or None to stop. The functions
        seen, or None when a step stopped."""
        seen: set[FunctionKey] = set()
        queue = deque(starts)
        outer = self._permissive
        self._permissive = 2  # any module may be loaded
        try:
            while queue:
                key = queue.popleft()
                if key in seen:
                    continue
                seen.add(key)
                function = self.function(key)
                if function is None:
                    continue
                refs = [*function.calls, *(ref for source in function.sources for ref in source.targets),
                        *(ref for site in function.call_sites for refs in _arguments(site) for ref in refs)]
                following = step(key, function, refs)
                if following is None:
                    return None
                queue.extend(following)
        finally:
            self._permissive = outer
        return seen

    def where(self, module: str, span: Span, here: str) -> str:
        """`line 4` in the module `here`, `pkg/model.py:4` in another."""
        if module == here:
            return f"line {span.row}"
        return f"{self.modules[module].path if module in self.modules else module}:{span.row}"

    def path(self, module: str) -> str:
        """The path of a module's file, as findings show it."""
        return self.modules[module].path if module in self.modules else module

    def describe(self, reacher: Reacher, here: str) -> str:
        """`jacfwd(...)` at line 31 through `helper`, as seen from the module `here`."""
        if reacher.entry == "dual_level":
            text = f"`with dual_level()` at {self.where(reacher.module, reacher.span, here)}"
        else:
            text = f"`{reacher.entry}(...)` at {self.where(reacher.module, reacher.span, here)}"
        if reacher.via is not None:
            via_module, via_span, via_text = reacher.via
            text += f", given `{callee_text(via_text)}` at {self.where(via_module, via_span, here)}"
        if reacher.through is not None:
            module, function = reacher.through
            function = display_name(function)
            text += f" through `{function if module == here else f'{module}.{function}'}`"
        return text


@dataclass
class _FlowFacts:
    """What the flow rule reads of the linked project (see `Project._flow_facts`)."""

    plain_tracings: list = field(default_factory=list)  # what tracers that are no gradient step run (None: unknown)
    traced_plainly: set | None = None  # the functions they reach (None: not followed yet)
    reads: set | None = None  # the attribute names reached code loads (None: not followed yet)
    external: bool = False  # reached code calls code outside the project, which may read any


class _Everything:
    """A set that holds every function."""

    def __contains__(self, item) -> bool:
        return True


_EVERYTHING = _Everything()
_LIBRARIES_THAT_READ_NOTHING = ("torch.", "math.", "numpy.", "functools.", "operator.", "contextlib.", "itertools.",
                                 "typing.", "random.", "time.", "warnings.", "logging.")  # of our attributes
# the kinds of ref whose value comes from an inner ref
_WRAPPING = ("attr", "inst", "call", "wrap", "box", "item", "super", "read", "decorated", "slice", "kept", "star")
_PASSED = ("param", "wrap")  # the kinds of ref that may stand for a parameter
_UNSEEN = object()  # not looked up yet (None is an answer)
_MAX_CLOSURE = 64  # the refs a closure walk looks at, at most
_MAX_UNNAMED_DEPTH = 4  # unnamed call sites resolved one inside another, at most
_MAX_CALLS_FOLLOWED_ALONE = 256  # more reaching calls in the files given are followed together


def _hands_a_transform(site) -> bool:
    return any(_entries_in(refs) for refs in _arguments(site))


def _entries_in(refs: tuple[Ref, ...]) -> tuple[entry_points.EntryPoint, ...]:
    """The transforms and tracers an argument may be (`jacfwd`, `jacfwd if forward else jacrev`,
    `TRANSFORMS[mode]` after `TRANSFORMS = {"forward": jacfwd, "reverse": jacrev}`)."""
    return entry_points.entries(imports_among(refs))


def _handed_source(entry: entry_points.EntryPoint, call: CallSite) -> Source:
    """`jac_fn(f)` where `jac_fn` holds `entry`: a source applying it to what the call passes."""
    position, keyword = entry.argument
    targets = call.args[position] if position < len(call.args) else call.keywords.get(keyword, ())
    return Source(entry.name, entry.modes_for({}), targets, call.span, call.text)


def _in_callers_terms(caller: FunctionKey, source: Source, levels: list) -> list[tuple[str, str, Source]]:
    """A source in the last of `levels` as sources of the functions whose terms its targets are in:
    a parameter of a level's function is what that level's call passes, in the terms of the level
    before it (the first's, of `caller`); what no call binds is dropped."""
    by_place: dict[FunctionKey, list[Ref]] = defaultdict(list)
    for target in source.targets:
        refs, at = [target], len(levels) - 1
        while at >= 0 and refs:
            (module, function), given = levels[at]
            if not any(_names_parameter(ref, function) for ref in refs):
                break
            refs = [found for ref in refs for found in _substituted(ref, function, given)]
            at -= 1
        by_place[levels[at][0] if at >= 0 else caller] += refs
    return [(module, function, replace(source, targets=tuple(dict.fromkeys(refs))))
            for (module, function), refs in by_place.items() if refs]


def _names_parameter(ref: Ref, function: str) -> bool:
    if ref[:2] == ("param", function):
        return True
    return any(type(part) is tuple and part and _names_parameter(part, function) for part in ref)


def _substituted(ref: Ref, function: str, given: dict[str, tuple[Ref, ...]]) -> list[Ref]:
    """`ref` with each parameter of `function` in it replaced by what `given` binds it to, in every
    combination (at most _MAX_CLOSURE)."""
    if ref[:2] == ("param", function):
        return list(given.get(ref[2], ()))
    options: list[tuple] = [()]
    for part in ref:
        alternatives = _substituted(part, function, given) if type(part) is tuple and part else [part]
        options = [(*option, alternative) for option in options for alternative in alternatives][:_MAX_CLOSURE]
    return options


def _arguments(site) -> Iterable[tuple[Ref, ...]]:
    """The refs of each argument of a call site, positional and keyword, and what a method is called on."""
    if site.receiver:
        return chain(site.args, site.keywords.values(), (site.receiver,))
    return chain(site.args, site.keywords.values()) if site.keywords else site.args


def _closure_parameters(summary: ModuleSummary, module: str, owner: str,
                        targets: Iterable[Ref]) -> dict[tuple[tuple[str, str, str], str], bool]:
    """The parameters that running `targets` (applied to a transform in the function `owner`) calls
    through the module's own code, with the attribute path called: `model` for `lambda z, t:
    model(z, t)` in `def loss(model, z, t)`, (`model`, "encode") for `lambda z: model.encode(z)`;
    `net` for `lambda z: self.net(z)` when `__init__(self, net)` sets `self.net = net`; `self` for
    `jacfwd(self)` or `lambda z: self(z)` in a method. A parameter applied directly is not repeated.
    Each with whether a call of the closure the transform is given leaves it unreached: not so for a
    parameter of `owner` the closure calls itself (`jvp(lambda p: obj(p, x))`), whose call is an edge."""
    found: dict[tuple[tuple[str, str, str], str], bool] = {}
    seen: set[Ref] = set()
    owner_self = _self_parameter(summary, module, owner)
    stack = [(ref, 0) for ref in targets if _parameter(module, ref) is None]
    while stack:
        ref, depth = stack.pop()
        if ref in seen or len(seen) > _MAX_CLOSURE:
            continue
        seen.add(ref)
        ref = _unwrapped(ref)
        kind, parameter = ref[0], None
        if kind == "param" or kind == "attr" and (called := _parameter_path(module, ref)) is not None:
            parameter = ((module, ref[1], ref[2]), "") if kind == "param" else called
        elif kind == "fn" and ref[1] in summary.functions:
            function = summary.functions[ref[1]]
            stack += [(called, depth + 1) for called in function.calls]
            stack += [(target, depth + 1) for source in function.sources for target in source.targets]
        elif kind == "inst" and ref[1][0] == "cls" and owner_self and owner_self[0] == ref[1][1]:
            parameter = (owner_self[1], "")  # `self` of the method applying the transform
        elif kind == "attr" and ref[1][0] == "inst" and ref[1][1][0] == "cls":
            cls = summary.classes.get(ref[1][1][1])
            if cls is not None and ref[2] in cls.methods:
                stack.append((("fn", cls.methods[ref[2]]), depth))
            elif cls is not None:
                stack += [(held, depth) for held in cls.attributes.get(ref[2], ())]
        if parameter is not None:
            edge = depth == 1 and parameter[0][1] == owner
            found[parameter] = found.get(parameter, False) or not edge
    return found


def _closure_sites(summary: ModuleSummary, module: str,
                   targets: Iterable[Ref]) -> list[tuple[tuple[str, str, str], object]]:
    """The call sites of the closures `targets` run (a lambda, a nested function, and what they call
    of the module) that pass on a parameter of another function (one they capture): `render(field,
    o)` in `lambda o: render(field, o)`, with `field` a parameter of the function applying the transform."""
    found = []
    seen: set[str] = set()
    stack = [ref[1] for ref in map(_unwrapped, targets) if ref[0] == "fn"]
    while stack:
        name = stack.pop()
        if name in seen or name not in summary.functions or len(seen) > _MAX_CLOSURE:
            continue
        seen.add(name)
        function = summary.functions[name]
        stack += [ref[1] for ref in map(_unwrapped, function.calls) if ref[0] == "fn"]
        for site in function.call_sites:
            for refs in _arguments(site):
                for ref in refs:
                    parameter = _parameter(module, ref)
                    if parameter is not None and parameter[1] != name:
                        found.append((parameter, site))
    return found


def _enclosing(key: FunctionKey) -> FunctionKey:
    """The function a closure is written in (`dec` for `dec.<locals>.wrapper`)."""
    return key[0], key[1].rpartition(".<locals>.")[0]


def _unwrapped(ref: Ref) -> Ref:
    """What `vmap(f)`, `partial(f, ...)` wrap: `f`."""
    while ref[0] == "wrap":
        ref = ref[1]
    return ref


def script_relative(module: str, name: str, modules) -> str:
    """The module an absolute import names: itself, but a name no import root holds is looked
    for beside the file, as when the file runs as a script, whose folder is first on `sys.path`
    (`from config import MODEL` in `scripts/train.py` is `scripts.config`; `from nested.ops import
    f` in `pkg/main.py`, `pkg.nested.ops`, when `pkg` is the folder checked)."""
    top = name.partition(".")[0]
    package = module.rpartition(".")[0]
    if top in modules or not package or f"{package}.{top}" not in modules:
        return name
    return f"{package}.{name}"


def _unboxed(ref: Ref) -> Ref:
    """What a container ref holds, however deeply boxed: `cls` in `("box", ("param", f, "cls"))`."""
    while ref[0] == "box":
        ref = ref[1]
    return ref


def called_as(function: str) -> str:
    """The name a caller spells to call a function: `loss`; `export` for a method `Base.export`,
    `Trainer` for `Trainer.__init__`; "" for a nested function or a lambda."""
    parts = function.split("#")[0].split(".")
    if "<locals>" in parts or not all(part.isidentifier() for part in parts):
        return ""
    return parts[-2] if parts[-1] == "__init__" and len(parts) > 1 else parts[-1]


def _held_object(value: Value) -> Value:
    """The instance a wrapper or a container holds (`nn.Sequential(Block())`, `DataParallel(net)`),
    else the value itself."""
    inner = value
    while inner[0] in ("W", "B"):
        inner = inner[1]
    return inner if inner[0] == "I" else value


def _varied_by(passing, function: Function, bound: bool, varied: frozenset[str]) -> frozenset[str]:
    """The parameters of `function` that a call passes a varied value to (`analysis/varied.py`)."""
    if passing.args is None:
        return EVERY

    def varies(dependence) -> bool:
        return any(token == UNKNOWN or token in varied for token in dependence)

    found = set()
    params = function.params
    if bound and params and varies(passing.receiver):
        found.add(params[0])  # the object a method is called on
    positional = params[1:] if bound else params
    for index, dependence in enumerate(passing.args):
        if varies(dependence):
            found.add(positional[index] if index < len(positional) else UNKNOWN)  # (else into `*args`)
    if passing.rest is not None and varies(passing.rest):  # `f(p, *batch)`: every parameter from there on
        found.update((*positional[len(passing.args):], UNKNOWN))
    for name, dependence in passing.keywords.items():
        if varies(dependence):
            found.add(name if name in params or name in function.kwonly else UNKNOWN)
    return frozenset(found)


def made_by(function: str) -> str:
    """The name a caller spells to call a function or to make it: `called_as`, and for a nested
    function, the function that defines it (`register` for `register.<locals>.store`: calls of
    `register(...)` return it, as `@register("mlp")` does)."""
    return called_as(function) or called_as(function.partition(".<locals>.")[0])


def _attribute_read(ref: Ref) -> bool:
    """Whether a ref reads what an object or a container holds (`self.net`, `self.nets[0]`, and
    `MODELS[name]()` from a registry another module fills)."""
    if ref[0] == "call" and ref[1][0] == "item":  # an instance built from a registry
        return True
    while ref[0] in ("read", "item", "slice", "wrap", "box"):
        ref = ref[1]
    return ref[0] == "attr"


def _last_name(ref: Ref) -> str:
    """The name a callee ref ends with: `Net` for `pkg.nets.Net`, `export` for `net.export`, `encode`
    for a function `encode` decorated with a grad mode (`@torch.no_grad()`: calling it calls `encode`)."""
    while ref[0] == "decorated" and _is_grad_mode(ref[2]):
        ref = ref[1]
    if ref[0] in ("imp", "fn", "cls"):
        return ref[1].rpartition(".")[2]
    return ref[2] if ref[0] == "attr" else ""


def _is_grad_mode(decorator: Ref) -> bool:
    """`torch.no_grad()`, `torch.inference_mode`, ...: a decorator whose wrapper passes its arguments on."""
    if decorator[0] == "call":
        decorator = decorator[1]
    return decorator[0] == "imp" and decorator[1] in torch_names.GRAD_MODE_APIS


def _self_parameter(summary: ModuleSummary, module: str, function: str):
    """(class, the `self` parameter) when `function`, or the method it is defined in, is a method."""
    while function:
        for name, cls in summary.classes.items():
            if function in cls.methods.values():
                params = summary.functions[function].params if function in summary.functions else ()
                return (name, (module, function, params[0])) if params else None
        function = function.rpartition(".<locals>.")[0]
    return None


def _parameter(module: str, ref: Ref) -> Optional[tuple[str, str, str]]:
    """The parameter a ref stands for: `f`, or `vmap(f)`, when `f` is a parameter."""
    ref = _unwrapped(ref)
    return (module, ref[1], ref[2]) if ref[0] == "param" else None


def _parameter_element(module: str, ref: Ref) -> Optional[tuple[tuple[str, str, str], str]]:
    """The parameter a ref stands for, or holds an element of, and the path to it: (`model`, "")
    for `model` or `vmap(model)`, (`models`, "[]") for `m` in `for m in models:` or `*models`,
    (`models`, "[encoder]") for `models["encoder"]`, (`pair`, "[1]") for `_, b = pair`."""
    path = []
    while True:
        while ref[0] == "wrap":
            ref = ref[1]
        if ref[0] != "item" or len(path) > 3:
            break
        key = ref[2] if len(ref) > 2 else None
        plain = type(key) is int or type(key) is str and key.isidentifier()
        path.append(f"[{key}]" if plain else "[]")
        ref = ref[1]
    if ref[0] != "param":
        return None
    return (module, ref[1], ref[2]), ".".join(reversed(path))


def _element_key(name: str):
    """The index or key an element step of a path names ("[0]": 0, "[encoder]": "encoder"), None for any ("[]")."""
    key = name[1:-1]
    return None if not key else int(key) if key.lstrip("-").isdigit() else key


def _parameter_path(module: str, ref: Ref) -> Optional[tuple[tuple[str, str, str], str]]:
    """The parameter a called ref stands for and the attribute path called on it: (`f`, "") for
    `f()` or `vmap(f)()`, (`model`, "encoder.embed") for `model.encoder.embed(x)`."""
    names = []
    while ref[0] == "attr":
        names.append(ref[2])
        ref = ref[1]
    if names and ref[0] != "param" or ref[0] not in _PASSED:
        return None
    parameter = _parameter(module, ref)
    return None if parameter is None else (parameter, ".".join(reversed(names)))


def _passes(key: tuple[str, str, str], refs: tuple[Ref, ...]) -> bool:
    """Whether one of an argument's refs stands for the parameter `key` (of a function of its module)."""
    for ref in refs:
        while ref[0] == "wrap":
            ref = ref[1]
        if ref[0] == "param" and ref[1] == key[1] and ref[2] == key[2]:
            return True
    return False


def _imported_names(values) -> set[str]:
    """The qualified names `("imp", name)` refs hold, however deep in other refs."""
    found, todo = set(), list(values)
    while todo:
        value = todo.pop()
        if isinstance(value, tuple):
            if len(value) == 2 and value[0] == "imp" and isinstance(value[1], str):
                found.add(value[1])
            else:
                todo.extend(value)
    return found


def _reacher(mode: str, module: str, source) -> Reacher:
    return Reacher(mode, source.entry, module, source.span, source.text, exported=mode == DROPS and source.exported,
                   skips=source.skips)


def _rather(known: Optional[Reacher], reacher: Reacher) -> bool:
    """Whether `reacher` is kept in place of the one known for its mode: the first, but a tracer whose
    result may be differentiated over one made for export (NG005 is then an error), and one that
    runs every branch over one that skips some (`analysis/guards.py`)."""
    return known is None or known.exported and not reacher.exported or (
        known.exported == reacher.exported and set(reacher.skips) < set(known.skips))


def callee_text(text: str) -> str:
    """`hvp(...)` for `hvp(energy, x, v)`, `Net().export(...)` for `Net().export(x)`."""
    if text.endswith(")") and not text.endswith("...)"):  # the whole call: drop its last arguments
        depth = 0
        for at in range(len(text) - 1, 0, -1):
            depth += {")": 1, "(": -1}.get(text[at], 0)
            if depth == 0:
                return text[:at] + "(...)"
    return text.partition("(")[0] + "(...)"


__all__ = ["FORWARD", "REVERSE", "DROPS", "MODULE_BODY", "ModuleEntry", "Project", "Reacher", "callee_text",
           "called_as", "made_by", "module_name", "module_name_and_root"]
