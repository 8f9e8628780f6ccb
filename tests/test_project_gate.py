"""Whole-project runs read every file's text but summarise only the files that can matter, and
load others when a chain enters them: the findings must be those of a run that summarises every
file of the project."""
from __future__ import annotations

import ast
import importlib.util
import shutil
from pathlib import Path

import pytest
from lint_nograd.report.registry import RULES
from lint_nograd.run import runner
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


def test_the_installed_torch_sources_as_one_project():
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    gated, everything = both_ways(Path(spec.origin).parent, workers=2)
    assert gated == everything
