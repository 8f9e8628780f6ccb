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


# -- GitLab Code Quality, JUnit XML, reviewdog's rdjson ------------------------------------------------

SCHEMAS = Path(__file__).parent / "fixtures" / "schemas"
ROOT = EXAMPLES.parent


def validate(document, schema_name: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SCHEMAS / schema_name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)  # raises on what the schema rejects


def lint_nograd(cwd: Path, *args: str, code: int = 1) -> str:
    done = subprocess.run([sys.executable, "-m", "lint_nograd", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True)
    assert done.returncode == code, done.stderr
    return done.stdout


def test_gitlab_code_quality_names_files_from_the_repository_root():
    from_root = json.loads(run("gitlab"))
    validate(from_root, "gitlab-code-quality.json")
    from_inside = json.loads(lint_nograd(EXAMPLES, "--isolated", "--output-format", "gitlab", "."))
    assert from_inside == from_root  # wherever it runs: GitLab finds the files from the repository's root
    concise = run("concise").splitlines()[:len(from_root)]
    assert [(issue["check_name"], issue["location"]["lines"]["begin"]) for issue in from_root] == [
        (line.split(" ")[1], int(line.split(":")[1])) for line in concise]
    for issue in from_root:
        assert (ROOT / issue["location"]["path"]).is_file()
        assert issue["severity"] == {"error": "major", "warning": "minor", "note": "info"}[
            RULES[issue["check_name"]].severity]
    assert len({issue["fingerprint"] for issue in from_root}) == len(from_root)


def test_gitlab_fingerprints_follow_a_finding_that_moved_and_tell_twins_apart(tmp_path):
    """A merge request that adds lines above a finding must not show it as fixed and new again."""
    source = (EXAMPLES / "meta_learning.py").read_text()
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "m.py").write_text(source)
    before = json.loads(lint_nograd(tmp_path, "--output-format", "gitlab", "m.py"))
    (tmp_path / "m.py").write_text("import os\n\n\n" + source)
    after = json.loads(lint_nograd(tmp_path, "--output-format", "gitlab", "m.py"))
    assert [issue["location"]["lines"]["begin"] + 3 for issue in before] == [
        issue["location"]["lines"]["begin"] for issue in after]
    assert [issue["fingerprint"] for issue in before] == [issue["fingerprint"] for issue in after]
    (tmp_path / "m.py").write_text(TWINS)
    twins = json.loads(lint_nograd(tmp_path, "--output-format", "gitlab", "m.py", code=0))  # NG001: notes
    validate(twins, "gitlab-code-quality.json")
    assert len(twins) == 2 and twins[0]["description"].replace("line 4", "line 6") == twins[1]["description"]
    assert twins[0]["fingerprint"] != twins[1]["fingerprint"]


TWINS = """\
import torch
from torch.func import grad

with torch.no_grad():
    d = grad(abs)(1.0)
with torch.no_grad():
    d = grad(abs)(1.0)
"""


def test_junit_is_read_by_a_junit_reader_one_failure_per_finding_a_note_no_failure(tmp_path):
    junitparser = pytest.importorskip("junitparser")
    report = tmp_path / "report.xml"
    report.write_text(run("junit"))
    concise = [line for line in run("concise").splitlines() if ": NG" in line]
    suites = list(junitparser.JUnitXml.fromfile(str(report)))
    cases = [(suite.name, case) for suite in suites for case in suite]
    assert len(cases) == len(concise) == 4
    for (suite, case), line in zip(cases, concise):
        path, row, col, rest = line.split(":", 3)
        code, message = rest.strip().split(" ", 1)
        message = message.removeprefix("[*] ")
        assert (suite, case.classname, case.name) == (path, path, f"lint-nograd.{code}")
        if RULES[code].severity == "note":  # shown, and a passed case: a note fails no run
            assert case.result == [] and case.system_out.startswith(f"line {row}, col {col}: {code} {message}\n")
            continue
        [failure] = case.result
        assert isinstance(failure, junitparser.Failure)
        assert failure.message == message and failure.type == RULES[code].severity
        assert failure.text.startswith(f"line {row}, col {col}: {code} {message}\n")


def test_junit_without_findings_is_one_passed_case_and_control_characters_stay_valid_xml(tmp_path):
    junitparser = pytest.importorskip("junitparser")
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "clean.py").write_text("x = 1\n")
    report = tmp_path / "report.xml"
    report.write_text(lint_nograd(tmp_path, "--output-format", "junit", "clean.py", code=0))
    [suite] = junitparser.JUnitXml.fromfile(str(report))
    [case] = suite
    assert (suite.tests, suite.failures, case.is_passed) == (1, 0, True)
    # a message quoting source with a control character in it
    (tmp_path / "odd.py").write_text(TWINS.replace("grad(abs)(1.0)\nwith", "grad(abs)('\x1b')\nwith", 1))
    report.write_text(lint_nograd(tmp_path, "--output-format", "junit", "odd.py", code=0))
    assert len([case for suite in junitparser.JUnitXml.fromfile(str(report)) for case in suite]) == 2


