"""`stop_gradient`: identity on values, a constant to every level of every transform and tracer."""

from __future__ import annotations

import collections
import dataclasses
import functools
import subprocess
import sys
import types
from collections import namedtuple

import numpy
import pytest
import torch
import torch.func
from hypothesis import given, settings
from hypothesis import strategies as st
from lint_nograd import stop_gradient
from lint_nograd.analysis.releases import behaviour
from lint_nograd.shim import MAX_DEPTH
from torch._decomp import core_aten_decompositions
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import register_pytree_node, tree_flatten

RELEASE = behaviour(torch.__version__)

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Attempted to insert a get_attr Node:UserWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
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


def fx_cuts(traced) -> list:
    return [node.target for node in traced.graph.nodes if node.target in ("detach", stop_gradient)]


@pytest.mark.parametrize("function", [g, g_tree], ids=["tensor", "pytree"])
def test_fx_symbolic_trace_records_the_cut(function):
    traced = torch.fx.symbolic_trace(function)
    # a Proxy is not a Tensor: a cut that only looked for tensors would record nothing
    assert fx_cuts(traced)
    torch.testing.assert_close(gradient(traced, XV), gradient(function, XV))


def test_fx_records_detach_where_the_op_gives_one_tensor_and_jit_script_compiles_it():
    traced = torch.fx.symbolic_trace(g)  # x.mean(): one tensor by every schema of aten::mean
    assert fx_cuts(traced) == ["detach"]
    scripted = torch.jit.script(traced)
    torch.testing.assert_close(gradient(scripted, XV), gradient(g, XV))


XM = torch.tensor([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]], dtype=torch.float64)
# ops that give a tuple or a list: `.detach()` on their Proxy would fail when the graph runs
TUPLE_RETURNING = {
    "max": lambda x: stop_gradient(x.max(0)).values * x,
    "max-unpacked": lambda x: x * stop_gradient(x.max(0))[0],
    "min-keyword": lambda x: x * stop_gradient(torch.min(x, dim=1, keepdim=True)).values,
    "sort": lambda x: x * stop_gradient(torch.sort(x, 1))[0],
    "split": lambda x: x[:, :2] * stop_gradient(x.split(2, 1))[0],
    "topk": lambda x: x[:, :2] * stop_gradient(x.topk(2)).values,
    "chunk": lambda x: x * stop_gradient(torch.chunk(x, 2))[1],
    "unbind": lambda x: x * stop_gradient(x.unbind(0))[0],
    "shape-arithmetic": lambda x: x * stop_gradient(x.shape[0] * 2),  # a number at run time
}


@pytest.mark.parametrize("function", TUPLE_RETURNING.values(), ids=TUPLE_RETURNING)
def test_fx_cuts_what_a_tuple_returning_op_gives(function):
    traced = torch.fx.symbolic_trace(function)
    assert fx_cuts(traced)
    torch.testing.assert_close(traced(XM), function(XM))
    torch.testing.assert_close(gradient(traced, XM), gradient(function, XM))
    # the traced graph, traced again: the cut runs on the real value
    retraced = make_fx(traced)(XM)
    torch.testing.assert_close(gradient(retraced, XM), gradient(function, XM))
    jit_traced = torch.jit.trace(traced, XM.clone().requires_grad_())
    torch.testing.assert_close(gradient(jit_traced, XM), gradient(function, XM))


def f_scaled(x):
    return x * stop_gradient(x.mean())


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3, dtype=torch.float64)

    def forward(self, x):
        y = self.linear(x)
        return y * stop_gradient(y.sum()) + stop_gradient((y.max(0), y))[1]


@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("make", [lambda: f_scaled, Scaled], ids=["function", "module-with-parameters"])
def test_jit_trace_with_its_check_records_one_graph_in_either_grad_mode(make, requires_grad):
    # jit.trace's check runs the function again under no_grad and compares the graphs
    function = make()
    x = XM.clone().requires_grad_(requires_grad)
    traced = torch.jit.trace(function, x)  # check_trace=True, the default
    assert "aten::detach" in str(traced.graph)
    torch.testing.assert_close(traced(XM), function(XM))
    torch.testing.assert_close(gradient(traced, XM), gradient(function, XM))
    if isinstance(function, torch.nn.Module):
        for mine, theirs in zip(traced.parameters(), function.parameters()):
            (a,) = torch.autograd.grad(traced(XM).sum(), mine)
            (b,) = torch.autograd.grad(function(XM).sum(), theirs)
            torch.testing.assert_close(a, b)


def test_jit_trace_records_the_cut():
    traced = torch.jit.trace(g, XV)
    assert "aten::detach" in str(traced.graph)
    torch.testing.assert_close(gradient(traced, XV), gradient(g, XV))


MAKE_FX_OPTIONS = {
    "default": {},
    "pre_dispatch": {"pre_dispatch": True},
    # core ATen decomposes detach into alias on every release: no cut either
    "core_aten": {"decomposition_table": core_aten_decompositions()},
}


