"""Read a log as bounded chunks and normalised lines, whatever its size or encoding.

Two levels share one definition of a line:

* `iter_chunks` streams a source as blocks that end on a line break (or, for an
  absurdly long line, mid-line), with ANSI escapes removed; the matcher scans these.
* `read_lines` yields every line as a `Line` (decoded, capped, prefixes parsed);
  `make_line` does the same for one line the matcher picked out.

Line numbers count ``\\n`` (CRLF folds into it). A lone ``\\r`` splits a physical
line into frames (progress-bar redraws): frames keep their line's number.
"""

from __future__ import annotations

import io
import mmap
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, cast

from app.core.engine.prefixes import parse_prefixes
from app.core.engine.rewrap import rewrap, unmark, untag
from app.core.models import Line
from app.core.redaction.redactor import DEFAULT, Redactor

Source = str | Path | bytes | bytearray | memoryview | BinaryIO

BLOCK = 1 << 20  # bytes read at a time: 1 MiB scans as fast as 4 and keeps memory low
MAX_CARRY = 1 << 20  # a line longer than this is scanned in pieces
LINE_CAP = 8192  # characters of one line kept for display and per-line work

# CSI (colours, cursor moves) and OSC (titles, OSC-8 hyperlinks) sequences, and stray
# two-byte escapes. Bounded repeats keep it linear.
_ANSI = re.compile(
    rb"\x1b\[[0-9;:?<=>]{0,64}[ -/]{0,8}[@-~]"
    rb"|\x1b\][^\x07\x1b\n]{0,4096}(?:\x07|\x1b\\)"
    rb"|\x1b[@-Z\\-_]"
)
# A redraw of a progress bar: tqdm ("45%|", "it/s]"), Keras ("12/100 [==>").
_PROGRESS = re.compile(r"\d%\||\d+/\d+ \[|it/s\]|s/it\]")


@dataclass(frozen=True, slots=True)
class Chunk:
    """A block of the log: whole lines, except where a line is too long to hold."""

    data: bytes  # ANSI stripped; original \n and \r kept
    first_line: int  # physical line number of data[0]
    mid_frame: bool  # data[0] continues a frame cut for length (not a frame start)
    newlines: int  # count of \n in data
    file: str | None = None
    # Lines (0-based in data) that hold a message a console had hard-wrapped, rejoined
    # (app/core/engine/rewrap.py), and the width it was wrapped at.
    rejoined: tuple[int, ...] = ()
    wrap_width: int = 0
    # 0-based indexes of the lines a launcher's output tag had split mid-line, read without it.
    untagged: tuple[int, ...] = ()


def _open(source: bytes | bytearray | memoryview | BinaryIO) -> tuple[BinaryIO, bool]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(source)), True
    return source, False


def source_name(source: Source) -> str | None:
    """The file name to show for a source, if it has one."""
    if isinstance(source, (str, Path)):
        return str(source)
    name = getattr(source, "name", None)
    return name if isinstance(name, str) else None


def strip_ansi(data: bytes) -> bytes:
    """Remove terminal escape sequences."""
    return _ANSI.sub(b"", data) if b"\x1b" in data else data


IN_PLACE_MIN = 64 << 20  # files at least this large are scanned in place, never copied whole


@dataclass(frozen=True, slots=True)
class Block:
    """A chunk of a mapped file, not read yet: whoever scans it reads only what it needs.

    The engine scans the mapping itself and newlines are counted there, so most chunks
    of a large log are never copied; only a chunk with something to record is read
    into bytes (`read`). Line numbers are given in order by the caller.
    """

    mapped: mmap.mmap
    start: int
    end: int
    mid_frame: bool
    file: str | None

    def __len__(self) -> int:
        return self.end - self.start

    def view(self) -> memoryview | None:
        """The bytes in place, or None when escape sequences must be stripped (a copy)."""
        if self.mapped.find(b"\x1b", self.start, self.end) >= 0:
            return None
        return memoryview(self.mapped)[self.start : self.end]

    def read(self, first_line: int) -> Chunk:
        data = self.mapped[self.start : self.end]
        return Chunk(strip_ansi(data), first_line, self.mid_frame, data.count(b"\n"), self.file)

    def ends_line(self) -> bool:
        return self.mapped[self.end - 1] == 10

    def release(self) -> None:
        """Drop the pages read from this process (the page cache keeps them for everyone)."""
        start = self.start - self.start % mmap.PAGESIZE
        end = self.end - self.end % mmap.PAGESIZE
        if end > start:
            self.mapped.madvise(mmap.MADV_DONTNEED, start, end - start)


