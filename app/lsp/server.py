"""`tracelore lsp`: a language server (pygls, over stdio) for log files.

Each open log is scanned as it is typed or appended to (`app.core.engine.live`): a change below
the scanned lines feeds only the new lines; an edit among them scans again from the last
checkpoint above it (a copy of the scan kept every 256 KiB of text). The server keeps each
document's text itself, as UTF-8 chunks an append adds to (`app.lsp.text`), not pygls.
An open document is a job of its own until `tracelore.diagnoseJob` groups documents (one
file per rank) into one job. For the job it publishes:

* diagnostics at the evidence lines: error for the initiating failure, warning for its
  echoes, information for earlier trouble and harmless lines, hint for an unrecognised start;
* a hover with the explanation, the facts, the fix and the verify command;
* code actions: open the encyclopedia entry, copy the verify command;
* document symbols: one per rank, with the failures seen on it;
* a `tracelore/status` notification with the job's verdict.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from app import __version__
from app.core import Candidate, Diagnosis, Library
from app.core.engine import LiveJob, LiveScan
from app.lsp.docs import CHECKPOINT_BYTES, Doc, TextProtocol, doc_name
from app.lsp.text import LogText
from app.lsp.views import diagnostics_for, explain, rank_symbols

STATUS = "tracelore/status"
SETTLE = 0.05  # seconds without a change before the scan catches up with the text
DIAGNOSE_JOB = "tracelore.diagnoseJob"
OPEN_ENTRY = "tracelore.openEntry"
COPY_VERIFY = "tracelore.copyVerify"


class TraceloreServer(LanguageServer):
    """The server: documents, their scans and the last diagnosis of each job."""

    def __init__(self, library: Library, *, base_url: str = "") -> None:
        super().__init__(
            "tracelore",
            __version__,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            protocol_cls=TextProtocol,
        )
        self.library = library
        self.base_url = base_url.rstrip("/")  # empty: entries are named by path, not linked
        self.docs: dict[str, Doc] = {}
        self.results: dict[str, Diagnosis] = {}  # by document: the diagnosis of its job
        self.pending: set[str] = set()  # documents changed since their scan last caught up and was diagnosed
        self.versions: dict[str, int] = {}  # the editor's version of each document's text
        self._pumping: asyncio.Task[None] | None = None
        self.last_change = 0.0  # the event loop's time of the last change

    def catch_up(self) -> None:
        """Start the background scan of changed documents, unless it is running."""
        if self._pumping is None or self._pumping.done():
            self._pumping = asyncio.get_running_loop().create_task(self.pump())

    # -- scanning ---------------------------------------------------------------------------

    def open(self, uri: str, text: str) -> None:
        name = doc_name(uri)
        self.docs[uri] = Doc(uri, name, LiveScan(self.library, name=name), LogText(uri, text), job={uri})
        while self._feed_block(self.docs[uri]):
            pass

    def _feed_block(self, doc: Doc) -> bool:
        """Feed the next block of whole lines (up to CHECKPOINT_BYTES), then checkpoint; False when none is left."""
        rest = doc.text.since(doc.fed_bytes, CHECKPOINT_BYTES + 1)  # an append reads what it appended
        cut = rest.rfind(b"\n") + 1
        if not cut:
            if len(rest) <= CHECKPOINT_BYTES:
                return False  # only a last line without its newline, or nothing
            rest = doc.text.since(doc.fed_bytes)  # one line longer than a block: fed whole
            cut = rest.rfind(b"\n") + 1
            if not cut:
                return False
        block = rest[:cut]
        doc.text.read -= len(rest) - cut  # what was read past the last line break is read again next time
        doc.live.feed(block)
        doc.fed_lines += block.count(b"\n")
        doc.fed_bytes += cut
        doc.checkpoint()
        return True

    def changed(self, uri: str, changes: list[lsp.TextDocumentContentChangeEvent]) -> None:
        """Apply an editor's changes to the text at once; the scan catches up in the background (`pump`)."""
        doc = self.docs.get(uri)
        if doc is None:  # not opened: a change of the whole text is all there is to go on
            whole = [c.text for c in changes if isinstance(c, lsp.TextDocumentContentChangeWholeDocument)]
            self.open(uri, whole[-1] if whole else "")
            self.pending.add(uri)
            return
        doc.text.read = 0
        # The first byte a change may have touched (a change of the whole text: the top).
        first = min(doc.text.apply(change, self.workspace.position_codec) for change in changes)
        if first < doc.fed_bytes:  # an edit among the scanned lines: what was scanned below it no longer holds
            doc.rewind(first, self.library)
        self.pending.add(uri)
        self.last_change = asyncio.get_running_loop().time()

    async def pump(self) -> None:
        """Bring the scans of changed documents up to their text, a block at a time, then diagnose them.

        Between blocks the server reads its messages: further edits are applied (and rewind the
        scan when they land above it) and hovers are answered, so a burst of edits in a long log
        costs one scan to its end after the last of them, not one per edit (issue #38: 1.4 s an
        edit in a 20 MB log, and a hover waited behind 300 of them).
        """
        loop = asyncio.get_running_loop()
        while self.pending:
            # Wait for a pause in the edits: the server reads each message in several steps, each
            # waiting for the loop, so scanning between them would hold a burst up for seconds.
            if (quiet := self.last_change + SETTLE - loop.time()) > 0:
                await asyncio.sleep(quiet)
                continue
            uri = min(self.pending)
            doc = self.docs.get(uri)
            if doc is None:
                self.pending.discard(uri)
            elif not self._feed_block(doc):
                self.pending.discard(uri)
                self.diagnose(uri)
            await asyncio.sleep(0)

    def closed(self, uri: str) -> None:
        doc = self.docs.pop(uri, None)
        self.results.pop(uri, None)
        self.pending.discard(uri)
        self.versions.pop(uri, None)
        if doc is None:
            return
        for other in doc.job - {uri}:
            if other in self.docs:
                self.docs[other].job.discard(uri)
        self.publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def group(self, uris: list[str]) -> None:
        """Diagnose these open documents as one job (one file per rank)."""
        members = {u for u in uris if u in self.docs}
        for u in members:
            for old in self.docs[u].job - members:
                if old in self.docs:
                    self.docs[old].job.discard(u)
            self.docs[u].job = set(members)

    # -- diagnosing ---------------------------------------------------------------------------

    def diagnose(self, uri: str) -> Diagnosis | None:
        """Diagnose the job of a document and publish what it found to each of its documents."""
        doc = self.docs.get(uri)
        if doc is None:
            return None
        members = sorted(doc.job)
        job = LiveJob(self.library)
        for u in members:
            member = self.docs[u]
            scan = member.live
            if rest := member.text.since(member.fed_bytes):  # a last line without its newline: scanned on a copy
                scan = scan.fork()
                scan.feed(rest)
                scan.flush()
            job.files[u] = scan
        result = job.diagnose()
        self.status(members, result)  # first: a client that waits for the diagnostics has the verdict too
        for u in members:
            if result is None:
                self.results.pop(u, None)
            else:
                self.results[u] = result
            self.publish_diagnostics(
                lsp.PublishDiagnosticsParams(
                    uri=u, diagnostics=diagnostics_for(result, self.docs[u].name, self.entry_url)
                )
            )
        return result

    def publish_diagnostics(self, params: lsp.PublishDiagnosticsParams) -> None:
        self.text_document_publish_diagnostics(params)

    def status(self, uris: list[str], d: Diagnosis | None) -> None:
        """The job's verdict, for a status bar."""
        initiating = next((c for c in d.candidates if c.role == "initiating"), None) if d else None
        if d is None:
            verdict = "empty log"
        elif initiating is not None:
            where = f" on rank {initiating.rank}" if initiating.rank is not None else ""
            echoes = sum(1 for c in d.candidates if c.role == "collateral")
            verdict = f"{initiating.id}{where}" + (f", {echoes} echo{'es' if echoes != 1 else ''}" if echoes else "")
        elif d.unrecognised_start is not None and d.candidates:
            verdict = "first failure not recognised; echoes only"
        elif d.unrecognised_start is not None:
            verdict = "error not recognised"
        elif d.candidates:
            verdict = f"{d.candidates[0].id} (earlier trouble)"
        else:
            verdict = "no known failure"
        self.protocol.notify(
            STATUS,
            {
                "uris": uris,
                "verdict": verdict,
                "initiating": None
                if initiating is None
                else {
                    "id": initiating.id,
                    "title": initiating.title,
                    "rank": initiating.rank,
                    "file": initiating.file,
                    "line": initiating.line,
                },
                "candidates": len(d.candidates) if d else 0,
                "hang_rank": d.hang.rank if d and d.hang else None,
                # How each document was scanned: lines fed, and how often it was scanned anew.
                "documents": [
                    {
                        "uri": u,
                        "version": self.versions.get(u),  # of the text diagnosed
                        "lines": self.docs[u].fed_lines,
                        "rescans": self.docs[u].rescans,
                        "rescanned_from": self.docs[u].rescanned_from,
                        # bytes of its text read since its last change (an append: what it appended)
                        "read": self.docs[u].text.read,
                    }
                    for u in uris
                    if u in self.docs
                ],
            },
        )

    def symbols(self, uri: str) -> list[lsp.DocumentSymbol]:
        """One symbol per rank the document's evidence shows, holding the failures seen on it."""
        d, doc = self.results.get(uri), self.docs.get(uri)
        return [] if d is None or doc is None else rank_symbols(d, doc.name)

    def entry_url(self, c: Candidate) -> str | None:
        """The entry's address on the service at --base-url (none set: no link to make)."""
        return f"{self.base_url}{c.path}" if self.base_url else None

    # -- what the editor asks ---------------------------------------------------------------

    def candidates_at(self, uri: str, line: int) -> list[Candidate]:
        """Candidates with evidence on a 0-based line of a document."""
        d, doc = self.results.get(uri), self.docs.get(uri)
        if d is None or doc is None:
            return []
        return [c for c in d.candidates if any(e.file == doc.name and e.line == line + 1 for e in c.evidence)]

    def hover(self, uri: str, line: int) -> lsp.Hover | None:
        found = self.candidates_at(uri, line)
        if not found:
            return None
        return lsp.Hover(
            contents=lsp.MarkupContent(
                kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(explain(c, self.entry_url(c)) for c in found)
            )
        )

    def code_actions(self, uri: str, params: lsp.CodeActionParams) -> list[lsp.Command]:
        """Open the entry, copy the verify command: for each failure with evidence in the range.

        Plain commands rather than CodeActions holding one: lsprotocol's own client reads any
        action that has a command as a bare Command, and every client accepts these.
        """
        seen: dict[str, Candidate] = {}
        for line in range(params.range.start.line, params.range.end.line + 1):
            for c in self.candidates_at(uri, line):
                seen.setdefault(c.id, c)
        actions = []
        for c in seen.values():
            if (url := self.entry_url(c)) is not None:
                actions.append(
                    lsp.Command(title=f"Open the encyclopedia entry: {c.title}", command=OPEN_ENTRY, arguments=[url])
                )
            if c.verify_command:  # only a command is copied; a check written in words is read on hover
                actions.append(
                    lsp.Command(
                        title=f"Copy the verify command: {c.title}", command=COPY_VERIFY, arguments=[c.verify_command]
                    )
                )
        return actions


