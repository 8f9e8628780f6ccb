"""How a file writes the cut of `lint-nograd fix`: the `stop-gradient` setting, the name it has in
the file (an import to reuse, under any alias, or one to add), and where a new import goes."""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass

from lint_nograd.analysis.model import GradModeChange, SemanticModel
from lint_nograd.analysis.scopes import Binding
from lint_nograd.analysis.torch_names import SHIM_NAMES
from lint_nograd.report.diagnostics import Edit
from lint_nograd.run.config import DETACH
from lint_nograd.run.notebook import is_masked

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as the engine splits lines


@dataclass(frozen=True)
class Spelling:
    """How the rewritten code writes the cut: `stop_gradient(v)`, `sg(v)`, `lint_nograd.stop_gradient(v)`,
    or `v.detach()`."""

    text: str  # the callee, `stop_gradient`; "" for `.detach()`
    root: str  # the name it needs in scope: `stop_gradient`, `sg`, `lint_nograd`
    import_line: str | None = None  # the import to add, when the module has none to reuse
    binding: Binding | None = None  # the existing import's binding

    @property
    def detach(self) -> bool:
        return not self.text

    def cut(self) -> str:
        """The cut as the fix messages show it."""
        return "`.detach()`" if self.detach else f"`{self.text}(...)`"


def find_spelling(model: SemanticModel, tree: ast.Module, setting: str) -> Spelling | str:
    """How the file can name the cut of `setting` (see `FixSettings`): an import it has, under any
    alias, or one to add; a string "no fix: ..." when the names it would need are taken."""
    if setting == DETACH:
        return Spelling("", "")
    module_path, _, function = setting.rpartition(".")
    accepted = SHIM_NAMES if setting in SHIM_NAMES else frozenset({setting})
    module = model.scopes.module
    top_level = {id(statement) for statement in tree.body}  # not under `if TYPE_CHECKING:`
    imports = [(name, bindings[0]) for name, bindings in module.bindings.items()
               if len(bindings) == 1 and bindings[0].imported and id(bindings[0].node) in top_level]
    for name, binding in imports:  # `from mypkg.autodiff import stop_gradient as sg`
        if binding.imported in accepted:
            return Spelling(name, name, None, binding)
    for name, binding in imports:  # `import mypkg.autodiff as ad`, `from mypkg import autodiff`
        spelled = _module_spelling(binding, name, module_path)
        if spelled:
            return Spelling(f"{spelled}.{function}", name, None, binding)
    if function not in module.bindings:
        return Spelling(function, function, f"from {module_path} import {function}")
    root = module_path.partition(".")[0]
    if root not in module.bindings:
        return Spelling(f"{module_path}.{function}", root, f"import {module_path}")
    return f"no fix: the names {function} and {root} are both taken in this module"


def _module_spelling(binding: Binding, name: str, module_path: str) -> str | None:
    """How the file spells `module_path` through this import, if it imports that module."""
    node = binding.node
    if isinstance(node, ast.ImportFrom):
        return name if binding.imported == module_path else None
    for alias in node.names:  # `import a.b` binds `a`, and `a.b` is then loaded
        if alias.name == module_path and (alias.asname or alias.name.partition(".")[0]) == name:
            return alias.asname or module_path
    return None


def shadowed(model: SemanticModel, region: GradModeChange, spelling: Spelling) -> bool:
    """Whether, where the region is, `spelling.root` means something else than the module's import."""
    if spelling.detach:
        return False
    scope = model.scopes.of.get(region.function, model.scopes.module)
    found = model.scopes.lookup(scope, spelling.root, (region.owner.lineno, region.owner.col_offset))
    if spelling.binding is None:
        return bool(found)
    return found != [spelling.binding]


def line_starts(text: str) -> list[int]:
    """The offset where each line of `text` starts, as Python counts lines."""
    return [0] + [match.end() for match in _LINE_BREAK.finditer(text)]


def first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None)
    return min([statement.lineno] + [d.lineno for d in decorators or []])


