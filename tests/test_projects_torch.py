"""The fixture projects run with PyTorch: every NG004 and NG005 finding `check .` reports in them is a
function whose results really change (forward mode disagrees with reverse mode; the traced graph
differentiates otherwise than eager mode), and the backward NG003 reports across modules raises."""
from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from lint_nograd import cli  # noqa: E402
from torch.func import jacfwd, jacrev  # noqa: E402

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
X = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)


@contextlib.contextmanager
def imported_from(project: Path):
    """Import the project's modules; forget them afterwards (the projects reuse package names)."""
    sys.path.insert(0, str(project))
    try:
        yield
    finally:
        sys.path.remove(str(project))
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(str(project)):
                del sys.modules[name]


def findings(project: Path, capsys) -> list[dict]:
    old = Path.cwd()
    os.chdir(project)
    try:
        cli.main(["check", "--no-cache", "--output-format", "json", "."])
    finally:
        os.chdir(old)
    return json.loads(capsys.readouterr().out)


def function_at(path: Path, row: int) -> str:
    """The qualified name (`Net.forward`) of the innermost function around a line."""
    found = ""

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if isinstance(child, ast.FunctionDef) and child.lineno <= row <= child.end_lineno:
                    found = name
                visit(child, name + ".")

    visit(ast.parse(path.read_text()), "")
    return found


def callable_named(module, qualified_name: str):
    """`module.Net().forward` for `Net.forward`; `Potentials.anharmonic` for a static method."""
    owner = module
    *owners, name = qualified_name.split(".")
    for part in owners:
        owner = getattr(owner, part)
        if isinstance(owner, type):
            owner = owner()
    return owner, getattr(owner, name)


def forward_agrees_with_reverse(function) -> bool:
    """Whether jacfwd and jacrev agree, differentiating every positional argument (each given X)."""
    count = len([p for p in inspect.signature(function).parameters.values() if p.default is p.empty])
    argnums = tuple(range(count)) if count > 1 else 0
    arguments = [X] * max(count, 1)
    forward, reverse = jacfwd(function, argnums=argnums)(*arguments), jacrev(function, argnums=argnums)(*arguments)
    return all(torch.allclose(a, b) for a, b in zip(torch.utils._pytree.tree_leaves(forward),
                                                   torch.utils._pytree.tree_leaves(reverse)))


def traced_minus_eager(owner, function) -> float:
    """How far the traced gradients are from eager ones; infinite where the trace raises and eager
    mode does not (an in-place update of a parameter that eager mode makes under `no_grad`)."""
    traced = torch.jit.trace(owner if isinstance(owner, torch.nn.Module) else function, (X,), check_trace=False)
    x1, x2 = X.clone().requires_grad_(), X.clone().requires_grad_()
    try:
        traced(x1).sum().backward()
    except RuntimeError:
        function(x2).sum().backward()
        return float("inf")
    function(x2).sum().backward()
    return float((x1.grad - x2.grad).abs().max())


CASES = [project for project in sorted(PROJECTS.iterdir()) if project.is_dir()]
# projects whose findings are of other rules, each run with torch by a test of its own
# ... tests/test_backward_chains_torch.py, tests/test_grad_mode_calls_torch.py, test_reach_forms_torch.py,
# test_model_forms_torch.py (held_objects, instance_callbacks)
NO_REGION_FINDINGS = ("backward_through_calls", "generators", "grad_mode_calls", "held_objects", "instance_callbacks")
# projects whose region is in a closure (a hook) or a context manager's generator, which these tests cannot
# call alone: run by a test of their own (tests/test_reach_forms_torch.py runs imported_makers' cases)
RUN_ALONE = ("hooked_helpers", "imported_makers")
CASES = [project for project in CASES if project.name not in RUN_ALONE]


@pytest.mark.parametrize("project", CASES, ids=lambda project: project.name)
def test_each_region_finding_changes_results(project: Path, capsys):
    found = [f for f in findings(project, capsys) if f["code"] in ("NG004", "NG005")]
    with imported_from(project):
        for finding in found:
            path = project / finding["filename"]
            name = function_at(path, finding["location"]["row"])
            if not name:  # `torch.no_grad()(f)` at module level: tests/test_reach_forms_torch.py runs its callers
                continue
            module = importlib.import_module(".".join(Path(finding["filename"]).with_suffix("").parts))
            owner, function = callable_named(module, name)
            if finding["code"] == "NG004":
                assert not forward_agrees_with_reverse(function), (project.name, name)
            else:
                assert traced_minus_eager(owner, function) > 0.1, (project.name, name)
    assert found or project.name in NO_REGION_FINDINGS


@pytest.mark.parametrize("project", CASES, ids=lambda project: project.name)
def test_fix_rewrites_each_region_where_it_is_and_the_results_agree(project: Path, capsys, tmp_path):
    """`lint-nograd fix .` rewrites the regions in the modules that hold them; afterwards forward
    mode agrees with reverse mode, and traced graphs with eager mode, for every function found."""
    found = [f for f in findings(project, capsys) if f["code"] in ("NG004", "NG005") and f["fix"]]
    copy = tmp_path / project.name
    shutil.copytree(project, copy)
    old = Path.cwd()
    os.chdir(copy)
    try:
        # unsafe fixes too: where make_fx records `.detach()` as an alias (torch 2.14 on), a traced
        # region's fix adds the shim, which a project that does not declare it gets as unsafe
        cli.main(["fix", "--no-cache", "--unsafe-fixes", "."])
    finally:
        os.chdir(old)
    capsys.readouterr()
    assert not [f for f in findings(copy, capsys) if f["code"] in ("NG004", "NG005") and f["fix"]]
    with imported_from(copy):
        for finding in found:
            name = function_at(project / finding["filename"], finding["location"]["row"])
            module = importlib.import_module(".".join(Path(finding["filename"]).with_suffix("").parts))
            owner, function = callable_named(module, name)
            if finding["code"] == "NG004":
                assert forward_agrees_with_reverse(function), (project.name, name)
            else:
                assert traced_minus_eager(owner, function) == 0, (project.name, name)


