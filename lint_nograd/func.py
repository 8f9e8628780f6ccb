"""A drop-in for `torch.func` that reads grad-disabling regions the same way at every level.

`import lint_nograd.func as func`, then use `func.grad`, `func.jvp`, ... as `torch.func`'s.
`grad`, `grad_and_value`, `vjp`, `jvp`, `jacrev`, `jacfwd`, `hessian` and `linearize` follow three
rules; every other name is `torch.func`'s own object.

1. A region *around the call* (`no_grad`, `set_grad_enabled(False)`, `inference_mode`, as a
   `with` or a decorator) is ignored: the transform computes its derivative. `torch.func`
   ignores `no_grad` too, but under `inference_mode` before torch 2.12.0 (pytorch issue 177318)
   `grad`, `grad_and_value`, `vjp`, `jvp` and `jacrev` return zeros and `jacfwd` and `hessian`
   raise, and `linearize` still returns zeros (`lint_nograd.analysis.releases` has each release): the
   shim leaves inference mode itself.
2. A region *inside the function* is respected in reverse and forward mode at every level, as
   `stop_gradient` would be: `jacfwd(f) == jacrev(f)` and `hessian(f) == jacrev(jacrev(f))`.
   `torch.func`'s forward mode ignores grad mode (pytorch issue 78961).
3. A transform called inside a region (e.g. `with no_grad(): d = grad(g)(x)` inside a function
   given to `grad`) computes its derivative, and the result is a constant to the enclosing levels.

How rule 2 works, and what it costs: forward-mode AD obeys only its own switch
(`torch._C._set_fwd_grad_enabled`), which no grad-disabling region touches. While the function
given to a forward-mode transform runs, a `TorchFunctionMode` runs each torch operation with that
switch off whenever grad mode is off. The only other places to act are the region context managers
themselves, which would mean patching torch for every thread. The mode costs one Python call per
torch operation of the function (a few microseconds each): about 4 % per call of `jvp` on a
3-layer 256-wide MLP (`benchmarks/bench_shim.py`), about 14 % on a scalar function of three
operations. Reverse-mode transforms need no mode: grad mode already stops every reverse level.

How rules 1 and 3 work: called inside a region, a transform leaves the region
(`inference_mode(False)`, `enable_grad()`: the function runs with grad mode on, under `jvp` too),
runs on `stop_gradient` of its tensor inputs (enclosing levels record nothing; inference
tensors are cloned, as PyTorch advises, so none is saved for backward) and returns
`stop_gradient` of its outputs (what it cannot look into, such as a returned `vjp_fn`, as it
is). Outside any region the call goes straight to `torch.func`.

Under `torch.compile` (Dynamo traces no `TorchFunctionMode`, nor `is_inference_mode_enabled`),
the transforms compile without a graph break and give the same values by another route: `jvp`
is the vjp of the vjp (the transpose of the cotangent map), `jacfwd` is `jacrev` and `hessian`
is `jacrev(jacrev)`, all reverse mode, which respects a region inside the function; a region
around the call is read from grad mode alone. `torch.compile` of `torch.func.jacfwd` or
`hessian` of a function holding a region fails on torch 2.5; the shim's compiles there too.
`linearize` is never traced by Dynamo, `torch.func`'s neither.

Everything else is `torch.func`'s: signatures, keyword arguments, `has_aux`, `argnums`, pytrees,
error messages. `torch.func.linearize` cannot be nested in forward mode or vmapped; the shim's
cannot either. Supported torch releases: `lint_nograd.analysis.releases.SUPPORTED` (2.5.1 and newer).
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable

import torch
import torch.func as _torch_func
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
from torch.utils._pytree import tree_map

from lint_nograd.shim import _cut_what_can_be_seen


def _public_names(module: types.ModuleType) -> list[str]:
    if hasattr(module, "__all__"):
        return list(module.__all__)
    # torch.func has no __all__ before torch 2.7: its public names are its own API
    return [
        name
        for name in dir(module)
        if not name.startswith("_") and not isinstance(getattr(module, name), types.ModuleType)
    ]


__all__ = _public_names(_torch_func)
_TRANSFORMS = ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize")
# every other public name of torch.func (vmap, functional_call, ...) is re-exported as it is
globals().update({name: getattr(_torch_func, name) for name in __all__ if name not in _TRANSFORMS})

_is_grad_enabled = torch.is_grad_enabled
_is_inference_mode_enabled = torch.is_inference_mode_enabled
_is_fwd_grad_enabled = torch._C._is_fwd_grad_enabled
_set_fwd_grad_enabled = torch._C._set_fwd_grad_enabled
_is_compiling = torch.compiler.is_compiling


def _in_grad_disabled_region() -> bool:
    if _is_compiling():
        # Dynamo cannot trace is_inference_mode_enabled; inference mode turns grad mode off too
        return not _is_grad_enabled()
    return not _is_grad_enabled() or _is_inference_mode_enabled()


def _run(transformed: Callable[..., Any], args: tuple, kwargs: dict, constant: bool = False) -> Any:
    """Call a torch.func transform, or a function it returned, under rules 1 and 3."""
    if not constant and not _in_grad_disabled_region():
        return transformed(*args, **kwargs)
    # leaving inference mode also turns grad and forward grad back on (pytorch issue 177318)
    with torch.inference_mode(False), torch.enable_grad():
        # cut inside the block: detaching a transform's tensor in inference mode raises
        args, kwargs = tree_map(_constant_input, (args, kwargs))
        return _cut_what_can_be_seen(transformed(*args, **kwargs))


def _constant_input(leaf: Any) -> Any:
    if not isinstance(leaf, torch.Tensor):
        return leaf  # the function itself, or an argument torch.func does not differentiate
    # an inference tensor cannot be saved for backward nor carry a tangent: PyTorch advises a clone
    if not _is_compiling() and leaf.is_inference():
        return leaf.clone()
    return _cut_what_can_be_seen(leaf)


class _ForwardModeRespectsGradMode(TorchFunctionMode):
    """Runs each torch operation with forward-mode AD off while grad mode is off."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if _is_grad_enabled():
            return func(*args, **kwargs)
        # forward mode ignores grad mode: pytorch issue 78961
        was_enabled = _is_fwd_grad_enabled()
        _set_fwd_grad_enabled(False)
        try:
            return func(*args, **kwargs)
        finally:
            _set_fwd_grad_enabled(was_enabled)


