"""Each output format's layout, from hand-made diagnostics."""
from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lint_nograd.report import output
from lint_nograd.report.diagnostics import Diagnostic, Edit, Fix, Related
from lint_nograd.report.registry import RULES

FIX = Fix("Use stop_gradient", (Edit("stop_gradient(x)", 3, 5, 3, 13),))
REACHER = Related("`jvp(f)` reaches it", "pkg/train.py", 7, 1, 7, 7)
FIXABLE = Diagnostic("NG004", "no_grad under jvp", "pkg/model.py", 3, 5, 3, 13, "error",
                     "    with torch.no_grad():\n", FIX, help="Forward mode ignores grad mode.", related=(REACHER,))
WARNING = Diagnostic("NG001", "vmap under no_grad", "train.py", 12, 1, 12, 5, "warning",
                     "vmap(f)(x)")
UNSAFE = Diagnostic("NG006", "no_grad under grad", "pkg/model.py", 9, 5, 9, 13, "warning",
                    "    with torch.no_grad():\n", Fix("Keep the region", (Edit("x", 10, 1, 11, 1),), "unsafe"))


@pytest.mark.parametrize("diagnostic, line", [
    (FIXABLE, "pkg/model.py:3:5: NG004 [*] no_grad under jvp"),
    (WARNING, "train.py:12:1: NG001 vmap under no_grad"),
])
def test_concise_line(diagnostic, line):
    assert output.render([diagnostic], "concise") == line + "\n"


def test_full_shows_source_with_carets_and_help():
    assert output.render([FIXABLE, WARNING], "full") == (
        "pkg/model.py:3:5: NG004 [*] no_grad under jvp\n"
        "  |\n"
        "3 |     with torch.no_grad():\n"
        "  |     ^^^^^^^^\n"
        "  |\n"
        "  = note: pkg/train.py:7:1: `jvp(f)` reaches it\n"
        "  = help: Forward mode ignores grad mode.\n"
        "  = fix: Use stop_gradient\n"
        "\n"
        "train.py:12:1: NG001 vmap under no_grad\n"
        "   |\n"
        "12 | vmap(f)(x)\n"
        "   | ^^^^\n"
        "   |\n"
        "\n"
    )


@pytest.mark.parametrize("source, col, end_row, end_col, caret_line", [
    ("abc", 2, 1, 2, " ^"),  # an empty span still gets one caret
    ("abcdef", 3, 2, 1, "  ^^^^"),  # a span over several lines runs to the end of the first
    ("\tx = f()", 2, 1, 3, "\t^"),  # tabs are copied so the caret stays under the text
    ("ab", 9, 1, 12, "  ^"),  # a column past the end stays on the line
])
def test_full_caret_line(source, col, end_row, end_col, caret_line):
    diagnostic = Diagnostic("NG001", "m", "a.py", 1, col, end_row, end_col, source_line=source)
    assert output.render([diagnostic], "full").splitlines()[3] == "  | " + caret_line


@pytest.mark.parametrize("width", [40, 80, 100])
def test_full_wraps_header_help_and_notes_at_the_width(width):
    words = " ".join(["because"] * 40)
    diagnostic = Diagnostic("NG001", "message " * 12, "a.py", 1, 1, 1, 2, help=words, source_line="x = 1" * 30,
                            related=(Related(words, "n.ipynb", 2, 1, 2, 3, cell=4),))
    lines = output.render([diagnostic], "full", width=width).splitlines()
    assert lines[0].startswith("a.py:1:1: NG001 message message") and lines[1].startswith("  message")
    notes = [number for number, line in enumerate(lines) if line.startswith("  = note: n.ipynb:cell 4:2:1: ")]
    assert notes and lines[notes[0] + 1].startswith(" " * 10 + "because")
    assert any(line.startswith("  = help: because") for line in lines)
    source = f"1 | {'x = 1' * 30}"
    assert all(len(line) <= width for line in lines if line != source), lines  # the source line stays whole
    assert source in lines and "\n".join(lines).count("because") == 80
    assert "\n".join(lines).count("message") == 12


def test_a_word_longer_than_a_line_is_cut_and_colour_keeps_the_widths():
    path = "a/" + "very_long_folder/" * 6 + "m.py"
    diagnostic = Diagnostic("NG001", "short", path, 1, 1, 1, 2, help="see " + "x" * 70)
    for color in (False, True):
        text = output.render([diagnostic], "full", color=color, width=40)
        plain = re.sub("\x1b\\[[0-9;]*m", "", text)
        assert all(len(line) <= 40 for line in plain.splitlines()), plain
        assert "".join(line.strip() for line in plain.splitlines()).startswith(f"{path}:1:1:")


