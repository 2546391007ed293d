"""`tracelore lsp`: a language server (pygls, over stdio) for log files.

Each open log is scanned as it is typed or appended to (`app.core.engine.live`): a change below
the scanned lines feeds only the new lines; an edit among them scans again from the last
checkpoint above it (a copy of the scan kept every 256 KiB of text). The server keeps each
document's text itself, as UTF-8 chunks an append adds to (`app.lsp_text`), not pygls.
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

from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from app import __version__
from app.core.engine.live import LiveJob, LiveScan
from app.core.knowledge.loading import Library
from app.core.models import Candidate, Diagnosis
from app.lsp_docs import CHECKPOINT_BYTES, Doc, TextProtocol, doc_name, line_range
from app.lsp_text import LogText

STATUS = "tracelore/status"
DIAGNOSE_JOB = "tracelore.diagnoseJob"
OPEN_ENTRY = "tracelore.openEntry"
COPY_VERIFY = "tracelore.copyVerify"
SOURCE = "tracelore"


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

    # -- scanning ---------------------------------------------------------------------------

    def open(self, uri: str, text: str) -> None:
        name = doc_name(uri)
        self.docs[uri] = Doc(uri, name, LiveScan(self.library, name=name), LogText(uri, text), job={uri})
        self._feed(self.docs[uri])

    def _feed(self, doc: Doc) -> None:
        """Feed the whole lines after those already fed, in blocks with a checkpoint after each."""
        rest = doc.text.since(doc.fed_bytes)  # only what was not fed: an append reads what it appended
        end = rest.rfind(b"\n") + 1
        start = 0
        while end > start:
            cut = end
            if cut - start > CHECKPOINT_BYTES:
                cut = rest.rfind(b"\n", start, start + CHECKPOINT_BYTES) + 1 or end
            block = rest[start:cut]
            doc.live.feed(block)
            doc.fed_lines += block.count(b"\n")
            doc.fed_bytes += cut - start
            start = cut
            doc.checkpoint()

    def changed(self, uri: str, changes: list[lsp.TextDocumentContentChangeEvent]) -> None:
        doc = self.docs.get(uri)
        if doc is None:  # not opened: a change of the whole text is all there is to go on
            whole = [c.text for c in changes if isinstance(c, lsp.TextDocumentContentChangeWholeDocument)]
            self.open(uri, whole[-1] if whole else "")
            return
        doc.text.read = 0
        for change in changes:
            doc.text.apply(change, self.workspace.position_codec)
        # The first line a change touches (a change of the whole text: the top).
        first = min(c.range.start.line if isinstance(c, lsp.TextDocumentContentChangePartial) else 0 for c in changes)
        if first < doc.fed_lines:  # an edit among the scanned lines: what was scanned below it no longer holds
            doc.rewind(first, self.library)
        self._feed(doc)

    def closed(self, uri: str) -> None:
        doc = self.docs.pop(uri, None)
        self.results.pop(uri, None)
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
                lsp.PublishDiagnosticsParams(uri=u, diagnostics=self._diagnostics(result, self.docs[u].name))
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
        elif d.unrecognised_start is not None:
            verdict = "first failure not recognised; echoes only"
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

    def entry_url(self, c: Candidate) -> str | None:
        """The entry's address on the service at --base-url (none set: no link to make)."""
        return f"{self.base_url}{c.path}" if self.base_url else None

    def _diagnostics(self, d: Diagnosis | None, name: str) -> list[lsp.Diagnostic]:
        if d is None:
            return []
        out: list[lsp.Diagnostic] = []
        for c in d.candidates:
            if c.episode == "earlier":
                severity = lsp.DiagnosticSeverity.Information
            elif c.role == "initiating":
                severity = lsp.DiagnosticSeverity.Error
            else:
                severity = lsp.DiagnosticSeverity.Warning
            label = {"initiating": "initiating failure", "collateral": "echo", "contributing": "also failed"}[c.role]
            if c.episode == "earlier":
                label = "earlier trouble the run survived"
            for e in c.evidence:
                if e.file != name:
                    continue
                start, end = e.span if e.span != (0, 0) else (0, len(e.text))
                out.append(
                    lsp.Diagnostic(
                        range=line_range(e.line, start, end),
                        message=f"{c.title} ({label}): {c.why}",
                        severity=severity,
                        code=c.id,
                        code_description=lsp.CodeDescription(href=url) if (url := self.entry_url(c)) else None,
                        source=SOURCE,
                        data={"id": c.id},
                    )
                )
        for h in d.harmless:
            if h.file == name:
                out.append(
                    lsp.Diagnostic(
                        range=line_range(h.line, 0, len(h.text)),
                        message=f"{h.title} (harmless): {h.summary}",
                        severity=lsp.DiagnosticSeverity.Information,
                        code=h.id,
                        source=SOURCE,
                    )
                )
        u = d.unrecognised_start
        if u is not None and u.file == name:
            out.append(
                lsp.Diagnostic(
                    range=line_range(u.line, 0, len(u.text)),
                    message=f"Most likely start of the failure, not one Tracelore knows: {u.why}",
                    severity=lsp.DiagnosticSeverity.Hint,
                    source=SOURCE,
                )
            )
        return out

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
                kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(map(self._explain, found))
            )
        )

    def _explain(self, c: Candidate) -> str:
        where = ", ".join(
            x for x in (f"rank {c.rank}" if c.rank is not None else "", f"line {c.line}", str(c.time or "")) if x
        )
        parts = [
            f"**{c.title}** `{c.id}`: {c.role}, {c.band} ({c.confidence:.2f})",
            f"{where}",
            c.summary,
            f"*Why {c.role}:* {c.why}",
        ]
        if c.facts:
            parts.append("**Facts:** " + ", ".join(f"{k}={v}" for k, v in c.facts.items()))
        if c.fix:
            parts.append("**Fix:**\n" + "\n".join(f"{i}. {step}" for i, step in enumerate(c.fix, 1)))
        if c.verify:
            parts.append(f"**Verify:**\n```sh\n{c.verify}\n```")
        url = self.entry_url(c)
        parts.append(
            f"[Encyclopedia entry]({url})" if url else f"Encyclopedia entry: `{c.path}` (set --base-url to link it)"
        )
        return "\n\n".join(parts)

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
            if c.verify:
                actions.append(
                    lsp.Command(title=f"Copy the verify command: {c.title}", command=COPY_VERIFY, arguments=[c.verify])
                )
        return actions

    def symbols(self, uri: str) -> list[lsp.DocumentSymbol]:
        """One symbol per rank the document's evidence shows, holding the failures seen on it."""
        d, doc = self.results.get(uri), self.docs.get(uri)
        if d is None or doc is None:
            return []
        by_rank: dict[int | None, list[tuple[Candidate, int]]] = {}
        for c in d.candidates:
            lines = [e.line for e in c.evidence if e.file == doc.name]
            if lines:
                rank = next((e.rank for e in c.evidence if e.file == doc.name and e.rank is not None), None)
                by_rank.setdefault(rank, []).append((c, min(lines)))
        out = []
        for rank in sorted(by_rank, key=lambda r: (r is None, r or 0)):
            children = [
                lsp.DocumentSymbol(
                    name=c.id,
                    detail=f"{c.role}: {c.title}",
                    kind=lsp.SymbolKind.Event,
                    range=line_range(line, 0, 0),
                    selection_range=line_range(line, 0, 0),
                )
                for c, line in sorted(by_rank[rank], key=lambda p: p[1])
            ]
            first, last = children[0].range.start.line, children[-1].range.start.line
            out.append(
                lsp.DocumentSymbol(
                    name=f"rank {rank}" if rank is not None else "no rank",
                    detail=", ".join(child.name for child in children),
                    kind=lsp.SymbolKind.Namespace,
                    range=lsp.Range(
                        start=lsp.Position(line=first, character=0), end=lsp.Position(line=last, character=0)
                    ),
                    selection_range=line_range(first + 1, 0, 0),
                    children=children,
                )
            )
        return out


def make_server(library: Library, *, base_url: str = "") -> TraceloreServer:
    """The server with its features registered."""
    server = TraceloreServer(library, base_url=base_url)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TraceloreServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.open(params.text_document.uri, params.text_document.text)
        ls.diagnose(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TraceloreServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.changed(params.text_document.uri, list(params.content_changes))
        ls.diagnose(params.text_document.uri)

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
