"""`lint-nograd server` keeps to the protocol where an editor relies on it: lines end at `\\r\\n`,
`\\r` or `\\n`, so positions and edits in a document with CR-only line ends land where they belong;
and every request gets a response, even one after `shutdown` or one whose params are invalid."""
from __future__ import annotations

import asyncio
import json
import re
import subprocess
import uuid
from concurrent.futures import Future

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lint_nograd.fix import rewrite  # noqa: E402
from lsprotocol import types  # noqa: E402
from pygls.exceptions import JsonRpcException  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402
from test_server import (  # noqa: E402
    CAPABILITIES,
    EXAMPLE,
    SERVER,
    actions,
    by_code,
    client,  # noqa: F401  (a fixture)
    project,  # noqa: F401  (a fixture)
    published,
    start,
)

LINE_BREAK = re.compile(r"\r\n|\r|\n")
INVALID_PARAMS, INVALID_REQUEST = -32602, -32600


def with_line_ends(text: str, ends: str) -> str:
    """`text` with its line breaks replaced: "\\r", "\\r\\n", or "mixed" (each kind in turn)."""
    kinds = ["\n", "\r", "\r\n"] if ends == "mixed" else [ends]
    lines = text.split("\n")
    return "".join(line + kinds[number % len(kinds)] for number, line in enumerate(lines[:-1])) + lines[-1]


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """The text after the edits, as an editor applies them: lines end at `\\r\\n`, `\\r` or `\\n`."""
    starts = [0] + [match.end() for match in LINE_BREAK.finditer(text)]

    def offset(position: types.Position) -> int:
        line_start = starts[position.line]
        line_end = starts[position.line + 1] if position.line + 1 < len(starts) else len(text)
        line = LINE_BREAK.sub("", text[line_start:line_end])
        return line_start + min(position.character, len(line))  # ASCII text: characters are units

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def open_text(lsp: LanguageClient, uri: str, text: str):
    return lambda: lsp.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri, "python", 1, text)))


@pytest.mark.asyncio
@pytest.mark.parametrize("ends", ["\r", "\r\n", "mixed"], ids=["CR", "CRLF", "mixed"])
async def test_findings_and_fix_all_follow_the_protocol_s_line_ends(client, project, ends):  # noqa: F811
    text = with_line_ends(EXAMPLE, ends)
    path = project / "model.py"
    path.write_bytes(text.encode())
    found = by_code(await published(client, path.as_uri(), open_text(client, path.as_uri(), text)))
    # the same places as in the file with `\n` line ends, which test_server pins
    assert start(found["NG006"]) == (20, 9) and start(found["NG004"]) == (32, 13)
    assert start(found["NG001"]) == (42, 23) and start(found["NG003"]) == (43, 4)
    [reaching] = found["NG004"].related_information
    assert reaching.location.range.start.line == 36
    [fix_all] = await actions(client, path.as_uri(), only=[types.CodeActionKind.SourceFixAll])
    expected = rewrite.fix_source(text.encode(), display_path="model.py").text
    assert expected != text and apply(text, fix_all.edit.changes[path.as_uri()]) == expected
    [quick_fix] = [a for a in await actions(client, path.as_uri(), found["NG006"]) if a.title.startswith("Fix NG006")]
    fixed = apply(text, quick_fix.edit.changes[path.as_uri()])
    assert "    scale = stop_gradient(prediction.std() + 1e-6)  # meant as a constant" in LINE_BREAK.split(fixed)
    assert len(fixed) < len(text) + 100  # the edit replaced lines, it did not copy the file


@pytest.mark.asyncio
async def test_fix_all_of_a_file_without_a_last_line_break(client, project):  # noqa: F811
    text = with_line_ends(EXAMPLE, "\r").rstrip("\r")
    path = project / "model.py"
    await published(client, path.as_uri(), open_text(client, path.as_uri(), text))
    [fix_all] = await actions(client, path.as_uri(), only=[types.CodeActionKind.SourceFixAll])
    assert apply(text, fix_all.edit.changes[path.as_uri()]) == rewrite.fix_source(text.encode()).text


async def raw_request(lsp: LanguageClient, method: str, params: dict):
    """Send a request as given, params the server cannot read included; its result or its error."""
    msg_id = str(uuid.uuid4())
    future: Future = Future()
    lsp.protocol._request_futures[msg_id] = future
    lsp.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(asyncio.wrap_future(future), 30)


@pytest.mark.asyncio
@pytest.mark.parametrize("params", [
    {"textDocument": {"uri": "file:///model.py"}},  # no position
    {"textDocument": {"uri": "file:///model.py"}, "position": {"line": 0, "character": -1}},
    {"textDocument": {"uri": "file:///model.py"}, "position": {"line": "one", "character": 0}},
], ids=["no position", "negative character", "a line that is no number"])
async def test_a_request_with_invalid_params_gets_an_error_and_the_server_goes_on(client, project, params):  # noqa: F811
    with pytest.raises(JsonRpcException) as raised:
        await raw_request(client, types.TEXT_DOCUMENT_HOVER, params)
    assert raised.value.code == INVALID_PARAMS and types.TEXT_DOCUMENT_HOVER in raised.value.message
    path = project / "model.py"
    found = by_code(await published(client, path.as_uri(), open_text(client, path.as_uri(), EXAMPLE)))
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(path.as_uri()), found["NG004"].range.start))
    assert hover is not None and "NG004" in hover.contents.value


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def session(lsp_client: LanguageClient, project):  # noqa: F811
    """A session the test shuts down itself."""
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=CAPABILITIES, root_uri=project.as_uri(),
        workspace_folders=[types.WorkspaceFolder(project.as_uri(), project.name)]))
    yield lsp_client


@pytest.mark.asyncio
async def test_a_request_after_shutdown_gets_invalid_request(session, project):  # noqa: F811
    lsp_client = session
    path = project / "model.py"
    await published(lsp_client, path.as_uri(), open_text(lsp_client, path.as_uri(), EXAMPLE))
    assert await lsp_client.shutdown_async(None) is None
    for method, params in [
        (types.TEXT_DOCUMENT_HOVER, {"textDocument": {"uri": path.as_uri()}, "position": {"line": 0, "character": 0}}),
        (types.TEXT_DOCUMENT_CODE_ACTION, {"textDocument": {"uri": path.as_uri()}, "range": {
            "start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}}),
        (types.SHUTDOWN, None),
    ]:
        with pytest.raises(JsonRpcException) as raised:
            await raw_request(lsp_client, method, params)
        assert raised.value.code == INVALID_REQUEST, method
    lsp_client.exit(None)


def _framed(message: dict) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


@pytest.mark.parametrize("shut_down, code", [(True, 0), (False, 1)])
def test_exit_ends_the_server_with_0_after_shutdown_and_1_without(tmp_path, shut_down, code):
    """The protocol's `exit`: "The server should exit with success code 0 if the shutdown request
    has been received before; otherwise with error code 1"."""
    messages = [{"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": tmp_path.as_uri(),
                                                             "capabilities": {}}},
                {"method": "initialized", "params": {}},
                *([{"id": 2, "method": "shutdown"}] if shut_down else []),
                {"method": "exit"}]
    done = subprocess.run(SERVER, input=b"".join(map(_framed, messages)), capture_output=True, timeout=60)
    assert done.returncode == code, done.stderr
