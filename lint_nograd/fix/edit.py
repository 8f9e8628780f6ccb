"""The text of a planned rewrite (`plan.RegionPlan`), made by libcst from the region's own lines.

Only the region's statement is parsed and printed again, so everything around it, and the
comments and formatting inside it, stay as they were. This is the only module of the fix that
imports libcst.
"""
from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections import Counter

import libcst as cst

from lint_nograd.analysis.model import GradModeChange
from lint_nograd.analysis.region_values import KEEP, NESTED, PASS, Refusal
from lint_nograd.fix.plan import SHORT, RegionPlan
from lint_nograd.fix.spelling import Spelling, first_line
from lint_nograd.report.diagnostics import Edit

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as the engine splits lines
_AFTER_STATEMENT = re.compile(r"\s*;?\s*(#.*)?")
# libcst nests `a and b and ...` one level per operand; some thousands deep, its native parser
# overflows the stack, which kills the process instead of raising
_MAX_BOOL_OPERANDS = 1000
_EMPTY = cst.Module(body=[])


def region_edit(text: str, lines: list[str], line_starts: list[int], plan: RegionPlan, spelling: Spelling,
                keep_valid: bool) -> Edit:
    """The edit replacing the region's lines, or `Refusal`. `keep_valid`: the statement is the last of
    a block that may lose all its statements in the same run, so it leaves a `pass` if it goes."""
    region = plan.region
    owner = region.owner
    first_row = first_line(owner)
    end_row = owner.end_lineno
    first, last = lines[first_row - 1], lines[end_row - 1]
    indent = first[:len(first) - len(first.lstrip())]
    if region.is_decorator:
        starts_line = first.lstrip().startswith("@")
    else:
        starts_line = not first[:_chars(first, owner.col_offset)].strip()
    if not starts_line:
        raise Refusal("the statement does not start its line")
    if not _AFTER_STATEMENT.fullmatch(last[_chars(last, owner.end_col_offset):]):
        raise Refusal("the statement does not end its line")
    start = line_starts[first_row - 1]
    has_line_break = end_row < len(line_starts)
    end = line_starts[end_row] if has_line_break else len(text)
    newline = _newline(text)
    if sum(len(node.values) for node in ast.walk(owner) if isinstance(node, ast.BoolOp)) > _MAX_BOOL_OPERANDS:
        raise Refusal("the region's code is nested too deeply")
    try:
        content = _rewrite(text[start:end], indent, newline, _Rewriter(plan, spelling), keep_valid)
    except cst.ParserSyntaxError:
        raise Refusal("libcst cannot parse the region's lines") from None
    if content:
        try:
            ast.parse(f"if 1:{newline}{content}" if indent else content)
        except SyntaxError:
            raise Refusal("internal: the rewritten region does not parse") from None
    if has_line_break:
        return Edit(content, first_row, 1, end_row + 1, 1)
    return Edit(content, first_row, 1, end_row, len(last) + 1)


def _newline(text: str) -> str:
    match = _LINE_BREAK.search(text)
    return match.group() if match else "\n"


def _chars(line: str, byte_offset: int) -> int:
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", "replace"))


