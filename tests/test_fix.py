"""`lint-nograd fix`: each `fixtures/fix/<case>.in.py` must become `<case>.out.py`.

`<case>.in.py` is fixed with unsafe fixes on, and with the settings of `<case>.toml` if there is
one (`stop-gradient = "detach"`). `<case>.fixes.txt` lists what `check` offers for each region of
the input, one line per finding: `line CODE safe|unsafe: message` or `line CODE no fix: reason`.
A `refuse_*` case changes nothing, so it has no .out.py. After an intended change, regenerate with
`LINT_NOGRAD_UPDATE_FIXTURES=1 pytest tests/test_fix.py` and review the diff.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from lint_nograd.analysis.model import SemanticModel
from lint_nograd.codemod import StopGradientCommand
from lint_nograd.fix.rewrite import (
    FIXABLE_CODES,
    FixSettings,
    apply_edits,
    check_with_fixes,
    fix_source,
    fix_text,
    plan_fixes,
)
from lint_nograd.report.diagnostics import Edit, Fix
from lint_nograd.run import engine
from lint_nograd.run.engine import parse

FIXTURES = Path(__file__).parent / "fixtures" / "fix"
CASES = sorted(path.name[: -len(".in.py")] for path in FIXTURES.glob("*.in.py"))
UPDATE = bool(os.environ.get("LINT_NOGRAD_UPDATE_FIXTURES"))
UNSAFE = FixSettings(unsafe_fixes=True)


def settings_of(case: str, unsafe_fixes: bool = True) -> FixSettings:
    path = FIXTURES / f"{case}.toml"
    table = tomllib.loads(path.read_text()) if path.exists() else {}
    return FixSettings(table.get("stop-gradient", FixSettings.stop_gradient), unsafe_fixes)


def planned(text: str, settings: FixSettings = UNSAFE) -> dict:
    """The plan for every NG004-NG006 region of `text`, keyed by the region's line."""
    parsed = parse(text.encode())
    model = SemanticModel(parsed.tree)
    reached = []  # the rows of the regions the file's transforms and tracers reach
    engine.check_source(parsed.text.encode(), "-", FIXABLE_CODES,
                        attach_fixes=lambda found, regions, *_: reached.extend(r.expr.lineno for r, _ in regions) or found)
    regions = [region for region in model.regions if region.expr.lineno in reached]
    return {region.expr.lineno: plan for region, plan in plan_fixes(parsed, model, regions, settings).items()}


def offered(text: str, settings: FixSettings = UNSAFE) -> str:
    """What `check` offers for each fixable finding: `line CODE applicability: message`, or the refusal."""
    lines = []
    for d in check_with_fixes(text.encode(), "case.py", FIXABLE_CODES, settings):
        if d.fix is not None:
            lines.append(f"{d.row} {d.code} {d.fix.applicability}: {d.fix.message}\n")
        else:
            lines.append(f"{d.row} {d.code} {d.help[d.help.rindex('(no fix: ') + 1:-1]}\n")
    return "".join(lines)


def fix(text: str, settings: FixSettings = UNSAFE) -> str:
    return fix_source(text.encode(), settings=settings).text


@pytest.mark.parametrize("case", CASES)
def test_fixture(case: str):
    source = (FIXTURES / f"{case}.in.py").read_text()
    expected_file, fixes_file = FIXTURES / f"{case}.out.py", FIXTURES / f"{case}.fixes.txt"
    settings = settings_of(case)
    got = fix(source, settings)
    fixes = offered(source, settings)
    if UPDATE:
        if not case.startswith("refuse_"):
            expected_file.write_text(got)
        fixes_file.write_text(fixes)
    assert got == (source if case.startswith("refuse_") else expected_file.read_text())
    assert fixes == fixes_file.read_text()
    assert fix(got, settings) == got, "fixing twice must change nothing the second time"
    assert not [d for d in check_with_fixes(got.encode(), "case.py", FIXABLE_CODES, settings) if d.fix], \
        "a fixed file has nothing left to fix"
    compile(got, case, "exec")


