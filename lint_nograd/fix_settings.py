"""The settings a fix depends on, read by the command line before any analysis (this module
imports nothing heavy: a warm run answered from the cache needs no more)."""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

DEFAULT_STOP_GRADIENT = "lint_nograd.stop_gradient"
DETACH = "detach"
STOP_GRADIENT = "stop_gradient"  # the name of every function `check` knows as a cut
SAFE, UNSAFE = "safe", "unsafe"


def stop_gradient_setting_error(value: object) -> str | None:
    """Why a `stop-gradient` setting cannot be used, or None. A helper must be named `stop_gradient`:
    that is how `check` knows its calls as cuts, in any file and under any alias."""
    if value == DETACH:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+", value) \
            or any(keyword.iskeyword(part) for part in value.split(".")):
        return "must be `detach` or the import path of a function, such as `mypkg.autodiff.stop_gradient`"
    if value.rpartition(".")[2] != STOP_GRADIENT:
        return (f"names `{value.rpartition('.')[2]}`: the function must be named `{STOP_GRADIENT}`, which is how "
                "`check` knows its calls as cuts")
    return None


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
