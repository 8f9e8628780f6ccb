"""`lint-nograd fix` as a libcst codemod, for projects that run their rewrites with libcst:

    python -m libcst.tool codemod -x --no-format lint_nograd.codemod.StopGradientCommand PATH

`-x` makes libcst import the command by its full module path; without it, libcst looks the
command up under the `modules` its `.libcst.codemod.yaml` lists (by default only its own), so
with `modules: [lint_nograd]` in that file the command is `codemod.StopGradientCommand`.
`--no-format` is needed either way: libcst otherwise pipes every changed file through its
configured formatter (`black` by default) and fails when it is not installed.

Each file is fixed as `lint-nograd fix` would fix it: with the `[tool.lint-nograd]` settings of
the nearest pyproject.toml above it (`select`, `ignore`, `per-file-ignores`, `stop-gradient`,
`unsafe-fixes`).
"""
from __future__ import annotations

from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodCommand, SkipFile

from lint_nograd.fix.rewrite import FIXABLE_CODES, fix_text
from lint_nograd.fix.settings import FixSettings
from lint_nograd.run.config import DEFAULT_STOP_GRADIENT, ConfigError, load_config, select_rules


class StopGradientCommand(CodemodCommand):
    DESCRIPTION = ("Rewrite torch.no_grad(), set_grad_enabled(False) and inference_mode() regions that a "
                   "function transform or tracer reaches so that stop_gradient(...) cuts the values they compute "
                   "(lint-nograd NG004, NG005, NG006), with the project's [tool.lint-nograd] settings; regions "
                   "it cannot rewrite safely stay as they are.")

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        path = Path(self.context.filename).resolve() if self.context.filename else None
        try:
            config = load_config(cwd=path.parent if path else None)
        except ConfigError as error:
            raise SkipFile(str(error)) from None
        codes = select_rules([config.rules]) & FIXABLE_CODES
        if path is not None:
            codes -= config.ignored_codes(path)
        settings = FixSettings(config.stop_gradient or DEFAULT_STOP_GRADIENT, bool(config.unsafe_fixes))
        code = tree.code
        new_code = fix_text(code, codes, settings) if codes else code
        return tree if new_code == code else cst.parse_module(new_code)
