"""The shortcuts never drop a finding: gated and ungated runs agree.

The gate skips a file whose text cannot hold a finding (no grad-disabling API named, or no word a
selected rule needs). Ungated, every file is parsed and analysed; the findings must be the same,
except NG000, which is reported only for files some rule could apply to. Inside a file, the model
looks for transform and tracer calls only on the lines that spell their names; walking every
statement must find the same.
"""
from __future__ import annotations

import importlib.util
import random
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lint_nograd import checks
from lint_nograd.analysis.model import SemanticModel
from lint_nograd.report.registry import RULES
from lint_nograd.run import engine

ALL = frozenset(RULES)
FIXTURES = Path(__file__).parent / "fixtures"


def disagreement(path: Path, data: bytes | None = None) -> str | None:
    data = path.read_bytes() if data is None else data
    gated = [d for d in engine.check_source(data, path.name, ALL) if d.code != "NG000"]
    ungated = [d for d in engine.analyse(data, path.name, ALL) if d.code != "NG000"]
    if gated != ungated:
        return f"{path}: gated {gated} != ungated {ungated}"
    try:
        parsed = engine.parse(data)
    except engine.ParseError:
        return None
    def found(model): return [(f.code, f.node.lineno, f.node.col_offset) for f in checks.run(model, ALL)]
    by_lines, everything = found(SemanticModel(parsed.tree, parsed.text)), found(SemanticModel(parsed.tree))
    return None if by_lines == everything else f"{path}: by lines {by_lines} != every statement {everything}"


def test_fixtures():
    cases = sorted(FIXTURES.glob("checker/*.py")) + sorted(FIXTURES.glob("fix/*.py"))
    assert len(cases) > 50
    assert [message for case in cases if (message := disagreement(case))] == []


# Lines whose insertion makes findings or breaks them; mutations of the fixtures, like a fuzzer's.
SNIPPETS = [
    "with torch.no_grad():\n    y = grad(f)(x)\n", "with torch.no_grad():\n    loss = model(x)\nloss.backward()\n",
    "jacfwd(f)(x)\n", "torch.fx.symbolic_trace(f)\n", "from torch.func import grad as g\n",
    "import functorch as ft\n", "@torch.inference_mode()\ndef h(x):\n    return ft.jacrev(f)(x)\n",
    "ng = torch.no_grad\n", "from torch import *\n", "def f(x):\n    return x\n",
    "jf = jacfwd\njf(f)(x)\n", "from torch.func import jacrev as jr\nclass M:\n    d = jr(f)\n",
    "if (h := jacfwd(f)):\n    pass\n", "for _ in map(jacfwd, [f]):\n    pass\n",
    "from torch.func import (\n    vjp,\n    jacfwd as jf2,\n)\n", "y = torch.func . jvp(f, (x,), (x,))\n",
    "from torch._functorch import eager_transforms as et\n", "z = et.jacrev(f)(x)\n",
]


def mutations(count: int, seed: int = 0):
    rng = random.Random(seed)
    sources = [path.read_text() for path in sorted(FIXTURES.glob("checker/ng00[1-6]*.py"))]
    for number in range(count):
        lines = rng.choice(sources).splitlines(keepends=True)
        for _ in range(rng.randint(1, 3)):
            position = rng.randint(0, len(lines))
            lines[position:position] = [rng.choice(SNIPPETS)]
        yield Path(f"mutation{number}.py"), "".join(lines).encode()


def test_mutated_fixtures():
    assert [message for path, data in mutations(300) if (message := disagreement(path, data))] == []


def _torch_disagreements(paths: list[Path]) -> list[str]:
    return [message for path in paths if (message := disagreement(path))]


@pytest.mark.torch  # reads torch's own sources, 2,285 files
def test_the_installed_torch_sources():
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    paths = sorted(Path(spec.origin).parent.rglob("*.py"))
    chunks = [paths[start::8] for start in range(8)]
    with ProcessPoolExecutor(max_workers=2) as pool:
        found = [message for messages in pool.map(_torch_disagreements, chunks) for message in messages]
    assert found == []


hypothesmith = pytest.importorskip("hypothesmith")
from test_fuzz import FIXTURE_SOURCES, with_insertions  # noqa: E402  (the same programs as the fuzz tests)

# The reliability issue's generated programs, without the comment that opens the gate.
_GENERATED = st.one_of(
    hypothesmith.from_grammar(),
    st.sampled_from([data.decode("utf-8", "surrogateescape") for data in FIXTURE_SOURCES]),
).flatmap(with_insertions).map(lambda text: text.encode("utf-8", "surrogateescape"))


@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(_GENERATED)
def test_generated_programs(data):
    assert disagreement(Path("generated.py"), data) is None


# Each spelling a file may name a module of torch.func's with: the gate must let the finding through.
_NAMES_TORCH_FUNC = [
    "from torch.func import jacfwd\n",
    "from torch.func import (\n    vjp,\n    jacfwd,\n)\n",
    "from torch.func import (vjp,\n                        jacfwd)\n",
    "import torch.func as tf\njacfwd = tf.jacfwd\n",
    "from functorch import *\n",
    "jacfwd = torch.func . jacfwd\n",
    "from torch._functorch import eager_transforms\njacfwd = eager_transforms.jacfwd\n",
    "from torch._functorch.eager_transforms import jacfwd\n",
]
_REACHED = ("\ndef f(x):\n    with torch.no_grad():\n        s = x.mean()\n    return (x - s).sum()\n\n"
            "h = jacfwd(f)\n")


@pytest.mark.parametrize("spelling", _NAMES_TORCH_FUNC)
def test_every_spelling_of_torch_func_opens_the_gate(spelling):
    data = ("import torch\n" + spelling + _REACHED).encode()
    gated = engine.check_source(data, "spelled.py", ALL)
    assert [d.code for d in gated] == ["NG004"] and gated == engine.analyse(data, "spelled.py", ALL)


@pytest.mark.parametrize(("text", "calls"), [
    (b"loss.backward()", True), (b"loss . backward ()", True), (b"y.\\\n    backward()", True),
    (b"fabric.backward(loss)", True), (b"torch.autograd.grad(y, x)", True),
    (b"from torch.autograd import grad", True), (b"import torch.autograd.backward as b", True),
    (b"def backward(ctx, g):", False), (b"x = backward_hook(f)", False), (b"# call backward() later", False),
    (b"the backward pass", False), (b"autograd is fun", False),
])
def test_the_text_index_tells_files_that_may_call_backward(text, calls):
    """NG003 across modules is reported where backward is called: such a file given is summarised
    whatever it imports (the function's module is loaded when linking asks), and only such a file."""
    from lint_nograd.analysis.torch_names import Scan

    assert Scan(text).index().backward == calls
