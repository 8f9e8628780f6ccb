import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the tests' shared helpers (rule_pages.py)

import os  # noqa: E402

# Text output fits the terminal's width (COLUMNS, else 80 off a terminal): the expected outputs
# are written for 80 columns, whatever terminal the tests are started from.
os.environ.pop("COLUMNS", None)

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def user_cache(tmp_path_factory, monkeypatch):
    """Each test keeps its caches in a user cache folder of its own (the default place of a
    project's cache), never in the real one; the folder, for tests that look into it."""
    folder = tmp_path_factory.mktemp("user-cache")
    monkeypatch.setenv("LINT_NOGRAD_CACHE_DIR", str(folder))
    return folder