def _respecting_inner_regions(func: Callable[..., Any]) -> Callable[..., Any]:
    """`func`, run so that forward mode stops where grad mode is off (rule 2)."""

    def run_respecting_inner_regions(*args: Any, **kwargs: Any) -> Any:
        # a nested forward transform finds the mode already there: one is enough
        if any(
            isinstance(mode, _ForwardModeRespectsGradMode)
            for mode in _get_current_function_mode_stack()
        ):
            return func(*args, **kwargs)
        with _ForwardModeRespectsGradMode():
            return func(*args, **kwargs)

    return run_respecting_inner_regions


def _under_rules(
    transformed: Callable[..., Any], compiled_route: Callable[..., Any] | None = None
) -> Callable[..., Any]:
    """`transformed` under rules 1 and 3; `compiled_route`, with the same values, under Dynamo."""

    def call_under_rules(*args: Any, **kwargs: Any) -> Any:
        if compiled_route is not None and _is_compiling():
            return _run(compiled_route, args, kwargs)
        return _run(transformed, args, kwargs)

    if _is_compiling():
        return call_under_rules  # the Dynamo of torch 2.5 cannot trace functools.wraps
    return functools.wraps(transformed)(call_under_rules)


def _jvp_by_reverse_mode(
    func: Callable[..., Any], primals: Any, tangents: Any, *, has_aux: bool = False
) -> tuple[Any, ...]:
    """jvp's values from two reverse-mode levels, which respect grad mode (pytorch issue 78961).

    The cotangent map of `func` is linear: its own vjp, taken at any cotangent, applies its
    transpose, the Jacobian itself, to the tangents.
    """
    output, vjp_fn, *aux = _torch_func.vjp(func, *primals, has_aux=has_aux)
    _, transpose = _torch_func.vjp(vjp_fn, tree_map(torch.zeros_like, output))
    (tangent_out,) = transpose(tuple(tangents))
    return (output, tangent_out, *aux)


