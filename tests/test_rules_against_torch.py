"""The rules stay honest as PyTorch changes: run the examples and fixtures and check that each
reported pattern really misbehaves, and that each suggested replacement really does not."""
from __future__ import annotations

import ast
import functools
import runpy
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from lint_nograd.analysis.releases import behaviour  # noqa: E402
from rule_pages import PAGES, example, examples  # noqa: E402
from torch.func import hessian, jacfwd, jacrev  # noqa: E402

RELEASE = behaviour(torch.__version__)

PAGE = {page.stem: page for page in PAGES}
FIXTURES = Path(__file__).parent / "fixtures" / "checker"
X = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)


def run_example(code: str, section: str) -> dict:
    namespace: dict = {}
    exec(compile(example(PAGE[code], section), f"{code}.md", "exec"), namespace)
    return namespace


def test_ng001_transform_ignores_the_region():
    ns = run_example("NG001", "Example")
    assert torch.allclose(ns["slope"], torch.cos(torch.tensor(1.5)))
    assert ns["slope"].grad_fn is None  # only the result comes back without a graph


def test_ng001_both_intents_as_the_page_measures_them():
    """Outside the region the slope keeps a graph (d slope/dx = -sin x); cut, it has none, as inside."""
    kept, cut = ({} for _ in range(2))
    for code, namespace in zip(examples(PAGE["NG001"], "Use instead"), (kept, cut)):
        exec(compile(code, "NG001.md", "exec"), namespace)
    inside = run_example("NG001", "Example")["slope"]
    assert kept["slope"].item() == pytest.approx(0.0707, abs=1e-4) == cut["slope"].item() == inside.item()
    assert kept["slope"].grad_fn is not None and cut["slope"].grad_fn is None
    (second,) = torch.autograd.grad(kept["slope"], kept["x"])
    assert float(second) == pytest.approx(-0.9975, abs=1e-4)


def test_ng002_transform_under_inference_mode_as_the_release_table_says():
    ns = run_example("NG002", "Example")  # zeros before the fix for pytorch issue 177318
    correct = torch.allclose(ns["slope"], torch.cos(torch.tensor(1.5)))
    assert correct == (RELEASE.outer_inference_mode["grad"] == "correct")
    if not correct:
        assert torch.count_nonzero(ns["slope"]) == 0


def test_ng003_backward_fails_and_the_replacement_does_not():
    with pytest.raises(RuntimeError, match="does not require grad"):
        run_example("NG003", "Example")
    run_example("NG003", "Use instead")


def test_ng004_forward_and_reverse_disagree_and_stop_gradient_agrees():
    bad, good = run_example("NG004", "Example"), run_example("NG004", "Use instead")
    assert float(bad["forward"]) == pytest.approx(6.75) and float(bad["reverse"]) == pytest.approx(2.25)
    assert float(good["forward"]) == pytest.approx(2.25) == float(good["reverse"])


def test_ng004_memory_preserving_form_agrees_in_both_modes():
    before, after = ({} for _ in range(2))
    for code, namespace in zip(examples(PAGE["NG004"], "Fix safety"), (before, after)):
        torch.manual_seed(0)  # the same teacher in both
        exec(compile(code, "NG004.md", "exec"), namespace)
    x = torch.ones(3)
    assert not torch.allclose(jacfwd(before["distil"])(x), jacrev(before["distil"])(x))
    torch.testing.assert_close(jacfwd(after["distil"])(x), jacrev(after["distil"])(x))
    torch.testing.assert_close(jacrev(after["distil"])(x), jacrev(before["distil"])(x))


def _traced_minus_eager_gradient(traced, eager) -> float:
    x1, x2 = X.clone().requires_grad_(), X.clone().requires_grad_()
    traced(x1).sum().backward()
    eager(x2).sum().backward()
    return float((x1.grad - x2.grad).abs().max())


def test_ng005_traced_gradient_differs_and_stop_gradient_does_not():
    bad, good = run_example("NG005", "Example"), run_example("NG005", "Use instead")
    assert _traced_minus_eager_gradient(bad["traced"], bad["centered"]) > 0.1
    assert _traced_minus_eager_gradient(good["traced"], good["centered"]) == 0


def test_ng006_reverse_mode_respects_the_region_and_stop_gradient_matches():
    bad, good = run_example("NG006", "Example"), run_example("NG006", "Use instead")
    assert torch.equal(bad["g"], good["g"])


@pytest.fixture(scope="module")
def ng004_fixture():
    return runpy.run_path(str(FIXTURES / "ng004_forward_mode.py"))


