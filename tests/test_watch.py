"""`python -m lint_nograd.watch`: real programs, run under the watcher on the installed torch.

Each test writes small programs to tmp_path and runs them in one interpreter (torch takes seconds
to import): the findings are read from the JSON report, by the rows the program marks with
comments (`# name`), and every positive comes with the values that show it is real.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from lint_nograd.analysis.entry_points import ENTRY_POINTS, KEEPS
from lint_nograd.analysis.releases import behaviour
from lint_nograd.report.output import render
from lint_nograd.watch import hooks
from lint_nograd.watch.torch_names import NAMES, names_for

ROOT = Path(__file__).resolve().parent.parent


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def rows(path: Path) -> dict[str, int]:
    """`# name` at the end of a line -> its row."""
    return {line.rpartition("# ")[2].strip(): number
            for number, line in enumerate(path.read_text().splitlines(), 1) if "# " in line}


def run(command: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    environment.pop("LINT_NOGRAD_WATCH", None)
    environment.update(env or {})
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, env=environment)


def watch(script: Path, *arguments: str) -> tuple[list[dict], subprocess.CompletedProcess]:
    """Run `script` with `arguments` under the watcher; its JSON report and how it ran."""
    report = script.parent / "report.json"
    done = run([sys.executable, "-m", "lint_nograd.watch", "--output-format", "json", "-o", str(report),
                script.name, *arguments], script.parent)
    return json.loads(report.read_text()), done


def found(report: list[dict]) -> set[tuple]:
    """(code, file, row, the related place's row) of each finding."""
    return {(d["code"], Path(d["filename"]).name, d["location"]["row"], d["related"][0]["location"]["row"])
            for d in report}


ENTRY_POINTS_PROGRAM = """\
    import torch, torch.func as tf
    import torch.autograd.forward_ad as fwAD
    import torch.autograd.functional as AF
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.ao.quantization import get_default_qconfig_mapping, get_default_qat_qconfig_mapping
    from torch.ao.quantization.quantize_fx import prepare_fx, prepare_qat_fx
    try:
        from torchvision.models.feature_extraction import create_feature_extractor
    except ImportError:  # not installed: the test expects no finding of it
        create_feature_extractor = None

    def f(x):
        with torch.no_grad():  # region
            s = x * x
        return (s * x).sum()

    class M(torch.nn.Module):
        def forward(self, x):
            return f(x)

    class Features(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(1, 1)

        def forward(self, x):
            return self.linear(x * f(x))

    x, one = torch.tensor([1.5]), torch.ones(1)
    print("jvp", tf.jvp(f, (x,), (one,))[1].item())  # jvp
    tf.jacfwd(f)(x)  # jacfwd
    tf.hessian(f)(x)  # hessian
    tf.linearize(f, x)[1](one)  # linearize
    AF.jacobian(f, x, strategy="forward-mode", vectorize=True)  # jacobian
    AF.hessian(f, x, outer_jacobian_strategy="forward-mode", vectorize=True)  # functional hessian
    with fwAD.dual_level():  # dual_level
        fwAD.unpack_dual(f(fwAD.make_dual(x, one)))
    traced = torch.fx.symbolic_trace(f)  # symbolic_trace
    torch.fx.Tracer().trace(M())  # Tracer.trace
    torch.jit.trace(f, x)  # torch.jit.trace
    torch.jit.trace_module(M(), {"forward": x})  # torch.jit.trace_module
    make_fx(f)(x)  # make_fx
    prepare_fx(M(), get_default_qconfig_mapping(), (x,))  # prepare_fx
    prepare_qat_fx(M().train(), get_default_qat_qconfig_mapping(), (x,))  # prepare_qat_fx
    if create_feature_extractor is not None:
        create_feature_extractor(Features(), return_nodes=["linear"])  # create_feature_extractor
    # reverse mode respects the region: nothing to report
    print("grad", tf.grad(f)(x).item(), tf.jacrev(f)(x).item(), tf.vjp(f, x)[1](torch.tensor(1.0))[0].item())
    AF.jacobian(f, x), AF.hessian(f, x), AF.vjp(f, x), AF.jvp(f, x, one), AF.vhp(f, x, one), AF.hvp(f, x, one)
    eager, leaf = x.clone().requires_grad_(), x.clone().requires_grad_()
    f(eager).backward(), traced(leaf).backward()
    print("traced", eager.grad.item(), leaf.grad.item())

    # transforms called inside a region
    with torch.no_grad():  # outer no_grad
        tf.grad(f)(x)  # in no_grad: grad
        tf.grad_and_value(f)(x)  # in no_grad: grad_and_value
        tf.vjp(f, x)  # in no_grad: vjp
        tf.jacrev(f)(x)  # in no_grad: jacrev
        tf.jvp(f, (x,), (one,))  # in no_grad: jvp
        tf.jacfwd(f)(x)  # in no_grad: jacfwd
        tf.hessian(f)(x)  # in no_grad: hessian
        tf.linearize(f, x)  # in no_grad: linearize
        tf.vmap(f)(x)  # in no_grad: vmap only
        AF.jacobian(f, x)  # in no_grad: not a torch.func transform
    with torch.inference_mode():  # outer inference_mode
        tf.grad(f)(x)  # in inference_mode: grad
        tf.linearize(f, x)  # in inference_mode: linearize

    # torch.autograd.functional opens no level: zeros under inference_mode, also with enable_grad inside
    def cube(x):
        return (x ** 3).sum()

    print("functional", AF.jacobian(cube, x).item(), AF.hvp(cube, x, one)[1].item())
    with torch.inference_mode():  # functional inference_mode
        zeros = [AF.jacobian(cube, x).item()]  # in inference_mode: jacobian
        zeros.append(AF.hvp(cube, x, one)[1].item())  # in inference_mode: hvp
        with torch.enable_grad():
            zeros.append(AF.vjp(cube, x)[1].item())  # in inference_mode: vjp
    print("zeros", *zeros)
"""


def test_every_transform_and_tracer_of_the_table(tmp_path):
    script = write(tmp_path, "program.py", ENTRY_POINTS_PROGRAM)
    report, done = watch(script)
    at = rows(script)
    misreading = {entry.name for entry in ENTRY_POINTS if entry.modes != (KEEPS,)} | {"dual_level"}
    forward = {"jvp", "jacfwd", "hessian", "linearize", "jacobian", "functional hessian", "dual_level"}
    tracers = {"symbolic_trace", "Tracer.trace", "torch.jit.trace", "torch.jit.trace_module", "make_fx",
               "prepare_fx", "prepare_qat_fx", "create_feature_extractor"}
    if importlib.util.find_spec("torchvision") is None:  # CI installs it with the newest torch only
        tracers.discard("create_feature_extractor")
        misreading.discard("create_feature_extractor")
    assert {name.removeprefix("functional ") for name in forward | tracers} >= misreading - {
        "grad", "grad_and_value", "vjp", "jacrev", "vhp", "hvp"}
    expected = {("NG004", "program.py", at["region"], at[name]) for name in forward}
    expected |= {("NG005", "program.py", at["region"], at[name]) for name in tracers}
    expected |= {("NG001", "program.py", at[f"in no_grad: {name}"], at["outer no_grad"])
                 for name in ("grad", "grad_and_value", "vjp", "jacrev", "jvp", "jacfwd", "hessian", "linearize")}
    expected |= {("NG002", "program.py", at[f"in inference_mode: {name}"], at["outer inference_mode"])
                 for name in ("grad", "linearize")}
    expected |= {("NG002", "program.py", at[f"in inference_mode: {name}"], at["functional inference_mode"])
                 for name in ("jacobian", "hvp", "vjp")}
    # and the forward-mode ones among them reach the region inside f, as anywhere else
    expected |= {("NG004", "program.py", at["region"], at[f"in no_grad: {name}"])
                 for name in ("jvp", "jacfwd", "hessian", "linearize")}
    assert found(report) == expected
    # the findings are real: forward mode and the traced graph differentiate through the region
    values = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert float(values["jvp"]) == pytest.approx(6.75) and values["grad"].split()[0] == "2.25"
    assert values["traced"].split() == ["2.25", "6.75"]
    assert values["functional"].split() == ["6.75", "9.0"] and values["zeros"].split() == ["0.0"] * 3
    # the messages: the call each finding is about, and what torch 2.13 does under inference_mode
    by_row = {d["location"]["row"]: d for d in report}
    release = behaviour(torch.__version__)
    for name in ("grad", "linearize"):  # zeros on every release for linearize, before 2.12 for grad
        zeros = release.outer_inference_mode[name] == "zeros"
        assert by_row[at[f"in inference_mode: {name}"]]["severity"] == ("error" if zeros else "note")
        assert ("returns zeros" in by_row[at[f"in inference_mode: {name}"]]["message"]) == zeros
    for name in ("jacobian", "hvp", "vjp"):  # on every release: the help says why
        finding = by_row[at[f"in inference_mode: {name}"]]
        assert finding["severity"] == "error" and finding["message"].startswith(f"`{name}(...)` returns zeros")
    assert by_row[at["in no_grad: grad"]]["message"].startswith("`grad(...)` differentiates as if the `no_grad` region")
    assert by_row[at["in no_grad: hessian"]]["message"].startswith("`hessian(...)` differentiates")
    by_call = {d["related"][0]["location"]["row"]: d["message"] for d in report if d["code"] == "NG004"}
    assert [by_call[at[name]].split()[0] for name in ("hessian", "jacfwd", "dual_level")] == [
        "`hessian(...)`", "`jacfwd(...)`", "`with"]
    # the program ran as with python (tests/test_watch.py compares the runner with python itself)
    assert done.returncode == 0 and done.stdout.splitlines()[0] == "jvp 6.75" and done.stderr.count("NG0") == 0


FORMS_PROGRAM = """\
    import sys, threading
    import torch, torch.func as tf
    from torch.fx.experimental.proxy_tensor import make_fx
    sys.path.insert(0, sys.argv[1])
    import helpers

    @torch.no_grad()  # decorator
    def decorated(x):
        return x * x

    @torch.no_grad  # bare decorator
    def bare(x):
        return x * x

    @torch.set_grad_enabled(False)  # set_grad_enabled decorator
    def switched(x):
        return x * x

    @torch.inference_mode()  # inference decorator
    def inferred(x):
        return x * x

    def statements(x):
        with torch.set_grad_enabled(False):  # with set_grad_enabled
            a = x * x
        with torch.no_grad():  # nested no_grad
            with torch.enable_grad():
                b = x * x  # grad on again: not a region
        return decorated(x) + bare(x) + switched(x) + inferred(x) + a + b

    def second_iteration(x):
        for step in range(2):
            if step == 1:
                with torch.no_grad():  # second iteration
                    x = x * 2
        return x

    def statement(x):
        torch.set_grad_enabled(False)  # statement region
        s = x * x
        torch.set_grad_enabled(True)
        return s * x

    x, one = torch.tensor(1.5), torch.tensor(1.0)
    tf.jvp(statements, (x,), (one,))  # jvp statements
    tf.jvp(statement, (x,), (one,))  # jvp statement
    print("modes left", torch._C._is_torch_function_mode_enabled())
    make_fx(statements)(x)  # make_fx statements
    tf.jacfwd(second_iteration)(x)  # jacfwd second
    tf.jvp(helpers.normalized, (x,), (one,))  # jvp library
    from torch.nn.utils.parametrizations import spectral_norm
    make_fx(spectral_norm(torch.nn.Linear(4, 4)))(torch.randn(2, 4))  # spectral norm
    thread = threading.Thread(target=lambda: tf.jvp(decorated, (x,), (one,)))  # thread
    thread.start(); thread.join()
    torch.set_grad_enabled(False)  # statement off
    tf.vjp(decorated, x)  # vjp after statement
    torch.set_grad_enabled(True)
    tf.vjp(decorated, x)
"""

LIBRARY = """\
    import torch

    def normalized(x):
        with torch.no_grad():  # library region
            scale = x.abs() + 1
        return x / scale
"""


def test_decorator_and_statement_forms_library_code_a_second_iteration_and_a_thread(tmp_path):
    library = write(tmp_path / "site", "helpers.py", LIBRARY)
    script = write(tmp_path / "project", "program.py", FORMS_PROGRAM)
    report, done = watch(script, str(tmp_path / "site"))
    assert done.returncode == 0 and done.stdout == "modes left False\n", done.stderr
    at, lib = rows(script), rows(library)
    regions = ("decorator", "bare decorator", "set_grad_enabled decorator", "with set_grad_enabled")
    expected = {("NG004", "program.py", at[region], at["jvp statements"]) for region in regions}
    expected |= {("NG005", "program.py", at[region], at["make_fx statements"])
                 for region in (*regions, "inference decorator")}  # make_fx drops inference_mode too
    expected |= {
        ("NG004", "program.py", at["second iteration"], at["jacfwd second"]),
        ("NG004", "helpers.py", lib["library region"], at["jvp library"]),
        ("NG004", "program.py", at["decorator"], at["thread"]),
        ("NG001", "program.py", at["vjp after statement"], at["statement off"]),
        ("NG004", "program.py", at["statement region"], at["jvp statement"]),  # it ends where grad is on again
    }
    # torch's own model code counts too: spectral norm's power iteration, at its row in this release
    [spectral] = [finding for finding in found(report) if finding[1] == "parametrizations.py"]
    assert spectral[0] == "NG005" and spectral[3] == at["spectral norm"]
    assert found(report) - {spectral} == expected
    # a region in code outside the program is shown at its own file, with the program's call
    [library_finding] = [d for d in report if d["filename"].endswith("helpers.py")]
    assert os.path.isabs(library_finding["filename"]) or library_finding["filename"].startswith("..")
    assert library_finding["related"][0]["filename"] == "program.py"
    second = next(d for d in report if d["location"]["row"] == at["second iteration"])
    assert second["message"].endswith("[1 hit]")


NEGATIVES_PROGRAM = """\
    import torch, torch.func as tf
    from torch.fx.experimental.proxy_tensor import make_fx

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 4)

        def forward(self, x):
            with torch.no_grad():
                scale = x.norm()
            return self.layer(x) / scale

    def constants(x):
        with torch.no_grad():
            c = torch.ones(4) * 2
        return x * c

    torch.manual_seed(0)
    net, x = Net(), torch.randn(2, 4)
    print("eager", round(net(x).sum().item(), 5))
    print("compile", round(torch.compile(net, backend="aot_eager")(x).sum().item(), 5))
    print("script", round(torch.jit.script(net)(x).sum().item(), 5))
    print("export", round(torch.export.export(net, (x,)).module()(x).sum().item(), 5))
    print("pre_dispatch", round(make_fx(net, pre_dispatch=True)(x)(x).sum().item(), 5))
    print("vmap", round(tf.vmap(net)(x).sum().item(), 5) != 0)
    params = dict(net.named_parameters())
    tf.grad(lambda p: tf.functional_call(net, p, (x,)).sum())(params), tf.jacrev(net)(x[0]), tf.vjp(net, x[0])
    tf.jvp(constants, (x[0],), (x[0],)), make_fx(constants)(x[0]), torch.fx.symbolic_trace(constants)
    torch.jit.trace(constants, x[0])

    # a plain training loop: EMA of the weights under no_grad, evaluation under inference_mode
    ema = [p.detach().clone() for p in net.parameters()]
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(3):
        loss = net(x).pow(2).mean()
        optimizer.zero_grad(); loss.backward(); optimizer.step()
        with torch.no_grad():
            for average, p in zip(ema, net.parameters()):
                average.mul_(0.9).add_(p, alpha=0.1)
        with torch.inference_mode():
            print("step", step, net(x).sum().item() != 0)
"""


def test_what_keeps_regions_or_does_not_misread_them_is_silent(tmp_path):
    script = write(tmp_path, "program.py", NEGATIVES_PROGRAM)
    report, done = watch(script)
    assert done.returncode == 0, done.stderr
    assert report == []
    # what keeps the region computes what eager mode computes
    values = [line.split() for line in done.stdout.splitlines()]
    assert {value for name, value in values[:5]} == {values[0][1]} and values[5] == ["vmap", "True"]
    assert values[6:] == [["step", str(step), "True"] for step in range(3)]


def test_the_command_line_keeps_the_programs_output_exit_status_and_traceback(tmp_path):
    """No torch here: the runner alone, as `python` runs a script and a module."""
    write(tmp_path, "exits.py", "import sys\nprint('out', sys.argv[1:])\nsys.exit(3)\n")
    write(tmp_path, "raises.py", "def f():\n    raise ValueError('boom')\nf()\n")
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/tool.py", "import sys\nprint(__name__, sys.argv[1:])\n")
    for program in (["exits.py", "a", "-b"], ["raises.py"], ["-m", "pkg.tool", "--flag"]):
        plain = run([sys.executable, *program], tmp_path)
        watched = run([sys.executable, "-m", "lint_nograd.watch", *program], tmp_path)
        assert (watched.stdout, watched.stderr, watched.returncode) == (plain.stdout, plain.stderr, plain.returncode)
    assert run([sys.executable, "-m", "lint_nograd.watch", "exits.py"], tmp_path).returncode == 3
    for usage in (["--output-format", "xml", "exits.py"], ["--nope", "exits.py"], []):
        bad = run([sys.executable, "-m", "lint_nograd.watch", *usage], tmp_path)
        assert bad.returncode == 2 and "usage:" in bad.stderr and "Traceback" not in bad.stderr


def test_the_environment_variable_watches_any_process(tmp_path):
    script = write(tmp_path, "program.py", """\
        import torch, torch.func as tf
        def f(x):
            with torch.no_grad():  # region
                s = x * x
            return s * x
        print(tf.jvp(f, (torch.tensor(1.5),), (torch.tensor(1.0),))[1].item())  # jvp
        with torch.no_grad():  # outer
            tf.grad(f)(torch.tensor(1.5))  # grad
    """)
    done = run([sys.executable, script.name], tmp_path, {
        "LINT_NOGRAD_WATCH": "1", "LINT_NOGRAD_WATCH_OUTPUT": str(tmp_path / "{pid}.sarif"),
        "LINT_NOGRAD_WATCH_FORMAT": "sarif"})
    assert done.returncode == 0 and done.stdout == "6.75\n", done.stderr
    [path] = tmp_path.glob("*.sarif")
    results = json.loads(path.read_text())["runs"][0]["results"]
    at = rows(script)
    assert sorted((r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results) == [
        ("NG001", at["grad"]), ("NG004", at["region"])]


def test_the_pytest_plugin_reports_and_fails_only_when_strict(tmp_path):
    write(tmp_path, "test_model.py", """\
        import torch, torch.func as tf
        def f(x):
            with torch.no_grad():
                s = x * x
            return s * x
        def test_jvp():
            assert tf.jvp(f, (torch.tensor(1.5),), (torch.tensor(1.0),))[1].item() == 6.75
    """)
    pytest_command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_model.py"]
    strict = run([*pytest_command, "--nograd-watch-strict"], tmp_path)
    assert strict.returncode == 1 and "1 passed" in strict.stdout
    assert "lint-nograd watch" in strict.stdout and "test_model.py:3:10: NG004 `jvp(...)`" in strict.stdout
    assert run([*pytest_command, "--nograd-watch"], tmp_path).returncode == 0


def test_the_plugin_and_the_startup_hook_import_no_torch_unless_asked():
    check = ("import sys, lint_nograd.watch.pytest_plugin, lint_nograd.watch.startup as s; "
             "s.from_environment(); print('torch' in sys.modules)")
    assert run([sys.executable, "-c", check], ROOT).stdout == "False\n"
    assert run([sys.executable, "-c", check], ROOT, {"LINT_NOGRAD_WATCH": "1"}).stdout == "False\n"


@pytest.mark.parametrize("row", NAMES, ids=lambda row: row.release)
def test_each_row_of_private_names_is_complete(row):
    assert row.release and all(value for value in vars(row).values() if isinstance(value, str))


def test_every_private_name_of_this_release_resolves():
    assert hooks.unresolved(names_for(torch.__version__)) == []


def test_the_report_uses_checks_json_keys(tmp_path):
    finding = hooks.Finding("NG004", "no_grad", hooks.Place("a.py", 3, 10, 3, 25),
                            hooks.Site("jvp", hooks.Place("a.py", 8, 7, 8, 20)), hits=2)
    from lint_nograd.watch.report import diagnostics_of

    [diagnostic] = diagnostics_of([finding], "2.13.0")
    [entry] = json.loads(render([diagnostic], "json"))
    assert entry["message"] == "`jvp(...)` ignores this `no_grad` region: forward-mode gradients flow through it [2 hits]"
    assert entry["related"][0]["message"] == "`jvp(...)` reaches it in forward mode"
    assert diagnostics_of([finding], "2.13.0", codes=("NG005",)) == []


def test_the_options_come_before_the_program_and_the_rest_is_the_programs():
    from lint_nograd.watch.__main__ import parse

    settings, kind, target, arguments = parse(["--select", "NG004, ng005", "-o", "out.json", "train.py", "-o", "x"])
    assert (settings.select, settings.output, kind, target, arguments) == (
        ("NG004", "NG005"), "out.json", "script", "train.py", ["-o", "x"])
    settings, kind, target, arguments = parse(["--output-format=sarif", "-m", "pkg.train", "--select", "x"])
    assert (settings.output_format, kind, target, arguments) == ("sarif", "module", "pkg.train", ["--select", "x"])
