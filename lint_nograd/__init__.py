"""lint-nograd: find and fix torch.no_grad() regions that function transforms and tracers misread.

`import lint_nograd` never imports torch; `stop_gradient` loads the runtime shim on first use.
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["stop_gradient", "__version__"]


def __getattr__(name: str):
    if name == "stop_gradient":
        from lint_nograd.shim import stop_gradient

        # bound once: later `lint_nograd.stop_gradient` lookups no longer come here
        globals()["stop_gradient"] = stop_gradient
        return stop_gradient
    raise AttributeError(f"module 'lint_nograd' has no attribute {name!r}")
