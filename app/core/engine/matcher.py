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

The parts: the per-chunk scan (app/core/engine/scanner.py, with the limits of what it keeps),
locating hits in bytes (app/core/engine/locate.py) and what a file's scan holds
(app/core/engine/file_scan.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import TYPE_CHECKING

from app.core.engine.file_scan import FileScan
from app.core.engine.locate import hit_lines, line_numbers
from app.core.engine.reader import Block, Chunk
from app.core.engine.scanner import FileScanner, Probe
from app.core.knowledge.loading import Library
from app.core.redaction.redactor import DEFAULT, Redactor

if TYPE_CHECKING:
    from concurrent.futures import Future


def scan_file(
    library: Library,
    chunks: Iterable[Chunk | Block],
    *,
    name: str | None,
    index: int,
    threads: int = 2,
    redactor: Redactor = DEFAULT,
    progress: Callable[[int], None] | None = None,
) -> FileScan:
    """Run every pattern of the library over one file's chunks in one pass.

    With threads > 1, chunks are probed in parallel (RE2 scans without the GIL) and
    recorded in order, a bounded number in flight: memory stays a few chunks.
    `progress` is told the bytes scanned so far after each chunk.
    """
    scanner = FileScanner(library, FileScan(name=name, index=index), redactor)

    def apply(probe: Probe) -> None:
        scanner.apply(probe)
        if progress is not None:
            progress(scanner.scan.bytes)

    chunks = iter(chunks)
    first = list(islice(chunks, 2))
    if threads <= 1 or len(first) < 2:  # a log of one chunk (most requests): no pool to start
        for chunk in chain(first, chunks):
            apply(scanner.probe(chunk))
        return scanner.finish()
    from concurrent.futures import ThreadPoolExecutor  # here: it brings `logging`, which a small log never needs

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tracelore-scan") as pool:
        pending: deque[Future[Probe]] = deque()
        for chunk in chain(first, chunks):
            pending.append(pool.submit(scanner.probe, chunk))
            if len(pending) > 2 * threads:
                apply(pending.popleft().result())
        while pending:
            apply(pending.popleft().result())
    return scanner.finish()


def matching_lines(library: Library, chunks: Iterable[Chunk]) -> Iterator[int]:
    """Every line number on which any pattern of the library matches (the raw fast pass)."""
    for chunk in chunks:
        data = chunk.data
        hit = library.prefilter.Match(data) or ()
        yield from line_numbers(
            data, chunk.first_line, sorted({s for idx in hit for s in hit_lines(library.compiled[idx], data)})
        )