@pytest.mark.parametrize("case", CASES)
def test_without_unsafe_fixes_only_the_safe_ones_are_applied(case: str):
    source = (FIXTURES / f"{case}.in.py").read_text()
    result = fix_source(source.encode(), settings=settings_of(case, unsafe_fixes=False))
    safe = [d for d in check_with_fixes(source.encode(), "case.py", FIXABLE_CODES, settings_of(case))
            if d.fix is not None and d.fix.applicability == "safe"]
    fixed = {(region.row, region.code) for region in result.regions}
    assert fixed <= {(d.row, d.code) for d in safe}
    if not any(d.fix.applicability == "unsafe" for d in check_with_fixes(
            source.encode(), "case.py", FIXABLE_CODES, settings_of(case)) if d.fix is not None):
        assert result.text == fix(source, settings_of(case))  # nothing unsafe: the same result
    left = [d for d in result.remaining if d.fix is not None]
    assert all(d.fix.applicability == "unsafe" for d in left), "every safe fix is applied"


@pytest.mark.parametrize("case", [case for case in CASES if case.startswith("refuse_")])
def test_refusal_leaves_the_file_as_it_is(case: str):
    source = (FIXTURES / f"{case}.in.py").read_text()
    assert fix(source, settings_of(case)) == source and not (FIXTURES / f"{case}.out.py").exists()
    assert (FIXTURES / f"{case}.fixes.txt").read_text().count("no fix: ") >= 1


def test_every_refusal_the_issue_names_has_a_fixture():
    reasons = "".join(path.read_text() for path in FIXTURES.glob("refuse_*.fixes.txt"))
    for expected in ("in-place call buf.add_(...)", "out= argument", "store to attribute", "store to subscript",
                     "global statement", "nonlocal statement", "call used as a statement", "del statement",
                     "yield inside", "await inside", "enable_grad nested inside", "control flow (if)",
                     "control flow (for)", "control flow (while)", "control flow (try)", "control flow (with)",
                     "control flow (match)", "augmented assignment"):
        assert expected in reasons, expected


# -- the Fix objects the checker attaches --------------------------------------------------------

SOURCE = textwrap.dedent("""\
    import torch
    from torch.func import jacfwd


    def f(x):
        with torch.no_grad():
            s = x.mean()
        return x - s


    def g(x, buf):
        with torch.no_grad():
            buf.add_(x)
        return x


    def h(x):
        with torch.no_grad():
            t = x.std()
        return x / t


    jacfwd(f)
    jacfwd(g)
    jacfwd(h)
""")


def test_plan_fixes_gives_fixes_and_reasons():
    plans = planned(SOURCE)
    assert sorted(plans) == [6, 12, 18]
    assert plans[12] == "no fix: in-place call buf.add_(...)"
    first, third = plans[6], plans[18]
    assert isinstance(first, Fix) and isinstance(third, Fix)
    assert first.applicability == "safe"
    assert first.message == "Replace the `no_grad` region with `stop_gradient(...)`"
    assert first.edits[0] == Edit("    s = stop_gradient(x.mean())\n", 6, 1, 8, 1)
    # every fix of the file carries the same import edit, which applies once
    assert first.edits[1] == third.edits[1] == Edit("from lint_nograd import stop_gradient\n", 2, 1, 2, 1)
    both = apply_edits(SOURCE, [*first.edits, *third.edits])
    assert both.count("from lint_nograd import stop_gradient") == 1
    assert both == fix(SOURCE)


def test_fix_source_reports_what_remains():
    result = fix_source(SOURCE.encode(), frozenset({"NG004"}), display_path="m.py")
    assert result.changed and result.fixed == 2 and result.encoding == "utf-8"
    assert [(d.code, d.row, d.path) for d in result.remaining] == [("NG004", 12, "m.py")]


def test_codes_not_selected_are_not_fixed():
    assert fix_source(SOURCE.encode(), frozenset({"NG005", "NG006"})).text == SOURCE
    assert fix_source(SOURCE.encode(), frozenset()).text == SOURCE


# -- edits ------------------------------------------------------------------------------------------

def test_apply_edits_applies_identical_edits_once_and_skips_overlaps():
    text = "a\nb\nc\n"
    insert = Edit("x\n", 2, 1, 2, 1)
    replace_b = Edit("B\n", 2, 1, 3, 1)
    overlapping = Edit("Z", 2, 1, 4, 1)
    assert apply_edits(text, [replace_b, insert, insert]) == "a\nx\nB\nc\n"
    assert apply_edits(text, [replace_b, overlapping]) == "a\nB\nc\n"
    assert apply_edits(text, []) == text


def test_apply_edits_counts_characters_and_every_line_break():
    text = "é = 1\r\nb = 2\rc = 3"
    assert apply_edits(text, [Edit("x", 1, 1, 1, 2), Edit("C", 3, 1, 3, 2), Edit("!", 3, 6, 3, 6)]) \
        == "x = 1\r\nb = 2\rC = 3!"


