"""The fix keeps what PyTorch computes: run the original and the rewritten functions side by side.

Reverse mode (values, `grad`, `vjp`, `jacrev`, `grad(grad)`) must not change. Forward mode and
tracing must change, to what reverse mode and eager mode always said: after the rewrite `jacfwd`
equals the original's `jacrev`, `hessian` equals `jacrev(jacrev)`, and a `torch.fx.symbolic_trace`
of the rewritten function has the eager gradients.
"""
from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from lint_nograd.fix.rewrite import FIXABLE_CODES, check_with_fixes, fix_source  # noqa: E402
from torch.func import grad, hessian, jacfwd, jacrev, vjp  # noqa: E402

# torch's own forward-mode decompositions still go through torch.jit.script on first use
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")

X = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)

SOURCE = textwrap.dedent('''\
    import contextlib

    import torch
    from torch.func import jacfwd, jacrev


    def single(x):
        with torch.no_grad():
            shift = x.mean()
        return x - shift


    def cubic(x):
        with torch.no_grad():
            s = x * x
        return s * x


    def pair(x):
        with torch.no_grad():
            a, b = x.mean(), x.sin()
        return (x - a) * b * x


    def annotated(x):
        with torch.no_grad():
            scale: torch.Tensor = x.abs().max()
        return x * x / scale


    def several(x):
        with torch.no_grad():
            h = torch.tanh(x)
            lo = hi = h.mean()
            g = h * 2; k = g + lo
        return x * k + hi * x * x


    def returns(x):
        with torch.no_grad():
            s = x.sum()
            return x * x / s


    def grad_disabled(x):
        with torch.set_grad_enabled(False):
            s = x.sin()
        return x * s


    def inference_added(x):
        with torch.inference_mode():
            s = x.mean()
        return x * x - s


    def other_item(x):
        with contextlib.nullcontext(), torch.no_grad():
            s = x.exp()
        return x * s


    def mixed(x):
        with torch.no_grad():
            a, b = x.mean(), x
        return a * b * x


    @torch.no_grad()
    def decorated_helper(x):
        m = x.mean()
        return x * m


    def uses_decorated(x):
        return decorated_helper(x) * x


    def nested(x):
        with torch.no_grad():
            with torch.no_grad():
                s = x.cos()
        return s * x


    def inference_saved(x):
        with torch.inference_mode():
            s = x * 2
        return s * x
''')
FUNCTIONS = ["single", "cubic", "pair", "annotated", "several", "returns", "grad_disabled", "inference_added",
             "other_item", "mixed", "uses_decorated", "nested"]
# reverse mode reaches every region (NG006); forward mode does not report inference_mode (NG004)
REACHERS = "".join(f"jacfwd({name})\njacrev({name})\n" for name in [*FUNCTIONS, "inference_saved"])


def load(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<fixed>", "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def modules() -> tuple[dict, dict]:
    source = SOURCE + "\n\n" + REACHERS
    fixed = fix_source(source.encode())
    assert fixed.fixed >= len(FUNCTIONS) and not fixed.remaining, fixed.remaining
    assert "no_grad" not in fixed.text and "inference_mode" not in fixed.text
    return load(source), load(fixed.text)


def total(f):
    return lambda x: f(x).sum()


def close(a, b) -> None:
    torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def gradient(f, x):
    """d f(x).sum() / dx by plain autograd; zeros when no gradient reaches `x` at all."""
    x = x.clone().requires_grad_()
    y = f(x).sum()
    found = torch.autograd.grad(y, x, allow_unused=True)[0] if y.requires_grad else None
    return torch.zeros_like(x) if found is None else found


def traced_gradient(f, x):
    return gradient(torch.fx.symbolic_trace(f), x)


def eager_gradient(f, x):
    return gradient(f, x)


def assert_same_in_reverse_mode(old, new, x=X) -> None:
    close(new(x), old(x))
    close(grad(total(new))(x), grad(total(old))(x))
    ones = torch.ones_like(old(x))
    close(vjp(new, x)[1](ones), vjp(old, x)[1](ones))
    close(jacrev(new)(x), jacrev(old)(x))
    close(grad(lambda y: grad(total(new))(y).sum())(x), grad(lambda y: grad(total(old))(y).sum())(x))


def assert_forward_mode_and_tracing_agree(old, new, x=X) -> None:
    close(jacfwd(new)(x), jacrev(old)(x))
    close(hessian(total(new))(x), jacrev(jacrev(total(old)))(x))
    close(traced_gradient(new, x), eager_gradient(old, x))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_reverse_mode_is_unchanged(modules, name):
    old, new = modules
    assert_same_in_reverse_mode(old[name], new[name])


@pytest.mark.parametrize("name", FUNCTIONS)
def test_forward_mode_and_tracing_now_agree_with_reverse_mode(modules, name):
    old, new = modules
    assert_forward_mode_and_tracing_agree(old[name], new[name])


def test_the_originals_really_disagreed(modules):
    """Guards the test itself: before the fix, forward mode and tracing went through the regions."""
    old, _ = modules
    assert not torch.allclose(jacfwd(old["cubic"])(X), jacrev(old["cubic"])(X))
    assert not torch.allclose(traced_gradient(old["single"], X), eager_gradient(old["single"], X))


def test_inference_tensors_saved_for_backward_now_work(modules):
    old, new = modules
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        jacrev(old["inference_saved"])(X)
    close(jacrev(new["inference_saved"])(X), torch.diag(2 * X))
    close(jacfwd(new["inference_saved"])(X), torch.diag(2 * X))


# -- property: generated region bodies ----------------------------------------------------------

ATOM_FUNCTIONS = ["{}.sin()", "{}.cos()", "torch.tanh({})", "{}.mean()", "({} * {})", "({} + {})", "({} - {})",
                  "({} * 0.5)", "{}.sum()"]
REGION_FORMS = ["torch.no_grad()", "no_grad()", "torch.autograd.no_grad()", "torch.set_grad_enabled(False)",
                "set_grad_enabled(mode=False)"]


@st.composite
def expressions(draw, names: list[str], depth: int = 2) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(names))
    template = draw(st.sampled_from(ATOM_FUNCTIONS))
    return template.format(*[draw(expressions(names, depth - 1)) for _ in range(template.count("{}"))])