@pytest.mark.parametrize("name", ["direct", "in_lambda", "for_jvp", "for_linearize", "nested",
                                  "calls_helper", "uses_decorated", "through_partial", "statement_form"])
def test_ng004_fixture_functions_differ_between_modes(ng004_fixture, name):
    f = ng004_fixture[name]
    if name == "through_partial":
        f = functools.partial(f, scale=2.0)
    assert not torch.allclose(jacfwd(f)(X), jacrev(f)(X))


def test_ng004_fixture_hessian_differs_from_reverse_over_reverse(ng004_fixture):
    f = ng004_fixture["for_hessian"]
    assert not torch.allclose(hessian(f)(X), jacrev(jacrev(f))(X))


def test_ng004_fixture_inference_mode_is_not_ignored_by_forward_mode(ng004_fixture):
    f = ng004_fixture["inference_only_forward"]  # no finding: both modes agree
    assert torch.allclose(jacfwd(f)(X), torch.eye(3, dtype=X.dtype))


@pytest.fixture(scope="module")
def ng005_fixture():
    return runpy.run_path(str(FIXTURES / "ng005_traced.py"))


def test_ng005_fixture_tracers_drop_the_region(ng005_fixture):
    from torch.fx.experimental.proxy_tensor import make_fx

    ns = ng005_fixture
    drops = {tracer: not keeps for tracer, keeps in RELEASE.keeps_region.items()}
    assert drops["symbolic_trace"] == (_traced_minus_eager_gradient(
        torch.fx.symbolic_trace(ns["traced_function"]), ns["traced_function"]) > 0.1)
    assert drops["jit_trace"] == (_traced_minus_eager_gradient(
        torch.jit.trace(ns["jit_traced"], (X,)), ns["jit_traced"]) > 0.1)
    assert drops["make_fx"] == (_traced_minus_eager_gradient(make_fx(ns["made"])(X), ns["made"]) > 0.1)
    model = ns["Model"]()
    assert drops["jit_trace"] == (_traced_minus_eager_gradient(torch.jit.trace(model, (X,)), model) > 0.1)


def test_ng005_fixture_pre_dispatch_keeps_the_region(ng005_fixture):
    from torch.fx.experimental.proxy_tensor import make_fx

    f = ng005_fixture["pre_dispatch"]
    keeps = _traced_minus_eager_gradient(make_fx(f, pre_dispatch=True)(X), f) == 0
    assert keeps == RELEASE.keeps_region["make_fx_pre_dispatch"]


def test_ng006_inference_mode_region_saved_for_backward_raises():
    # the fixture's module-level `jacrev(inference_saved)(x)` is the call that fails
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        runpy.run_path(str(FIXTURES / "ng006_reverse_mode.py"))


FLOW = FIXTURES / "flow_cannot_matter.py"


@pytest.fixture(autouse=True)
def forget_fixture_packages():
    """The fixture projects import their own `pkg`: later tests must not find this one's."""
    yield
    for name in [name for name in sys.modules if name == "pkg" or name.startswith("pkg.")]:
        del sys.modules[name]


def _flow_calls(ns: dict) -> dict:
    """How each function of flow_cannot_matter.py is transformed there: (function, arguments, argnums)."""
    w = ns["W"]
    return {
        "bound_by_partial": (functools.partial(ns["bound_by_partial"], w), (X,), 0),
        "bound_by_partial_near_miss": (functools.partial(ns["bound_by_partial_near_miss"], w), (X,), 0),
        "left_out_by_argnums": (ns["left_out_by_argnums"], (X, w.double()), 0),
        "left_out_by_argnums_near_miss": (ns["left_out_by_argnums_near_miss"], (X, w.double()), 1),
        "global_constant": (ns["global_constant"], (X,), 0),
        "local_from_input_near_miss": (ns["local_from_input_near_miss"], (X,), 0),
        "reenabled": (ns["reenabled"], (X,), 0),
        "reenabled_near_miss": (ns["reenabled_near_miss"], (X,), 0),
        "LoggedNearMiss": (ns["LoggedNearMiss"](), (X,), 0),
        "Scaled": (ns["Scaled"]().double(), (X,), 0),
        "ScaledNearMiss": (ns["ScaledNearMiss"]().double(), (X,), 0),
        **{name: (ns[name], (X,), 0) for name in (
            "integer_results", "integer_results_near_miss", "logged", "logged_near_miss", "function_value")},
        "Normalised": (ns["Normalised"]().double(), (X,), 0),
        "NormalisedNearMiss": (ns["NormalisedNearMiss"]().double(), (X,), 0),
        "Counted": (ns["Counted"]().double(), (X,), 0),
        "updated_near_miss": (ns["updated_near_miss"], (X,), 0),
        "cut_after": (ns["cut_after"], (X,), 0),
        "cut_after_near_miss": (ns["cut_after_near_miss"], (X,), 0),
    }


