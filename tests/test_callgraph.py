"""`lint-nograd graph`: the call graph reach follows, named as PyCG names it, and `--explain`.

Each case is a small program (its files) and edges that must be in its graph, and look-alike
edges that must not be.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from lint_nograd import cli

CASES = {
    "direct calls and methods": (
        {"main.py": """
            class A:
                def __init__(self):
                    pass
                def run(self):
                    self.step()
                def step(self):
                    pass

            def helper():
                pass

            a = A()
            a.run()
            helper()
            """},
        {("main", "main.A.__init__"), ("main", "main.A.run"), ("main", "main.helper"),
         ("main.A.run", "main.A.step")},
        {("main", "main.A.step"), ("main.A.run", "main.helper")},
    ),
    "nested functions and lambdas numbered in their scope": (
        {"main.py": """
            def outer():
                def inner():
                    pass
                f = lambda: inner()
                f()

            g = lambda x: x
            h = lambda: outer()
            h()
            """},
        {("main", "main.<lambda2>"), ("main.<lambda2>", "main.outer"), ("main.outer", "main.outer.<lambda1>"),
         ("main.outer.<lambda1>", "main.outer.inner")},
        {("main", "main.<lambda1>"), ("main", "main.outer.inner")},
    ),
    "a parameter calls what the calls pass it": (
        {"main.py": """
            def apply(f):
                f()

            def one():
                pass

            def two():
                pass

            apply(one)
            """},
        {("main", "main.apply"), ("main.apply", "main.one")},
        {("main.apply", "main.two"), ("main", "main.one")},
    ),
    "imports across modules": (
        {"main.py": """
            from pkg import tools
            from pkg.tools import Tool as T
            import pkg.tools as t

            tools.work()
            T().use()
            t.work()
            """,
         "pkg/__init__.py": "",
         "pkg/tools.py": """
            def work():
                pass

            def idle():
                pass

            class Tool:
                def use(self):
                    work()
            """},
        {("main", "pkg.tools.work"), ("main", "pkg.tools.Tool.use"), ("pkg.tools.Tool.use", "pkg.tools.work")},
        {("main", "pkg.tools.idle")},
    ),
    "inherited methods, and a base's `__init__`": (
        {"main.py": """
            class Base:
                def __init__(self):
                    pass
                def run(self):
                    pass

            class Child(Base):
                def other(self):
                    pass

            Child().run()
            """},
        {("main", "main.Base.__init__"), ("main", "main.Base.run")},
        {("main", "main.Child.other")},
    ),
    "what a function returns": (
        {"main.py": """
            def target():
                pass

            def other():
                pass

            def make():
                return target

            def make_lambda():
                return lambda: other()

            make()()
            make_lambda()()
            """},
        {("main", "main.make"), ("main", "main.target"), ("main", "main.make_lambda.<lambda1>"),
         ("main.make_lambda.<lambda1>", "main.other")},
        {("main", "main.other"), ("main.make", "main.target")},
    ),
    "decorators: the function given back, or the wrapper": (
        {"main.py": """
            import functools
            import torch

            def register(f):
                return f

            def logged(f):
                @functools.wraps(f)
                def wrapper():
                    return f()
                return wrapper

            @register
            def plain():
                pass

            @logged
            def wrapped():
                pass

            @torch.no_grad()
            def library():
                pass

            plain()
            wrapped()
            library()
            """},
        {("main", "main.register"), ("main", "main.plain"), ("main", "main.logged"),
         ("main", "main.logged.wrapper"), ("main.logged.wrapper", "main.wrapped"), ("main", "main.library")},
        {("main.register", "main.plain"), ("main.logged", "main.wrapped")},
    ),
    "stacked decorators: each wrapper calls the next, the caller only the outermost": (
        {"main.py": """
            def outer(f):
                def inner():
                    return f()
                return inner

            def middle(f):
                def inner():
                    return f()
                return inner

            @outer
            @middle
            def work():
                pass

            def caller():
                work()
            """},
        {("main.caller", "main.outer.inner"), ("main.outer.inner", "main.middle.inner"),
         ("main.middle.inner", "main.work")},
        {("main.caller", "main.work"), ("main.caller", "main.middle.inner"), ("main.outer.inner", "main.work")},
    ),
    "a key stored right after the literal replaces it; in a branch it adds": (
        {"main.py": """
            import random

            def old():
                pass

            def new():
                pass

            def kept():
                pass

            table = {"a": old, "b": kept}
            table["a"] = new
            table["a"]()

            nested = {"a": {"b": old}}
            nested["a"]["b"] = new
            nested["a"]["b"]()

            updated = {"a": old}
            updated.update({"a": new})
            updated["a"]()

            def branch():
                maybe = {"a": kept}
                if random.random() > 0.5:
                    maybe["a"] = new
                maybe["a"]()

            def used_between():
                early = {"a": kept}
                early["a"]()
                early["a"] = new
            """},
        {("main", "main.new"), ("main.branch", "main.kept"), ("main.branch", "main.new"),
         ("main.used_between", "main.kept")},
        {("main", "main.old"), ("main", "main.kept")},
    ),
    "methods of a parameter: on what the calls pass, tensors' methods not looked up": (
        {"main.py": """
            class Encoder:
                def encode(self, x):
                    pass
                def mean(self):
                    pass

            class Net:
                def __init__(self):
                    self.encoder = Encoder()

            def loss(model, x):
                model.encode(x)
                x.mean()

            def deep(net, x):
                net.encoder.encode(x)

            def run(x):
                loss(Encoder(), x)
                deep(Net(), x)
            """},
        {("main.loss", "main.Encoder.encode"), ("main.deep", "main.Encoder.encode")},
        {("main.loss", "main.Encoder.mean")},
    ),
    "unpacked and chained assignments": (
        {"main.py": """
            def f1():
                pass

            def f2():
                pass

            def f3():
                pass

            a, (b, c) = f1, (f2, f3)
            first, *rest = f1, f2, f3
            d = e = f2
            b()
            rest[1]()
            e()
            """},
        {("main", "main.f2"), ("main", "main.f3")},
        {("main", "main.f1")},
    ),
    "elements by their index or key": (
        {"main.py": """
            def f1():
                pass

            def f2():
                pass

            def f3():
                pass

            table = {"a": f1, 1: f2}
            table["b"] = f3
            nested = {"x": {}}
            nested["x"]["y"] = f1
            row = [f1, f2, f3]
            table[1]()
            table["b"]()
            row[1:][1]()
            nested["x"]["y"]()
            """},
        {("main", "main.f2"), ("main", "main.f3"), ("main", "main.f1")},
        set(),
    ),
    "getattr with a name written out, __new__ and __call__": (
        {"main.py": """
            class Made:
                def __new__(cls):
                    return super().__new__(cls)
                def __call__(self):
                    self.step()
                def step(self):
                    pass
                def other(self):
                    pass

            made = Made()
            made()
            getattr(made, "step")()
            """},
        {("main", "main.Made.__new__"), ("main", "main.Made.__call__"), ("main.Made.__call__", "main.Made.step"),
         ("main", "main.Made.step")},
        {("main", "main.Made.other")},
    ),
    "look-alikes: a key or index that holds nothing callable": (
        {"main.py": """
            def f1():
                pass

            def f2():
                pass

            table = {"a": f1, "1": f2}
            row = [f1, f2]
            table["a"]()
            row[0]()
            row[:1][0]()
            """},
        {("main", "main.f1")},
        {("main", "main.f2")},
    ),
    "MRO, super() and attributes a subclass sets": (
        {"main.py": """
            class A:
                def hello(self):
                    pass
                def run(self):
                    self.action()

            class B(A):
                def __init__(self):
                    self.action = self.go
                def go(self):
                    pass

            class C(A):
                def hello(self):
                    super().hello()

            class D(B, C):
                pass

            D().hello()
            B().run()
            """},
        {("main", "main.C.hello"), ("main.C.hello", "main.A.hello"), ("main", "main.B.__init__"),
         ("main.A.run", "main.B.go")},
        {("main", "main.A.hello")},
    ),
    "iteration, generators and raise": (
        {"main.py": """
            class Counter:
                def __iter__(self):
                    return self
                def __next__(self):
                    raise Stop

            class Stop(Exception):
                def __init__(self):
                    pass

            def step():
                pass

            def steps():
                yield step

            for i in Counter():
                pass
            for s in steps():
                s()
            """},
        {("main", "main.Counter.__iter__"), ("main", "main.Counter.__next__"), ("main.Counter.__next__", "main.Stop.__init__"),
         ("main", "main.steps"), ("main", "main.step")},
        {("main.steps", "main.step")},
    ),
    "a parameter called, whatever calls it": (
        {"main.py": """
            def one():
                pass

            def two():
                pass

            call = lambda f: f()

            def twice(g, h):
                g(h)

            call(one)
            twice(call, two)
            """},
        {("main.<lambda1>", "main.one"), ("main.<lambda1>", "main.two"), ("main.twice", "main.<lambda1>")},
        {("main", "main.one"), ("main.twice", "main.two")},
    ),
    "builtins that call their function argument": (
        {"main.py": """
            import functools

            def square(x):
                return x

            def keep(x):
                return x

            def by(x):
                return x

            def add(a, b):
                return a

            def make(x):
                def made():
                    pass
                return made

            def shadowed(x):
                pass

            def run(xs):
                list(map(square, xs))
                list(filter(keep, xs))
                sorted(xs, key=by)
                max(xs, key=by)
                min(1, 2, key=by)
                functools.reduce(add, xs)
                for f in map(make, xs):
                    f()

            def local(xs):
                map = lambda f, ys: ys
                map(shadowed, xs)
            """},
        {("main.run", "main.square"), ("main.run", "main.keep"), ("main.run", "main.by"), ("main.run", "main.add"),
         ("main.run", "main.make"), ("main.run", "main.make.made")},
        {("main.local", "main.shadowed"), ("main", "main.square")},
    ),
    "annotations hold instances of the class they name": (
        {"main.py": """
            from typing import Optional, Type
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from other import Remote

            class Net:
                def forward(self, x):
                    pass
                def encode(self, x):
                    pass

            class Head:
                def __call__(self, x):
                    pass

            def run(model: Net, x):
                model(x)
                model.encode(x)

            def maybe(x, model: Optional["Net"] = None):
                model.encode(x)

            def either(model: "Head | None"):
                model(1)

            def made(kind: Type[Net]):
                kind.encode(None, 1)

            def remote(r: "Remote"):
                r.step()

            class Trainer:
                head: Head

                def __init__(self, encoder):
                    self.encoder: Net = encoder

                def step(self, x):
                    self.head(x)
                    self.encoder.encode(x)
            """,
         "other.py": """
            class Remote:
                def step(self):
                    pass
            """},
        {("main.run", "main.Net.forward"), ("main.run", "main.Net.encode"), ("main.maybe", "main.Net.encode"),
         ("main.either", "main.Head.__call__"), ("main.made", "main.Net.encode"), ("main.remote", "other.Remote.step"),
         ("main.Trainer.step", "main.Head.__call__"), ("main.Trainer.step", "main.Net.encode")},
        {("main.made", "main.Net.forward"), ("main.run", "main.Head.__call__")},
    ),
    "torch.no_grad()(f) runs f, and a class decorator is called with the class": (
        {"main.py": """
            import torch

            BUILDERS = []

            def stats(x):
                pass

            def other(x):
                pass

            frozen = torch.no_grad()(stats)

            def run(x):
                frozen(x)
                torch.inference_mode()(other)(x)

            def builder(cls):
                BUILDERS.append(cls)
                return cls

            @builder
            class Block:
                def forward(self, x):
                    pass

            def build(i, x):
                BUILDERS[i]()(x)
            """},
        {("main.run", "main.stats"), ("main.run", "main.other"), ("main", "main.builder")},
        {("main", "main.stats"), ("main.run", "main.builder")},
    ),
    "a registry filled by decorators in another module holds every class registered": (
        {"pkg/__init__.py": "",
         "pkg/registry.py": """
            MODELS = {}
            HEADS = {}
            STEPS = []

            def register(cls):
                MODELS[cls.__name__] = cls
                return cls

            def register_as(name):
                def store(cls):
                    MODELS.update({name: cls})
                    return cls
                return store

            def head(name):
                def store(cls):
                    HEADS.setdefault(name, cls)
                    return cls
                return store

            def step(fn):
                STEPS.append(fn)
                return fn
            """,
         "pkg/models.py": """
            from pkg.registry import head, register, register_as, step

            @register
            class Mlp:
                def __init__(self):
                    pass
                def forward(self, x):
                    pass

            @register_as("cnn")
            class Conv:
                def __init__(self):
                    pass
                def forward(self, x):
                    pass

            @head("linear")
            class Linear:
                def forward(self, x):
                    pass

            @step
            def make_rnn():
                return Rnn()

            class Rnn:
                def forward(self, x):
                    pass
            """,
         "pkg/run.py": """
            from pkg.registry import HEADS, MODELS, STEPS

            def build(name):
                return MODELS[name]()

            def run(name, x):
                build(name)(x)

            def run_get(name, x):
                MODELS.get(name)()(x)

            def run_step(i, x):
                STEPS[i]()(x)
            """},
        {("pkg.run.build", "pkg.models.Mlp.__init__"), ("pkg.run.build", "pkg.models.Conv.__init__"),
         ("pkg.run.run", "pkg.models.Mlp.forward"), ("pkg.run.run", "pkg.models.Conv.forward"),
         ("pkg.run.run_get", "pkg.models.Mlp.forward"), ("pkg.run.run_get", "pkg.models.Conv.forward"),
         ("pkg.run.run_step", "pkg.models.make_rnn"), ("pkg.run.run_step", "pkg.models.Rnn.forward")},
        {("pkg.run.run", "pkg.models.Linear.forward"), ("pkg.run.run_get", "pkg.models.Rnn.forward"),
         ("pkg.run.run_step", "pkg.models.Mlp.forward")},
    ),
    "a star import binds what __all__ names, else the public names, and re-exports them": (
        {"pkg/__init__.py": "from pkg.layers import *\n",
         "pkg/layers.py": """
            __all__ = ["smooth"]
            __all__ += ["Block"]

            def smooth(x):
                pass

            def shared(x):
                pass

            class Block:
                def __init__(self):
                    pass
            """,
         "pkg/plain.py": """
            from pkg.other import helper

            def shared(x):
                pass

            def _private(x):
                pass
            """,
         "pkg/other.py": """
            def helper(x):
                pass
            """,
         "main.py": """
            from pkg import Block
            from pkg.plain import *
            from pkg.layers import *

            def run(x):
                smooth(x)
                shared(x)
                helper(x)
                Block()
            """},
        {("main.run", "pkg.layers.smooth"), ("main.run", "pkg.plain.shared"), ("main.run", "pkg.other.helper"),
         ("main.run", "pkg.layers.Block.__init__")},
        {("main.run", "pkg.layers.shared")},
    ),
}


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def graph(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def graph(*args: str) -> tuple[int, str, str]:
        status = cli.main(["graph", "--isolated", "--jobs", "1", "--no-cache", *args])
        out, err = capsys.readouterr()
        return status, out, err
    return graph


@pytest.mark.parametrize("name", CASES)
def test_edges(name, graph, tmp_path):
    files, present, absent = CASES[name]
    write(tmp_path, files)
    status, out, err = graph("--output-format", "pycg", ".")
    assert (status, err) == (0, "")
    edges = {(caller, callee) for caller, callees in json.loads(out).items() for callee in callees}
    assert present <= edges, sorted(present - edges)
    assert not absent & edges, sorted(absent & edges)


def test_text_is_one_sorted_edge_a_line(graph, tmp_path):
    write(tmp_path, CASES["direct calls and methods"][0])
    status, out, _ = graph(".")
    assert status == 0
    lines = out.splitlines()
    assert lines == sorted(lines) and "main.A.run -> main.A.step" in lines
    assert all(" -> " in line for line in lines)


def test_pycg_lists_every_function(graph, tmp_path):
    write(tmp_path, CASES["direct calls and methods"][0])
    _, out, _ = graph("--output-format", "pycg", ".")
    assert json.loads(out)["main.helper"] == []


REACHED = {"main.py": """
    import torch
    from torch.func import jacfwd

    def scale(x):
        with torch.no_grad():
            y = x * 2
        return x + y

    def loss(x):
        return scale(x)

    def unused(x):
        with torch.no_grad():
            return x

    g = jacfwd(loss)
    """}


def test_explain_prints_the_chain(graph, tmp_path):
    write(tmp_path, REACHED)
    status, out, err = graph("--explain", "main.py:6")
    assert (status, err) == (0, "")
    assert "`jacfwd(...)` at line 17 through `loss`" in out
    assert "main -> main.loss -> main.scale" in out


def test_explain_says_why_nothing_reaches(graph, tmp_path):
    write(tmp_path, REACHED)
    status, out, _ = graph("--explain", "main.py:14")
    assert status == 0
    assert "no transform or tracer reaches it: nothing in the project calls `main.unused`" in out


@pytest.mark.parametrize("args, message", [
    (("--explain", "main.py:3"), "no grad-disabled region at main.py:3; its regions start at line 6, 14"),
    (("--explain", "missing.py:3"), "no such file: missing.py"),
    (("--explain", "main.py"), "--explain takes FILE:LINE"),
    (("missing",), "path does not exist"),
])
def test_bad_input(graph, tmp_path, args, message):
    write(tmp_path, REACHED)
    status, out, err = graph(*args)
    assert status == 2 and out == ""
    assert message in err and "Traceback" not in err