def test_line_endings_are_kept():
    crlf = (FIXTURES / "comments_and_format.in.py").read_text().replace("\n", "\r\n")
    expected = (FIXTURES / "comments_and_format.out.py").read_text().replace("\n", "\r\n")
    result = fix_source(crlf.encode())
    assert result.text == expected
    assert fix(result.text) == result.text


def test_last_line_without_a_line_break():
    source = SOURCE.replace("jacfwd(g)\njacfwd(h)\n", "jacfwd(g)\n") + textwrap.dedent("""\

        def k(x):
            with torch.no_grad():
                u = x.max()
            return x - u
        jacfwd(k)
        def last(x):
            with torch.no_grad():
                return x.min()""")
    source += "\njacfwd(last)"
    got = fix(source)
    assert got.endswith("jacfwd(last)") and "    return stop_gradient(x.min())\n" in got
    assert "jacfwd(h)" not in got and fix(got) == got


HEADER = ["import torch", "from torch.func import jacfwd"]
FIXED_HEADER = ["import torch", "from lint_nograd import stop_gradient", "from torch.func import jacfwd"]
EDGE_CASES = {  # name: (lines, lines once fixed, line break, whether the file ends with one)
    "region at the end of the file": (
        [*HEADER, "jacfwd(f)", "def f(x):", "    with torch.no_grad():", "        return x.min()"],
        [*FIXED_HEADER, "jacfwd(f)", "def f(x):", "    return stop_gradient(x.min())"], "\n", False),
    "decorated function at the end of the file": (
        [*HEADER, "jacfwd(f)", "@torch.no_grad()", "def f(x):", "    return x.min()"],
        [*FIXED_HEADER, "jacfwd(f)", "def f(x):", "    return stop_gradient(x.min())"], "\n", False),
    "lone carriage returns": (
        [*HEADER, "def f(x):", "    with torch.no_grad():  # c", "        s = x.min()", "    return x - s", "jacfwd(f)"],
        [*FIXED_HEADER, "def f(x):", "    # c", "    s = stop_gradient(x.min())", "    return x - s", "jacfwd(f)"],
        "\r", True),
    "tabs": (
        [*HEADER, "def f(x):", "\twith torch.no_grad():", "\t\ts = x.min()", "\treturn x - s", "jacfwd(f)"],
        [*FIXED_HEADER, "def f(x):", "\ts = stop_gradient(x.min())", "\treturn x - s", "jacfwd(f)"], "\n", True),
}


def _text(lines: list[str], newline: str, ends_with_newline: bool) -> str:
    return newline.join(lines) + (newline if ends_with_newline else "")


@pytest.mark.parametrize("case", EDGE_CASES.values(), ids=EDGE_CASES.keys())
def test_layouts(case):
    lines, fixed_lines, newline, ends_with_newline = case
    source, expected = _text(lines, newline, ends_with_newline), _text(fixed_lines, newline, ends_with_newline)
    assert fix(source) == expected
    assert fix(expected) == expected


def test_only_imports_at_the_end_of_a_file_without_a_line_break():
    source = ("import torch\nfrom torch.func import jacfwd\ndef f(x):\n    with torch.no_grad():\n"
              "        s = x.mean()\n    return x - s\njacfwd(f)")
    got = fix(source)
    assert got.startswith("import torch\nfrom lint_nograd import stop_gradient\nfrom torch.func import jacfwd\n")
    only_imports = "import torch"
    assert fix(only_imports) == only_imports


def test_encodings_round_trip():
    body = SOURCE.replace("import torch\n", "import torch  # café\n", 1)
    latin = ("# -*- coding: latin-1 -*-\n" + body).encode("latin-1")
    result = fix_source(latin)
    assert result.encoding == "iso-8859-1" and "café" in result.text
    assert result.text.encode(result.encoding).startswith(b"# -*- coding: latin-1 -*-\nimport torch  # caf\xe9\n")
    bom = b"\xef\xbb\xbf" + body.encode()
    result = fix_source(bom)
    assert result.encoding == "utf-8-sig" and result.text.encode(result.encoding).startswith(bom[:20])


def test_unreadable_files_come_back_unchanged():
    for data in (b"with torch.no_grad(:\n", b"\xff\xfeno_grad", b"x = 1\n"):
        result = fix_source(data)
        assert not result.changed and result.text.encode(result.encoding) == data