@pytest.mark.parametrize("name", list(_flow_calls(runpy.run_path(str(FLOW)))))
def test_a_region_is_reported_exactly_where_forward_and_reverse_mode_disagree(name):
    """The flow rule: every exempt region computes the same under jacfwd and jacrev; every near-miss
    does not, and is reported."""
    from lint_nograd.report.registry import RULES
    from lint_nograd.run.engine import check_source

    ns = runpy.run_path(str(FLOW))
    function, arguments, argnums = _flow_calls(ns)[name]
    forward = jacfwd(function, argnums=argnums)(*arguments)
    reverse = jacrev(function, argnums=argnums)(*arguments)
    source = FLOW.read_text()
    start = next(row for row, line in enumerate(source.splitlines(), 1)
                 if line.startswith((f"def {name}(", f"class {name}(")))
    end = next((row for row, line in enumerate(source.splitlines(), 1)
                if row > start and line.startswith(("def ", "class ", "@", "jacfwd("))), None)
    reported = [d for d in check_source(source.encode(), FLOW.name, frozenset(RULES))
                if d.code == "NG004" and start - 1 <= d.row < end]
    assert bool(reported) == (not torch.allclose(forward, reverse)), (forward, reverse)
    assert bool(reported) == name.endswith(("_near_miss", "NearMiss"))


VARIED = FIXTURES / "flow_varied_across_calls.py"


def _varied_cases(ns: dict) -> dict:
    """For the function holding each region of flow_varied_across_calls.py, what forward and reverse
    mode compute where the file transforms it (`drive_with_a_lambda` applies jacfwd itself)."""
    t = ns["T"]

    def both(function, *arguments, **options):
        return jacfwd(function, **options)(*arguments), jacrev(function, **options)(*arguments)

    torch.manual_seed(0)
    spectral, normed = ns["SpectralLinear"](3, 3).double(), ns["InputNormedNearMiss"](3, 3).double()
    return {
        "by_time": both(ns["drive"], X, t, argnums=0),
        "by_time_near_miss": both(ns["drive_near_miss"], X, t, argnums=0),
        "by_time_in_partial": both(functools.partial(ns["drive_with_partial"], t=t), X),
        "by_time_from_a_local_near_miss": both(ns["drive_from_a_local_near_miss"], X, t, argnums=0),
        "by_time_in_lambda": (ns["drive_with_a_lambda"](X, t), ns["drive_with_a_lambda_in_reverse"](X, t)),
        "spectral_norm": both(spectral, X),
        "input_norm_near_miss": both(normed, X),
    }


