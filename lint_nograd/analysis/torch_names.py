"""The PyTorch names the rules know, by every qualified name they are reachable under."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# The cut `check` knows: lint_nograd's, and any function named `stop_gradient` (a project's own helper).
STOP_GRADIENT = "stop_gradient"
SHIM_NAMES = frozenset({"lint_nograd.stop_gradient", "lint_nograd.shim.stop_gradient"})

# Grad-mode context managers. `torch.autograd.grad_mode` is where they are defined.
_GRAD_MODE_MODULES = ("torch", "torch.autograd", "torch.autograd.grad_mode")
NO_GRAD = frozenset(f"{m}.no_grad" for m in _GRAD_MODE_MODULES)
ENABLE_GRAD = frozenset(f"{m}.enable_grad" for m in _GRAD_MODE_MODULES)
SET_GRAD_ENABLED = frozenset(f"{m}.set_grad_enabled" for m in _GRAD_MODE_MODULES)
INFERENCE_MODE = frozenset(f"{m}.inference_mode" for m in _GRAD_MODE_MODULES)

# The text a file must contain for any grad-disabling region to be spelled in it: the engine's gate.
GRAD_MODE_APIS = NO_GRAD | ENABLE_GRAD | SET_GRAD_ENABLED | INFERENCE_MODE
GRAD_DISABLING_WORDS = ("no_grad", "set_grad_enabled", "inference_mode")
GRAD_MODE_WORDS = (*GRAD_DISABLING_WORDS, "enable_grad")

# Automatic-differentiation transforms, by the name they have in torch.func.
REVERSE_MODE = frozenset({"grad", "grad_and_value", "vjp", "jacrev"})
FORWARD_MODE = frozenset({"jvp", "jacfwd", "hessian", "linearize"})  # hessian = jacfwd(jacrev(f))
AD_TRANSFORMS = REVERSE_MODE | FORWARD_MODE
# These differentiate when called, `vjp(f, x)`; the others return a function to call.
IMMEDIATE_TRANSFORMS = frozenset({"vjp", "jvp", "linearize"})
_TRANSFORM_PREFIXES = ("torch.func.", "functorch.", "torch._functorch.")

# torch.autograd.functional's entry points, by their last name (no `torch.func` counterpart shares its semantics).
FUNCTIONAL = frozenset({"jacobian", "hessian", "vjp", "jvp", "vhp", "hvp"})
_FUNCTIONAL_PREFIX = "torch.autograd.functional."


def in_place(method: str) -> bool:
    """Whether a tensor method's name says it changes the tensor in place: `add_`, `relu_`; not
    `_private` or `__dunder__`."""
    return method.endswith("_") and not method.startswith("_")


VMAP = frozenset({"torch.vmap", "torch.func.vmap", "functorch.vmap", "torch._functorch.apis.vmap"})
# `functionalize(f)` runs `f` (without in-place changes): a wrapper, as `vmap(f)` is
FUNCTIONALIZE = frozenset({"torch.func.functionalize", "functorch.functionalize",
                           "torch._functorch.eager_transforms.functionalize"})

# Tracers that drop grad-mode changes from the graph they record (pytorch issue 62043).
SYMBOLIC_TRACE = frozenset({"torch.fx.symbolic_trace", "torch.fx._symbolic_trace.symbolic_trace"})
JIT_TRACE = frozenset({"torch.jit.trace", "torch.jit._trace.trace"})
MAKE_FX = frozenset({"torch.fx.experimental.proxy_tensor.make_fx", "functorch.make_fx",
                     "functorch.compile.make_fx"})

AUTOGRAD_GRAD = frozenset({"torch.autograd.grad"})
AUTOGRAD_BACKWARD = frozenset({"torch.autograd.backward"})

PARTIAL = frozenset({"functools.partial"})


def transform_name(qualified_names: frozenset[str]) -> str | None:
    """`grad` for `torch.func.grad`, `functorch.grad` or `functorch._src.eager_transforms.grad`."""
    for name in qualified_names:
        if name.startswith(_TRANSFORM_PREFIXES):
            last = name.rpartition(".")[2]
            if last in AD_TRANSFORMS:
                return last
    return None


def functional_name(qualified_names: frozenset[str]) -> str | None:
    """`jacobian` for `torch.autograd.functional.jacobian`."""
    for name in qualified_names:
        if name.startswith(_FUNCTIONAL_PREFIX) and name[len(_FUNCTIONAL_PREFIX):] in FUNCTIONAL:
            return name[len(_FUNCTIONAL_PREFIX):]
    return None


# The words a file must use for each rule to be possible in it: every spelling the semantic model
# resolves (aliases and star imports included) uses one of these words somewhere (see `_uses`).
_FAMILIES = {
    "transform": ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize"),
    "functional": ("jacobian", "hessian", "vjp", "jvp", "vhp", "hvp"),
    "dual": ("dual_level",),
    "tracer": ("symbolic_trace", "trace", "trace_module"),
    "make_fx": ("make_fx",),
    "fx_based": ("prepare_fx", "prepare_qat_fx", "create_feature_extractor"),
    "backward": ("backward",),
    "autograd": ("grad", "backward"),  # torch.autograd.grad(...), torch.autograd.backward(...)
}
_RULE_NEEDS = {  # a rule is possible when one of its families of words is used in the text
    "NG001": ("transform",), "NG002": ("transform", "functional"), "NG003": ("backward", "autograd"),
    "NG004": ("transform", "functional", "dual"), "NG005": ("tracer", "make_fx", "fx_based"),
    "NG006": ("transform", "functional"),
}
# The families of words a file needs to apply any transform or tracer (entry_points.ENTRY_POINTS).
_APPLIES = ("transform", "functional", "dual", "tracer", "make_fx", "fx_based")


def names_grad_disabling_api(data: bytes) -> bool:
    return any(word.encode() in data for word in GRAD_DISABLING_WORDS)


# What a function or class making a grad mode when called is written with (`SemanticModel.region_makers`):
# a context manager of contextlib or a class's `__enter__`, a decorator's wrapper (`@wraps(fn)`, or
# `def wrapper(*args, **kwargs)`), a function returning `torch.no_grad()`, a class extending one, a
# generator yielding in a region (a loop over it runs there)
_MAY_MAKE = re.compile(rb"contextmanager|__enter__|\bwraps\b|\bdef\s+\w+\s*\(\s*\*\w|\byield\b|"
                       rb"\breturn\s+[\w.]*\b(?:no_grad|inference_mode|set_grad_enabled|"
                       rb"enable_grad)\s*\(|\bclass\s+\w+\s*\([^)]*\b(?:no_grad|inference_mode|set_grad_enabled|enable_grad)\b")


def may_make_regions(data: bytes) -> bool:
    """Whether a file naming a grad-mode API may define a function or class that makes a region
    when another module calls it (`with utils.frozen():`): only those are parsed to find out."""
    return _MAY_MAKE.search(data) is not None


class Scan:
    """A file's text as the gate reads it: each family of words, and the words the file names
    a module of torch.func's with, looked for once."""

    def __init__(self, data: bytes):
        self.data = _with_line_feeds(data)
        self.regions = names_grad_disabling_api(self.data)  # every finding needs a region
        self._families: dict[str, bool] = {}
        self._func_words: Optional[frozenset[bytes]] = None  # None: not looked for yet
        self._imports: Optional[list] = None

    @property
    def imports(self) -> list[tuple[Optional[bytes], bytes]]:
        """The import statements, read once (`import_statements`)."""
        if self._imports is None:
            self._imports = import_statements(self.data)
        return self._imports

    def has(self, family: str) -> bool:
        found = self._families.get(family)
        if found is None:
            if family == "autograd" and b"autograd" not in self.data:
                found = False
            else:
                found = _uses(self, _FAMILIES[family], module_evidence=family in ("transform", "functional"))
            self._families[family] = found
        return found

    def possible_codes(self, codes: frozenset[str]) -> frozenset[str]:
        """The codes among `codes` that some word of the text makes possible (NG000 only alongside
        another one: a file no rule can apply to is not parsed); the region is `regions`."""
        possible = frozenset(code for code in codes if code in _RULE_NEEDS and any(map(self.has, _RULE_NEEDS[code])))
        return possible | (codes & {"NG000"}) if possible else possible

    def index(self) -> "TextIndex":
        data = self.data
        return TextIndex(self.regions, any(map(self.has, _APPLIES)),
                         _calls_backward(data),
                         _imports(self.imports), b"register_forward" in data)

    def names_a_func_module(self, word: bytes) -> bool:
        """`func.grad`, `functorch.grad`, `from torch.func import (jacfwd, grad)`, or an alias or a
        star import of such a module, which may spell any of its names."""
        if self._func_words is None:
            self._func_words = _func_module_words(self.data, self.imports)
        return self._func_words is _ANY_WORD or word in self._func_words