def count_newlines(view: memoryview) -> int:
    """Newlines in a buffer without copying it; the comparison runs without the GIL."""
    import numpy  # only large logs come here: a small one does not pay for the import

    return int(numpy.count_nonzero(numpy.frombuffer(view, dtype=numpy.uint8) == 10))


def iter_chunks(source: Source, *, block: int = BLOCK, file: str | None = None) -> Iterator[Chunk]:
    """Stream a source as chunks of whole lines; memory stays bounded by a few blocks.

    A regular file (a path, or a file object open on one) is mapped, not read: each
    chunk is then one copy out of the page cache, where reading costs three (the read,
    the join with the carried line, the cut), which made reading cost 0.8 s per GB.
    """
    return cast(Iterator[Chunk], _pieces(source, block, file, None))


def iter_blocks(
    source: Source, *, block: int = BLOCK, file: str | None = None, in_place_min: int = IN_PLACE_MIN
) -> Iterator[Chunk | Block]:
    """`iter_chunks`, except that a large regular file comes as `Block`s to scan in place, and a
    log of one chunk (a paste) is read as the program printed it (app/core/engine/rewrap.py)."""
    return _rejoined(_pieces(source, block, file, in_place_min))


def _rejoined(pieces: Iterator[Chunk | Block]) -> Iterator[Chunk | Block]:
    first = next(pieces, None)
    if first is None:
        return
    second = next(pieces, None)
    if second is None:
        if isinstance(first, Chunk) and not first.mid_frame:
            unmarked = unmark(first.data)
            if unmarked is not None:
                first = replace(first, data=unmarked)
            untagged = untag(first.data)
            if untagged is not None:
                first = replace(first, data=untagged.data, untagged=untagged.lines)
            wrapped = rewrap(first.data)
            if wrapped is not None:
                first = replace(first, data=wrapped.data, rejoined=wrapped.joined, wrap_width=wrapped.width)
        yield first
        return
    yield first
    yield second
    yield from pieces


def _pieces(source: Source, block: int, file: str | None, in_place_min: int | None) -> Iterator[Chunk | Block]:
    if isinstance(source, (str, Path)):
        with open(source, "rb") as opened:
            yield from _file_pieces(opened, block, file, in_place_min)
        return
    if isinstance(source, (io.BufferedReader, io.BufferedRandom, io.FileIO)):
        yield from _file_pieces(source, block, file, in_place_min)
        return
    stream, owned = _open(source)
    try:
        yield from _stream_chunks(stream, block, file)
    finally:
        if owned:
            stream.close()


def _file_pieces(stream: BinaryIO, block: int, file: str | None, in_place_min: int | None) -> Iterator[Chunk | Block]:
    """A file from its current position: mapped if it can be (in place if large enough), else read."""
    try:
        start = stream.tell()
        mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a pipe, a device or an empty file
        yield from _stream_chunks(stream, block, file)
        return
    if in_place_min is None or len(mapped) - start < in_place_min:
        with mapped:
            yield from _mapped_chunks(mapped, block, file, start)
    else:
        # Not closed here: blocks still being scanned hold views of it. It closes when the
        # last of them is dropped.
        mapped.madvise(mmap.MADV_SEQUENTIAL)
        for begin, end in _cuts(mapped, block, start):
            yield Block(mapped, begin, end, begin > start and mapped[begin - 1] not in (10, 13), file)
    stream.seek(0, io.SEEK_END)  # consumed, as reading it would have left it


def _cuts(mapped: mmap.mmap, block: int, pos: int) -> Iterator[tuple[int, int]]:
    """Where `_stream_chunks` would cut the same bytes into chunks."""
    size = len(mapped)
    while pos < size:
        limit = min(size, pos + block)
        end = mapped.rfind(b"\n", pos, limit) + 1
        while not end and limit < size and limit - pos <= MAX_CARRY:  # a long line: look further
            limit = min(size, limit + block)
            end = mapped.rfind(b"\n", pos, limit) + 1
        if limit == size and limit - pos <= MAX_CARRY + block:
            end = size  # the rest of the file: its last line goes with the lines before it, newline or not
        elif not end:  # a line longer than we hold: the end of the file is past the window
            end = pos + _cut(mapped[pos:limit])
        yield pos, end
        pos = end


def _cut(buf: bytes) -> int:
    """Where to cut one line longer than we hold: at a frame break if there is one."""
    end = buf.rfind(b"\r") + 1 or len(buf)
    # An escape sequence cut in two would survive stripping; keep it whole.
    esc = buf.rfind(b"\x1b", max(0, end - 64), end)
    return esc if esc > 0 else end


