"""Every fix fixture, run: the original and the rewritten code compute the same, and cost the same.

For each `fixtures/fix/<case>.in.py` with an `.out.py`, every function of one argument `x` and
every `nn.Module` class built without arguments is run in both versions. The reference is what
the original computes in eager reverse mode, where the region means what its author meant; the
rewritten code must give it under `grad`, `jacrev`, `jacfwd`, `hessian`, `vmap(grad)`, and traced
by `torch.fx.symbolic_trace`. (An `inference_mode` region that saves a tensor for backward cannot
be differentiated in reverse mode at all, which NG006 reports: there the rewritten code's own
reverse mode is the reference, and the values must match.)

Each memory-preserving rewrite (the region is kept) must keep peak tensor memory in eager reverse
mode: measured from the allocation events `torch.profiler` records, with a 5 % margin.
"""
from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from lint_nograd import stop_gradient  # noqa: E402
from torch.func import grad, hessian, jacfwd, jacrev, vmap  # noqa: E402
from torch.utils._pytree import tree_leaves  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FIXTURES = Path(__file__).parent / "fixtures" / "fix"
CASES = sorted(path.name[: -len(".out.py")] for path in FIXTURES.glob("*.out.py"))
X = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
BATCH = torch.tensor([[0.3, -1.2, 2.0], [1.1, 0.4, -0.7], [-2.0, 0.9, 0.5], [0.8, 1.3, -1.5]],
                     dtype=torch.float64)
# Functions the fix leaves as they are, or whose result is a transform's: values and reverse mode only.
NOT_REWRITTEN = {
    ("noqa", "kept"): "its region is under `# noqa`",
    ("stop_gradient_detach", "tuple_returning"): "refused: `.detach()` cannot cut a tuple",
    ("stop_gradient_detach", "module_call"): "refused: `.detach()` cannot cut what a module returns",
}
# Functions whose result is what the fix changes: they apply a forward-mode transform themselves.
NOT_COMPARABLE = {("import_no_imports", "run")}
# Functions `symbolic_trace` cannot record: a module made during the call is not part of the traced root.
UNTRACEABLE = {("kept_module_call", "uses_decorated"): "makes `nn.Tanh()` while it runs"}


@pytest.fixture(scope="module", autouse=True)
def user_helper_module():
    """`mypkg.autodiff.stop_gradient`, the helper the `stop-gradient` setting of some fixtures names."""
    package, module = types.ModuleType("mypkg"), types.ModuleType("mypkg.autodiff")
    module.stop_gradient = stop_gradient
    package.autodiff = module
    sys.modules.update({"mypkg": package, "mypkg.autodiff": module})
    yield
    del sys.modules["mypkg"], sys.modules["mypkg.autodiff"]


@pytest.fixture(autouse=True)
def float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def entry_points(case: str) -> list[str]:
    """The functions of one tensor and the module classes of a fixture, by name."""
    tree = ast.parse((FIXTURES / f"{case}.in.py").read_text())
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            args = node.args
            if len(args.posonlyargs + args.args) == 1 and not (args.vararg or args.kwonlyargs or args.kwarg):
                names.append(node.name)
        elif isinstance(node, ast.ClassDef) and any(ast.unparse(base).endswith("Module") for base in node.bases):
            names.append(node.name)
    return names


def load(case: str, suffix: str) -> dict:
    torch.manual_seed(0)  # the same parameters in both versions
    namespace: dict = {"__name__": f"fixture_{case}"}
    exec(compile((FIXTURES / f"{case}{suffix}").read_text(), f"{case}{suffix}", "exec"), namespace)
    return namespace


def function(namespace: dict, name: str):
    value = namespace[name]
    if isinstance(value, type):
        torch.manual_seed(1)
        return value()
    return value


def vector(f):
    """`f` with its outputs flattened into one vector (functions may return tuples)."""
    return lambda x: torch.cat([leaf.reshape(-1) for leaf in tree_leaves(f(x)) if isinstance(leaf, torch.Tensor)])


def total(f):
    return lambda x: vector(f)(x).sum()


def outputs_a_tensor(f) -> bool:
    try:
        return any(isinstance(leaf, torch.Tensor) for leaf in tree_leaves(f(X)))
    except TypeError:  # needs other arguments than one tensor
        return False


def close(a, b) -> None:
    torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)


def eager_gradient(f, x):
    x = x.clone().requires_grad_()
    y = total(f)(x)
    found = torch.autograd.grad(y, x, allow_unused=True)[0] if y.requires_grad else None
    return torch.zeros_like(x) if found is None else found


def reference(compute, old, new):
    """`compute(old)`: what the original means. Where an inference_mode region makes reverse mode
    fail on the original (`Inference tensors cannot be saved for backward`, and the like under
    transforms), the rewritten code's own reverse mode stands in."""
    try:
        return compute(old)
    except RuntimeError as error:
        if "nference tensor" not in str(error):
            raise
        return compute(new)


def traced(f, namespace: dict):
    """`torch.fx.symbolic_trace` of `f`, with the modules the fixture keeps in globals as submodules."""
    class Root(torch.nn.Module):
        def forward(self, x):
            return f(x)

    root = Root()
    for name, value in namespace.items():
        if isinstance(value, torch.nn.Module):
            root.add_module(name, value)
    if isinstance(f, torch.nn.Module):
        root.add_module("function", f)
    return torch.fx.symbolic_trace(root)