class _Rewriter:
    """Rewrites one region's statement, given as the source text of its lines."""

    def __init__(self, plan: RegionPlan, spelling: Spelling):
        self.plan = plan
        self.spelling = spelling
        self.func = None if spelling.detach else _expression(spelling.text)
        self.region = plan.region
        self.short = plan.form == SHORT
        self.actions = iter(plan.actions)

    # values

    def cut(self, value: cst.BaseExpression) -> cst.BaseExpression:
        if self.func is None:  # `value.detach()`
            if not value.lpar and not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
                value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            return cst.Call(func=cst.Attribute(value=value, attr=cst.Name("detach")))
        if isinstance(value, cst.Tuple) and not value.lpar:
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        elif (len(value.lpar) == 1 and not isinstance(value, (cst.Tuple, cst.GeneratorExp))
              and isinstance(value.lpar[0].whitespace_after, cst.SimpleWhitespace)
              and isinstance(value.rpar[0].whitespace_before, cst.SimpleWhitespace)):
            value = value.with_changes(lpar=[], rpar=[])  # stop_gradient(x) rather than stop_gradient((x))
        return cst.Call(func=self.func, args=[cst.Arg(value=value)])

    def wrapped(self, value: cst.BaseExpression, how) -> cst.BaseExpression:
        if how == "whole":
            return self.cut(value)
        elements = [element.with_changes(value=self.cut(element.value)) if wrap else element
                    for element, wrap in zip(value.elements, how)]
        return value.with_changes(elements=elements)

    def small_statement(self, statement: cst.BaseSmallStatement, lifting: bool) -> cst.BaseSmallStatement | None:
        action = next(self.actions)
        if action == PASS:
            return None if lifting else statement
        if action == KEEP:
            return statement
        if not isinstance(action, tuple):
            raise Refusal("internal: the region's statements are not where the plan put them")
        changes = {"value": self.wrapped(statement.value, action[1])}
        if isinstance(statement, cst.Return) and isinstance(statement.whitespace_after_return, cst.SimpleWhitespace) \
                and not statement.whitespace_after_return.value:
            changes["whitespace_after_return"] = cst.SimpleWhitespace(" ")  # `return(x)`
        return statement.with_changes(**changes)

    # statements

    def nested(self, node: cst.With) -> None:
        if not isinstance(node, cst.With) or next(self.actions) != NESTED:
            raise Refusal("internal: a compound statement in a planned region")

    def body(self, block: cst.BaseSuite) -> list[cst.BaseStatement]:
        """The statements of a region's body, lifted out of it into the block around it."""
        if isinstance(block, cst.SimpleStatementSuite):  # `with no_grad(): a = f(x)`
            lines = [cst.SimpleStatementLine(body=block.body, trailing_whitespace=block.trailing_whitespace)]
        else:
            lines = list(block.body)
        new_lines: list[cst.BaseStatement] = []
        for line in lines:
            if not isinstance(line, cst.SimpleStatementLine):  # a region nested in this one goes too
                self.nested(line)
                lifted = self.body(line.body)
                if lifted:
                    lifted[0] = lifted[0].with_changes(leading_lines=[*line.leading_lines, *lifted[0].leading_lines])
                new_lines += lifted
                continue
            kept = [s for s in (self.small_statement(s, lifting=True) for s in line.body) if s is not None]
            if not kept and _has_comment(line):
                kept = list(line.body)  # `pass  # why`: keep the line, and its comment
            if kept:
                kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
                new_lines.append(line.with_changes(body=kept))
        return new_lines

    def block(self, block: cst.BaseSuite) -> cst.BaseSuite:
        """A body rewritten in place (a function's, a kept region's, or a `with` that keeps other items)."""
        if isinstance(block, cst.SimpleStatementSuite):
            return block.with_changes(body=[self.small_statement(s, lifting=False) for s in block.body])
        new_lines: list[cst.BaseStatement] = []
        for line in block.body:
            if isinstance(line, cst.SimpleStatementLine):
                new_lines.append(line.with_changes(body=[self.small_statement(s, lifting=False) for s in line.body]))
                continue
            self.nested(line)
            if self.short:
                lifted = self.body(line.body)
                if lifted:
                    lifted[0] = lifted[0].with_changes(leading_lines=[*line.leading_lines, *lifted[0].leading_lines])
                new_lines += lifted
            else:
                new_lines.append(line.with_changes(items=self.no_grad_items(line.items), body=self.block(line.body)))
        return block.with_changes(body=new_lines or [cst.SimpleStatementLine(body=[cst.Pass()])])

    def no_grad_items(self, items) -> list[cst.WithItem]:
        return [item.with_changes(item=self.no_grad(item.item)) for item in items]

    def no_grad(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """`torch.no_grad()` in place of an `inference_mode` expression the kept form turns into it."""
        if not self.plan.no_grad_for:
            return expr
        text = self.plan.no_grad_for.get(_dump(_EMPTY.code_for_node(expr)))
        return expr if text is None else _expression(text)

    def statement(self, node: cst.BaseStatement) -> list[cst.BaseStatement]:
        if isinstance(node, cst.FunctionDef):
            decorators = list(node.decorators)
            if not self.short:
                decorators[-1] = decorators[-1].with_changes(decorator=self.no_grad(decorators[-1].decorator))
                return [node.with_changes(decorators=decorators, body=self.block(node.body))]
            removed = decorators.pop()  # the innermost, checked by the plan
            # the comments on and above the removed decorator stay where it was
            comments = list(removed.leading_lines)
            if removed.trailing_whitespace.comment is not None:
                comments.append(cst.EmptyLine(comment=removed.trailing_whitespace.comment))
            lines_after = [*comments, *node.lines_after_decorators] if decorators \
                else list(node.lines_after_decorators)
            leading = node.leading_lines if decorators else [*node.leading_lines, *comments]
            return [node.with_changes(decorators=decorators, body=self.block(node.body),
                                      leading_lines=leading, lines_after_decorators=lines_after)]
        if not isinstance(node, cst.With):
            raise Refusal("internal: the region's statement is not where the plan put it")
        if not self.short:
            return [node.with_changes(items=self.no_grad_items(node.items), body=self.block(node.body))]
        if len(node.items) > 1:
            index = [_is_region_item(item, self.region) for item in node.items].index(True)
            items = [*node.items[:index], *node.items[index + 1:]]
            # `with (a, no_grad(),):` keeps its trailing comma; `with a, no_grad():` cannot have one
            comma = node.items[-1].comma if isinstance(node.lpar, cst.LeftParen) else cst.MaybeSentinel.DEFAULT
            items[-1] = items[-1].with_changes(comma=comma)
            return [node.with_changes(items=items, body=self.block(node.body))]
        return self.body(node.body)


@functools.lru_cache(maxsize=64)
def _expression(code: str) -> cst.BaseExpression:
    """libcst nodes are immutable: one parse of `stop_gradient` serves every region."""
    return cst.parse_expression(code)


def _dump(code: str) -> str | None:
    try:
        return ast.dump(ast.parse(code.strip(), mode="eval").body)
    except SyntaxError:
        return None


def _is_region_item(item: cst.WithItem, region: GradModeChange) -> bool:
    return _dump(_EMPTY.code_for_node(item.item)) == ast.dump(region.expr)


def _has_comment(node: cst.CSTNode) -> bool:
    return bool(_comments_in(_EMPTY.code_for_node(node)))


def _comments_in(code: str) -> list[str]:
    """The comments of some code, in order (tokens: far cheaper than visiting libcst nodes)."""
    if "#" not in code:
        return []
    try:
        tokens = tokenize.generate_tokens(io.StringIO(code).readline)
        return [token.string for token in tokens if token.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):  # a fragment that tokenize cannot finish
        return re.findall(r"#[^\r\n]*", code)


def _rewrite(fragment: str, indent: str, newline: str, rewriter: _Rewriter, keep_valid: bool) -> str:
    """The new text of a statement given as the full text of its lines, `indent` deep."""
    if "\r" in fragment or newline != "\n":  # libcst loses lone carriage returns: work in "\n", give back `newline`
        return _rewrite(_LINE_BREAK.sub("\n", fragment), indent, "\n", rewriter, keep_valid).replace("\n", newline)
    source = f"if 1:{newline}{fragment}" if indent else fragment
    module = cst.parse_module(source)
    outer = module.body[0]
    node = outer.body.body[0] if indent else outer
    statements = rewriter.statement(node)
    if not statements and keep_valid:
        statements = [cst.SimpleStatementLine(body=[cst.Pass()])]
    code = _code(module, outer, statements, indent, newline)
    lost = Counter(_comments_in(fragment))
    lost.subtract(_comments_in(code))
    lost_comments = [comment for comment in dict.fromkeys(_comments_in(fragment)) for _ in range(lost[comment])]
    if not lost_comments:
        return code
    # e.g. the comment after `with torch.no_grad():`: keep it above the first statement
    extra = [cst.EmptyLine(comment=cst.Comment(comment)) for comment in lost_comments]
    statements = statements or [cst.SimpleStatementLine(body=[cst.Pass()])]
    statements[0] = statements[0].with_changes(leading_lines=[*extra, *statements[0].leading_lines])
    return _code(module, outer, statements, indent, newline)


def _code(module: cst.Module, outer: cst.CSTNode, statements: list, indent: str, newline: str) -> str:
    if not statements:
        return ""
    if indent:
        new_module = module.with_changes(body=[outer.with_changes(body=outer.body.with_changes(body=statements))])
        code = new_module.code
        return code[code.index(newline) + len(newline):]
    return module.with_changes(body=statements).code
