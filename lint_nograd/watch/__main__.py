"""`python -m lint_nograd.watch [options] script.py [args...]` or `... -m module [args...]`: run the
program as `python` would, with the same output and exit status, and report at exit every region
a forward-mode transform ignored or a tracer dropped, and every transform called inside a region."""
from __future__ import annotations

import os
import runpy
import sys

from lint_nograd.watch.report import FORMATS
from lint_nograd.watch.startup import Settings, start

USAGE = """\
usage: python -m lint_nograd.watch [--output-format text|json|sarif] [-o FILE] [--select CODES]
                                   (script.py | -m module) [args ...]

Runs the program unchanged and reports, at exit, on standard error (or in FILE):
  NG001/NG002  a transform called inside a no_grad / inference_mode region
  NG004        a region a forward-mode transform ignored (a value computed there carried a tangent)
  NG005        a region a tracer dropped (it recorded graph nodes there)
"""


def parse(arguments: list[str]) -> tuple[Settings, str, str, list[str]]:
    """(settings, "script" or "module", its path or name, its arguments); SystemExit(2) on bad usage."""
    settings = Settings()
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        name, equals, value = argument.partition("=")
        takes_value = name in ("--output-format", "-o", "--output-file", "--select", "-m")
        if takes_value and not equals:
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
        elif name == "--select":
            settings.select = tuple(code.strip().upper() for code in value.split(",") if code.strip())
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
    settings, kind, target, program_arguments = parse(arguments)
    if kind == "script" and not os.path.isfile(target):
        sys.stderr.write(f"{sys.executable}: can't open file {target!r}: [Errno 2] No such file or directory\n")
        raise SystemExit(2)
    start(settings)
    # as `python script.py` / `python -m module`: argv and the first entry of the import path
    sys.argv = [target if kind == "script" else "-m", *program_arguments]
    sys.path[0] = os.path.dirname(os.path.abspath(target)) if kind == "script" else os.getcwd()
    try:
        if kind == "script":
            runpy.run_path(os.path.abspath(target), run_name="__main__")
        else:
            sys.argv[0] = target  # runpy sets the module's file
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # print it as Python would, without the frames of this runner
        traceback = error.__traceback__
        while traceback is not None and traceback.tb_frame.f_code.co_filename in (
                __file__, runpy.__file__, "<frozen runpy>"):
            traceback = traceback.tb_next
        sys.excepthook(type(error), error.with_traceback(traceback), traceback)
        raise SystemExit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
