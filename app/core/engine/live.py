"""A log that grows: its scan extended with each appended block, never rescanned.

`LiveScan` keeps the matcher's per-file state (`FileScan` and the scanner's own) and feeds
appended bytes through the same one-pass engine as `scan_file`; `snapshot()` is what
`scan_file` would have returned for the bytes fed so far, taken without disturbing the
running scan, so `assemble()` can rank it as often as the log grows. A `LiveJob` is the
files of one job. Memory stays bounded: the scan keeps what `scan_file` keeps (capped
hits, a few tail lines), plus the last partial line and the last block's tail.

Pure: the caller reads the files (watch, the language server) and hands bytes in.
"""

from __future__ import annotations

import copy
from collections import deque
from datetime import datetime

from app.core.engine.file_scan import FileScan, LineHit, PatternHits
from app.core.engine.locate import last_hit_line, progress_lines
from app.core.engine.reader import MAX_CARRY, Chunk, _cut, strip_ansi
from app.core.engine.scanner import HEAD_TAIL_LINES, PROGRESS_TAIL, FileScanner, read_edge_lines
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis
from app.core.redaction.redactor import DEFAULT, Redactor
from app.errors import EmptyLog

TAIL_KEEP = 64 << 10  # bytes of the latest whole lines kept for the file's tail lines
HEAD_KEEP = 64 << 10  # as much of the first lines as the head lines are read from


class LiveScan:
    """One growing file: `feed` appended bytes, `snapshot` the scan so far."""

    def __init__(self, library: Library, *, name: str | None, index: int = 0, redactor: Redactor = DEFAULT) -> None:
        self.name = name
        self._library = library
        self._redactor = redactor
        self._scanner = FileScanner(library, FileScan(name=name, index=index), redactor)
        self._progress_patterns = [library.compiled[i] for i in self._scanner.plan.progress]
        self._carry = b""  # an unfinished last line, held until its newline arrives
        self._line = 1  # number of the next chunk's first line
        self._mid_frame = False
        self._head = b""  # the first lines, until there are as many as a whole file's first chunk gives
        self._tail = b""  # the last whole lines (at most TAIL_KEEP bytes)
        self._tail_first = 1  # line number of _tail's first line
        self._progress: deque[int] = deque(maxlen=PROGRESS_TAIL)
        self.fed = 0  # bytes handed in

    def feed(self, data: bytes) -> None:
        """Scan appended bytes. Only whole lines are scanned; a partial last line waits for its end."""
        if not data:
            return
        self.fed += len(data)
        buf = self._carry + data if self._carry else data
        end = buf.rfind(b"\n") + 1
        if end == 0 and len(buf) > MAX_CARRY:  # one absurdly long line: scanned in pieces, as the reader does
            end = _cut(buf)
        if end == 0:
            self._carry = buf
            return
        self._carry = buf[end:]
        self._scan(buf[:end])

    def flush(self) -> None:
        """Scan a partial last line too: the file has ended (or stopped growing for good)."""
        if self._carry:
            data, self._carry = self._carry, b""
            self._scan(data)

    def _scan(self, raw: bytes) -> None:
        data = strip_ansi(raw)
        newlines = data.count(b"\n")
        chunk = Chunk(data, self._line, self._mid_frame, newlines, self.name)
        scanner = self._scanner
        probe = scanner.probe(chunk)
        scanner.apply(probe)
        if probe.progress:
            self._progress.extend(progress_lines(self._progress_patterns, chunk, 0))
        if len(self._head) < HEAD_KEEP and self._head.count(b"\n") <= HEAD_TAIL_LINES:
            self._head += data[: HEAD_KEEP - len(self._head)]
        self._keep_tail(data)
        self._line += newlines
        self._mid_frame = not data.endswith((b"\n", b"\r"))

    def _keep_tail(self, data: bytes) -> None:
        """The last whole lines, for the tail lines `finish` reads off the last chunk."""
        if len(data) >= TAIL_KEEP:
            start = data.find(b"\n", len(data) - TAIL_KEEP) + 1
            self._tail, self._tail_first = data[start:], self._line + data.count(b"\n", 0, start)
            return
        tail = self._tail + data
        if len(tail) > TAIL_KEEP:
            start = tail.find(b"\n", len(tail) - TAIL_KEEP) + 1
            self._tail_first += tail.count(b"\n", 0, start)
            tail = tail[start:]
        self._tail = tail

    def fork(self) -> LiveScan:
        """An independent copy of the scan so far (e.g. to scan a provisional last line into)."""
        other = copy.copy(self)
        live = self._scanner.scan
        scan = FileScan(
            name=live.name,
            index=live.index,
            bytes=live.bytes,
            lines=live.lines,
            hits={idx: _copy_hits(h) for idx, h in live.hits.items()},
            progress=list(live.progress),
            edge_lines=list(live.edge_lines),
            blank=live.blank,
        )
        scanner = copy.copy(self._scanner)
        scanner.scan = scan
        scanner.progress_chunks = list(scanner.progress_chunks)
        scanner.unsettled = dict(scanner.unsettled)
        other._scanner = scanner
        other._progress = deque(self._progress, maxlen=PROGRESS_TAIL)
        return other

    def rename(self, name: str) -> None:
        """The file is now called `name` (rotated away): what was picked out from it says so."""
        self.name = name
        scan = self._scanner.scan
        scan.name = name
        for hits in scan.hits.values():
            for hit in hits.first:
                hit.line = hit.line.model_copy(update={"file": name})

    @property
    def lines(self) -> int:
        """Lines scanned so far."""
        return self._scanner.scan.lines

    @property
    def pending(self) -> int:
        """Bytes of a partial last line not scanned yet."""
        return len(self._carry)

    def snapshot(self, index: int | None = None) -> FileScan:
        """What `scan_file` would return for the lines fed so far; the running scan is untouched.

        `assemble()` settles the lines it is given in place, so hits and their lists are copied
        (a bounded amount: the scan keeps at most a few thousand hits per file).
        """
        scanner, live = self._scanner, self._scanner.scan
        scan = FileScan(
            name=live.name,
            index=live.index if index is None else index,
            bytes=live.bytes,
            lines=live.lines,
            hits={idx: _copy_hits(h) for idx, h in live.hits.items()},
            progress=sorted(set(self._progress))[-PROGRESS_TAIL:],
            edge_lines=[],
            blank=live.blank,
        )
        for idx, piece in scanner.unsettled.items():  # what finish() would settle, looked up on the copy
            last = last_hit_line(self._library.compiled[idx], piece.read())
            if last is not None:
                scan.hits[idx].last_line = last
        if self._head:  # scan_file reads them off its first chunk, which holds more than a first append
            head = Chunk(self._head, 1, False, self._head.count(b"\n"), self.name)
            scan.edge_lines.extend(read_edge_lines(head, head=True, redactor=self._redactor))
        if self._tail:
            tail = Chunk(self._tail, self._tail_first, False, self._tail.count(b"\n"), self.name)
            scan.edge_lines.extend(read_edge_lines(tail, head=False, redactor=self._redactor))
        return scan


