"""Each row of `lint_nograd.analysis.entry_points.ENTRY_POINTS`, run with PyTorch: a forward-mode entry point
ignores a region inside the function (its result differs from the same function with `.detach()`
in the region's place), a reverse-mode one respects it (same result), a tracer that drops the
region records a graph whose gradient differs from eager mode, one that keeps it does not."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from lint_nograd.analysis.entry_points import DROPS, ENTRY_POINTS, FORWARD, KEEPS, REVERSE  # noqa: E402
from torch import nn  # noqa: E402

X = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
V = torch.tensor([1.0, 0.5, -1.0], dtype=torch.float64)


def with_region(x):
    with torch.no_grad():
        s = x.mean()
    return ((x - s) ** 3).sum()


def with_detach(x):
    return ((x - x.mean().detach()) ** 3).sum()


class Centered(nn.Module):
    def __init__(self, cut):
        super().__init__()
        self.cut = cut

    def forward(self, x):
        return x - self.cut(x.mean())

    def infer(self, x):
        return self.forward(x) * 2


def region_cut(value):
    with torch.no_grad():
        return value * 1


# -- differentiating entry points: the derivative each computes, keyed by (family, name, modes) --------

def _func(name):
    return getattr(torch.func, name)


def _functional(name):
    return getattr(torch.autograd.functional, name)


ONE = torch.tensor(1.0, dtype=X.dtype)
DIFFERENTIATE = {
    ("func", "grad", (REVERSE,)): lambda f: _func("grad")(f)(X),
    ("func", "grad_and_value", (REVERSE,)): lambda f: _func("grad_and_value")(f)(X)[0],
    ("func", "vjp", (REVERSE,)): lambda f: _func("vjp")(f, X)[1](ONE)[0],
    ("func", "jacrev", (REVERSE,)): lambda f: _func("jacrev")(f)(X),
    ("func", "jvp", (FORWARD,)): lambda f: _func("jvp")(f, (X,), (V,))[1],
    ("func", "jacfwd", (FORWARD,)): lambda f: _func("jacfwd")(f)(X),
    ("func", "linearize", (FORWARD,)): lambda f: _func("linearize")(f, X)[1](V),
    ("func", "hessian", (FORWARD, REVERSE)): lambda f: _func("hessian")(f)(X),
    ("functional", "jacobian", (REVERSE,)): lambda f: _functional("jacobian")(f, X),
    ("functional", "jacobian", (FORWARD,)): lambda f: _functional("jacobian")(
        f, X, vectorize=True, strategy="forward-mode"),
    ("functional", "hessian", (REVERSE,)): lambda f: _functional("hessian")(f, X),
    ("functional", "hessian", (FORWARD, REVERSE)): lambda f: _functional("hessian")(
        f, X, vectorize=True, outer_jacobian_strategy="forward-mode"),
    ("functional", "vjp", (REVERSE,)): lambda f: _functional("vjp")(f, X, ONE)[1],
    ("functional", "jvp", (REVERSE,)): lambda f: _functional("jvp")(f, X, V)[1],
    ("functional", "vhp", (REVERSE,)): lambda f: _functional("vhp")(f, X, V)[1],
    ("functional", "hvp", (REVERSE,)): lambda f: _functional("hvp")(f, X, V)[1],
}


def _key(entry, modes) -> tuple:
    family = "functional" if any(n.startswith("torch.autograd.functional.") for n in entry.qualified_names) \
        else "func"
    return family, entry.name, modes


def _differentiation(entry, modes):
    return DIFFERENTIATE[_key(entry, modes)]


# -- tracers: (gradient of what they record, gradient in eager mode) ---------------------------------

def _gradient(run, x=X) -> torch.Tensor:
    x = x.clone().requires_grad_()
    run(x).sum().backward()
    return x.grad


def _traced(entry_name: str, module: nn.Module, pre_dispatch: bool = False):
    if entry_name == "symbolic_trace":
        return torch.fx.symbolic_trace(module)
    if entry_name == "Tracer.trace":
        return torch.fx.GraphModule(module, torch.fx.Tracer().trace(module))
    if entry_name == "torch.jit.trace":
        return torch.jit.trace(module, (X,))
    if entry_name == "torch.jit.trace_module":
        traced = torch.jit.trace_module(module, {"infer": (X,)})
        return traced.infer
    if entry_name == "make_fx":
        from torch.fx.experimental.proxy_tensor import make_fx
        return make_fx(module, pre_dispatch=pre_dispatch)(X)
    if entry_name in ("prepare_fx", "prepare_qat_fx"):
        from torch.ao.quantization import get_default_qat_qconfig_mapping, get_default_qconfig_mapping, quantize_fx
        if entry_name == "prepare_fx":
            return quantize_fx.prepare_fx(module.eval(), get_default_qconfig_mapping(), (X.float(),))
        return quantize_fx.prepare_qat_fx(module.train(), get_default_qat_qconfig_mapping(), (X.float(),))
    if entry_name == "create_feature_extractor":
        feature_extraction = pytest.importorskip("torchvision.models.feature_extraction")
        extractor = feature_extraction.create_feature_extractor(module, return_nodes=["sub"])
        return lambda x: extractor(x)["sub"]
    if entry_name == "torch.compile":
        return torch.compile(module, fullgraph=True, backend="aot_eager")
    if entry_name == "torch.export.export":
        return torch.export.export(module, (X,)).module()
    if entry_name in ("aot_function", "aot_module"):
        from functorch import compile as aot
        return getattr(aot, entry_name)(module, fw_compiler=aot.make_boxed_compiler(lambda graph, _: graph))
    if entry_name == "torch.jit.script":
        return torch.jit.script(_ScriptedRegion())
    raise AssertionError(f"no demonstration for {entry_name}")


class _ScriptedRegion(nn.Module):
    """TorchScript cannot script `Centered` (it holds a Python function): the same, spelled out."""

    def forward(self, x):
        with torch.no_grad():
            s = x.mean()
        return x - s


def _eager(entry_name: str, module: nn.Module):
    return module.infer if entry_name == "torch.jit.trace_module" else module


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda entry: f"{entry.name}-{'+'.join(entry.modes)}")
def test_entry_point_reads_a_region_as_the_table_says(entry):
    modes = entry.modes
    if DROPS in modes or KEEPS in modes:
        module = Centered(region_cut)
        if entry.name.startswith("prepare_"):
            # fake quantization changes values: compare with the same model cut by `.detach()`
            x = X.float()
            region, detach = _traced(entry.name, module), _traced(entry.name, Centered(lambda value: value.detach()))
            differs = not torch.allclose(_gradient(region, x), _gradient(detach, x))
        else:
            traced, eager = _traced(entry.name, module), _eager(entry.name, module)
            differs = not torch.allclose(_gradient(traced), _gradient(eager))
        assert differs == (DROPS in modes), f"{entry.name}: the traced gradient should {'' if DROPS in modes else 'not '}differ"
        return
    differentiate = _differentiation(entry, modes)
    differs = not torch.allclose(differentiate(with_region), differentiate(with_detach))
    assert differs == (FORWARD in modes), f"{entry.name} {modes}: forward mode ignores the region, reverse does not"


@pytest.mark.parametrize("entry", [e for e in ENTRY_POINTS if e.switch], ids=lambda entry: entry.name)
def test_the_keyword_that_switches_the_mode(entry):
    keyword, value, modes = entry.switch
    if entry.name == "make_fx":
        module = Centered(region_cut)
        traced = _traced("make_fx", module, pre_dispatch=value)
        assert torch.allclose(_gradient(traced), _gradient(module)) == (KEEPS in modes)
        return
    differentiate = _differentiation(entry, modes)
    differs = not torch.allclose(differentiate(with_region), differentiate(with_detach))
    assert differs == (FORWARD in modes)


def test_code_on_duals_inside_dual_level_ignores_the_region():
    import torch.autograd.forward_ad as fwAD

    def tangent(f):
        with fwAD.dual_level():
            return fwAD.unpack_dual(f(fwAD.make_dual(X, V))).tangent

    assert not torch.allclose(tangent(with_region), tangent(with_detach))


def test_functional_call_runs_the_module_it_is_given():
    module = Centered(region_cut)

    def through_functional_call(x):
        return torch.func.functional_call(module, {}, (x,)).sum()

    assert not torch.allclose(torch.func.jacfwd(through_functional_call)(X),
                              torch.func.jacrev(through_functional_call)(X))


def test_every_differentiating_row_is_demonstrated():
    rows = {_key(entry, modes) for entry in ENTRY_POINTS if not {DROPS, KEEPS} & set(entry.modes)
            for modes in (entry.modes, *([entry.switch[2]] if entry.switch else []))}
    assert rows == set(DIFFERENTIATE)