def test_backward_through_what_another_module_computes_in_a_region_raises(capsys):
    project = PROJECTS / "backward_through_calls"
    assert {f["code"] for f in findings(project, capsys)} == {"NG003"}
    with imported_from(project):
        from train import evaluation  # noqa: PLC0415

        model = torch.nn.Linear(3, 1).double()
        for function in (evaluation.evaluate, evaluation.predict):
            with pytest.raises(RuntimeError, match="does not require grad"):
                function(model, X).sum().backward()
        evaluation.passthrough(model, X.clone().requires_grad_()).sum().backward()  # no finding: fine


def test_a_model_handed_to_a_transformed_function_of_another_module():
    """fixtures/projects/transformed_calls: `jacfwd(loss)(x, model)` runs `model` under forward
    mode; where its region reads only its weight, forward and reverse mode agree (no finding)."""
    project = PROJECTS / "transformed_calls"
    with imported_from(project):
        losses, models = importlib.import_module("pkg.losses"), importlib.import_module("pkg.models")
        for model, found in ((models.Net(), True), (models.WeightNormed(), False)):
            forward, reverse = jacfwd(losses.loss)(X, model), jacrev(losses.loss)(X, model)
            assert (not torch.allclose(forward, reverse)) == found, type(model).__name__


def test_a_registered_model_made_ready_by_a_helper_and_transformed_by_another():
    """fixtures/projects/registry_chains: the model `build_model` makes by name, through `prepare`,
    reaches `jacfwd` in `laplacian` (which a second caller also calls): forward mode disagrees with
    reverse mode where its block's region normalises what the input varies, and agrees for the
    look-alike whose region reads a buffer and the input's shape."""
    from types import SimpleNamespace

    project = PROJECTS / "registry_chains"
    with imported_from(project):
        trainer = importlib.import_module("pkg.trainer")
        registry = importlib.import_module("pkg.registry")
        for name, found in (("mlp", True), ("scaled", False)):
            cfg = SimpleNamespace(model=SimpleNamespace(name=name, width=3, depth=2))
            torch.manual_seed(0)
            forward = trainer.make(cfg, X.float())
            torch.manual_seed(0)
            reverse = jacrev(registry.build_model(cfg.model))(X.float())
            assert (not torch.allclose(forward, reverse)) == found, name


def test_a_statistic_kept_where_nothing_reads_it():
    """fixtures/projects/unused_results: the entropy a helper computes under `no_grad`, kept in
    `self.last_entropy`, changes nothing the traced module computes (its input gradients agree
    with eager mode's: no finding); the look-alike reads its helper's value back, and the traced
    gradients differ (its finding)."""
    project = PROJECTS / "unused_results"
    h = torch.linspace(-1.0, 2.0, 6, dtype=torch.float64).reshape(2, 3)
    with imported_from(project):
        export, blocks = importlib.import_module("vit.export"), importlib.import_module("vit.blocks")
        for make, model, found in ((export.export_attention, blocks.Attention(), False),
                                   (export.export_normalised, blocks.Normalised(), True)):
            traced = make()
            model.load_state_dict(traced.state_dict())
            x1, x2 = h.clone().requires_grad_(), h.clone().requires_grad_()
            traced(x1).pow(2).sum().backward()
            model(x2).pow(2).sum().backward()
            assert (not torch.allclose(x1.grad, x2.grad)) == found, make.__name__


def test_a_hook_a_helper_registers_on_the_model_it_is_given(capsys, tmp_path):
    """fixtures/projects/hooked_helpers: `attach_centering(net)` registers a hook on a submodule of
    `net` and returns only its handle; `jacfwd` of a copy of `net` runs the hook, and forward mode
    differentiates the mean its region computes, where reverse mode does not. The monitor's hook
    only counts calls: forward and reverse mode agree. After `fix`, they agree for both."""
    project = PROJECTS / "hooked_helpers"
    assert [(f["filename"], f["code"]) for f in findings(project, capsys)] == [("pkg/hooks.py", "NG004")]

    def agreement(root: Path) -> dict[str, bool]:
        with imported_from(root):
            run = importlib.import_module("scripts.run")
            model = importlib.import_module("pkg.model")
            found = {}
            for name in ("centred", "monitored"):
                net, forward = getattr(run, name)()
                reverse = jacrev(model.Averaged(net))(run.X)
                found[name] = torch.allclose(forward, reverse)
            return found

    assert agreement(project) == {"centred": False, "monitored": True}
    copy = tmp_path / project.name
    shutil.copytree(project, copy)
    old = Path.cwd()
    os.chdir(copy)
    try:
        cli.main(["fix", "--no-cache", "."])
    finally:
        os.chdir(old)
    capsys.readouterr()
    assert agreement(copy) == {"centred": True, "monitored": True}
