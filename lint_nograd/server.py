"""`lint-nograd server`: the findings, their fixes and the rule pages in the editor, over the
Language Server Protocol on standard input and output.

An open file is checked as `lint-nograd check` checks it: with the `[tool.lint-nograd]` settings of
its project, the other modules of the project as they are on disk, and the cache. The editor's
text is the file's `Job.data`; a notebook's cells are put together as an .ipynb, so nothing has to
be saved first. Checks run one at a time in a thread of their own, once typing has paused for
`DEBOUNCE_SECONDS`. The command line imports this module only for `lint-nograd server`.
"""
from __future__ import annotations

import asyncio
import functools
import json
import re
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import from_fs_path, to_fs_path

from lint_nograd import __version__
from lint_nograd.fix import noqa, rewrite
from lint_nograd.fix.fixer import Fixer
from lint_nograd.fix.settings import FixSettings, declares_lint_nograd, first_party_modules
from lint_nograd.report import output
from lint_nograd.report.diagnostics import Diagnostic, Edit
from lint_nograd.run import runner
from lint_nograd.run.cache import Cache, default_folder
from lint_nograd.run.config import (
    DEFAULT_STOP_GRADIENT,
    Config,
    ConfigError,
    import_roots,
    load_config,
    project_root,
    select_rules,
)
from lint_nograd.run.files import DEFAULT_EXCLUDE, compile_patterns, discover, shown_path
from lint_nograd.run.jobs import Job

NAME = "lint-nograd"
FIX_ALL = types.CodeActionKind.SourceFixAll + "." + NAME  # source.fixAll.lint-nograd
_SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
             "note": types.DiagnosticSeverity.Information}
DEBOUNCE_SECONDS = 0.3


class EditorCache(Cache):
    """The project's cache, written when a file is saved rather than after every keystroke's check."""

    def save(self) -> None:
        pass

    def write(self) -> None:
        super().save()


class Project:
    """The settings and files of the project a file belongs to, read as `check` reads them."""

    def __init__(self, folder: Path, workspace_folders: list[Path], alone: bool = False):
        if alone:  # outside every workspace folder (site-packages, say): default settings, no cache
            self._init_alone(folder)
            return
        config = load_config(None, folder)
        root = project_root(config, [], folder, isolated=False)
        if config.path is None and not (root / "pyproject.toml").is_file():  # no project: the workspace
            root = next((w for w in workspace_folders if w == folder or w in folder.parents), folder)
            config = replace(config, root=root)
        exclude = config.exclude if config.exclude is not None else DEFAULT_EXCLUDE
        self.root, self.config = root, config
        self.codes = select_rules([config.rules])
        self.fixes = FixSettings(stop_gradient=config.stop_gradient or DEFAULT_STOP_GRADIENT,
                                 unsafe_fixes=bool(config.unsafe_fixes))
        self.patterns = compile_patterns([*exclude, *config.extend_exclude])
        self.import_roots = import_roots(root, config.src)
        self.fixes = replace(self.fixes, first_party=first_party_modules(root, self.import_roots),
                             may_add_shim=config.stop_gradient is not None or declares_lint_nograd(root))
        self.cache = EditorCache(default_folder(root))
        self._files: list[tuple[Path, str]] | None = None
        self.alone = False

    def _init_alone(self, folder: Path) -> None:
        """A file checked on its own, in memory: nothing is read around it, nothing written."""
        self.root, self.config = folder, Config(root=folder)
        self.codes = select_rules([self.config.rules])
        self.fixes = FixSettings()
        self.patterns = compile_patterns(DEFAULT_EXCLUDE)
        self.import_roots = []
        self.cache = EditorCache(None)
        self._files = []
        self.alone = True

    @property
    def files(self) -> list[tuple[Path, str]]:
        """The project's files on disk, found again after a file is saved, created or deleted."""
        if self._files is None:
            self._files = self._discover(str(self.root)).files
        return self._files

    def forget_files(self) -> None:
        self._files = [] if self.alone else None

    def _discover(self, path: str, force_exclude: bool = False):
        return discover([path], root=self.config.root, exclude=self.patterns, cwd=self.root,
                        respect_gitignore=self.config.respect_gitignore, force_exclude=force_exclude)

    def job(self, path: Path, data: bytes) -> Job | None:
        """The check of an open file, or None when the settings exclude it or select no rule for it."""
        if not self.alone and path.exists() and not self._discover(str(path), force_exclude=True).files:
            return None
        codes = self.codes - self.config.ignored_codes(path)
        return Job(path, shown_path(path, self.root), codes, data, self.config.torch_version or "") if codes else None


