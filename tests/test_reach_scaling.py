"""Reach is linear in the call graph: 10,000 `jacfwd` calls on a 2,000-function call cycle, and
the same chain across 20 modules, are checked in bounded time.

Reach once walked the graph again from every call: this cycle did not finish in 5 minutes. It is
a worklist over functions now, each visited once per mode; this takes seconds. The limit is a
subprocess timeout, not a timing assertion; `benchmarks/bench_reach_scaling.py` prints the time
per function at 1k, 10k and 100k functions.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from deadline import deadline
from lint_nograd.analysis.model import SemanticModel
from lint_nograd.project.summary import summarise

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from bench_reach_scaling import project  # noqa: E402  (the benchmark's projects, smaller)

FUNCTIONS = 2_000


@pytest.mark.parametrize("shape", ["cycle", "chain", "modules"])
def test_reach_over_a_large_call_graph_ends_and_finds_every_region(tmp_path, shape):
    project(tmp_path, FUNCTIONS, shape)
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    done = subprocess.run([sys.executable, "-m", "lint_nograd", "check", "--no-cache", "--output-format",
                           "concise", "."], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    found = [line for line in done.stdout.splitlines() if ": NG004 " in line]
    assert len(found) == FUNCTIONS // 10  # every region: forward mode reaches each through the calls


def test_a_container_refilled_from_itself_is_summarised_in_bounded_time():
    """`state_dict[k] = state_dict.pop(j)`, line after line (checkpoint converters): each element
    assigned once made what the next line reads twice as large, and 25 lines did not finish in
    30 s. What a container gets from its own elements adds nothing now."""
    lines = ["import torch", "state_dict = torch.load('old.pt')", "new = {}"]
    for i in range(40):
        lines += [f"new['k{i}'] = state_dict.pop('j{i}')", f"state_dict['k{i}'] = state_dict.pop('j{i}')"]
    lines += ["def f(x):", "    return new['k0'](x)"]
    text = "\n".join(lines) + "\n"
    with deadline():
        summary = summarise(SemanticModel(ast.parse(text), text), text.splitlines(), passes=True)
    assert "f" in summary.functions


@pytest.mark.parametrize("command", ["check", "graph"])
@pytest.mark.parametrize("classes", [5, 300])
def test_a_long_chain_of_stored_attributes_ends_without_overflowing_the_stack(tmp_path, command, classes):
    """`self.m = C1().m`, `C1`'s `self.m = C2().m`, ... : each stored attribute is looked up from a
    fresh start, so only the number of lookups open one inside another bounds the chain; 300
    classes once overflowed Python's stack ("internal error: RecursionError"). A short chain is
    followed to the model at its end."""
    lines = ["import torch", "from torch.func import jacfwd", "",
             "class Net(torch.nn.Module):", "    def forward(self, x):", "        with torch.no_grad():",
             "            s = x.sum()", "        return x * s", ""]
    for i in range(classes):
        made = f"C{i + 1}().m" if i < classes - 1 else "Net()"
        lines += [f"class C{i}:", "    def __init__(self):", f"        self.m = {made}", ""]
    lines += ["def run(x):", "    return jacfwd(C0().m)(x)"]
    (tmp_path / "deep.py").write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, "-m", "lint_nograd", command, "--isolated", "--no-cache", "."],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.stderr == "" and done.returncode in (0, 1), done.stderr
    if command == "check":
        assert (": NG004 " in done.stdout) == (classes == 5), done.stdout
    else:
        assert "deep.C0.__init__ -> deep.C1.__init__" in done.stdout
