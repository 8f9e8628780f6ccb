import sys

from lint_nograd.cli import main

sys.exit(main())
