"""One pass of every pattern over a log's chunks.

Per chunk, the library's RE2 Set says which patterns occur at all (one scan,
whatever the number of patterns); only those are then located, one hit per line,
and only the lines they hit are decoded and parsed. The cost per byte stays
nearly flat as the library grows, and per-line Python work is proportional to
the hits, not to the log.

The hits are bounded too: a pattern is located in a chunk only as far as its file
still needs (the first KEEP_LINES lines, one more to learn that there are more),
so a log made of matching lines costs about what a quiet one does. Past that the
pattern is saturated: its count becomes a lower bound and its last line is looked
up once, from the end of the last chunk that holds it.

Chunks are scanned as read, with no copy: a lone CR (a progress-bar redraw) splits
a line into frames, so patterns are compiled with `^`/`$` also matching at a CR
(`rewrites.frame_anchors`) and a line that holds a CR is confirmed frame by frame.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from app.core.engine.re2calls import TextMatch, find, search_text
from app.core.engine.reader import Block, Chunk, count_newlines, make_line
from app.core.knowledge.loading import Library
from app.core.models import Line
from app.core.redaction.redactor import DEFAULT, Redactor

if TYPE_CHECKING:
    from concurrent.futures import Future

KEEP_FIRST = 32  # hits per pattern and file kept with their text (evidence)
KEEP_LINES = 4096  # line numbers per pattern and file kept (windows, explained lines)
KEEP_ERRORS = 2000  # generic error lines kept per file (unexplained)
PROGRESS_TAIL = 64  # last progress lines kept per file (episode detection)
HEAD_TAIL_LINES = 20  # lines read at each end of a file for its time span
UNSETTLED_CHUNKS = 4  # chunks held at most for saturated patterns' last lines
PARSED_LINES = 1024  # distinct lines remembered parsed (at most PARSED_BYTES each)
PARSED_BYTES = 2048
NARROW_FROM = 8  # patterns to locate in a chunk from which the Set first narrows where each is
NARROW_PIECE = 4096  # bytes the Set narrows to (whole lines)
WHOLE: tuple[tuple[int, int | None], ...] = ((0, None),)  # a whole chunk, as spans


@dataclass(slots=True)
class LineHit:
    """One line on which a pattern matched."""

    line: Line
    span: tuple[int, int]
    groups: dict[str, str]


@dataclass(slots=True)
class PatternHits:
    """Where one pattern matched in one file."""

    count: int = 0  # matching lines; a lower bound once saturated
    first: list[LineHit] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    last_line: int = 0
    saturated: bool = False  # so frequent that only its last line per chunk is tracked
    located: int = 0  # lines read to record it: the work it cost, bounded once saturated


@dataclass(slots=True)
class FileScan:
    """What the pass found in one file."""

    name: str | None
    index: int
    bytes: int = 0
    lines: int = 0
    hits: dict[int, PatternHits] = field(default_factory=dict)
    progress: list[int] = field(default_factory=list)  # last progress line numbers
    edge_lines: list[Line] = field(default_factory=list)  # head and tail, for the time span
    blank: bool = True  # nothing but white space so far


@dataclass(frozen=True, slots=True)
class _Plan:
    """What to do with each engine pattern when it hits."""

    extract: frozenset[int]  # patterns whose lines are decoded (evidence, errors)
    progress: frozenset[int]
    version: frozenset[int]
    error: frozenset[int]


def _plan(library: Library) -> _Plan:
    kinds = library.kinds
    return _Plan(
        extract=kinds["fingerprint"] | kinds["symptom"] | kinds["error"],
        progress=kinds["progress"],
        version=kinds["version"],
        error=kinds["error"],
    )


@dataclass(slots=True)
class _Probe:
    """Where the patterns hit in one chunk, before anything is recorded."""

    item: Chunk | Block
    newlines: int
    chunk: Chunk | None  # the chunk read into bytes, if it was (a Block's line numbers are not set yet)
    found: list[tuple[int, int]] = field(default_factory=list)  # (offset, engine index)
    # Patterns located only up to their budget: engine index -> where the search stopped.
    partial: dict[int, int] = field(default_factory=dict)
    progress: bool = False
    saturated: list[int] = field(default_factory=list)  # saturated patterns the chunk holds


@dataclass(frozen=True, slots=True)
class _Piece:
    """A recorded chunk as the scanner keeps it: numbered, read again only if needed."""

    item: Chunk | Block
    first_line: int
    chunk: Chunk | None

    def read(self) -> Chunk:
        if self.chunk is not None:
            return self.chunk
        assert isinstance(self.item, Block)
        return self.item.read(self.first_line)


class _FileScanner:
    """Feeds the chunks of one file through the engine."""

    def __init__(self, library: Library, scan: FileScan, redactor: Redactor = DEFAULT) -> None:
        self.library = library
        self.redactor = redactor  # lines are redacted as they are picked out, before confirming
        self.plan = _plan(library)
        self.scan = scan
        self.errors_kept = 0
        self.progress_chunks: list[_Piece] = []  # the last chunks holding progress lines
        self.tail_chunk: _Piece | None = None
        self.next_line = 1  # of the next Block (a Chunk knows its own)
        # Hits located so far per pattern, probes in flight included. Read and written by
        # probe threads without a lock: it only sizes the next probe's budget, and apply()
        # locates whatever a too small budget left out.
        self.located: dict[int, int] = {}
        self.done: set[int] = set()  # patterns that saturated in the chunk being recorded
        # Saturated pattern -> the last chunk holding it: its last line is looked up only
        # when that chunk is the pattern's last or too many chunks are held.
        self.unsettled: dict[int, _Piece] = {}
        self.dense = False  # the last chunk probed had many patterns to locate
        self.parsed: dict[bytes, Line] = {}  # recent short lines, by their bytes, as make_line gave them
        self.confirmed: dict[tuple[int, str], TextMatch | None] = {}  # recent confirmations, by pattern and text

    def probe(self, item: Chunk | Block) -> _Probe:
        """Find where patterns hit in a chunk. Runs in worker threads: it only reads shared state."""
        view = item.view() if isinstance(item, Block) else None
        data: bytes | memoryview
        if view is not None:  # scanned in place: no copy unless something needs locating
            probe, data = _Probe(item, 0, None), view
        else:  # a chunk, or a block with escape sequences to strip
            chunk = item if isinstance(item, Chunk) else item.read(0)
            probe, data = _Probe(item, chunk.newlines, chunk), chunk.data
        scan, plan, library = self.scan, self.plan, self.library
        pieces: list[_PieceHits] | None = None
        if self.dense and probe.chunk is not None:
            # The chunk before needed narrowing: scan this one in pieces at once, not twice. The
            # pieces find what the whole chunk would, in the same order (first seen first).
            pieces = _piece_hits(library.prefilter, probe.chunk.data)
            found: Iterable[int] = dict.fromkeys(idx for piece in pieces for idx in piece[2])
        else:
            found = library.prefilter.Match(data) or ()  # RE2 releases the GIL while it scans
        if view is not None:  # after the scan: numpy's first import overlaps the other thread's scan
            probe.newlines = count_newlines(view)
        wanted = []
        for idx in found:
            if idx in plan.progress:
                probe.progress = True
                continue
            if self._ignored(idx):
                continue
            hits = scan.hits.get(idx)
            if hits is not None and hits.saturated:
                # Noise-frequent pattern: locating every hit would cost a pass per pattern.
                probe.saturated.append(idx)
                continue
            wanted.append(idx)
        # Only what it costs depends on this (read and written by both threads, unlocked).
        self.dense = len(wanted) >= NARROW_FROM
        if wanted:
            if probe.chunk is None:
                assert isinstance(item, Block)
                probe.chunk = item.read(0)
            self._locate_wanted(probe, probe.chunk.data, wanted, pieces)
        probe.found.sort(key=lambda f: f[0])
        return probe

    def _locate_wanted(self, probe: _Probe, data: bytes, wanted: list[int], pieces: list[_PieceHits] | None) -> None:
        """Locate the patterns a chunk needs, each up to what its file can still keep."""
        scan, library = self.scan, self.library
        # Many patterns to locate: the Set says in which pieces of the chunk each one is, so
        # each is searched there only, not over the whole chunk.
        spans: dict[int, list[tuple[int, int]]] = {}
        if len(wanted) >= NARROW_FROM:
            spans = _spans(pieces if pieces is not None else _piece_hits(library.prefilter, data), wanted)
        for idx in wanted:
            hits = scan.hits.get(idx)
            # No more than the file can still keep, and one more to learn there are more.
            kept = len(hits.lines) if hits is not None else 0
            budget = KEEP_LINES + 1 - max(kept, self.located.get(idx, 0))
            located, resume = _locate_some(
                library.compiled[idx], data, idx, max(budget, 0), spans.get(idx, WHOLE), self._loose(idx)
            )
            self.located[idx] = self.located.get(idx, 0) + len(located)
            probe.found.extend(located)
            if resume is not None:
                probe.partial[idx] = resume

    def _loose(self, idx: int) -> tuple[Any, Any] | None:
        """The faster engines for a pattern's lines, if it has them. Not for generic error lines:
        when several sit on one line, which is recorded first must not depend on the engine,
        so they are located by where their matches start."""
        return None if idx in self.plan.error else self.library.loose[idx]

    def _saturated(self, idx: int) -> bool:
        hits = self.scan.hits.get(idx)
        return hits is not None and hits.saturated

    def _ignored(self, idx: int) -> bool:
        """Whether a pattern's hits are no longer wanted: enough environment lines of it are kept
        in this file, or errors are kept in full."""
        plan = self.plan
        if idx in plan.version:
            hits = self.scan.hits.get(idx)
            if hits is not None and len(hits.first) >= KEEP_FIRST:
                return True
        return idx in plan.error and self.errors_kept >= KEEP_ERRORS

    def apply(self, probe: _Probe) -> None:
        """Record a probed chunk's hits. Runs in the calling thread, in chunk order."""
        scan, item = self.scan, probe.item
        if isinstance(item, Block):
            first_line, chunk = self.next_line, probe.chunk
            if chunk is not None:
                chunk = replace(chunk, first_line=first_line)
            size, ends_line = len(probe.chunk.data) if probe.chunk is not None else len(item), item.ends_line()
        else:
            first_line, chunk = item.first_line, item
            size, ends_line = len(item.data), item.data.endswith(b"\n")
        self.next_line = first_line + probe.newlines
        piece = _Piece(item, first_line, chunk)
        if not scan.edge_lines:
            scan.edge_lines.extend(_edge_lines(piece.read(), head=True, redactor=self.redactor))
        self.tail_chunk = piece
        if scan.blank and not piece.read().data.isspace():
            scan.blank = False
        scan.bytes += size
        # A last line without a final newline still counts.
        scan.lines = first_line - 1 + probe.newlines + (not ends_line)
        if probe.progress:
            self.progress_chunks = [*self.progress_chunks[-1:], piece]
        # The probe ran ahead of the chunks before it: what they recorded since decides,
        # so that the result never depends on how the threads were timed.
        touched = {i for _, i in probe.found} | probe.partial.keys()
        late = {i for i in touched if self._ignored(i) or self._saturated(i)}
        if late:
            probe.found = [f for f in probe.found if f[1] not in late]
            probe.partial = {i: pos for i, pos in probe.partial.items() if i not in late}
            probe.saturated += sorted(i for i in late if not self._ignored(i))
        for idx in probe.saturated:
            scan.hits[idx].count += 1
            self.unsettled[idx] = piece
        if len(set(map(id, self.unsettled.values()))) > UNSETTLED_CHUNKS:
            oldest = next(iter(self.unsettled.values()))  # dicts keep insertion order
            for idx in [i for i, c in self.unsettled.items() if c is oldest]:
                self._settle(idx)
        if probe.found or probe.partial:
            assert chunk is not None
            self._record(piece, chunk, self._in_order(chunk, probe))
        if isinstance(item, Block):
            item.release()

    def _settle(self, idx: int) -> None:
        """Look up a saturated pattern's last line in the last chunk that holds it."""
        chunk = self.unsettled.pop(idx).read()
        last = _last_line(self.library.compiled[idx], chunk)
        if last is not None:
            self.scan.hits[idx].last_line = last

    def _in_order(self, chunk: Chunk, probe: _Probe) -> Iterable[tuple[int, int]]:
        """The probe's hits in offset order, then the hits its budgets left out, located as needed."""
        if not probe.partial:
            return probe.found
        more = [self._resume(chunk.data, idx, pos) for idx, pos in probe.partial.items()]
        return heapq.merge(probe.found, *more)

    def _resume(self, data: bytes, idx: int, pos: int) -> Iterator[tuple[int, int]]:
        for found in _locate(self.library.compiled[idx], data, idx, pos, loose=self._loose(idx)):
            if idx in self.done:
                return
            yield found

    def _record(self, piece: _Piece, chunk: Chunk, found: Iterable[tuple[int, int]]) -> None:
        scan, plan, compiled = self.scan, self.plan, self.library.compiled
        data = chunk.data
        no, counted = chunk.first_line, 0
        lines: dict[int, Line] = {}  # frame start -> parsed line, shared by patterns
        done = self.done = set()  # the rest of these patterns' hits in the chunk is not read
        redrawn = b"\r" in data  # without a CR each line is one frame, the one the scan matched
        frame: tuple[int, int] | None = None
        for offset, idx in found:
            if idx in done:
                continue
            if redrawn:
                frame = _frame(compiled[idx], data, *_line_bounds(data, offset))
                if frame is None:
                    continue  # the match ran across frames of a redrawn line: no frame holds it
            no += data.count(b"\n", counted, offset)
            counted = offset
            hits = scan.hits.get(idx)
            if hits is None:
                hits = scan.hits[idx] = PatternHits()
            hits.count += 1
            hits.located += 1
            hits.last_line = no
            if len(hits.lines) < KEEP_LINES:
                hits.lines.append(no)
            elif idx not in plan.extract or len(hits.first) >= KEEP_FIRST:
                hits.saturated = True
                done.add(idx)
                self.unsettled[idx] = piece  # its last line in this chunk is looked up from the end
            if idx not in plan.extract and idx not in plan.version:
                continue
            if idx in plan.version and idx not in plan.extract and self._ignored(idx):
                done.add(idx)  # enough of its environment lines are kept: nothing more to read, as in later chunks
                continue
            if idx in plan.extract and len(hits.first) >= KEEP_FIRST and idx not in plan.error:
                continue
            if idx in plan.error:
                if self.errors_kept >= KEEP_ERRORS:
                    continue
                self.errors_kept += 1
            if not redrawn:
                frame = _line_bounds(data, offset)  # only a line that is read needs its bounds
            assert frame is not None
            line = lines.get(frame[0])
            if line is None:
                line = lines[frame[0]] = self._make_line(data[frame[0] : frame[1]], no)
            confirmed = self._confirm(idx, line.text)
            groups = dict(confirmed.groups) if confirmed is not None else {}  # its own: the match may be shared
            if idx in plan.version:
                if confirmed is not None and len(hits.first) < KEEP_FIRST:
                    hits.first.append(LineHit(line, confirmed.span, groups))  # an environment fact, with its line
                continue
            # A line cut by the cap or changed by decoding may not confirm: keep it, no span.
            hit = LineHit(line, confirmed.span if confirmed is not None else (0, 0), groups)
            if idx in plan.error or len(hits.first) < KEEP_FIRST:
                hits.first.append(hit)

    def _make_line(self, raw: bytes, no: int) -> Line:
        """`make_line`, once per distinct short line: a line printed over and over (every
        rank's OOM, a crash loop) is decoded, redacted and parsed once, then renumbered."""
        if len(raw) > PARSED_BYTES:
            return make_line(raw, no, file=self.scan.name, redactor=self.redactor)
        parsed = self.parsed.get(raw)
        if parsed is None or parsed.file != self.scan.name:  # a live file renamed when rotated
            if len(self.parsed) >= PARSED_LINES:
                self.parsed.clear()
            parsed = self.parsed[raw] = make_line(raw, no, file=self.scan.name, redactor=self.redactor)
        return parsed if parsed.no == no else parsed.model_copy(update={"no": no})

    def _confirm(self, idx: int, text: str) -> TextMatch | None:
        """Where a pattern matches a decoded line, once per pattern and distinct short line."""
        if len(text) > PARSED_BYTES:
            return search_text(self.library.confirm[idx], text)
        key = (idx, text)
        if key not in self.confirmed:
            if len(self.confirmed) >= PARSED_LINES:
                self.confirmed.clear()
            self.confirmed[key] = search_text(self.library.confirm[idx], text)
        return self.confirmed[key]

    def _progress_tail(self, chunk: Chunk) -> list[int]:
        """The last progress lines of a chunk, read from its end: cheap however many there are."""
        compiled = [self.library.compiled[i] for i in self.plan.progress]
        size = len(chunk.data)
        window = 64 << 10
        while True:
            start = max(0, size - window)
            if start:
                start = chunk.data.find(b"\n", start) + 1 or size
            lines = _progress_lines(compiled, chunk, start)
            if len(lines) >= PROGRESS_TAIL or start == 0:
                return lines
            window *= 8

    def finish(self) -> FileScan:
        scan = self.scan
        for idx in list(self.unsettled):
            self._settle(idx)
        if self.tail_chunk is not None:
            scan.edge_lines.extend(_edge_lines(self.tail_chunk.read(), head=False, redactor=self.redactor))
        for piece in self.progress_chunks:
            scan.progress.extend(self._progress_tail(piece.read()))
        scan.progress = sorted(set(scan.progress))[-PROGRESS_TAIL:]
        return scan


