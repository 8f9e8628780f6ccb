"""The call graph of a linked project, named as PyCG names it, and why a region is reached or not.

The edges are `Project.call_graph()`: the same resolution reach follows, so what the graph shows is
what the rules see. Names: module-level code under the module's name, `module.Class.method`,
`module.outer.inner` for a nested function, `module.scope.<lambdaN>` for the n-th lambda written
in a scope (counted in the order they are written).
"""
from __future__ import annotations

import json
from collections import deque
from typing import Optional

from lint_nograd.project.linking import FunctionKey, Project
from lint_nograd.project.summary import MODULE_BODY, ModuleSummary, is_grad_mode_wrapper


class CallGraph:
    def __init__(self, project: Project):
        self.project = project
        self.edges = project.call_graph()
        self._names: dict[str, dict[str, str]] = {}  # module -> lambda -> `<lambdaN>`

    def name(self, key: FunctionKey) -> str:
        """`pkg.model.Net.forward` for ("pkg.model", "Net.forward")."""
        module, function = key
        if function == MODULE_BODY:
            return module
        summary = self.project.summary(module)
        if summary is not None and function in summary.lambdas:
            outer = self.name((module, summary.lambdas[function]))
            return f"{outer}.{self._lambda_names(module, summary)[function]}"
        return f"{module}.{function.split('#')[0].replace('.<locals>.', '.')}"

    def _lambda_names(self, module: str, summary: ModuleSummary) -> dict[str, str]:
        names = self._names.get(module)
        if names is None:
            names = self._names[module] = {}
            counts: dict[str, int] = {}
            for function in sorted(summary.lambdas, key=_position):
                scope = summary.lambdas[function]
                counts[scope] = counts.get(scope, 0) + 1
                names[function] = f"<lambda{counts[scope]}>"
        return names

    def named(self) -> dict[str, list[str]]:
        """{caller: [callee, ...]} by name, sorted; functions of one name (`f`, redefined) joined."""
        found: dict[str, set[str]] = {}
        for caller, callees in self.edges.items():
            if not is_grad_mode_wrapper(caller[1]):
                found.setdefault(self.name(caller), set()).update(self.name(callee)
                                                                  for callee in self._through_wrappers(callees))
        return {caller: sorted(callees) for caller, callees in sorted(found.items())}

    def _through_wrappers(self, callees: list[FunctionKey]) -> list[FunctionKey]:
        """The callees, each function `torch.no_grad()(f)` makes replaced by what it calls (`f`): the
        graph shows the functions written, as PyCG does."""
        found, seen, stack = [], set(), list(callees)
        while stack:
            callee = stack.pop()
            if callee in seen:
                continue
            seen.add(callee)
            if is_grad_mode_wrapper(callee[1]):
                stack += self.edges.get(callee, ())
            else:
                found.append(callee)
        return found

    def text(self) -> str:
        return "".join(f"{caller} -> {callee}\n" for caller, callees in self.named().items() for callee in callees)

    def pycg(self) -> str:
        return json.dumps(self.named(), indent=4) + "\n"

    def path(self, start: FunctionKey, end: FunctionKey) -> Optional[list[FunctionKey]]:
        """The shortest chain of calls from `start` to `end`, both included; None when there is none."""
        before: dict[FunctionKey, Optional[FunctionKey]] = {start: None}
        queue = deque([start])
        while queue:
            key = queue.popleft()
            if key == end:
                chain = [key]
                while before[chain[-1]] is not None:
                    chain.append(before[chain[-1]])
                return chain[::-1]
            for callee in self.edges.get(key, ()):
                if callee not in before:
                    before[callee] = key
                    queue.append(callee)
        return None

    def explain(self, module: str, line: int) -> Optional[list[str]]:
        """What reaches each grad-disabled region written on `line` of `module`, and by which chain of
        calls; or why nothing does. None when no region is on that line."""
        summary = self.project.summary(module)
        regions = [r for r in summary.regions if r.span.row <= line <= r.span.end_row] if summary else []
        if not regions:
            return None
        lines = []
        for region in regions:
            key = (module, region.function if region.function is not None else MODULE_BODY)
            lines.append(f"`{region.api}` at {self.project.path(module)}:{region.span.row} in `{self.name(key)}`:")
            reach = self.project.reach_of(module, region)
            for mode, reacher in sorted(reach.items()):
                lines.append(f"  {mode}: {self.project.describe(reacher, module)}")
                start = self._calling_function(*(reacher.via[:2] if reacher.via else (reacher.module, reacher.span)))
                chain = self.path(start, key) if start is not None else None
                if chain:
                    lines.append("    " + " -> ".join(self.name(step) for step in chain))
            if not reach:
                lines.append("  no transform or tracer reaches it: " + self._unreached(key))
        return lines

    def _unreached(self, key: FunctionKey) -> str:
        if key[1] == MODULE_BODY:
            return "it runs when the module is imported, outside any function"
        callers = sorted({self.name(caller) for caller, callees in self.edges.items() if key in callees})
        if not callers:
            return f"nothing in the project calls `{self.name(key)}`"
        return f"`{self.name(key)}` is called by {', '.join(f'`{c}`' for c in callers)}, which none reaches"

    def _calling_function(self, module: str, span) -> Optional[FunctionKey]:
        """The function whose body makes the call at `span`."""
        summary = self.project.summary(module)
        for name, function in summary.functions.items() if summary else ():
            if any(s.span == span for s in function.sources) or any(s.span == span for s in function.call_sites):
                return module, name
        return None


def _position(lambda_name: str) -> tuple[int, int]:
    """(row, column) of `<lambda>@12:8`."""
    row, _, col = lambda_name.rpartition("@")[2].partition(":")
    return int(row), int(col)
