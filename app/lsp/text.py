"""The text of a log open in `tracelore lsp`, kept so that appending to it costs what is appended.

pygls's own document rebuilds a tuple of all its lines on every change and copies its whole text
on every append: O(text) memory and time per appended block, and as much garbage. Here the text
is a list of UTF-8 chunks, what the engine reads (and half the size of a `str` once a log holds
one character beyond Latin-1, as a progress bar or a replaced byte does): an append at the end
adds a chunk and reads no line before it. Chunks end at a line break, and each knows how many
lines it ends, so an edit above the end is applied (by pygls, as it would have) to the few chunks
its lines are in, not to the whole text: an edit in a 20 MB log decoded, split and re-encoded all
of it, some 0.3 s an edit (issue #38).
"""

from __future__ import annotations

from bisect import bisect_right

from lsprotocol import types as lsp
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

# Appended text collects in a growing buffer until it holds this much, then becomes a chunk:
# chunks this large are mapped by malloc one by one (app/cli/heap.py holds its mmap threshold at
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
        self._chunks: list[bytes] = []  # each ends with "\n" (so no "\r\n" and no character is cut)
        self._starts: list[int] = []  # the offset of each chunk in the text, in bytes
        self._ends: list[int] = []  # lines ended by each chunk, as str.splitlines (and pygls) count them
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
        if len(self._open) >= CHUNK and (cut := self._open.rfind(b"\n") + 1):
            self._add_chunk(bytes(self._open[:cut]))
            del self._open[:cut]
        parts = (self._tail + text).splitlines(keepends=True)
        last = parts[-1]
        # A "\r" at the end may yet be followed by the "\n" that ends the same line.
        ended = last.splitlines()[0] != last and not last.endswith("\r")
        self._lines += len(parts) if ended else len(parts) - 1
        self._tail = "" if ended else last

    def _add_chunk(self, data: bytes) -> None:
        self._starts.append(self._starts[-1] + len(self._chunks[-1]) if self._chunks else 0)
        self._chunks.append(data)
        self._ends.append(len(data.decode("utf-8", ERRORS).splitlines()))

    def since(self, offset: int, size: int | None = None) -> bytes:
        """The text from a byte offset (one that starts a line) to the end, or `size` bytes of it."""
        if offset >= self._size:
            return b""
        end = self._size if size is None else min(self._size, offset + size)
        opened = self._size - len(self._open)
        if offset >= opened:
            out = bytes(self._open[offset - opened : end - opened])
        else:
            i = bisect_right(self._starts, offset) - 1
            parts = [self._chunks[i][offset - self._starts[i] : end - self._starts[i]]]
            at = self._starts[i] + len(self._chunks[i])
            for chunk in self._chunks[i + 1 :]:
                if at >= end:
                    break
                parts.append(chunk[: end - at])
                at += len(chunk)
            if at < end:
                parts.append(bytes(self._open[: end - at]))
            out = b"".join(parts)
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

    def apply(self, change: lsp.TextDocumentContentChangeEvent, codec: PositionCodec) -> int:
        """Apply an editor's change; return the byte offset from which the text may differ.

        An insertion at the end is appended; any other change is applied by pygls to the chunks
        that hold the lines it touches (all of the text for a change of the whole document).
        """
        if not isinstance(change, lsp.TextDocumentContentChangePartial):
            self._reset(change.text)
            return 0
        start, end = change.range.start, change.range.end
        if start == end and self.at_end(start, codec):
            offset = self._size
            self.append(change.text)
            return offset
        first, base = self._chunk_of(min(start.line, end.line))
        last, _ = self._chunk_of(max(start.line, end.line))
        region = b"".join([*self._chunks[first:last], *([self._open] if last == len(self._chunks) else [])])
        if last < len(self._chunks):
            region += self._chunks[last]
        offset = self._starts[first] if first < len(self._chunks) else self._size - len(self._open)
        document = TextDocument(self.uri, source=region.decode("utf-8", ERRORS), position_codec=codec)
        shifted = lsp.Range(
            start=lsp.Position(line=start.line - base, character=start.character),
            end=lsp.Position(line=end.line - base, character=end.character),
        )
        document.apply_change(lsp.TextDocumentContentChangePartial(range=shifted, text=change.text))
        self._replace(first, last, document.source.encode("utf-8", ERRORS))
        return offset

    def _chunk_of(self, line: int) -> tuple[int, int]:
        """The chunk holding a 0-based line (len(chunks): the open text), and the first line of that chunk."""
        base = 0
        for i, ended in enumerate(self._ends):
            if line < base + ended:
                return i, base
            base += ended
        return len(self._chunks), base

    def _replace(self, first: int, last: int, data: bytes) -> None:
        """Put `data` in place of chunks first..last (through the open text when last is past the chunks)."""
        to_end = last >= len(self._chunks)
        chunks, ends = self._chunks[:first], self._ends[:first]
        later = [] if to_end else self._chunks[last + 1 :]
        opened = bytearray()
        pieces = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)] if data else []
        carry = b""
        for piece in pieces:  # cut again at line breaks, about CHUNK each
            piece = carry + piece
            cut = piece.rfind(b"\n") + 1
            carry = piece[cut:]
            if cut:
                chunks.append(piece[:cut])
                ends.append(len(piece[:cut].decode("utf-8", ERRORS).splitlines()))
        if to_end:
            opened = bytearray(carry)
        elif carry:  # cannot happen: the region ended at a chunk's line break, which the edit kept
            chunks.append(carry)
            ends.append(len(carry.decode("utf-8", ERRORS).splitlines()))
        for piece in later:
            chunks.append(piece)
        ends += [] if to_end else self._ends[last + 1 :]
        self._chunks, self._ends = chunks, ends
        self._starts = []
        at = 0
        for piece in self._chunks:
            self._starts.append(at)
            at += len(piece)
        if to_end:
            self._open = opened
        self._size = at + len(self._open)
        tail = self._open.decode("utf-8", ERRORS)
        parts = tail.splitlines(keepends=True)
        ended = bool(parts) and parts[-1].splitlines()[0] != parts[-1] and not parts[-1].endswith("\r")
        self._lines = sum(self._ends) + (len(parts) if ended else max(0, len(parts) - 1))
        self._tail = "" if ended or not parts else parts[-1]
