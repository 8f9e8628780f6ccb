"""What the watcher does inside a running program: it wraps the Python classes of torch's grad-mode
context managers, keeps each thread's open regions on a stack, and records a finding when

- a torch.func transform starts inside a grad-disabling region (NG001, NG002): the transform's own
  code turns grad mode (or forward grad, or inference mode) back on, and the innermost region of
  the program is a grad-disabling one;
- a grad-disabling region runs under forward mode and a value computed in it carries a tangent
  (NG004: forward mode ignores the region, pytorch issue 78961);
- a grad-disabling region runs under a tracer that drops it and records graph nodes in it (NG005,
  pytorch issue 62043); in an fx graph, read once the trace is done, only nodes that hand a value a
  gradient may follow to a node after the region, or change a buffer in place;
- torch.autograd.functional runs inside inference_mode (NG002: it returns zeros there).

`torch._C._set_grad_enabled` itself is never replaced: torch compares it by identity (export,
`make_fx(pre_dispatch=True)`) and would silently drop regions if it were. Its direct calls, and
the return of a function a `set_grad_enabled(False)` statement turned grad mode off in, are seen
with `sys.setprofile` in the thread, only while forward mode or a tracer runs or such a statement
is watched. Regions that touch only
constants change nothing, and are not findings. Imports torch.
"""
from __future__ import annotations

import ast
import contextlib
import dis
import functools
import importlib
import operator
import os
import re
import sys
import sysconfig
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.utils._contextlib as torch_contextlib
from torch.autograd import grad_mode
from torch.overrides import TorchFunctionMode

import lint_nograd
from lint_nograd.analysis.entry_points import ENTRY_POINTS, KEEPS, EntryPoint
from lint_nograd.analysis.releases import TRANSFORMS
from lint_nograd.watch.torch_names import TorchNames, fields, names_for


