"""A run of `check`: which files, with which settings (configuration, notebooks, the cache, worker
processes), each file through the pipeline (`engine`), and the project run that links them
(`stages`, ordered by `runner`). A run returns findings; whoever shows them asks `fix/` for fixes.

May import `checks/`, `project/`, `analysis/` and `report/`; never `fix/`.
"""