def _copy_hits(h: PatternHits) -> PatternHits:
    return PatternHits(
        count=h.count,
        first=[LineHit(hit.line, hit.span, dict(hit.groups)) for hit in h.first],
        lines=list(h.lines),
        last_line=h.last_line,
        saturated=h.saturated,
    )


class LiveJob:
    """The growing files of one job, diagnosed as a whole whenever asked."""

    def __init__(self, library: Library, *, redactor: Redactor = DEFAULT) -> None:
        self.library = library
        self.redactor = redactor
        self.files: dict[str, LiveScan] = {}  # by key (a path, "<stdin>")

    def file(self, key: str, name: str | None = None) -> LiveScan:
        """The scan of a file, started on first use."""
        scan = self.files.get(key)
        if scan is None:
            shown = self.redactor.line(name if name is not None else key).text
            scan = self.files[key] = LiveScan(self.library, name=shown, index=len(self.files), redactor=self.redactor)
        return scan

    def retire(self, key: str, new_key: str, name: str) -> None:
        """A file rotated away: its scan stays in the job under a new key and name."""
        scan = self.files.pop(key)
        scan.rename(self.redactor.line(name).text)
        self.files[new_key] = scan

    def diagnose(self, *, top: int | None = None, written: datetime | None = None) -> Diagnosis | None:
        """The job's diagnosis so far, or None while nothing but blank lines has arrived."""
        from app.core.engine.diagnose import assemble  # diagnose imports the matcher this module extends

        scans = [s.snapshot(i) for i, s in enumerate(self.files.values())]
        if not any(s.bytes for s in scans) or all(s.blank for s in scans):
            return None
        try:
            return assemble(scans, self.library, top=top, written=written)
        except EmptyLog:
            return None
