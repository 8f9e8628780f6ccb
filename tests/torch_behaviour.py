"""Measure, on the torch installed here, each behaviour that `lint_nograd.analysis.releases` records.

`measure()` returns the same fields as `lint_nograd.analysis.releases.Behaviour`, computed by running
torch: tests/test_releases.py compares them with the table's row for this release, and
`python tests/torch_behaviour.py` prints them (how the table's rows were measured).
"""

from __future__ import annotations

import dataclasses
import warnings

import torch
import torch.func
from lint_nograd.analysis.releases import FUNCTIONAL, TRANSFORMS, Behaviour
from torch.fx.experimental.proxy_tensor import make_fx

X = torch.tensor(1.5, dtype=torch.float64)
XV = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)


def cube(x):
    return x**3


def derivative(func, transform: str, f):
    """x -> the derivative of scalar f at x, taken with `func.<transform>` (order 2 for hessian)."""
    ones = torch.ones_like
    return {
        "grad": lambda: func.grad(f),
        "grad_and_value": lambda: lambda x: func.grad_and_value(f)(x)[0],
        "vjp": lambda: lambda x: func.vjp(f, x)[1](ones(x))[0],
        "jvp": lambda: lambda x: func.jvp(f, (x,), (ones(x),))[1],
        "jacrev": lambda: func.jacrev(f),
        "jacfwd": lambda: func.jacfwd(f),
        "hessian": lambda: func.hessian(f),
        "linearize": lambda: lambda x: func.linearize(f, x)[1](ones(x)),
    }[transform]()


def outcome(transform: str, region) -> str:
    """What `torch.func.<transform>` of x**3 gives at 1.5 when called inside `region`."""
    expected = 6 * X if transform == "hessian" else 3 * X**2
    try:
        with region():
            got = derivative(torch.func, transform, cube)(X)
    except Exception:  # noqa: BLE001  RuntimeError, or AttributeError from linearize on 2.4
        return "raises"
    if torch.allclose(got, expected):
        return "correct"
    return "zeros" if torch.count_nonzero(got) == 0 else f"wrong: {got.item()}"


def functional_outcome(name: str) -> str:
    """What `torch.autograd.functional.<name>` of x**3 gives at 1.5 inside `inference_mode()`, with
    `enable_grad()` around the call as a helper decorated with it has."""
    functional, ones = torch.autograd.functional, torch.ones_like(X)
    call = {
        "jacobian": lambda: functional.jacobian(cube, X),
        "hessian": lambda: functional.hessian(cube, X),
        "vjp": lambda: functional.vjp(cube, X, ones)[1],
        "jvp": lambda: functional.jvp(cube, X, ones)[1],
        "vhp": lambda: functional.vhp(cube, X, ones)[1],
        "hvp": lambda: functional.hvp(cube, X, ones)[1],
    }[name]
    expected = 6 * X if name in ("hessian", "vhp", "hvp") else 3 * X**2
    try:
        with torch.inference_mode(), torch.enable_grad():
            got = call()
    except Exception:  # noqa: BLE001  any error
        return "raises"
    if torch.allclose(got, expected):
        return "correct"
    return "zeros" if torch.count_nonzero(got) == 0 else f"wrong: {got.item()}"


def with_inner_region(x):
    """x**2 in a no_grad region, times x**3: 3 x**4 where the region is respected, 5 x**4 if not."""
    with torch.no_grad():
        square = x * x
    return square * x**3


def inner_region(transform: str) -> str:
    got = derivative(torch.func, transform, with_inner_region)(X)
    return "respected" if torch.allclose(got, 3 * X**4) else "ignored"


def centered(x):
    with torch.no_grad():
        shift = x.mean()
    return x - shift


def centered_by_detach(x):
    return x - x.mean().detach()


def gradient(function, x=XV):
    x = x.detach().clone().requires_grad_()
    (slope,) = torch.autograd.grad(function(x).sum(), x)
    return slope


def keeps_cut(traced, function=centered) -> bool:
    return torch.allclose(gradient(traced), gradient(function))


class Model(torch.nn.Module):
    def forward(self, x):
        return centered(x)


def tracer_keeps_region(tracer: str) -> bool:
    if tracer == "symbolic_trace":
        return keeps_cut(torch.fx.symbolic_trace(centered))
    if tracer == "jit_trace":
        return keeps_cut(torch.jit.trace(centered, (XV,)))
    if tracer == "make_fx":
        return keeps_cut(make_fx(centered)(XV))
    if tracer == "make_fx_pre_dispatch":
        return keeps_cut(make_fx(centered, pre_dispatch=True)(XV))
    if tracer == "export":
        return keeps_cut(torch.export.export(Model(), (XV,)).module())
    torch._dynamo.reset()
    return keeps_cut(torch.compile(centered, fullgraph=True, backend="aot_eager"))


def compiles(transform: str) -> bool:
    """Whether `torch.compile(torch.func.<transform>(f), fullgraph=True)` runs, f holding a region."""
    torch._dynamo.reset()
    f = with_inner_region
    try:
        torch.compile(derivative(torch.func, transform, f), fullgraph=True, backend="aot_eager")(X)
    except Exception:  # noqa: BLE001  any failure of Dynamo or of the backend
        return False
    return True


def decorator_scope() -> str:
    was_enabled = torch.is_grad_enabled()
    try:

        @torch.set_grad_enabled(False)
        def decorated():
            return torch.is_grad_enabled()

        return "function" if torch.is_grad_enabled() else "global"
    finally:
        torch.set_grad_enabled(was_enabled)


def measure() -> dict:
    """Every field of `Behaviour` but the release names, as this torch behaves."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations of torch.jit and the like
        return _measure()


def _measure() -> dict:
    return {
        "outer_no_grad": {t: outcome(t, torch.no_grad) for t in TRANSFORMS},
        "outer_inference_mode": {t: outcome(t, torch.inference_mode) for t in TRANSFORMS},
        "inner_region_forward_mode": inner_region("jacfwd"),
        "inner_region_reverse_mode": inner_region("jacrev"),
        "keeps_region": {tracer: tracer_keeps_region(tracer) for tracer in Behaviour.TRACERS},
        "make_fx_keeps_detach": keeps_cut(make_fx(centered_by_detach)(XV), centered_by_detach),
        "compiles_func_transform": {t: compiles(t) for t in TRANSFORMS},
        "functional_inference_mode": {name: functional_outcome(name) for name in FUNCTIONAL},
        "set_grad_enabled_decorator": decorator_scope(),
    }


if __name__ == "__main__":
    measured = measure()
    print(f"torch {torch.__version__}")
    for name, value in measured.items():
        print(f"{name} = {value!r}")
    assert set(measured) == {f.name for f in dataclasses.fields(Behaviour)} - {"release", "measured_on"}