@dataclass
class Source:
    """An open document as the editor has it: a file, or a notebook whose cells are documents."""

    uri: str
    path: Path
    texts: dict[str, str]  # a document's uri -> its text: the file itself, or each cell
    cells: list[str] | None = None  # a notebook's cell uris, every cell, in order
    code_cells: set[str] = field(default_factory=set)

    @property
    def data(self) -> bytes:
        if self.cells is None:
            return self.texts[self.uri].encode("utf-8")
        cells = [{"cell_type": "code", "source": self.texts[uri], "metadata": {}, "outputs": [],
                  "execution_count": None} if uri in self.code_cells else
                 {"cell_type": "markdown", "source": self.texts[uri], "metadata": {}} for uri in self.cells]
        return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1).encode()

    def target(self, diagnostic: Diagnostic) -> str:
        """The document a finding is in."""
        return self.uri if self.cells is None else self.cells[(diagnostic.cell or 1) - 1]


@dataclass
class Checked:
    source: Source
    project: Project | None = None
    job: Job | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # logged to the client
    config_error: str | None = None  # shown to the user, once

    def at(self, uri: str, start: tuple[int, int], end: tuple[int, int]) -> list[Diagnostic]:
        """The findings in a document that touch a range of 0-based (line, character) positions."""
        return [d for d in self.diagnostics if self.source.target(d) == uri
                and (d.row - 1, d.col - 1) <= end and start <= (d.end_row - 1, d.end_col - 1)]


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what the protocol counts as the end of a line
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # a line with its line break


def lines_of(text: str) -> list[str]:
    """A document's lines as the protocol numbers them: `\\r\\n`, `\\r` and `\\n` each end one."""
    return _LINE_BREAK.split(text)


@dataclass
class _Refused:
    """A request whose params do not fit its method: it is answered with the error."""

    id: object
    error: JsonRpcException


class Protocol(LanguageServerProtocol):
    """pygls's protocol, where every request gets a response: one whose params do not fit its method
    (a hover without a position, a negative character) gets InvalidParams, and one after `shutdown`
    gets InvalidRequest, where pygls would leave the client waiting."""

    def structure_message(self, data):
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if isinstance(data, dict) and "id" in data and "method" in data:
                return _Refused(data["id"], type(error)(f"{error.message}: {data['method']}"))
            raise

    def handle_message(self, message) -> None:
        if isinstance(message, _Refused):
            self._send_response(message.id, None, message.error.to_response_error())
        elif self._shutdown and hasattr(message, "id") and getattr(message, "method", types.EXIT) != types.EXIT:
            error = JsonRpcInvalidRequest(f"the server is shut down: {message.method}")
            self._send_response(message.id, None, error.to_response_error())
        else:
            super().handle_message(message)


class LintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(NAME, __version__, protocol_cls=Protocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=types.NotebookDocumentSyncOptions(notebook_selector=[
                             types.NotebookDocumentFilterWithCells(
                                 notebook="*", cells=[types.NotebookCellLanguage(language="python")])],
                             save=True))
        self.checker = ThreadPoolExecutor(max_workers=1)  # one check at a time: the cache is not shared
        self.projects: dict[Path, Project] = {}  # by folder; read and changed only in the checker
        self.checked: dict[str, Checked] = {}  # by the uri of the file or notebook
        self.pending: dict[str, asyncio.Task] = {}
        self.reported: set[str] = set()  # configuration errors already shown

    async def in_checker(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self.checker, functools.partial(function, *args))

    def log(self, text: str, kind: types.MessageType = types.MessageType.Error) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=text))

    # -- checking --------------------------------------------------------------------------------

    def source(self, uri: str) -> Source | None:
        """The document or notebook as the editor has it; a cell's uri gives its notebook."""
        notebook = (self.workspace.get_notebook_document(notebook_uri=uri)
                    or self.workspace.get_notebook_document(cell_uri=uri))
        if notebook is not None:
            path = to_fs_path(notebook.uri)
            cells = [cell.document for cell in notebook.cells]
            texts = {cell: self.workspace.get_text_document(cell).source for cell in cells}
            code = {cell.document for cell in notebook.cells if cell.kind == types.NotebookCellKind.Code
                    and self.workspace.get_text_document(cell.document).language_id in (None, "python")}
            return Source(notebook.uri, Path(path), texts, cells, code) if path else None
        document = self.workspace.text_documents.get(uri)
        path = document and uri.startswith("file:") and to_fs_path(uri)
        if not path or not (path.endswith((".py", ".pyi")) or document.language_id == "python"):
            return None
        if not path.endswith((".py", ".pyi")):  # a notebook's cells as one Python text (jupyterlab-lsp)
            path += ".py"
        return Source(uri, Path(path), {uri: document.source})

    def check(self, source: Source) -> Checked:
        """Runs in the checker."""
        try:
            folder = source.path.parent
            if folder not in self.projects:
                workspace = [Path(to_fs_path(f.uri)) for f in self.workspace.folders.values() if to_fs_path(f.uri)]
                if self.workspace.root_path:
                    workspace.append(Path(self.workspace.root_path))
                # a file outside every workspace folder (go-to-definition into site-packages) is
                # checked alone: its folder is nobody's project, and nothing is written there
                alone = not any(w == folder or w in folder.parents for w in workspace)
                self.projects[folder] = Project(folder, workspace, alone)
            project = self.projects[folder]
            job = project.job(source.path, source.data)
        except ConfigError as error:
            return Checked(source, config_error=f"{NAME}: {error}")
        if job is None:
            return Checked(source, project)
        outcome = runner.check([job], project.files, project.import_roots, 1, project.cache, Fixer(project.fixes))
        found = [d for d in outcome.diagnostics if d.path == job.display_path]
        return Checked(source, project, job, found, outcome.errors)

    def schedule(self, uri: str, delay: float = 0.0) -> None:
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        self.pending[uri] = asyncio.ensure_future(self.lint(uri, delay))

    def schedule_all(self, delay: float = 0.0) -> None:
        for uri in list(self.checked):
            self.schedule(uri, delay)

    async def lint(self, uri: str, delay: float = 0.0) -> Checked | None:
        """Check a document (after `delay`) and publish its findings."""
        try:
            await asyncio.sleep(delay)
            source = self.source(uri)
            if source is None:
                return None
            checked = await self.in_checker(self.check, source)
            for error in checked.errors:
                self.log(error)
            if checked.config_error and checked.config_error not in self.reported:
                self.reported.add(checked.config_error)
                self.window_show_message(types.ShowMessageParams(types.MessageType.Error, checked.config_error))
            before = self.checked.get(source.uri)
            self.checked[source.uri] = checked
            for target in (before.source.texts if before else {}).keys() - source.texts.keys():
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(target, []))  # a cell gone
            for target, text in source.texts.items():
                found = [self.to_lsp(d, checked) for d in checked.diagnostics if source.target(d) == target]
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(target, found))
            return checked
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log(f"{NAME}: internal error checking {uri}:\n{traceback.format_exc()}")
            return None

    async def current(self, uri: str) -> Checked | None:
        """The findings of a document's current text, checked now if the text changed since."""
        source = self.source(uri)
        checked = source and self.checked.get(source.uri)
        if checked is None or checked.source.texts != source.texts:
            waiting = source and self.pending.pop(source.uri, None)
            if waiting is not None:
                waiting.cancel()
            checked = source and await self.lint(source.uri)
        return checked

    # -- from findings to the protocol ----------------------------------------------------------

    def range(self, text: str, row: int, col: int, end_row: int, end_col: int) -> types.Range:
        """The protocol's range of 1-based (row, column) positions that count characters."""
        return self.workspace.position_codec.range_to_client_units(lines_of(text), types.Range(
            types.Position(row - 1, col - 1), types.Position(end_row - 1, end_col - 1)))

    def to_lsp(self, diagnostic: Diagnostic, checked: Checked) -> types.Diagnostic:
        text = checked.source.texts[checked.source.target(diagnostic)]
        return types.Diagnostic(
            range=self.range(text, diagnostic.row, diagnostic.col, diagnostic.end_row, diagnostic.end_col),
            message=diagnostic.message, source=NAME, code=diagnostic.code,
            severity=_SEVERITY.get(diagnostic.severity, types.DiagnosticSeverity.Error),
            code_description=types.CodeDescription(href=uri) if (uri := output.rule_page_uri(diagnostic.code)) else None,
            related_information=self.related(diagnostic, checked) or None)

    def related(self, diagnostic: Diagnostic, checked: Checked) -> list[types.DiagnosticRelatedInformation]:
        """The places the finding points at: the call that reaches a region, the region a call reaches."""
        found = []
        for related in diagnostic.related:
            source = checked.source
            if related.path == diagnostic.path:  # the same file, or another cell of the same notebook
                uri = source.uri if source.cells is None else source.cells[(related.cell or 1) - 1]
            else:
                uri = from_fs_path(str(checked.project.root / related.path))
            text = source.texts.get(uri)
            where = (related.row, related.col, related.end_row, related.end_col)
            found.append(types.DiagnosticRelatedInformation(types.Location(uri, self.range(text, *where) if text else (
                types.Range(types.Position(where[0] - 1, where[1] - 1), types.Position(where[2] - 1, where[3] - 1)))),
                related.message))
        return found

    def text_edit(self, text: str, edit: Edit) -> types.TextEdit:
        return types.TextEdit(self.range(text, edit.row, edit.col, edit.end_row, edit.end_col), edit.content)

    def replace_text(self, old: str, new: str) -> types.TextEdit:
        """One edit that turns `old` into `new`, spanning only the lines that differ (lines as the
        protocol counts them, each with its own line break)."""
        old_lines, new_lines = _LINE.findall(old), _LINE.findall(new)
        top = 0
        while top < min(len(old_lines), len(new_lines)) and old_lines[top] == new_lines[top]:
            top += 1
        bottom = 0
        while (bottom < min(len(old_lines), len(new_lines)) - top
               and old_lines[-1 - bottom] == new_lines[-1 - bottom]):
            bottom += 1
        content = "".join(new_lines[top:len(new_lines) - bottom])
        end = len(old_lines) - bottom  # the edit ends where this line starts, or at the end of the text
        if end < len(old_lines) or not old_lines or _LINE_BREAK.search(old_lines[-1]):
            end_row, end_col = end + 1, 1
        else:  # up to the end of a last line that has no line break
            end_row, end_col = end, len(old_lines[-1]) + 1
        return types.TextEdit(self.range(old, top + 1, 1, end_row, end_col), content)

    def fix_all(self, checked: Checked) -> dict[str, list[types.TextEdit]]:
        """Runs in the checker: every fix the settings apply, in each document that changes."""
        source, job, project = checked.source, checked.job, checked.project
        reach = None
        if source.cells is None:  # a notebook is seldom imported: what it does itself tells
            reaches, _ = runner.reach([job], project.files, project.import_roots, 1, project.cache)
            reach = reaches.get(job.path)
        result = rewrite.fix_source(job.data, job.codes, job.display_path, project.fixes, reach, job.release)
        if not result.changed:
            return {}
        new = result.text.encode(result.encoding)
        if source.cells is None:
            return {source.uri: [self.replace_text(source.texts[source.uri], new.decode("utf-8"))]}
        new_cells = json.loads(new)["cells"]
        return {uri: [self.replace_text(source.texts[uri], "".join(cell["source"]))]
                for uri, cell in zip(source.cells, new_cells) if "".join(cell["source"]) != source.texts[uri]}

    def noqa_edit(self, text: str, diagnostic: Diagnostic) -> types.TextEdit | None:
        """Add the code to the line's `# noqa: ...`, or a `# noqa: NGxxx` at its end, as
        `check --add-noqa` does; None where the line cannot take it (or a bare noqa covers it)."""
        try:
            new, count = noqa.add_to_text(text, {diagnostic.row: {diagnostic.code}})
        except noqa.NoqaError:
            return None
        return self.replace_text(text, new) if count else None