def resolve(dotted: str) -> Any:
    """The object a dotted name names, importing its module if needed; AttributeError or
    ImportError when it does not exist."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        module_name = ".".join(parts[:split])
        try:
            value = sys.modules.get(module_name) or importlib.import_module(module_name)
        except ImportError:
            continue
        for attribute in parts[split:]:
            value = getattr(value, attribute)
        return value
    raise ImportError(dotted)


class Place(NamedTuple):
    path: str  # as the report shows it: relative to the working folder when under it
    row: int
    col: int
    end_row: int
    end_col: int


@dataclass(frozen=True)
class Site:
    """The call in the program that runs a transform or tracer."""

    entry: str  # how messages name it: "jvp", "make_fx", "dual_level"
    place: Place
    text: str = ""  # the call as written: `jacfwd(jacrev(f))`, `tf.grad(f)`
    functional: bool = False  # torch.autograd.functional's (`jacobian`), not torch.func's


@dataclass
class Finding:
    code: str
    api: str  # the region's API: "no_grad", "set_grad_enabled(False)", "inference_mode"
    region: Place
    site: Site
    hits: int = 0


def _field(index: int, settable: bool = False) -> property:
    def set_field(region, value):
        region[index] = value
    return property(operator.itemgetter(index), set_field if settable else None)


class _Region(list):
    """One open grad-mode change of a thread: a region, or a change that ends one (enable_grad).
    A list with named fields: one is made at every region, and a list is made without running
    Python code."""

    __slots__ = ()
    manager, api, disabling, inference, frame, row = (_field(index) for index in range(6))
    pending = _field(6, settable=True)  # a set_grad_enabled(...) not (yet) used by a `with`: a statement
    watch = _field(7, settable=True)  # what is watched in it (forward mode, a tracer), else None
    reported = _field(8, settable=True)  # the transforms found started in it: one hit per region and call


_TORCH = os.path.dirname(torch.__file__) + os.sep
# model code (modules, spectral and weight norm): its regions count, as a library's do
_TORCH_MODELS = tuple(os.path.join(_TORCH, "nn", folder) + os.sep for folder in ("modules", "utils"))
_OWN = os.path.dirname(lint_nograd.__file__) + os.sep
_FUNCTIONAL = "torch.autograd.functional."
_STDLIB = tuple({os.path.normcase(sysconfig.get_paths()[key]) + os.sep for key in ("stdlib", "platstdlib")})


def _machinery(path: str) -> bool:
    """torch's own machinery, or lint_nograd: its regions are not the program's."""
    return (path.startswith(_TORCH) and not path.startswith(_TORCH_MODELS)) or path.startswith(_OWN)


def _library(path: str) -> bool:
    """Code a call to a transform passes through on its way from the program: torch and its
    companions, the standard library, lint_nograd."""
    return (path.startswith((_TORCH, _OWN)) or os.path.normcase(path).startswith(_STDLIB)
            or f"{os.sep}functorch{os.sep}" in path or f"{os.sep}torchvision{os.sep}" in path
            or path.startswith("<"))


class Watcher:
    """The hooks of one process, and what they found."""

    def __init__(self, names: TorchNames) -> None:
        self.names = names
        self.findings: dict[tuple, Finding] = {}
        self.lock = threading.Lock()
        self.local = threading.local()
        self.cwd = os.getcwd()
        self.fwad = resolve(names.forward_level.rpartition(".")[0])
        self.forward_attribute = names.forward_level.rpartition(".")[2]
        fx = resolve(names.fx_tracing.rpartition(".")[0])
        fx_name = names.fx_tracing.rpartition(".")[2]
        fx_globals = vars(fx)
        self.fx_tracing: Callable[[], bool] = (getattr(fx, fx_name) if names.fx_tracing_is_function
                                               else lambda: fx_globals[fx_name])
        self.jit_state = resolve(names.jit_tracing_state)
        dispatch_mode, proxy_key = resolve(names.dispatch_mode), resolve(names.proxy_mode_key)
        self.proxy_mode = lambda: dispatch_mode(proxy_key)
        self.unpack_dual = resolve(names.unpack_dual)
        self.is_wrapped, self.unwrap = resolve(names.is_wrapped), resolve(names.unwrap)
        self.peek_interpreter, self.pop_interpreter = resolve(names.peek_interpreter), resolve(names.pop_interpreter)
        self.transforms_folder = _TORCH + names.transforms_folder + os.sep
        self.fx_trace_code = torch.fx.Tracer.trace.__code__
        self.functional_file = resolve(_FUNCTIONAL.rstrip(".")).__file__
        self.entry_codes: dict[types.CodeType, EntryPoint] = {}
        self.entry_modules = -1
        self.places: dict[tuple, Place | None] = {}
        self.originals: list[tuple[type, str, Any]] = []
        self.open: dict[int, _Region] = {}  # the watched regions not finished yet, of every thread
        self.update_profile: Callable[[], None] = lambda: None  # set by the hooks
        self.wrappers: list[tuple[type, str, Any]] = []
        # fx graphs' regions: (code, region, site) -> (api, the nodes each pass through it recorded)
        self.traced: dict[tuple, tuple[str, list[list]]] = {}

    # -- the regions of a thread --

    def stack(self) -> list[_Region]:
        try:
            return self.local.stack
        except AttributeError:
            self.local.stack = []
            self.local.dual_levels = []
            self.local.tracers = 0
            self.local.grad_was_enabled = True
            return self.local.stack

    def pause(self, watched: _Region, enabling: _Region) -> None:
        """Grad mode on again inside a watched region (`enable_grad`): what a tracer records until
        it ends is not the region's."""
        if watched.watch[0] == "NG005":
            graph = watched.watch[3][0]
            enabling.watch = ("pause", watched, len(_nodes(graph)))

    def closed(self, manager) -> None:
        """The region `manager` opened ends (`NO_GRAD`: the innermost `no_grad`), and the
        statements that turned grad mode off inside it with it."""
        stack = self.stack()
        for index in range(len(stack) - 1, -1, -1):
            if stack[index].manager is manager:
                while len(stack) > index + 1 and stack[-1].pending:
                    self.end(stack.pop())
                self.end(stack.pop(index))
                return

    def end_statements(self, frame: types.FrameType | None = None) -> None:
        """A statement ends the one before it, as returning ends those of its function (`frame`)."""
        stack = self.stack()
        while stack and stack[-1].pending and (frame is None or stack[-1].frame is frame):
            self.end(stack.pop())

    def end(self, region: _Region) -> None:
        if region.watch is not None:
            self.finish(region)
            if region.pending:
                self.update_profile()

    def forked(self) -> None:
        """In a forked child: what the parent found is the parent's to report."""
        with self.lock:
            self.findings.clear()
            self.traced.clear()

    def found(self) -> list[Finding]:
        """The findings so far, with those of regions still open (a statement that never turned
        grad mode back on; a tracer that left it off)."""
        with self.lock:
            found = {key: Finding(f.code, f.api, f.region, f.site, f.hits) for key, f in self.findings.items()}
            still_open = list(self.open.values())
            traced = [(key, api, list(recorded)) for key, (api, recorded) in self.traced.items()]
        for region in still_open:
            code, place, site, state = region.watch
            if state.seen if code == "NG004" else _records_program_values(*state):
                found.setdefault((code, place, site), Finding(code, region.api, place, site)).hits += 1
        for key, api, recorded in traced:
            hits = sum(map(_leaves_a_gradient, recorded))
            if hits:
                found.setdefault(key, Finding(*key[:1], api, *key[1:])).hits += hits
        return list(found.values())

    def innermost(self) -> _Region | None:
        stack = self.stack()
        return stack[-1] if stack else None

    # -- NG001, NG002: a transform starts inside a region --

    def transform_entered(self, caller: types.FrameType) -> None:
        """Called where functorch's code turns grad mode, forward grad or inference mode back on
        for the function it transforms, and where torch.autograd.functional's turns grad mode on:
        it opens no level, so it never leaves inference mode (and returns zeros, pytorch issue
        128600), not even under `enable_grad()`; under no_grad it computes what it does outside."""
        if caller.f_code.co_filename == self.functional_file:
            region = next((region for region in reversed(self.stack()) if region.inference), None)
            place = region and self.region_place(region)
            site = place and self.reaching_call(caller)
            if site and not site.functional:
                return
        else:
            region = self.innermost()
            if region is None or not region.disabling or not caller.f_code.co_filename.startswith(self.transforms_folder):
                return
            place = self.region_place(region)
            site = place and self.reaching_call(caller, transforms_only=True)
        if site and site not in (region.reported or ()):
            region.reported = {*(region.reported or ()), site}
            self.record("NG002" if region.inference else "NG001", region.api, place, site)

    # -- NG004, NG005: a region inside a transformed or traced function --

    def watch(self, region: _Region) -> None:
        place = self.region_place(region)
        if place is None:
            return
        forward = getattr(self.fwad, self.forward_attribute) >= 0 and not region.inference
        site = self.reaching_call(region.frame)
        if site is None and forward:
            site = self.dual_level_site()
        if site is None or site.entry in _KEEPING:
            return
        if forward:
            mode = _TangentWatch(self, region.frame if region.pending else None)
            mode.__enter__()
            region.watch = ("NG004", place, site, mode)
        else:
            graph, count = self.recording_graph(region.frame)
            if graph is None:
                return
            region.watch = ("NG005", place, site, (graph, count, []))
        with self.lock:
            self.open[id(region)] = region
        if region.pending:  # a statement's region ends where its function returns: watch for that
            self.update_profile()

    def finish(self, region: _Region) -> None:
        if region.watch[0] == "pause":
            _, watched, start = region.watch
            graph, _, skipped = watched.watch[3]
            skipped.append(range(start, len(_nodes(graph))))
            return
        with self.lock:
            self.open.pop(id(region), None)
        code, place, site, state = region.watch
        region.watch = None
        if code == "NG004":
            with contextlib.suppress(Exception):  # a mode the program left open above ours
                state.__exit__(None, None, None)
            changed = state.seen
        elif isinstance(state[0], torch.fx.Graph):  # what uses its nodes is known once the trace is done
            nodes = _region_nodes(*state)
            if _computes_on_program_values(nodes):
                with self.lock:
                    self.traced.setdefault((code, place, site), (region.api, []))[1].append(nodes)
            return
        else:
            changed = _records_program_values(*state)
        if changed:
            self.record(code, region.api, place, site)

    def recording_graph(self, frame: types.FrameType) -> tuple[Any, int]:
        """The graph a tracer that drops regions is recording now, and its node count: jit.trace's,
        make_fx's (not with pre_dispatch, which keeps regions), symbolic_trace's."""
        state = self.jit_state()
        if state is not None:
            graph = state.graph()
            return graph, len(_nodes(graph))
        proxy = self.proxy_mode()
        if proxy is not None:
            if getattr(proxy, "pre_dispatch", False):
                return None, 0
            return proxy.tracer.graph, len(_nodes(proxy.tracer.graph))
        if self.fx_tracing():
            tracer = self.fx_tracer(frame)
            # make_fx's tracer, with pre_dispatch (its proxy mode is not on the dispatch stack then)
            if tracer is not None and not isinstance(tracer, self.make_fx_tracer()):
                return tracer.graph, len(_nodes(tracer.graph))
        return None, 0

    @functools.lru_cache(maxsize=None)  # noqa: B019 (one watcher a process)
    def make_fx_tracer(self) -> type:
        return resolve(self.names.make_fx_tracer)

    def fx_tracer(self, frame: types.FrameType | None):
        while frame is not None:
            if frame.f_code is self.fx_trace_code:
                return frame.f_locals.get("self")
            frame = frame.f_back
        return None

    # -- places --

    def reaching_call(self, frame: types.FrameType, transforms_only: bool = False) -> Site | None:
        """The innermost call of a transform or tracer in the program's code, outward from `frame`:
        the first frame outside torch past the frames of an entry point. With `transforms_only`,
        `frame` is inside functorch and only a torch.func transform counts."""
        codes = self.entry_points()
        found = None
        while frame is not None:
            entry = codes.get(frame.f_code)
            if entry is not None:
                found = entry
            elif not _library(frame.f_code.co_filename):
                if found is not None:
                    if transforms_only and (found.name not in TRANSFORMS or "torch.func." + found.name
                                            not in found.qualified_names):
                        return None
                    return self.site(frame, found)
                if transforms_only:
                    return None
            frame = frame.f_back
        return None

    def site(self, frame: types.FrameType, entry: EntryPoint) -> Site | None:
        """The call in `frame` that runs `entry`, named as written, as `check` names it: the
        transform of `jacfwd(jacrev(f))(x)` is `jacfwd(jacrev(f))` (hessian's frames say jacfwd
        too), and `tf.hessian(g)(x)` is `hessian`."""
        key = (frame.f_code, frame.f_lasti, "call")
        if key not in self.places:
            place = self.place(frame, frame.f_lineno)
            written = place and _written_call(frame.f_code, frame.f_lasti)
            name, text = entry.name, ""
            if written:
                (row, col, end_row, end_col), text, callee = written
                place = Place(place.path, row, col, end_row, end_col)
                name = next((e.name for e in ENTRY_POINTS if callee == e.name or callee.endswith("." + e.name)), name)
            functional = any(name.startswith(_FUNCTIONAL) for name in entry.qualified_names)
            self.places[key] = place and Site(name, place, text, functional)
        return self.places[key]

    def dual_level_site(self) -> Site | None:
        self.stack()
        place = next((place for place in reversed(self.local.dual_levels) if place is not None), None)
        return Site("dual_level", place) if place else None

    def entry_points(self) -> dict[types.CodeType, EntryPoint]:
        """Code object -> entry point, for every entry point of the table whose module is loaded
        (with the functions nested in it: `grad(f)` returns one)."""
        if self.entry_modules != len(sys.modules):
            self.entry_modules = len(sys.modules)
            for entry in ENTRY_POINTS:
                for name in entry.qualified_names:
                    if name.rpartition(".")[0].split(".")[0] not in sys.modules:
                        continue
                    try:
                        function = resolve(name)
                    except (ImportError, AttributeError):
                        continue
                    for code in _codes(function):
                        self.entry_codes.setdefault(code, entry)
        return self.entry_codes

    def region_place(self, region: _Region) -> Place | None:
        """Where `check` would report a region: the `with` item, the statement, the decorator;
        None for a region of torch's machinery or of lint_nograd."""
        frame = region.frame
        if _where_defined(frame.f_code) in _DECORATOR_CODES:
            function = frame.f_locals.get("func")
            return self.decorator_place(function, region.api) if function is not None else None
        return self.place(frame, region.row, region.api)

    def place(self, frame: types.FrameType, row: int, api: str = "") -> Place | None:
        code = frame.f_code
        key = (code, frame.f_lasti, row)
        if key not in self.places:
            path = code.co_filename
            if _machinery(path):
                self.places[key] = None
            else:
                self.places[key] = Place(self.shown(path), *_columns(code, frame.f_lasti, row, api))
        return self.places[key]

    def decorator_place(self, function, api: str) -> Place | None:
        code = getattr(inspect_unwrap(function), "__code__", None)
        if code is None or _machinery(code.co_filename):
            return None
        key = (code, "decorator", api)
        if key not in self.places:
            word = api.partition("(")[0]
            row, col, end = code.co_firstlineno, 1, 1
            for number in range(code.co_firstlineno, code.co_firstlineno + 50):
                line = linecache_line(code.co_filename, number)
                if line.lstrip().startswith("def ") or line.lstrip().startswith("async def "):
                    break
                if line.lstrip().startswith("@") and word in line:
                    text = line.rstrip()
                    row, col, end = number, text.index("@") + 2, len(text) + 1
                    break
            self.places[key] = Place(self.shown(code.co_filename), row, col, row, end)
        return self.places[key]

    def shown(self, path: str) -> str:
        relative = os.path.relpath(path, self.cwd) if os.path.isabs(path) else path
        return path if relative.startswith(os.pardir) else relative

    def record(self, code: str, api: str, region: Place, site: Site) -> None:
        key = (code, region, site)
        with self.lock:
            finding = self.findings.get(key)
            if finding is None:
                finding = self.findings[key] = Finding(code, api, region, site)
            finding.hits += 1

    # -- installing --

    def install(self) -> None:
        """Wrap the grad-mode classes (again, after `uninstall`)."""
        if not self.originals:
            self.wrappers = _hooks(self)
            self.originals = [(cls, name, cls.__dict__[name]) for cls, name, _ in self.wrappers]
        for cls, name, wrapper in self.wrappers:
            setattr(cls, name, wrapper)

    def uninstall(self) -> None:
        """Give the grad-mode classes their own methods back (between two regions)."""
        for cls, name, original in reversed(self.originals):
            setattr(cls, name, original)


