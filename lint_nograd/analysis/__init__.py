"""Analysis of one file, on the standard library's `ast`: the semantic model (regions, transform
applications, backward calls), name resolution, the PyTorch names and tensor operations the rules
know, the transforms and tracers with the mode each runs a function in, what each torch release
does, and what a region's statements compute.

Imports nothing of lint_nograd but this folder (and never torch).
"""
