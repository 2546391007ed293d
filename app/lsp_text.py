"""The text of a log open in `tracelore lsp`, kept so that appending to it costs what is appended.

pygls's own document rebuilds a tuple of all its lines on every change and copies its whole text
on every append: O(text) memory and time per appended block, and as much garbage. Here the text
is a list of chunks: an append at the end adds a chunk (no line of the text before it is read),
and only an edit above the end joins the chunks and lets pygls apply it, as it would have.
"""

from __future__ import annotations

from bisect import bisect_right

from lsprotocol import types as lsp
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

# An appended piece shorter than this joins the last chunk (a copy of at most this much), so a
# client that sends a line at a time does not leave one string object per line.
SMALL_CHUNK = 8 << 10


class LogText:
    """A document's text: chunks, where its last line ends, and how much of it was read."""

    def __init__(self, uri: str, text: str = "") -> None:
        self.uri = uri
        self.read = 0  # characters handed out by `since` (what a status shows, and a test counts)
        self._reset(text)

    def _reset(self, text: str) -> None:
        self._chunks: list[str] = []
        self._starts: list[int] = []  # the offset of each chunk in the text
        self._size = 0
        self._lines = 0  # lines ended by a line break, as str.splitlines (and pygls) count them
        self._tail = ""  # the text after the last of those: the line being written
        self.append(text)

    def __len__(self) -> int:
        return self._size

    def __str__(self) -> str:
        return "".join(self._chunks)

    def append(self, text: str) -> None:
        if not text:
            return
        if self._chunks and len(self._chunks[-1]) + len(text) <= SMALL_CHUNK:
            self._chunks[-1] += text
        else:
            self._starts.append(self._size)
            self._chunks.append(text)
        self._size += len(text)
        parts = (self._tail + text).splitlines(keepends=True)
        last = parts[-1]
        # A "\r" at the end may yet be followed by the "\n" that ends the same line.
        ended = last.splitlines()[0] != last and not last.endswith("\r")
        self._lines += len(parts) if ended else len(parts) - 1
        self._tail = "" if ended else last

    def since(self, offset: int) -> str:
        """The text from a character offset to the end."""
        if offset >= self._size:
            return ""
        i = bisect_right(self._starts, offset) - 1
        out = "".join([self._chunks[i][offset - self._starts[i] :], *self._chunks[i + 1 :]])
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
