"""Whole-project runs read every file's text but summarise only the files that can matter, and
load others when a chain enters them: the findings must be those of a run that summarises every
file of the project."""
from __future__ import annotations

import ast
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lint_nograd.analysis import torch_names
from lint_nograd.report.registry import RULES
from lint_nograd.run import runner, stages
from lint_nograd.run.jobs import Job
from lint_nograd.run.cache import Cache
from lint_nograd.run.files import compile_patterns, discover

FIXTURES = Path(__file__).parent / "fixtures"


def both_ways(root: Path, workers: int = 1) -> tuple[list, list]:
    files = discover([str(root)], root=root, exclude=compile_patterns([]), cwd=root).files
    jobs = [Job(path, shown, frozenset(RULES)) for path, shown in files]
    found = [runner.check(jobs, files, [root], workers, Cache(None), everything=everything)
             for everything in (False, True)]
    return [(found.diagnostics, found.errors) for found in found]


@pytest.mark.parametrize("project", sorted(p for p in (FIXTURES / "projects").iterdir() if p.is_dir()),
                         ids=lambda p: p.name)
def test_fixture_projects(project):
    gated, everything = both_ways(project)
    assert gated == everything


def test_every_fixture_as_one_package(tmp_path):
    """The checker and fix fixtures, as modules of one package that import each other's names."""
    package = tmp_path / "fixtures"
    package.mkdir()
    (package / "__init__.py").write_text("")
    sources = sorted(FIXTURES.glob("checker/*.py")) + sorted(FIXTURES.glob("fix/*.in.py"))
    names = [source.name.replace(".in.py", "_in.py").replace(".py", "") for source in sources]
    uses = ["import torch", "from torch.func import jacfwd, jacrev", "from fixtures.helpers import hvp"]
    for number, (source, name) in enumerate(zip(sources, names)):
        shutil.copyfile(source, package / f"{name}.py")
        try:
            tree = ast.parse(source.read_bytes())
        except (SyntaxError, ValueError):
            continue
        for function in (node.name for node in tree.body if isinstance(node, ast.FunctionDef)):
            uses.append(f"from fixtures.{name} import {function} as f{len(uses)}")
            how = ("jacfwd({})", "jacrev({})", "torch.fx.symbolic_trace({})", "hvp({}, x, x)")[len(uses) % 4]
            uses.append(how.format(f"f{len(uses) - 1}"))
    (package / "helpers.py").write_text("from torch.func import grad, jvp\n\n\n"
                                        "def hvp(f, x, v):\n    return jvp(grad(f), (x,), (v,))[1]\n")
    (package / "uses.py").write_text("\n".join(uses) + "\n")
    gated, everything = both_ways(tmp_path)
    assert any(r.path.endswith("fixtures/uses.py") for d in gated[0] for r in d.related)  # chains cross modules
    assert gated == everything


@pytest.mark.torch  # reads torch's own sources, 2,285 files
def test_the_installed_torch_sources_as_one_project():
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    gated, everything = both_ways(Path(spec.origin).parent, workers=2)
    assert gated == everything


# -- the text index: every import statement Python reads is among those it names ---------------------

def _spaces():  # between two tokens: spaces, a tab, or a line continued by a backslash
    return st.sampled_from([" ", "  ", "\t", " \\\n    ", "\\\n "])


@st.composite
def import_statements(draw) -> str:
    """An import statement, spelled as Python allows: relative or not, aliased, in brackets with
    comments, after `;` or `:`, across backslash continuations, with spaces around dots."""
    def gap() -> str:
        return draw(_spaces())

    def maybe(*choices: str) -> str:
        return draw(st.sampled_from(choices))

    module = maybe("pkg.sub", "pkg", "torch.func", ".sub", "..", ".")
    dotted = module.replace(".", maybe(".", " . ", ".\\\n  "), 1) if "." in module.strip(".") else module
    names = draw(st.lists(st.sampled_from(["model", "loss", "jacfwd"]), min_size=1, max_size=3, unique=True))
    aliased = [name + (f"{gap()}as{gap()}{name}_" if draw(st.booleans()) else "") for name in names]
    if module.startswith(".") or draw(st.booleans()):
        if draw(st.booleans()):
            listed = ",  # a comment (with brackets)\n    ".join(aliased)
            listed = maybe("(", "(  # import\n    ", "(\n    ") + listed + maybe("", ",", ",  # end", "\n") + "\n)"
            space = maybe("", " ")
        else:
            listed, space = f",{gap()}".join(aliased), gap()
        statement = f"from{maybe('', ' ') if module.startswith('.') else gap()}{dotted}{gap()}import{space}{listed}"
    else:
        statement = f"import{gap()}{dotted}" + "".join(f",{gap()}{name}" for name in aliased)
    before = maybe("", "x = 1; ", "x = {'a': 1}; ", "if True: ", "# a note \\\n", "\f")
    after = maybe("", "; y = 2", "  # import other", ";import os")
    return f"import torch\n{before}{statement}{after}\n"


