"""Each `fixtures/checker/<case>.py` must produce exactly the lines of its `<case>.txt`.

A new pattern found in the wild becomes a fixture pair, not new test code. After an intended
change of messages, regenerate with `LINT_NOGRAD_UPDATE_FIXTURES=1 pytest tests/test_checker_fixtures.py`
and review the diff.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from lint_nograd.fix.rewrite import check_with_fixes
from lint_nograd.report.registry import RULES

FIXTURES = Path(__file__).parent / "fixtures" / "checker"
CASES = sorted(FIXTURES.glob("*.py"))
TORCH = "2.13"  # the release the expectations are for (test_torch_version.py compares releases)


def render(path: Path) -> str:
    diagnostics = check_with_fixes(path.read_bytes(), path.name, frozenset(RULES), torch_version=TORCH)
    return "".join(f"{d.row}:{d.col} {d.code} {d.message}\n" + "".join(
        f"    {r.row}:{r.col}: {r.message}\n" for r in d.related) + _no_fix(d.help) for d in diagnostics)


def _no_fix(help: str) -> str:
    """Why a fixable finding has no fix: the end of its help."""
    return f"    {help[help.rindex('(no fix: ') + 1:-1]}\n" if "(no fix: " in help else ""


@pytest.mark.parametrize("case", CASES, ids=lambda path: path.stem)
def test_fixture(case: Path):
    expected_file = case.with_suffix(".txt")
    got = render(case)
    if os.environ.get("LINT_NOGRAD_UPDATE_FIXTURES"):
        expected_file.write_text(got)
    assert got == expected_file.read_text()


@pytest.mark.parametrize("prefix", ["ng000", "ng001", "ng002", "ng003", "ng004", "ng005", "ng006"])
def test_every_positive_fixture_reports_its_own_code(prefix: str):
    """Guards the snapshots: a fixture named for a rule must raise that rule and no other."""
    code = prefix.upper()
    cases = [case for case in CASES if case.stem.startswith(prefix)]
    positives = [case for case in cases if "negatives" not in case.stem and "escapes" not in case.stem
                 and "shadowed" not in case.stem]
    assert positives
    for case in positives:
        codes = {line.split()[1] for line in render(case).splitlines() if not line.startswith(" ")}
        assert codes == {code}, case.name
    for case in set(cases) - set(positives):
        assert render(case) == "", case.name