def test_a_region_reached_through_calls_is_reported_exactly_where_what_it_reads_is_varied():
    """Which parameters a transform varies is carried along calls (analysis/varied.py): a region
    computing from a time beside the input, a captured constant or the module's weights computes the
    same in both modes and is not reported; the near-misses hand it the input, and are."""
    from lint_nograd.report.registry import RULES
    from lint_nograd.run.engine import check_source

    source = VARIED.read_text()
    functions = {node.name: node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
    rows = {d.row for d in check_source(source.encode(), VARIED.name, frozenset(RULES)) if d.code == "NG004"}
    cases = _varied_cases(runpy.run_path(str(VARIED)))
    differs = {name for name, (forward, reverse) in cases.items() if not torch.allclose(forward, reverse)}
    reported = {name for name in cases
                if any(functions[name].lineno - 1 <= row <= functions[name].end_lineno for row in rows)}
    assert reported == differs == {name for name in cases if name.endswith("_near_miss")}


def test_a_region_that_only_stores_for_logging_computes_the_same_in_both_modes(monkeypatch):
    """The project fixture `flow/` (where the whole project is known, so that nothing reached reads
    the attribute) reports no `Logged` region: forward and reverse mode agree on it."""
    monkeypatch.syspath_prepend(str(FIXTURES.parent / "projects" / "flow"))
    ns = runpy.run_path(str(FIXTURES.parent / "projects" / "flow" / "pkg" / "model.py"), run_name="model")
    logged = ns["Logged"]()
    assert torch.allclose(jacfwd(logged)(X), jacrev(logged)(X))
    expected = (FIXTURES.parent / "projects" / "flow" / "expect.txt").read_text()
    assert "model.py:8:" not in expected and "model.py:15:14: NG004" in expected


@pytest.mark.parametrize("case", ["flow_traced_training_step", "flow_traced_training_step_near_miss",
                                  "flow_traced_training_step_create_graph_near_miss",
                                  "flow_traced_training_step_exported"])
def test_make_fx_of_a_training_step_is_reported_exactly_where_traced_and_eager_gradients_differ(case):
    """A traced step that returns only `torch.autograd.grad`'s result gives eager's gradients (no
    NG005); one that also returns the loss, or keeps the graph of the gradients (`create_graph`),
    gives other gradients differentiated again (NG005); one only printed gives eager's values."""
    from lint_nograd.report.registry import RULES
    from lint_nograd.run.engine import check_source
    from torch.fx.experimental.proxy_tensor import make_fx

    path = FIXTURES / f"{case}.py"
    ns = runpy.run_path(str(path))
    w = torch.tensor([0.3, -1.2, 0.7], requires_grad=True)
    x = torch.tensor([1.0, 2.0, -0.5])
    if case.endswith("exported"):  # printed, never differentiated: the trace gives eager mode's values
        traced = make_fx(ns["train_step"])(w, x)(w.detach().clone().requires_grad_(), x)
        w.grad = None
        eager = ns["train_step"](w, x)
        assert all(torch.allclose(a, b) for a, b in zip(traced, eager))
        assert not [d for d in check_source(path.read_bytes(), path.name, frozenset(RULES)) if d.code == "NG005"]
        return
    traced, eager = make_fx(ns["train_step"])(w, x)(w, x), ns["train_step"](w, x)
    (eager_g, traced_g) = (eager, traced) if isinstance(eager, torch.Tensor) else (eager[0], traced[0])
    agree = torch.allclose(eager_g, traced_g)
    if not isinstance(eager, torch.Tensor):  # the loss is returned too: differentiate it, as a caller would
        eager_loss_g = torch.autograd.grad(ns["model_loss"](w, x), w)[0]
        agree = agree and torch.allclose(eager_loss_g, torch.autograd.grad(traced[1], w)[0])
    elif "create_graph" in case:  # the gradient keeps its graph: differentiate it again, as its caller does
        def second(g):  # zeros where the gradient does not depend on `w` (eager mode respects the region)
            found = torch.autograd.grad(g.sum(), w, allow_unused=True)[0] if g.requires_grad else None
            return torch.zeros_like(w) if found is None else found
        agree = agree and torch.allclose(second(eager_g), second(traced_g))
    reported = [d for d in check_source(path.read_bytes(), path.name, frozenset(RULES)) if d.code == "NG005"]
    assert bool(reported) == (not agree) == case.endswith("near_miss")


def test_partial_and_argnums_applied_in_another_module(monkeypatch):
    """The project fixture `flow/`: `selected.py` applies jacfwd with `partial` and `argnums` to
    functions of `model.py`. Where the argument the region reads is left out, forward and reverse
    mode agree (no finding); the near-misses, reported, disagree."""
    monkeypatch.syspath_prepend(str(FIXTURES.parent / "projects" / "flow"))
    ns = runpy.run_path(str(FIXTURES.parent / "projects" / "flow" / "pkg" / "model.py"), run_name="model")
    w = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    cases = {"bound": (functools.partial(ns["bound"], w), (X,), 0),
             "left_out": (ns["left_out"], (X, w), 0),
             "left_out_near_miss": (ns["left_out_near_miss"], (X, w), 1),
             "bound_near_miss": (functools.partial(ns["bound_near_miss"], w), (X,), 0),
             "rebound_near_miss": (functools.partial(ns["rebound_near_miss"], w), (X,), 0)}
    for name, (function, arguments, argnums) in cases.items():
        agree = torch.allclose(jacfwd(function, argnums=argnums)(*arguments),
                               jacrev(function, argnums=argnums)(*arguments))
        assert agree == (not name.endswith("near_miss")), name


@pytest.mark.parametrize("fixture", ["reach_class_members", "reach_expressions"])
def test_reach_reports_exactly_the_regions_that_change_a_result(fixture):
    """Each case of the fixture computes one function two ways; the regions reported are those
    marked with the name of a case whose two results differ, and none of the look-alikes.
    reach_class_members.py: a dataclass field given by position, a `staticmethod` kept in a class,
    a subclass's override under its base's transform; reach_expressions.py: either branch of
    `a if flag else b`, `net or Default()`, an element of a returned tuple, `type(self).method`."""
    from lint_nograd.report.registry import RULES
    from lint_nograd.run.engine import check_source

    path = FIXTURES / f"{fixture}.py"
    ns = runpy.run_path(str(path))
    x = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    changed = {name for name, case in ns.items() if name.startswith("case_")
               and not torch.allclose(*case(x.clone()))}
    lines = path.read_text().splitlines()
    reported = {lines[d.row - 1].partition("# ")[2] for d in check_source(path.read_bytes(), path.name, frozenset(RULES))
                if d.code in ("NG004", "NG005")}
    assert changed == reported and len(changed) >= 3
    assert len(changed) < len([name for name in ns if name.startswith("case_")])  # and look-alikes
    if "Sampler" in ns:
        assert ns["Sampler"](torch.nn.Linear(3, 3)).divergences(x.reshape(1, 3).float()).shape == (1,)


def test_the_modules_own_state_matters_where_functional_call_or_a_trained_trace_differentiates_it():
    """flow_module_state.py: under `functional_call` differentiated in the parameters, forward and
    reverse mode disagree on a region over `self.weight` (NG004), and agree on one over the weights of
a module whose call is transformed (no finding); flow_module_state_traced.py: the
    trace differentiates `self.weight` through it where eager mode does not (NG005)."""
    from lint_nograd.report.registry import RULES
    from lint_nograd.run.engine import check_source

    ns = runpy.run_path(str(FIXTURES / "flow_module_state.py"))
    params = dict(ns["Normalised"]().named_parameters())
    forward = jacfwd(ns["in_parameters"])(params, torch.ones(3))["weight"]
    reverse = jacrev(ns["in_parameters"])(params, torch.ones(3))["weight"]
    assert not torch.allclose(forward, reverse)
    clipped = ns["Clipped"]()  # the look-alike: its weights are not what the transform varies
    assert torch.allclose(jacfwd(clipped)(torch.ones(3)), jacrev(clipped)(torch.ones(3)))
    traced_ns = runpy.run_path(str(FIXTURES / "flow_module_state_traced.py"))
    eager = traced_ns["Normalised"]()
    eager(torch.ones(3)).sum().backward()
    traced = traced_ns["traced"]
    assert not torch.allclose(eager.weight.grad, traced.weight.grad)
    for case, code in (("flow_module_state", "NG004"), ("flow_module_state_traced", "NG005")):
        source = (FIXTURES / f"{case}.py").read_bytes()
        found = {d.code for d in check_source(source, f"{case}.py", frozenset(RULES))}
        assert found == {code}, case


def test_ng001_a_region_a_flag_chooses_holds_only_when_the_flag_is_false():
    """ng001_region_forms.py `chosen_by_a_flag`: the transforms differentiate as if the region were
    not there either way, and their results join no graph only when `train` is False, as NG001 says."""
    ns = runpy.run_path(str(FIXTURES / "ng001_region_forms.py"))
    x = torch.tensor(1.5, requires_grad=True)
    for train in (False, True):
        a, b = ns["chosen_by_a_flag"](x, train)
        assert torch.allclose(a, torch.cos(x)) and torch.allclose(b, torch.cos(x))
        assert (a.grad_fn is None, b.grad_fn is None) == (not train, not train)


def test_ng001_help_says_what_each_mode_does_with_grad_mode():
    """Under no_grad, `grad` turns grad mode on inside the function; `jvp` and `jacfwd` leave it
    off and compute the derivative all the same: NG001's help says which."""
    from lint_nograd.checks.transform_in_region import HELP_NO_GRAD, HELP_NO_GRAD_FORWARD
    from lint_nograd.report.registry import RULES
    from lint_nograd.run.engine import check_source

    seen = []

    def f(x):
        seen.append(torch.is_grad_enabled())
        return x.sin()

    with torch.no_grad():
        _, tangent = torch.func.jvp(f, (X,), (torch.ones_like(X),))
        gradient = torch.func.grad(lambda x: f(x).sum())(X)
        jacobian = jacfwd(f)(X)
    assert seen == [False, True, False]
    assert torch.allclose(tangent, X.cos()) and torch.allclose(gradient, X.cos())
    assert torch.allclose(jacobian.diagonal(), X.cos())
    source = ("import torch\nfrom torch.func import grad, jacfwd, jvp\n\n\ndef f(x):\n    return x.sin().sum()\n\n\n"
              "def run(x):\n    with torch.no_grad():\n        jvp(f, (x,), (x,))\n        grad(f)(x)\n"
              "        jacfwd(f)(x)\n")
    helps = {d.row: d.help for d in check_source(source.encode(), "m.py", frozenset(RULES)) if d.code == "NG001"}
    assert helps == {11: HELP_NO_GRAD_FORWARD, 12: HELP_NO_GRAD, 13: HELP_NO_GRAD_FORWARD}
