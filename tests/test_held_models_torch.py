"""Models held by objects, built from a registry a package fills as it is imported, or handed
back by a function (projects/held_models): `Divergence(net)` hands `self.net` to a helper
applying `jacfwd`, `prepare(net)` returns `net.eval()`. Each
function of `pkg/train.py` returns what its objective computes in forward and in reverse mode:
`check` reports a region exactly when the two differ, and never a region only run eagerly."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from lint_nograd import cli  # noqa: E402

PROJECT = Path(__file__).parent / "fixtures" / "projects" / "held_models"
# each function of pkg/train.py, and the region its objective's transform reaches (None: no region)
REACHES = {"held": "pkg/models.py:7", "held_from_a_registry": "pkg/zoo/mlp.py:10",
           "held_from_a_registry_without_region": None, "prepared": "pkg/models.py:28"}


def test_reported_exactly_where_forward_and_reverse_mode_differ(capsys, monkeypatch):
    monkeypatch.chdir(PROJECT)
    cli.main(["check", "--no-cache", "--output-format", "json", "."])
    reported = {f"{f['filename']}:{f['location']['row']}"
                for f in json.loads(capsys.readouterr().out) if f["code"] == "NG004"}
    monkeypatch.syspath_prepend(str(PROJECT))
    try:
        from pkg import train
        x = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
        differs = {name: not torch.allclose(*getattr(train, name)(x.clone())) for name in REACHES}
        train.monitored(x)  # the look-alikes' regions run, eagerly
        train.prepared_eagerly(x)
    finally:
        for name in [name for name in sys.modules if name == "pkg" or name.startswith("pkg.")]:
            del sys.modules[name]
    assert differs == {name: region is not None for name, region in REACHES.items()}
    assert reported == {region for region in REACHES.values() if region is not None}
