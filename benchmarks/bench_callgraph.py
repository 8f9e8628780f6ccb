"""`lint-nograd graph` against PyCG's micro-benchmark: the call graphs written by hand for its programs.

    python benchmarks/bench_callgraph.py PATH-TO-PYCG [--show CATEGORY/CASE ...] [--misses]

PATH-TO-PYCG is a checkout of github.com/vitsalis/PyCG; its `micro-benchmark/snippets/<category>/<case>/`
hold a program (`main.py` and the modules it imports) and its `callgraph.json`. Only edges between
functions defined in the program count (the functions either graph names: calls into builtins and
libraries are dropped). Printed per category and in total: recall and precision over all edges, and
the programs whose graph is exactly the one written by hand.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lint_nograd import cli  # noqa: E402


def graph_of(program: Path, cache: str) -> dict[str, list[str]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.chdir(program):
        code = cli.main(["graph", "--isolated", "--jobs", "1", "--cache-dir", cache, "--output-format", "pycg", "."])
    if code != 0:
        raise SystemExit(f"lint-nograd graph failed on {program} (exit {code})")
    graph = json.loads(out.getvalue())
    # a program folder with `__init__.py` is a package, named from the folder above it, as Python
    # imports it; PyCG names what is inside it from the folder itself (its `--package`)
    if not (program / "__init__.py").exists():
        return graph
    prefix = f"{program.name}."

    def name(found: str) -> str:
        return found[len(prefix):] if found.startswith(prefix) else found

    return {name(caller): [name(callee) for callee in callees] for caller, callees in graph.items()
            if caller != program.name}


def defined_in(program: Path) -> set[str]:
    """The names, as PyCG writes them, of the modules, functions and lambdas the program defines."""
    names: set[str] = set()
    for path in program.rglob("*.py"):
        parts = list(path.relative_to(program).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names.add(module)
        _define(ast.parse(path.read_text()), module, names)
    return names


def _define(node: ast.AST, scope: str, names: set[str]) -> None:
    lambdas = 0
    stack = list(ast.iter_child_nodes(node))[::-1]
    while stack:  # in the order written, as PyCG numbers lambdas
        child = stack.pop()
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(f"{scope}.{child.name}")
            _define(child, f"{scope}.{child.name}", names)
        elif isinstance(child, ast.Lambda):
            lambdas += 1
            names.add(f"{scope}.<lambda{lambdas}>")
            _define(child, f"{scope}.<lambda{lambdas}>", names)
        else:
            stack += list(ast.iter_child_nodes(child))[::-1]


def edges(graph: dict[str, list[str]], defined: set[str]) -> set[tuple[str, str]]:
    return {(caller, callee) for caller, callees in graph.items() for callee in callees
            if caller in defined and callee in defined}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pycg", type=Path, help="a checkout of PyCG")
    parser.add_argument("--show", action="append", default=[], metavar="CATEGORY/CASE",
                        help="print the edges missed and the edges extra for this program")
    parser.add_argument("--misses", action="store_true", help="print the edges missed and extra of every program")
    options = parser.parse_args()
    snippets = options.pycg / "micro-benchmark" / "snippets"
    programs = sorted(path.parent for path in snippets.glob("*/*/callgraph.json"))
    if not programs:
        raise SystemExit(f"no programs under {snippets}")
    totals: dict[str, list[int]] = {}  # category -> [found and expected, found, expected, exact, programs]
    with tempfile.TemporaryDirectory() as cache:
        for program in programs:
            expected_graph = json.loads((program / "callgraph.json").read_text())
            found_graph = graph_of(program, cache)
            defined = defined_in(program)
            expected, found = edges(expected_graph, defined), edges(found_graph, defined)
            category = program.parent.name
            row = totals.setdefault(category, [0, 0, 0, 0, 0])
            for index, count in enumerate((len(expected & found), len(found), len(expected), expected == found, 1)):
                row[index] += count
            name = f"{category}/{program.name}"
            if options.misses and expected != found or name in options.show:
                print(f"{name}: missed {sorted(expected - found)} extra {sorted(found - expected)}")
    print(f"{'category':<14} {'recall':>7} {'precision':>9} {'exact':>7} {'edges':>6} {'found':>6}")
    for category, row in [*sorted(totals.items()), ("total", [sum(r[i] for r in totals.values()) for i in range(5)])]:
        both, found, expected, exact, count = row
        recall = both / expected if expected else 1.0
        precision = both / found if found else 1.0
        print(f"{category:<14} {recall:>7.2f} {precision:>9.2f} {f'{exact}/{count}':>7} {expected:>6} {found:>6}")


if __name__ == "__main__":
    os.environ.setdefault("LINT_NOGRAD_CACHE_DIR", tempfile.gettempdir())
    main()
