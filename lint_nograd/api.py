"""The PyTorch names the rules know, by every qualified name they are reachable under."""
from __future__ import annotations

import re
from dataclasses import dataclass


# Grad-mode context managers. `torch.autograd.grad_mode` is where they are defined.
_GRAD_MODE_MODULES = ("torch", "torch.autograd", "torch.autograd.grad_mode")
NO_GRAD = frozenset(f"{m}.no_grad" for m in _GRAD_MODE_MODULES)
ENABLE_GRAD = frozenset(f"{m}.enable_grad" for m in _GRAD_MODE_MODULES)
SET_GRAD_ENABLED = frozenset(f"{m}.set_grad_enabled" for m in _GRAD_MODE_MODULES)
INFERENCE_MODE = frozenset(f"{m}.inference_mode" for m in _GRAD_MODE_MODULES)

# The text a file must contain for any grad-disabling region to be spelled in it: the engine's gate.
GRAD_DISABLING_WORDS = ("no_grad", "set_grad_enabled", "inference_mode")
GRAD_MODE_WORDS = (*GRAD_DISABLING_WORDS, "enable_grad")

# Automatic-differentiation transforms, by the name they have in torch.func.
REVERSE_MODE = frozenset({"grad", "grad_and_value", "vjp", "jacrev"})
FORWARD_MODE = frozenset({"jvp", "jacfwd", "hessian", "linearize"})  # hessian = jacfwd(jacrev(f))
AD_TRANSFORMS = REVERSE_MODE | FORWARD_MODE
# These differentiate when called, `vjp(f, x)`; the others return a function to call.
IMMEDIATE_TRANSFORMS = frozenset({"vjp", "jvp", "linearize"})
_TRANSFORM_PREFIXES = ("torch.func.", "functorch.", "torch._functorch.")

VMAP = frozenset({"torch.vmap", "torch.func.vmap", "functorch.vmap", "torch._functorch.apis.vmap"})

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
    "NG001": ("transform",), "NG002": ("transform",), "NG003": ("backward", "autograd"),
    "NG004": ("transform", "functional", "dual"), "NG005": ("tracer", "make_fx", "fx_based"),
    "NG006": ("transform", "functional"),
}
# The families of words a file needs to apply any transform or tracer (entry_points.ENTRY_POINTS).
_APPLIES = ("transform", "functional", "dual", "tracer", "make_fx", "fx_based")


def names_grad_disabling_api(data: bytes) -> bool:
    return any(word.encode() in data for word in GRAD_DISABLING_WORDS)


def _has(data: bytes, family: str) -> bool:
    if family == "autograd" and b"autograd" not in data:
        return False
    return _uses(data, _FAMILIES[family], module_evidence=family in ("transform", "functional"))


def possible_codes(data: bytes, codes: frozenset[str]) -> frozenset[str]:
    """The codes among `codes` that can have a finding in a file with this text, the file alone
    (NG000 only alongside another one: a file no rule can apply to is not parsed)."""
    found: dict[str, bool] = {}

    def has(family: str) -> bool:
        if family not in found:
            found[family] = _has(data, family)
        return found[family]

    data = _with_line_feeds(data)
    possible = frozenset(code for code in codes if code in _RULE_NEEDS and any(map(has, _RULE_NEEDS[code])))
    return possible | (codes & {"NG000"}) if possible else possible


@dataclass(frozen=True)
class TextIndex:
    """What a file's text says without parsing it: enough to tell which files the project needs."""

    regions: bool  # it names a grad-disabling API
    applies: bool  # it may apply a transform or a tracer
    backward: bool  # it may call backward
    imports: tuple[str, ...]  # the modules its imports name, relative ones with their dots

    def to_json(self) -> list:
        return [self.regions, self.applies, self.backward, list(self.imports)]

    @classmethod
    def from_json(cls, data: list) -> "TextIndex":
        regions, applies, backward, imports = data
        if not all(isinstance(flag, bool) for flag in (regions, applies, backward)) or \
                not all(isinstance(name, str) for name in imports):
            raise TypeError("not a text index")
        return cls(regions, applies, backward, tuple(imports))


def text_index(data: bytes) -> TextIndex:
    data = _with_line_feeds(data)
    applies = any(_has(data, family) for family in _APPLIES)
    return TextIndex(names_grad_disabling_api(data), applies, b"backward" in data or b"autograd" in data,
                     _imports(data))


def _with_line_feeds(data: bytes) -> bytes:
    """The text searched line by line: a lone carriage return ends a line for Python too."""
    if b"\r" in data and _LONE_CR.search(data):
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data


_LONE_CR = re.compile(rb"\r(?!\n)")


# An import statement, read from its line: `import a.b as c, d`, `from .a import (b,` ...
_IMPORT_LINE = re.compile(rb"[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(.*)|import[ \t]+(.*))")


def _imports(data: bytes) -> tuple[str, ...]:
    """The modules a file's import statements may name, relative ones with their dots. The lines
    are found with `bytes.find`: a regular expression over every line costs ten times more."""
    found: dict[str, None] = {}
    position = 0
    while (at := data.find(b"import", position)) >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        position = end
        match = _IMPORT_LINE.match(data, start, end)
        if match is None:
            continue
        module, names, plain = match.groups()
        if names is not None and names.lstrip().startswith(b"(") and b")" not in names:
            close = data.find(b")", end)
            names, position = data[match.start(2):close if close >= 0 else len(data)], max(close, end)
        text = (plain if plain is not None else names).decode("utf-8", "replace").split("#")[0]
        if plain is not None:
            found.update((part.split()[0], None) for part in text.split(",") if part.split())
            continue
        base = module.decode("utf-8", "replace")
        found[base] = None
        separator = "" if base.endswith(".") else "."
        found.update((base + separator + name, None) for name in re.findall(r"\w+", text.replace(" as ", " , ")))
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
_FUNC_MODULE = rb"(?:functorch|func|functional|eager_transforms|apis)"
_FUNC_ALIAS = re.compile(rb"^[ \t]*(?:import[ \t]+[\w.]*%s[\w.]*[ \t]+as\b|from[ \t]+[\w.]*%s[\w.]*[ \t]+import[ \t]+\*)"
                         % (_FUNC_MODULE, _FUNC_MODULE), re.MULTILINE)


def _names_a_func_module(data: bytes, word: bytes) -> bool:
    """`func.grad`, `functorch.grad`, `from torch.func import (jacfwd, grad)`, or an alias or a star
    import of such a module, which may spell any of its names."""
    if _FUNC_ALIAS.search(data):
        return True
    return bool(re.search(rb"%s[ \t]*\.[ \t]*%s\b|^[ \t]*from[ \t]+[\w.]*%s[\w.]*[ \t]+import[ \t]+[^\n]*\b%s\b"
                          % (_FUNC_MODULE, word, _FUNC_MODULE, word), data, re.MULTILINE)) or \
        bool(re.search(rb"^[ \t]*from[ \t]+[\w.]*%s[\w.]*[ \t]+import[ \t]*\([^)]*\b%s\b" % (_FUNC_MODULE, word),
                       data, re.MULTILINE))


def _uses(data: bytes, words: tuple[str, ...], module_evidence: bool) -> bool:
    """Whether the file uses one of `words` as code can (the occurrences are found with
    `bytes.find`: one regular expression of all the names costs ten times more)."""
    if module_evidence and b"func" not in data:
        return False
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
                if not module_evidence or _names_a_func_module(data, encoded):
                    return True
                break  # not torch.func's here: the word's other occurrences are not either
    return False
