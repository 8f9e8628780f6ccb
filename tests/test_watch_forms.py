"""The watcher sees the regions `check` names that no `with` opens: a `torch.set_grad_enabled(False)`
statement (it ends where grad mode is set back, or where its function returns), a direct call of
`torch._C._set_grad_enabled` as library code makes (under forward mode and tracers alike), and a region of a traced module that calls a
submodule. Each finding comes with the values that show it is real."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from test_watch import found, rows, watch, write

PROGRAM = """\
    import torch, torch.func as tf
    from torch.fx.experimental.proxy_tensor import make_fx


    def statement(x):
        torch.set_grad_enabled(False)  # statement
        s = x * x
        torch.set_grad_enabled(True)
        return s * x


    def to_the_return(x):
        torch.set_grad_enabled(False)  # statement to the return
        return x * x


    def switch_off():
        torch.set_grad_enabled(False)  # ends at its return, with nothing computed


    def after_the_return(x):
        switch_off()
        y = x * x
        torch.set_grad_enabled(True)
        return y * x


    def library(x):
        enabled = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)  # library region
        s = x * x
        torch._C._set_grad_enabled(enabled)
        return s * x


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.out = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)

        def forward(self, x):
            with torch.no_grad():  # submodule region
                t = self.lin(x)
            return (self.out(x) * t).sum()


    x, one = torch.tensor(1.5), torch.tensor(1.0)
    print("statement", tf.jvp(statement, (x,), (one,))[1].item(), tf.grad(statement)(x).item())  # jvp statement
    print("hessian", tf.hessian(statement)(x).item())  # hessian statement
    print("to the return", tf.jvp(to_the_return, (x,), (one,))[1].item())  # jvp to the return
    tf.jvp(after_the_return, (x,), (one,))
    print("library", tf.jvp(library, (x,), (one,))[1].item(), tf.grad(library)(x).item())  # jvp library
    print("library hessian", tf.hessian(library)(x).item())  # hessian library
    traced = torch.jit.trace(statement, x)  # trace statement
    make_fx(to_the_return)(x)  # make_fx to the return
    torch.jit.trace(after_the_return, x)
    torch.fx.symbolic_trace(statement)  # symbolic_trace statement
    traced_library = torch.jit.trace(library, x)  # trace library
    graph_library = make_fx(library)(x)  # make_fx library
    xr = x.clone().requires_grad_()
    print("traced library", *(torch.autograd.grad(f(xr), xr)[0].item() for f in (traced_library, graph_library, library)))
    torch.fx.symbolic_trace(library)  # symbolic_trace library
    print("grad mode", torch.is_grad_enabled())
    torch.manual_seed(0)
    net, data = Net(), torch.randn(2, 3)
    scripted = torch.jit.trace(net, data)  # trace submodule
    net(data).backward()
    eager = net.lin.weight.grad
    net.zero_grad()
    scripted(data).backward()
    print("submodule", eager, net.lin.weight.grad is not None)
"""


def test_statements_direct_calls_and_submodule_regions_under_forward_mode_and_tracers(tmp_path):
    script = write(tmp_path, "program.py", PROGRAM)
    report, done = watch(script)
    assert done.returncode == 0, done.stderr
    at = rows(script)
    expected = {
        ("NG004", "program.py", at["statement"], at["jvp statement"]),
        ("NG004", "program.py", at["statement"], at["hessian statement"]),
        ("NG005", "program.py", at["statement"], at["trace statement"]),
        ("NG005", "program.py", at["statement"], at["symbolic_trace statement"]),
        ("NG004", "program.py", at["statement to the return"], at["jvp to the return"]),
        ("NG005", "program.py", at["statement to the return"], at["make_fx to the return"]),
        ("NG004", "program.py", at["library region"], at["jvp library"]),
        ("NG004", "program.py", at["library region"], at["hessian library"]),
        ("NG005", "program.py", at["library region"], at["trace library"]),
        ("NG005", "program.py", at["library region"], at["make_fx library"]),
        ("NG005", "program.py", at["library region"], at["symbolic_trace library"]),
        ("NG005", "program.py", at["submodule region"], at["trace submodule"]),
    }
    # a statement's region ends where its function returns: `switch_off` computed nothing in it
    assert found(report) == expected
    lines = done.stdout.splitlines()
    # forward mode differentiates through the regions reverse mode respects: 6.75 against 2.25, and
    # hessian 3.0 where grad(grad) gives 0; grad mode is on again after each
    assert lines[:2] == ["statement 6.75 2.25", "hessian 3.0"] and "library 6.75 2.25" in lines
    assert "grad mode True" in lines
    # the traces differentiate through the direct call's region: 6.75 where eager gives 2.25
    assert "traced library 6.75 6.75 2.25" in lines
    # the traced module differentiates the submodule that eager mode does not
    assert "submodule None True" in done.stdout
    [library] = [d for d in report if d["location"]["row"] == at["library region"]
                 and d["related"][0]["location"]["row"] == at["jvp library"]]
    assert library["message"].startswith("`jvp(...)` ignores this `_set_grad_enabled(False)` region")
    assert (library["location"]["column"], library["end_location"]["column"]) == (5, 38)


TRACED = """\
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx


    class Scaled(torch.nn.Module):
        def forward(self, x):
            with torch.no_grad():  # scale
                s = x.abs().sum() + 1
            return x / s


    class Metric(torch.nn.Module):
        def forward(self, x):
            with torch.no_grad():  # metric
                self.last = x.abs().max()
            return x.sin()


    class Masked(torch.nn.Module):
        def forward(self, x):
            with torch.no_grad():  # mask
                mask = (x.abs() > 0.5).to(x.dtype)
            return x * mask + x.sin()


    class Tempered(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("temperature", torch.tensor(2.0))

        def forward(self, x):
            with torch.no_grad():  # buffer
                inverse = 1.0 / self.temperature
            return x.sin() * inverse


    class Running(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.zeros(()))

        def forward(self, x):
            with torch.no_grad():  # in place
                self.mean.mul_(0.5).add_(x.sum())
            return x.sin() * self.mean


    def grads(module, x):
        x = x.clone().requires_grad_()
        module(x).sum().backward()
        return x.grad


    x = torch.tensor([0.3, -0.9, 1.2])
    for make in (Scaled, Metric, Masked, Tempered, Running):
        traced = torch.fx.symbolic_trace(make())  # symbolic_trace
        same = torch.allclose(grads(make(), x), grads(traced, x))
        print(make.__name__, "same" if same else "differ")
    fx = make_fx(lambda v: Masked()(v) + Scaled()(v))(x)  # make_fx
"""


def test_a_traced_region_counts_where_a_gradient_leaves_it(tmp_path):
    """fx graphs are read once the trace is done: a region whose nodes nothing after it uses, or
    whose results only integers and booleans feed, or that reads only a buffer, drops nothing a
    gradient needs; one that changes a buffer in place does."""
    script = write(tmp_path, "program.py", TRACED)
    report, done = watch(script)
    assert done.returncode == 0, done.stderr
    at = rows(script)
    assert found(report) == {("NG005", "program.py", at[name], at[tracer])
                             for name, tracer in (("scale", "symbolic_trace"), ("in place", "symbolic_trace"),
                                                  ("scale", "make_fx"))}
    # the values: the traced gradients differ from eager ones exactly where a finding is
    assert done.stdout.split() == ["Scaled", "differ", "Metric", "same", "Masked", "same", "Tempered", "same",
                                   "Running", "differ"]