def cut_in_graph(graph_module, options: str) -> object:
    """The node target that must hold the cut: detach where make_fx keeps it, else the shim's op."""
    detach_kept = options == "pre_dispatch" or (
        options == "default" and RELEASE.make_fx_keeps_detach
    )
    return torch.ops.aten.detach.default if detach_kept else torch.ops.lint_nograd.stop_gradient.default


@pytest.mark.parametrize("options", MAKE_FX_OPTIONS)
@pytest.mark.parametrize("tracing_mode", ["real", "fake", "symbolic"])
@pytest.mark.parametrize("function", [g, g_tree], ids=["tensor", "pytree"])
def test_make_fx_differentiates_to_the_eager_gradient(function, tracing_mode, options):
    traced = make_fx(function, tracing_mode=tracing_mode, **MAKE_FX_OPTIONS[options])(XV)
    targets = [node.target for node in traced.graph.nodes]
    assert cut_in_graph(traced, options) in targets
    assert torch.ops.aten.alias.default not in targets
    torch.testing.assert_close(gradient(traced, XV), gradient(function, XV))


def test_make_fx_graph_keeps_the_cut_under_every_transform():
    traced = make_fx(h, **MAKE_FX_OPTIONS["core_aten"])(X)  # holds the shim's op on every release
    assert torch.ops.lint_nograd.stop_gradient.default in [n.target for n in traced.graph.nodes]
    for transform, (derivative, expected) in DERIVATIVES.items():
        if transform == "linearize":
            continue  # torch.func.linearize re-traces with make_fx: covered by the test above
        traced_derivative = {
            "grad": torch.func.grad(traced),
            "jacfwd": torch.func.jacfwd(traced),
            "hessian": torch.func.hessian(traced),
            "jvp": lambda x: torch.func.jvp(traced, (x,), (ONE,))[1],
            "vmap-of-hessian": lambda x: torch.func.vmap(torch.func.hessian(traced))(
                x.expand(2)
            )[0],
        }.get(transform)
        if traced_derivative is not None:
            torch.testing.assert_close(traced_derivative(X), expected, msg=transform)
    xs = torch.arange(1.0, 4.0, dtype=torch.float64)
    torch.testing.assert_close(torch.func.vmap(torch.func.grad(traced))(xs), 3 * xs**4)


def test_the_cut_op_is_zero_copy_and_a_cut_in_eager_mode():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    y = torch.ops.lint_nograd.stop_gradient(x)
    assert not y.requires_grad and y.data_ptr() == x.data_ptr() and torch.equal(x, y)
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(x.detach(), torch.ones(3, dtype=x.dtype))
        out = torch.ops.lint_nograd.stop_gradient(dual)
        assert torch.autograd.forward_ad.unpack_dual(out).tangent is None


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_of_a_make_fx_graph_holding_the_cut_op(backend):
    traced = make_fx(g, **MAKE_FX_OPTIONS["core_aten"])(XV)
    torch._dynamo.reset()
    compiled = torch.compile(traced, fullgraph=True, backend=backend)
    torch.testing.assert_close(compiled(XV), g(XV))
    torch.testing.assert_close(gradient(compiled, XV), gradient(g, XV))


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


# --- every container: cut every tensor, keep the type (pytorch models return such values) ---


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    loss: torch.Tensor | None = None
    name: str = "out"


@dataclasses.dataclass(frozen=True)
class FrozenOutput:
    logits: torch.Tensor


@dataclasses.dataclass
class SlottedOutput:
    __slots__ = ("logits",)
    logits: torch.Tensor


@dataclasses.dataclass
class ModelOutput(collections.OrderedDict):
    """As Hugging Face's: an OrderedDict subclass and a dataclass, items and attributes alike."""

    logits: torch.Tensor | None = None

    def __post_init__(self):
        self["logits"] = self.logits

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)


class Dict(dict):
    pass


class Tuple(tuple):
    pass


class List(list):
    pass


class Registered:
    """A class its author registered as a pytree node."""

    def __init__(self, logits):
        self.logits = logits


register_pytree_node(
    Registered, lambda r: ([r.logits], None), lambda children, _: Registered(children[0])
)

