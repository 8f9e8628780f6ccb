"""`lint-nograd server` end to end: a real LSP client drives the server over standard input and output."""
from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from cli_sources import DECLARES_LINT_NOGRAD

pytest_lsp = pytest.importorskip("pytest_lsp")
from lint_nograd.fix import rewrite  # noqa: E402
from lint_nograd.report import output
from lint_nograd.run.config import parse_toml  # noqa: E402
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402

ROOT = Path(__file__).parent.parent
EXAMPLE = (ROOT / "examples" / "meta_learning.py").read_text()
SERVER = [sys.executable, "-m", "lint_nograd", "server"]
CAPABILITIES = types.ClientCapabilities(
    text_document=types.TextDocumentClientCapabilities(
        synchronization=types.TextDocumentSyncClientCapabilities(did_save=True),
        publish_diagnostics=types.PublishDiagnosticsClientCapabilities(
            related_information=True, code_description_support=True),
        code_action=types.CodeActionClientCapabilities(
            is_preferred_support=True,
            code_action_literal_support=types.ClientCodeActionLiteralOptions(
                types.ClientCodeActionKindOptions(value_set=list(types.CodeActionKind)))),
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
    ),
    notebook_document=types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities()),
)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(DECLARES_LINT_NOGRAD)
    (tmp_path / "model.py").write_text(EXAMPLE)
    return tmp_path


async def _session(client: LanguageClient, folder: Path):
    await client.initialize_session(types.InitializeParams(
        capabilities=CAPABILITIES, root_uri=folder.as_uri(),
        workspace_folders=[types.WorkspaceFolder(folder.as_uri(), folder.name)]))
    yield
    await client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient, project):
    async for _ in _session(lsp_client, project):
        yield


async def published(client: LanguageClient, uri: str, send=None) -> list[types.Diagnostic]:
    """The findings the server publishes for `uri` after `send()`."""
    client.diagnostics.pop(uri, None)
    if send is not None:
        send()
    while uri not in client.diagnostics:
        try:
            await asyncio.wait_for(client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), 60)
        except asyncio.TimeoutError:
            raise AssertionError(f"no findings published for {uri}; the server logged {client.log_messages}")
    return list(client.diagnostics[uri])


def open_file(client: LanguageClient, path: Path, text: str | None = None):
    return lambda: client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        path.as_uri(), "python", 1, path.read_text() if text is None else text)))


def change(client: LanguageClient, path: Path, text: str, version: int):
    return lambda: client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version, path.as_uri()),
        [types.TextDocumentContentChangeWholeDocument(text)]))


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """The text after the edits (ASCII text: columns are characters)."""
    lines = text.split("\n")

    def offset(position: types.Position) -> int:
        return sum(len(line) + 1 for line in lines[:position.line]) + position.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def by_code(diagnostics: list[types.Diagnostic]) -> dict[str, types.Diagnostic]:
    return {d.code: d for d in diagnostics}


def start(diagnostic: types.Diagnostic) -> tuple[int, int]:
    return diagnostic.range.start.line, diagnostic.range.start.character


async def actions(client: LanguageClient, uri: str, diagnostic: types.Diagnostic | None = None,
                  only: list[str] | None = None) -> list[types.CodeAction]:
    where = diagnostic.range if diagnostic else types.Range(types.Position(0, 0), types.Position(0, 0))
    return await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), where,
        types.CodeActionContext([diagnostic] if diagnostic else [], only=only)))


