"""A safe fix changes nothing that works: generated regions, fixed with the safe fixes only, run.

Each example is a region body over the operations `lint-nograd fix` calls light (elementwise,
reductions, views), the ones that may return their input itself (`x.flatten()`, `+x`, `x.real`,
`x.to(x.dtype)`, ...) and the ones that return a tuple (`x.max(0)`, `torch.sort`, `split`,
`topk`, `chunk`, `unbind`, ...), in a function `f(x)` and in the `forward` of a module with a
parameter. Where the safe fix rewrites it, the rewritten code must give what the original means
(its eager values and reverse-mode gradients, where the region is respected) under `grad`,
`jacrev`, `jacfwd`, `jvp`, `vmap(grad)`, `torch.fx.symbolic_trace`, `torch.jit.trace` (its
default check, with an input and parameters that require grad) and `make_fx`. A region the safe
tier leaves alone (refused, or only an unsafe fix) must be left as it was.
"""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from lint_nograd.fix.rewrite import FIXABLE_CODES, FixSettings, check_with_fixes, fix_source  # noqa: E402
from torch.func import grad, jacfwd, jacrev, jvp, vmap  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
]

SAFE_ONLY = FixSettings(unsafe_fixes=False)
X = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
TANGENT = torch.tensor([1.0, -0.5, 0.25], dtype=torch.float64)
BATCH = torch.tensor([[0.3, -1.2, 2.0], [1.1, 0.4, -0.7], [-2.0, 0.9, 0.5]], dtype=torch.float64)

# (template, shape of the argument, shape of the result): "v" a vector of 3, "s" a scalar
LIGHT = [
    ("{}.sin()", "v", "v"), ("torch.tanh({})", "v", "v"), ("torch.sigmoid({})", "v", "v"),
    ("{}.flip(0)", "v", "v"), ("{}.roll(1)", "v", "v"), ("{}.view(-1)", "v", "v"), ("{}.reshape(3)", "v", "v"),
    ("{}.unsqueeze(0).squeeze(0)", "v", "v"), ("{}.softmax(0)", "v", "v"), ("{}.clamp(-1.0, 1.0)", "v", "v"),
    ("torch.exp({} * 0.1)", "v", "v"), ("{}.t()", "v", "v"), ("abs({})", "v", "v"),
    ("{}.mean()", "v", "s"), ("{}.sum()", "v", "s"), ("{}.max()", "v", "s"), ("{}.logsumexp(0)", "v", "s"),
    ("{}.std()", "v", "s"), ("{}.sin()", "s", "s"), ("torch.tanh({})", "s", "s"), ("{}.exp()", "s", "s"),
]
# operations that may return their argument itself: `no_grad` does not cut that
IDENTITY = [
    ("{}.flatten()", "v", "v"), ("(+{})", "v", "v"), ("(+{})", "s", "s"), ("torch.flatten({})", "v", "v"),
    ("{}.real", "v", "v"), ("{}.real", "s", "s"), ("{}.conj()", "v", "v"), ("{}.to(torch.float64)", "v", "v"),
    ("{}.double()", "s", "s"), ("{}.contiguous()", "v", "v"), ("{}.cpu()", "v", "v"), ("{}.type_as(x)", "v", "v"),
    ("torch.dropout({}, 0.5, False)", "v", "v"),  # in eval mode: the input itself
]
BINARY = ["({} * {})", "({} + {})", "({} - {})"]
# operations that return a tuple (or a list) of tensors, as a region's whole value
TUPLES = ["{}.max(0)", "torch.sort({})", "{}.split(1)", "{}.topk(2)", "{}.chunk(3)", "{}.unbind()",
          "torch.min({}, 0)", "{}.aminmax()", "torch.std_mean({})", "{}.sort(descending=True)"]
PAIRS = ["{}.max(0)", "torch.sort({})", "{}.topk(2)", "{}.aminmax()", "torch.std_mean({})"]


