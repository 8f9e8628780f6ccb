"""`stop_gradient`: the identity on values that no derivative, at any level, passes through.

Imported only when used, so that `import lint_nograd` and the CLI never import torch.
"""

import copy
import dataclasses
import enum
import functools
import numbers
import types
from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence, Set
from typing import Any, Dict, List, Tuple, TypeVar

import torch
from torch.fx import Proxy
from torch.fx.experimental import proxy_tensor as _proxy_tensor
from torch.utils import _pytree as pytree

__all__ = ["stop_gradient", "MAX_DEPTH"]

_T = TypeVar("_T")
_Tensor = torch.Tensor
_DETACH = torch.ops.aten.detach.default
_is_compiling = torch.compiler.is_compiling
_is_scripting = torch.jit.is_scripting

MAX_DEPTH = 100
"""How deeply containers may nest in a value given to `stop_gradient`."""

# values that hold no tensor: returned as they are
_ATOMS = (
    type(None), bool, int, float, complex, str, bytes, bytearray, range, slice, type(Ellipsis),
    numbers.Number, enum.Enum, type, types.FunctionType, types.BuiltinFunctionType,
    types.MethodType, types.BuiltinMethodType, functools.partial, types.ModuleType,
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Generator,
    torch.SymInt, torch.SymFloat, torch.SymBool,
)  # fmt: skip


class _ForeignValue(Exception):
    """Raised inside the walk for a value it cannot look into (becomes a TypeError)."""


# -- the cut of one tensor ----------------------------------------------------------------------

_LIBRARY = torch.library.Library("lint_nograd", "DEF")
# a view of its input, like detach: no copy
_LIBRARY.define("stop_gradient(Tensor(a) self) -> Tensor(a)")
_stop_gradient_op = torch.ops.lint_nograd.stop_gradient.default


def _op_below_autograd(tensor: _Tensor) -> _Tensor:
    return tensor.detach()


def _op_autograd(tensor: _Tensor) -> _Tensor:
    # the output carries neither a grad_fn nor a forward-mode tangent: a cut in both modes
    with torch._C._AutoDispatchBelowAutograd():
        return _stop_gradient_op(tensor)


def _op_batched(tensor: _Tensor) -> _Tensor:
    # vmap's fallback refuses view ops: cut the unbatched tensor, then put the batch back
    from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

    level = retrieve_current_functorch_interpreter().level()
    inner, batch_dim = torch._C._functorch._unwrap_batched(tensor, level)
    batched_key = torch._C.DispatchKeySet(torch._C.DispatchKey.FuncTorchBatched)
    with torch._C._ExcludeDispatchKeyGuard(batched_key):
        out = _stop_gradient_op(inner)
    return out if batch_dim is None else torch._C._functorch._add_batch_dim(out, batch_dim, level)


_LIBRARY.impl("stop_gradient", _op_below_autograd, "CompositeExplicitAutograd")
_LIBRARY.impl("stop_gradient", _op_autograd, "Autograd")
_LIBRARY.impl("stop_gradient", _op_batched, "FuncTorchBatched")
# torch.compile of a graph holding the op: functionalization needs the view spelled out
_LIBRARY.impl("stop_gradient", _op_below_autograd, "Functionalize")


def _cut_tensor(tensor: _Tensor) -> _Tensor:
    if not (tensor.is_floating_point() or tensor.is_complex()):
        return tensor
    tracer = _proxy_tensor._CURRENT_MAKE_FX_TRACER
    if tracer is not None and _DETACH in tracer.decomposition_table:
        # this make_fx records detach as aten.alias, no cut (torch 2.14 by default: pytorch PR
        # 186845; any release given core_aten_decompositions()): record an opaque cut instead
        return _stop_gradient_op(tensor)
    return tensor.detach()


# -- the walk through containers ----------------------------------------------------------------


