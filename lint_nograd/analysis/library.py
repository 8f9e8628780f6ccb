"""What calls into torch and the standard library do with what they are given, as data: the call
graph sees through them. One row per kind of behaviour, each name with a test in
tests/test_library_torch.py that runs it and shows a region it hides is reached.

Nothing here imports torch; names are the qualified names `Scopes.qualified_names` gives.
"""
from __future__ import annotations

from lint_nograd.analysis import tensor_ops

# Methods of a module that return the module itself: `Net().eval()` is still the `Net` instance.
RETURNS_RECEIVER = frozenset({"eval", "train", "to", "cpu", "cuda", "float", "half", "double", "bfloat16",
                              "requires_grad_", "to_empty", "share_memory", "apply", "zero_grad"})

# Calls that return their argument, or an object of the same classes that runs the same code
# (position, keyword of the argument; None: keyword only). `torch.compile(m)` runs `m` too: it is an entry point
# (entry_points), which wraps what it is given.
RETURNS_ARGUMENT = {
    "copy.deepcopy": (0, "x"),
    "copy.copy": (0, "x"),
    "builtins.staticmethod": (0, "function"),  # `loss = staticmethod(mse)` in a class body: `self.loss` is `mse`
    "dataclasses.field": (None, "default"),  # `model: Net = field(default=net)`: the field holds `net`
    "typing.cast": (1, "val"),  # `return cast(F, wrapper)` in a typed decorator
}

# Entry points whose result runs the module (or function) they are given and reads its attributes
# (`torch.compile(net)` wraps `net` in an `OptimizedModule` that looks up what it lacks on `net`).
RETURNS_ITS_MODEL = frozenset({"torch.compile"})

# Calls whose result is what calling their argument returns (position, keyword): a dataclass field's
# `default_factory`, called for each instance built without the field.
RETURNS_CALL_OF = {
    "dataclasses.field": (None, "default_factory"),
}

# Wrappers whose call runs the wrapped module and whose `.module` is it (position, keyword).
_PARALLEL = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel",
             "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
             "torch.distributed.fsdp.FullyShardedDataParallel",
             "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel")
WRAPS_AS_MODULE = {name: (0, "module") for name in _PARALLEL}
WRAPPED_ATTRIBUTE = "module"

# Calls that call what they are given (position, keyword), as the call itself: `checkpoint(block, x)`
# runs `block(x)`; `functional_call(net, params, x)` runs `net`.
CALLS_ARGUMENT = {
    "torch.utils.checkpoint.checkpoint": (0, "function"),
    "torch.utils.checkpoint.checkpoint_sequential": (0, "functions"),
    "torch.func.functional_call": (0, "module"),
    "torch._functorch.functional_call.functional_call": (0, "module"),
    "torch.nn.utils.stateless.functional_call": (0, "module"),
    "functorch.functional_call": (0, "module"),
}

# What those calls give the function they call: ("after", n) the positional arguments from n on and
# the keywords but the library's own (`checkpoint(block, x, use_reentrant=False)` runs `block(x)`);
# ("tuple", position, keyword) the elements of the tuple given there, or the one value
# (`functional_call(net, params, (x, t))` runs `net(x, t)`, with the state the dict at 1 holds).
_CHECKPOINT_OWN = ("use_reentrant", "context_fn", "determinism_check", "debug", "preserve_rng_state")
PASSES_ON = {
    "torch.utils.checkpoint.checkpoint": ("after", 1, _CHECKPOINT_OWN),
    **{name: ("tuple", 2, "args") for name, (_, keyword) in CALLS_ARGUMENT.items() if keyword == "module"},
}

# Builtins and functools calls that call the function they are given on the elements of an iterable:
# name -> ((position, keyword) of the function, None when keyword-only; position of the iterable; how
# many elements each call takes; what the call returns: "results" (a container of what the function
# returns), "elements" (a container of the iterable's elements), "element" (one of them), "result").
# `map(f, xs)` runs `f(x)` for each `x` of `xs`; `sorted(xs, key=f)` runs `f(x)`; `reduce(f, xs)` runs `f(a, x)`.
CALLS_ON_ELEMENTS = {
    "builtins.map": ((0, "func"), 1, 1, "results"),
    "builtins.filter": ((0, "function"), 1, 1, "elements"),
    "builtins.sorted": ((None, "key"), 0, 1, "elements"),
    "builtins.max": ((None, "key"), 0, 1, "element"),
    "builtins.min": ((None, "key"), 0, 1, "element"),
    "functools.reduce": ((0, "function"), 1, 2, "result"),
    "_functools.reduce": ((0, "function"), 1, 2, "result"),
}

# Methods of a module that register a function run whenever the module runs (`forward` hooks run
# around `forward`; backward hooks when its gradients are computed, inside a transform too).
REGISTERS_HOOK = frozenset({"register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
                            "register_full_backward_pre_hook", "register_backward_hook"})
HOOKS_ATTRIBUTE = "<hooks>"  # where a class keeps the hooks registered on `self`
ITEMS_ATTRIBUTE = "<items>"  # where a container class keeps what its methods store into `self[key]`


# Methods that torch's tensors and modules and Python's builtin types have: called on a parameter
# (`x.mean()`, `names.append(n)`, `model.parameters()`), they are not taken for a method of the
# project's classes the parameter may hold (which would make every such call an edge to look up).
FOREIGN_METHODS = tensor_ops.LIGHT_NAMES | tensor_ops.KNOWN_NAMES | tensor_ops.PLAIN_METHODS | \
    tensor_ops.IDENTITY_NAMES | RETURNS_RECEIVER | frozenset("""
    append extend insert pop remove clear copy count index sort reverse keys values items get setdefault
    update add discard union intersection difference issubset join format startswith endswith strip
    lstrip rstrip lower upper replace splitlines partition rpartition read write close
    readline readlines seek flush exists open mkdir glob
    detach detach_ clone numpy backward register_hook retain_grad requires_grad_ zero_ fill_ copy_ add_
    mul_ sub_ div_ clamp_ normal_ uniform_ new_zeros new_ones new_empty new_full new_tensor masked_fill_
    index_add_ scatter_ scatter_add_ unfold long int bool
    parameters named_parameters buffers named_buffers modules named_modules children named_children
    state_dict load_state_dict register_buffer register_parameter register_module add_module
    register_forward_hook register_forward_pre_hook register_full_backward_hook get_submodule
    get_parameter get_buffer zero_grad param_groups
""".split())


def argument_of(table: dict[str, tuple[int | None, str]], names: frozenset[str]) -> tuple[int | None, str] | None:
    """The (position, keyword) of the argument a row of `table` names for a call of `names`."""
    for name in names:
        found = table.get(name)
        if found is not None:
            return found
    return None