@pytest.mark.asyncio
async def test_open_publishes_codes_ranges_severities_links_and_the_reaching_call(client, project):
    path = project / "model.py"
    found = by_code(await published(client, path.as_uri(), open_file(client, path)))
    assert set(found) == {"NG001", "NG003", "NG004", "NG006"}  # as `lint-nograd check` reports it
    assert start(found["NG006"]) == (20, 9) and start(found["NG004"]) == (32, 13)
    assert start(found["NG001"]) == (42, 23) and start(found["NG003"]) == (43, 4)
    assert found["NG004"].severity == types.DiagnosticSeverity.Error
    assert found["NG006"].severity == types.DiagnosticSeverity.Warning
    assert found["NG001"].severity == types.DiagnosticSeverity.Information  # a note
    assert found["NG006"].source == "lint-nograd"
    assert found["NG006"].code_description.href.startswith("file://")
    assert found["NG006"].code_description.href.endswith("/NG006.md")
    [reaching] = found["NG006"].related_information  # `grad(task_loss)` at line 27
    assert reaching.location.uri == path.as_uri() and reaching.location.range.start.line == 26
    [reaching] = found["NG004"].related_information  # `jacfwd(predict)` at line 37
    assert reaching.location.range.start.line == 36 and "jacfwd" in reaching.message


@pytest.mark.asyncio
async def test_a_change_is_checked_without_saving_and_debounced(client, project):
    path = project / "model.py"
    await published(client, path.as_uri(), open_file(client, path))
    clean = EXAMPLE.replace("@torch.no_grad()\n", "")

    def type_quickly():
        for version in range(2, 6):
            change(client, path, clean if version % 2 else EXAMPLE, version)()
    found = await published(client, path.as_uri(), type_quickly)  # versions 2-5: the last is `clean`
    assert {d.code for d in found} == {"NG004", "NG006"}
    await asyncio.sleep(1)  # one check for the burst: no later publish of an intermediate text
    assert {d.code for d in client.diagnostics[path.as_uri()]} == {"NG004", "NG006"}
    assert path.read_text() == EXAMPLE


@pytest.mark.asyncio
async def test_other_modules_are_seen_as_they_are_saved(client, project):
    helpers, train = project / "helpers.py", project / "train.py"
    helpers.write_text(
        "import torch\n\ndef scaled(x):\n    with torch.no_grad():\n        s = x.std()\n    return x / s\n")
    train.write_text("from helpers import scaled\n")
    assert await published(client, helpers.as_uri(), open_file(client, helpers)) == []

    def save_train():
        train.write_text("from torch.func import jacfwd\nfrom helpers import scaled\n\n\njacfwd(scaled)(1.0)\n")
        client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(train.as_uri())))
    found = await published(client, helpers.as_uri(), save_train)
    assert [(d.code, start(d)) for d in found] == [("NG004", (3, 9))]
    [reaching] = found[0].related_information  # `jacfwd(...)` at train.py:5
    assert reaching.location.uri == train.as_uri() and reaching.location.range.start.line == 4


@pytest.mark.asyncio
async def test_a_quick_fix_rewrites_the_region(client, project):
    path = project / "model.py"
    found = by_code(await published(client, path.as_uri(), open_file(client, path)))
    offered = await actions(client, path.as_uri(), found["NG006"])
    [quick_fix] = [a for a in offered if a.title.startswith("Fix NG006")]
    assert quick_fix.kind == types.CodeActionKind.QuickFix and quick_fix.is_preferred
    assert "source.fixAll.lint-nograd" in [a.kind for a in offered]  # offered next to a fix
    fixed = apply(EXAMPLE, quick_fix.edit.changes[path.as_uri()])
    assert "\n    scale = stop_gradient(prediction.std() + 1e-6)  # meant as a constant\n" in fixed
    assert "from lint_nograd import stop_gradient\n" in fixed
    after = await published(client, path.as_uri(), change(client, path, fixed, 2))
    assert {d.code for d in after} == {"NG001", "NG003", "NG004"}

    [unsafe] = [a for a in await actions(client, path.as_uri(), found["NG004"]) if a.title.startswith("Fix NG004")]
    assert "(unsafe)" in unsafe.title and not unsafe.is_preferred
    assert "stop_gradient(model(inputs).mean())" in apply(fixed, unsafe.edit.changes[path.as_uri()])