# `torch.autograd.grad(`, `from torch.autograd import grad`: what NG003 looks at, with `y.backward(`
_AUTOGRAD_FUNCTION = re.compile(rb"autograd\b[^\n]*\b(?:grad|backward)\b")


def _calls_backward(data: bytes) -> bool:
    at = data.find(b"backward")
    while at >= 0:
        after = data[at + 8:at + 40].lstrip(b" \t")
        if after.startswith(b"(") and data[max(0, at - 80):at].rstrip(b" \t\\\n").endswith(b"."):
            return True
        at = data.find(b"backward", at + 8)
    return b"autograd" in data and _AUTOGRAD_FUNCTION.search(data) is not None


@dataclass(frozen=True)
class TextIndex:
    """What a file's text says without parsing it: enough to tell which files the project needs."""

    regions: bool  # it names a grad-disabling API
    applies: bool  # it may apply a transform or a tracer
    backward: bool  # it may call backward (`.backward(`, or autograd's `grad` or `backward`)
    imports: tuple[str, ...]  # the modules its imports name, relative ones with their dots
    hooks: bool = False  # it may register a forward hook (on a model it is given, say)
    # what it defines that makes a grad mode when called (`SemanticModel.region_makers`): (name, api,
    # enabled, whether it also decorates[, the argument entering it]) each; found by parsing, only
    # where `may_make_regions` says
    makers: tuple[tuple, ...] = ()

    def to_json(self) -> list:
        return [self.regions, self.applies, self.backward, list(self.imports), self.hooks,
                [[*m[:4], list(m[4])] if len(m) == 5 else list(m) for m in self.makers]]

    @classmethod
    def from_json(cls, data: list) -> "TextIndex":
        if not isinstance(data, list):
            raise TypeError("not a text index")
        regions, applies, backward, imports, hooks, makers = data
        if not all(isinstance(flag, bool) for flag in (regions, applies, backward, hooks)) or \
                not all(isinstance(name, str) for name in imports) or not all(map(_is_maker, makers)):
            raise TypeError("not a text index")
        return cls(regions, applies, backward, tuple(imports), hooks,
                   tuple((*m[:4], tuple(m[4])) if len(m) == 5 else tuple(m) for m in makers))