PAIRS = [(case, name) for case in CASES for name in entry_points(case) if (case, name) not in NOT_COMPARABLE]


def test_every_fixture_has_something_to_run():
    for case in CASES:
        old = load(case, ".in.py")
        assert any(outputs_a_tensor(function(old, name)) for name in entry_points(case)), case


@pytest.mark.parametrize("case, name", PAIRS, ids=[f"{case}-{name}" for case, name in PAIRS])
def test_rewritten_code_computes_what_the_original_means(case: str, name: str):
    namespace = load(case, ".out.py")
    old, new = function(load(case, ".in.py"), name), function(namespace, name)
    if not outputs_a_tensor(old):
        pytest.skip("not a function of one tensor that returns tensors")
    close(vector(new)(X), vector(old)(X))
    gradient = reference(lambda f: eager_gradient(f, X), old, new)
    jacobian = reference(lambda f: jacrev(vector(f))(X), old, new)
    close(grad(total(new))(X), gradient)
    close(jacrev(vector(new))(X), jacobian)
    close(vmap(grad(total(new)))(BATCH), reference(lambda f: vmap(grad(total(f)))(BATCH), old, new))
    if (case, name) in NOT_REWRITTEN:
        return
    close(jacfwd(vector(new))(X), jacobian)
    close(hessian(total(new))(X), reference(lambda f: jacrev(jacrev(total(f)))(X), old, new))
    if (case, name) not in UNTRACEABLE:
        close(eager_gradient(traced(new, namespace), X), gradient)


def test_what_is_not_rewritten_is_left_as_it_was():
    for case, name in NOT_REWRITTEN:
        definitions = [{node.name: ast.dump(node) for node in ast.parse((FIXTURES / f"{case}{suffix}").read_text()).body
                        if isinstance(node, ast.FunctionDef)} for suffix in (".in.py", ".out.py")]
        assert definitions[0][name] == definitions[1][name], (case, name)


# -- peak memory of the memory-preserving rewrites ----------------------------------------------------

def keeps_a_region(case: str, name: str) -> bool:
    """Whether the fix rewrote the function (or class) and left a grad-disabling region in it."""
    definitions = [{node.name: node for node in ast.parse((FIXTURES / f"{case}{suffix}").read_text()).body
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef))} for suffix in (".in.py", ".out.py")]
    old, new = (ast.dump(d[name]) for d in definitions)
    return old != new and any(word in ast.unparse(definitions[1][name]) for word in ("no_grad", "set_grad_enabled"))


KEPT = [(case, name) for case, name in PAIRS if keeps_a_region(case, name)]


def wide() -> torch.Tensor:
    return torch.randn(2048, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)


def peak_tensor_bytes(call) -> int:
    """The highest total of live tensor bytes during `call()`, over what was live before it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        call()
    events = sorted((event.start_ns(), event.nbytes()) for event in prof.profiler.kineto_results.events()
                    if event.name() == "[memory]")
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def reverse_mode_step(f, x):
    """A training step's tensor work: forward, then backward from the sum of the outputs."""
    def step():
        leaf = x.clone().requires_grad_()
        loss = total(f)(leaf)
        if loss.requires_grad:
            loss.backward()
    return step


def forward_only(f, x):
    return lambda: total(f)(x)


def test_the_memory_cases_are_the_memory_preserving_fixtures():
    assert {case for case, _ in KEPT} >= {"kept_module_call", "kept_known_ops", "kept_inference_mode"}
    assert ("kept_module_call", "Distilled") in KEPT and ("assign_single", "f") not in KEPT


@pytest.mark.parametrize("case, name", KEPT, ids=[f"{case}-{name}" for case, name in KEPT])
def test_a_kept_region_keeps_peak_memory(case: str, name: str):
    old, new = function(load(case, ".in.py"), name), function(load(case, ".out.py"), name)
    x = wide()
    try:
        old(x)
    except RuntimeError:  # written for one example, not a batch of them
        x = X
    try:
        reverse_mode_step(old, x)()
        run = reverse_mode_step
    except RuntimeError as error:
        # an inference_mode original cannot run in reverse mode: compare the forward, x a constant
        assert "nference tensor" in str(error)
        run = forward_only
    before, after = peak_tensor_bytes(run(old, x)), peak_tensor_bytes(run(new, x))
    assert after <= before * 1.05, (before, after)


def test_the_measurement_sees_the_short_forms_cost():
    """Guards the test above: the short form of the teacher case keeps the teacher's activations."""
    namespace = load("kept_module_call", ".out.py")
    short = (FIXTURES / "kept_module_call.out.py").read_text().replace(
        "        with torch.no_grad():\n            target = stop_gradient(self.teacher(x))",
        "        target = stop_gradient(self.teacher(x))")
    assert short != (FIXTURES / "kept_module_call.out.py").read_text()
    exec(compile(short, "short", "exec"), short_namespace := {"__name__": "short"})
    kept, cut = function(namespace, "Distilled"), function(short_namespace, "Distilled")
    x = wide()
    before, after = peak_tensor_bytes(reverse_mode_step(kept, x)), peak_tensor_bytes(reverse_mode_step(cut, x))
    assert after > before * 1.05, (before, after)
