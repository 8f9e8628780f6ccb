import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the tests' shared helpers (rule_pages.py)

import os  # noqa: E402

# Text output fits the terminal's width (COLUMNS, else 80 off a terminal): the expected outputs
# are written for 80 columns, whatever terminal the tests are started from.
os.environ.pop("COLUMNS", None)