@pytest.mark.asyncio
async def test_fix_all_applies_what_lint_nograd_fix_writes(client, project):
    path = project / "model.py"
    await published(client, path.as_uri(), open_file(client, path))
    [fix_all] = await actions(client, path.as_uri(), only=[types.CodeActionKind.SourceFixAll])
    assert fix_all.kind == "source.fixAll.lint-nograd"
    expected = rewrite.fix_source(EXAMPLE.encode(), display_path="model.py").text  # safe fixes only
    assert apply(EXAMPLE, fix_all.edit.changes[path.as_uri()]) == expected
    assert "baseline = model(inputs).mean()" in expected

    (project / "pyproject.toml").write_text("[tool.lint-nograd]\nunsafe-fixes = true\n")
    await published(client, path.as_uri(), lambda: client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent((project / "pyproject.toml").as_uri(),
                                                           types.FileChangeType.Changed)])))
    [fix_all] = await actions(client, path.as_uri(), only=["source.fixAll.lint-nograd"])
    # and the project no longer declares lint-nograd: the cut adds no dependency
    assert "baseline = model(inputs).mean().detach()" in apply(EXAMPLE, fix_all.edit.changes[path.as_uri()])


@pytest.mark.asyncio
async def test_suppress_with_noqa_adds_or_extends_the_comment(client, project):
    path = project / "model.py"
    found = by_code(await published(client, path.as_uri(), open_file(client, path)))
    offered = await actions(client, path.as_uri(), found["NG001"])
    assert [a.title for a in offered] == ["Suppress NG001 with noqa"]  # no fix, so no fix all here either
    text = apply(EXAMPLE, offered[0].edit.changes[path.as_uri()])
    assert text.split("\n")[42].endswith("(params, model, x, y)  # noqa: NG001")
    after = await published(client, path.as_uri(), change(client, path, text, 2))
    assert {d.code for d in after} == {"NG003", "NG004", "NG006"}

    [noqa] = [a for a in await actions(client, path.as_uri(), by_code(after)["NG003"]) if "noqa" in a.title]
    text = apply(text, noqa.edit.changes[path.as_uri()])
    assert text.split("\n")[43] == "    loss.backward()  # fails: `loss` was computed under no_grad  # noqa: NG003"
    text = text.replace("# noqa: NG001", "# noqa: NG005")
    found = by_code(await published(client, path.as_uri(), change(client, path, text, 3)))
    [noqa] = [a for a in await actions(client, path.as_uri(), found["NG001"]) if "noqa" in a.title]
    assert apply(text, noqa.edit.changes[path.as_uri()]).split("\n")[42].endswith("# noqa: NG005, NG001")


@pytest.mark.asyncio
async def test_hover_on_a_finding_shows_its_rule_page(client, project):
    path = project / "model.py"
    found = by_code(await published(client, path.as_uri(), open_file(client, path)))
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(path.as_uri()), found["NG001"].range.start))
    assert hover.contents.kind == types.MarkupKind.Markdown
    assert hover.contents.value == output.rule_page("NG001") and hover.range == found["NG001"].range
    elsewhere = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(path.as_uri()), types.Position(0, 0)))
    assert elsewhere is None


NOTEBOOK_CELLS = [
    (types.NotebookCellKind.Markup, "markdown", "# Meta-learning"),
    (types.NotebookCellKind.Code, "python", "import torch\nfrom torch.func import grad, jacfwd\n%matplotlib inline"),
    (types.NotebookCellKind.Code, "python",
     "x = torch.tensor(1.5)\nwith torch.no_grad():\n    g = grad(torch.sin)(x)"),
    (types.NotebookCellKind.Code, "python",
     "def shifted(x):\n    with torch.no_grad():\n        s = x.mean()\n    return x - s\n\njacfwd(shifted)(x)"),
]