def import_edit(tree: ast.Module, lines: list[str], line: str, newline: str,
                first_party: frozenset[str] = frozenset()) -> Edit:
    """Insert the import `line` where isort's default profile (and ruff's `I` rules) put it, in the
    block of imports at the top of the file: in its section (future, standard library, third-party,
    first-party, local), `import a` lines before `from a import b` ones, sorted by module."""
    body = tree.body
    start = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str) else 0
    end = start
    while end < len(body) and isinstance(body[end], (ast.Import, ast.ImportFrom)):
        end += 1
    block = body[start:end]
    if not block:
        row = first_line(body[start]) if start < len(body) else len(lines) + 1
        if row > len(lines):  # nothing after the docstring, or an empty file
            return _after(lines, start and body[start - 1].end_lineno, line, newline, blank_before=bool(start))
        blank = 0  # the blank lines before the code: isort wants two before a def or class, else one
        while row > 1 and not lines[row - 2].strip() and (not start or row - 1 > body[start - 1].end_lineno):
            row, blank = row - 1, blank + 1
        if is_masked(lines[row + blank - 1]):  # a notebook's IPython line (`%matplotlib inline`): no code isort sees
            return Edit(line + newline, row, 1, row, 1)
        wanted = 2 if isinstance(body[start], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else 1
        return Edit(line + newline * (1 + wanted), row, 1, row + blank, 1)
    added = ast.parse(line).body[0]
    merged = _merged_import(block, lines, added)
    if merged is not None:
        return merged
    ours = _import_key(added, first_party)
    previous = None
    for statement in block:
        key = _import_key(statement, first_party)
        if key > ours:
            if previous is not None and _import_key(previous, first_party)[0] == ours[0]:
                return _after(lines, _end_row(lines, previous), line, newline)
            new_section = key[0] != ours[0]
            row = _comments_above(lines, statement, previous)
            return Edit(line + newline + (newline if new_section else ""), row, 1, row, 1)
        previous = statement
    same_section = _import_key(block[-1], first_party)[0] == ours[0]
    return _after(lines, _end_row(lines, block[-1]), line, newline, blank_before=not same_section)


def _merged_import(block: list[ast.stmt], lines: list[str], added: ast.stmt) -> Edit | None:
    """isort joins `from m import a` and `from m import b`: the name goes into a one-line import
    of its module that the block has, with the names sorted as isort sorts them."""
    if not isinstance(added, ast.ImportFrom):
        return None
    for statement in block:
        if isinstance(statement, ast.ImportFrom) and statement.module == added.module and statement.level == 0 \
                and statement.lineno == statement.end_lineno and statement.col_offset == 0 \
                and all(alias.asname is None and alias.name != "*" for alias in statement.names):
            names = sorted({alias.name for alias in (*statement.names, *added.names)}, key=_member_key)
            text = f"from {statement.module} import {', '.join(names)}"
            end = len(lines[statement.lineno - 1].encode()[:statement.end_col_offset].decode()) + 1
            return Edit(text, statement.lineno, 1, statement.lineno, end)
    return None


def _member_key(name: str) -> tuple:
    """isort's order of imported names (`order-by-type`): CONSTANTS, Classes, then the others."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name.lower(), name


def _import_key(statement: ast.Import | ast.ImportFrom, first_party: frozenset[str]) -> tuple:
    """(section, `from` or not, module) as isort orders imports, its default profile."""
    if isinstance(statement, ast.ImportFrom):
        module = "." * statement.level + (statement.module or "")
    else:
        module = statement.names[0].name
    top = module.partition(".")[0]
    if module == "__future__":
        section = 0
    elif module.startswith("."):
        section = 4
    elif top in first_party:
        section = 3
    elif top in sys.stdlib_module_names:
        section = 1
    else:
        section = 2
    return section, isinstance(statement, ast.ImportFrom), module.lower()


def _end_row(lines: list[str], statement: ast.stmt) -> int:
    row = statement.end_lineno
    while row < len(lines) and lines[row - 1].endswith("\\"):  # a backslash joins the next line to it
        row += 1
    return row


def _comments_above(lines: list[str], statement: ast.stmt, previous: ast.stmt | None) -> int:
    """The first row of `statement` with the comment lines right above it, which isort keeps with it
    (above the first import, they are the file's header: a shebang, a coding cookie, a licence)."""
    row = statement.lineno
    if previous is None:
        return row
    while row - 1 > previous.end_lineno and lines[row - 2].lstrip().startswith("#"):
        row -= 1
    return row


def _after(lines: list[str], row: int, line: str, newline: str, blank_before: bool = False) -> Edit:
    """Insert `line` after row `row` (0: at the top), a blank line before it if `blank_before`."""
    text = (newline if blank_before else "") + line
    if row < len(lines):
        return Edit(text + newline, row + 1, 1, row + 1, 1)
    if not lines:
        return Edit(text + newline, 1, 1, 1, 1)
    end_col = len(lines[row - 1]) + 1  # the last line, without a line break
    return Edit(newline + text, row, end_col, row, end_col)
