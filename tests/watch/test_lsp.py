"""`tracelore lsp` end to end: pytest-lsp drives the real server process over stdio with
real multi-rank logs of the corpus."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "tests" / "corpus" / "cases" / "gen-dist-per-rank-index-error"  # rank 2 of 3 fails
STATUS = "tracelore/status"


BASE_URL = "http://tracelore.test"


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "app", "lsp", "--base-url", BASE_URL])
)
async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    statuses: list[dict[str, Any]] = []
    lsp_client.statuses = statuses  # type: ignore[attr-defined]

    @lsp_client.feature(STATUS)
    def status(params: Any) -> None:
        statuses.append(params if isinstance(params, dict) else _plain(params))

    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=client_capabilities("visual-studio-code"), root_uri=CASE.as_uri())
    )
    yield
    await lsp_client.shutdown_session()


def _plain(params: Any) -> dict[str, Any]:
    """A notification's params as plain data (pygls hands custom ones over as named tuples)."""
    if hasattr(params, "_asdict"):
        return {k: _plain(v) for k, v in params._asdict().items()}
    if isinstance(params, list):
        return [_plain(v) for v in params]  # type: ignore[return-value]
    return params


def uri(name: str) -> str:
    return (CASE / name).as_uri()


def text(name: str) -> str:
    return (CASE / name).read_text(encoding="utf-8")


async def open_doc(client: LanguageClient, name: str, content: str | None = None) -> list[lsp.Diagnostic]:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri(name), language_id="log", version=1, text=text(name) if content is None else content
            )
        )
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return client.diagnostics[uri(name)]


def errors(diagnostics: list[lsp.Diagnostic]) -> list[tuple[str, int]]:
    return [(str(d.code), d.range.start.line) for d in diagnostics if d.severity == lsp.DiagnosticSeverity.Error]


@pytest.mark.asyncio
async def test_diagnostics_hover_code_actions_symbols_and_status(client: LanguageClient) -> None:
    diagnostics = await open_doc(client, "rank2.log")
    # rank2.log line 40 (0-based 39): "[rank2]: IndexError: index out of range in self"
    assert ("data.index_out_of_range", 39) in errors(diagnostics)
    error = next(d for d in diagnostics if d.range.start.line == 39)
    assert error.source == "tracelore"
    assert error.code_description is not None
    assert error.code_description.href == f"{BASE_URL}/failures/data.index_out_of_range"
    assert "initiating failure" in error.message

    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri("rank2.log")), position=lsp.Position(line=39, character=12)
        )
    )
    assert hover is not None
    value = hover.contents.value  # type: ignore[union-attr]
    assert "Token or label index out of range" in value and "**Fix:**" in value and "**Verify:**" in value
    assert "rank=2" in value  # the facts

    nothing = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri("rank2.log")), position=lsp.Position(line=0, character=0)
        )
    )
    assert nothing is None

    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri("rank2.log")),
            range=error.range,
            context=lsp.CodeActionContext(diagnostics=[error]),
        )
    )
    assert actions is not None
    titles = [a.title for a in actions]  # type: ignore[union-attr]
    assert any(t.startswith("Open the encyclopedia entry") for t in titles)
    # Its check is written in words (an assertion over the data), not one command: nothing to copy.
    assert not any(t.startswith("Copy the verify command") for t in titles)
    assert "**Verify:** Assert before training" in value and "num_embeddings" in value
    verify = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="tracelore.copyVerify", arguments=["nvidia-smi -L"])
    )
    assert verify == "nvidia-smi -L"  # what a failure with a verify command hands over: the command alone

    symbols = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=uri("rank2.log")))
    )
    assert symbols is not None
    assert [s.name for s in symbols] == ["rank 2"]  # type: ignore[union-attr]
    assert "data.index_out_of_range" in [c.name for c in symbols[0].children or []]  # type: ignore[union-attr]

    status = client.statuses[-1]  # type: ignore[attr-defined]
    assert status["verdict"] == "data.index_out_of_range on rank 2"
    assert status["initiating"]["line"] == 40


