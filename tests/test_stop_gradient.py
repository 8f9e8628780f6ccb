"""`stop_gradient`: identity on values, a constant to every level of every transform and tracer."""

from __future__ import annotations

import subprocess
import sys
from collections import namedtuple

import pytest
import torch
import torch.func
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_flatten

from lint_nograd import stop_gradient

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Attempted to insert a get_attr Node:UserWarning"),
]

X = torch.tensor(1.5, dtype=torch.float64)


def h(x):
    """h(x) = stop(x**2) * x**3: h' = 3 x**4, h'' = 6 x**3, x**2 being a constant at every level."""
    return stop_gradient(x * x) * x**3


D1, D2 = 3 * X**4, 6 * X**3  # 15.1875, 20.25
ONE = torch.ones_like(X)

DERIVATIVES = {
    "grad": (torch.func.grad(h), D1),
    "vjp": (lambda x: torch.func.vjp(h, x)[1](ONE)[0], D1),
    "jvp": (lambda x: torch.func.jvp(h, (x,), (ONE,))[1], D1),
    "jacrev": (torch.func.jacrev(h), D1),
    "jacfwd": (torch.func.jacfwd(h), D1),
    "linearize": (lambda x: torch.func.linearize(h, x)[1](ONE), D1),
    "hessian": (torch.func.hessian(h), D2),
    "grad-of-grad": (torch.func.grad(torch.func.grad(h)), D2),
    "jacfwd-of-jacfwd": (torch.func.jacfwd(torch.func.jacfwd(h)), D2),
    "jacrev-of-jacfwd": (torch.func.jacrev(torch.func.jacfwd(h)), D2),
    "jvp-of-grad": (lambda x: torch.func.jvp(torch.func.grad(h), (x,), (ONE,))[1], D2),
    "vmap-of-hessian": (lambda x: torch.func.vmap(torch.func.hessian(h))(x.expand(2))[0], D2),
}


@pytest.mark.parametrize("transform", DERIVATIVES)
def test_stops_every_level_of_torch_func_in_both_modes(transform):
    derivative, expected = DERIVATIVES[transform]
    torch.testing.assert_close(derivative(X), expected)


def test_stops_plain_autograd_in_both_modes():
    x = X.clone().requires_grad_()
    (slope,) = torch.autograd.grad(h(x), x, create_graph=True)
    (curvature,) = torch.autograd.grad(slope, x)
    torch.testing.assert_close((slope, curvature), (D1, D2))
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(X, ONE)
        tangent = torch.autograd.forward_ad.unpack_dual(h(dual)).tangent
    torch.testing.assert_close(tangent, D1)


def test_identity_on_values_and_zero_copy():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = stop_gradient(x)
    assert torch.equal(y, x) and not y.requires_grad
    assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    z = stop_gradient(x[1:])  # a view keeps its offset
    assert z.data_ptr() == x[1:].data_ptr()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.complex64])
def test_floating_and_complex_tensors_are_cut(dtype):
    x = torch.ones(2, dtype=dtype, requires_grad=True)
    y = stop_gradient(x)
    assert not y.requires_grad and y.data_ptr() == x.data_ptr()


@pytest.mark.parametrize(
    "leaf",
    [3, 2.5, None, "text", True, torch.arange(3), torch.tensor([True, False]), torch.float64],
    ids=repr,
)
def test_other_leaves_pass_through_unchanged(leaf):
    assert stop_gradient(leaf) is leaf


def test_subclasses_are_cut():
    parameter = torch.nn.Parameter(torch.ones(2))
    cut = stop_gradient(parameter)
    assert not cut.requires_grad and cut.data_ptr() == parameter.data_ptr()


Pair = namedtuple("Pair", "weight step")


def test_pytrees_keep_their_structure():
    w = torch.ones(2, requires_grad=True)
    tree = {"pair": Pair(w, 3), "list": [w * 2, torch.arange(2), None], "tuple": (w, "name")}
    cut = stop_gradient(tree)
    assert isinstance(cut["pair"], Pair) and cut["pair"].step == 3
    assert (
        cut["list"][1] is tree["list"][1] and cut["list"][2] is None and cut["tuple"][1] == "name"
    )
    leaves = [cut["pair"].weight, cut["list"][0], cut["tuple"][0]]
    assert all(not leaf.requires_grad for leaf in leaves)
    assert cut["pair"].weight.data_ptr() == w.data_ptr()
    torch.testing.assert_close(cut["list"][0], tree["list"][0])


