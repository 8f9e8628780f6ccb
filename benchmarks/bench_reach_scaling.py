"""How `check` time grows with the size of the call graph that transforms reach.

    python benchmarks/bench_reach_scaling.py [--sizes 1000,10000,100000]

For each size N, three projects: one file of N functions calling each other in a cycle, with 5N
`jacfwd` calls spread over them; the same as a chain; and the chain split over modules of 100
functions, each importing the next. Every tenth function holds a `no_grad` region, which forward
mode reaches through the calls. Prints the wall time of `check --no-cache` (whole processes, one
run each), the time per function, and that time over the first size's: reach is a worklist over
functions, each visited once per mode, so the ratio stays near 1.0x (before, 10,000 calls on a
2,000-function cycle did not finish in 5 minutes). The 100,000 rows take minutes.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _measure import run

MODULE_SIZE = 100


def functions(first: int, last: int, total: int, cycle: bool, next_module: str | None = None) -> list[str]:
    lines = []
    for index in range(first, last):
        lines.append(f"def f{index}(x):")
        if index % 10 == 0:
            lines += ["    with torch.no_grad():", "        s = x.mean()", "    x = x - s"]
        if index + 1 < last:
            lines.append(f"    return f{index + 1}(x)")
        elif next_module:
            lines.append(f"    return {next_module}.f{index + 1}(x)")
        else:
            lines.append("    return f0(x)" if cycle else "    return x")
        lines.append("")
    return lines


def project(folder: Path, size: int, shape: str) -> None:
    head = ["import torch", "from torch.func import jacfwd", ""]
    calls = [f"jacfwd(f{index % size})" for index in range(5 * size)]
    if shape != "modules":
        (folder / "graph.py").write_text("\n".join(head + functions(0, size, size, shape == "cycle") + calls) + "\n")
        return
    package = folder / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    count = -(-size // MODULE_SIZE)
    for number in range(count):
        first, last = number * MODULE_SIZE, min(size, (number + 1) * MODULE_SIZE)
        following = f"m{number + 1}" if number + 1 < count else None
        imports = [f"from pkg import {following}", ""] if following else []
        own_calls = calls[first * 5:last * 5] if number == 0 else []
        text = head + imports + functions(first, last, size, False, following) + own_calls
        (package / f"m{number}.py").write_text("\n".join(text) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000", help="numbers of functions, comma-separated")
    options = parser.parse_args()
    sizes = [int(size) for size in options.sizes.split(",")]
    check = [sys.executable, "-m", "lint_nograd", "check", "--no-cache", "--isolated", "--exit-zero",
             "--output-format", "concise"]
    print(f"{'shape':>8} {'functions':>10} {'check':>9} {'per function':>13} {'ratio':>7} {'findings':>9}")
    for shape in ("cycle", "chain", "modules"):
        first = None
        for size in sizes:
            with tempfile.TemporaryDirectory() as folder:
                project(Path(folder), size, shape)
                (Path(folder) / "pyproject.toml").write_text("[tool.lint-nograd]\n")
                wall, _, report = run([*check, "."], cwd=Path(folder), sample_memory=False)
            findings = report.count(": NG004 ")
            per = wall / size
            first = first or per
            print(f"{shape:>8} {size:>10,} {wall:>7.2f} s {per * 1e3:>10.3f} ms {per / first:>6.2f}x {findings:>9,}",
                  flush=True)


if __name__ == "__main__":
    main()