def test_a_noqa_region_is_left_alone():
    source = (FIXTURES / "noqa.in.py").read_text()
    assert "with torch.no_grad():  # noqa: NG004\n        s = x.mean()" in fix(source)


NOT_FIXABLE = "import torch\nfrom torch.func import grad\nwith torch.no_grad():\n    d = grad(abs)(1.0)\n"


def test_the_check_path_imports_libcst_only_for_fixable_findings():
    code = ("import sys; from lint_nograd.fix.rewrite import check_with_fixes; from lint_nograd.report.registry import RULES; "
            f"[d] = check_with_fixes({NOT_FIXABLE!r}.encode(), 'm.py', frozenset(RULES)); "
            "assert d.code == 'NG001' and d.fix is None; "
            "assert 'libcst' not in sys.modules, 'libcst imported'; "
            f"found = check_with_fixes({SOURCE!r}.encode(), 'm.py', frozenset(RULES)); "
            "assert sum(d.fix is not None for d in found) == 2 and 'no fix: in-place' in found[1].help")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_engine_and_the_checks_do_not_import_the_fix_layer():
    """Fixing is a layer above the engine: planning (ast only) may be imported by the checks, the rest not."""
    code = ("import sys; from lint_nograd.run import engine; from lint_nograd.report.registry import RULES; "
            f"found = engine.check_source({SOURCE!r}.encode(), 'm.py', frozenset(RULES)); "
            "assert len(found) == 3 and all(d.fix is None for d in found); "
            "assert 'lint_nograd.fix.rewrite' not in sys.modules and 'lint_nograd.fix.edit' not in sys.modules; "
            "assert 'libcst' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the libcst codemod ---------------------------------------------------------------------------

def test_codemod_command_in_process():
    command = StopGradientCommand(CodemodContext())
    assert command.DESCRIPTION
    tree = cst.parse_module(SOURCE)
    assert command.transform_module(tree).code == fix(SOURCE)
    unchanged = cst.parse_module("import torch\n")
    assert command.transform_module(unchanged).code == "import torch\n"
    assert fix_text(SOURCE) == fix(SOURCE)


def _libcst_tool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "libcst.tool", "codemod", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def test_libcst_tool_runs_the_command(tmp_path: Path):
    """`-x` imports the command by its module path; `--no-format` skips libcst's formatter (black)."""
    target = tmp_path / "model.py"
    target.write_text(SOURCE)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\ndependencies = ["lint-nograd"]\n')
    run = _libcst_tool("-x", "--no-format", "--hide-progress", "lint_nograd.codemod.StopGradientCommand",
                       str(target), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert target.read_text() == fix(SOURCE)
    # without -x, libcst looks the command up under the modules its .libcst.codemod.yaml lists
    target.write_text(SOURCE)
    run = _libcst_tool("--no-format", "lint_nograd.codemod.StopGradientCommand", str(target), cwd=tmp_path)
    assert run.returncode != 0 and "Could not find" in run.stderr
    (tmp_path / ".libcst.codemod.yaml").write_text("modules:\n  - lint_nograd\n")
    run = _libcst_tool("--no-format", "--hide-progress", "codemod.StopGradientCommand", str(target), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert target.read_text() == fix(SOURCE)


def test_libcst_tool_honours_the_configuration(tmp_path: Path):
    """The command fixes each file as `lint-nograd fix` would: selection, per-file ignores, settings."""
    (tmp_path / "pyproject.toml").write_text('[tool.lint-nograd]\nstop-gradient = "detach"\n'
                                             'per-file-ignores = {"skipped.py" = ["NG004"]}\n')
    heavy = SOURCE.replace("s = x.mean()", "s = model(x)").replace("def f(x):", "def f(x, model=None):")
    for name, text in {"model.py": SOURCE, "skipped.py": SOURCE, "heavy.py": heavy}.items():
        (tmp_path / name).write_text(text)
    run = _libcst_tool("-x", "--no-format", "--hide-progress", "lint_nograd.codemod.StopGradientCommand", ".",
                       cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "model.py").read_text() == fix(SOURCE, FixSettings("detach"))
    assert "    s = x.mean().detach()\n" in (tmp_path / "model.py").read_text()
    assert (tmp_path / "skipped.py").read_text() == SOURCE
    assert (tmp_path / "heavy.py").read_text() == fix(heavy, FixSettings("detach", unsafe_fixes=False))
    assert "s = model(x)\n" in (tmp_path / "heavy.py").read_text()  # `.detach()` refuses a module's output

    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\nunsafe-fixes = true\nselect = ['NG005']\n")
    (tmp_path / "model.py").write_text(SOURCE)
    run = _libcst_tool("-x", "--no-format", "--hide-progress", "lint_nograd.codemod.StopGradientCommand", ".",
                       cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "model.py").read_text() == SOURCE  # NG004 is not selected


def test_libcst_tool_lists_the_command(tmp_path: Path):
    """`list` imports every module of the packages it is given, `lint_nograd.__main__` included."""
    (tmp_path / ".libcst.codemod.yaml").write_text("modules:\n  - lint_nograd\n")
    run = subprocess.run([sys.executable, "-m", "libcst.tool", "list"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "codemod.StopGradientCommand - Rewrite torch.no_grad()" in run.stdout


def test_importing_the_main_module_runs_nothing():
    code = ("import sys; sys.argv = ['lint-nograd', 'check', '/nonexistent']; import lint_nograd.__main__; "
            "assert 'torch' not in sys.modules; print('imported')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout, run.stderr) == (0, "imported\n", "")


# -- the rule for the form, the applicability, and when a region is cut already ---------------------------

RULE_HEADER = ("import math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"
               "from torch.func import grad, jacfwd, jacrev\nfrom lint_nograd import stop_gradient\n\n\n")


def region_source(body: str, api: str = "torch.no_grad()") -> str:
    return (f"{RULE_HEADER}def f(x, w=None, model=None, helper=None):\n    with {api}:\n"
            + "".join(f"        {line}\n" for line in body.split("; ")) + "    return x * s\n\n\njacfwd(f)\njacrev(f)\n")


def only_region(body: str, api: str = "torch.no_grad()"):
    parsed = parse(region_source(body, api).encode())
    model = SemanticModel(parsed.tree, parsed.text)
    [region] = model.regions
    return model, region


@pytest.mark.parametrize("body, form, applicability", [
    ("s = x.mean()", "short", "safe"),
    ("s = (x - x.mean()) / x.std()", "short", "safe"),
    ("s = torch.tanh(x).sum() + F.relu(x).amax()", "short", "safe"),
    ("n = len(x); s = x.view(-1) * math.sqrt(n)", "short", "safe"),
    ("s = x @ w", "kept", "safe"),
    ("s = torch.matmul(x, w)", "kept", "safe"),
    ("s = torch.linalg.vector_norm(x)", "kept", "safe"),
    ("s = model(x)", "kept", "unsafe"),
    ("s = helper(x).mean()", "kept", "unsafe"),
    ("s = x.mean(); t = model(x)", "kept", "unsafe"),
    ("s = grad(torch.sin)(x)", "kept", "unsafe"),
    ("s = np.mean(x)", "kept", "unsafe"),
    ("s = x.custom_statistic()", "kept", "unsafe"),
])
def test_the_rule_for_the_form_and_the_applicability(body, form, applicability):
    from lint_nograd.fix.plan import plan_region

    model, region = only_region(body)
    plan = plan_region(model, region)
    assert (plan.form, plan.applicability) == (form, applicability)


@pytest.mark.parametrize("body, api, cut", [
    ("s = stop_gradient(model(x))", "torch.no_grad()", True),
    ("s = model(x).detach()", "torch.no_grad()", True),
    ("s = jax_like.lax.stop_gradient(x * 2)", "torch.no_grad()", True),  # any function of that name
    ("s = x; n = x.shape[0]", "torch.set_grad_enabled(False)", True),  # reads only
    ("s = model(x)", "torch.no_grad()", False),
    ("s = stop_gradient(model(x)) * 2", "torch.no_grad()", False),
    ("s = stop_gradient(model(x))", "torch.inference_mode()", False),  # its tensors cannot be saved, cut or not
    ("s = stop_gradient(x); x.add_(1)", "torch.no_grad()", False),
])
def test_a_region_whose_values_are_all_cut_is_no_finding(body, api, cut):
    from lint_nograd.analysis.region_values import region_cuts_its_values

    body = body.replace("jax_like", "np")
    model, region = only_region(body, api)
    assert region_cuts_its_values(model, region) is cut
    assert (engine.analyse(region_source(body, api).encode(), "-", FIXABLE_CODES) == []) is cut