def _uri(params) -> str:
    """The uri of the file or notebook a notification is about."""
    return (getattr(params, "text_document", None) or params.notebook_document).uri


def _wanted(kind: str, only: list[str] | None) -> bool:
    """Whether a code action request asks for actions of this kind (`source` asks for `source.fixAll.x`)."""
    return only is None or any(kind == asked or kind.startswith(asked + ".") for asked in only)


def guarded(handler):
    """A handler whose failure is logged to the client, and the server goes on."""
    @functools.wraps(handler)
    async def run(ls: LintServer, params):
        try:
            return await handler(ls, params)
        except Exception:
            ls.log(f"{NAME}: internal error in {handler.__name__}:\n{traceback.format_exc()}")
            return None
    return run


def create_server() -> LintServer:
    server = LintServer()

    @server.feature(types.INITIALIZED)
    @guarded
    async def initialized(ls: LintServer, params):
        if ls.client_capabilities.workspace and ls.client_capabilities.workspace.did_change_watched_files \
                and ls.client_capabilities.workspace.did_change_watched_files.dynamic_registration:
            watchers = [types.FileSystemWatcher(glob_pattern=glob) for glob in ("**/pyproject.toml", "**/*.py")]
            await ls.client_register_capability_async(types.RegistrationParams([types.Registration(
                f"{NAME}-watch", types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                types.DidChangeWatchedFilesRegistrationOptions(watchers))]))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    @guarded
    async def did_open(ls: LintServer, params):
        ls.schedule(_uri(params))

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    @guarded
    async def did_change(ls: LintServer, params):
        ls.schedule(_uri(params), DEBOUNCE_SECONDS)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    @guarded
    async def did_save(ls: LintServer, params):
        await files_changed(ls, [_uri(params)])

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    @guarded
    async def did_change_watched_files(ls: LintServer, params: types.DidChangeWatchedFilesParams):
        await files_changed(ls, [change.uri for change in params.changes])

    async def files_changed(ls: LintServer, uris: list[str]):
        """A saved or changed file may change what other files' findings are: check them all again."""
        def refresh():
            for project in ls.projects.values():
                project.cache.write()
                project.forget_files()
            if any(uri.endswith("/pyproject.toml") for uri in uris):
                ls.projects.clear()
                ls.reported.clear()
        await ls.in_checker(refresh)
        ls.schedule_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    @guarded
    async def did_change_workspace_folders(ls: LintServer, params: types.DidChangeWorkspaceFoldersParams):
        """A file's project depends on the workspace's folders (outside them all, it is checked alone)."""
        def forget():
            for project in ls.projects.values():
                project.cache.write()
            ls.projects.clear()
        await ls.in_checker(forget)
        ls.schedule_all()

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    @guarded
    async def did_close(ls: LintServer, params):
        uri = _uri(params)
        waiting = ls.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        checked = ls.checked.pop(uri, None)
        for target in checked.source.texts if checked else [uri]:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(target, []))

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL]))
    @guarded
    async def code_action(ls: LintServer, params: types.CodeActionParams):
        uri = params.text_document.uri
        checked = await ls.current(uri)
        if checked is None:
            return None
        text = checked.source.texts.get(uri, "")
        only = params.context.only
        actions, fixable_here = [], False
        if _wanted(types.CodeActionKind.QuickFix, only):
            here = ls.workspace.position_codec.range_from_client_units(lines_of(text), params.range)
            for found in checked.at(uri, (here.start.line, here.start.character),
                                    (here.end.line, here.end.character)):
                diagnostic = [ls.to_lsp(found, checked)]
                if found.fix is not None and found.fix.edits:
                    safe, fixable_here = found.fix.applicability == "safe", True
                    actions.append(types.CodeAction(
                        f"Fix {found.code}{'' if safe else ' (unsafe)'}: {found.fix.message}",
                        kind=types.CodeActionKind.QuickFix, diagnostics=diagnostic, is_preferred=safe,
                        edit=types.WorkspaceEdit({uri: [ls.text_edit(text, e) for e in found.fix.edits]})))
                noqa = ls.noqa_edit(text, found)
                if noqa is not None:
                    actions.append(types.CodeAction(
                        f"Suppress {found.code} with noqa", kind=types.CodeActionKind.QuickFix,
                        diagnostics=diagnostic, edit=types.WorkspaceEdit({uri: [noqa]})))
        # asked for by name (on save, say), or offered next to a fix under the cursor: it checks the project
        if (fixable_here or only and _wanted(FIX_ALL, only)) and checked.job is not None and any(
                d.fix is not None and checked.project.fixes.applies(d.fix.applicability) for d in checked.diagnostics):
            edits = await ls.in_checker(ls.fix_all, checked)
            if edits:
                actions.append(types.CodeAction(f"{NAME}: fix all", kind=FIX_ALL, edit=types.WorkspaceEdit(edits)))
        return actions

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @guarded
    async def hover(ls: LintServer, params: types.HoverParams):
        uri = params.text_document.uri
        checked = await ls.current(uri)
        if checked is None:
            return None
        text = checked.source.texts.get(uri, "")
        here = ls.workspace.position_codec.position_from_client_units(lines_of(text), params.position)
        found = checked.at(uri, (here.line, here.character), (here.line, here.character))
        pages = [output.rule_page(code) or code for code in dict.fromkeys(d.code for d in found)]
        if not pages:
            return None
        first = found[0]
        return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, "\n---\n\n".join(pages)),
                           ls.range(text, first.row, first.col, first.end_row, first.end_col))

    @server.feature(types.SHUTDOWN)
    @guarded
    async def shutdown(ls: LintServer, params):
        await ls.in_checker(lambda: [project.cache.write() for project in ls.projects.values()])

    return server


def main() -> int:
    server = create_server()
    server.start_io()
    return 0 if server.protocol._shutdown else 1  # the protocol: `exit` without `shutdown` exits with 1
