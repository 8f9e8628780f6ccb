"""The CI formats on real findings: SARIF that a SARIF 2.1.0 model accepts, GitHub commands."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lint_nograd.report.registry import RULES

sarif_pydantic = pytest.importorskip("sarif_pydantic")
EXAMPLES = Path(__file__).parent.parent / "examples"


def run(output_format: str) -> str:
    done = subprocess.run([sys.executable, "-m", "lint_nograd", "check", "--isolated", "--no-cache",
                           "--output-format", output_format, str(EXAMPLES)], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    return done.stdout


def test_sarif_is_valid_sarif_2_1_0_with_one_based_regions_and_rule_metadata():
    document = json.loads(run("sarif"))
    log = sarif_pydantic.Sarif.model_validate(document)  # raises on a structure SARIF 2.1.0 rejects
    assert log.version == "2.1.0"
    [sarif_run] = document["runs"]
    rules = sarif_run["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == list(RULES)
    assert all(rule["shortDescription"]["text"] and rule["help"]["markdown"].startswith(f"# {rule['id']}")
               for rule in rules)
    results = sarif_run["results"]
    assert {result["ruleId"] for result in results} == {"NG001", "NG003", "NG004", "NG006"}
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] == RULES[result["ruleId"]].severity  # error, warning or note: SARIF's levels
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert (region["endLine"], region["endColumn"]) >= (region["startLine"], region["startColumn"])


def test_github_workflow_commands():
    lines = run("github").splitlines()
    assert len(lines) == 4
    command = re.compile(r"^::(error|warning|notice) title=lint-nograd \((NG\d{3})\),file=([^,]+),line=(\d+),"
                         r"col=(\d+),endLine=(\d+),endColumn=(\d+)::(.*)$")
    for line in lines:
        match = command.match(line)
        assert match, line
        kind, code, path, row = match.group(1), match.group(2), match.group(3), int(match.group(4))
        assert kind == {"error": "error", "warning": "warning", "note": "notice"}[RULES[code].severity]
        assert path.endswith("meta_learning.py") and row >= 1
        assert "\n" not in match.group(8) and "%0A" not in match.group(8)