_KEEPING = {entry.name for entry in ENTRY_POINTS if entry.modes == (KEEPS,)}
# torch's decorator wrappers, by where they are defined: the region is the decorator's (torch 2.15
# gives each wrapper a code object of its own, named after the context manager)
_DECORATOR_CODES: set[tuple[str, int]] = set()


def _where_defined(code: types.CodeType) -> tuple[str, int]:
    return code.co_filename, code.co_firstlineno


def _codes(function) -> list[types.CodeType]:
    function = inspect_unwrap(function)
    code = getattr(function, "__code__", None)
    found, todo = [], [code] if code is not None else []
    while todo:
        code = todo.pop()
        found.append(code)
        todo += [const for const in code.co_consts if isinstance(const, types.CodeType)]
    return found


def inspect_unwrap(function):
    while hasattr(function, "__wrapped__"):
        function = function.__wrapped__
    return getattr(function, "__func__", function)


def linecache_line(path: str, row: int) -> str:
    import linecache

    return linecache.getline(path, row)


def _columns(code: types.CodeType, lasti: int, row: int, api: str = "") -> tuple[int, int, int, int]:
    """(row, col, end_row, end_col), 1-based: of the region's API call on `row` when the line
    spells it (the `with` item, as `check` reports it); else of the instruction at `lasti` when
    Python knows it (3.11 and later) and it is on `row`; else the line from its first non-blank
    character."""
    text = linecache_line(code.co_filename, row).rstrip()
    if api:
        match = re.search(rf"[\w.]*\b{api.partition('(')[0]}\b(\s*\([^()]*\))?", text)
        if match:
            return row, match.start() + 1, row, match.end() + 1
    positions = getattr(code, "co_positions", None)
    if positions is not None:
        for index, (start, end, col, end_col) in enumerate(positions()):
            if index == lasti // 2:
                if start == row and col is not None and end_col is not None:
                    return start, col + 1, end or start, end_col + 1
                break
    return row, len(text) - len(text.lstrip()) + 1, row, len(text) + 1


