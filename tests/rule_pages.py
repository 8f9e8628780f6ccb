"""Reading the examples out of the rule pages in rules/ (shared by the tests that run them)."""
from __future__ import annotations

import re
from pathlib import Path

PAGES = sorted((Path(__file__).parent.parent / "rules").glob("NG*.md"))


def sections(page: Path) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", page.read_text(), flags=re.MULTILINE)
    return {title.strip(): body for title, body in zip(parts[1::2], parts[2::2])}


def example(page: Path, section: str) -> str:
    """The first ```python block of a section."""
    match = re.search(r"```python\n(.*?)```", sections(page)[section], re.DOTALL)
    assert match, f"{page.name}: no python example under '## {section}'"
    return match.group(1)


def examples(page: Path, section: str) -> list[str]:
    """Every ```python block of a section."""
    return re.findall(r"```python\n(.*?)```", sections(page)[section], re.DOTALL)
