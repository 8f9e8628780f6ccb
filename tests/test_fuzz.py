"""Property tests over generated and mutated programs: `check` never crashes, `fix` is sound.

Programs come from `hypothesmith` (any valid Python) and from the fixtures, with grad-disabled
regions, transforms and tracers inserted at random lines; fixtures also come with lines and bytes
mutated at random; notebooks come with IPython syntax and lines spelling our own markers. For
every program: `check` returns findings (NG000 for what does not parse) and never raises; `fix`
writes only code that parses, keeps every comment, changes nothing the second time, and leaves
nothing `check` could still fix. `scripts/fuzz.py` runs the same properties for longer.
The differential gradient properties live in test_fix_torch.py (`test_generated_regions`) and
test_fix_torch_containers.py (`test_generated_container_regions`: region values that are
dataclasses, `ModelOutput`-like dicts, namedtuples and other subclasses) and
test_fix_safe_differential.py (the safe tier, over light, identity-returning and tuple-returning
operations, under every transform and tracer).
"""
from __future__ import annotations

import ast
import io
import json
import re
import tokenize
import warnings
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lint_nograd.fix.rewrite import FixSettings, check_with_fixes, fix_source
from lint_nograd.report.registry import RULES
from lint_nograd.run.notebook import Notebook

hypothesmith = pytest.importorskip("hypothesmith")

ALL = frozenset(RULES)
UNSAFE = FixSettings(unsafe_fixes=True)  # every rewrite the fix can make


def check_source(data: bytes, display_path: str, codes: frozenset[str]):
    return check_with_fixes(data, display_path, codes, UNSAFE)
FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_SOURCES = sorted(path.read_bytes() for pattern in ("fix/*.in.py", "checker/*.py")
                         for path in FIXTURES.glob(pattern))
# a comment naming every word of the gate, so that every program reaches the parser
GATE_WORDS = "# no_grad jacfwd func backward autograd trace make_fx"
SNIPPETS = [  # inserted at the indentation of the line they go before
    ["with torch.no_grad():", "    s = x.mean()"],
    ["with torch.set_grad_enabled(False):", "    a, b = x.sin(), x.cos()"],
    ["with contextlib.nullcontext(), torch.inference_mode():", "    return x.exp()"],
    ["@torch.no_grad()", "def helper(x):", "    return x * 2"],
    ["def f(x):", "    with torch.no_grad():", "        s = x * x  # keep me", "    return s * x"],
    ["def g(x):", "    with torch.no_grad():  # a region", "        a, b = x.mean(), x", "    return a * b",
     "jacfwd(g)"],
    ["jacfwd(f)"], ["torch.func.jvp(helper, (x,), (x,))"], ["torch.fx.symbolic_trace(f)"],
    ["grad(f)(x)"], ["loss.backward()"], ["vmap(jacrev(helper))(x)"], ["make_fx(f)(x)"],
    ["import torch", "from torch.func import jacfwd, jacrev, grad, vmap"],
    ["with torch.no_grad():", "    with torch.enable_grad():", "        s = x + 1"],
    ["with torch.no_grad():", "    target = self.teacher(x)  # a kept region"],
    ["with torch.inference_mode():", "    with torch.no_grad():", "        f = model(x) @ w"],
    ["buf.add_(1)  # noqa: NG004"], ["pass"], ["    "], ["# a comment"],
]
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")  # hypothesmith compiles `1()` and the like
SETTINGS = settings(max_examples=300, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


# -- the programs -------------------------------------------------------------------------------

@st.composite
def with_insertions(draw, source: str) -> str:
    lines = source.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(lines)))
        following = lines[at] if at < len(lines) else ""
        indent = following[:len(following) - len(following.lstrip(" \t"))]
        newline = next((line[len(line.rstrip("\r\n")):] for line in lines if line.endswith(("\n", "\r"))), "\n")
        lines[at:at] = [indent + line + newline for line in draw(st.sampled_from(SNIPPETS))]
    return "".join(lines)


def programs() -> st.SearchStrategy[bytes]:
    """Valid or nearly valid Python with regions and transforms in random places."""
    fixtures = st.sampled_from([data.decode("utf-8", "surrogateescape") for data in FIXTURE_SOURCES])
    texts = st.one_of(hypothesmith.from_grammar(), fixtures).flatmap(with_insertions)
    return texts.map(lambda text: f"{text}\n{GATE_WORDS}\n".encode("utf-8", "surrogateescape"))


@st.composite
def mutated(draw) -> bytes:
    """A fixture with lines deleted, repeated, swapped or re-indented, odd bytes inserted, or its
    line endings or BOM changed."""
    lines = draw(st.sampled_from(FIXTURE_SOURCES)).splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["delete", "repeat", "swap", "indent", "dedent", "byte", "endings", "ending",
                                     "header"]))
        if kind == "delete":
            del lines[at]
        elif kind == "repeat":
            lines[at:at] = lines[at:at + draw(st.integers(1, 6))]
        elif kind == "swap":
            lines[at:at + 2] = reversed(lines[at:at + 2])
        elif kind == "indent":
            lines[at] = b"    " + lines[at]
        elif kind == "dedent":
            lines[at] = lines[at].removeprefix(b"    ")
        elif kind == "byte":
            column = draw(st.integers(0, len(lines[at])))
            odd = draw(st.sampled_from([b"\x00", b"\xff", b"\xc3", b"\xef\xbb\xbf", b"\r", b"\t", b"\x0c", b"(", b"'",
                                        b"\\"]))
            lines[at] = lines[at][:column] + odd + lines[at][column:]
        elif kind in ("endings", "ending"):  # of every line, or of one
            newline = draw(st.sampled_from([b"\r\n", b"\r", b"\n"]))
            lines = [line.rstrip(b"\r\n") + newline
                     if line.endswith((b"\n", b"\r")) and (kind == "endings" or index == at) else line
                     for index, line in enumerate(lines)]
        else:
            lines.insert(0, draw(st.sampled_from([b"\xef\xbb\xbf", b"# -*- coding: latin-1 -*-\n", b"\n"])))
        if not lines:
            lines = [b"\n"]
    return b"".join(lines)