def _mapped_chunks(mapped: mmap.mmap, block: int, file: str | None, pos: int = 0) -> Iterator[Chunk]:
    """The chunks `_stream_chunks` would make of the same bytes, cut out of a mapping."""
    mapped.madvise(mmap.MADV_SEQUENTIAL)
    line, mid_frame = 1, False
    released = pos - pos % mmap.PAGESIZE
    for start, end in _cuts(mapped, block, pos):
        data = mapped[start:end]
        # Mapped pages count as ours until dropped: drop those read, so memory stays a few
        # chunks however large the file (the page cache keeps them for everyone).
        done = end - end % mmap.PAGESIZE
        if done > released:
            mapped.madvise(mmap.MADV_DONTNEED, released, done - released)
            released = done
        newlines = data.count(b"\n")
        yield Chunk(strip_ansi(data), line, mid_frame, newlines, file)
        line += newlines
        mid_frame = not data.endswith((b"\n", b"\r"))


def _stream_chunks(stream: BinaryIO, block: int, file: str | None) -> Iterator[Chunk]:
    line = 1
    carry = b""
    mid_frame = False
    raw = stream.read(block)
    while raw:
        # Read one ahead: at the end, a last line with no newline goes with the lines before it,
        # so a paste is one chunk (and read as printed, see _rejoined) whether or not it ends in one.
        ahead = stream.read(block)
        buf = carry + raw if carry else raw
        end = buf.rfind(b"\n") + 1 if ahead else len(buf)
        if end == 0 and len(buf) > MAX_CARRY:
            end = _cut(buf)
        raw = ahead
        if end == 0:
            carry = buf
            continue
        data, carry = buf[:end], buf[end:]
        newlines = data.count(b"\n")
        yield Chunk(strip_ansi(data), line, mid_frame, newlines, file)
        line += newlines
        mid_frame = not data.endswith((b"\n", b"\r"))


def decode(data: bytes, cap: int = LINE_CAP) -> tuple[str, int]:
    """Decode one line to text (invalid UTF-8 replaced, NUL removed), capped; return cut bytes."""
    cut = 0
    if len(data) > cap * 4:
        cut = len(data) - cap * 4
        data = data[: cap * 4]
    # NUL cannot be stored (PostgreSQL text); an ESC left over from a broken escape sequence
    # must not reach a terminal or a page.
    text = data.decode("utf-8", errors="replace").replace("\x00", "").replace("\x1b", "").rstrip("\r\n")
    if len(text) > cap:
        cut += len(text[cap:].encode("utf-8", errors="replace"))
        text = text[:cap]
    return text, cut


def make_line(data: bytes, no: int, *, file: str | None = None, redactor: Redactor = DEFAULT) -> Line:
    """Build a `Line` from the raw bytes of one frame: decoded, secrets redacted, prefixes parsed."""
    text, cut = decode(data)
    text = redactor.line(text).text
    prefix = parse_prefixes(text)
    return Line(
        no=no,
        text=text,
        file=file,
        rank=prefix.rank,
        host=prefix.host,
        time=prefix.time,
        content_start=prefix.end,
        cut=cut,
    )


def marked(line: Line, chunk: Chunk) -> Line:
    """`line` with what the paste reader did to it in `chunk` (a wrapped message rejoined, tags dropped)."""
    at = line.no - chunk.first_line
    if chunk.rejoined and at in chunk.rejoined:
        line = line.model_copy(update={"rewrapped": chunk.wrap_width})
    if chunk.untagged and at in chunk.untagged:
        line = line.model_copy(update={"untagged": True})
    return line


def _frames(physical: bytes) -> Iterable[bytes]:
    """The frames of one physical line worth keeping: progress redraws collapse to the last."""
    if b"\r" not in physical:
        yield physical
        return
    parts = [p for p in physical.split(b"\r") if p.strip()]
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if last or not _PROGRESS.search(part[:512].decode("utf-8", errors="replace")):
            yield part


def read_lines(source: Source, *, file: str | None = None, redactor: Redactor = DEFAULT) -> Iterator[Line]:
    """Yield every line of a log, numbered and normalised, in bounded memory."""
    name = file if file is not None else source_name(source)
    for chunk in iter_chunks(source, file=name):
        no = chunk.first_line
        pieces = chunk.data.split(b"\n")
        if chunk.data.endswith(b"\n"):
            pieces.pop()
        for i, physical in enumerate(pieces):
            if i == 0 and chunk.mid_frame:
                # The rest of a frame already capped in the previous chunk.
                physical = physical.partition(b"\r")[2]
            for frame in _frames(physical):
                if frame.strip():
                    yield make_line(frame, no, file=name, redactor=redactor)
            no += 1
