"""What a run of `check` is handed to finish its findings with fixes (`run.jobs.Fixes`): a run
never imports this layer, and the layer's analysis is loaded only once a finding needs a fix."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lint_nograd.fix.settings import FixSettings

if TYPE_CHECKING:
    from lint_nograd.analysis.model import SemanticModel
    from lint_nograd.report.diagnostics import Diagnostic
    from lint_nograd.run.engine import ParsedFile


@dataclass(frozen=True)
class Fixer:
    settings: FixSettings = FixSettings()

    @property
    def cache_key(self) -> bytes:
        return self.settings.cache_key

    def attach_fixes(self, diagnostics: list[Diagnostic], region_findings: list, parsed: ParsedFile,
                     model: SemanticModel) -> list[Diagnostic]:
        from lint_nograd.fix import rewrite  # loads libcst only to write a fix

        return rewrite.attach_fixes(diagnostics, region_findings, parsed, model, self.settings)