def _is_maker(maker: object) -> bool:
    """[name, api, enabled, decorates] (decorates None: a generator a loop enters) or, entered on an
    argument, [..., [position, name, value]]."""
    return isinstance(maker, list) and len(maker) in (4, 5) and isinstance(maker[0], str) \
        and isinstance(maker[1], str) and maker[2] in (True, False, None) and maker[3] in (True, False, None) and (
            len(maker) == 4 or isinstance(maker[4], list) and len(maker[4]) == 3 and type(maker[4][0]) is int
            and isinstance(maker[4][1], str) and isinstance(maker[4][2], bool))


def _with_line_feeds(data: bytes) -> bytes:
    """The text searched line by line: a lone carriage return ends a line for Python too."""
    if b"\r" in data and _LONE_CR.search(data):
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data


_LONE_CR = re.compile(rb"\r(?!\n)")


# An import statement, from where it starts (a line, or after `;` or `:`) to its end: `import a . b as c, d`,
# `from .a import (b,`, `from.a import(b)`
_STATEMENT = re.compile(rb"[ \t\f]*(?:from\b([. \t\f\w]*?)\bimport\b(.*)|import\b(.*))", re.DOTALL)
_CONTINUATION = re.compile(rb"\\\r?\n")
_AS = re.compile(rb"\bas\b")
_SPACE = re.compile(rb"\s+")


def import_statements(data: bytes) -> list[tuple[Optional[bytes], bytes]]:
    """(module or None for a plain `import`, the names) of each import statement the text may hold,
    read as Python reads them: after `;` or `:` too, across backslash continuations and brackets,
    comments left out. The statements are found with `bytes.find`: a regular expression over every
    line costs ten times more."""
    found = []
    position = last = -1
    while (at := data.find(b"import", position + 1)) >= 0:
        position = at
        start = _line_start(data, at)
        start = max(start, data.rfind(b";", start, at) + 1, data.rfind(b":", start, at) + 1)
        if start == last:  # `from importlib import import_module`: read once
            continue
        last, end = start, _line_end(data, at)
        match = _STATEMENT.match(_CONTINUATION.sub(b" ", data[start:end]))
        if match is None:
            continue
        module, names, plain = match.groups()
        if names is not None and names.lstrip().startswith(b"(") and b")" not in names.split(b"#")[0]:
            names += data[end:_bracket_end(data, end)]
        names = b" ".join(line.split(b"#")[0] for line in (plain if names is None else names).split(b"\n"))
        found.append((None if module is None else _SPACE.sub(b"", module), names.split(b";")[0]))
    return found


def _line_start(data: bytes, at: int) -> int:
    """Where the line of `at` starts, lines ending in a backslash (not in a comment) joined to the next."""
    start = data.rfind(b"\n", 0, at) + 1
    while start > 0:
        before = data.rfind(b"\n", 0, start - 1) + 1
        if not _continues(data[before:start - 1]):
            break
        start = before
    return start


def _line_end(data: bytes, at: int) -> int:
    """Where the line of `at` ends, lines ending in a backslash (not in a comment) joined to the next."""
    end = data.find(b"\n", at)
    while end >= 0 and _continues(data[data.rfind(b"\n", 0, end) + 1:end]):
        end = data.find(b"\n", end + 1)
    return len(data) if end < 0 else end


