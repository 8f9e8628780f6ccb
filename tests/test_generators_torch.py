"""A generator suspended inside a `with` region leaves the consumer's loop body in that mode: the
findings of fixtures/checker/ng003_generator.py and projects/generators (tests/test_reach_forms_torch.py)
are what torch does."""
from __future__ import annotations

import runpy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from test_checker_fixtures import render  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "checker" / "ng003_generator.py"


def test_backward_in_the_loop_body_fails_where_it_is_reported():
    reported = {int(line.split(":")[0]) for line in render(FIXTURE).splitlines() if " NG003 " in line}
    assert reported == {19}
    namespace = runpy.run_path(str(FIXTURE))
    model, xs = torch.nn.Linear(2, 1), [torch.ones(2)]
    with pytest.raises(RuntimeError, match="does not require grad"):
        namespace["train"](model, xs)
    namespace["train_decorated"](model, xs)
    namespace["train_after"](model, xs)
    assert model.weight.grad is not None


def test_grad_mode_inside_the_loop_body():
    namespace = runpy.run_path(str(FIXTURE))
    modes = [torch.is_grad_enabled() for _ in namespace["frozen_batches"]([torch.ones(1)])]
    assert modes == [False] and torch.is_grad_enabled()
    assert [torch.is_grad_enabled() for _ in namespace["decorated_batches"]([torch.ones(1)])] == [True]