def _line_bounds(data: bytes, offset: int) -> tuple[int, int]:
    """Start and end (before its newline) of the physical line holding an offset."""
    end = data.find(b"\n", offset)
    return data.rfind(b"\n", 0, offset) + 1, len(data) if end < 0 else end


def _frame(compiled: Any, data: bytes, start: int, end: int) -> tuple[int, int] | None:
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


def _hit_lines(compiled: Any, data: bytes, pos: int = 0) -> Iterator[int]:
    """Start offsets of the lines, from pos on, some frame of which the pattern matches."""
    for offset, _ in _locate(compiled, data, 0, pos):
        start, end = _line_bounds(data, offset)
        if _frame(compiled, data, start, end) is not None:
            yield start


def _line_numbers(data: bytes, first_line: int, starts: Iterable[int]) -> Iterator[int]:
    """Line numbers of sorted line-start offsets in a chunk."""
    no, counted = first_line, 0
    for offset in starts:
        no += data.count(b"\n", counted, offset)
        counted = offset
        yield no


def _progress_lines(compiled: Iterable[Any], chunk: Chunk, start: int) -> list[int]:
    """Line numbers of progress lines in a chunk from a byte offset on."""
    starts = sorted({s for c in compiled for s in _hit_lines(c, chunk.data, start)})
    return list(_line_numbers(chunk.data, chunk.first_line, starts))


