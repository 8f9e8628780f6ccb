"""The differential fix property of test_fix_torch.py, on regions whose values are containers.

A model often returns a dataclass, an `OrderedDict` subclass (Hugging Face's `ModelOutput`), a
namedtuple or another subclass. `fix --unsafe-fixes` cuts such values (`out =
stop_gradient(model(x))`, inside the kept region): the original and the fixed function must agree in reverse mode,
and the fixed one must agree with it in forward mode and under `symbolic_trace` too, which holds
only if `stop_gradient` cuts every tensor inside such values. `scripts/fuzz.py` runs it longer.
"""
from __future__ import annotations

import ast
import textwrap

import pytest

torch = pytest.importorskip("torch")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from lint_nograd.fix.rewrite import FixSettings, fix_source  # noqa: E402
from test_fix_torch import (  # noqa: E402
    REGION_FORMS,
    assert_forward_mode_and_tracing_agree,
    assert_same_in_reverse_mode,
    expressions,
    load,
)

# a call of the user's code (a model, a container's constructor) makes the fix unsafe, kept region and all
UNSAFE = FixSettings(unsafe_fixes=True)

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")

CONTAINER_TYPES = textwrap.dedent('''\
    import collections
    import dataclasses

    import torch
    from torch import no_grad, set_grad_enabled
    from torch.func import jacfwd


    @dataclasses.dataclass
    class Output:
        a: torch.Tensor
        b: torch.Tensor
        name: str = "out"


    @dataclasses.dataclass(frozen=True)
    class Frozen:
        a: torch.Tensor
        b: torch.Tensor


    @dataclasses.dataclass
    class ModelOutput(collections.OrderedDict):
        a: torch.Tensor = None
        b: torch.Tensor = None

        def __post_init__(self):
            self["a"], self["b"] = self.a, self.b


    class Mapping(collections.OrderedDict):
        pass


    class Dict(dict):
        pass


    class Pair(tuple):
        pass


    class List(list):
        pass


    Named = collections.namedtuple("Named", "a b")
''')

# kind -> (how a region builds the value from two expressions, how the code after it reads them)
CONTAINERS = {
    "dataclass": ("Output({}, {})", "{v}.a", "{v}.b"),
    "frozen dataclass": ("Frozen(a={}, b={})", "{v}.a", "{v}.b"),
    "ModelOutput": ("ModelOutput(a={}, b={})", "{v}['a']", "{v}.b"),
    "OrderedDict subclass": ("Mapping(a={}, b={})", "{v}['a']", "{v}['b']"),
    "dict subclass": ("Dict(a={}, b={})", "{v}['a']", "{v}['b']"),
    "tuple subclass": ("Pair(({}, {}))", "{v}[0]", "{v}[1]"),
    "namedtuple": ("Named({}, {})", "{v}.a", "{v}[1]"),
    "list subclass": ("List([{}, {}])", "{v}[0]", "{v}[1]"),
    "nested": ("Output({{'a': Pair(({}, 1))}}, Named({}, None))", "{v}.a['a'][0]", "{v}.b.a"),
}


def module_source(kind: str, a: str, b: str, form: str, by_model: bool, result: str) -> str:
    """A module whose `f` computes a container of `a` and `b` in a region, directly or by a model;
    `result` combines what is read back from it as `{a}` and `{b}`."""
    build, read_a, read_b = CONTAINERS[kind]
    value = build.format(a, b)
    lines = [CONTAINER_TYPES, ""]
    if by_model:
        lines += ["def model(x):", f"    return {value}", "", ""]
        value = "model(x)"
    result = result.format(a=read_a.format(v="out"), b=read_b.format(v="out"))
    lines += ["def f(x):", f"    with {form}:", f"        out = {value}", f"    return {result}"]
    return "\n".join([*lines, "", "", "jacfwd(f)", ""])


RESULTS = ["x * {a} + {b} * x", "({a} - x) * {b}", "{a} * x * x + {b}"]


# a new value: fix assumes a call computes new values, and packing `x` itself would break that
COMPUTED = expressions(["x"]).filter(lambda expression: expression != "x")


@st.composite
def container_functions(draw) -> str:
    return module_source(
        draw(st.sampled_from(sorted(CONTAINERS))),
        draw(COMPUTED),
        draw(COMPUTED),
        draw(st.sampled_from(REGION_FORMS)),
        draw(st.booleans()),
        draw(st.sampled_from(RESULTS)),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(container_functions())
def test_generated_container_regions(source: str):
    fixed = fix_source(source.encode(), settings=UNSAFE).text
    ast.parse(fixed)
    assert "stop_gradient(" in fixed, fixed
    old, new = load(source)["f"], load(fixed)["f"]
    assert_same_in_reverse_mode(old, new)
    assert_forward_mode_and_tracing_agree(old, new)


@pytest.mark.parametrize("kind", CONTAINERS)
def test_the_property_fails_for_a_container_left_uncut(kind, monkeypatch):
    """Guards the test: a stop_gradient that cut only bare tensors fails it on every kind."""
    import lint_nograd

    source = module_source(kind, "x.sin()", "(x * x)", "torch.no_grad()", True, RESULTS[0])
    fixed = fix_source(source.encode(), settings=UNSAFE).text
    assert_same_in_reverse_mode(load(source)["f"], load(fixed)["f"])
    assert_forward_mode_and_tracing_agree(load(source)["f"], load(fixed)["f"])

    def cuts_bare_tensors_only(value):
        return value.detach() if isinstance(value, torch.Tensor) else value

    monkeypatch.setattr(lint_nograd, "stop_gradient", cuts_bare_tensors_only)
    with pytest.raises(AssertionError):  # the region is kept: forward mode and tracing tell
        assert_forward_mode_and_tracing_agree(load(source)["f"], load(fixed)["f"])
