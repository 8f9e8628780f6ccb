"""The PyTorch names the rules know, by every qualified name they are reachable under."""
from __future__ import annotations

import re
from dataclasses import dataclass

from lint_nograd import entry_points

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


# What else a file's text must contain for each rule to be possible in it. Every spelling the
# semantic model resolves (aliases and star imports included) spells these words somewhere.
# A substring test first: `in` on bytes is far faster than a regular expression.
_TEXT_NEEDED = {
    "transform": ((b"func", re.compile(rb"functorch|\bfunc\b")),
                  (b"", re.compile(rb"\b(?:grad|grad_and_value|vjp|jvp|jacrev|jacfwd|hessian|linearize)\b"))),
    "functional": ((b"functional", re.compile(rb"\b(?:jacobian|hessian|vjp|jvp|vhp|hvp)\b")),),
    "dual": ((b"dual_level", None),),
    "tracer": ((b"trace", re.compile(rb"symbolic_trace|\btrace\b|trace_module")),),
    "make_fx": ((b"make_fx", None),),
    "fx_based": ((b"", re.compile(rb"prepare_fx|prepare_qat_fx|create_feature_extractor")),),
    "backward": ((b"backward", None),),
    "autograd": ((b"autograd", None),),
}
_RULE_NEEDS = {  # a rule is possible when one of its families of words is in the text
    "NG001": ("transform",), "NG002": ("transform",), "NG003": ("backward", "autograd"),
    "NG004": ("transform", "functional", "dual"), "NG005": ("tracer", "make_fx", "fx_based"),
    "NG006": ("transform", "functional"),
}
# The families of words a file needs to apply any transform or tracer (entry_points.ENTRY_POINTS).
_APPLIES = ("transform", "functional", "dual", "tracer", "make_fx", "fx_based")


def names_grad_disabling_api(data: bytes) -> bool:
    return any(word.encode() in data for word in GRAD_DISABLING_WORDS)


def _has(data: bytes, family: str) -> bool:
    return all(word in data and (pattern is None or pattern.search(data)) for word, pattern in _TEXT_NEEDED[family])


def possible_codes(data: bytes, codes: frozenset[str]) -> frozenset[str]:
    """The codes among `codes` that can have a finding in a file with this text, the file alone
    (NG000 only alongside another one: a file no rule can apply to is not parsed)."""
    found: dict[str, bool] = {}

    def has(family: str) -> bool:
        if family not in found:
            found[family] = _has(data, family)
        return found[family]

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


# `import a.b as c, d` and `from .a import (b, c)`: the names of modules an import statement may bind
_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\r\n;#]*)"
                     rb"|import[ \t]+([^\r\n;#]*))", re.MULTILINE)


def text_index(data: bytes) -> TextIndex:
    imports: dict[str, None] = {}
    if b"import" in data:
        for match in _IMPORT.finditer(data):
            module, names, plain = match.groups()
            if plain is not None:
                for part in plain.decode("utf-8", "replace").split(","):
                    if part.split():
                        imports[part.split()[0]] = None
                continue
            base = module.decode("utf-8", "replace")
            imports[base] = None
            separator = "" if base.endswith(".") else "."
            for name in re.findall(r"\w+", names.decode("utf-8", "replace").replace(" as ", " , ")):
                imports[base + separator + name] = None
    applies = any(_has(data, family) for family in _APPLIES) and _applies_somewhere(data)
    return TextIndex(names_grad_disabling_api(data), applies, _has(data, "backward") or _has(data, "autograd"),
                     tuple(imports))


# An entry point's name where code can use it: called, decorating, passed on, aliased or imported
# (`jacfwd(`, `@jacfwd`, `partial(jacfwd, ...)`, `jf = jacfwd`, `import ... jacfwd as jf`), on a line
# that is no comment and no doctest; a mention in prose is not enough to read the file.
_ENTRY_WORD = re.compile(rb"(@[\w. \t]*)?\b(?:%s)\b([ \t]*(?:[(),\]}#]|as\b|$))?" % b"|".join(
    sorted(word.encode() for word in entry_points.WORDS)), re.MULTILINE)
_PROSE_LINE = re.compile(rb"[ \t]*(?:#|>>>|\.\.\.)")


def _applies_somewhere(data: bytes) -> bool:
    for match in _ENTRY_WORD.finditer(data):
        if match.group(1) is None and match.group(2) is None:
            continue
        line_start = data.rfind(b"\n", 0, match.start()) + 1
        if not _PROSE_LINE.match(data, line_start):
            return True
    return False