def _last_line(compiled: Any, chunk: Chunk) -> int | None:
    """The line of the last match of a pattern in a chunk, searched from the end."""
    data = chunk.data
    size, window = len(data), 4 << 10  # a frequent pattern's last hit is near the end: read little
    while True:
        start = max(0, size - window)
        if start:
            start = data.find(b"\n", start) + 1 or size
        starts = list(_hit_lines(compiled, data, start))
        if starts or start == 0:
            break
        window *= 8
    if not starts:
        return None
    # Count back from the end: the match is near it, so this reads a little, not the chunk.
    return chunk.first_line + chunk.newlines - data.count(b"\n", starts[-1])


_PieceHits = tuple[int, int, Sequence[int]]  # start, end, what the Set found there


def _piece_hits(prefilter: Any, data: bytes) -> list[_PieceHits]:
    """What the Set finds in each NARROW_PIECE bytes of whole lines of a chunk.

    A piece of whole lines is searched as the chunk would be (a line's neighbours are
    newlines or an end either way), and no pattern spans a newline, so a pattern matches
    nowhere outside the pieces it is found in.
    """
    pieces: list[_PieceHits] = []
    view, size, start = memoryview(data), len(data), 0
    while start < size:
        end = data.find(b"\n", start + NARROW_PIECE - 1) + 1 or size
        pieces.append((start, end, prefilter.Match(view[start:end]) or ()))
        start = end
    return pieces