def _written_call(code: types.CodeType, lasti: int) -> tuple[tuple[int, int, int, int], str, str] | None:
    """The call the instruction at `lasti` makes, as written: its place, its text and its callee's
    dotted name; for `T(f)(x)` those of `T(f)`, the transform the program applies. None where
    Python does not know the instruction's columns (before 3.11)."""
    positions = list(getattr(code, "co_positions", lambda: ())())
    if lasti // 2 >= len(positions):
        return None
    row, end_row, col, end_col = positions[lasti // 2]
    if None in (row, end_row, col, end_col):
        return None
    lines = [linecache_line(code.co_filename, number).encode() for number in range(row, end_row + 1)]
    if not lines[0]:
        return None
    text = lines[0][col:end_col] if row == end_row else b"".join([lines[0][col:], *lines[1:-1], lines[-1][:end_col]])
    try:
        call = ast.parse(b"(" + text + b")", mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(call, ast.Call):
        return None
    if isinstance(call.func, ast.Call):
        call = call.func

    def at(line: int, column: int) -> tuple[int, int]:  # in the parsed text -> in the file, 1-based
        return row + line - 1, (col + column - 1 if line == 1 else column) + 1

    start, end = at(call.lineno, call.col_offset), at(call.end_lineno, call.end_col_offset)
    written = ast.get_source_segment("(" + text.decode(errors="replace") + ")", call) or ""
    return (*start, *end), " ".join(written.split()), _dotted(call.func)


def _dotted(node: ast.expr) -> str:
    """`tf.hessian` for the callee `tf.hessian`; "" for one that is no dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


_RETURNS = frozenset(dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap)


def _returned(frame: types.FrameType) -> bool:
    """Whether a frame's function has returned (its last instruction was a return)."""
    return frame.f_code.co_code[frame.f_lasti] in _RETURNS


def _nodes(graph) -> list:
    """The nodes of an fx Graph or of a TorchScript graph, in order."""
    return list(graph.nodes) if isinstance(graph, torch.fx.Graph) else list(graph.nodes())


def _region_nodes(graph, count: int, skipped: list[range]) -> list:
    """The nodes a region recorded: after the first `count`, but those `skipped` (grad mode on)."""
    return [node for index, node in enumerate(_nodes(graph)[count:], count) if not any(index in gap for gap in skipped)]


def _computes_on_program_values(nodes: list) -> bool:
    """Whether fx nodes compute on an input, a value recorded before, or an attribute of the module."""
    added = set(nodes)
    return any(node.op == "get_attr" or any(used not in added for used in node.all_input_nodes)
               for node in nodes if node.op != "output")


# ops whose result carries no gradient: comparisons, indices, tests
_NO_GRADIENT = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin", "argsort", "bucketize", "searchsorted",
                          "isnan", "isinf", "isfinite", "logical_and", "logical_or", "logical_not", "logical_xor"})


