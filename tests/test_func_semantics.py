"""The semantics table of `lint_nograd.func`, checked against analytic derivatives.

Every case also runs `torch.func`, and `torch_func_deviation` states exactly where its answer
differs, reading what differs by release from `lint_nograd.analysis.releases`: when a PyTorch release
changes that, this file fails and the table (and docs/shim.md) must follow.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import types
from collections import namedtuple

import lint_nograd.func as shim_func
import pytest
import torch
import torch.func
from lint_nograd.analysis.releases import behaviour
from torch_behaviour import derivative

RELEASE = behaviour(torch.__version__)

# torch.func.linearize's tracing warns about torch internals
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Attempted to insert a get_attr Node:UserWarning"),
]

X = torch.tensor(1.5, dtype=torch.float64)
XS = torch.tensor([1.5, -0.5], dtype=torch.float64)

REGIONS = ("no_grad", "set_grad_enabled", "inference_mode", "decorator")
PLACEMENTS = ("outside", "inside", "both")
TRANSFORMS = ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize")
FORWARD_MODE = ("jvp", "jacfwd", "hessian", "linearize")
MODULES = {"shim": shim_func, "torch.func": torch.func}


def in_region(region: str, thunk):
    """Run `thunk()` inside a grad-disabling region of the given kind."""
    if region == "decorator":
        return torch.no_grad()(thunk)()
    context = {
        "no_grad": torch.no_grad,
        "set_grad_enabled": lambda: torch.set_grad_enabled(False),
        "inference_mode": torch.inference_mode,
    }[region]
    with context():
        return thunk()


def order(transform: str) -> int:
    return 2 if transform == "hessian" else 1


def falling_power(x, exponent: int, n: int):
    """The n-th derivative of x**exponent."""
    if n > exponent:
        return torch.zeros_like(x)
    return math.prod(range(exponent, exponent - n, -1)) * x ** (exponent - n)


# ---------------------------------------------------------------------------------------------
# The table: {outside, inside, both} x regions x transforms (plain and vmapped) x {1, 2 levels}
# ---------------------------------------------------------------------------------------------


def function_with_region(region: str, inside: bool):
    """f(x) = x**2 * x**3, with x**2 computed inside the region when `inside` (then f' = 3 x**4)."""

    def f(x):
        square = in_region(region, lambda: x * x) if inside else x * x
        # inference tensors cannot be saved for backward; PyTorch's error says to clone them
        return square.clone() * x**3

    return f


def expected(x, placement: str, n: int):
    if placement == "outside":
        return falling_power(x, 5, n)
    # x**2 is a constant at every level
    return x**2 * falling_power(x, 3, n)


def two_levels(func, transform: str, f):
    # torch.func.linearize cannot nest in forward mode: its second level is over grad
    inner = "grad" if transform == "linearize" else transform
    return derivative(func, transform, derivative(func, inner, f))


def run_case(func, placement: str, region: str, transform: str, levels: int, vmapped: bool):
    f = function_with_region(region, inside=placement != "outside")
    d = derivative(func, transform, f) if levels == 1 else two_levels(func, transform, f)
    if vmapped:
        d, x = func.vmap(d), XS
    else:
        x = X
    if placement == "inside":
        return d(x)
    return in_region(region, lambda: d(x))


def torch_func_deviation(
    placement: str, region: str, transform: str, levels: int, vmapped: bool
) -> str | None:
    """Why torch.func's answer differs from the analytic one in this case; None when it agrees."""
    if transform == "linearize" and vmapped:
        return "linearize cannot be vmapped (no batching rule for aten::_make_dual), nor the shim's"
    if placement != "outside" and transform in FORWARD_MODE and region != "inference_mode":
        # inference_mode also turns forward AD off, the other regions do not
        return "forward mode ignores a region inside the function (pytorch issue 78961)"
    if placement != "inside" and region == "inference_mode":
        got = RELEASE.outer_inference_mode[transform]
        if got != "correct":
            return f"torch {RELEASE.release}: {transform} under inference_mode {got} (pytorch issue 177318)"
    return None


TABLE = list(itertools.product(PLACEMENTS, REGIONS, TRANSFORMS, (1, 2), (False, True)))


def case_id(case) -> str:
    placement, region, transform, levels, vmapped = case
    return f"{placement}-{region}-{'vmap-' if vmapped else ''}{transform}-{levels}level"


def outcome(func, case):
    """The value a module computes on a case, or the exception it raises."""
    try:
        return run_case(func, *case)
    except RuntimeError as error:
        return error


@pytest.mark.parametrize("case", TABLE, ids=case_id)
def test_semantics_table(case):
    placement, _, transform, levels, vmapped = case
    analytic = expected(XS if vmapped else X, placement, order(transform) * levels)
    shim, torch_func = outcome(shim_func, case), outcome(torch.func, case)

    deviation = torch_func_deviation(*case)
    torch_func_agrees = isinstance(torch_func, torch.Tensor) and torch.allclose(
        torch_func, analytic
    )
    assert torch_func_agrees == (deviation is None), (
        f"torch.func gave {torch_func}; the table says: {deviation}"
    )

    if transform == "linearize" and vmapped:
        # a limit of torch.func.linearize the shim keeps, with the same error
        assert isinstance(shim, RuntimeError) and str(shim) == str(torch_func)
    else:
        assert isinstance(shim, torch.Tensor), shim
        torch.testing.assert_close(shim, analytic)


# ---------------------------------------------------------------------------------------------
# Rule 3: a transform called inside a region inside a transform
# ---------------------------------------------------------------------------------------------

INNER_TRANSFORMS = ("grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian")
# torch.func.linearize cannot trace through nested forward mode or vmap; see the limits test below
NESTED = [
    (outer, inner)
    for outer, inner in itertools.product(TRANSFORMS, INNER_TRANSFORMS)
    if outer != "linearize" or inner in ("grad", "vjp")
]


def torch_func_nested_deviation(region: str, outer: str, inner: str) -> str | None:
    if region == "inference_mode":
        got = RELEASE.outer_inference_mode[inner]
        if got != "correct":
            return f"torch {RELEASE.release}: {inner} under inference_mode {got} (pytorch issue 177318)"
        if inner in ("jacrev", "jacfwd", "hessian"):
            return "vmap-based transforms in inference_mode: 'Cannot set version_counter ...'"
        return None
    if outer in FORWARD_MODE:
        return "the outer forward level differentiates the inner derivative (pytorch issue 78961)"
    return None


@pytest.mark.parametrize("region", REGIONS)
@pytest.mark.parametrize(("outer", "inner"), NESTED, ids="-over-".join)
def test_transform_inside_region_is_constant_to_enclosing_levels(region, outer, inner):
    # k(x) = d * x with d = g^(n)(x) for g = z**4 computed in the region: k' = d, k'' = 0
    d = falling_power(X, 4, order(inner))
    analytic = d if order(outer) == 1 else torch.zeros_like(d)
    results = {}
    for name, func in MODULES.items():

        def k(x, func=func):
            return in_region(region, lambda: derivative(func, inner, lambda z: z**4)(x)) * x

        try:
            results[name] = derivative(func, outer, k)(X)
        except RuntimeError as error:
            results[name] = error

    torch.testing.assert_close(results["shim"], analytic)
    deviation = torch_func_nested_deviation(region, outer, inner)
    torch_func = results["torch.func"]
    torch_func_agrees = isinstance(torch_func, torch.Tensor) and torch.allclose(
        torch_func, analytic
    )
    assert torch_func_agrees == (deviation is None), (
        f"torch.func gave {torch_func}; the table says: {deviation}"
    )


@pytest.mark.parametrize(
    "compose",
    [
        ("linearize", "linearize"),
        ("linearize", "jvp"),
        ("jvp", "linearize"),
    ],
    ids="-of-".join,
)
def test_linearize_nesting_limits_are_torch_funcs(compose):
    """torch.func.linearize cannot nest forward mode; the shim raises the very same error."""
    outer, inner = compose
    errors = []
    for func in MODULES.values():
        with pytest.raises(RuntimeError) as raised:
            derivative(func, outer, derivative(func, inner, lambda x: x**5))(X)
        errors.append(str(raised.value))
    assert errors[0] == errors[1]


# ---------------------------------------------------------------------------------------------
# Regions around the call: results, inference tensors, independence from torch's own fix
# ---------------------------------------------------------------------------------------------


def test_result_under_region_is_a_constant_to_plain_autograd():
    x = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        slope = shim_func.grad(lambda z: z**3)(x)
    assert slope.item() == pytest.approx(6.75)
    assert not slope.requires_grad


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_inputs_created_in_inference_mode(transform):
    with torch.inference_mode():
        x = torch.tensor(1.5, dtype=torch.float64)
        slope = derivative(shim_func, transform, lambda z: z**3)(x)
    torch.testing.assert_close(slope, falling_power(X, 3, order(transform)))


def test_shim_does_not_need_torchs_inference_mode_fix(monkeypatch):
    """torch 2.12 and newer leave inference mode in `_disable_inference_mode`; older releases gave
    zeros."""
    from torch._functorch import eager_transforms

    if not hasattr(eager_transforms, "_disable_inference_mode"):
        pytest.skip("this torch has no _disable_inference_mode")

    @contextlib.contextmanager
    def fails_if_needed():
        assert not torch.is_inference_mode_enabled(), (
            "the shim relied on torch's inference-mode fix"
        )
        yield

    monkeypatch.setattr(eager_transforms, "_disable_inference_mode", fails_if_needed)
    with torch.inference_mode():
        for transform in TRANSFORMS:
            slope = derivative(shim_func, transform, lambda z: z**3)(X)
            torch.testing.assert_close(slope, falling_power(X, 3, order(transform)))
        with pytest.raises(AssertionError, match="relied on torch"):
            derivative(torch.func, "vjp", lambda z: z**3)(X)


def test_vjp_fn_called_in_region_returns_constant():
    x = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    _, vjp_fn = shim_func.vjp(lambda z: z**3, x)
    with torch.no_grad():
        (slope,) = vjp_fn(torch.ones_like(x))
    assert slope.item() == pytest.approx(6.75) and not slope.requires_grad
    (slope,) = vjp_fn(torch.ones_like(x), retain_graph=True, create_graph=True)
    assert slope.requires_grad  # outside any region, the keyword arguments act as in torch.func


def test_forward_mode_switch_and_mode_stack_are_restored_after_errors():
    def fails(x):
        with torch.no_grad():
            x = x * 2
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        shim_func.jvp(fails, (X,), (torch.ones_like(X),))
    assert torch._C._is_fwd_grad_enabled()
    assert torch._C._len_torch_function_stack() == 0


def test_inner_enable_grad_lets_gradients_flow_again():
    def f(x):
        with torch.no_grad(), torch.enable_grad():
            square = x * x
        return square * x

    for transform in ("grad", "jvp", "jacfwd"):
        torch.testing.assert_close(derivative(shim_func, transform, f)(X), 3 * X**2)


# ---------------------------------------------------------------------------------------------
# A drop-in: names, signatures, pytrees, has_aux, argnums, error messages, docstrings
# ---------------------------------------------------------------------------------------------


def star_import(module: str) -> dict:
    namespace: dict = {}
    exec(f"from {module} import *", namespace)
    del namespace["__builtins__"]
    return namespace


def test_exposes_every_public_name_of_torch_func():
    # torch.func has __all__ from torch 2.7 on; before, `import *` takes every public name
    public = {
        name: value
        for name, value in star_import("torch.func").items()
        if not isinstance(value, types.ModuleType)
    }
    shim = star_import("lint_nograd.func")
    assert set(public) == set(shim) == set(shim_func.__all__)
    for name, value in public.items():
        assert (shim[name] is value) == (name not in TRANSFORMS), name
    from lint_nograd.func import grad, vmap  # noqa: F401  the usual import forms work


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_same_signature_as_torch_func(transform):
    def parameters(function):
        return [
            (p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()
        ]

    assert parameters(getattr(shim_func, transform)) == parameters(getattr(torch.func, transform))


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_docstring_says_what_differs(transform):
    doc = getattr(shim_func, transform).__doc__
    assert "region around the call is ignored" in doc
    assert getattr(torch.func, transform).__doc__ in doc
    assert ("78961" in doc) == (transform in FORWARD_MODE)


Point = namedtuple("Point", "a b")


def f_pytree(p: Point, scale: dict):
    out = {"sum": (p.a * p.b * scale["s"]).sum(), "square": p.a**2}
    return out, (p.a * 2, {"b": p.b})


def f_scalar(p: Point, scale: dict):
    out, aux = f_pytree(p, scale)
    return out["sum"], aux


def f_value(p: Point, scale: dict):
    return f_pytree(p, scale)[0]


P = Point(
    torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([3.0, -1.0], dtype=torch.float64)
)
S = {"s": torch.tensor(0.5, dtype=torch.float64)}
COTANGENTS = {
    "sum": torch.tensor(1.0, dtype=torch.float64),
    "square": torch.ones(2, dtype=torch.float64),
}


def vjp_of_pytree(func):
    out, vjp_fn, aux = func.vjp(f_pytree, P, S, has_aux=True)
    return out, vjp_fn(COTANGENTS), aux


def linearize_of_pytree(func):
    out, jvp_fn = func.linearize(f_value, P, S)
    return out, jvp_fn(P, S)


PYTREE_CALLS = {
    "grad": lambda func: func.grad(f_scalar, argnums=(0, 1), has_aux=True)(P, S),
    "grad_and_value": lambda func: func.grad_and_value(f_scalar, argnums=(0, 1), has_aux=True)(
        P, S
    ),
    "vjp": vjp_of_pytree,
    "jvp": lambda func: func.jvp(f_pytree, (P, S), (P, S), has_aux=True),
    "jacrev": lambda func: func.jacrev(f_pytree, argnums=(0, 1), has_aux=True)(P, S),
    "jacfwd": lambda func: func.jacfwd(f_pytree, argnums=(0, 1), has_aux=True)(P, S),
    "hessian": lambda func: func.hessian(lambda p, s: f_value(p, s)["sum"], argnums=(0, 1))(P, S),
    "linearize": linearize_of_pytree,
}


@pytest.mark.parametrize("region", [None, "no_grad", "inference_mode"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_pytrees_has_aux_argnums_as_torch_func(transform, region):
    expected_tree = PYTREE_CALLS[transform](torch.func)

    def call():
        return PYTREE_CALLS[transform](shim_func)

    got = call() if region is None else in_region(region, call)
    torch.testing.assert_close(got, expected_tree)  # compares structure, namedtuples and leaves


MISUSES = {
    "grad of a non-scalar": lambda func: func.grad(lambda x: x * 2)(torch.ones(3)),
    "grad has_aux without a pair": lambda func: func.grad(lambda x: x.sum(), has_aux=True)(
        torch.ones(3)
    ),
    "grad argnums out of range": lambda func: func.grad(lambda x: x.sum(), argnums=3)(
        torch.ones(3)
    ),
    "grad of integer input": lambda func: func.grad(lambda x: x.sum())(
        torch.ones(3, dtype=torch.long)
    ),
    "vjp of a non-tensor output": lambda func: func.vjp(lambda x: 1.0, torch.ones(3)),
    "vjp cotangent structure": lambda func: func.vjp(lambda x: x, torch.ones(3))[1](
        (torch.ones(3),)
    ),
    "jvp primals not a tuple": lambda func: func.jvp(lambda x: x, torch.ones(3), torch.ones(3)),
    "jvp structure mismatch": lambda func: func.jvp(
        lambda x: x, (torch.ones(3),), (torch.ones(3), torch.ones(3))
    ),
    "jacrev argnums empty": lambda func: func.jacrev(lambda x: x, argnums=())(torch.ones(3)),
    "jacfwd of a complex input": lambda func: func.jacfwd(lambda x: x)(
        torch.ones(3, dtype=torch.complex64)
    ),
    "hessian has no has_aux": lambda func: func.hessian(lambda x: x.sum(), has_aux=True),
    "linearize tangent shape": lambda func: func.linearize(lambda x: x * 2, torch.ones(3))[1](
        torch.ones(2)
    ),
}


@pytest.mark.parametrize("region", [None, "no_grad"])
@pytest.mark.parametrize("misuse", MISUSES)
def test_same_error_messages_as_torch_func(misuse, region):
    def error_of(func):
        def call():
            return MISUSES[misuse](func)

        try:
            call() if region is None else in_region(region, call)
        except Exception as error:  # noqa: BLE001  any error: compared below
            return type(error), str(error)
        raise AssertionError(f"{misuse}: no error")

    assert error_of(shim_func) == error_of(torch.func)


@pytest.mark.parametrize("region", ["no_grad", "inference_mode"])
def test_values_the_shim_cannot_look_into_pass_through_a_region(region):
    """torch.func leaves arguments it does not differentiate alone, and a model may be the
    function; in a region the shim does too (stop_gradient would refuse such objects), and
    returns functions such as linearize's jvp_fn as they are."""
    holder = types.SimpleNamespace(scale=2.0, tensor=X)
    model = torch.nn.Linear(1, 1).double()

    def f(x, holder):
        return (x**3 * holder.scale).sum()

    def calls():
        slope = shim_func.grad(f)(X, holder)
        output, vjp_fn = shim_func.vjp(model, X.reshape(1, 1))
        (input_slope,) = vjp_fn(torch.ones_like(output))
        value, jvp_fn = shim_func.linearize(torch.sin, X)
        return slope, input_slope, jvp_fn(torch.ones_like(X))

    slope, input_slope, tangent = in_region(region, calls)
    torch.testing.assert_close(slope, 6 * X**2)
    torch.testing.assert_close(input_slope, model.weight.detach())
    torch.testing.assert_close(tangent, torch.cos(X))