@pytest.mark.asyncio
async def test_notebook_cells_are_checked_as_the_editor_has_them(client, project):
    notebook = project / "analysis.ipynb"  # not on disk
    cells = [f"vscode-notebook-cell:{notebook}#cell{number}" for number in range(len(NOTEBOOK_CELLS))]
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        types.NotebookDocument(notebook.as_uri(), "jupyter-notebook", 1,
                               [types.NotebookCell(kind, uri) for (kind, _, _), uri in zip(NOTEBOOK_CELLS, cells)]),
        [types.TextDocumentItem(uri, language, 1, text) for (_, language, text), uri in zip(NOTEBOOK_CELLS, cells)]))
    found = await published(client, cells[2])
    while cells[3] not in client.diagnostics:
        await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [(d.code, start(d)) for d in found] == [("NG001", (2, 8))]  # the row counts in the cell
    assert [(d.code, start(d)) for d in client.diagnostics[cells[3]]] == [("NG004", (1, 9))]
    assert list(client.diagnostics[cells[1]]) == []

    [fix_all] = await actions(client, cells[3], only=[types.CodeActionKind.SourceFixAll])
    changes = fix_all.edit.changes  # the rewrite in the fourth cell, the import in the first code cell
    assert set(changes) == {cells[1], cells[3]}
    assert apply(NOTEBOOK_CELLS[1][2], changes[cells[1]]) == (
        "import torch\nfrom lint_nograd import stop_gradient\nfrom torch.func import grad, jacfwd\n%matplotlib inline")
    assert apply(NOTEBOOK_CELLS[3][2], changes[cells[3]]).startswith(
        "def shifted(x):\n    s = stop_gradient(x.mean())\n")

    edited = "x = torch.tensor(1.5)\ng = grad(torch.sin)(x)"
    found = await published(client, cells[2], lambda: client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            types.VersionedNotebookDocumentIdentifier(2, notebook.as_uri()),
            types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[
                types.NotebookDocumentCellContentChanges(types.VersionedTextDocumentIdentifier(2, cells[2]),
                                                         [types.TextDocumentContentChangeWholeDocument(edited)])])))))
    assert found == []


@pytest.mark.asyncio
async def test_a_file_that_does_not_parse_gets_ng000_and_the_server_goes_on(client, project):
    path = project / "broken.py"
    text = "import torch\nfrom torch.func import grad\nwith torch.no_grad(:\n    g = grad(torch.sin)(x)\n"
    found = await published(client, path.as_uri(), open_file(client, path, text))
    assert [(d.code, d.severity) for d in found] == [("NG000", types.DiagnosticSeverity.Error)]
    assert start(found[0])[0] == 2
    repaired = text.replace("no_grad(:", "no_grad():")
    assert [d.code for d in await published(client, path.as_uri(), change(client, path, repaired, 2))] == ["NG001"]


@pytest.mark.asyncio
async def test_columns_count_utf16_code_units(client, project):
    path = project / "emoji.py"
    line = "    s = '\U0001F600'; g = grad(torch.sin)(x)"
    text = f"import torch\nfrom torch.func import grad\nwith torch.no_grad():\n{line}\n"
    [found] = await published(client, path.as_uri(), open_file(client, path, text))
    assert found.code == "NG001" and start(found) == (3, line.index("grad(") + 1)  # the emoji is two units
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(path.as_uri()), found.range.start))
    assert hover is not None and hover.range == found.range


@pytest.mark.asyncio
async def test_the_project_settings_are_read_again_when_pyproject_changes(client, project):
    path = project / "model.py"
    await published(client, path.as_uri(), open_file(client, path))
    settings = project / "pyproject.toml"

    def saved(text: str):
        settings.write_text(text)
        return lambda: client.text_document_did_save(types.DidSaveTextDocumentParams(
            types.TextDocumentIdentifier(settings.as_uri())))
    found = await published(client, path.as_uri(), saved('[tool.lint-nograd]\nignore = ["NG001", "NG004"]\n'))
    assert {d.code for d in found} == {"NG003", "NG006"}
    found = await published(client, path.as_uri(), saved(
        '[tool.lint-nograd]\nper-file-ignores = {"model.py" = ["NG003"]}\n'))
    assert {d.code for d in found} == {"NG001", "NG004", "NG006"}
    found = await published(client, path.as_uri(), saved('[tool.lint-nograd]\nselect = ["NG9"]\n'))
    assert found == []  # a setting that cannot be used: said once, no findings
    assert any("NG9" in message.message for message in client.messages)
    found = await published(client, path.as_uri(), saved('[tool.lint-nograd]\nextend-exclude = ["model.py"]\n'))
    assert found == []


