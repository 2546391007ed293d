"""The text of a log open in `tracelore lsp`, kept so that appending to it costs what is appended.

pygls's own document rebuilds a tuple of all its lines on every change and copies its whole text
on every append: O(text) memory and time per appended block, and as much garbage. Here the text
is a list of UTF-8 chunks, what the engine reads (and half the size of a `str` once a log holds
one character beyond Latin-1, as a progress bar or a replaced byte does): an append at the end
adds a chunk and reads no line before it; only an edit above the end joins the chunks and lets
pygls apply it, as it would have.
"""

from __future__ import annotations

from bisect import bisect_right

from lsprotocol import types as lsp
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

# Appended text collects in a growing buffer until it holds this much, then becomes a chunk:
# chunks this large are mapped by malloc one by one (app/heap.py holds its mmap threshold at
# 128 KiB), not carved from the heap between short-lived blocks, so they leave no holes there.
CHUNK = 256 << 10
# Editors may send lone surrogates (JSON escapes them); they are kept as they came.
ERRORS = "surrogatepass"


class LogText:
    """A document's text as UTF-8 chunks, where its last line ends, and how much of it was read."""

    def __init__(self, uri: str, text: str = "") -> None:
        self.uri = uri
        self.read = 0  # bytes handed out by `since` (what a status shows, and a test counts)
        self._reset(text)

    def _reset(self, text: str) -> None:
        self._chunks: list[bytes] = []
        self._starts: list[int] = []  # the offset of each chunk in the text, in bytes
        self._open = bytearray()  # the text after the chunks, still growing
        self._size = 0
        self._lines = 0  # lines ended by a line break, as str.splitlines (and pygls) count them
        self._tail = ""  # the text after the last of those: the line being written
        for start in range(0, len(text), CHUNK):
            self.append(text[start : start + CHUNK])

    def __len__(self) -> int:
        """The size in bytes (UTF-8)."""
        return self._size

    def __str__(self) -> str:
        return b"".join([*self._chunks, self._open]).decode("utf-8", ERRORS)

    def append(self, text: str) -> None:
        if not text:
            return
        data = text.encode("utf-8", ERRORS)
        self._open += data
        self._size += len(data)
        if len(self._open) >= CHUNK:
            self._starts.append(self._size - len(self._open))
            self._chunks.append(bytes(self._open))
            self._open = bytearray()
        parts = (self._tail + text).splitlines(keepends=True)
        last = parts[-1]
        # A "\r" at the end may yet be followed by the "\n" that ends the same line.
        ended = last.splitlines()[0] != last and not last.endswith("\r")
        self._lines += len(parts) if ended else len(parts) - 1
        self._tail = "" if ended else last

    def since(self, offset: int) -> bytes:
        """The text from a byte offset (one that starts a line) to the end."""
        if offset >= self._size:
            return b""
        opened = self._size - len(self._open)
        if offset >= opened:
            out = bytes(self._open[offset - opened :])
        else:
            i = bisect_right(self._starts, offset) - 1
            out = b"".join([self._chunks[i][offset - self._starts[i] :], *self._chunks[i + 1 :], self._open])
        self.read += len(out)
        return out

    def at_end(self, position: lsp.Position, codec: PositionCodec) -> bool:
        """Whether a position (in the client's units) is the end of the text."""
        if position.line == self._lines + (1 if self._tail else 0):  # below the last line: pygls appends
            return position.character == 0
        return (
            position.line == self._lines
            and not self._tail.endswith("\r")
            and position.character == codec.client_num_units(self._tail)
        )

    def apply(self, change: lsp.TextDocumentContentChangeEvent, codec: PositionCodec) -> None:
        """Apply an editor's change: an insertion at the end is appended; anything else is applied
        by pygls to the whole text."""
        if isinstance(change, lsp.TextDocumentContentChangePartial):
            start, end = change.range.start, change.range.end
            if start == end and self.at_end(start, codec):
                self.append(change.text)
                return
            document = TextDocument(self.uri, source=str(self), position_codec=codec)
            document.apply_change(change)
            text = document.source
        else:
            text = change.text
        self._reset(text)