def _leaves_a_gradient(nodes: list) -> bool:
    """Once the trace is done: whether a region's fx nodes hand a value that may carry a gradient to
    a node after it (or to the output), or change one of the program's in place. Nodes nothing after
    the region uses (a metric stored on the module) and what only integer or boolean results feed
    (`argmax`, a mask, `mask.float()`) change no traced gradient when the tracer drops the region."""
    carries: set = set()
    for node in nodes:
        name = _op_name(node)
        if _in_place(name) and node.args:  # `buffer.mul_(...).add_(...)`: the program's value, changed
            changed = node.args[0]
            while changed in nodes and _in_place(_op_name(changed)) and changed.args:
                changed = changed.args[0]
            if changed not in nodes or changed.op == "get_attr":
                return True
        dtype = getattr(node.meta.get("val", node.meta.get("tensor_meta")), "dtype", None)
        if (name in _NO_GRADIENT or name == "getattr" and node.args[1:2] in (("dtype",), ("shape",), ("device",))
                or dtype is not None and not (dtype.is_floating_point or dtype.is_complex)):
            continue
        if node.op == "get_attr" and _constant(node):
            continue
        if node.op == "get_attr" or any(used in carries or used not in nodes for used in node.all_input_nodes):
            carries.add(node)
            if any(user not in nodes for user in node.users):
                return True
    return False