FAILING_SERVER = [sys.executable, "-c", "from lint_nograd import server\nfrom lint_nograd.run import runner\n"
                  "def check(*args, **kwargs): raise RuntimeError('a bug')\n"
                  "runner.check = check\nserver.main()"]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=FAILING_SERVER))
async def failing_client(lsp_client: LanguageClient, project):
    async for _ in _session(lsp_client, project):
        yield


@pytest.mark.asyncio
async def test_an_internal_error_is_logged_and_the_server_goes_on(failing_client, project):
    path = project / "model.py"
    open_file(failing_client, path)()
    while not any("a bug" in log.message for log in failing_client.log_messages):
        await asyncio.wait_for(failing_client.wait_for_notification(types.WINDOW_LOG_MESSAGE), 60)
    [log] = [log for log in failing_client.log_messages if "a bug" in log.message]
    assert log.type == types.MessageType.Error and "RuntimeError" in log.message
    hover = await failing_client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(path.as_uri()), types.Position(0, 0)))
    assert hover is None  # still answering


def test_the_linter_install_does_not_pull_the_server():
    project = parse_toml((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith(("pygls", "lsprotocol"))]
    assert {d.split(">")[0] for d in project["optional-dependencies"]["server"]} == {"pygls", "lsprotocol"}
    done = subprocess.run([sys.executable, "-c", "import sys, lint_nograd.cli, lint_nograd.analysis.torch_names\n"
                           "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol')))"],
                          capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


def test_without_pygls_the_server_command_names_the_extra(tmp_path):
    blocker = "import sys\nsys.modules['pygls'] = sys.modules['lsprotocol'] = None\n"
    command = blocker + "from lint_nograd.cli import main\nsys.exit(main(['server']))"
    done = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == ""
    assert "pip install 'lint-nograd[server]'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.asyncio
async def test_a_file_outside_every_workspace_folder_is_checked_alone_and_nothing_is_written_there(
        client, project, tmp_path_factory, user_cache):
    outside = tmp_path_factory.mktemp("site-packages")  # go-to-definition into an installed package
    (outside / "pyproject.toml").write_text('[tool.lint-nograd]\nselect = ["NG003"]\n')  # not read
    path = outside / "model.py"
    path.write_text(EXAMPLE)
    found = await published(client, path.as_uri(), open_file(client, path))
    assert {d.code for d in found} == {"NG001", "NG003", "NG004", "NG006"}  # the default settings
    inside = project / "model.py"
    await published(client, inside.as_uri(), open_file(client, inside))
    for saved in (path, inside):
        await published(client, path.as_uri(), lambda saved=saved: client.text_document_did_save(
            types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(saved.as_uri()))))
    assert (user_cache / project.name).is_dir()  # the workspace's project keeps its cache
    assert not (user_cache / outside.name).exists()
    assert sorted(p.name for p in outside.iterdir()) == ["model.py", "pyproject.toml"]
    assert path.read_text() == EXAMPLE


@pytest.mark.asyncio
async def test_a_folder_added_to_the_workspace_later_links_its_files(client, tmp_path_factory):
    """A file opened before its folder joins the workspace was checked alone: once it joins, the
    file is checked with its project, whose other modules its calls reach."""
    later = tmp_path_factory.mktemp("later")
    (later / "pyproject.toml").write_text(DECLARES_LINT_NOGRAD)
    (later / "model.py").write_text(
        "import torch\n\n\ndef loss(x):\n    with torch.no_grad():\n        s = x.mean()\n    return x - s\n")
    train = later / "train.py"
    train.write_text("from torch.func import jacfwd\n\nfrom model import loss\n\njacfwd(loss)\n")
    assert await published(client, train.as_uri(), open_file(client, train)) == []
    added = types.WorkspaceFoldersChangeEvent(added=[types.WorkspaceFolder(later.as_uri(), later.name)], removed=[])
    found = await published(client, train.as_uri(), lambda: client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(added)))
    assert [(d.code, start(d)) for d in found] == [("NG004", (4, 0))]
