"""The property tests of tests/test_fuzz.py, and the gradient properties of tests/test_fix_torch.py and
tests/test_fix_torch_containers.py (region values that are dataclasses and subclasses), run longer.

    python scripts/fuzz.py [--seconds 60] [--programs N]

Each property runs in rounds of fresh random examples, in turn, until the time or the number of
programs is used up; the first failure stops the run with hypothesis's shrunk example and exit 1.
At the end it prints how many programs each property ran, and for how many seconds.
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback
import warnings
from pathlib import Path

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_fuzz  # noqa: E402

ROUND = 50  # examples per round


def properties() -> dict:
    found = {
        "generated programs": (test_fuzz.programs(), test_fuzz.test_generated_programs.hypothesis.inner_test),
        "mutated fixtures": (test_fuzz.mutated(), test_fuzz.test_mutated_fixtures.hypothesis.inner_test),
        "notebooks": (test_fuzz.notebooks(), test_fuzz.test_notebooks.hypothesis.inner_test),
    }
    try:
        import test_fix_torch
    except ImportError:  # no torch: the gradient property cannot run
        print("torch is not installed: skipping the gradient property")
        return found
    import test_fix_torch_containers

    found["gradients of fixed regions"] = (test_fix_torch.functions(),
                                           test_fix_torch.test_generated_regions.hypothesis.inner_test)
    # regions whose values are dataclasses, ModelOutput-like dicts, namedtuples and other subclasses
    found["gradients of fixed container regions"] = (
        test_fix_torch_containers.container_functions(),
        test_fix_torch_containers.test_generated_container_regions.hypothesis.inner_test)
    return found


def run_round(strategy, check, counts: list[int]) -> None:
    @settings(max_examples=ROUND, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def round_(example):
        counts[0] += 1
        check(example)

    round_()


def main() -> int:
    warnings.simplefilter("ignore", SyntaxWarning)  # hypothesmith compiles `1()` and the like
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="stop after about this long")
    parser.add_argument("--programs", type=int, default=None, help="stop after this many programs")
    options = parser.parse_args()
    found = properties()
    counts = {name: [0] for name in found}
    spent = dict.fromkeys(found, 0.0)
    start = time.monotonic()

    def done() -> bool:
        total = sum(count[0] for count in counts.values())
        out_of_programs = options.programs is not None and total >= options.programs
        return out_of_programs or time.monotonic() - start >= options.seconds

    failed = False
    try:
        while not done():
            for name, (strategy, check) in found.items():
                if done():
                    break
                began = time.monotonic()
                try:
                    run_round(strategy, check, counts[name])
                finally:
                    spent[name] += time.monotonic() - began
    except Exception:  # hypothesis has printed the shrunk example
        traceback.print_exc()
        failed = True
    for name in found:
        print(f"{name}: {counts[name][0]} programs in {spent[name]:.1f} s")
    total = sum(count[0] for count in counts.values())
    print(f"total: {total} programs in {time.monotonic() - start:.1f} s, {'FAILED' if failed else 'no failure'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