RDJSON_SOURCE = """\
import torch
from torch.func import grad, jacfwd


def f(x):
    with torch.no_grad():
        s = x.mean()
    return x - s


jacfwd(f)
with torch.no_grad():
    é, ü = 1, grad(abs)(1.0)  # ünïcödé
"""


def test_rdjson_is_valid_and_counts_columns_in_utf8_bytes(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "m.py").write_text(RDJSON_SOURCE, encoding="utf-8")
    document = json.loads(lint_nograd(tmp_path, "--output-format", "rdjson", "m.py"))
    validate(document, "rdjson.json")
    assert document["source"]["name"] == "lint-nograd" and document["severity"] == "ERROR"
    as_json = json.loads(lint_nograd(tmp_path, "--output-format", "json", "m.py"))
    data = RDJSON_SOURCE.encode("utf-8")
    lines = data.splitlines(keepends=True)
    assert len(document["diagnostics"]) == len(as_json) == 2
    for found, plain in zip(document["diagnostics"], as_json):
        assert (found["code"]["value"], found["message"]) == (plain["code"], plain["message"])
        start, end = found["location"]["range"]["start"], found["location"]["range"]["end"]
        assert start["line"] == plain["location"]["row"] and end["line"] == plain["end_location"]["row"]
        text = lines[start["line"] - 1].decode()
        # the same span, by bytes and by characters
        assert (lines[start["line"] - 1][start["column"] - 1:end["column"] - 1].decode()
                == text[plain["location"]["column"] - 1:plain["end_location"]["column"] - 1])
    assert as_json[1]["location"]["column"] != document["diagnostics"][1]["location"]["range"]["start"]["column"]

    def offset(position) -> int:  # reviewdog's reading: a line, then a byte column in it
        return sum(len(line) for line in lines[:position["line"] - 1]) + position["column"] - 1

    # applying the suggestions by bytes, as reviewdog does, gives what `fix` writes
    [fixable] = [found for found in document["diagnostics"] if "suggestions" in found]
    new = data
    for suggestion in sorted(fixable["suggestions"], key=lambda s: offset(s["range"]["start"]), reverse=True):
        new = (new[:offset(suggestion["range"]["start"])] + suggestion["text"].encode()
               + new[offset(suggestion["range"]["end"]):])
    subprocess.run([sys.executable, "-m", "lint_nograd", "fix", "--no-cache", "m.py"], cwd=tmp_path,
                   capture_output=True, check=False)
    assert new == (tmp_path / "m.py").read_bytes() != data


def test_a_notebook_s_findings_name_their_cell_in_every_ci_format(tmp_path):
    """Rows count within a cell: the file is named, and the message says which cell and line."""
    junitparser = pytest.importorskip("junitparser")
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "nb.ipynb").write_bytes((ROOT / "tests" / "fixtures" / "notebooks" / "meta_learning.ipynb").read_bytes())
    places = [(d["cell"], d["location"]["row"]) for d in json.loads(lint_nograd(tmp_path, "--output-format", "json",
                                                                                 "nb.ipynb"))]
    assert places and all(cell is not None for cell, _ in places)
    gitlab = json.loads(lint_nograd(tmp_path, "--output-format", "gitlab", "nb.ipynb"))
    validate(gitlab, "gitlab-code-quality.json")
    assert [issue["description"].split(":")[0] for issue in gitlab] == [f"cell {c}, line {r}" for c, r in places]
    rdjson = json.loads(lint_nograd(tmp_path, "--output-format", "rdjson", "nb.ipynb"))
    validate(rdjson, "rdjson.json")
    assert [d["message"].split(", column")[0] for d in rdjson["diagnostics"]] == [
        f"cell {c}, line {r}" for c, r in places]
    report = tmp_path / "report.xml"
    report.write_text(lint_nograd(tmp_path, "--output-format", "junit", "nb.ipynb"))
    texts = [case.result[0].text if case.result else case.system_out  # a note is no failure
             for suite in junitparser.JUnitXml.fromfile(str(report)) for case in suite]
    assert [text.split(", col")[0] for text in texts] == [f"cell {c}, line {r}" for c, r in places]


def test_gitlab_paths_are_plain_paths_not_uris(tmp_path):
    """GitLab shows `location.path` as it is and finds the file by it: no percent-encoding."""
    (tmp_path / "pyproject.toml").write_text("[tool.lint-nograd]\n")
    (tmp_path / "sub dir").mkdir()
    (tmp_path / "sub dir" / "sp ace%20.py").write_text((EXAMPLES / "meta_learning.py").read_text())
    issues = json.loads(lint_nograd(tmp_path, "--output-format", "gitlab", "."))
    assert issues and {issue["location"]["path"] for issue in issues} == {"sub dir/sp ace%20.py"}
