"""lint-nograd: find and fix torch.no_grad() regions that function transforms and tracers misread.

`import lint_nograd` never imports torch; `stop_gradient` loads the runtime shim on first use.
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["stop_gradient", "__version__"]


def __getattr__(name: str):
    if name == "stop_gradient":
        from lint_nograd.shim import stop_gradient

        # bound once, and __getattr__ removed: CPython does not specialize attribute lookups on
        # a module that has one, which costs a tenth of a detach() per lint_nograd.stop_gradient
        globals()["stop_gradient"] = stop_gradient
        globals().pop("__getattr__", None)
        return stop_gradient
    raise AttributeError(f"module 'lint_nograd' has no attribute {name!r}")