def _differs_from_torch_func(torch_transform: Callable[..., Any], forward_mode: bool):
    """Write the docstring: what differs from `torch_transform`, then its own documentation."""
    name = torch_transform.__name__
    inner = (
        "A region inside `func` is respected at every level, forward mode included\n"
        "(torch.func's forward mode ignores it: pytorch issue 78961)."
        if forward_mode
        else "A region inside `func` is respected, as in torch.func."
    )

    def document(shim_transform: Callable[..., Any]) -> Callable[..., Any]:
        shim_transform.__doc__ = (
            f"`torch.func.{name}`, reading grad-disabling regions alike at every level.\n\n"
            "A region around the call is ignored, `inference_mode` included, and what the call\n"
            "returns is a constant to the levels that enclose it (so is what a returned `vjp_fn`\n"
            f"or `jvp_fn` returns when called in a region). {inner}\n\n"
            f"torch.func.{name}'s documentation follows.\n\n{torch_transform.__doc__}"
        )
        return shim_transform

    return document


@_differs_from_torch_func(_torch_func.grad, forward_mode=False)
def grad(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    return _under_rules(_torch_func.grad(func, argnums, has_aux))


@_differs_from_torch_func(_torch_func.grad_and_value, forward_mode=False)
def grad_and_value(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    return _under_rules(_torch_func.grad_and_value(func, argnums, has_aux))


@_differs_from_torch_func(_torch_func.jacrev, forward_mode=False)
def jacrev(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    *,
    has_aux: bool = False,
    chunk_size: int | None = None,
    _preallocate_and_copy: bool = False,
) -> Callable[..., Any]:
    # _preallocate_and_copy is recent: older releases get only what they know
    extra = {"_preallocate_and_copy": True} if _preallocate_and_copy else {}
    return _under_rules(
        _torch_func.jacrev(func, argnums, has_aux=has_aux, chunk_size=chunk_size, **extra)
    )


@_differs_from_torch_func(_torch_func.vjp, forward_mode=False)
def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    called_in_region = _in_grad_disabled_region()
    output, torch_vjp_fn, *aux = _run(_torch_func.vjp, (func, *primals), {"has_aux": has_aux})

    def vjp_fn(cotangents: Any, retain_graph: bool = True, create_graph: bool | None = None) -> Any:
        constant = called_in_region or _in_grad_disabled_region()
        if create_graph is None:
            # torch.func's default is is_grad_enabled(); a constant needs no graph
            create_graph = not constant
        kwargs = {"retain_graph": retain_graph, "create_graph": create_graph}
        return _run(torch_vjp_fn, (cotangents,), kwargs, constant)

    return (output, vjp_fn, *aux)


@_differs_from_torch_func(_torch_func.jvp, forward_mode=True)
def jvp(
    func: Callable[..., Any],
    primals: Any,
    tangents: Any,
    *,
    strict: bool = False,
    has_aux: bool = False,
) -> tuple[Any, ...]:
    if _is_compiling():
        return _run(_jvp_by_reverse_mode, (func, primals, tangents), {"has_aux": has_aux})
    args = (_respecting_inner_regions(func), primals, tangents)
    return _run(_torch_func.jvp, args, {"strict": strict, "has_aux": has_aux})


@_differs_from_torch_func(_torch_func.jacfwd, forward_mode=True)
def jacfwd(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    has_aux: bool = False,
    *,
    randomness: str = "error",
) -> Callable[..., Any]:
    by_reverse_mode = _torch_func.jacrev(func, argnums, has_aux=has_aux)
    if _is_compiling():
        return _under_rules(by_reverse_mode)
    respecting = functools.wraps(func, updated=())(_respecting_inner_regions(func))
    return _under_rules(
        _torch_func.jacfwd(respecting, argnums, has_aux, randomness=randomness), by_reverse_mode
    )


@_differs_from_torch_func(_torch_func.hessian, forward_mode=True)
def hessian(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    by_reverse_mode = _torch_func.jacrev(_torch_func.jacrev(func, argnums), argnums)
    if _is_compiling():
        return _under_rules(by_reverse_mode)
    respecting = functools.wraps(func, updated=())(_respecting_inner_regions(func))
    return _under_rules(_torch_func.hessian(respecting, argnums), by_reverse_mode)


@_differs_from_torch_func(_torch_func.linearize, forward_mode=True)
def linearize(func: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    called_in_region = _in_grad_disabled_region()
    output, torch_jvp_fn = _run(
        _torch_func.linearize, (_respecting_inner_regions(func), *primals), {}
    )

    def jvp_fn(*tangents: Any) -> Any:
        return _run(torch_jvp_fn, tangents, {}, called_in_region)

    return output, jvp_fn