@pytest.mark.asyncio
async def test_rank_files_diagnosed_as_one_job(client: LanguageClient) -> None:
    alone = await open_doc(client, "rank0.log")
    assert errors(alone) == []  # rank 0 alone shows only an echo
    await open_doc(client, "rank1.log")
    await open_doc(client, "rank2.log")
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(
            command="tracelore.diagnoseJob", arguments=[uri("rank0.log"), uri("rank1.log"), uri("rank2.log")]
        )
    )
    assert result["candidates"][0] == "data.index_out_of_range"
    rank0 = client.diagnostics[uri("rank0.log")]
    echo = [d for d in rank0 if d.code == "dist.gloo_connection_closed"]
    assert echo and all(d.severity == lsp.DiagnosticSeverity.Warning for d in echo)
    assert "echo" in echo[0].message
    assert ("data.index_out_of_range", 39) in errors(client.diagnostics[uri("rank2.log")])
    status = client.statuses[-1]  # type: ignore[attr-defined]
    assert status["verdict"].startswith("data.index_out_of_range on rank 2, ")
    assert len(status["uris"]) == 3


@pytest.mark.asyncio
async def test_appended_lines_are_scanned_alone_and_an_edit_above_rescans(client: LanguageClient) -> None:
    lines = text("rank2.log").splitlines(keepends=True)
    head, rest = "".join(lines[:30]), "".join(lines[30:])
    first = await open_doc(client, "rank2.log", head)
    assert errors(first) == []
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri("rank2.log"), version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(start=lsp.Position(line=30, character=0), end=lsp.Position(line=30, character=0)),
                    text=rest,
                )
            ],
        )
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert ("data.index_out_of_range", 39) in errors(client.diagnostics[uri("rank2.log")])
    doc = client.statuses[-1]["documents"][0]  # type: ignore[attr-defined]
    assert (doc["lines"], doc["rescans"]) == (len(lines), 0)

    # An edit among the scanned lines: the error line is rewritten into a harmless one.
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri("rank2.log"), version=3),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(
                        start=lsp.Position(line=39, character=9),
                        end=lsp.Position(line=39, character=len(lines[39].rstrip("\n"))),
                    ),
                    text="step 7 done",
                )
            ],
        )
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert ("data.index_out_of_range", 39) not in errors(client.diagnostics[uri("rank2.log")])
    doc = client.statuses[-1]["documents"][0]  # type: ignore[attr-defined]
    assert (doc["rescans"], doc["rescanned_from"]) == (1, 0)  # a small document: from the top


@pytest.mark.asyncio
async def test_a_last_line_without_its_newline_counts(client: LanguageClient) -> None:
    content = text("rank2.log").rstrip("\n")
    diagnostics = await open_doc(client, "rank2.log", content)
    assert ("data.index_out_of_range", 39) in errors(diagnostics)
    assert client.statuses[-1]["documents"][0]["lines"] == 39  # type: ignore[attr-defined]


async def change(client: LanguageClient, name: str, version: int, line: int, start: int, end: int, new: str) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri(name), version=version),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(
                        start=lsp.Position(line=line, character=start), end=lsp.Position(line=line, character=end)
                    ),
                    text=new,
                )
            ],
        )
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)


@pytest.mark.asyncio
async def test_an_edit_in_a_long_log_scans_again_only_from_the_checkpoint_above_it(client: LanguageClient) -> None:
    steps = [line for line in text("rank0.log").splitlines(keepends=True) if line.startswith("step")]
    prelude = (steps * (1 + 800_000 // len("".join(steps))))[:20_000]  # rank 2's steps before it fails
    failing = text("rank2.log").splitlines(keepends=True)
    at = len(prelude) + 39  # the IndexError line
    diagnostics = await open_doc(client, "rank2.log", "".join(prelude + failing))
    assert ("data.index_out_of_range", at) in errors(diagnostics)

    original = failing[39].rstrip("\n")
    await change(client, "rank2.log", 2, at, 9, len(original), "step 7 done")
    assert ("data.index_out_of_range", at) not in errors(client.diagnostics[uri("rank2.log")])
    doc = client.statuses[-1]["documents"][0]  # type: ignore[attr-defined]
    assert doc["rescans"] == 1 and doc["rescanned_from"] > len(prelude) // 2  # not from the top
    assert doc["lines"] == len(prelude) + len(failing)

    await change(client, "rank2.log", 3, at, 9, len("[rank2]: step 7 done"), original[9:])  # undone
    assert ("data.index_out_of_range", at) in errors(client.diagnostics[uri("rank2.log")])

    await change(client, "rank2.log", 4, 0, 0, 0, "launcher started\n")  # a line above everything
    assert ("data.index_out_of_range", at + 1) in errors(client.diagnostics[uri("rank2.log")])
    doc = client.statuses[-1]["documents"][0]  # type: ignore[attr-defined]
    assert (doc["rescans"], doc["rescanned_from"]) == (3, 0)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "app", "lsp"]))