def test_the_summary_wraps_at_the_width_and_stays_one_line_without_one():
    diagnostics = [UNSAFE, FIXABLE]
    long = output.summary(diagnostics)
    assert max(len(line) for line in long.splitlines()) > 60
    wrapped = output.summary(diagnostics, width=60)
    assert all(len(line) <= 60 for line in wrapped.splitlines())
    assert " ".join(wrapped.split()) == " ".join(long.split())


@pytest.mark.parametrize("columns, stream_is_a_terminal, width", [
    ("120", False, 120), ("", False, 80), ("nonsense", False, 80), ("10", False, output.MIN_WIDTH),
    (None, True, 57),  # a terminal's own width
])
def test_the_width_is_columns_else_the_terminal_else_80(monkeypatch, columns, stream_is_a_terminal, width):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((57, 24)))

    class Stream:
        def isatty(self):
            return stream_is_a_terminal

        def fileno(self):
            return 1

    assert output.terminal_width(Stream()) == width
    assert output.terminal_width(None) == (width if columns else 80)


def test_full_without_source_line_is_the_header_only():
    diagnostic = Diagnostic("NG000", "cannot parse", "a.py", 1, 1, 1, 1)
    assert output.render([diagnostic], "full") == "a.py:1:1: NG000 cannot parse\n\n"


def test_color_only_when_asked():
    assert "\x1b[" not in output.render([FIXABLE], "full")
    colored = output.render([FIXABLE], "concise", color=True)
    assert "\x1b[1mpkg/model.py\x1b[0m" in colored and "\x1b[1;31mNG004\x1b[0m" in colored


NOTE = Diagnostic("NG001", "grad under no_grad", "train.py", 14, 1, 14, 5, "note", "        x\n")


@pytest.mark.parametrize("diagnostics, text", [
    ([], "No findings.\n"),
    ([NOTE], "Found 1 note.\n"),
    ([FIXABLE, NOTE, NOTE], "Found 1 error and 2 notes.\n[*] 1 fixable with `lint-nograd fix`.\n"),
    ([FIXABLE, WARNING, WARNING, NOTE, NOTE, NOTE],
     "Found 1 error, 2 warnings and 3 notes.\n[*] 1 fixable with `lint-nograd fix`.\n"),
    ([WARNING], "Found 1 warning.\n"),
    ([FIXABLE], "Found 1 error.\n[*] 1 fixable with `lint-nograd fix`.\n"),
    ([WARNING, WARNING], "Found 2 warnings.\n"),
    ([FIXABLE, WARNING], "Found 1 error and 1 warning.\n[*] 1 fixable with `lint-nograd fix`.\n"),
    ([FIXABLE, FIXABLE, WARNING, WARNING, WARNING],
     "Found 2 errors and 3 warnings.\n[*] 2 fixable with `lint-nograd fix`.\n"),
])
def test_summary(diagnostics, text):
    assert output.summary(diagnostics) == text


@pytest.mark.parametrize("diagnostics, unsafe_fixes, text", [
    ([UNSAFE], False, "Found 1 warning.\nNo fixes available (1 hidden fix can be enabled with the "
                      "`--unsafe-fixes` option).\n"),
    ([FIXABLE, UNSAFE, UNSAFE], False, "Found 1 error and 2 warnings.\n[*] 1 fixable with `lint-nograd fix` (2 hidden fixes "
                                       "can be enabled with the `--unsafe-fixes` option).\n"),
    ([FIXABLE, UNSAFE], True, "Found 1 error and 1 warning.\n[*] 2 fixable with `lint-nograd fix --unsafe-fixes`.\n"),
    ([FIXABLE, WARNING], True, "Found 1 error and 1 warning.\n[*] 1 fixable with `lint-nograd fix`.\n"),
])
def test_summary_counts_unsafe_fixes_as_hidden_unless_asked(diagnostics, unsafe_fixes, text):
    assert output.summary(diagnostics, unsafe_fixes) == text


def test_only_fixes_a_run_applies_are_marked():
    assert output.render([UNSAFE], "concise") == "pkg/model.py:9:5: NG006 no_grad under grad\n"
    assert output.render([UNSAFE], "concise", unsafe_fixes=True) == "pkg/model.py:9:5: NG006 [*] no_grad under grad\n"
    assert "= fix: Keep the region (an unsafe fix: `--unsafe-fixes` applies it)" in output.render([UNSAFE], "full")
    assert output.statistics([UNSAFE], "text") == "1  NG006      no-grad-in-transformed-function\n"
    assert output.statistics([UNSAFE], "text", unsafe_fixes=True) == "1  NG006  [*] no-grad-in-transformed-function\n"