def _cut(value: Any, strict: bool, depth: int) -> Any:
    """`value` with every floating and complex tensor cut; the same object when nothing changed."""
    if isinstance(value, _Tensor):
        return _cut_tensor(value)
    if isinstance(value, _ATOMS):
        return value
    if isinstance(value, Proxy):
        # an fx.Proxy is not a Tensor, and may stand for a tensor, a tuple (`x.max(0)`) or anything
        # else: record the cut itself, to run on the real value (pytorch issue 62043)
        if _gives_one_tensor(value.node):
            return value.detach()  # a node every consumer of fx graphs knows, jit.script included
        return value.tracer.create_proxy("call_function", stop_gradient, (value,), {})
    if depth >= MAX_DEPTH:
        raise ValueError(
            f"stop_gradient: the value nests containers more than {MAX_DEPTH} levels deep "
            "(or a container holds itself)"
        )
    depth += 1
    kind = type(value)
    if kind is tuple or kind is list:
        items = [_cut(item, strict, depth) for item in value]
        return value if _same(items, value) else kind(items)
    if kind is dict:
        items = {key: _cut(item, strict, depth) for key, item in value.items()}
        return value if _same(items.values(), value.values()) else items
    if isinstance(value, tuple):  # namedtuple, torch.Size, torch.return_types, any subclass
        items = [_cut(item, strict, depth) for item in value]
        if _same(items, value):
            return value
        # a namedtuple takes its fields one by one (the Dynamo of torch 2.5 cannot look up _make)
        return _rebuilt(value, lambda: kind(*items) if hasattr(value, "_fields") else kind(items))
    if kind in pytree.SUPPORTED_NODES:  # OrderedDict, deque, types registered by their authors
        node = pytree.SUPPORTED_NODES[kind]
        children, context = node.flatten_fn(value)
        items = [_cut(child, strict, depth) for child in children]
        if _same(items, children):
            return value
        return _rebuilt(value, lambda: node.unflatten_fn(items, context))
    if isinstance(value, Mapping) or dataclasses.is_dataclass(value):  # a class is an atom
        return _cut_fields_and_items(value, strict, depth)
    if isinstance(value, (Sequence, Set)) and not _is_numpy(value):
        items = [_cut(item, strict, depth) for item in value]
        if _same(items, value):
            return value
        if isinstance(value, MutableSequence):
            return _rebuilt(value, lambda: _copy_with_items(value, enumerate(items)))
        return _rebuilt(value, lambda: kind(items))
    if _is_numpy(value) or not strict:
        return value  # a numpy array holds no autograd state
    raise _ForeignValue(value)


def _gives_one_tensor(node: torch.fx.Node) -> bool:
    """Whether an fx node calls an ATen operator every overload of which returns one tensor
    (`x.mean()`, `torch.tanh`), by torch's own schemas; `x.max(0)` may return a tuple."""
    if node.op == "call_method":
        name = node.target
    elif node.op == "call_function":
        name = getattr(node.target, "__name__", "")
    else:
        return False  # an input, or a submodule's output: anything
    return _returns_one_tensor(name)


@functools.lru_cache(maxsize=None)
def _returns_one_tensor(name: str) -> bool:
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    return bool(schemas) and all(
        len(schema.returns) == 1 and str(schema.returns[0].type) == "Tensor" for schema in schemas
    )


def _same(items, originals) -> bool:
    # Dynamo cannot compare containers by identity: compiled code always gets new ones
    if _is_compiling():
        return False
    return all(item is original for item, original in zip(items, originals))


def _is_numpy(value: Any) -> bool:
    return type(value).__module__ == "numpy"


def _cut_fields_and_items(value: Any, strict: bool, depth: int) -> Any:
    """A dataclass (its fields), a mapping (its items), or both (transformers' `ModelOutput`)."""
    changed_items = {}
    if isinstance(value, Mapping):
        for key, item in value.items():
            cut = _cut(item, strict, depth)
            if cut is not item:
                changed_items[key] = cut
    changed_fields = {}
    if dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            original = getattr(value, field.name)
            if field.name in changed_items and value[field.name] is original:
                cut = changed_items[field.name]  # ModelOutput: one tensor, field and item alike
            else:
                cut = _cut(original, strict, depth)
            if cut is not original:
                changed_fields[field.name] = cut
    if not changed_items and not changed_fields:
        return value

    def rebuild():
        if isinstance(value, Mapping) and not isinstance(value, MutableMapping):
            new = type(value)({**value, **changed_items})
        else:
            new = copy.copy(value)
            for key, item in changed_items.items():
                new[key] = item
        for name, cut in changed_fields.items():
            object.__setattr__(new, name, cut)  # frozen dataclasses too
        return new

    return _rebuilt(value, rebuild)


def _copy_with_items(value: Any, items) -> Any:
    new = copy.copy(value)
    for key, item in items:
        new[key] = item
    return new


def _rebuilt(value: Any, rebuild) -> Any:
    try:
        new = rebuild()
    except Exception as error:
        raise TypeError(
            f"stop_gradient: cannot rebuild a value of type {_type_name(value)} with its tensors "
            f"cut ({error})"
        ) from error
    if type(new) is not type(value):
        raise TypeError(
            f"stop_gradient: rebuilding a value of type {_type_name(value)} gave a "
            f"{_type_name(new)}"
        )
    return new


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _cut_what_can_be_seen(value: _T) -> _T:
    """For the shim's own results (torch.func's outputs, `has_aux` values): objects it cannot look
    into are returned as they are, as torch.func returns them."""
    return _cut(value, strict=False, depth=0)


