"""`lint-nograd fix` as a libcst codemod, for projects that run their rewrites with libcst:

    python -m libcst.tool codemod -x --no-format lint_nograd.codemod.StopGradientCommand PATH

`-x` makes libcst import the command by its full module path; without it, libcst looks the
command up under the `modules` its `.libcst.codemod.yaml` lists (by default only its own), so
with `modules: [lint_nograd]` in that file the command is `codemod.StopGradientCommand`.
`--no-format` is needed either way: libcst otherwise pipes every changed file through its
configured formatter (`black` by default) and fails when it is not installed.

Each file is fixed as `lint-nograd fix` would fix it: with the `[tool.lint-nograd]` settings of
the nearest pyproject.toml above it (`select`, `ignore`, `per-file-ignores`, `stop-gradient`,
`unsafe-fixes`), and a region is rewritten when a transform or tracer anywhere in its project
reaches it (`jacfwd(loss)` in another module).
"""
from __future__ import annotations

import os
from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodCommand, SkipFile

from lint_nograd.fix.rewrite import FIXABLE_CODES, fix_text
from lint_nograd.fix.settings import FixSettings, declares_lint_nograd
from lint_nograd.run import runner
from lint_nograd.run.cache import Cache
from lint_nograd.run.config import (
    DEFAULT_STOP_GRADIENT,
    Config,
    ConfigError,
    load_config,
    project_root,
    select_rules,
)
from lint_nograd.run.engine import Reach
from lint_nograd.run.files import DEFAULT_EXCLUDE, compile_patterns, discover
from lint_nograd.run.jobs import Job


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
        settings = FixSettings(config.stop_gradient or DEFAULT_STOP_GRADIENT, bool(config.unsafe_fixes),
                               may_add_shim=config.stop_gradient is not None or declares_lint_nograd(config.root))
        code = tree.code
        reach = _project_reach(path, code, codes, config) if codes and path is not None else None
        new_code = fix_text(code, codes, settings, reach) if codes else code
        return tree if new_code == code else cst.parse_module(new_code)


def _project_reach(path: Path, code: str, codes: frozenset[str], config: Config) -> Reach | None:
    """What reaches the functions of the file in its whole project (None when it cannot be told)."""
    root = project_root(config, [str(path)], path.parent, isolated=False)
    patterns = compile_patterns([*(config.exclude if config.exclude is not None else DEFAULT_EXCLUDE),
                                 *config.extend_exclude])
    files = discover([str(root)], root=config.root, exclude=patterns, respect_gitignore=config.respect_gitignore,
                     cwd=root).files
    roots = [Path(os.path.normpath(root / src)) for src in config.src]
    job = Job(path, str(path), codes, code.encode("utf-8"))
    found, errors = runner.reach([job], files, roots, 1, Cache(None))
    return found.get(path)