def _op_name(node) -> str:
    """`mul_` for `x.mul_(2)`, `torch.mul_` and aten's `mul_.Tensor`; "" for a submodule's call."""
    if node.op == "call_module":
        return ""
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "").partition(".")[0]


def _in_place(name: str) -> bool:
    return name.endswith("_") and not name.endswith("__")


def _constant(node) -> bool:
    """A buffer of the module symbolic_trace traced (a tensor that requires no grad, no Parameter)."""
    module = node.graph.owning_module
    if module is None or "val" in node.meta:  # (make_fx's constants: which of them are parameters, unknown)
        return False
    try:
        value = operator.attrgetter(node.target)(module)
    except AttributeError:
        return False
    return isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) and not value.requires_grad


def _records_program_values(graph, count: int, skipped: list[range]) -> bool:
    """Whether the nodes recorded after the first `count` (but those `skipped`, recorded with grad
    mode on again) compute on the program's values: an input of the traced function, a value
    recorded before the region, or an attribute of the traced module. Nodes that only make
    constants (`torch.ones(3) * 2`) change nothing."""
    nodes = _nodes(graph)
    new = [node for index, node in enumerate(nodes[count:], count) if not any(index in gap for gap in skipped)]
    if isinstance(graph, torch.fx.Graph):
        added = set(new)
        return any(node.op == "get_attr" or any(used not in added for used in node.all_input_nodes)
                   for node in new if node.op != "output")
    # TorchScript nodes, by value, with those nested in blocks: a submodule's call is recorded as a
    # prim::TracedModuleForward whose block computes on the program's values
    new = [*_nested(new)]
    made = {value.debugName() for node in new for value in node.outputs()}
    made |= {value.debugName() for node in new for block in node.blocks() for value in block.inputs()}
    return any(node.kind() in ("prim::GetAttr", "prim::TracedAttr")
               or any(value.debugName() not in made for value in node.inputs()) for node in new)


def _nested(nodes):
    for node in nodes:
        yield node
        for block in node.blocks():
            yield from _nested(block.nodes())


class _TangentWatch(TorchFunctionMode):
    """Inside a region under forward mode: does a value computed there carry a tangent?"""

    def __init__(self, watcher: Watcher, statement: types.FrameType | None = None) -> None:
        super().__init__()
        self.watcher = watcher
        self.statement = statement  # the frame of a statement's region: it ends when it returns
        self.seen = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        # not under an enable_grad inside the region, nor after its function returned
        if not self.seen and not torch.is_grad_enabled() and (self.statement is None or not _returned(self.statement)):
            self.seen = self.carries_tangent(result)
        return result

    def carries_tangent(self, value) -> bool:
        if isinstance(value, (tuple, list)):
            return any(self.carries_tangent(item) for item in value)
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() and not value.is_complex():
            return False
        w = self.watcher
        level = getattr(w.fwad, w.forward_attribute)
        # a tangent of an outer jvp sits under the wrappers of the levels above it (hessian's grad)
        with contextlib.ExitStack() as popped:
            while True:
                with contextlib.suppress(RuntimeError):
                    if w.unpack_dual(value, level=level).tangent is not None:
                        return True
                if not w.is_wrapped(value) or w.peek_interpreter() is None:
                    return False
                value = w.unwrap(value)
                popped.enter_context(w.pop_interpreter())


NO_GRAD = object()  # the manager of a no_grad region: its own __enter__ and __exit__ are not wrapped


