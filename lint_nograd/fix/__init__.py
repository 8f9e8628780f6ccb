"""`lint-nograd fix` and the fixes `check` shows: what a region may become (`plan`), the name of the
cut in a file (`spelling`), the text of a rewrite (`edit`, the only user of libcst), applying them
to files (`rewrite`), `check --add-noqa` (`noqa`), and writing a file in one step (`write`).

May import `run/`, `checks/`, `project/`, `analysis/` and `report/`.
"""
