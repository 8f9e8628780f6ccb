"""`python -m lint_nograd`: the command line. Importing this module does nothing more (libcst's
`python -m libcst.tool list` imports every module of a package it lists)."""
import sys

from lint_nograd.cli import main

if __name__ == "__main__":
    sys.exit(main())
