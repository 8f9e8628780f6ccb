"""Every rule's code, name, severity and whether `lint-nograd fix` can rewrite it.

Severities, most severe first: `error` (results are wrong, or the code raises), `warning` (right
today, wrong under another transform or tracer), `note` (right, and often meant: worth a look, never
a failed run unless `--exit-non-zero-on-note` asks). A finding may carry another severity than its
rule's: NG001 and NG002 are errors on a release where the transform misbehaves."""
from __future__ import annotations

from dataclasses import dataclass

SEVERITIES = ("error", "warning", "note")


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str
    severity: str  # "error", "warning" or "note" (shown and counted; no exit status 1 unless asked)
    fixable: bool = False


RULES: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule("NG000", "parse-error", "The file could not be read or parsed.", "error"),
        Rule("NG001", "transform-under-no-grad",
             "A torch.func transform is applied inside a no_grad region: it differentiates anyway.", "note"),
        Rule("NG002", "transform-under-inference-mode",
             "A torch.func transform is applied inside inference_mode: zeros on older releases.", "error"),
        Rule("NG003", "backward-without-graph",
             "Backward on a value computed under a grad-disabled region, which has no graph.", "error"),
        Rule("NG004", "no-grad-under-forward-mode",
             "A no_grad region in a function that forward-mode AD reaches, which ignores it.", "error", True),
        Rule("NG005", "no-grad-in-traced-function",
             "A no_grad region in a function that a tracer records, which drops it.", "error", True),
        Rule("NG006", "no-grad-in-transformed-function",
             "A no_grad region in a function that a reverse-mode transform reaches.", "warning", True),
        Rule("NG100", "unused-noqa",
             "A `# noqa: NG00x` directive that silences nothing on its line (off by default).", "warning", True),
    )
}
OFF_BY_DEFAULT = frozenset({"NG100"})  # as ruff's RUF100: asked for with `--extend-select NG100`