# -- the properties -----------------------------------------------------------------------------

def parses(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # `1()` and the like: valid, with a SyntaxWarning
            compile(data, "<fuzz>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError, LookupError, UnicodeError):
        return False


def comments(data: bytes) -> Counter:
    """The comments, but the lint-nograd codes of `# noqa: ...` directives, which NG100's fix may take out."""
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # tokenize splits lines at \n only
    try:
        return Counter(_NOQA.sub("", token.string).rstrip() for token in tokenize.tokenize(io.BytesIO(data).readline)
                       if token.type == tokenize.COMMENT and _NOQA.sub("", token.string).strip())
    except (SyntaxError, tokenize.TokenError, LookupError, UnicodeError):
        return Counter()


_NOQA = re.compile(r"#\s*noqa\s*:\s*NG\d+(?:[\s,]+NG\d+)*", re.IGNORECASE)


def check_survives(data: bytes) -> None:
    """`check` reports, never raises; findings point at lines the file has."""
    diagnostics = check_source(data, "fuzz.py", ALL)
    lines = len(data.splitlines()) + 1
    for diagnostic in diagnostics:
        assert 1 <= diagnostic.row <= diagnostic.end_row <= lines, diagnostic


def fix_is_sound(data: bytes) -> None:
    """`fix` output parses, keeps the comments, is a fixed point, and leaves nothing fixable."""
    result = fix_source(data, ALL, "fuzz.py", UNSAFE)
    new = result.text.encode(result.encoding)
    if not result.changed:
        assert new == data, "an unchanged file must come back byte for byte"
    else:
        assert parses(data) and parses(new), "fix changed a file that does not parse, or broke one"
        assert not comments(data) - comments(new), "fix lost a comment"
        again = fix_source(new, ALL, "fuzz.py", UNSAFE)
        assert not again.changed, "a second fix changed the file again"
    left = [d for d in check_source(new, "fuzz.py", ALL) if d.fix is not None]
    assert not left, f"fix left fixable findings: {left}"


def notebook_is_sound(data: bytes) -> None:
    """A notebook read and written back unchanged gives its very bytes; `check` and `fix` work
    on it as on a file, and a fixed notebook is still JSON."""
    notebook = Notebook.read(data)
    assert notebook.with_source(notebook.source) == data
    check_source(data, "fuzz.ipynb", ALL)
    result = fix_source(data, ALL, "fuzz.ipynb", UNSAFE)
    if result.changed:
        new = result.text.encode(result.encoding)
        json.loads(new)
        assert not fix_source(new, ALL, "fuzz.ipynb", UNSAFE).changed, "a second fix changed the notebook again"


CELL_LINES = ["x = 1", "", "  ", "%time x", "  !ls", "files = !ls", "%%time", "%%bash", "obj?",
              "# lint-nograd: cell 1", "# lint-nograd: cell 9", "__lint_nograd_ipython_0__()",
              "def f(x):", "    with torch.no_grad():", "        s = x.mean()", "    return x - s",
              "jacfwd(f)", "import torch", "from torch.func import jacfwd"]


@st.composite
def notebooks(draw) -> bytes:
    cells = []
    for _ in range(draw(st.integers(1, 4))):
        lines = draw(st.lists(st.sampled_from(CELL_LINES), max_size=8))
        source = "\n".join(lines)
        kind = draw(st.sampled_from(["code", "code", "markdown"]))
        cells.append({"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True)}
                     | ({"execution_count": None, "outputs": []} if kind == "code" else {}))
    document = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    text = json.dumps(document, indent=draw(st.sampled_from([1, 2])), ensure_ascii=False) + "\n"
    return draw(st.sampled_from([b"", b"\xef\xbb\xbf"])) + text.encode()


# -- the tests ----------------------------------------------------------------------------------

@SETTINGS
@given(programs())
def test_generated_programs(data: bytes):
    check_survives(data)
    fix_is_sound(data)


@SETTINGS
@given(mutated())
def test_mutated_fixtures(data: bytes):
    check_survives(data)
    fix_is_sound(data)


@SETTINGS
@given(notebooks())
def test_notebooks(data: bytes):
    notebook_is_sound(data)


def test_an_import_line_ending_in_a_backslash_gets_the_new_import_after_its_continuation():
    """Found by the fuzzer: the import was added on the line the backslash joins to the last one."""
    fix_is_sound(b"import torch\nfrom torch.func import jacfwd\\\n\n\ndef f(x):\n    with torch.no_grad():\n"
                 b"        a, b = x.mean(), x.std()\n    return (x - a) / b\n\n\njacfwd(f)\n")