# What TorchScript compiles a call of stop_gradient as, by the type of its value (it reads these
# annotations as objects: no `from __future__ import annotations` in this module); the walk is Python
# that TorchScript cannot compile, and these are the values scripted code can hold.
@torch.jit._overload
def stop_gradient(value: _Tensor) -> _Tensor: ...  # noqa: E704
@torch.jit._overload
def stop_gradient(value: Tuple[_Tensor, _Tensor]) -> Tuple[_Tensor, _Tensor]: ...  # noqa: E704, F811
@torch.jit._overload
def stop_gradient(value: Tuple[_Tensor, _Tensor, _Tensor]  # noqa: F811
                  ) -> Tuple[_Tensor, _Tensor, _Tensor]: ...  # noqa: E704
@torch.jit._overload
def stop_gradient(value: List[_Tensor]) -> List[_Tensor]: ...  # noqa: E704, F811
@torch.jit._overload
def stop_gradient(value: Dict[str, _Tensor]) -> Dict[str, _Tensor]: ...  # noqa: E704, F811


def stop_gradient(value: _T) -> _T:  # noqa: F811
    """Return `value` unchanged, a constant to every reverse- and forward-mode level (as in JAX).

    `value` may be a tensor or any container of them: tuples, lists, dicts, sets, namedtuples,
    dataclasses (their fields), mappings and sequences of any subclass (`OrderedDict`, Hugging
    Face's `ModelOutput`, `torch.Size`, ...) and types registered with
    `torch.utils._pytree.register_pytree_node`, nested to `MAX_DEPTH` levels. A container comes
    back with its own type; one that holds nothing to cut comes back as the same object.
    Floating and complex tensors are replaced by `tensor.detach()`, which shares their storage
    (no copy). Integer and bool tensors, numbers, strings, None, functions, classes, torch
    dtypes and devices and numpy values are returned as they are.

    Every tracer records the cut: `torch.fx.symbolic_trace` (a `Proxy` is detached when torch's
    schemas say its op gives one tensor, else the graph calls `stop_gradient` on the real value,
    so `stop_gradient(x.max(0))` traces), `torch.jit.trace` (the same graph with grad mode on or
    off, as its check needs), `torch.compile`, `torch.export` and `make_fx`. Where `make_fx` would
    record `detach` as a plain alias (its default on torch 2.14, pytorch PR 186845, or a
    decomposition table that decomposes `detach`), the cut is the opaque operator
    `torch.ops.lint_nograd.stop_gradient`, which has the same value and no derivative in either
    mode, under `vmap` too. `torch.jit.script` compiles a call of it on a tensor, a tuple of two or
    three tensors, a list of tensors or a dict of them by name (each tensor detached); a module
    scripted so is saved and loaded without lint_nograd.

    Unlike `with torch.no_grad():`, it stops forward mode as well (pytorch issue 78961) and
    survives tracing (pytorch issue 62043). Unlike `no_grad`, the expression it wraps is
    still recorded by autograd while it runs, and the graph is freed at the cut.

    Raises `TypeError`, naming the type, for any other object, which may hold tensors that it
    cannot see (register the type as a pytree node, or pass its tensors), and `ValueError` for
    containers nested more than `MAX_DEPTH` deep or holding themselves.
    """
    if _is_scripting():  # compiled for each overload above; in Python, never taken
        if isinstance(value, _Tensor):
            return value.detach()
        if isinstance(value, Tuple[_Tensor, _Tensor]):
            return value[0].detach(), value[1].detach()
        if isinstance(value, Tuple[_Tensor, _Tensor, _Tensor]):
            return value[0].detach(), value[1].detach(), value[2].detach()
        if isinstance(value, List[_Tensor]):
            return [item.detach() for item in value]
        if isinstance(value, Dict[str, _Tensor]):
            return {key: item.detach() for key, item in value.items()}
    # one tensor outside make_fx is the common case: straight to detach
    if type(value) is _Tensor and _proxy_tensor._CURRENT_MAKE_FX_TRACER is None:
        # one detach, on one line, whatever the grad mode: `jit.trace` checks its graph by running
        # the function again under no_grad, and a detach from another line is another graph
        if value.requires_grad or value.is_floating_point() or value.is_complex():
            return value.detach()
        return value
    return _cut_all(value)


def _cut_all(value: _T) -> _T:  # not in stop_gradient's body, which TorchScript parses whole: no `try` there
    try:
        return _cut(value, strict=True, depth=0)
    except _ForeignValue as foreign:
        (inside,) = foreign.args
        raise TypeError(
            f"stop_gradient cannot look into a value of type {_type_name(inside)}, which may "
            "hold tensors: "
            "pass the tensors themselves, make the type a dataclass, or register it with "
            "torch.utils._pytree.register_pytree_node"
        ) from None

