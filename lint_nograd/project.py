"""The whole project: module names from the import roots, the summaries of its files linked into
one call graph, and the reach of every transform and tracer over it.

Linking is a pure step over summaries (`summary.py`): refs are resolved to values (a function,
a class, an instance, a module, or a name outside the project), helpers' parameters are solved
to a fixpoint, and reach is a worklist over functions in which each function is visited once per
mode, keeping the first reaching call for the message. Both are linear in the size of the call
graph. A module is loaded (summarised) the first time a ref leads into it, so files no chain
touches are never parsed. Nothing here imports or runs the project's code.
"""
from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePath
from typing import Optional

from lint_nograd import entry_points
from lint_nograd.entry_points import DROPS, FORWARD, REVERSE
from lint_nograd.summary import MODULE_BODY, BackwardSite, Function, ModuleSummary, Ref, Region, Span, display_name

Value = tuple  # ("F", module, function, bound) ("C", module, class) ("I", module, class) ("M", module)
#               ("X", qualified name) ("XI", qualified class name) ("W", value) ("P", module, function, parameter)
FunctionKey = tuple[str, str]  # (module, function)
_MAX_DEPTH = 24


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


@dataclass
class ModuleEntry:
    name: str  # `pkg.model`; a file no import can name gets `<path>`
    path: str  # as shown in messages
    is_package: bool = False
    summary: Optional[ModuleSummary] = None
    loaded: bool = False  # the summary was asked for (it may still be None: the file does not parse)


def module_name(path: Path, roots: Sequence[Path]) -> tuple[str, bool]:
    """The dotted name a file is imported under from the first import root that holds it, and
    whether it is a package (`__init__.py`); `<path>` when no root holds it."""
    for root in roots:
        try:
            parts = list(PurePath(path).relative_to(root).with_suffix("").parts)
        except ValueError:
            continue
        package = parts[-1:] == ["__init__"]
        if package:
            parts = parts[:-1]
        if parts and all(part.isidentifier() for part in parts) and path.suffix == ".py":
            return ".".join(parts), package
    return f"<{path}>", False