@st.composite
def functions(draw) -> str:
    """A module whose function `f` has a grad-disabled region with a generated body."""
    pre = ["p = x * 1.5"] if draw(st.booleans()) else []
    body, defined = [], []
    for index in range(draw(st.integers(1, 4))):
        names = ["x", *(["p"] if pre else []), *defined]  # what the statement may use
        kind = draw(st.sampled_from(["assign", "assign", "tuple", "read", "annotated"]))
        new = f"v{index}"
        if kind == "tuple":
            body.append(f"{new}, w{index} = {draw(expressions(names))}, {draw(expressions(names))}")
            defined += [new, f"w{index}"]
        elif kind == "read":
            body.append(f"{new} = {draw(st.sampled_from(names))}")
            defined.append(new)
        else:
            annotation = ": torch.Tensor" if kind == "annotated" else ""
            body.append(f"{new}{annotation} = {draw(expressions(names))}")
            defined.append(new)
    names = ["x", *(["p"] if pre else []), *defined]
    result = " + ".join(defined)
    returns_inside = draw(st.booleans())
    if returns_inside:
        body.append(f"return x * ({result}) + {draw(expressions(names))}")
    decorated = draw(st.booleans())
    form = draw(st.sampled_from(REGION_FORMS))
    lines = ["import torch", "from torch import no_grad, set_grad_enabled", "from torch.func import jacfwd", "", ""]
    if decorated:
        lines += [f"@{form}", "def helper(x):", *(f"    {line}" for line in pre + body)]
        if not returns_inside:
            lines.append(f"    return x * ({result})")
        lines += ["", "", "def f(x):", "    return helper(x) * x + x"]
    else:
        lines += ["def f(x):", *(f"    {line}" for line in pre), f"    with {form}:",
                  *(f"        {line}" for line in body)]
        if not returns_inside:
            lines.append(f"    return x * ({result}) + x")
    lines += ["", "", "jacfwd(f)", ""]
    return "\n".join(lines)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(functions())
def test_generated_regions(source: str):
    fixed = fix_source(source.encode()).text
    ast.parse(fixed)
    # a region that only reads its values is no finding, and stays; any other one goes
    assert not check_with_fixes(fixed.encode(), "f.py", FIXABLE_CODES)
    assert (fixed != source) == bool(check_with_fixes(source.encode(), "f.py", FIXABLE_CODES))
    assert fix_source(fixed.encode()).text == fixed, "fixing twice must change nothing the second time"
    old, new = load(source)["f"], load(fixed)["f"]
    assert_same_in_reverse_mode(old, new)
    assert_forward_mode_and_tracing_agree(old, new)


# -- scripted code: TorchScript compiles what the fix writes -----------------------------------------

SCRIPTED = textwrap.dedent('''\
    import torch
    from torch import nn
    from torch.func import jacfwd


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3).double()

        def forward(self, x):
            with torch.no_grad():
                scale = x.norm()
            return self.lin(x) / scale


    @torch.jit.script
    def centered(x):
        with torch.no_grad():
            shift = x.mean()
        return x * x - shift


    @torch.jit.script
    def shifted(x):
        with torch.no_grad():
            top, _ = x.max(0)  # a tuple to cut
        return x * x - top


    scripted = torch.jit.script(Net())  # at import time
    forward = jacfwd(Net()), jacfwd(centered), jacfwd(shifted)
''')


@pytest.mark.filterwarnings("ignore:`torch.jit.save` is deprecated", "ignore:`torch.jit.load` is deprecated")
def test_scripted_code_compiles_after_the_fix_with_the_same_values_and_gradients(tmp_path, monkeypatch):
    """TorchScript reads the source of what it compiles: the fixed file is imported from disk."""
    fixed = fix_source(SCRIPTED.encode())
    assert fixed.fixed == 3 and "no_grad" not in fixed.text
    assert "stop_gradient(x.norm())" in fixed.text and "top, _ = stop_gradient(x.max(0))" in fixed.text
    (tmp_path / "scripted_original.py").write_text(SCRIPTED)
    (tmp_path / "scripted_fixed.py").write_text(fixed.text)
    monkeypatch.syspath_prepend(str(tmp_path))
    import scripted_fixed
    import scripted_original

    eager = scripted_original.Net()
    net = torch.jit.script(scripted_fixed.Net())
    net.load_state_dict(eager.state_dict())
    for old, new in ((eager, net), (scripted_original.centered, scripted_fixed.centered),
                     (scripted_original.shifted, scripted_fixed.shifted)):
        close(new(X), old(X))
        close(gradient(new, X), gradient(old, X))
    torch.jit.save(net, tmp_path / "net.pt")
    close(torch.jit.load(tmp_path / "net.pt")(X), eager(X))
    without_lint_nograd = ("import sys; sys.modules['lint_nograd'] = None; import torch; "
                           f"print(torch.jit.load({str(tmp_path / 'net.pt')!r})(torch.ones(3, dtype=torch.float64)))")
    loaded = subprocess.run([sys.executable, "-c", without_lint_nograd], capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0 and "tensor(" in loaded.stdout, loaded.stderr