def _continues(line: bytes) -> bool:
    return line.rstrip(b"\r").endswith(b"\\") and b"#" not in line


def _bracket_end(data: bytes, at: int) -> int:
    """The end of the first line from `at` on that closes a bracket, comments left out."""
    while at < len(data):
        end = data.find(b"\n", at + 1)
        end = len(data) if end < 0 else end
        if b")" in data[at:end].split(b"#")[0]:
            return end
        at = end
    return len(data)


def _imports(statements: list[tuple[Optional[bytes], bytes]]) -> tuple[str, ...]:
    """The modules a file's import statements may name, relative ones with their dots."""
    found: dict[str, None] = {}
    for module, names in statements:
        if module is None:
            found.update((name.decode("utf-8", "replace"), None) for part in names.split(b",")
                         if (name := _SPACE.sub(b"", _AS.split(part)[0])))
            continue
        base = module.decode("utf-8", "replace")
        found[base] = None
        separator = "" if base.endswith(".") else "."
        found.update((base + separator + name, None) for name in re.findall(r"\w+", names.decode("utf-8", "replace")))
    return tuple(found)


# A word only counts where code can use it: called, decorating, passed on, or aliased (`jacfwd(`,
# `@jacfwd`, `partial(jacfwd, ...)`, `jf = jacfwd`, `import ... jacfwd as jf`), on a line that is no
# comment or doctest. A name of torch.func's (or torch.autograd.functional's) counts only where the
# file names such a module with it (`func.grad`, `from torch.func import grad`, `from functorch
# import *`, `import torch.func as tf`); `trace` only as `jit.trace`, a call, or in an import.
_NAME_CHAR = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_USED_AFTER = re.compile(rb"[ \t]*(?:[(),\]}#]|as\b|\r?$)", re.MULTILINE)
_USED_BEFORE = re.compile(rb"@[\w. \t]*$")
_PROSE_LINE = re.compile(rb"[ \t]*(?:#|>>>|\.\.\.)")
_FUNC_MODULE_NAME = re.compile(rb"func|eager_transforms|apis")  # functorch, torch.func, functional too
# `func.grad`, matching `func` only; one pattern per first word of `_FUNC_MODULE_NAME`'s modules
_FUNC_ATTRIBUTES = tuple(re.compile(rb"%s(?=[ \t]*\.[ \t]*(\w+))" % module)
                         for module in (rb"func(?:torch|tional)?", rb"eager_transforms", rb"apis"))
_WORD = re.compile(rb"\w+")
_ANY_WORD: frozenset[bytes] = frozenset({b"*"})  # an alias or a star import: any name may be torch.func's


def _func_module_words(data: bytes, statements: list[tuple[Optional[bytes], bytes]]) -> frozenset[bytes]:
    """The words a file uses after a module of torch.func's name (`func.grad`), or imports from one
    (`from torch.func import grad`, `from functorch import (grad,`); `_ANY_WORD` when it aliases
    one or imports all its names."""
    words = {match.group(1) for pattern in _FUNC_ATTRIBUTES for match in pattern.finditer(data)}
    for module, names in statements:
        if module is None:
            if any(_FUNC_MODULE_NAME.search(part) and _AS.search(part) for part in names.split(b",")):
                return _ANY_WORD
        elif _FUNC_MODULE_NAME.search(module):
            if b"*" in names:
                return _ANY_WORD
            words.update(_WORD.findall(names))
    return frozenset(words)


def _uses(scan: Scan, words: tuple[str, ...], module_evidence: bool) -> bool:
    """Whether the file uses one of `words` as code can (the occurrences are found with
    `bytes.find`: one regular expression of all the names costs ten times more)."""
    data = scan.data
    if module_evidence:  # a name of torch.func's counts only where the file names such a module with it
        if b"func" not in data:
            return False
        words = tuple(word for word in words if scan.names_a_func_module(word.encode()))
    for word in words:
        encoded = word.encode()
        if encoded not in data:
            continue
        position = 0
        while (at := data.find(encoded, position)) >= 0:
            position = after = at + len(encoded)
            if (at and data[at - 1] in _NAME_CHAR) or (after < len(data) and data[after] in _NAME_CHAR):
                continue
            start = data.rfind(b"\n", 0, at) + 1
            if _PROSE_LINE.match(data, start):
                continue
            if word == "trace" and not (data.startswith(b"jit.", at - 4) or data.startswith(b"(", after)
                                        or b"import" in data[start:at]):
                continue  # `aten.trace`, a stack trace
            if _USED_AFTER.match(data, after) or _USED_BEFORE.search(data, start, at):
                return True
    return False