def make_server(library: Library, *, base_url: str = "") -> TraceloreServer:
    """The server with its features registered."""
    server = TraceloreServer(library, base_url=base_url)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TraceloreServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.open(params.text_document.uri, params.text_document.text)
        ls.versions[params.text_document.uri] = params.text_document.version
        ls.diagnose(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TraceloreServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.changed(params.text_document.uri, list(params.content_changes))
        ls.versions[params.text_document.uri] = params.text_document.version
        ls.catch_up()

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TraceloreServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.closed(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: TraceloreServer, params: lsp.HoverParams) -> lsp.Hover | None:
        return ls.hover(params.text_document.uri, params.position.line)

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.Empty]))
    def code_action(ls: TraceloreServer, params: lsp.CodeActionParams) -> list[lsp.Command]:
        return ls.code_actions(params.text_document.uri, params)

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def document_symbol(ls: TraceloreServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        return ls.symbols(params.text_document.uri)

    @server.command(DIAGNOSE_JOB)
    def diagnose_job(ls: TraceloreServer, *uris: str) -> dict[str, Any]:
        """Diagnose open documents as one job; with no argument, every open document."""
        members = list(uris) or sorted(ls.docs)
        ls.group(members)
        result = ls.diagnose(members[0]) if members and members[0] in ls.docs else None
        return {"uris": members, "candidates": [c.id for c in result.candidates] if result else []}

    @server.command(OPEN_ENTRY)
    async def open_entry(ls: TraceloreServer, url: str) -> None:
        await ls.window_show_document_async(lsp.ShowDocumentParams(uri=url, external=True))

    @server.command(COPY_VERIFY)
    def copy_verify(ls: TraceloreServer, verify: str) -> str:
        # LSP has no clipboard: the text comes back to the client (VS Code copies it) and is shown.
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Info, message=f"Verify: {verify}"))
        return verify

    return server
