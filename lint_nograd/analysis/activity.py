"""What torch and Python do to derivatives, as data: the operations whose value carries no
derivative whatever it reads, and the calls whose value goes nowhere the computation reads.

Activity analysis (Hascoët and Pascual, Tapenade; Enzyme) calls a value *active* when it is
varied (it depends on an input being differentiated) and useful (it influences an output being
differentiated). A grad-disabled region can change what a transform or tracer returns only by
computing an active value (`analysis/region_flow.py`). What this module names is inactive by the
operation alone:

- integers and booleans: indices (`argmax`, `topk(...).indices`, `nonzero`, `n // 2`), comparisons and
  masks, counts, `.item()` and `.tolist()` (Python numbers), `.long()`, `len`, and reads of shape,
  dtype and device: no derivative flows through them in any mode;
- new tensors: factories (`torch.zeros(n)`, `torch.randn_like(x)`, `x.new_ones(...)`), whose
  values do not depend on what they are given but its shape;
- cuts: `.detach()`, `stop_gradient(...)`, `.numpy()`;
- a function value (`lambda`): its body runs when it is called, in its caller's grad mode.

Sinks return nothing to the computation: printing, `logging`, `warnings`, a logger's methods,
`self.log(...)` (Lightning's, which records), a summary writer's `add_*`.
"""
from __future__ import annotations

import ast

INTEGER_METHODS = frozenset({
    "argmax", "argmin", "argsort", "nonzero", "item", "tolist", "long", "int", "short", "bool", "byte",
    "char", "numel", "nelement", "dim", "ndimension", "size", "stride", "element_size", "data_ptr",
    "is_contiguous", "is_floating_point", "is_complex", "is_nonzero", "eq", "ne", "lt", "le", "gt", "ge",
    "greater", "less", "equal", "allclose", "isclose", "isnan", "isinf", "isfinite", "isneginf", "isposinf",
    "isreal", "any", "all", "logical_and", "logical_or", "logical_not", "logical_xor", "count_nonzero",
    "bincount", "get_device"})
_NEW_TENSOR_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "detach",
                                 "numpy", "detach_"})
# `values, indices` results: their `.indices` (or element 1, with a dimension given) are integers
_INDEXED_RESULTS = frozenset({"topk", "sort", "max", "min", "median", "nanmedian", "mode", "kthvalue",
                              "cummax", "cummin", "aminmax"})
_TORCH_INTEGER = frozenset({
    "argmax", "argmin", "argsort", "argwhere", "nonzero", "numel", "eq", "ne", "lt", "le", "gt", "ge",
    "greater", "less", "equal", "allclose", "isclose", "isnan", "isinf", "isfinite", "isin", "any", "all",
    "logical_and", "logical_or", "logical_not", "logical_xor", "count_nonzero", "bincount", "bucketize",
    "searchsorted", "is_tensor", "is_floating_point", "is_complex", "tril_indices", "triu_indices"})
_TORCH_NEW = frozenset({
    "zeros", "ones", "empty", "full", "eye", "arange", "range", "linspace", "logspace", "rand", "randn",
    "randint", "randperm", "bernoulli", "multinomial", "normal", "tensor", "zeros_like", "ones_like",
    "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "get_default_dtype", "finfo",
    "iinfo", "manual_seed", "initial_seed", "Generator", "device", "Size"})
NO_DERIVATIVE_CALLS = frozenset(
    {f"torch.{name}" for name in _TORCH_INTEGER | _TORCH_NEW}
    | {f"torch.Tensor.{name}" for name in INTEGER_METHODS | _NEW_TENSOR_METHODS}
    | {"numpy.asarray", "numpy.array", "math.floor", "math.ceil", "math.isnan", "math.isinf", "math.isfinite",
       "math.prod", "math.sqrt", "math.log", "math.exp", "math.pow", "operator.index"})
INTEGER_BUILTINS = frozenset({"len", "int", "bool", "float", "complex", "str", "repr", "format", "isinstance",
                               "issubclass", "hasattr", "callable", "id", "hash", "type", "range", "enumerate",
                               "chr", "ord", "bin", "hex", "oct"})
_INTEGER_DTYPES = frozenset({f"torch.{name}" for name in (
    "long", "int", "int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64", "short", "bool")})
# Methods whose value carries a derivative only where their receiver does.
_COPIES = frozenset({"clone", "cpu", "cuda", "float", "double", "half", "contiguous", "to", "squeeze", "unsqueeze",
                     "flatten", "view", "reshape"})
