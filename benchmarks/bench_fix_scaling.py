"""How `fix` and `check` time grows with the number of fixable regions in one file.

    python benchmarks/bench_fix_scaling.py [--sizes 1000,10000,100000]

For each size, one file holds that many functions, each with a `no_grad` region that `jacfwd`
reaches (about 94 bytes a region). `fix --no-cache` rewrites them all; `check --no-cache
--output-format json` computes the same rewrites to show them. Prints the wall time of each
whole process, the time per region, and that time over the first size's: linear work keeps the
ratio near 1.0x (before planning and writing fixes was made linear, 4,000 regions took 50 s and
20,000 did not finish in 10 minutes). The 100,000-region row takes several minutes.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _measure import run


def source(regions: int) -> str:
    lines = ["import torch", "from torch.func import jacfwd", ""]
    for index in range(regions):
        lines += [f"def f{index}(x):", "    with torch.no_grad():", "        s = x.mean()", "    return x - s",
                  f"jacfwd(f{index})", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000", help="numbers of regions, comma-separated")
    options = parser.parse_args()
    sizes = [int(size) for size in options.sizes.split(",")]
    lint_nograd = [sys.executable, "-m", "lint_nograd"]
    print(f"{'regions':>8} {'file':>10} {'fix':>9} {'per region':>11} {'ratio':>7}"
          f" {'check':>9} {'per region':>11} {'ratio':>7}")
    first: tuple[float, float] | None = None
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            original = source(size)
            target = Path(folder) / f"regions_{size}.py"
            target.write_text(original)
            checked, _, report = run([*lint_nograd, "check", "--no-cache", "--isolated", "--output-format", "json",
                                      str(target)], sample_memory=False)
            assert report.count('"applicability": "safe"') == size, "check did not offer every fix"
            fixed, _, _ = run([*lint_nograd, "fix", "--no-cache", "--isolated", str(target)], sample_memory=False)
            assert target.read_text().count("stop_gradient(x.mean())") == size, "fix did not rewrite every region"
            per_fix, per_check = fixed / size, checked / size
            first = first or (per_fix, per_check)
            print(f"{size:>8,} {len(original) / 1024:>7.0f} KiB {fixed:>7.2f} s {per_fix * 1e3:>8.3f} ms"
                  f" {per_fix / first[0]:>6.2f}x {checked:>7.2f} s {per_check * 1e3:>8.3f} ms"
                  f" {per_check / first[1]:>6.2f}x", flush=True)


if __name__ == "__main__":
    main()
