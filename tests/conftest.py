import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the tests' shared helpers (rule_pages.py)