class _Region:
    def __init__(self, row: int, code: str, cell: int | None = None):
        self.row, self.code, self.cell = row, code, cell


def test_fixed_summary_lists_regions_and_imports():
    fixed = [("b.py", _Region(4, "NG005")), ("a.py", _Region(9, "NG004")), ("a.py", _Region(3, "NG006")),
             ("n.ipynb", _Region(2, "NG004", cell=3))]
    imports = {"from lint_nograd import stop_gradient": {"a.py", "b.py"}}
    assert output.fixed_summary(fixed, 3, imports, show_fixes=False) == (
        "Fixed 4 regions in 3 files.\nAdded `from lint_nograd import stop_gradient` to 2 files.\n")
    assert output.fixed_summary(fixed, 3, {}, show_fixes=True) == (
        "Fixed 4 regions in 3 files:\n"
        "  a.py:3: NG006 (no-grad-in-transformed-function)\n"
        "  a.py:9: NG004 (no-grad-under-forward-mode)\n"
        "  b.py:4: NG005 (no-grad-in-traced-function)\n"
        "  n.ipynb:cell 3:2: NG004 (no-grad-under-forward-mode)\n")
    assert output.fixed_summary(fixed[:1], 1, imports, show_fixes=False, diff=True) == (
        "Would fix 1 region in 1 file.\nWould add `from lint_nograd import stop_gradient` to 2 files.\n")


def test_json_has_ruffs_keys_and_one_based_positions():
    [fixable, plain] = json.loads(output.render([FIXABLE, WARNING], "json"))
    assert fixable == {
        "code": "NG004",
        "name": "no-grad-under-forward-mode",
        "message": "no_grad under jvp",
        "severity": "error",
        "filename": "pkg/model.py",
        "cell": None,
        "location": {"row": 3, "column": 5},
        "end_location": {"row": 3, "column": 13},
        "noqa_row": 3,
        "help": "Forward mode ignores grad mode.",
        "related": [{"message": "`jvp(f)` reaches it", "filename": "pkg/train.py", "cell": None,
                     "location": {"row": 7, "column": 1}, "end_location": {"row": 7, "column": 7}}],
        "url": None,
        "fix": {
            "applicability": "safe",
            "message": "Use stop_gradient",
            "edits": [{"content": "stop_gradient(x)", "location": {"row": 3, "column": 5},
                       "end_location": {"row": 3, "column": 13}}],
        },
    }
    assert plain["fix"] is None and plain["severity"] == "warning"
    assert plain["help"] is None and plain["related"] == []


def test_json_of_nothing_is_an_empty_list():
    assert json.loads(output.render([], "json")) == []


def test_sarif_required_fields():
    log = json.loads(output.render([FIXABLE, WARNING], "sarif"))
    assert log["version"] == "2.1.0" and "sarif" in log["$schema"]
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "lint-nograd" and driver["version"]
    assert [rule["id"] for rule in driver["rules"]] == list(RULES)
    for rule in driver["rules"]:
        assert rule["name"] == RULES[rule["id"]].name
        assert rule["shortDescription"]["text"]
        assert rule["defaultConfiguration"]["level"] == RULES[rule["id"]].severity
    assert "NG001" in driver["rules"][1]["help"]["markdown"]  # from rules/NG001.md

    first, second = run["results"]
    assert driver["rules"][first["ruleIndex"]]["id"] == first["ruleId"] == "NG004"
    assert (first["level"], second["level"]) == ("error", "warning")
    assert first["message"]["text"] == "no_grad under jvp"
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "pkg/model.py"
    assert location["region"] == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 13}
    assert "fixes" not in second and "properties" not in second and "relatedLocations" not in second
    assert first["properties"]["help"] == "Forward mode ignores grad mode."
    [related] = first["relatedLocations"]
    assert related == {"id": 0, "message": {"text": "`jvp(f)` reaches it"}, "physicalLocation": {
        "artifactLocation": {"uri": "pkg/train.py"},
        "region": {"startLine": 7, "startColumn": 1, "endLine": 7, "endColumn": 7}}}


def test_sarif_carries_each_fix_and_its_applicability():
    safe, unsafe = json.loads(output.render([FIXABLE, UNSAFE], "sarif"))["runs"][0]["results"]
    assert safe["properties"]["fixApplicability"] == "safe" and unsafe["properties"] == {"fixApplicability": "unsafe"}
    [fix] = unsafe["fixes"]
    assert fix["description"]["text"] == "Keep the region" and fix["properties"] == {"applicability": "unsafe"}
    [change] = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "pkg/model.py"
    assert change["replacements"] == [{"deletedRegion": {"startLine": 10, "startColumn": 1, "endLine": 11,
                                                         "endColumn": 1}, "insertedContent": {"text": "x"}}]


