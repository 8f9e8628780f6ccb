"""lint-nograd on a dense corpus, where every file holds transforms and no-grad regions.

    python benchmarks/bench_dense_corpus.py [--copies N] [--rounds N]

The corpus is the test fixtures (the checker's and the fix's), copied N times. Prints, measured
side by side in one run (interleaved rounds, medians, whole processes):
  2. `check --jobs 1` over bare `libcst.parse_module` of the same files (target <= 1.5x), and
     `check --jobs 1` over `check --jobs 2` (target >= 1.7x faster), with the same findings;
  4. `fix --diff` (every rewrite computed, nothing written) over `check` (target <= 2x).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _measure import ratio_line, side_by_side

FIXTURES = Path(__file__).parent.parent / "tests" / "fixtures"
PARSE_ALL = ("import pathlib, sys, libcst\n"
             "for path in sorted(pathlib.Path(sys.argv[1]).rglob('*.py')):\n"
             "    libcst.parse_module(path.read_bytes())\n")


def make_corpus(folder: Path, copies: int) -> list[Path]:
    sources = [path for path in sorted(FIXTURES.glob("checker/ng00[1-6]*.py")) + sorted(FIXTURES.glob("fix/*.in.py"))]
    made = []
    for copy in range(copies):
        for source in sources:
            target = folder / f"copy{copy:03d}" / source.name.replace(".in.py", ".py")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes() + f"\n# copy {copy}\n".encode())
            made.append(target)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=50)  # about as many files as the real corpus
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    try:
        files = make_corpus(folder / "corpus", options.copies)
        size = sum(path.stat().st_size for path in files) / 2**20
        lint = [sys.executable, "-m", "lint_nograd"]
        common = ["--isolated", "--no-cache", "--exit-zero", "--output-format", "concise", "corpus"]
        figures = side_by_side({
            "libcst": [sys.executable, "-c", PARSE_ALL, "corpus"],
            "check1": [*lint, "check", "--jobs", "1", *common],
            "check2": [*lint, "check", "--jobs", "2", *common],
            "fix": [*lint, "fix", "--diff", "--jobs", "2", *common],
        }, options.rounds, cwd=folder, sample_memory=False)
    finally:
        shutil.rmtree(folder)
    libcst, check1, check2, fix = (figures[name] for name in ("libcst", "check1", "check2", "fix"))
    print(f"corpus: the test fixtures x {options.copies}, {len(files)} files, {size:.2f} MiB; "
          f"{options.rounds} rounds, medians")
    print(ratio_line("2. check --jobs 1 / libcst.parse_module of every file", check1.wall, libcst.wall, "<= 1.5x"))
    print(ratio_line("2. check --jobs 1 / check --jobs 2 (speed-up)", check1.wall, check2.wall, ">= 1.7x"))
    same = len(set(check1.outputs + check2.outputs)) == 1
    print(f"{'2. same findings with --jobs 1 and --jobs 2':<52} {'yes' if same else 'NO'}")
    print(ratio_line("4. fix --diff / check (both --jobs 2)", fix.wall, check2.wall, "<= 2x"))


if __name__ == "__main__":
    main()
