"""The private torch names the watcher relies on, by release: one table, plain data, no torch import.

Each row holds from its release up to the next row's. `tests/test_watch.py` checks that every name
of the installed release's row resolves, so a release that moves one fails there, not in a user's
program.
"""
from __future__ import annotations

from dataclasses import dataclass

from lint_nograd.analysis.releases import parse_version


@dataclass(frozen=True)
class TorchNames:
    release: str
    # the forward-AD level `dual_level` entered (-1: none); functorch's jvp enters one too
    forward_level: str = "torch.autograd.forward_ad._current_level"
    # fx symbolic tracing (also on under make_fx and export, which run an fx Tracer): a flag, or a function
    fx_tracing: str = "torch.fx._symbolic_trace._is_fx_tracing_flag"
    fx_tracing_is_function: bool = False
    jit_tracing_state: str = "torch._C._get_tracing_state"
    # make_fx's proxy mode, found on the dispatch mode stack (with pre_dispatch it is not there)
    dispatch_mode: str = "torch._C._get_dispatch_mode"
    proxy_mode_key: str = "torch._C._TorchDispatchModeKey.PROXY"
    make_fx_tracer: str = "torch.fx.experimental.proxy_tensor.PythonKeyTracer"
    # grad-mode context managers; the first three are public
    set_fwd_grad_enabled: str = "torch.autograd.forward_ad._set_fwd_grad_enabled"
    # reading a tangent through functorch's wrappers, one interpreter level at a time
    unpack_dual: str = "torch._unpack_dual"
    is_wrapped: str = "torch._C._functorch.is_functorch_wrapped_tensor"
    unwrap: str = "torch._C._functorch.get_unwrapped"
    peek_interpreter: str = "torch._C._functorch.peek_interpreter_stack"
    pop_interpreter: str = "torch._functorch.pyfunctorch.temporarily_pop_interpreter_stack"
    # where functorch's transforms live: their own grad-mode changes are how a transform is seen entering
    transforms_folder: str = "_functorch"


NAMES: tuple[TorchNames, ...] = (
    TorchNames("2.5"),
    # the module flag moved: `is_fx_tracing()` reads it wherever it lives
    TorchNames("2.14", fx_tracing="torch.fx._symbolic_trace.is_fx_tracing", fx_tracing_is_function=True),
)


def names_for(version: str) -> TorchNames:
    """The row for a torch release: the newest row not newer than it (the first for older ones)."""
    wanted = parse_version(version)
    rows = [row for row in NAMES if parse_version(row.release) <= wanted]
    return rows[-1] if rows else NAMES[0]


def fields(row: TorchNames) -> dict[str, str]:
    """The dotted names of a row, by field."""
    return {name: value for name, value in vars(row).items()
            if isinstance(value, str) and name not in ("release", "transforms_folder")}

