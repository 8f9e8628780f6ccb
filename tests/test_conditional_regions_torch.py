"""Regions entered on a condition (fixtures/checker/ng004_conditional_regions.py), run with PyTorch:
each one `check` reports changes the result exactly when its flag enters it, and the look-alike
that chooses `enable_grad()` changes nothing."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.func import jacfwd, jacrev  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "checker" / "ng004_conditional_regions.py"
X = torch.tensor([1.0, 2.0, 4.0])


@pytest.fixture(scope="module")
def fixture():
    spec = importlib.util.spec_from_file_location("ng004_conditional_regions", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def traced_gradient(net):
    x = X.clone().requires_grad_()
    torch.jit.trace(net, (X,))(x).sum().backward()
    return x.grad


def eager_gradient(net):
    x = X.clone().requires_grad_()
    net(x).sum().backward()
    return x.grad


@pytest.mark.parametrize("name", ["FrozenByFlag", "ChosenContext", "ChosenInline", "FrozenByStatement"])
def test_forward_mode_ignores_the_region_when_the_flag_enters_it(fixture, name):
    frozen, thawed = getattr(fixture, name)(frozen=True), getattr(fixture, name)(frozen=False)
    assert not torch.allclose(jacfwd(frozen)(X), jacrev(frozen)(X))
    assert torch.allclose(jacfwd(thawed)(X), jacrev(thawed)(X))


def test_a_tracer_drops_the_region_when_the_flag_enters_it(fixture):
    """The same regions under `torch.jit.trace` (NG005 where a tracer reaches them)."""
    frozen, thawed = fixture.ChosenInline(frozen=True), fixture.ChosenInline(frozen=False)
    assert not torch.allclose(traced_gradient(frozen), eager_gradient(frozen))
    assert torch.allclose(traced_gradient(thawed), eager_gradient(thawed))


def test_enable_grad_chosen_by_a_flag_changes_nothing(fixture):
    for tuning in (True, False):
        net = lambda x: fixture.GradChosenOn()(x, tuning)  # noqa: E731
        assert torch.allclose(jacfwd(net)(X), jacrev(net)(X))


def test_putting_back_the_mode_read_before_changes_nothing(fixture):
    """`set_grad_enabled(previous)` with `previous = torch.is_grad_enabled()`: the same Jacobians,
    and grad mode is back as it was after the call, also under `no_grad`."""
    net = fixture.RestoredAround()
    assert torch.allclose(jacfwd(net)(X), jacrev(net)(X))
    with torch.no_grad():
        net(X)
        assert not torch.is_grad_enabled()