@st.composite
def expressions(draw, names: dict[str, str], depth: int = 2) -> tuple[str, str]:
    """(code, shape) of an expression over `names` (name -> its shape)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        name = draw(st.sampled_from(sorted(names)))
        return name, names[name]
    if draw(st.integers(0, 4)) == 0:
        left, left_shape = draw(expressions(names, depth - 1))
        right, right_shape = draw(expressions(names, depth - 1))
        shape = "v" if "v" in (left_shape, right_shape) else "s"
        return draw(st.sampled_from(BINARY)).format(left, right), shape
    inner, shape = draw(expressions(names, depth - 1))
    template, _, result = draw(st.sampled_from([op for op in LIGHT + IDENTITY if op[1] == shape]))
    return template.format(inner), result


@st.composite
def region_bodies(draw) -> tuple[list[str], list[str]]:
    """The statements of a region over `x` and `p` (computed before it), and how each value it
    binds is used after it (a tensor that broadcasts with `x`)."""
    names = {"x": "v", "p": "v"}
    body, uses = [], []
    for index in range(draw(st.integers(1, 3))):
        new = f"v{index}"
        kind = draw(st.sampled_from(["value", "value", "value", "tuple", "pair", "read"]))
        vectors = sorted(name for name, shape in names.items() if shape == "v")
        if kind == "tuple":
            argument = draw(st.sampled_from(vectors))
            body.append(f"{new} = {draw(st.sampled_from(TUPLES)).format(argument)}")
            uses.append(f"{new}[0].sum()")
        elif kind == "pair":
            argument = draw(st.sampled_from(vectors))
            body.append(f"{new}, w{index} = {draw(st.sampled_from(PAIRS)).format(argument)}")
            uses.append(f"{new}.sum()")
        elif kind == "read":
            name = draw(st.sampled_from(sorted(names)))
            body.append(f"{new} = {name}")
            names[new] = names[name]
            uses.append(new)
        else:
            code, shape = draw(expressions(names))
            body.append(f"{new} = {code}")
            names[new] = shape
            uses.append(new)
    return body, uses


def program(body: list[str], uses: list[str]) -> str:
    region = [f"        {line}" for line in body]
    result = " + ".join(uses)
    return "\n".join([
        "import torch",
        "from torch import nn",
        "from torch.func import jacfwd",
        "",
        "",
        "def f(x):",
        "    p = x * 1.5",
        "    with torch.no_grad():",
        *region,
        f"    return x * ({result}) + x",
        "",
        "",
        "class Model(nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        "        self.w = nn.Parameter(torch.tensor([0.7, -0.4, 1.3], dtype=torch.float64))",
        "",
        "    def forward(self, x):",
        "        p = x * self.w",
        "        with torch.no_grad():",
        *(f"    {line}" for line in region),
        f"        return x * self.w * ({result}) + p",
        "",
        "",
        "def traced(x):",
        "    return torch.jit.trace(Model(), x)",
        "",
        "",
        "jacfwd(f)",
        "",
    ])


def load(source: str) -> dict:
    namespace: dict = {"__name__": "generated"}  # jit.trace names functions by their module
    exec(compile(source, "generated.py", "exec"), namespace)
    return namespace


def close(actual, expected, what: str) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-7, atol=1e-10, equal_nan=True, msg=lambda m: f"{what}: {m}")


def total(f):
    return lambda x: f(x).sum()


def eager_gradient(f, x: torch.Tensor) -> torch.Tensor:
    x = x.detach().clone().requires_grad_()
    y = f(x).sum()
    found = torch.autograd.grad(y, x, allow_unused=True)[0] if y.requires_grad else None
    return torch.zeros_like(x) if found is None else found


def parameter_gradients(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    x = x.detach().clone().requires_grad_()
    inputs = (x, *model.parameters())
    return torch.autograd.grad(model(x).sum(), inputs, allow_unused=True)


def forward_mode_runs(f) -> bool:
    """Whether this torch release has forward-mode derivatives of every op `f` runs (torch 2.5 has
    none for `aminmax`): where the original cannot run, there is nothing to compare."""
    try:
        jacfwd(f)(X)
    except NotImplementedError:
        return False
    return True


def assert_means_the_original(old: dict, new: dict) -> None:
    """`new` (the fixed program) computes what `old` means, whatever runs it."""
    f, g = old["f"], new["f"]
    close(g(X), f(X), "value")
    expected = jacrev(f)(X)  # reverse mode respects the region: what the author meant
    close(jacrev(g)(X), expected, "jacrev")
    close(grad(total(g))(X), grad(total(f))(X), "grad")
    if forward_mode_runs(f):
        close(jacfwd(g)(X), expected, "jacfwd")
        close(jvp(g, (X,), (TANGENT,))[1], expected @ TANGENT, "jvp")
    close(vmap(grad(total(g)))(BATCH), vmap(grad(total(f)))(BATCH), "vmap(grad)")
    reference = eager_gradient(f, X)
    close(eager_gradient(torch.fx.symbolic_trace(g), X), reference, "symbolic_trace")
    traced = torch.jit.trace(g, X.clone().requires_grad_())  # check_trace: run again under no_grad
    close(traced(X), f(X), "jit.trace value")
    close(eager_gradient(traced, X), reference, "jit.trace")
    close(eager_gradient(make_fx(g)(X), X), reference, "make_fx")
    model, fixed_model = old["Model"](), new["Model"]()
    expected_grads = parameter_gradients(model, X)
    traced_model = torch.jit.trace(fixed_model, X.clone().requires_grad_())
    for name, check in (("eager", fixed_model), ("jit.trace", traced_model),
                        ("symbolic_trace", torch.fx.symbolic_trace(fixed_model))):
        for got, want in zip(parameter_gradients(check, X), expected_grads):
            close(got, want, f"module under {name}")


@settings(max_examples=100, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(region_bodies())
def test_a_safe_fix_changes_nothing_that_works(generated):
    source = program(*generated)
    result = fix_source(source.encode(), settings=SAFE_ONLY)
    offered = check_with_fixes(source.encode(), "generated.py", FIXABLE_CODES, SAFE_ONLY)
    safe = [d for d in offered if d.fix is not None and d.fix.applicability == "safe"]
    assert bool(result.regions) == bool(safe)
    if not result.changed:
        assert result.text == source
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_means_the_original(load(source), load(result.text))


# What the generator must reach: regressions that a fix would break if the tiers were wrong.

KNOWN_CASES = {
    "flatten of an input is refused": (["v0 = x.flatten()"], ["v0"], False),
    "unary plus of an input is refused": (["v0 = +x"], ["v0"], False),
    "real part of an input is refused": (["v0 = x.real"], ["v0"], False),
    "same dtype of an input is refused": (["v0 = x.to(torch.float64)"], ["v0"], False),
    "dropout of an input in eval mode is refused": (["v0 = torch.dropout(p, 0.5, False)"], ["v0"], False),
    "flatten of a computed value is safe": (["v0 = (x * 2).flatten()"], ["v0"], True),
    "a tuple from max(0) is safe": (["v0 = x.max(0)"], ["v0[0].sum()"], True),
    "a pair from sort is safe": (["v0, w0 = torch.sort(p)"], ["v0.sum()"], True),
    "split, topk, chunk, unbind": (["v0 = p.split(1)", "v1 = x.topk(2)", "v2 = x.chunk(3)", "v3 = p.unbind()"],
                                   ["v0[0].sum()", "v1[0].sum()", "v2[0].sum()", "v3[0].sum()"], True),
}


@pytest.mark.parametrize("body, uses, rewritten", KNOWN_CASES.values(), ids=KNOWN_CASES)
def test_known_cases(body, uses, rewritten):
    source = program(body, uses)
    result = fix_source(source.encode(), settings=SAFE_ONLY)
    assert result.changed == rewritten
    if rewritten:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_means_the_original(load(source), load(result.text))


def test_the_check_fails_a_rewrite_that_cuts_an_input_passed_through():
    """Guards the test itself: cutting `x.flatten()` of a 1-D input changes jacrev."""
    source = program(["v0 = x.flatten()"], ["v0"])
    wrong = source.replace("    with torch.no_grad():\n        v0 = x.flatten()\n",
                           "    v0 = x.flatten().detach()\n", 1)
    assert wrong != source
    with pytest.raises(AssertionError):
        assert_means_the_original(load(source), load(wrong))
