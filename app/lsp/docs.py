"""An open log in `tracelore lsp`: its text, its scan and the checkpoints an edit rescans from.

The protocol class keeps the text of open documents out of pygls's workspace, whose document
rebuilds a tuple of every line on each change and copies the whole text on each append.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from app.core import Library
from app.core.engine import LiveScan
from app.lsp.text import LogText

# A copy of a document's scan is kept every CHECKPOINT_BYTES bytes of its text (UTF-8), so an
# edit among the scanned lines scans again only from the last copy above it. At most
# MAX_CHECKPOINTS are kept (every other one is dropped when there are more): each holds the
# scan's bounded state, not the text.
CHECKPOINT_BYTES = 256 << 10
MAX_CHECKPOINTS = 32


@dataclass
class Checkpoint:
    lines: int  # lines fed when it was taken
    size: int  # bytes of the text those lines take
    scan: LiveScan


@dataclass
class Doc:
    """One open log: its scan, fed with whole lines up to `fed_lines`."""

    uri: str
    name: str
    live: LiveScan
    text: LogText
    fed_lines: int = 0  # lines (each ending in a newline) fed to the scan
    fed_bytes: int = 0  # bytes of the text (UTF-8) those lines take
    rescans: int = 0  # times an edit among the scanned lines made the scan start again from a checkpoint
    rescanned_from: int | None = None  # the line the last of those started from (0: the top)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    job: set[str] = field(default_factory=set)  # the documents diagnosed together with this one

    def checkpoint(self) -> None:
        last = self.checkpoints[-1].size if self.checkpoints else 0
        if self.fed_bytes - last < CHECKPOINT_BYTES:
            return
        self.checkpoints.append(Checkpoint(self.fed_lines, self.fed_bytes, self.live.fork()))
        if len(self.checkpoints) > MAX_CHECKPOINTS:
            self.checkpoints = self.checkpoints[1::2]

    def rewind(self, offset: int, library: Library) -> None:
        """Scan again from the last checkpoint at or before a byte offset of the text (the top, if none)."""
        self.checkpoints = [c for c in self.checkpoints if c.size <= offset]
        if self.checkpoints:
            back = self.checkpoints[-1]
            self.live, self.fed_lines, self.fed_bytes = back.scan.fork(), back.lines, back.size
        else:
            self.live, self.fed_lines, self.fed_bytes = LiveScan(library, name=self.name), 0, 0
        self.rescans += 1
        self.rescanned_from = self.fed_lines


def doc_name(uri: str) -> str:
    """The file name a document's evidence shows (its path, so a rank in the name counts)."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


class TextProtocol(LanguageServerProtocol):
    """pygls's protocol, except that the text of an open document is kept by the server (a
    `LogText`), not by pygls's workspace: its document rebuilds a tuple of every line on each
    change and copies the whole text on each append (issue #23: memory grew with each block)."""

    @lsp_method(lsp.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: lsp.DidOpenTextDocumentParams) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: lsp.DidCloseTextDocumentParams) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


def line_range(line: int, start: int, end: int) -> lsp.Range:
    """A range on a 1-based log line."""
    return lsp.Range(start=lsp.Position(line=line - 1, character=start), end=lsp.Position(line=line - 1, character=end))
