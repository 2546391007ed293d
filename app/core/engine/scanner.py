"""The per-chunk scan of one file: probe a chunk for where the patterns hit (in worker
threads), then record the hits in order, within the limits of what a file's scan keeps.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from app.core.engine.file_scan import FileScan, LineHit, PatternHits
from app.core.engine.locate import (
    WHOLE,
    PieceHits,
    last_hit_line,
    line_bounds,
    locate_hits,
    locate_some,
    matching_frame,
    piece_hits,
    piece_spans,
    progress_lines,
)
from app.core.engine.reader import Block, Chunk, count_newlines, make_line, marked
from app.core.knowledge.engines import SCAN, scan_pattern
from app.core.knowledge.loading import Library
from app.core.knowledge.screen import narrow
from app.core.models import Line
from app.core.patterns.re2calls import TextMatch, find, search_text
from app.core.redaction.redactor import DEFAULT, Redactor

KEEP_FIRST = 32  # hits per pattern and file kept with their text (evidence)
KEEP_LINES = 4096  # line numbers per pattern and file kept (windows, explained lines)
KEEP_ERRORS = 2000  # generic error lines kept per file (unexplained)
PROGRESS_TAIL = 64  # last progress lines kept per file (episode detection)
HEAD_TAIL_LINES = 20  # lines read at each end of a file for its time span
UNSETTLED_CHUNKS = 4  # chunks held at most for saturated patterns' last lines
PARSED_LINES = 1024  # distinct lines remembered parsed (at most PARSED_BYTES each)
PARSED_BYTES = 2048
NARROW_FROM = 8  # patterns to locate in a chunk from which the Set first narrows where each is


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
        extract=kinds["fingerprint"] | kinds["symptom"] | kinds["context"] | kinds["error"],
        progress=kinds["progress"],
        version=kinds["version"],
        error=kinds["error"],
    )


@dataclass(slots=True)
class Probe:
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


class FileScanner:
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

    def probe(self, item: Chunk | Block) -> Probe:
        """Find where patterns hit in a chunk. Runs in worker threads: it only reads shared state."""
        view = item.view() if isinstance(item, Block) else None
        data: bytes | memoryview
        if view is not None:  # scanned in place: no copy unless something needs locating
            probe, data = Probe(item, 0, None), view
        else:  # a chunk, or a block with escape sequences to strip
            chunk = item if isinstance(item, Chunk) else item.read(0)
            probe, data = Probe(item, chunk.newlines, chunk), chunk.data
        scan, plan, library = self.scan, self.plan, self.library
        pieces: list[PieceHits] | None = None
        if self.dense and probe.chunk is not None:
            # The chunk before needed narrowing: scan this one in pieces at once, not twice. The
            # pieces find what the whole chunk would, in the same order (first seen first).
            pieces = piece_hits(library.prefilter, probe.chunk.data)
            found: Iterable[int] = dict.fromkeys(idx for piece in pieces for idx in piece[2])
        else:
            found = self._found(data)
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
        # Only what it costs depends on this (read and written by both threads, unlocked). A
        # screened chunk is short: narrowing it would cost the Set it was screened to spare.
        self.dense = len(wanted) >= NARROW_FROM and library.patterns.built
        if wanted:
            if probe.chunk is None:
                assert isinstance(item, Block)
                probe.chunk = item.read(0)
            self._locate_wanted(probe, probe.chunk.data, wanted, pieces)
        probe.found.sort(key=lambda f: f[0])
        return probe

    def _found(self, data: bytes | memoryview) -> Iterable[int]:
        """The patterns that may hit in a chunk, as the Set says (RE2 releases the GIL while it
        scans). A short chunk before the Set is built is screened by the patterns' atoms, and
        each pattern left is searched alone: the same patterns, less the Set's superset."""
        library = self.library
        if isinstance(data, bytes) and library.patterns.screens(len(data)):
            compiled, regexes, screened = library.compiled, library.regexes, library.patterns.candidates(data)
            candidates = narrow(screened, data, compiled.ready, lambda i: scan_pattern(regexes[i], relax=True), SCAN)
            return [idx for idx in candidates if find(compiled[idx], data) >= 0]
        return library.prefilter.Match(data) or ()

    def _locate_wanted(self, probe: Probe, data: bytes, wanted: list[int], pieces: list[PieceHits] | None) -> None:
        """Locate the patterns a chunk needs, each up to what its file can still keep."""
        scan, library = self.scan, self.library
        # Many patterns to locate: the Set says in which pieces of the chunk each one is, so
        # each is searched there only, not over the whole chunk.
        spans: dict[int, list[tuple[int, int]]] = {}
        if len(wanted) >= NARROW_FROM and library.patterns.built:
            spans = piece_spans(pieces if pieces is not None else piece_hits(library.prefilter, data), wanted)
        for idx in wanted:
            hits = scan.hits.get(idx)
            # No more than the file can still keep, and one more to learn there are more.
            kept = len(hits.lines) if hits is not None else 0
            budget = KEEP_LINES + 1 - max(kept, self.located.get(idx, 0))
            located, resume = locate_some(
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

    def apply(self, probe: Probe) -> None:
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
            scan.edge_lines.extend(read_edge_lines(piece.read(), head=True, redactor=self.redactor))
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
        last = last_hit_line(self.library.compiled[idx], chunk)
        if last is not None:
            self.scan.hits[idx].last_line = last

    def _in_order(self, chunk: Chunk, probe: Probe) -> Iterable[tuple[int, int]]:
        """The probe's hits in offset order, then the hits its budgets left out, located as needed."""
        if not probe.partial:
            return probe.found
        more = [self._resume(chunk.data, idx, pos) for idx, pos in probe.partial.items()]
        return heapq.merge(probe.found, *more)

    def _resume(self, data: bytes, idx: int, pos: int) -> Iterator[tuple[int, int]]:
        for found in locate_hits(self.library.compiled[idx], data, idx, pos, loose=self._loose(idx)):
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
                frame = matching_frame(compiled[idx], data, *line_bounds(data, offset))
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
                frame = line_bounds(data, offset)  # only a line that is read needs its bounds
            assert frame is not None
            line = lines.get(frame[0])
            if line is None:
                line = lines[frame[0]] = marked(self._make_line(data[frame[0] : frame[1]], no), chunk)
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
            lines = progress_lines(compiled, chunk, start)
            if len(lines) >= PROGRESS_TAIL or start == 0:
                return lines
            window *= 8

    def finish(self) -> FileScan:
        scan = self.scan
        for idx in list(self.unsettled):
            self._settle(idx)
        if self.tail_chunk is not None:
            scan.edge_lines.extend(read_edge_lines(self.tail_chunk.read(), head=False, redactor=self.redactor))
        for piece in self.progress_chunks:
            scan.progress.extend(self._progress_tail(piece.read()))
        scan.progress = sorted(set(scan.progress))[-PROGRESS_TAIL:]
        return scan


def read_edge_lines(chunk: Chunk, *, head: bool, redactor: Redactor = DEFAULT) -> list[Line]:
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
        frame = piece.removesuffix(b"\r").rsplit(b"\r", 1)[-1]  # a CRLF line is one frame, not an empty one
        if frame.strip():
            out.append(marked(make_line(frame, first + i, file=chunk.file, redactor=redactor), chunk))
    return out