class Project:
    """Summaries linked across modules. `load(name)` summarises a module on first use."""

    def __init__(self, modules: dict[str, ModuleEntry],
                 load: Callable[[ModuleEntry], Optional[ModuleSummary]] | None = None):
        self.modules = modules
        self._load = load
        self._resolved: dict[tuple[str, Ref], tuple[Value, ...]] = {}
        self._runs: dict[Value, tuple[Value, ...]] = {}
        self.called: set[tuple[str, str, str]] = set()  # parameters a function calls
        self.sourced: dict[tuple[str, str, str], dict[str, Reacher]] = defaultdict(dict)  # ... or transforms
        self.reached: dict[FunctionKey, dict[str, Reacher]] = defaultdict(dict)
        self._queue: deque = deque()
        self._reported_in: Optional[tuple[frozenset[str], dict]] = None

    # -- modules ------------------------------------------------------------------------------------

    def summary(self, module: str) -> Optional[ModuleSummary]:
        entry = self.modules.get(module)
        if entry is None:
            return None
        if not entry.loaded:
            entry.loaded = True
            if entry.summary is None and self._load is not None:
                entry.summary = self._load(entry)
        return entry.summary

    def loaded(self) -> list[str]:
        return [name for name, entry in self.modules.items() if entry.loaded and entry.summary is not None]

    def function(self, key: FunctionKey) -> Optional[Function]:
        summary = self.summary(key[0])
        return summary.functions.get(key[1]) if summary else None

    def _absolute(self, module: str, name: str) -> str | None:
        """`pkg.model.loss` for `.model.loss` imported in `pkg.train`."""
        if not name.startswith("."):
            return name
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
        key = (module, ref)
        if key in self._resolved:
            return self._resolved[key]
        if depth > _MAX_DEPTH:
            return ()
        self._resolved[key] = ()  # a cycle of imports or assignments resolves to nothing
        values = tuple(dict.fromkeys(self._resolve(module, ref, depth)))
        self._resolved[key] = values
        return values

    def _resolve(self, module: str, ref: Ref, depth: int) -> Iterator[Value]:
        kind = ref[0]
        if kind == "fn":
            yield ("F", module, ref[1], False)
        elif kind == "cls":
            yield ("C", module, ref[1])
        elif kind == "imp":
            name = self._absolute(module, ref[1])
            if name is not None:
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
        elif kind == "call":  # calling a class makes an instance; what a function returns is not followed
            for value in self.resolve(module, ref[1], depth + 1):
                if value[0] == "C":
                    yield ("I", value[1], value[2])
                elif value[0] == "X":
                    yield ("XI", value[1])
        elif kind == "wrap":
            for value in self.resolve(module, ref[1], depth + 1):
                yield ("W", value)

    def attribute(self, value: Value, name: str, depth: int = 0) -> tuple[Value, ...]:
        kind = value[0]
        if kind == "M":
            submodule = f"{value[1]}.{name}"
            if submodule in self.modules:
                return (("M", submodule),)
            summary = self.summary(value[1])
            refs = summary.names.get(name, ()) if summary else ()
            return tuple(v for ref in refs for v in self.resolve(value[1], ref, depth + 1))
        if kind in ("C", "I"):
            return self._member(value[1], value[2], name, kind == "I", set())
        if kind == "X":
            return (("X", f"{value[1]}.{name}"),)
        return ()

    def _member(self, module: str, cls: str, name: str, bound: bool, seen: set) -> tuple[Value, ...]:
        """A method or attribute of a class, looked up through its bases (across modules)."""
        if (module, cls) in seen or len(seen) > _MAX_DEPTH:
            return ()
        seen.add((module, cls))
        summary = self.summary(module)
        info = summary.classes.get(cls) if summary else None
        if info is None:
            return ()
        if name in info.methods:
            return (("F", module, info.methods[name], bound),)
        if name in info.attributes:
            return tuple(v for ref in info.attributes[name] for v in self.resolve(module, ref))
        for base in self._bases(module, cls):
            found = self._member(base[1], base[2], name, bound, seen) if base[0] == "C" else ()
            if found:
                return found
        return ()

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
        """The functions calling `value` runs: a function itself, an instance's `forward`, ..."""
        if value not in self._runs:
            self._runs[value] = ()
            self._runs[value] = tuple(self._functions_run(value))
        return self._runs[value]

    def _functions_run(self, value: Value) -> Iterator[Value]:
        kind = value[0]
        if kind == "F":
            if self.function((value[1], value[2])) is not None:
                yield value
        elif kind == "I":
            for method in ("forward", "__call__"):
                found = self._member(value[1], value[2], method, True, set())
                if found:
                    yield from (v for f in found for v in self.runs(f))
                    return
        elif kind == "W":
            yield from self.runs(value[1])

    def _values(self, module: str, refs: Iterable[Ref]) -> Iterator[Value]:
        for ref in refs:
            yield from self.resolve(module, ref)

    def _functions(self, module: str, refs: Iterable[Ref]) -> Iterator[Value]:
        for value in self._values(module, refs):
            yield from self.runs(value)

    def _bind(self, callee: Value, site) -> Iterator[tuple[str, tuple[Ref, ...]]]:
        """The parameters of `callee` that a call site passes something to, with its refs."""
        function = self.function((callee[1], callee[2]))
        if function is None:
            return
        offset = 1 if callee[3] else 0
        for index, refs in enumerate(site.args):
            if refs and index + offset < len(function.params):
                yield function.params[index + offset], refs
        for keyword, refs in site.keywords.items():
            if keyword in function.params or keyword in function.kwonly:
                yield keyword, refs

    # -- linking ------------------------------------------------------------------------------------

    def link(self, modules: Iterable[str]) -> None:
        """Compute the reach of every transform and tracer of `modules` and of the modules they lead to."""
        self._load_reachable(modules)
        loaded = sorted(self.loaded())
        self._solve_parameters(loaded)
        for module in loaded:  # in a fixed order: the first reacher of a function does not depend on the run
            for function in self.summary(module).functions.values():
                for source in function.sources:
                    self._seed(module, source)
                for site in function.call_sites:
                    self._seed_helper_call(module, site)
        self._propagate()

    def _load_reachable(self, modules: Iterable[str]) -> None:
        """Load every module a chain from a transform or tracer may enter, before reach is computed
        (so that it does not depend on the order modules are met in)."""
        seen_modules: set[str] = set()
        seen: set[FunctionKey] = set()
        pending = [module for module in modules if self.summary(module) is not None]
        while pending:
            stack: list[FunctionKey] = []
            for module in pending:
                seen_modules.add(module)
                for function in self.summary(module).functions.values():
                    for source in function.sources:
                        stack += self._keys(module, source.targets)
                    for site in function.call_sites:
                        stack += self._keys(module, [ref for refs in site.args for ref in refs])
            while stack:
                key = stack.pop()
                if key in seen:
                    continue
                seen.add(key)
                function = self.function(key)
                if function is None:
                    continue
                refs = [*function.calls, *(t for s in function.sources for t in s.targets),
                        *(r for site in function.call_sites for refs in (site.callees, *site.args) for r in refs)]
                stack += self._keys(key[0], refs)
            pending = [module for module in self.loaded() if module not in seen_modules]

    def _keys(self, module: str, refs: Iterable[Ref]) -> list[FunctionKey]:
        return [(f[1], f[2]) for f in self._functions(module, refs)]

    def _solve_parameters(self, modules: list[str]) -> None:
        """Which parameters each function calls or hands to a transform, through helpers that pass
        them on: a worklist over (function, parameter), each met once per fact it gains."""
        passes: dict[tuple, list[tuple]] = defaultdict(list)  # (callee, parameter) -> the callers' parameters
        work: deque = deque()
        for module in modules:
            for function in self.summary(module).functions.values():
                for ref in function.calls:
                    for parameter in _parameters(module, ref):
                        self.called.add(parameter)
                        work.append(parameter)
                for source in function.sources:
                    for ref in source.targets:
                        for parameter in _parameters(module, ref):
                            for mode in source.modes:
                                self.sourced[parameter].setdefault(mode, _reacher(mode, module, source))
                            work.append(parameter)
                for site in function.call_sites:
                    if not any(_parameters(module, ref) for refs in site.args for ref in refs) and \
                            not any(_parameters(module, ref) for refs in site.keywords.values() for ref in refs):
                        continue
                    for callee in self._functions(module, site.callees):
                        for name, refs in self._bind(callee, site):
                            for parameter in (p for ref in refs for p in _parameters(module, ref)):
                                passes[(callee[1], callee[2], name)].append(parameter)
                                work.append((callee[1], callee[2], name))
        while work:
            parameter = work.popleft()
            called, sourced = parameter in self.called, self.sourced.get(parameter, {})
            for caller in passes.get(parameter, ()):
                changed = called and caller not in self.called
                if changed:
                    self.called.add(caller)
                for mode, reacher in sourced.items():
                    if mode not in self.sourced[caller]:
                        self.sourced[caller][mode] = reacher
                        changed = True
                if changed:
                    work.append(caller)

    def _reach(self, function: Value, mode: str, reacher: Reacher) -> None:
        key = (function[1], function[2])
        if mode not in self.reached[key]:
            self.reached[key][mode] = reacher
            self._queue.append((key, mode))

    def _seed(self, module: str, source) -> None:
        if source.receivers and not any(self.is_tracer(v) for v in self._values(module, source.receivers)):
            return
        for function in self._functions(module, source.targets):
            for mode in source.modes:
                self._reach(function, mode, _reacher(mode, module, source))

    def _seed_helper_call(self, module: str, site) -> None:
        """`hvp(energy, x, v)` with `def hvp(f, x, v): return jvp(grad(f), ...)` reaches `energy`."""
        for callee in self._functions(module, site.callees):
            for name, refs in self._bind(callee, site):
                for mode, inner in self.sourced.get((callee[1], callee[2], name), {}).items():
                    reacher = replace(inner, via=(module, site.span, site.text))
                    for function in self._functions(module, refs):
                        self._reach(function, mode, reacher)

    def _propagate(self) -> None:
        while self._queue:
            key, mode = self._queue.popleft()
            module, name = key
            function = self.function(key)
            reacher = self.reached[key][mode]
            onward = reacher if reacher.through else replace(reacher, through=key)
            for callee in self._functions(module, function.calls):
                self._reach(callee, mode, onward)
            for source in function.sources:  # an inner transform runs its function under this one too
                for callee in self._functions(module, source.targets):
                    self._reach(callee, mode, onward)
            for site in function.call_sites:  # a helper that calls what it is given
                for callee in self._functions(module, site.callees):
                    for parameter, refs in self._bind(callee, site):
                        if (callee[1], callee[2], parameter) in self.called or \
                                (callee[1], callee[2], parameter) in self.sourced:
                            for passed in self._functions(module, refs):
                                self._reach(passed, mode, onward)

    # -- what the rules ask -------------------------------------------------------------------------

    def reach_of(self, module: str, region: Region) -> dict[str, Reacher]:
        """The first reacher per mode of the function a region is in."""
        found = dict(self.reached.get((module, region.function), {})) if region.function is not None else {}
        if region.dual_level is not None and FORWARD not in found:
            found[FORWARD] = Reacher(FORWARD, "dual_level", module, region.dual_level, "dual_level()")
        return found

    def reported_in(self, given: frozenset[str]) -> dict[str, list[tuple[str, Region]]]:
        """By module: the reached regions of modules not `given` whose reaching call (or the call of
        the helper that passed the function on) is in it, so that a commit that starts
        differentiating old code is told where it does."""
        if self._reported_in is None or self._reported_in[0] != given:
            found: dict[str, list[tuple[str, Region]]] = defaultdict(list)
            for module in self.loaded():
                if module in given:
                    continue
                for region in self.summary(module).regions:
                    reporting = {(r.via or (r.module,))[0] for r in self.reach_of(module, region).values()}
                    for reporter in reporting & given:
                        found[reporter].append((module, region))
            self._reported_in = (given, dict(found))
        return self._reported_in[1]

    def graphless_callee(self, module: str, site: BackwardSite) -> Optional[tuple[str, Function]]:
        """The function, returning values it computes in a region, that a backward site's value comes from."""
        for callee in self._functions(module, site.callees):
            function = self.function((callee[1], callee[2]))
            if function is not None and function.returns_region is not None:
                return callee[1], function
        return None

    def where(self, module: str, span: Span, here: str) -> str:
        """`line 4` in the module `here`, `pkg/model.py:4` in another."""
        if module == here:
            return f"line {span.row}"
        return f"{self.modules[module].path if module in self.modules else module}:{span.row}"

    def describe(self, reacher: Reacher, here: str) -> str:
        """`jacfwd(...)` at line 31 through `helper`, as seen from the module `here`."""
        if reacher.entry == "dual_level":
            text = f"`with dual_level()` at {self.where(reacher.module, reacher.span, here)}"
        else:
            text = f"`{reacher.entry}(...)` at {self.where(reacher.module, reacher.span, here)}"
        if reacher.via is not None:
            via_module, via_span, via_text = reacher.via
            text += f", given `{_callee_text(via_text)}` at {self.where(via_module, via_span, here)}"
        if reacher.through is not None:
            module, function = reacher.through
            function = display_name(function)
            text += f" through `{function if module == here else f'{module}.{function}'}`"
        return text


def _parameters(module: str, ref: Ref) -> tuple[tuple[str, str, str], ...]:
    """The parameter a ref stands for: `f`, or `vmap(f)`, when `f` is a parameter."""
    while ref[0] == "wrap":
        ref = ref[1]
    return ((module, ref[1], ref[2]),) if ref[0] == "param" else ()


def _reacher(mode: str, module: str, source) -> Reacher:
    return Reacher(mode, source.entry, module, source.span, source.text)


def _callee_text(text: str) -> str:
    """`hvp(...)` for `hvp(energy, x, v)`."""
    return text.partition("(")[0] + "(...)"


__all__ = ["FORWARD", "REVERSE", "DROPS", "MODULE_BODY", "ModuleEntry", "Project", "Reacher", "module_name"]
