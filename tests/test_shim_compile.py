"""The runtime shim inside `torch.compile(..., fullgraph=True)` and `torch.export`.

Each transform of `lint_nograd.func`, with a region inside the function, compiles without a graph
break (fullgraph raises on one) and gives the shim's values: the region is a cut in forward mode
too, though under Dynamo the forward-mode transforms take a reverse-mode route. This holds on
every supported release, also where `torch.compile` of `torch.func`'s own transform fails
(`compiles_func_transform` in `lint_nograd.analysis.releases`, checked by tests/test_releases.py).
"""

from __future__ import annotations

import collections
import copy
import dataclasses

import lint_nograd.func as shim_func
import pytest
import torch
import torch.func
from lint_nograd import stop_gradient

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

X = torch.tensor([1.5, -0.5], dtype=torch.float64)
ONES = torch.ones_like(X)


def with_region(x):
    """x**2 computed in a region, times x**3: each output's derivative is 3 x**4, not 5 x**4."""
    with torch.no_grad():
        square = x * x
    return square * x**3


def total(x):
    return with_region(x).sum()


CALLS = {  # transform -> (a call of it through `func`, the analytic value at X)
    "grad": (lambda func: func.grad(total), 3 * X**4),
    "grad_and_value": (lambda func: lambda x: func.grad_and_value(total)(x)[0], 3 * X**4),
    "vjp": (lambda func: lambda x: func.vjp(with_region, x)[1](ONES)[0], 3 * X**4),
    "jvp": (lambda func: lambda x: func.jvp(with_region, (x,), (ONES,))[1], 3 * X**4),
    "jacrev": (lambda func: func.jacrev(with_region), torch.diag(3 * X**4)),
    "jacfwd": (lambda func: func.jacfwd(with_region), torch.diag(3 * X**4)),
    "hessian": (lambda func: func.hessian(total), torch.diag(6 * X**3)),
    "vmap-of-grad": (
        lambda func: lambda x: func.vmap(func.grad(total))(torch.stack([x, 2 * x])),
        torch.stack([3 * X**4, 3 * (2 * X) ** 4]),
    ),
}


def compiled(function):
    torch._dynamo.reset()
    # aot_eager: Dynamo and AOTAutograd, where regions and graph breaks are decided
    return torch.compile(function, fullgraph=True, backend="aot_eager")


@pytest.mark.parametrize("built", ["outside", "inside"], ids=["built-outside", "built-inside"])
@pytest.mark.parametrize("transform", CALLS)
def test_each_transform_compiles_to_the_shims_values(transform, built):
    call, analytic = CALLS[transform]
    if built == "outside":  # torch.compile(func.grad(f))
        function = call(shim_func)
    else:  # a compiled function that calls func.grad(f)(x)
        function = lambda x: call(shim_func)(x)  # noqa: E731
    torch.testing.assert_close(compiled(function)(X), analytic)
    torch.testing.assert_close(function(X), analytic)  # eager: the same values


def test_the_default_backend_too():
    torch._dynamo.reset()
    jacobian = torch.compile(shim_func.jacfwd(with_region), fullgraph=True)
    torch.testing.assert_close(jacobian(X), torch.diag(3 * X**4))


def test_regions_around_the_call_inside_compiled_code():
    def slope_in_region(x):
        with torch.no_grad():
            return shim_func.jacfwd(with_region)(x), shim_func.grad(total)(x)

    x = X.clone().requires_grad_()
    jacobian, slope = compiled(slope_in_region)(x)
    torch.testing.assert_close((jacobian, slope), (torch.diag(3 * X**4), 3 * X**4))
    assert not slope.requires_grad  # a constant to the code around the region


def test_compiled_code_called_in_a_region():
    function = compiled(shim_func.grad(total))
    with torch.no_grad():
        torch.testing.assert_close(function(X), 3 * X**4)


def test_transform_in_a_region_inside_compiled_code_is_a_constant():
    def k(x):  # d = 4 x**3 is computed in the region: k' = d, not d + 12 x**3
        with torch.no_grad():
            d = shim_func.grad(lambda z: (z**4).sum())(x)
        return (d * x).sum()

    for transform in ("grad", "jacfwd"):
        function = getattr(shim_func, transform)(k)
        torch.testing.assert_close(compiled(function)(X), 4 * X**3, msg=transform)


# --- stop_gradient ---


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    loss: torch.Tensor


Pair = collections.namedtuple("Pair", "weight bias")

VALUES = {
    "tensor": (lambda t: t, lambda v: v),
    "tuple": (lambda t: (t, 2), lambda v: v[0]),
    "dict": (lambda t: {"a": t, "n": None}, lambda v: v["a"]),
    "namedtuple": (lambda t: Pair(t, t * 2), lambda v: v.bias),
    "dataclass": (lambda t: Output(t, t.sum()), lambda v: v.logits),
}


def dynamo_copies_dataclasses() -> bool:
    try:
        compiled(lambda x: copy.copy(Output(x, x)).logits * 2)(X)
    except Exception:  # noqa: BLE001  Dynamo's Unsupported
        return False
    return True


@pytest.mark.parametrize("value", VALUES)
def test_stop_gradient_compiles(value):
    wrap, read = VALUES[value]

    def f(x):  # f' = x**2 with the cut, 3 x**2 without
        return read(stop_gradient(wrap(x * x))) * x

    x = X.clone().requires_grad_()
    if value == "dataclass" and not dynamo_copies_dataclasses():
        # this Dynamo cannot trace the walk: an error at compile time, never a wrong gradient
        with pytest.raises(torch._dynamo.exc.Unsupported):
            compiled(f)(x)
        return
    (slope,) = torch.autograd.grad(compiled(f)(x).sum(), x)
    torch.testing.assert_close(slope, X**2 * (2 if value == "namedtuple" else 1))


def test_stop_gradient_exports():
    class Centered(torch.nn.Module):
        def forward(self, x):
            shift, scale = stop_gradient((x.mean(), {"s": x.std()}))
            return (x - shift) / scale["s"]

    exported = torch.export.export(Centered(), (X,))
    assert [n.target for n in exported.graph.nodes].count(torch.ops.aten.detach.default) == 2
    x = X.clone().requires_grad_()
    (slope,) = torch.autograd.grad(exported.module()(x).sum(), x)
    torch.testing.assert_close(slope, torch.full_like(X, 1 / X.std().item()))
