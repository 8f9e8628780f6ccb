"""The PyTorch names the rules know, by every qualified name they are reachable under."""
from __future__ import annotations

import re

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
    "tracer": ((b"trace", re.compile(rb"symbolic_trace|\btrace\b")),),
    "make_fx": ((b"make_fx", None),),
    "backward": ((b"backward", None),),
    "autograd": ((b"autograd", None),),
}
_RULE_NEEDS = {  # a rule is possible when one of its families of words is in the text
    "NG001": ("transform",), "NG002": ("transform",), "NG003": ("backward", "autograd"),
    "NG004": ("transform",), "NG005": ("tracer", "make_fx"), "NG006": ("transform",),
}


def names_grad_disabling_api(data: bytes) -> bool:
    return any(word.encode() in data for word in GRAD_DISABLING_WORDS)


def possible_codes(data: bytes, codes: frozenset[str]) -> frozenset[str]:
    """The codes among `codes` that can have a finding in a file with this text (NG000 only
    alongside another one: a file no rule can apply to is not parsed)."""
    found: dict[str, bool] = {}

    def has(family: str) -> bool:
        if family not in found:
            found[family] = all(word in data and (pattern is None or pattern.search(data))
                                for word, pattern in _TEXT_NEEDED[family])
        return found[family]

    possible = frozenset(code for code in codes if code in _RULE_NEEDS and any(map(has, _RULE_NEEDS[code])))
    return possible | (codes & {"NG000"}) if possible else possible