def tensors(dtype):
    return st.integers(0, 3).map(
        lambda n: torch.arange(n, dtype=dtype).requires_grad_(dtype.is_floating_point)
    )


LEAVES = st.one_of(
    tensors(torch.float32),
    tensors(torch.float64),
    tensors(torch.int64),
    st.integers(),
    st.none(),
    st.text(max_size=3),
)
TREES = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=2), children, max_size=3),
        st.tuples(children, children).map(lambda pair: Pair(*pair)),
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(TREES)
def test_any_pytree_is_cut_leaf_by_leaf(tree):
    leaves, spec = tree_flatten(tree)
    cut_leaves, cut_spec = tree_flatten(stop_gradient(tree))
    assert cut_spec == spec
    for leaf, cut in zip(leaves, cut_leaves):
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point():
            assert torch.equal(cut, leaf) and not cut.requires_grad
            assert cut.untyped_storage().data_ptr() == leaf.untyped_storage().data_ptr()
        else:
            assert cut is leaf


def test_under_vmap_keeps_the_batch():
    xs = torch.arange(3.0, dtype=torch.float64)
    torch.testing.assert_close(torch.func.vmap(torch.func.grad(h))(xs), 3 * xs**4)


# --- tracers: each must record the cut, and the traced function must have eager's gradient ---


def g(x):
    return x - stop_gradient(x.mean())


def g_tree(x):
    a, b = stop_gradient((x * 2, {"sum": x.sum(), "n": 4}))
    return x * a + b["sum"] * b["n"]


def gradient(function, x):
    x = x.detach().clone().requires_grad_()
    (slope,) = torch.autograd.grad(function(x).sum(), x)
    return slope


XV = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)


@pytest.mark.parametrize("function", [g, g_tree], ids=["tensor", "pytree"])
def test_fx_symbolic_trace_records_the_cut(function):
    traced = torch.fx.symbolic_trace(function)
    # a Proxy is not a Tensor: a cut that only looked for tensors would record nothing
    assert any(node.target == "detach" for node in traced.graph.nodes)
    torch.testing.assert_close(gradient(traced, XV), gradient(function, XV))


def test_jit_trace_records_the_cut():
    traced = torch.jit.trace(g, XV)
    assert "aten::detach" in str(traced.graph)
    torch.testing.assert_close(gradient(traced, XV), gradient(g, XV))


@pytest.mark.parametrize("tracing_mode", ["real", "fake"])
def test_make_fx_records_the_cut(tracing_mode):
    traced = make_fx(g, tracing_mode=tracing_mode)(XV)
    assert torch.ops.aten.detach.default in [node.target for node in traced.graph.nodes]
    torch.testing.assert_close(gradient(traced, XV), gradient(g, XV))


@pytest.mark.parametrize("function", [g, g_tree], ids=["tensor", "pytree"])
def test_torch_compile_fullgraph_records_the_cut(function):
    graphs = []

    def recording_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        # AOTAutograd is where a no_grad region would be lost; inductor adds only compile time
        return torch._dynamo.lookup_backend("aot_eager")(graph_module, example_inputs)

    torch._dynamo.reset()
    compiled = torch.compile(function, fullgraph=True, backend=recording_backend)
    torch.testing.assert_close(gradient(compiled, XV), gradient(function, XV))
    assert any("detach" in str(node.target) for gm in graphs for node in gm.graph.nodes)


def test_torch_export_records_the_cut():
    class Model(torch.nn.Module):
        def forward(self, x):
            return g(x)

    exported = torch.export.export(Model(), (XV,))
    assert torch.ops.aten.detach.default in [node.target for node in exported.graph.nodes]
    torch.testing.assert_close(gradient(exported.module(), XV), gradient(g, XV))


def test_import_lint_nograd_does_not_import_torch():
    code = (
        "import sys, lint_nograd\n"
        "assert 'torch' not in sys.modules, 'import lint_nograd imported torch'\n"
        "from lint_nograd import stop_gradient\n"
        "assert 'torch' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