def _imported(tree: ast.Module) -> set[str]:
    """Each module an import names, as the index names it: `pkg.sub`, and `pkg.sub.model` for its names."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found.add(base)
            found.update(base + ("" if base.endswith(".") else ".") + alias.name for alias in node.names)
    return found


@settings(max_examples=400, deadline=None, database=None)
@given(import_statements())
def test_the_text_index_names_every_module_an_import_names(source):
    """The index decides which files are summarised: a module it misses loses the findings of
    the calls that reach it. A name imported from a module of torch.func's opens the rules' gate."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        assume(False)
    scan = torch_names.Scan(source.encode())
    assert _imported(tree) <= set(scan.index().imports)
    if any(isinstance(n, ast.ImportFrom) and n.module == "torch.func" for n in ast.walk(tree)) and "jacfwd" in source:
        assert scan.names_a_func_module(b"jacfwd")


@pytest.mark.parametrize("spelling", [
    "from pkg.sub import (  # the model\n    model)\n",
    "x = 1; from pkg.sub import model\n",
    "from pkg.sub import \\\n    model\n",
    "if True: from pkg.sub import model\n",
])
def test_a_call_reaches_a_module_however_its_import_is_spelled(tmp_path, spelling):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for package in ("pkg", "pkg/sub"):
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "model.py").write_text(
        "import torch\n\n\ndef loss(x):\n    with torch.no_grad():\n        s = x.mean()\n    return x - s\n")
    (tmp_path / "train.py").write_text(f"from torch.func import jacfwd\n{spelling}\njacfwd(model.loss)\n")
    files = discover([str(tmp_path)], root=tmp_path, exclude=compile_patterns([]), cwd=tmp_path).files
    jobs = [Job(path, shown, frozenset(RULES)) for path, shown in files if shown == "train.py"]
    found = runner.check(jobs, files, [tmp_path], 1, Cache(None))
    assert [d.code for d in found.diagnostics] == ["NG004"] and not found.errors


NOTEBOOK = json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                  "source": ["from ops import directional\n", "directional(f, x, v)"]}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


@pytest.mark.parametrize("text, shown, found", [
    (b"from ops import (\n    directional,  # a helper\n)\n", "a.py", True),
    (b"from ops import directional as d\nd(f, x, v)\n", "a.py", True),
    (b"import ops\nops.directional(f, x, v)\n", "a.py", True),
    (b"from ops import *\ndirectional(f, x, v)\n", "a.py", True),
    (b"import ops\ngetattr(ops, 'directional')(f, x, v)\n", "a.py", True),
    (NOTEBOOK, "study.ipynb", True),
    (b"def directional(values):\n    return values\n", "a.py", False),  # a function of its own
    (b"directional = [1, 2]\nprint(directional)\n", "a.py", False),
])
def test_the_callers_of_a_function_are_the_files_that_import_it_or_read_it_as_an_attribute(text, shown, found):
    """A file can call `ops.probe.directional` only after importing it by name, through a star
    import, or as an attribute (`ops.directional`, `getattr(ops, "directional")`): the file
    defining it is linked already, and another file's name of its own is no call of it."""
    assert stages.mentions_any(text, stages._spelled("directional"), shown) is found


@pytest.mark.parametrize("text, found", [
    (b"from ops import directional as d\nd(f, x, v)\n", True),
    (b"import ops\nops.directional (f, x, v)\n", True),
    (b"import ops\nrun = ops.directional  # bound, then called\nrun(f, x, v)\n", True),
    (b"import ops\n\n\n@ops.directional\ndef f(x):\n    return x\n", True),
    (b"import ops\ngetattr(ops, 'directional')(f, x, v)\n", True),
    (b"import ops\ny = checkpoint(ops.directional, x)\n", True),  # library calls that call what they are given
    (b"import functools\nimport ops\nrun = functools.partial(ops.directional, net)\n", True),
    (b"import ops\nys = sorted(\n    xs,\n    key=ops.directional,\n)\n", True),
    (b"import ops\nnet.register_forward_hook(ops.directional)\n", True),
    (b"import ops\n\n\nclass Probe(ops.Base):\n    def directional(self, f):\n        return f\n", False),
    (b"import ops\nnodes = ops.directional.nodes\n", False),  # read, not called
])
def test_the_callers_of_a_method_are_the_files_where_a_call_may_end_with_its_name(text, found):
    """A method is looked for by its name alone: a file whose only `directional` is the name of its
    own `def` (an override), or an attribute read further, calls no `directional`."""
    assert stages.mentions_any(text, stages._spelled("Probe.directional", called=True), "a.py") is found


def test_a_dunder_method_is_looked_for_by_its_class():
    """`Probe.__call__` runs where a `Probe` is called: files naming `Probe` are its callers."""
    assert stages._spelled("Probe.__call__") == ".Probe"
    assert stages._spelled("Probe.set") == ".set"
    assert stages._spelled("register.<locals>.store") == ".register"
    assert stages._spelled("<lambda>@3:4") == ""
    assert stages._spelled("Probe.__call__", called=True) == ".Probe"  # (subclassed by name, not called)
    assert stages._spelled("Probe.set", called=True) == "(.set"
