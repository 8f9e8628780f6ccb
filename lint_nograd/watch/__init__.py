"""The watcher: the same findings as `check`, at run time, where static analysis cannot see.

`python -m lint_nograd.watch script.py` (or `LINT_NOGRAD_WATCH=1`, or `pytest --nograd-watch`)
runs a program unchanged and reports, at exit, every grad-disabling region a forward-mode
transform ignored (NG004) or a tracer dropped (NG005), and every transform called inside a
region (NG001, NG002).

It is runtime, like `lint_nograd.shim`: `hooks` imports torch (only once the program imports it).
It may import report/ and analysis/ (the entry points, the releases) and the runtime; nothing else
in the package imports it. Importing this folder imports nothing, so the pytest plugin costs
nothing in a session that does not ask for the watcher.
"""
