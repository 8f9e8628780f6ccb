import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the tests' shared helpers (rule_pages.py)

import os  # noqa: E402

# Text output fits the terminal's width (COLUMNS, else 80 off a terminal): the expected outputs
# are written for 80 columns, whatever terminal the tests are started from.
os.environ.pop("COLUMNS", None)

import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402

# Whatever a test starts, before its own fixtures too (a module's pre-commit or language server
# process), keeps its caches here, never in the user's cache folder.
_CACHES = tempfile.mkdtemp(prefix="lint-nograd-caches-")
atexit.register(shutil.rmtree, _CACHES, True)
os.environ["LINT_NOGRAD_CACHE_DIR"] = _CACHES


@pytest.fixture(autouse=True)
def user_cache(tmp_path_factory, monkeypatch):
    """Each test keeps its caches in a user cache folder of its own (the default place of a
    project's cache), never in the real one; the folder, for tests that look into it."""
    folder = tmp_path_factory.mktemp("user-cache")
    monkeypatch.setenv("LINT_NOGRAD_CACHE_DIR", str(folder))
    return folder


def pytest_collection_modifyitems(items):
    """Every test of a module that imports torch is marked `torch` (a module may say so itself with
    `pytestmark = pytest.mark.torch`): they run its transforms, tracers and compiler, most of the
    suite's time, and `python -m pytest -m "not torch"` leaves them out."""
    for item in items:
        torch = getattr(getattr(item, "module", None), "torch", None)
        if getattr(torch, "__name__", None) == "torch":
            item.add_marker(pytest.mark.torch)