async def unlinked(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=client_capabilities("visual-studio-code"), root_uri=CASE.as_uri())
    )
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_without_a_base_url_entries_are_named_not_linked(unlinked: LanguageClient) -> None:
    diagnostics = await open_doc(unlinked, "rank2.log")
    error = next(d for d in diagnostics if d.range.start.line == 39)
    assert error.code == "data.index_out_of_range" and error.code_description is None
    actions = await unlinked.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri("rank2.log")),
            range=error.range,
            context=lsp.CodeActionContext(diagnostics=[error]),
        )
    )
    assert [a.title.split(":")[0] for a in actions or []] == []  # no entry link, and a check in words is not copied
    hover = await unlinked.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri("rank2.log")), position=lsp.Position(line=39, character=0)
        )
    )
    assert hover is not None and "`/failures/data.index_out_of_range` (set --base-url" in hover.contents.value  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_an_append_to_a_long_log_reads_only_the_appended_text(client: LanguageClient) -> None:
    steps = [line for line in text("rank0.log").splitlines(keepends=True) if line.startswith("step")]
    prelude = "".join((steps * (1 + 800_000 // len("".join(steps))))[:20_000])  # about 0.5 MB of steps
    failing = text("rank2.log").splitlines(keepends=True)
    await open_doc(client, "rank2.log", prelude)
    assert client.statuses[-1]["documents"][0]["read"] == len(prelude.encode())  # type: ignore[attr-defined]
    lines = prelude.count("\n")
    for version, block in enumerate(("".join(failing[:20]), "".join(failing[20:])), start=2):
        await change(client, "rank2.log", version, lines, 0, 0, block)
        doc = client.statuses[-1]["documents"][0]  # type: ignore[attr-defined]
        assert doc["read"] == len(block.encode())  # the engine was given the appended text, not the document
        assert doc["rescans"] == 0
        lines += block.count("\n")
    at = prelude.count("\n") + 39
    assert ("data.index_out_of_range", at) in errors(client.diagnostics[uri("rank2.log")])


@pytest.mark.asyncio
async def test_a_burst_of_edits_in_a_long_log_is_scanned_once_and_hovers_are_answered(client: LanguageClient) -> None:
    # Issue #38: each edit among the scanned lines rescanned the log below it before the next message
    # was read (1.4 s an edit in a 20 MB log; a hover waited behind them all).
    steps = [line for line in text("rank0.log").splitlines(keepends=True) if line.startswith("step")]
    prelude = (steps * (1 + 2_000_000 // len("".join(steps))))[:60_000]
    failing = text("rank2.log").splitlines(keepends=True)
    at = len(prelude) + 39
    await open_doc(client, "rank2.log", "".join(prelude + failing))
    before = len(client.statuses)  # type: ignore[attr-defined]
    for version in range(2, 52):
        line = (version * 997) % len(prelude)
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri("rank2.log"), version=version),
                content_changes=[
                    lsp.TextDocumentContentChangePartial(
                        range=lsp.Range(
                            start=lsp.Position(line=line, character=0), end=lsp.Position(line=line, character=4)
                        ),
                        text="STEP",
                    )
                ],
            )
        )
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri("rank2.log")), position=lsp.Position(line=at, character=0)
        )
    )
    assert hover is not None  # answered from the diagnosis at hand, while the scan catches up
    statuses = client.statuses  # type: ignore[attr-defined]
    for _ in range(600):
        if statuses[-1]["documents"][0].get("version") == 51:
            break
        await asyncio.sleep(0.05)
    assert statuses[-1]["documents"][0]["version"] == 51
    assert len(statuses) - before < 10  # the burst was diagnosed once or a few times, not 50
    assert ("data.index_out_of_range", at) in errors(client.diagnostics[uri("rank2.log")])
