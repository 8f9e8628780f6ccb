"""`lint-nograd fix` as a libcst codemod, for projects that run their rewrites with libcst:

    python -m libcst.tool codemod -x --no-format lint_nograd.codemod.StopGradientCommand PATH

`-x` makes libcst import the command by its full module path; without it, libcst looks the
command up under the `modules` its `.libcst.codemod.yaml` lists (by default only its own), so
with `modules: [lint_nograd]` in that file the command is `codemod.StopGradientCommand`.
`--no-format` is needed either way: libcst otherwise pipes every changed file through its
configured formatter (`black` by default) and fails when it is not installed.
"""
from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodCommand

from lint_nograd.fix import fix_text


class StopGradientCommand(CodemodCommand):
    DESCRIPTION = ("Rewrite torch.no_grad(), set_grad_enabled(False) and inference_mode() regions that a "
                   "function transform or tracer reaches into stop_gradient(...) on the values they compute "
                   "(lint-nograd NG004, NG005, NG006); regions it cannot rewrite safely stay as they are.")

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        code = tree.code
        new_code = fix_text(code)
        return tree if new_code == code else cst.parse_module(new_code)
