"""Where `lint-nograd fix` adds its import: where isort's default profile puts it, so that
`ruff check --select I` passes on a fixed file whose imports were sorted before.

Each case is a file's import block; the fix adds `from lint_nograd import stop_gradient` (or the
import a `stop-gradient` setting names) to it. `ruff` checks every result, and every fixed fixture
of tests/fixtures/fix, in a folder of their own: there `lint_nograd` is a third-party package,
as in a user's project.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lint_nograd.fix.rewrite import fix_source
from lint_nograd.fix.settings import FixSettings, first_party_modules

FIXTURES = Path(__file__).parent / "fixtures" / "fix"
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
BODY = textwrap.dedent("""\


    def f(x):
        with torch.no_grad():
            s = x.mean()
        return x * s


    torch.func.jacfwd(f)
""")
ADDED = "from lint_nograd import stop_gradient"
# (imports before, imports after, first-party modules)
CASES = {
    "third-party section, sorted": (
        "import os\n\nimport numpy\nimport torch\nfrom torch import nn\n",
        f"import os\n\nimport numpy\nimport torch\n{ADDED}\nfrom torch import nn\n", ()),
    "from-imports after straight ones": (
        "import torch\nimport torch.nn.functional as F\n",
        f"import torch\nimport torch.nn.functional as F\n{ADDED}\n", ()),
    "a new section between the standard library and first-party": (
        "from __future__ import annotations\n\nimport os\n\nimport mine\nimport torch\n",
        f"from __future__ import annotations\n\nimport os\n\n{ADDED}\n\nimport mine\nimport torch\n",
        ("torch", "mine")),
    "a new section at the end": (
        "import torch\n", f"import torch\n\n{ADDED}\n", ("lint_nograd",)),
    "a new section before first-party imports": (
        "import os\n\nimport torch\n",
        f"import os\n\n{ADDED}\n\nimport torch\n", ("torch",)),
    "before local imports": (
        "import torch\n\nfrom . import sibling\n",
        f"import torch\n{ADDED}\n\nfrom . import sibling\n", ()),
    "first-party when the project says so": (
        "import torch\n\nimport mine\nfrom mine import util\n",
        f"import torch\n\nimport mine\n{ADDED}\nfrom mine import util\n", ("mine", "lint_nograd")),
    "comments stay with the import below them": (
        "import os\n\n# the model\nimport torch\n",
        f"import os\n\n{ADDED}\n\n# the model\nimport torch\n", ("torch",)),
    "the file's header stays first": (
        "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\nimport torch\nfrom torch import nn\n",
        f"#!/usr/bin/env python\n# -*- coding: utf-8 -*-\nimport torch\n{ADDED}\nfrom torch import nn\n", ()),
    "before the first import, after the header": (
        "# -*- coding: utf-8 -*-\nimport torch\n",
        f"# -*- coding: utf-8 -*-\n{ADDED}\n\nimport torch\n", ("torch",)),
    "joined to an import of the same module": (
        "import torch\nfrom lint_nograd import func  # the shim\n",
        "import torch\nfrom lint_nograd import func, stop_gradient  # the shim\n", ()),
    "joined, the names in isort's order": (
        "import torch\nfrom lint_nograd import MAX, Thing, zeta\n",
        "import torch\nfrom lint_nograd import MAX, Thing, stop_gradient, zeta\n", ()),
    "an aliased import is not joined": (
        "import torch\nfrom lint_nograd import func as f\n",
        f"import torch\nfrom lint_nograd import func as f\n{ADDED}\n", ()),
    "case-insensitive order": (
        "import torch\nfrom Levenshtein import distance\nfrom torch import nn\n",
        f"import torch\nfrom Levenshtein import distance\n{ADDED}\nfrom torch import nn\n", ()),
    "after a docstring": ('"""A model."""\nimport torch\n', f'"""A model."""\nimport torch\n{ADDED}\n', ()),
    "above a try block of imports, a blank line between": (
        "try:\n    import torch\nexcept ImportError:\n    raise SystemExit('needs torch')\n",
        f"{ADDED}\n\ntry:\n    import torch\nexcept ImportError:\n    raise SystemExit('needs torch')\n", ()),
    "above an if block of imports, after a docstring": (
        '"""A model."""\nif True:\n    import torch\n', f'"""A model."""\n{ADDED}\n\nif True:\n    import torch\n', ()),
    "one blank line, not the code's own two": (
        "\n\nif True:\n    import torch\n", f"{ADDED}\n\nif True:\n    import torch\n", ()),
}


FIXED_BODY = BODY.replace("    with torch.no_grad():\n        s = x.mean()\n", "    s = stop_gradient(x.mean())\n")


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_the_import_goes_where_isort_puts_it(case):
    before, after, first_party = case
    settings = FixSettings(first_party=frozenset(first_party))
    assert fix_source((before + BODY).encode(), settings=settings).text == after + FIXED_BODY


def ruff_isort(folder: Path, settings: str = "") -> subprocess.CompletedProcess:
    (folder / "pyproject.toml").write_text(settings)
    return subprocess.run([RUFF, "check", "--select", "I", "--no-cache", "--quiet", "."], cwd=folder,
                          capture_output=True, text=True)


needs_ruff = pytest.mark.skipif(RUFF is None, reason="ruff is not installed (pip install '.[test]')")


@needs_ruff
def test_every_fixed_fixture_passes_ruff_isort(tmp_path):
    outputs = sorted(FIXTURES.glob("*.out.py"))
    assert len(outputs) > 20
    for path in outputs:
        shutil.copy(path, tmp_path / path.name.replace(".out.py", "_out.py"))
    result = ruff_isort(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_ruff
@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_ruff_isort_passes_before_and_after(case, tmp_path):
    before, _, first_party = case
    settings = f"[tool.ruff.lint.isort]\nknown-first-party = {list(first_party)!r}\n"
    source = before + BODY
    (tmp_path / "m.py").write_text(source)
    if ruff_isort(tmp_path, settings).returncode != 0:
        pytest.skip("the imports were not sorted before the fix")
    fixed_text = fix_source(source.encode(), settings=FixSettings(
        first_party=first_party_modules(tmp_path, [tmp_path]))).text
    assert "s = stop_gradient(x.mean())" in fixed_text
    (tmp_path / "m.py").write_text(fixed_text)
    result = ruff_isort(tmp_path, settings)
    assert result.returncode == 0, fixed_text + result.stdout


def test_first_party_modules_come_from_isort_settings_and_import_roots(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ruff.lint.isort]\nknown-first-party = ["alpha.sub"]\n[tool.isort]\nknown_first_party = ["beta"]\n')
    (tmp_path / "src" / "gamma").mkdir(parents=True)
    (tmp_path / "src" / "gamma" / "__init__.py").write_text("")
    (tmp_path / "delta.py").write_text("")
    (tmp_path / "build").mkdir()  # not a package
    found = first_party_modules(tmp_path, [tmp_path, tmp_path / "src"])
    assert {"alpha", "beta", "gamma", "delta"} <= found
    assert not {"torch", "src", "build"} & found
    (tmp_path / "pyproject.toml").write_text("not toml [")
    assert "alpha" not in first_party_modules(tmp_path, [])  # a broken file: no isort settings
