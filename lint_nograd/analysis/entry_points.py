"""Every PyTorch entry point that runs a function under automatic differentiation or tracing, and
how it reads a grad-disabling region inside that function. One row per entry point: adding one is
adding a line here (and a test in tests/test_entry_points_torch.py that runs it).

Modes:
- "forward": forward-mode AD, which ignores grad mode (pytorch issues 78961, 128600);
- "reverse": reverse-mode AD, which respects the region at every level;
- "drops": a tracer that records the graph without the region (pytorch issue 62043);
- "keeps": a tracer that keeps the region (nothing to report).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

FORWARD, REVERSE, DROPS, KEEPS = "forward", "reverse", "drops", "keeps"


@dataclass(frozen=True)
class EntryPoint:
    name: str  # how messages name it
    qualified_names: frozenset[str]
    modes: tuple[str, ...]
    argument: tuple[int, str]  # (position, keyword) of the function or module it runs
    issue: str  # the pytorch issue behind the mode, for the rule pages
    # (keyword, literal value, modes): the call's keyword switches the modes, e.g. strategy="forward-mode"
    switch: tuple[str, object, tuple[str, ...]] | None = None

    def modes_for(self, keywords: dict[str, object]) -> tuple[str, ...]:
        if self.switch and keywords.get(self.switch[0], _MISSING) == self.switch[1]:
            return self.switch[2]
        return self.modes


_MISSING = object()
_FUNC_PREFIXES = ("torch.func", "functorch", "torch._functorch.eager_transforms", "torch._functorch.apis")


def _func(name: str, modes: tuple[str, ...], issue: str) -> EntryPoint:
    return EntryPoint(name, frozenset(f"{prefix}.{name}" for prefix in _FUNC_PREFIXES), modes, (0, "func"), issue)


def _names(*names: str) -> frozenset[str]:
    return frozenset(names)


ENTRY_POINTS: tuple[EntryPoint, ...] = (
    # torch.func (and functorch): each call opens a new autograd level
    _func("grad", (REVERSE,), "reverse mode respects grad mode"),
    _func("grad_and_value", (REVERSE,), "reverse mode respects grad mode"),
    _func("vjp", (REVERSE,), "reverse mode respects grad mode"),
    _func("jacrev", (REVERSE,), "reverse mode respects grad mode"),
    _func("jvp", (FORWARD,), "78961"),
    _func("jacfwd", (FORWARD,), "78961"),
    _func("linearize", (FORWARD,), "78961"),
    _func("hessian", (FORWARD, REVERSE), "78961"),  # jacfwd(jacrev(f))
    # torch.autograd.functional: reverse mode, unless the strategy says forward-mode
    EntryPoint("jacobian", _names("torch.autograd.functional.jacobian"), (REVERSE,), (0, "func"), "128600",
               switch=("strategy", "forward-mode", (FORWARD,))),
    EntryPoint("hessian", _names("torch.autograd.functional.hessian"), (REVERSE,), (0, "func"), "128600",
               switch=("outer_jacobian_strategy", "forward-mode", (FORWARD, REVERSE))),
    *(EntryPoint(name, _names(f"torch.autograd.functional.{name}"), (REVERSE,), (0, "func"),
                 "double backward respects grad mode") for name in ("vjp", "jvp", "vhp", "hvp")),
    # tracers
    EntryPoint("symbolic_trace", _names("torch.fx.symbolic_trace", "torch.fx._symbolic_trace.symbolic_trace"),
               (DROPS,), (0, "root"), "62043"),
    EntryPoint("Tracer.trace", _names("torch.fx.Tracer.trace", "torch.fx._symbolic_trace.Tracer.trace"),
               (DROPS,), (0, "root"), "62043"),
    EntryPoint("torch.jit.trace", _names("torch.jit.trace", "torch.jit._trace.trace"), (DROPS,), (0, "func"),
               "62043"),
    EntryPoint("torch.jit.trace_module", _names("torch.jit.trace_module", "torch.jit._trace.trace_module"),
               (DROPS,), (0, "mod"), "62043"),
    EntryPoint("make_fx", _names("torch.fx.experimental.proxy_tensor.make_fx", "functorch.make_fx",
                                 "functorch.compile.make_fx"), (DROPS,), (0, "f"), "62043",
               switch=("pre_dispatch", True, (KEEPS,))),  # pre_dispatch records _set_grad_enabled
    *(EntryPoint(name, _names(f"torch.ao.quantization.quantize_fx.{name}", f"torch.quantization.quantize_fx.{name}"),
                 (DROPS,), (0, "model"), "62043") for name in ("prepare_fx", "prepare_qat_fx")),
    EntryPoint("create_feature_extractor",
               _names("torchvision.models.feature_extraction.create_feature_extractor"), (DROPS,), (0, "model"),
               "62043"),
    EntryPoint("torch.compile", _names("torch.compile"), (KEEPS,), (0, "model"), "Dynamo keeps grad-mode changes"),
    EntryPoint("torch.export.export", _names("torch.export.export", "torch.export._trace.export"), (KEEPS,),
               (0, "mod"), "export wraps them in wrap_with_set_grad_enabled"),
    EntryPoint("torch.jit.script", _names("torch.jit.script"), (KEEPS,), (0, "obj"), "TorchScript compiles no_grad"),
    *(EntryPoint(name, _names(f"functorch.compile.{name}", f"torch._functorch.aot_autograd.{name}"), (KEEPS,),
                 (0, argument), "AOTAutograd traces forward and backward together, the region respected")
      for name, argument in (("aot_function", "fn"), ("aot_module", "mod"))),
)

BY_QUALIFIED_NAME: dict[str, EntryPoint] = {name: entry for entry in ENTRY_POINTS for name in entry.qualified_names}


def opens_a_level(entry: EntryPoint) -> bool:
    """Whether it is one of torch.func's transforms, which raise when the function changes a tensor
    it captured in place ("would mutate a captured Tensor"), instead of computing a result."""
    return all(name.rpartition(".")[0] in _FUNC_PREFIXES for name in entry.qualified_names)

def differentiates(entry: EntryPoint) -> bool:
    """Whether it computes derivatives (forward or reverse mode), rather than only tracing: one a
    caller's grad mode can matter to (NG001, NG002)."""
    return bool({FORWARD, REVERSE} & set(entry.modes))