def _spans(pieces: Iterable[_PieceHits], wanted: Iterable[int]) -> dict[int, list[tuple[int, int]]]:
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


def _locate_some(
    compiled: Any,
    data: bytes,
    idx: int,
    limit: int,
    spans: Iterable[tuple[int, int | None]] = WHOLE,
    loose: tuple[Any, Any] | None = None,
) -> tuple[list[tuple[int, int]], int | None]:
    """The first `limit` hits of a pattern in a chunk (within `spans`), and where to resume if it may hit again."""
    hits = chain.from_iterable(_locate(compiled, data, idx, start, stop, loose) for start, stop in spans)
    found = list(islice(hits, limit))
    if len(found) < limit:
        return found, None
    if not found:
        return found, 0
    end = data.find(b"\n", found[-1][0])
    return found, None if end < 0 else end + 1


def _locate(
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
    search, exact = (compiled, None) if loose is None else loose
    while pos < size:
        start = find(search, view, pos, size)
        if start < 0:
            return
        begin, end = data.rfind(b"\n", 0, start) + 1, data.find(b"\n", start)
        # A line of whole lines is matched as in the chunk: newlines or the ends around it.
        matched = exact is None or bool(exact.Match(view[begin : len(data) if end < 0 else end]))
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


def _edge_lines(chunk: Chunk, *, head: bool, redactor: Redactor = DEFAULT) -> list[Line]:
    """A few parsed lines at the start or the end of a chunk."""
    data = chunk.data
    if head:
        raw = data[: 64 << 10].split(b"\n")[:HEAD_TAIL_LINES]
        first = chunk.first_line
    else:
        tail = data[-(64 << 10) :]
        raw = tail.split(b"\n")[-HEAD_TAIL_LINES - 1 :]
        first = chunk.first_line + chunk.newlines - len(raw) + 1
    out = []
    for i, piece in enumerate(raw):
        frame = piece.rsplit(b"\r", 1)[-1]
        if frame.strip():
            out.append(make_line(frame, first + i, file=chunk.file, redactor=redactor))
    return out


def scan_file(
    library: Library,
    chunks: Iterable[Chunk | Block],
    *,
    name: str | None,
    index: int,
    threads: int = 2,
    redactor: Redactor = DEFAULT,
) -> FileScan:
    """Run every pattern of the library over one file's chunks in one pass.

    With threads > 1, chunks are probed in parallel (RE2 scans without the GIL) and
    recorded in order, a bounded number in flight: memory stays a few chunks.
    """
    scanner = _FileScanner(library, FileScan(name=name, index=index), redactor)
    chunks = iter(chunks)
    first = list(islice(chunks, 2))
    if threads <= 1 or len(first) < 2:  # a log of one chunk (most requests): no pool to start
        for chunk in chain(first, chunks):
            scanner.apply(scanner.probe(chunk))
        return scanner.finish()
    from concurrent.futures import ThreadPoolExecutor  # here: it brings `logging`, which a small log never needs

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tracelore-scan") as pool:
        pending: deque[Future[_Probe]] = deque()
        for chunk in chain(first, chunks):
            pending.append(pool.submit(scanner.probe, chunk))
            if len(pending) > 2 * threads:
                scanner.apply(pending.popleft().result())
        while pending:
            scanner.apply(pending.popleft().result())
    return scanner.finish()


def matching_lines(library: Library, chunks: Iterable[Chunk]) -> Iterator[int]:
    """Every line number on which any pattern of the library matches (the raw fast pass)."""
    for chunk in chunks:
        data = chunk.data
        hit = library.prefilter.Match(data) or ()
        yield from _line_numbers(
            data, chunk.first_line, sorted({s for idx in hit for s in _hit_lines(library.compiled[idx], data)})
        )
