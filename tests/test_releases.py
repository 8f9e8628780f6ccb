"""The table of behaviour by torch release: importable without torch, and true of the torch here."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from lint_nograd.analysis import releases
from lint_nograd.analysis.releases import RELEASES, SUPPORTED, TESTED, Behaviour, behaviour, parse_version

ROOT = Path(__file__).resolve().parent.parent

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


@pytest.mark.parametrize(
    ("text", "version"),
    [("2.13.0+cpu", (2, 13, 0)), ("2.14.1", (2, 14, 1)), ("2.6.0rc1", (2, 6, 0)),
     ("2.15.0a0+git1234", (2, 15, 0)), ("2.5", (2, 5, 0)), ("2.10.0.dev20251101", (2, 10, 0))],
)  # fmt: skip
def test_parse_version(text, version):
    assert parse_version(text) == version


def test_bad_versions_are_a_value_error():
    for text in ("", "torch", "two.one"):
        with pytest.raises(ValueError, match="not a torch version"):
            parse_version(text)
    with pytest.raises(ValueError, match="older than the table"):
        behaviour("1.13.1")


def test_a_release_takes_the_newest_row_not_newer_than_it():
    assert behaviour("2.13.0+cpu").release == "2.13"
    assert behaviour("2.7.1").release == "2.5"  # between two rows: the older one
    assert behaviour("2.20.0").release == RELEASES[-1].release
    assert [parse_version(row.release) for row in RELEASES] == sorted(
        parse_version(row.release) for row in RELEASES
    )


def test_rows_are_frozen_plain_data():
    row = behaviour("2.14.1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.make_fx_keeps_detach = True
    with pytest.raises(TypeError):
        row.outer_inference_mode["grad"] = "zeros"
    for row in RELEASES:
        assert set(row.outer_no_grad) == set(row.outer_inference_mode) == set(releases.TRANSFORMS)
        assert set(row.keeps_region) == set(Behaviour.TRACERS)


def test_the_table_does_not_import_torch():
    code = (
        "import sys, lint_nograd.analysis.releases as r\n"
        "r.behaviour('2.13.0')\n"
        "assert 'torch' not in sys.modules, 'lint_nograd.analysis.releases imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pyproject_states_the_floor_and_no_cap():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for extra in ("torch", "test"):  # a cap would make pip replace a newer torch the user has
        assert [need for need in extras[extra] if need.startswith("torch")] == [f"torch>={SUPPORTED}"]
    assert min(TESTED, key=parse_version) == SUPPORTED
    # the newest release tested is the newest row: CI measures what the table says of it
    assert parse_version(max(TESTED, key=parse_version))[:2] == parse_version(RELEASES[-1].release)[:2]


def test_ci_and_readme_name_the_tested_releases():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    for version in TESTED:
        assert f"torch=={version}" in ci, version
        assert version in readme, version


def test_ci_lifts_the_machines_pip_cap_for_the_newest_release_only():
    """The newest release is above the cap of the machines' pip constraints: its installs, and no
    other, run with `PIP_CONSTRAINT=/dev/null`."""
    ci = (ROOT / ".ci" / "run").read_text()
    newest = max(TESTED, key=parse_version)
    assert f'newest_torch="torch=={newest}"' in ci
    lifted = [line for line in ci.splitlines() if "PIP_CONSTRAINT" in line and not line.lstrip().startswith("#")]
    assert len(lifted) == 1 and lifted[0].lstrip("& ").startswith("PIP_CONSTRAINT=/dev/null make_venv")
    assert '"$newest_torch" "$newest_torchvision"' in lifted[0]


def test_a_release_newer_than_the_table_is_its_newest_row():
    newest = RELEASES[-1]
    assert releases.assumed_row("2.99") == newest.release
    assert releases.assumed_row("3.0.1") == newest.release
    assert behaviour("2.99.0") is newest
    for row in RELEASES:
        assert releases.assumed_row(row.measured_on) is None
    assert releases.assumed_row("2.4") is None


def test_the_2_15_row_is_the_2_14_row_measured_on_2_15_0():
    row, before = behaviour("2.15.0"), behaviour("2.14.1")
    assert (row.release, row.measured_on) == ("2.15", "2.15.0")
    assert dataclasses.replace(before, release=row.release, measured_on=row.measured_on) == row


def test_the_row_of_this_release_is_what_torch_does():
    torch = pytest.importorskip("torch")
    import torch_behaviour

    row = behaviour(torch.__version__)
    if parse_version(row.measured_on)[:2] != parse_version(torch.__version__)[:2]:
        pytest.skip(f"torch {torch.__version__} has no row of its own")
    def plain(value):
        return dict(value) if isinstance(value, Mapping) else value

    expected = {
        field.name: plain(getattr(row, field.name))
        for field in dataclasses.fields(Behaviour)
        if field.name not in ("release", "measured_on")
    }
    measured = {name: plain(value) for name, value in torch_behaviour.measure().items()}
    assert measured == expected
