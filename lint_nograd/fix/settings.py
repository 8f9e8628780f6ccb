"""The settings a fix depends on, read by the command line before any analysis (this module
imports nothing heavy: a warm run answered from the cache needs no more)."""
from __future__ import annotations

from dataclasses import dataclass

from lint_nograd.run.config import DEFAULT_STOP_GRADIENT, DETACH

SAFE, UNSAFE = "safe", "unsafe"


@dataclass(frozen=True)
class FixSettings:
    """`stop-gradient` and `unsafe-fixes` of `[tool.lint-nograd]`, or their command-line options."""

    stop_gradient: str = DEFAULT_STOP_GRADIENT  # "detach", or the import path of a function
    unsafe_fixes: bool = False

    @property
    def detach(self) -> bool:
        return self.stop_gradient == DETACH

    def applies(self, applicability: str) -> bool:
        return applicability == SAFE or self.unsafe_fixes

    @property
    def cache_key(self) -> bytes:
        """What a cached finding's fix depends on (the applicability does not depend on `unsafe_fixes`)."""
        return f"stop-gradient={self.stop_gradient}".encode()
