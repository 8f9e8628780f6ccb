"""The library table (lint_nograd/analysis/library.py) run with PyTorch: each file of
fixtures/library/ uses one row (a copy, a wrapper, a hook, a call that calls its argument, a
partial of an entry point, a dataclass field's factory, `functionalize`) and defines `measure(x)`, which returns what the code computes and
what it would compute if the region were respected. `check` reports the file exactly when the two
differ: the row lets reach see a region that changes a result, and its look-alikes stay silent."""
from __future__ import annotations

import importlib.util
import json
import socket
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from lint_nograd import cli  # noqa: E402
from lint_nograd.analysis import library  # noqa: E402

CASES = sorted((Path(__file__).parent / "fixtures" / "library").glob("*.py"))
X = torch.tensor([1.0, 2.0, 4.0])


def measured(path: Path):
    spec = importlib.util.spec_from_file_location(f"library_case_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DataParallel without GPUs, checkpoint's defaults
        spec.loader.exec_module(module)
        try:
            return module.measure(X)
        except (RuntimeError, NotImplementedError) as error:
            # older releases run no forward mode through checkpoint (its autograd.Function has no
            # jvp or vmap rule): the region cannot change a result there, it raises
            if path.stem == "checkpoint" and ("vmap support" in str(error) or "jvp function" in str(error)):
                pytest.skip(f"torch {torch.__version__} has no forward mode through checkpoint")
            raise


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_reported_exactly_where_the_region_changes_the_result(path: Path, capsys):
    cli.main(["check", "--no-cache", "--output-format", "json", str(path)])
    findings = json.loads(capsys.readouterr().out)
    as_run, respected = measured(path)
    changed = not torch.allclose(as_run, respected)
    assert bool(findings) == changed, (findings, as_run, respected)
    assert all(f["code"] in ("NG004", "NG005") and f["severity"] == "error" for f in findings)


def test_every_row_has_a_case():
    text = "\n".join(path.read_text() for path in CASES)
    spelled = {"copy.deepcopy": "copy.deepcopy(", "torch.nn.DataParallel": "nn.DataParallel(",
               "torch.utils.checkpoint.checkpoint": "checkpoint(", "register_forward_hook": "register_forward_hook(",
               "functools.partial": "partial(make_fx", "dataclasses.field": "field(default_factory="}
    for row, spelling in spelled.items():
        assert spelling in text, row
    assert "copy.deepcopy" in library.RETURNS_ARGUMENT and "torch.nn.DataParallel" in library.WRAPS_AS_MODULE
    assert "dataclasses.field" in library.RETURNS_CALL_OF
    assert "torch.utils.checkpoint.checkpoint" in library.CALLS_ARGUMENT
    assert "register_forward_hook" in library.REGISTERS_HOOK


def test_distributed_data_parallel_runs_its_module_and_holds_it():
    """The row for DistributedDataParallel: calling it runs the module, and `.module` is it (one process, gloo)."""
    import torch.distributed as dist

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        net = torch.nn.Linear(3, 3)
        wrapped = torch.nn.parallel.DistributedDataParallel(net)
        assert wrapped.module is net
        assert torch.equal(wrapped(X), net(X))
    finally:
        dist.destroy_process_group()
