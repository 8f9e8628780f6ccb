"""The form the default fix chooses in a project that does not declare lint-nograd, run under the
transform or tracer that reaches the region: values and gradients are those the original means
(eager reverse mode, where the region is respected), while the original's differ under forward
mode and the tracers. `.detach()` is chosen everywhere but under `make_fx` from torch 2.14, which
records it as `aten.alias` (the release table says which, and tests/test_releases.py checks it)."""
from __future__ import annotations

import warnings

import pytest
from lint_nograd import cli
from lint_nograd.analysis.releases import behaviour, default_target

torch = pytest.importorskip("torch")
from torch.func import grad, hessian, jacfwd, jacrev, jvp  # noqa: E402

pytestmark = pytest.mark.torch

SOURCE = """\
import torch
from torch.func import grad, hessian, jacfwd, jacrev, jvp
from torch.fx import symbolic_trace
from torch.fx.experimental.proxy_tensor import make_fx


def f(x):
    with torch.no_grad():
        scale = x.sin().mean()
    return x * scale


def run(x):
    return {call}
"""
X = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
V = torch.tensor([1.0, 0.5, -2.0], dtype=torch.float64)


def total(f):
    return lambda x: f(x).sum()


def traced_gradient(module, x):
    x = x.clone().requires_grad_()
    return torch.autograd.grad(module(x).sum(), x)[0]


# the call that reaches `f`, and what it computes from a version of `f`; the reference, from the
# original in eager reverse mode (torch.autograd.functional respects the region at every level)
ENTRIES = {
    "grad": ("grad(lambda x: f(x).sum())(x)", lambda f: grad(total(f))(X)),
    "jacrev": ("jacrev(f)(x)", lambda f: jacrev(f)(X)),
    "jacfwd": ("jacfwd(f)(x)", lambda f: jacfwd(f)(X)),
    "jvp": ("jvp(f, (x,), (x,))", lambda f: jvp(f, (X,), (V,))[1]),
    "hessian": ("hessian(lambda x: f(x).sum())(x)", lambda f: hessian(total(f))(X)),
    "symbolic_trace": ("symbolic_trace(f)", lambda f: traced_gradient(torch.fx.symbolic_trace(f), X)),
    "jit.trace": ("torch.jit.trace(f, x)", lambda f: traced_gradient(torch.jit.trace(f, X), X)),
    "make_fx": ("make_fx(f)(x)", lambda f: traced_gradient(
        torch.fx.experimental.proxy_tensor.make_fx(f)(X), X)),
}


def reference(entry: str, f):
    functional = torch.autograd.functional
    if entry in ("grad", "symbolic_trace", "jit.trace", "make_fx"):
        return traced_gradient(f, X)
    if entry == "hessian":
        return functional.hessian(total(f), X)
    jacobian = functional.jacobian(f, X)
    return jacobian @ V if entry == "jvp" else jacobian


def load(text: str):
    namespace: dict = {"__name__": "m"}  # jit.trace names a function by its module
    exec(compile(text, "m.py", "exec"), namespace)
    return namespace["f"]


@pytest.mark.parametrize("entry", ENTRIES)
def test_the_chosen_form_keeps_values_and_gradients(tmp_path, monkeypatch, capsys, entry):
    call, compute = ENTRIES[entry]
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\ndependencies = ["torch"]\n')
    (tmp_path / "m.py").write_text(SOURCE.format(call=call))
    monkeypatch.chdir(tmp_path)
    # the torch installed is the release the findings are for; unsafe fixes too, to run the fallback
    assert cli.main(["fix", "--no-cache", "--unsafe-fixes", "m.py"]) == 0, capsys.readouterr()
    fixed = (tmp_path / "m.py").read_text()
    # where make_fx records `.detach()` as an alias (torch 2.14 on), a traced region gets the shim: a
    # fix knows that a tracer reaches the region, not that no make_fx does
    exact = entry not in ("make_fx", "symbolic_trace", "jit.trace") or behaviour(default_target()).make_fx_keeps_detach
    if exact:
        assert "scale = x.sin().mean().detach()\n" in fixed and "lint_nograd" not in fixed
    else:
        assert "from lint_nograd import stop_gradient\n" in fixed
    original, rewritten = load(SOURCE.format(call=call)), load(fixed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jit.trace's TracerWarning, the deprecation of jit
        expected = reference(entry, original)
        assert torch.allclose(rewritten(X), original(X))
        assert torch.allclose(compute(rewritten), expected)
        if entry not in ("grad", "jacrev"):  # reverse mode respects the region: only there the original is right
            assert not torch.allclose(compute(original), expected)
