"""`stop_gradient`: the identity on values that no derivative, at any level, passes through.

Imported only when used, so that `import lint_nograd` and the CLI never import torch.
"""

from __future__ import annotations

from typing import Any, TypeVar

import torch
from torch.fx import Proxy
from torch.utils import _pytree as pytree

__all__ = ["stop_gradient"]

_T = TypeVar("_T")


def _stop_leaf(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return leaf.detach() if leaf.is_floating_point() or leaf.is_complex() else leaf
    # an fx.Proxy is not a Tensor and its dtype is unknown: record the detach (pytorch issue 62043)
    if isinstance(leaf, Proxy):
        return leaf.detach()
    return leaf


def stop_gradient(value: _T) -> _T:
    """Return `value` unchanged, a constant to every reverse- and forward-mode level (as in JAX).

    `value` may be a tensor or any pytree `torch.utils._pytree` knows (tuples, lists, dicts,
    namedtuples, ...). Floating and complex tensors are replaced by `tensor.detach()`, which
    shares their storage (no copy) and which every tracer records: `torch.fx.symbolic_trace`
    (a `Proxy` leaf is detached too), `torch.jit.trace`, `make_fx`, `torch.compile`,
    `torch.export`. Other leaves (integer and bool tensors, numbers, strings, None) are
    returned as they are.

    Unlike `with torch.no_grad():`, it stops forward mode as well (pytorch issue 78961) and
    survives tracing (pytorch issue 62043). Unlike `no_grad`, the expression it wraps is
    still recorded by autograd while it runs, and the graph is freed at the cut.
    """
    # one tensor is the common case: skip the pytree machinery (several times slower)
    if type(value) is torch.Tensor:
        return value.detach() if value.is_floating_point() or value.is_complex() else value
    return pytree.tree_map(_stop_leaf, value)