def is_functional(entry: EntryPoint) -> bool:
    """Whether it is torch.autograd.functional's, which opens no autograd level."""
    return all(name.startswith("torch.autograd.functional.") for name in entry.qualified_names)


# Inside `with torch.autograd.forward_ad.dual_level():`, code that works on duals from `make_dual` is
# differentiated in forward mode, which ignores a region there (pytorch issue 78961).
DUAL_LEVEL = frozenset({"torch.autograd.forward_ad.dual_level"})
MAKE_DUAL = frozenset({"torch.autograd.forward_ad.make_dual"})
TRACER_CLASSES = frozenset({"torch.fx.Tracer", "torch.fx._symbolic_trace.Tracer"})

# The last names of every entry point that can misread a region, as code spells them: the text a
# file needs to apply one.
WORDS = frozenset({name.rpartition(".")[2] for entry in ENTRY_POINTS if entry.modes != (KEEPS,)
                   for name in entry.qualified_names} | {"dual_level"})


def entry_point(qualified_names: frozenset[str]) -> EntryPoint | None:
    found = entries(qualified_names)
    return found[0] if found else None


def entries(qualified_names: frozenset[str]) -> tuple[EntryPoint, ...]:
    """The entry points among the names a callee may be, in the table's order."""
    found = [BY_QUALIFIED_NAME[name] for name in qualified_names if name in BY_QUALIFIED_NAME]
    if len(found) < 2:  # nearly every call: no entry point, or one
        return tuple(found)
    return tuple(entry for entry in ENTRY_POINTS if any(entry is one for one in found))


def listed(mode: str) -> list[str]:
    """The entry points that run a function in `mode`, as the rule pages list them (a test checks
    that they do): Markdown list items, wrapped at 80 columns."""
    items = []
    for entry in ENTRY_POINTS:
        name = min(entry.qualified_names, key=lambda n: ("._" in n, not n.startswith("torch."), len(n)))
        switch = entry.switch and f"`{entry.switch[0]}={entry.switch[1]!r}`"
        if mode in entry.modes:
            items.append(f"`{name}`" + (f", unless {switch}" if switch and mode not in entry.switch[2] else ""))
        elif switch and mode in entry.switch[2]:
            items.append(f"`{name}` with {switch}")
    if mode == FORWARD:
        items.append("code on duals from `make_dual` inside `with torch.autograd.forward_ad.dual_level():`")
    return [line for item in items for line in textwrap.wrap(item, 80, initial_indent="- ", subsequent_indent="  ",
                                                             break_on_hyphens=False, break_long_words=False)]
