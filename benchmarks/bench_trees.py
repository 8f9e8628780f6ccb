"""lint-nograd against ruff on real trees, each measured side by side in one run.

    pip install ruff
    python benchmarks/bench_trees.py [--torch PATH] [--diffusers PATH] [--fairseq PATH]
                                     [--lightning PATH] [--rounds N] [--only NAME ...]

Each tree is a checkout of a public repository (see docs/performance.md); torch's sources are
those of the installed torch package unless a path is given. Each is copied first (its `.py` files),
so that one file can change between rounds and nothing is written into the checkout. Printed per
tree, as ratios of medians over interleaved rounds (whole processes, after a warm-up round):

  cold     `check --no-cache` / `ruff check --no-cache --isolated`
  warm     `check` with its cache warm / the same ruff run
  changed  `check` with a warm cache after one file changed / `check --no-cache`
  memory   peak memory of the process tree, `check --no-cache` / ruff (one run each, sampled)
  jobs     `check --no-cache` with the default `--jobs` / with `--jobs 1` (< 1: the default is faster)
  same     the findings are the same cold, warm, after the change and with one worker

For torch, also the growth of the cold ratio with the tree (25%, 50% and 100% of its files, the
same files each round) and the speed-up of `--jobs 2` over `--jobs 1`.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

from _measure import side_by_side

TARGETS = {"torch": (2.0, 0.10), "diffusers": (1.0, 0.10), "fairseq": (1.0, 0.15), "lightning": (1.0, 0.15)}
CHANGED = {"torch": "nn/modules/module.py"}  # the file appended to; else the largest file of the tree


def copy_tree(source: Path, target: Path, share: float = 1.0) -> Path:
    """The `.py` files of `source` (a share of them, the same ones for the same share) under `target`."""
    files = sorted(path for path in source.rglob("*.py") if ".git" not in path.parts)
    if share < 1.0:
        files = sorted(random.Random(0).sample(files, round(len(files) * share)))
    for path in files:
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
        os.utime(destination, (path.stat().st_atime, path.stat().st_mtime - 3600))  # not just modified, as
    return target  # in a checkout: a file modified within the timestamps' precision is read again


def commands(ruff: str, tree: Path, cache: Path, changing: Path | None = None) -> dict[str, list[str]]:
    """`changing`: a second copy of the tree, where one file changes before each run of `changed`
    (in `tree`, the change would make the next warm run one after a change too)."""
    lint = [sys.executable, "-m", "lint_nograd", "check", "--isolated", "--exit-zero", "--output-format", "json"]
    return {
        "ruff": [ruff, "check", "--no-cache", "--isolated", "--exit-zero", "--quiet", str(tree)],
        "cold": [*lint, "--no-cache", str(tree)],
        "warm": [*lint, "--cache-dir", str(cache / "warm"), str(tree)],  # warmed by the warm-up round
        "changed": [*lint, "--cache-dir", str(cache / "changed"), str(changing or tree)],
        "one worker": [*lint, "--no-cache", "--jobs", "1", str(tree)],
    }


def measure(name: str, source: Path, scratch: Path, ruff: str, rounds: int) -> None:
    tree = copy_tree(source, scratch / name / "tree")
    changing = copy_tree(source, scratch / name / "changing")
    files = list(changing.rglob("*.py"))
    changed = changing / CHANGED[name] if name in CHANGED else max(files, key=lambda path: path.stat().st_size)
    counter = iter(range(10**6))
    before = {"changed": lambda: changed.write_text(changed.read_text() + f"# round {next(counter)}\n")}
    timed = side_by_side(commands(ruff, tree, scratch / name, changing), rounds, sample_memory=False, before=before)
    memory = side_by_side({key: commands(ruff, tree, scratch / name)[key] for key in ("ruff", "cold")}, 1)
    ruff_s, cold = timed["ruff"].wall, timed["cold"].wall
    # a comment appended to a file changes no finding
    outputs = [json.loads(_in_tree(out, changing, tree))
               for key in ("cold", "warm", "changed", "one worker") for out in timed[key].outputs]
    same = all(found == outputs[0] for found in outputs)
    cold_target, warm_target = TARGETS[name]
    print(f"{name}: {len(files)} files, {len(outputs[0])} findings; ruff {ruff_s:.2f} s, check cold {cold:.2f} s")
    rows = [("cold / ruff", cold / ruff_s, f"<= {cold_target}x"),
            ("warm / ruff", timed["warm"].wall / ruff_s, f"<= {warm_target}x"),
            ("one changed, warm / cold", timed["changed"].wall / cold, "<= 0.05x"),
            ("memory / ruff", memory["cold"].peak_mib / memory["ruff"].peak_mib, "<= 1.5x"),
            ("default --jobs / --jobs 1", cold / timed["one worker"].wall, "<= 1.0x")]
    for label, ratio, target in rows:
        print(f"  {label:<28} {ratio:6.2f}x   target {target}")
    print(f"  {'same findings':<28} {'yes' if same else 'NO'}")
    if name == "torch":
        growth(source, scratch, ruff, rounds)


def _in_tree(output: str, copy: Path, tree: Path) -> str:
    """`output` with the paths of files in `copy` written as those in `tree`, as shown (relative to
    the current folder when under it, else absolute)."""
    for shown_copy, shown_tree in ((str(copy), str(tree)), (os.path.relpath(copy), os.path.relpath(tree))):
        output = output.replace(shown_copy, shown_tree)
    return output


def growth(source: Path, scratch: Path, ruff: str, rounds: int) -> None:
    ratios = {}
    for share in (0.25, 0.5, 1.0):
        tree = copy_tree(source, scratch / f"torch-{share}", share)
        both = {key: command for key, command in commands(ruff, tree, scratch).items() if key in ("ruff", "cold")}
        timed = side_by_side(both, rounds, sample_memory=False)
        ratios[share] = timed["cold"].wall / timed["ruff"].wall
    print("  cold / ruff at 25%, 50%, 100% of the files: "
          + ", ".join(f"{ratio:.2f}x" for ratio in ratios.values())
          + f"; 100% over 25%: {ratios[1.0] / ratios[0.25]:.2f}x   target <= 1.25x")
    tree = scratch / "torch" / "tree"
    lint = [sys.executable, "-m", "lint_nograd", "check", "--isolated", "--exit-zero", "-q", "--no-cache"]
    timed = side_by_side({jobs: [*lint, "--jobs", jobs, str(tree)] for jobs in ("1", "2")}, rounds, sample_memory=False)
    print(f"  --jobs 2 speed-up over --jobs 1: {timed['1'].wall / timed['2'].wall:.2f}x   target >= 1.7x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in TARGETS:
        parser.add_argument(f"--{name}", type=Path, metavar="PATH", help=f"a checkout of {name}")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=list(TARGETS), help="measure only these trees")
    options = parser.parse_args()
    ruff = shutil.which("ruff") or shutil.which("ruff", path=os.path.dirname(sys.executable))
    if ruff is None:
        sys.exit("needs ruff: pip install ruff")
    if options.torch is None and (spec := importlib.util.find_spec("torch")) is not None and spec.origin:
        options.torch = Path(spec.origin).parent
    trees = {name: getattr(options, name) for name in (options.only or TARGETS) if getattr(options, name)}
    if not trees:
        sys.exit("no tree to measure: give --torch, --diffusers, --fairseq or --lightning PATH")
    print(f"{options.rounds} rounds, medians; {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as scratch:
        for name, source in trees.items():
            if not source.is_dir():
                sys.exit(f"not a folder: {source}")
            measure(name, source, Path(scratch), ruff, options.rounds)


if __name__ == "__main__":
    main()