def _hooks(w: Watcher) -> list[tuple[type, str, Any]]:
    """(class, method, wrapper) for every grad-mode context manager the watcher wraps. The wrappers
    run at every region of the program: what they do there is a few lookups, bound here."""
    from torch.autograd import forward_ad

    enable_grad, set_grad_enabled = grad_mode.enable_grad, grad_mode.set_grad_enabled
    inference_mode, set_fwd_grad_enabled = grad_mode.inference_mode, resolve(w.names.set_fwd_grad_enabled)
    getframe, local, Region = sys._getframe, w.local, _Region
    forward_globals, forward_name = vars(w.fwad), w.forward_attribute
    fx_tracing, jit_state = w.fx_tracing, w.jit_state
    fx_module, _, fx_name = w.names.fx_tracing.rpartition(".")
    fx_globals, fx_flag = vars(resolve(fx_module)), None if w.names.fx_tracing_is_function else fx_name
    _DECORATOR_CODES.update(
        _where_defined(code) for function in (torch_contextlib.context_decorator, torch_contextlib._wrap_generator)
        for code in _codes(function)[1:])
    # no_grad goes through torch.set_grad_enabled: in its __enter__, then in its __exit__
    no_grad_enter, no_grad_exit = grad_mode.no_grad.__enter__.__code__, grad_mode.no_grad.__exit__.__code__
    clones = {cls.clone.__code__ for cls in (set_grad_enabled, inference_mode, torch_contextlib._DecoratorContextManager)}

    def opened(manager, api, disabling, inference, frame, pending=False):
        try:
            stack = local.stack
        except AttributeError:
            stack = w.stack()
        region = Region((manager, api, disabling, inference, frame, frame.f_lineno, pending, None, None))
        if stack and not disabling and stack[-1].watch is not None:
            w.pause(stack[-1], region)
        stack.append(region)
        if disabling and misreading():
            w.watch(region)

    def misreading():
        """Whether forward mode or a tracer runs now: only then is a region watched."""
        return (forward_globals[forward_name] >= 0 or (fx_globals[fx_flag] if fx_flag else fx_tracing())
                or jit_state() is not None)

    def closed(manager):
        try:
            stack = local.stack
        except AttributeError:
            return
        if stack and stack[-1].manager is manager and stack[-1].watch is None:
            stack.pop()
        else:
            w.closed(manager)

    def entering_transform(caller):
        """A transform turns grad mode back on: inside a region?"""
        try:
            stack = local.stack
        except AttributeError:
            return
        if stack and (stack[-1].disabling or caller.f_code.co_filename == w.functional_file):
            w.transform_entered(caller)

    def exit_of(cls):
        original = cls.__exit__

        def __exit__(self, *exc):
            closed(self)
            return original(self, *exc)
        return __exit__

    enable_grad_enter = enable_grad.__enter__

    def enable_grad__enter__(self):
        caller = getframe(1)
        entering_transform(caller)
        enable_grad_enter(self)
        opened(self, "enable_grad", False, False, caller)

    set_grad_init = set_grad_enabled.__init__

    def set_grad_enabled__init__(self, mode):
        set_grad_init(self, mode)
        caller = getframe(1)
        code = caller.f_code
        if code is no_grad_enter:
            opened(NO_GRAD, "no_grad", True, False, caller.f_back)
            return
        if code is no_grad_exit:
            closed(NO_GRAD)
            return
        if code in clones:  # a decorated function's call: the decorator's region
            caller = caller.f_back
        try:
            stack = local.stack
        except AttributeError:
            stack = w.stack()
        if stack and stack[-1].pending:
            w.end_statements()
        if mode:
            opened(self, "set_grad_enabled(True)", False, False, caller, True)
        else:
            opened(self, "set_grad_enabled(False)", True, False, caller, True)

    set_grad_enter = set_grad_enabled.__enter__

    def set_grad_enabled__enter__(self):
        set_grad_enter(self)
        try:
            stack = local.stack
        except AttributeError:
            stack = w.stack()
        if stack and stack[-1].manager is self and stack[-1].pending:
            stack[-1].pending = False  # the `with` of a set_grad_enabled(...): a region with an end
            if stack[-1].watch is not None:
                if stack[-1].watch[0] == "NG004":
                    stack[-1].watch[3].statement = None
                update_profile()
        else:
            opened(self, f"set_grad_enabled({bool(self.mode)})", not self.mode, False, getframe(1))

    set_grad_call = set_grad_enabled.__call__

    def set_grad_enabled__call__(self, function):
        w.closed(self)  # used as a decorator: its __init__ changed nothing for good
        return set_grad_call(self, function)

    inference_enter = inference_mode.__enter__

    def inference_mode__enter__(self):
        caller = getframe(1)
        if not self.mode:
            entering_transform(caller)
        inference_enter(self)
        if self.mode:
            opened(self, "inference_mode", True, True, caller)
        else:
            opened(self, "inference_mode(False)", False, False, caller)

    fwd_init = set_fwd_grad_enabled.__init__

    def set_fwd_grad_enabled__init__(self, mode):
        if mode:
            entering_transform(getframe(1))
        fwd_init(self, mode)

    fwd_enter = set_fwd_grad_enabled.__enter__

    def set_fwd_grad_enabled__enter__(self):
        fwd_enter(self)
        opened(self, "forward grad", False, False, getframe(1))

    dual_enter, dual_exit = forward_ad.dual_level.__enter__, forward_ad.dual_level.__exit__
    c_set_grad_enabled, is_grad_enabled = torch._C._set_grad_enabled, torch.is_grad_enabled

    def profile(frame, event, argument):
        """Under forward mode, and while a statement's region is watched: what no context manager
        shows, grad mode set by calling `torch._C._set_grad_enabled` itself (library code does),
        and the return of a function that turned it off with a statement."""
        if event == "c_call":
            if argument is c_set_grad_enabled:
                local.grad_was_enabled = is_grad_enabled()
        elif event == "c_return":
            if argument is c_set_grad_enabled and not _machinery(frame.f_code.co_filename):
                stack = w.stack()
                if stack and stack[-1].pending:
                    w.end_statements()
                # a region where it turns grad mode off: not where it was off already (jit.trace
                # checks its trace with grad mode off), nor where it sets back what it found
                if local.grad_was_enabled and not is_grad_enabled():
                    opened(object(), "_set_grad_enabled(False)", True, False, frame, True)
        elif event == "return":
            stack = local.stack
            if stack and stack[-1].pending and stack[-1].frame is frame:
                w.end_statements(frame)

    def dual_level__enter__(self):
        caller = getframe(1)
        entering_transform(caller)
        level = dual_enter(self)
        w.stack()
        place = None if _library(caller.f_code.co_filename) else w.place(caller, caller.f_lineno)
        local.dual_levels.append(place)
        update_profile()
        return level

    def dual_level__exit__(self, *exc):
        w.stack()
        if local.dual_levels:
            local.dual_levels.pop()
            update_profile()
        return dual_exit(self, *exc)

    def tracing(original):
        """A tracer that drops regions runs `original`: a direct `_set_grad_enabled(False)` in what
        it traces opens a region no context manager shows, seen only while the thread is profiled."""
        @functools.wraps(original)
        def trace(*args, **kwargs):
            w.stack()
            local.tracers += 1
            update_profile()
            try:
                return original(*args, **kwargs)
            finally:
                local.tracers -= 1
                update_profile()
        return trace

    def update_profile():
        """Profile the thread while forward mode or a tracer runs, or a statement's region is
        watched, unless a profiler of the program does."""
        needed = (bool(local.dual_levels) or local.tracers > 0
                  or any(region.pending and region.watch for region in local.stack))
        current = sys.getprofile()
        if needed and current is None:
            sys.setprofile(profile)
        elif not needed and current is profile:
            sys.setprofile(None)

    w.update_profile = update_profile

    hooks = [
        (enable_grad, "__enter__", enable_grad__enter__), (enable_grad, "__exit__", exit_of(enable_grad)),
        (set_grad_enabled, "__init__", set_grad_enabled__init__),
        (set_grad_enabled, "__enter__", set_grad_enabled__enter__),
        (set_grad_enabled, "__exit__", exit_of(set_grad_enabled)),
        (set_grad_enabled, "__call__", set_grad_enabled__call__),
        (inference_mode, "__enter__", inference_mode__enter__),
        (inference_mode, "__exit__", exit_of(inference_mode)),
        (set_fwd_grad_enabled, "__init__", set_fwd_grad_enabled__init__),
        (set_fwd_grad_enabled, "__enter__", set_fwd_grad_enabled__enter__),
        (set_fwd_grad_enabled, "__exit__", exit_of(set_fwd_grad_enabled)),
        (forward_ad.dual_level, "__enter__", dual_level__enter__),
        (forward_ad.dual_level, "__exit__", dual_level__exit__),
    ]
    # fx's Tracer.trace runs symbolic_trace's and make_fx's tracing; jit.trace goes through these two
    jit_trace = importlib.import_module("torch.jit._trace")
    hooks += [(owner, name, tracing(owner.__dict__[name]))
              for owner, name in ((torch.fx.Tracer, "trace"), (jit_trace, "_trace_impl"),
                                  (jit_trace, "trace_module"), (torch.jit, "trace_module"))
              if name in owner.__dict__]
    # TorchScript compiles a context manager's methods from their source: it finds the original's
    # through __wrapped__, and a scripted function keeps its region
    return [(cls, name, functools.wraps(cls.__dict__[name])(wrapper)) for cls, name, wrapper in hooks]


WATCHER: Watcher | None = None


def install() -> Watcher:
    """Wrap torch's grad-mode classes (once per process) and return the watcher."""
    global WATCHER
    if WATCHER is None:
        WATCHER = Watcher(names_for(torch.__version__))
        WATCHER.install()
    return WATCHER


def unresolved(names: TorchNames) -> list[str]:
    """The names of a row that do not resolve on the installed torch."""
    missing = []
    for field, dotted in fields(names).items():
        try:
            resolve(dotted)
        except (ImportError, AttributeError):
            missing.append(f"{field}: {dotted}")
    return missing
