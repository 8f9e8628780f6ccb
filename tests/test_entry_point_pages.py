"""The rule pages list the entry points of the table in lint_nograd/analysis/entry_points.py."""
from __future__ import annotations

import pytest
from lint_nograd.analysis.entry_points import DROPS, FORWARD, KEEPS, REVERSE, listed
from rule_pages import PAGES, sections

PAGES_BY_CODE = {page.stem: page for page in PAGES}


@pytest.mark.parametrize("code, modes", [("NG004", [FORWARD]), ("NG005", [DROPS, KEEPS]), ("NG006", [REVERSE])])
def test_the_page_lists_every_entry_point_of_its_modes(code, modes):
    text = sections(PAGES_BY_CODE[code])["Entry points"]
    for mode in modes:
        assert "\n".join(listed(mode)) in text


def test_every_entry_point_is_listed_in_some_mode():
    from lint_nograd.analysis.entry_points import ENTRY_POINTS

    every = "\n".join(line for mode in (FORWARD, DROPS, KEEPS, REVERSE) for line in listed(mode))
    for entry in ENTRY_POINTS:
        assert any(f"`{name}`" in every for name in entry.qualified_names), entry.name