@pytest.mark.parametrize("path, uri", [
    ("dir with space/a.py", "dir%20with%20space/a.py"),
    ("/abs/a.py", "file:///abs/a.py"),
])
def test_sarif_uri(path, uri):
    diagnostic = Diagnostic("NG001", "m", path, 1, 1, 1, 2)
    result = json.loads(output.render([diagnostic], "sarif"))["runs"][0]["results"][0]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == uri


@pytest.mark.parametrize("diagnostic, line", [
    (FIXABLE, "::error title=lint-nograd (NG004),file=pkg/model.py,line=3,col=5,endLine=3,"
              "endColumn=13::pkg/model.py:3:5: NG004 no_grad under jvp"),
    (WARNING, "::warning title=lint-nograd (NG001),file=train.py,line=12,col=1,endLine=12,"
              "endColumn=5::train.py:12:1: NG001 vmap under no_grad"),
    (Diagnostic("NG001", "100% wrong\r\nreally", "a,b:c.py", 1, 1, 1, 2),
     "::error title=lint-nograd (NG001),file=a%2Cb%3Ac.py,line=1,col=1,endLine=1,endColumn=2"
     "::a,b:c.py:1:1: NG001 100%25 wrong%0D%0Areally"),
])
def test_github_workflow_command(diagnostic, line):
    assert output.render([diagnostic], "github") == line + "\n"


def test_a_note_in_every_machine_format():
    """SARIF's level `note`, GitHub's `::notice`, JSON's `severity`."""
    assert json.loads(output.render([NOTE], "sarif"))["runs"][0]["results"][0]["level"] == "note"
    assert output.render([NOTE], "github").startswith("::notice title=lint-nograd (NG001),file=train.py,line=14,")
    assert json.loads(output.render([NOTE], "json"))[0]["severity"] == "note"


@given(st.text())
def test_github_message_stays_on_one_line_and_round_trips(message):
    diagnostic = Diagnostic("NG001", message, "a.py", 1, 1, 1, 2)
    [line] = output.render([diagnostic], "github").split("\n")[:-1]
    data = line.split("::", 2)[2]
    unescaped = re.sub("%(25|0D|0A)", lambda code: chr(int(code[1], 16)), data)
    assert unescaped == f"a.py:1:1: NG001 {message}"


def test_statistics_text_and_json():
    diagnostics = [WARNING, FIXABLE, WARNING]
    assert output.statistics(diagnostics, "full") == (
        "2  NG001      transform-under-no-grad\n"
        "1  NG004  [*] no-grad-under-forward-mode\n"
    )
    assert json.loads(output.statistics(diagnostics, "json")) == [
        {"code": "NG001", "name": "transform-under-no-grad", "count": 2, "fixable": False},
        {"code": "NG004", "name": "no-grad-under-forward-mode", "count": 1, "fixable": True},
    ]


def test_rule_page_found_for_documented_rule_only():
    assert "NG001" in output.rule_page("NG001")
    assert output.rule_page("NG999") is None


@pytest.mark.parametrize("source, col, end_col, shown, carets", [
    ('s = "\x1b]0;owned\x07"; vmap(f)(x)', 19, 23, 's = "\\x1b]0;owned\\x07"; vmap(f)(x)', " " * 24 + "^^^^"),
    ("x = '\x1b[2J'  # clear", 1, 2, "x = '\\x1b[2J'  # clear", "^"),
    ("\tx = '\x9b31m' + \x7f", 6, 12, "\tx = '\\x9b31m' + \\x7f", "\t    " + "^" * 9),  # C1 and DEL too
    ("y = '\x0c\x00'", 6, 8, "y = '\\x0c\\x00'", " " * 5 + "^" * 8),
])
def test_full_escapes_control_characters_in_the_source(source, col, end_col, shown, carets):
    """A file must not drive the terminal (set its title, clear it): control characters are shown
    escaped, and the carets stay under the characters they point at."""
    diagnostic = Diagnostic("NG001", "m", "a.py", 1, col, 1, end_col, source_line=source + "\n")
    lines = output.render([diagnostic], "full").splitlines()
    assert lines[2] == "1 | " + shown and lines[3] == "  | " + carets
    assert not any(char in output.render([diagnostic], "full", color=True).replace("\x1b[", "")
                   for char in "\x1b\x07\x9b\x7f\x00\x0c")


def test_concise_escapes_control_characters_in_a_path():
    diagnostic = Diagnostic("NG001", "m", "a\x1b]0;x\x07.py", 1, 1, 1, 2)
    assert output.render([diagnostic], "concise") == "a\\x1b]0;x\\x07.py:1:1: NG001 m\n"
