"""The PyTorch names the rules know, by every qualified name they are reachable under."""
from __future__ import annotations

# Grad-mode context managers. `torch.autograd.grad_mode` is where they are defined.
_GRAD_MODE_MODULES = ("torch", "torch.autograd", "torch.autograd.grad_mode")
NO_GRAD = frozenset(f"{m}.no_grad" for m in _GRAD_MODE_MODULES)
ENABLE_GRAD = frozenset(f"{m}.enable_grad" for m in _GRAD_MODE_MODULES)
SET_GRAD_ENABLED = frozenset(f"{m}.set_grad_enabled" for m in _GRAD_MODE_MODULES)
INFERENCE_MODE = frozenset(f"{m}.inference_mode" for m in _GRAD_MODE_MODULES)

# The text a file must contain for any grad-disabling region to be spelled in it: the engine's gate.
GRAD_DISABLING_WORDS = ("no_grad", "set_grad_enabled", "inference_mode")

# Automatic-differentiation transforms, by the name they have in torch.func.
REVERSE_MODE = frozenset({"grad", "grad_and_value", "vjp", "jacrev"})
FORWARD_MODE = frozenset({"jvp", "jacfwd", "hessian", "linearize"})  # hessian = jacfwd(jacrev(f))
AD_TRANSFORMS = REVERSE_MODE | FORWARD_MODE
# These differentiate when called, `vjp(f, x)`; the others return a function to call.
IMMEDIATE_TRANSFORMS = frozenset({"vjp", "jvp", "linearize"})
_TRANSFORM_PREFIXES = ("torch.func.", "functorch.", "torch._functorch.")

VMAP = frozenset({"torch.vmap", "torch.func.vmap", "functorch.vmap", "torch._functorch.apis.vmap"})

# Tracers that drop grad-mode changes from the graph they record (pytorch issue 62043).
SYMBOLIC_TRACE = frozenset({"torch.fx.symbolic_trace", "torch.fx._symbolic_trace.symbolic_trace"})
JIT_TRACE = frozenset({"torch.jit.trace", "torch.jit._trace.trace"})
MAKE_FX = frozenset({"torch.fx.experimental.proxy_tensor.make_fx", "functorch.make_fx",
                     "functorch.compile.make_fx"})

AUTOGRAD_GRAD = frozenset({"torch.autograd.grad"})
AUTOGRAD_BACKWARD = frozenset({"torch.autograd.backward"})

PARTIAL = frozenset({"functools.partial"})


def transform_name(qualified_names: frozenset[str]) -> str | None:
    """`grad` for `torch.func.grad`, `functorch.grad` or `functorch._src.eager_transforms.grad`."""
    for name in qualified_names:
        if name.startswith(_TRANSFORM_PREFIXES):
            last = name.rpartition(".")[2]
            if last in AD_TRANSFORMS:
                return last
    return None
