"""Locating a pattern's hits in a chunk's bytes: the lines and frames they are on, the line
numbers of byte offsets, and the RE2 Set's narrowing of a chunk to the pieces where each
pattern occurs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Any

from app.core.engine.reader import Chunk
from app.core.patterns.re2calls import UNANCHORED, find, set_matcher, spans_of

NARROW_PIECE = 1024  # bytes the Set narrows to (whole lines): finer costs more Set calls than it saves searching
WHOLE: tuple[tuple[int, int | None], ...] = ((0, None),)  # a whole chunk, as spans


def line_bounds(data: bytes, offset: int) -> tuple[int, int]:
    """Start and end (before its newline) of the physical line holding an offset."""
    end = data.find(b"\n", offset)
    return data.rfind(b"\n", 0, offset) + 1, len(data) if end < 0 else end


def matching_frame(compiled: Any, data: bytes, start: int, end: int) -> tuple[int, int] | None:
    """The first frame of the line data[start:end] on which the pattern matches, if any.

    A line without a CR is one frame and the scan already matched it. Frames are
    searched as texts of their own, so `^`, `$` and `\\b` see a frame's own edges.
    """
    if data.find(b"\r", start, end) < 0:
        return start, end
    view = memoryview(data)
    pos = start
    while True:
        cr = data.find(b"\r", pos, end)
        stop = end if cr < 0 else cr
        if find(compiled, view[pos:stop]) >= 0:
            return pos, stop
        if cr < 0:
            return None
        pos = cr + 1


def hit_lines(compiled: Any, data: bytes, pos: int = 0) -> Iterator[int]:
    """Start offsets of the lines, from pos on, some frame of which the pattern matches."""
    for offset, _ in locate_hits(compiled, data, 0, pos):
        start, end = line_bounds(data, offset)
        if matching_frame(compiled, data, start, end) is not None:
            yield start


def line_numbers(data: bytes, first_line: int, starts: Iterable[int]) -> Iterator[int]:
    """Line numbers of sorted line-start offsets in a chunk."""
    no, counted = first_line, 0
    for offset in starts:
        no += data.count(b"\n", counted, offset)
        counted = offset
        yield no


def progress_lines(compiled: Iterable[Any], chunk: Chunk, start: int) -> list[int]:
    """Line numbers of progress lines in a chunk from a byte offset on."""
    starts = sorted({s for c in compiled for s in hit_lines(c, chunk.data, start)})
    return list(line_numbers(chunk.data, chunk.first_line, starts))


def last_hit_line(compiled: Any, chunk: Chunk) -> int | None:
    """The line of the last match of a pattern in a chunk, searched from the end."""
    data = chunk.data
    size, window = len(data), 4 << 10  # a frequent pattern's last hit is near the end: read little
    while True:
        start = max(0, size - window)
        if start:
            start = data.find(b"\n", start) + 1 or size
        starts = list(hit_lines(compiled, data, start))
        if starts or start == 0:
            break
        window *= 8
    if not starts:
        return None
    # Count back from the end: the match is near it, so this reads a little, not the chunk.
    return chunk.first_line + chunk.newlines - data.count(b"\n", starts[-1])


PieceHits = tuple[int, int, Sequence[int]]  # start, end, what the Set found there


def piece_hits(prefilter: Any, data: bytes) -> list[PieceHits]:
    """What the Set finds in each NARROW_PIECE bytes of whole lines of a chunk.

    A piece of whole lines is searched as the chunk would be (a line's neighbours are
    newlines or an end either way), and no pattern spans a newline, so a pattern matches
    nowhere outside the pieces it is found in.
    """
    pieces: list[PieceHits] = []
    view, size, start, match = memoryview(data), len(data), 0, set_matcher(prefilter)
    while start < size:
        end = data.find(b"\n", start + NARROW_PIECE - 1) + 1 or size
        pieces.append((start, end, match(view[start:end])))
        start = end
    return pieces


def piece_spans(pieces: Iterable[PieceHits], wanted: Iterable[int]) -> dict[int, list[tuple[int, int]]]:
    """Per pattern, the runs of pieces it is found in."""
    spans: dict[int, list[tuple[int, int]]] = {idx: [] for idx in wanted}
    for start, end, found in pieces:
        for idx in found:
            runs = spans.get(idx)
            if runs is None:
                continue
            if runs and runs[-1][1] == start:
                runs[-1] = (runs[-1][0], end)
            else:
                runs.append((start, end))
    return spans


def locate_some(
    compiled: Any,
    data: bytes,
    idx: int,
    limit: int,
    spans: Iterable[tuple[int, int | None]] = WHOLE,
    loose: tuple[Any, Any] | None = None,
) -> tuple[list[tuple[int, int]], int | None]:
    """The first `limit` hits of a pattern in a chunk (within `spans`), and where to resume if it may hit again."""
    hits = chain.from_iterable(locate_hits(compiled, data, idx, start, stop, loose) for start, stop in spans)
    found = list(islice(hits, limit))
    if len(found) < limit:
        return found, None
    if not found:
        return found, 0
    end = data.find(b"\n", found[-1][0])
    return found, None if end < 0 else end + 1


def locate_hits(
    compiled: Any,
    data: bytes,
    idx: int,
    pos: int = 0,
    stop: int | None = None,
    loose: tuple[Any, Any] | None = None,
) -> Iterator[tuple[int, int]]:
    """A match of a pattern on each line of data[pos:stop] (whole lines) that holds one.

    Without `loose`, the start of the first match on the line. With it (`compile_loose`:
    the opened pattern and a Set of the exact one), an offset in the line: where the
    opened pattern's match starts, on a line the exact one matches.
    """
    # On a memoryview: the wrapper's search() copies the whole chunk on every call,
    # which made frequent patterns cost O(hits x chunk).
    view, size = memoryview(data), len(data) if stop is None else stop
    # Bound once: per hit, the calls themselves are most of the cost.
    search = spans_of(compiled if loose is None else loose[0])
    exact = None if loose is None else set_matcher(loose[1])
    while pos < size:
        start = search(UNANCHORED, view, pos, size)[0][0]
        if start < 0:
            return
        begin, end = data.rfind(b"\n", 0, start) + 1, data.find(b"\n", start)
        # A line of whole lines is matched as in the chunk: newlines or the ends around it.
        matched = exact is None or bool(exact(view[begin : len(data) if end < 0 else end]))
        if matched:
            yield start, idx
        if end < 0:
            return
        # The same line again, between the same newlines, matches at the same place: a
        # repeated line costs a comparison, not a search.
        width, offset = end - begin, start - begin
        line = None
        while end + 1 + width < size and data[end + 1 + width] == 10:
            line = data[begin:end] if line is None else line
            if not data.startswith(line, end + 1):
                break
            begin, end = end + 1, end + 1 + width
            if matched:  # else its copies do not either: skipped all the same
                yield begin + offset, idx
        pos = end + 1
