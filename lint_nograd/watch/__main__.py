"""`python -m lint_nograd.watch [options] script.py [args...]` (or a folder or zip with a
`__main__.py`, or `-m module`): run the program as `python` would, with the same output, `sys.argv`
and exit status, and report at exit every region a forward-mode transform ignored or a tracer
dropped, and every transform called inside a region."""
from __future__ import annotations

import builtins
import importlib.machinery
import io
import os
import runpy
import sys
import types
from pathlib import Path

from lint_nograd.watch.startup import FORMATS, Settings, start

USAGE = """\
usage: python -m lint_nograd.watch [--output-format text|json|sarif] [-o FILE] [--select CODES]
                                   [--ignore CODES] [--strict] [--exit-non-zero-on-note]
                                   (script.py | folder | -m module) [args ...]

Runs the program unchanged and reports, at exit, on standard error (or in FILE; `{pid}` in it
becomes each process's id, so that forked children write their own):
  NG001/NG002  a transform called inside a no_grad / inference_mode region
  NG004        a region a forward-mode transform ignored (a value computed there carried a tangent)
  NG005        a region a tracer dropped (it recorded graph nodes there)
The codes, and `# noqa` comments, are read as `check` reads them, with the settings of the nearest
pyproject.toml ([tool.lint-nograd]: select, extend-select, ignore, exit-non-zero-on-note).
  --strict                 exit 1 (when the program exits 0) on what `check` fails on: errors and
                           warnings, notes too with --exit-non-zero-on-note or the setting
"""
_VALUED = ("--output-format", "-o", "--output-file", "--select", "--ignore", "-m")


def parse(arguments: list[str]) -> tuple[Settings, str, str, list[str]]:
    """(settings, "script" or "module", its path or name, its arguments); SystemExit(2) on bad usage."""
    settings = Settings()
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        name, equals, value = argument.partition("=")
        if name in _VALUED and not equals:
            if index + 1 >= len(arguments):
                _usage_error(f"{name} needs a value")
            value, index = arguments[index + 1], index + 1
        if argument in ("-h", "--help"):
            sys.stdout.write(USAGE)
            raise SystemExit(0)
        elif name == "--output-format":
            if value not in FORMATS:
                _usage_error(f"--output-format must be one of {', '.join(FORMATS)}, not {value!r}")
            settings.output_format = value
        elif name in ("-o", "--output-file"):
            settings.output = value
        elif name in ("--select", "--ignore"):
            codes = tuple(code.strip().upper() for code in value.split(",") if code.strip())
            if name == "--select":
                settings.select = codes
            else:
                settings.ignore = codes
        elif argument == "--strict":
            settings.strict = True
        elif argument == "--exit-non-zero-on-note":
            settings.exit_non_zero_on_note = True
        elif name == "-m":
            return settings, "module", value, arguments[index + 1:]
        elif argument.startswith("-") and argument != "-":
            _usage_error(f"unknown option {argument}")
        else:
            return settings, "script", argument, arguments[index + 1:]
        index += 1
    _usage_error("give a script or -m module to run")


def _usage_error(message: str):
    sys.stderr.write(USAGE + f"error: {message}\n")
    raise SystemExit(2)


def main(arguments: list[str]) -> None:
    from lint_nograd.watch.settings import SettingsError, resolve

    settings, kind, target, program_arguments = parse(arguments)
    if kind == "script" and not os.path.exists(target):
        sys.stderr.write(f"{sys.executable}: can't open file {target!r}: [Errno 2] No such file or directory\n")
        raise SystemExit(2)
    try:  # the settings of the project the script is in, as `check script.py` reads them
        resolve(settings, Path(os.path.dirname(os.path.abspath(target))) if kind == "script" else Path.cwd())
    except SettingsError as error:
        sys.stderr.write(f"lint-nograd watch: error: {error}\n")
        raise SystemExit(2) from None
    start(settings)
    status = _run(kind, target, program_arguments)
    from lint_nograd.watch import startup

    startup.write_report()
    if settings.strict and status in (0, None):
        from lint_nograd.watch.settings import why_failed

        why = why_failed(startup.findings(), settings.exit_non_zero_on_note)
        if why:
            sys.stderr.write(why)
            status = 1
    raise SystemExit(status)


def _run(kind: str, target: str, arguments: list[str]):
    """Run the program as `python` does; what it exits with."""
    # sys.argv as Python gives it; the first entry of the import path is the script's own folder
    # (with symlinks resolved), the folder or zip itself, or the working folder for -m
    sys.argv = [target if kind == "script" else "-m", *arguments]
    folder = kind == "script" and not (os.path.isfile(target) and not _is_zip(target))
    if folder:  # joined to the working folder as Python does, `./app` unnormalised
        sys.path[0] = os.path.join(os.getcwd(), target)
    elif kind == "script":
        sys.path[0] = os.path.dirname(os.path.realpath(target))
    else:
        sys.path[0] = os.getcwd()
    try:
        if kind == "module":
            sys.argv[0] = target  # runpy sets the module's file
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        elif folder:  # `python folder` runs it so, in a fresh __main__
            sys.modules["__main__"] = types.ModuleType("__main__")
            runpy._run_module_as_main("__main__", alter_argv=False)
        else:  # as `python script.py`: sys.argv[0] as given, __file__ absolute, symlinks kept
            path = os.path.abspath(target)
            main = sys.modules["__main__"] = types.ModuleType("__main__")
            main.__file__, main.__builtins__ = path, builtins
            main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
            with io.open_code(path) as source:
                code = compile(source.read(), path, "exec")
            exec(code, vars(main))
    except SystemExit as done:
        return done.code
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # print it as Python would, without the frames of this runner
        traceback = error.__traceback__
        while traceback is not None and traceback.tb_frame.f_code.co_filename in (
                __file__, runpy.__file__, "<frozen runpy>"):
            traceback = traceback.tb_next
        sys.excepthook(type(error), error.with_traceback(traceback), traceback)
        return 1
    return 0


def _is_zip(path: str) -> bool:
    import zipfile

    return zipfile.is_zipfile(path)


if __name__ == "__main__":
    main(sys.argv[1:])
