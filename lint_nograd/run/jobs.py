"""What a run is asked to check (`Job`: a file and the rules for it) and what it gives back (`Outcome`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from lint_nograd.analysis.releases import default_target
from lint_nograd.report.diagnostics import Diagnostic

# Files a worker gets at once: few enough to balance the load, enough to cut messages. With fewer
# than two such chunks of work, starting worker processes costs more than doing it in this one.
CHUNK_FILES = 32
PARALLEL_MIN_FILES = CHUNK_FILES


@dataclass(frozen=True)
class Job:
    path: Path
    display_path: str
    codes: frozenset[str]
    data: bytes | None = None  # the source, when it comes from standard input
    torch_version: str = ""  # the torch release the findings are for, "2.13" ("": the default)

    @property
    def release(self) -> str:
        return self.torch_version or default_target()


@dataclass
class Outcome:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Fixes(Protocol):
    """What makes the fixes of the findings a run gives: handed in by whoever shows them (the
    command line, the editor), so that a run never imports `fix/` itself (`fix.settings.FixSettings`)."""

    @property
    def cache_key(self) -> bytes:
        """What a finding's fix depends on besides the file's bytes."""

    def attach_fixes(self, diagnostics: list, region_findings: list, parsed, model) -> list[Diagnostic]:
        """`engine.AttachFixes`: the findings, each fixable one with its fix or why there is none."""
