"""A relative import names a module of the importer's own package: two packages with the same
files and the same `from .model import energy` import different functions, and linking must keep
them apart (what module a ref comes from is remembered while linking)."""
from __future__ import annotations

from pathlib import Path

from lint_nograd.report.registry import RULES
from lint_nograd.run import runner
from lint_nograd.run.jobs import Job
from lint_nograd.run.cache import Cache
from lint_nograd.run.files import compile_patterns, discover

HELPERS = "from torch.func import jacfwd\n\n\ndef hvp(f, x):\n    return jacfwd(f)(x)\n"
TRAIN = ("import torch\nfrom torch.func import jacrev\n\nfrom .helpers import hvp\nfrom .model import energy\n\n"
         "x = torch.ones(3)\njacrev(torch.sin)(x)\nhvp(energy, x)\n")
FILES = {
    "a/model.py": "def energy(x):\n    return x * 2\n",  # no region
    # linked first, as a module whose imports lead to a region (b.model's)
    "a/train.py": f"import b.model  # noqa: F401\n{TRAIN}",
    "b/model.py": "import torch\n\n\ndef energy(x):\n    with torch.no_grad():\n        s = x.mean()\n    return x * s\n",
    "b/train.py": TRAIN,
}


def check(root: Path, everything: bool) -> list:
    files = discover([str(root)], root=root, exclude=compile_patterns([]), cwd=root).files
    jobs = [Job(path, shown, frozenset(RULES)) for path, shown in files]
    return runner.check(jobs, files, [root], 1, Cache(None), everything=everything).diagnostics


def test_the_same_relative_import_in_two_packages(tmp_path):
    for package in ("a", "b"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "helpers.py").write_text(HELPERS)
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    for everything in (False, True):
        found = [(d.path, d.code, d.row) for d in check(tmp_path, everything)]
        assert ("b/model.py", "NG004", 5) in found
        assert not [path for path, _, _ in found if path.startswith("a/")]
