"""What a finding is and how it is shown: `Diagnostic`, the rules' registry, `# noqa` suppression,
and the output formats.

Imports nothing of lint_nograd but this folder (and `lint_nograd.__version__`).
"""
