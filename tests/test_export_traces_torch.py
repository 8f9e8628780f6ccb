"""NG005's severity (fixtures/checker/ng005_export_traces.py), run with PyTorch: each case the linter
calls a warning (a trace made for export or inference) gives eager mode's values, and each it calls
an error (a trace the scope differentiates, or lets escape) gives other gradients than eager mode."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from lint_nograd.report.registry import RULES  # noqa: E402
from lint_nograd.run.engine import check_source  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "checker" / "ng005_export_traces.py"
X = torch.tensor([1.0, 2.0, 4.0])


@pytest.fixture
def cases(monkeypatch):
    """The fixture module, with every tracer it calls recording what it returns."""
    spec = importlib.util.spec_from_file_location("ng005_export_traces", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.recorded = []

    def recording(tracer):
        def trace(*args, **kwargs):
            module.recorded.append(tracer(*args, **kwargs))
            return module.recorded[-1]
        return trace

    def make_fx(f, *args, **kwargs):
        return recording(module.make_fx.__wrapped__(f, *args, **kwargs))

    make_fx.__wrapped__ = module.make_fx
    monkeypatch.setattr(torch.jit, "trace", recording(torch.jit.trace))
    monkeypatch.setattr(torch.fx, "symbolic_trace", recording(torch.fx.symbolic_trace))
    monkeypatch.setattr(module, "make_fx", make_fx)
    module.exported = []
    monkeypatch.setattr(torch.onnx, "export", lambda model, args, path, **kwargs: module.exported.append((model, args)))
    return module


def severities() -> dict[str, str]:
    """The severity of NG005 at each region, by the case (`export_*`, `train_*`) whose trace the
    finding names."""
    tree = ast.parse(FIXTURE.read_text())
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]

    def case_at(row: int) -> str:
        return next(f.name for f in functions if f.lineno <= row <= f.end_lineno)

    found = [d for d in check_source(FIXTURE.read_bytes(), FIXTURE.name, frozenset(RULES), torch_version="2.13")
             if d.code == "NG005"]
    return {case_at(d.related[0].row): d.severity for d in found}


EXPORTS = ["export_saved", "export_jit_saved", "export_frozen", "export_onnx", "export_discarded",
           "export_inferred", "export_in_inference_mode", "export_checked", "export_graphed"]
TRAINED = ["train_backward", "train_optimizer", "train_returned", "train_transformed", "train_saved_and_trained",
           "train_partly_no_grad", "train_grad_back_on", "train_printed_then_trained", "train_stored",
           "train_passed", "train_in_closure", "train_both"]


def test_warnings_exactly_for_the_export_cases():
    found = severities()
    assert found == {**{case: "warning" for case in EXPORTS}, **{case: "error" for case in TRAINED}}


def _eager(cases, case: str):
    name = case.partition("_")[2]
    return cases.Frozen() if name == "frozen" else cases.Onnx() if name == "onnx" else getattr(cases, name)


@pytest.mark.parametrize("case", EXPORTS)
def test_an_exported_trace_computes_eager_values(cases, case, tmp_path):
    path = str(tmp_path / "traced.pt")
    run = getattr(cases, case)
    x = X.clone().requires_grad_()
    result = run(x, path) if "path" in run.__code__.co_varnames[:run.__code__.co_argcount] else run(x)
    eager = _eager(cases, case)(x)
    traces = [*cases.recorded, *(model for model, _ in cases.exported)]
    if case in ("export_saved", "export_jit_saved", "export_frozen"):
        traces.append(torch.jit.load(path))
    assert traces
    for traced in traces:
        torch.testing.assert_close(traced(x), eager)
    if case in ("export_inferred", "export_in_inference_mode"):  # run without grad: nothing to differentiate
        torch.testing.assert_close(result, eager.detach())
        assert not result.requires_grad
    # the region is dropped all the same: the trace would differentiate otherwise than eager mode
    traced = cases.recorded[0]
    grad_traced, = torch.autograd.grad(traced(x).sum(), x)
    grad_eager, = torch.autograd.grad(eager.sum(), x)
    assert not torch.allclose(grad_traced, grad_eager)


def _gradient(function, x=X):
    x = x.clone().requires_grad_()
    function(x).sum().backward()
    return x.grad


@pytest.mark.parametrize("case", [case for case in TRAINED if case not in ("train_optimizer", "train_transformed")])
def test_a_trained_trace_gives_other_gradients_than_eager(cases, case, tmp_path):
    run, eager = getattr(cases, case), _gradient(_eager(cases, case))
    x = X.clone().requires_grad_()
    arguments = run.__code__.co_varnames[:run.__code__.co_argcount]
    result = run(*[{"x": x, "path": str(tmp_path / "traced.pt")}[name] for name in arguments])
    if x.grad is not None:  # the case differentiates the trace itself
        grad = x.grad
    elif isinstance(result, torch.Tensor):  # it hands back what the trace computed, with its graph
        grad = torch.autograd.grad(result.sum(), x)[0]
    elif result is None:  # stored where the file cannot follow it
        grad = _gradient(cases.CACHE["stored"])
    elif isinstance(result, torch.nn.Module):  # the trace itself, returned
        grad = _gradient(result)
    else:  # a closure calling the trace
        grad = torch.autograd.grad(result().sum(), x)[0]
    assert not torch.allclose(grad, eager)


def test_an_optimizer_over_a_trace_steps_otherwise_than_over_the_eager_module(cases):
    cases.train_optimizer(X)
    traced, = cases.recorded
    eager = cases.Optimized()
    optimizer = torch.optim.SGD(eager.parameters(), lr=0.1)
    eager(X).sum().backward()
    optimizer.step()
    assert not torch.allclose(traced.w, eager.w)


def test_a_transform_of_a_trace_differs_from_eager(cases):
    assert not torch.allclose(cases.train_transformed(X), torch.func.jacrev(cases.transformed)(X))
