"""The real console script on the fixtures and on real code, as a new user would run it."""
from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "checker"


def lint_nograd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lint_nograd", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_concise_output_matches_the_fixture_tables():
    run = lint_nograd("check", "--isolated", "--no-cache", "--output-format", "concise", "--torch-version", "2.13",
                      ".", cwd=FIXTURES)
    assert run.returncode == 1, run.stderr
    expected = sorted(f"{case.with_suffix('.py').name}:{line.split(' ', 1)[0]}: {line.split(' ', 1)[1]}"
                      for case in FIXTURES.glob("*.txt") for line in case.read_text().splitlines()
                      if not line.startswith(" ")  # a related place, or why there is no fix
                      and " NG100 " not in line)  # unused noqa: off by default
    got = sorted(line.replace(" [*] ", " ", 1) for line in run.stdout.splitlines()
                 if line.count(":") >= 3 and " NG0" in line)
    assert got == expected


def test_json_output_of_a_real_finding(tmp_path):
    (tmp_path / "bad.py").write_text(
        "import torch\nfrom torch.func import grad\n\nwith torch.no_grad():\n    d = grad(abs)(1.0)\n")
    run = lint_nograd("check", "--isolated", "--output-format", "json", "bad.py", cwd=tmp_path)
    assert run.returncode == 0  # a note: shown, but no failed run
    [finding] = json.loads(run.stdout)
    assert finding["code"] == "NG001" and finding["filename"] == "bad.py" and finding["severity"] == "note"
    assert finding["location"] == {"row": 5, "column": 9}
    assert finding["end_location"] == {"row": 5, "column": 18}
    assert finding["fix"] is None


def test_python_dash_m_and_console_script_agree(tmp_path):
    (tmp_path / "ok.py").write_text("import torch\nwith torch.no_grad():\n    pass\n")
    script = Path(sys.executable).with_name("lint-nograd")
    if not script.exists():
        pytest.skip("console script not installed next to this interpreter")
    via_script = subprocess.run([str(script), "check", "--isolated", "ok.py"], capture_output=True,
                                text=True, cwd=tmp_path)
    via_module = lint_nograd("check", "--isolated", "ok.py", cwd=tmp_path)
    assert via_script.returncode == via_module.returncode == 0
    assert via_script.stdout == via_module.stdout


@pytest.mark.torch  # reads torch's own sources, 2,285 files
def test_the_installed_torch_sources_check_without_errors():
    """Real code, as a new user would run it: no traceback, and NG000 only where ast fails too."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    root = Path(spec.origin).parent
    run = lint_nograd("check", "--isolated", "--no-cache", "--output-format", "json", str(root))
    assert run.returncode in (0, 1), run.stderr
    assert "Traceback" not in run.stderr and run.stderr == ""
    for finding in json.loads(run.stdout):
        if finding["code"] == "NG000":
            with pytest.raises(SyntaxError):
                ast.parse(Path(finding["filename"]).read_bytes())
