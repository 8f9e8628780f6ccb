"""Sources the command-line tests share: one with a fixable finding, one whose finding has no fix
(NG001), and one with none."""

FIXABLE = """\
import torch
from torch.func import jacfwd


def f(x):
    with torch.no_grad():
        s = x.mean()
    return x - s


jacfwd(f)
"""
NOT_FIXABLE = """\
import torch
from torch.func import grad

with torch.no_grad():
    d = grad(abs)(1.0)
"""
CLEAN = "import torch\n\nx = torch.ones(3)\n"

# A project that declares lint-nograd among its dependencies: `fix` may add `from lint_nograd import ...`
# (a project that does not gets `.detach()` where that is exact: tests/test_fix_dependency.py)
DECLARES_LINT_NOGRAD = '[project]\nname = "app"\ndependencies = ["lint-nograd"]\n\n[tool.lint-nograd]\n'
