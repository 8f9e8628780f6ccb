"""lint-nograd against ruff on real code: the installed torch package's own sources.

    pip install ruff && python benchmarks/bench_real_corpus.py [--rounds N]

Prints, measured side by side in one run (interleaved rounds, medians), on a copy of the tree:
  1. `lint-nograd check --no-cache` over `ruff check --no-cache --isolated` (target <= 1.0x),
     and with a warm cache (target <= 0.3x); the findings must be the same with and without it,
     and with one worker process or several;
  2. the warm check after one file of the tree changed, over the cold check (target <= 0.1x):
     the whole project is still analysed, from the cache but for that file;
  3. the peak memory of the whole process tree over ruff's (target <= 2x).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
from pathlib import Path

from _measure import ratio_line, side_by_side


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    spec = importlib.util.find_spec("torch")
    ruff = shutil.which("ruff")
    if spec is None or spec.origin is None or ruff is None:
        sys.exit("needs torch and ruff installed: pip install ruff")
    scratch = Path(tempfile.mkdtemp())
    corpus = scratch / "torch"  # a copy, so that one file can change between rounds
    shutil.copytree(Path(spec.origin).parent, corpus, ignore=lambda folder, names: [
        name for name in names if not name.endswith(".py") and not (Path(folder) / name).is_dir()])
    files = sum(1 for _ in corpus.rglob("*.py"))
    size = sum(path.stat().st_size for path in corpus.rglob("*.py")) / 2**20
    changed = corpus / "nn" / "modules" / "module.py"
    lint = [sys.executable, "-m", "lint_nograd", "check", "--isolated", "--exit-zero", "--output-format", "json"]
    commands = {
        "ruff": [ruff, "check", "--no-cache", "--isolated", "--exit-zero", "--quiet", str(corpus)],
        "cold": [*lint, "--no-cache", str(corpus)],
        "warm": [*lint, "--cache-dir", str(scratch / "cache"), str(corpus)],  # warmed by the warm-up round
        "one changed": [*lint, "--cache-dir", str(scratch / "cache-changed"), str(corpus)],
    }
    rounds = iter(range(10**6))
    before = {"one changed": lambda: changed.write_text(changed.read_text() + f"# round {next(rounds)}\n")}
    timed = side_by_side(commands, options.rounds, sample_memory=False, before=before)  # sampling costs CPU
    memory = side_by_side({name: commands[name] for name in ("ruff", "cold")}, 1)
    one_worker = side_by_side({"one worker": [*lint, "--no-cache", "--jobs", "1", str(corpus)]}, 1)
    ruff_figures, cold, warm = timed["ruff"], timed["cold"], timed["warm"]
    outputs = cold.outputs + warm.outputs + timed["one changed"].outputs + one_worker["one worker"].outputs
    same = all(json.loads(out) == json.loads(cold.outputs[0]) for out in outputs)
    print(f"corpus: the installed torch package's sources, {files} files, {size:.1f} MiB; "
          f"{options.rounds} rounds, medians; {len(json.loads(cold.outputs[0]))} findings")
    print(ratio_line("1. check --no-cache / ruff check --no-cache", cold.wall, ruff_figures.wall, "<= 1.0x"))
    print(ratio_line("1. check, warm cache / ruff check --no-cache", warm.wall, ruff_figures.wall, "<= 0.3x"))
    print(f"{'1. same findings: cache or none, one worker or more':<52} {'yes' if same else 'NO'}")
    print(ratio_line("2. one file changed, warm cache / check --no-cache", timed["one changed"].wall, cold.wall,
                     "<= 0.1x"))
    print(ratio_line("3. peak memory of the process tree / ruff's", memory["cold"].peak_mib,
                     memory["ruff"].peak_mib, "<= 2x", "MiB"))
    shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
