"""Every rule has a page; its examples are checked by the linter (and run by test_rules_against_torch)."""
from __future__ import annotations

import re

import pytest
from lint_nograd.report.registry import RULES
from lint_nograd.run.engine import check_source
from rule_pages import PAGES, example, examples, sections

ALL = frozenset(RULES)


def codes_in(source: str) -> list[str]:
    return [d.code for d in check_source(source.encode(), "example.py", ALL)]


def test_every_rule_has_a_page():
    assert sorted(page.stem for page in PAGES) == sorted(RULES)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.stem)
def test_page_layout(page):
    titles = list(sections(page))
    assert titles[:4] == ["What it does", "Why it matters", "Example", "Use instead"]
    assert "References" in titles
    assert ("Fix safety" in titles) == RULES[page.stem].fixable
    assert page.read_text().startswith(f"# {page.stem} {RULES[page.stem].name}\n")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.stem)
def test_example_raises_exactly_its_rule(page):
    codes = codes_in(example(page, "Example"))
    assert codes and set(codes) == {page.stem}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.stem)
def test_use_instead_is_clean(page):
    assert codes_in(example(page, "Use instead")) == []


def _without_comments(source: str) -> list[str]:
    return [re.sub(r"\s*#.*$", "", line) for line in source.splitlines()]


@pytest.mark.parametrize("page", [p for p in PAGES if RULES[p.stem].fixable], ids=lambda page: page.stem)
def test_fix_of_the_example_is_the_use_instead(page):
    """What `lint-nograd fix` writes for the bad example is the page's good one (comments aside)."""
    from lint_nograd.fix.rewrite import fix_text

    assert _without_comments(fix_text(example(page, "Example"), ALL)) == _without_comments(example(page, "Use instead"))


def test_the_memory_preserving_form_of_ng004():
    """Fix safety shows it: the region stays, its value is cut inside it, and that is no finding."""
    from lint_nograd.fix.rewrite import FixSettings, fix_text

    before, after = examples(PAGES[[page.stem for page in PAGES].index("NG004")], "Fix safety")
    assert codes_in(before) == ["NG004"] and codes_in(after) == []
    assert fix_text(before) == before  # an unsafe fix: `teacher(x)` is a call the file cannot see into
    assert fix_text(before, settings=FixSettings(unsafe_fixes=True)) == after


@pytest.mark.parametrize("args", [[code] for code in RULES] + [["--all"]], ids=lambda args: args[0])
def test_rule_output_fits_80_columns(args, capsys):
    """`lint-nograd rule` prints the page as it is: prose and code alike wrap at 80 columns."""
    from lint_nograd import cli

    assert cli.main(["rule", *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and max(len(line) for line in lines) <= 80