PLAIN_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda", "is_sparse", "names",
                               "is_leaf", "requires_grad", "indices_dtype"})

# Builtins and `collections` types whose call makes a container that code may add to.
CONTAINER_TYPES = frozenset({"list", "dict", "set", "defaultdict", "deque", "OrderedDict", "Counter"})


def makes_container(value: ast.expr | None) -> bool:
    """`list()`, `defaultdict(list)`, `collections.deque()`: a call of one of `CONTAINER_TYPES`."""
    func = value.func if isinstance(value, ast.Call) else None
    return (func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "") \
        in CONTAINER_TYPES


SINK_CALLS = frozenset({"print", "warnings.warn", "wandb.log", "pprint.pprint"})
_SINK_MODULES = ("logging.",)
_LOGGER_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})
_SELF_SINK_METHODS = frozenset({"log", "log_dict", "print"})  # Lightning's LightningModule records


def no_derivative(node: ast.AST, names_of) -> bool:
    """Whether the value of `node` carries no derivative whatever it reads: the operation alone
    says so. `names_of(expr)` gives the qualified names an expression may refer to, and () for a
    name bound in the program (an empty set for a builtin)."""
    if isinstance(node, (ast.Compare, ast.Lambda, ast.JoinedStr)):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) \
            or isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
        return True  # (`x // 2` is a step function: its derivative is zero)
    if isinstance(node, ast.Attribute):
        return node.attr in PLAIN_ATTRIBUTES or node.attr == "indices" and _indexed_result(node.value, names_of)
    if isinstance(node, ast.Subscript):  # `x.max(1)[1]`, `torch.topk(x, 3)[1]`
        index = node.slice
        return isinstance(index, ast.Constant) and index.value == 1 \
            and _indexed_result(node.value, names_of, dimension=True)
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    names = names_of(func)
    if names is None:  # a builtin
        return isinstance(func, ast.Name) and func.id in INTEGER_BUILTINS
    if names:
        return all(name in NO_DERIVATIVE_CALLS or _cut_name(name) for name in names)
    if isinstance(func, ast.Attribute):
        if func.attr in INTEGER_METHODS or func.attr in _NEW_TENSOR_METHODS:
            return True
        if func.attr in _COPIES and all(isinstance(arg, ast.Constant) or no_derivative(arg, names_of)
                                        for arg in node.args) and no_derivative(func.value, names_of):
            return True  # `x.detach().clone()`, `x.argmax(-1).cpu()`
        if func.attr in ("to", "type"):  # `x.to(torch.long)`, `x.type(torch.int64)`, `x.to(dtype=torch.bool)`
            given = [*node.args, *(k.value for k in node.keywords if k.arg == "dtype")]
            return any(names_of(arg) and names_of(arg) <= _INTEGER_DTYPES for arg in given)
    return False


def _cut_name(name: str) -> bool:
    return name.rpartition(".")[2] == "stop_gradient"


def _indexed_result(node: ast.expr, names_of, dimension: bool = False) -> bool:
    """`x.topk(3)`, `torch.max(x, dim=1)`: a call giving (values, indices); with `dimension`, one
    given a dimension (`x.max()` alone gives one value)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Attribute, ast.Name)):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id
    names = names_of(func)
    if name not in _INDEXED_RESULTS or names is None or any(not n.startswith("torch.") for n in names):
        return False  # the builtin `max`, or a function of the program
    if not dimension or name in ("topk", "sort", "kthvalue", "aminmax"):
        return True
    function = bool(names)  # `torch.max(x, 1)`: the tensor is an argument
    return len(node.args) > function or any(k.arg == "dim" for k in node.keywords)


def is_sink(call: ast.Call, names_of) -> bool:
    """A call whose value goes nowhere the computation reads: `print(...)`, `logger.info(...)`,
    `warnings.warn(...)`, `self.log(...)`, `writer.add_scalar(...)`."""
    func = call.func
    names = names_of(func)
    if names is None:
        return isinstance(func, ast.Name) and func.id == "print"
    if names:
        return all(name in SINK_CALLS or name.startswith(_SINK_MODULES) for name in names)
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, (ast.Name, ast.Attribute)):
        return False
    receiver = func.value.id if isinstance(func.value, ast.Name) else func.value.attr
    if receiver == "self":
        return func.attr in _SELF_SINK_METHODS
    receiver = receiver.lower()
    return func.attr in _LOGGER_METHODS and ("log" in receiver) or (
        func.attr.startswith("add_") and "writer" in receiver)