CONTAINERS = {  # name -> (wrap a tensor, read it back)
    "dataclass": (lambda t: Output(t, loss=t.sum()), lambda c: c.logits),
    "frozen dataclass": (FrozenOutput, lambda c: c.logits),
    "slots dataclass": (SlottedOutput, lambda c: c.logits),
    "ModelOutput attribute": (lambda t: ModelOutput(logits=t), lambda c: c.logits),
    "ModelOutput item": (lambda t: ModelOutput(logits=t), lambda c: c["logits"]),
    "OrderedDict": (lambda t: collections.OrderedDict(a=t), lambda c: c["a"]),
    "defaultdict": (lambda t: collections.defaultdict(list, a=t), lambda c: c["a"]),
    "dict subclass": (lambda t: Dict(a=t), lambda c: c["a"]),
    "mappingproxy": (lambda t: types.MappingProxyType({"a": t}), lambda c: c["a"]),
    "tuple subclass": (lambda t: Tuple((t, 1)), lambda c: c[0]),
    "namedtuple": (lambda t: Pair(t, 1), lambda c: c.weight),
    "torch.return_types": (lambda t: torch.max(t.unsqueeze(0), 0), lambda c: c.values),
    "list subclass": (lambda t: List([t]), lambda c: c[0]),
    "deque": (lambda t: collections.deque([t], maxlen=4), lambda c: c[0]),
    "set": (lambda t: {t}, lambda c: next(iter(c))),
    "frozenset": (lambda t: frozenset([t]), lambda c: next(iter(c))),
    "registered pytree node": (Registered, lambda c: c.logits),
    "nested": (
        lambda t: {"outputs": [Output(Pair(t, 0))], "extra": (None, "x")},
        lambda c: c["outputs"][0].logits.weight,
    ),
}


@pytest.mark.parametrize("container", CONTAINERS)
def test_every_tensor_in_a_container_is_cut(container):
    wrap, read = CONTAINERS[container]

    def f(x):  # x**2 computed, cut, then times x: f' = x**2 = 4 with the cut, 3 x**2 = 12 without
        return read(stop_gradient(wrap(x * x))) * x

    x = torch.tensor(2.0, dtype=torch.float64)
    torch.testing.assert_close(gradient(f, x), x**2)
    torch.testing.assert_close(torch.func.jacfwd(f)(x), x**2)  # forward mode too
    original = wrap(x.clone().requires_grad_() * 1.0)
    cut = stop_gradient(original)
    assert type(cut) is type(original)
    assert torch.equal(read(cut), read(original)) and not read(cut).requires_grad


def test_containers_keep_what_they_are():
    defaults = stop_gradient(collections.defaultdict(list, a=XV.requires_grad_()))
    assert defaults.default_factory is list
    assert stop_gradient(collections.deque([XV], maxlen=4)).maxlen == 4
    frozen = stop_gradient(FrozenOutput(XV))
    with pytest.raises(dataclasses.FrozenInstanceError):
        frozen.logits = XV
    output = stop_gradient(Output(XV, loss=None, name="mine"))
    assert output.name == "mine" and output.loss is None
    model_output = stop_gradient(ModelOutput(logits=XV * 2))
    assert model_output.logits is model_output["logits"]  # one tensor, as in the original


def test_what_holds_nothing_to_cut_comes_back_as_it_is():
    size = torch.Size([2, 3])
    assert stop_gradient(size) is size and type(stop_gradient(size)) is torch.Size
    ints = {"steps": [1, 2], "index": torch.arange(3), "name": ("a", None)}
    assert stop_gradient(ints) is ints
    output = Output(torch.arange(2))
    assert stop_gradient(output) is output


@pytest.mark.parametrize(
    "leaf",
    [len, print, lambda x: x, functools.partial(max, 1), Output, torch.nn.Linear, numpy.ones(3),
     numpy.float32(2.0), torch.device("cpu"), torch.strided, 1j, b"bytes", range(3), Ellipsis],
    ids=repr,
)
def test_functions_classes_and_numpy_pass_unchanged(leaf):
    assert stop_gradient(leaf) is leaf


class Holder:
    def __init__(self, tensor):
        self.tensor = tensor


@pytest.mark.parametrize(
    "foreign",
    [Holder(XV), torch.nn.Linear(2, 2), types.SimpleNamespace(t=XV), object(), [1, Holder(XV)]],
    ids=lambda value: type(value).__name__,
)
def test_an_object_it_cannot_look_into_is_a_type_error_naming_it(foreign):
    inside = foreign[1] if isinstance(foreign, list) else foreign
    with pytest.raises(TypeError, match=type(inside).__qualname__) as raised:
        stop_gradient(foreign)
    assert "register_pytree_node" in str(raised.value)


def test_deep_nesting_is_a_clear_error_not_a_recursion_error():
    deep = XV
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ValueError, match=f"more than {MAX_DEPTH} levels"):
        stop_gradient(deep)
    itself: list = [XV]
    itself.append(itself)
    with pytest.raises(ValueError, match="holds itself"):
        stop_gradient(itself)
    nested = XV
    for _ in range(MAX_DEPTH):
        nested = (nested,)
    stop_gradient(nested)  # as deep as allowed


def test_lint_nograd_stop_gradient_is_resolved_once():
    import lint_nograd
    from lint_nograd import shim

    assert lint_nograd.stop_gradient is shim.stop_gradient
    assert vars(lint_nograd)["stop_gradient"] is shim.stop_gradient  # no __getattr__ call again
    with pytest.raises(AttributeError, match="no attribute 'stop_gradients'"):
        lint_nograd.stop_gradients  # noqa: B018
