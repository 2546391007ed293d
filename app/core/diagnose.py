"""`diagnose()`: the one entry point of the core, used by the CLI, the web app and the tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

import regex

from app.core.hangs import hang_suspect
from app.core.library import Library
from app.core.matcher import FileScan, scan_file
from app.core.models import Candidate, Diagnosis, InputInfo, Line, SimilarEntry, Unexplained, UnknownStart
from app.core.ranker import find_signatures, harmless, rank_found, unexplained, unrecognised_start
from app.core.reader import Source, iter_blocks, source_name
from app.core.redact import DEFAULT, Redactor, count_placeholders
from app.core.times import year_resolver
from app.errors import EmptyLog


def scan_sources(
    sources: Sequence[tuple[str | None, Source]],
    library: Library,
    *,
    redactor: Redactor = DEFAULT,
    threads: int = 2,
) -> list[FileScan]:
    """One pass of the library over each source (file names and picked-out lines redacted)."""
    scans = []
    for i, (name, source) in enumerate(sources):
        shown = redactor.line(name).text if name else name
        chunks = iter_blocks(source, file=shown)
        scans.append(scan_file(library, chunks, name=shown, index=i, redactor=redactor, threads=threads))
    return scans


def diagnose(
    source: Source,
    library: Library,
    *,
    top: int | None = None,
    name: str | None = None,
    redactor: Redactor = DEFAULT,
    threads: int = 2,
) -> Diagnosis:
    """Diagnose one log: a path, bytes or a binary stream. Secrets never reach the result.

    `threads` scan a large log's chunks at once (the engine runs without the GIL).
    """
    return diagnose_many(
        [(name if name is not None else source_name(source), source)],
        library,
        top=top,
        redactor=redactor,
        threads=threads,
    )


def diagnose_many(
    sources: Sequence[tuple[str | None, Source]],
    library: Library,
    *,
    top: int | None = None,
    redactor: Redactor = DEFAULT,
    threads: int = 2,
) -> Diagnosis:
    """Diagnose the logs of one job (e.g. one file per rank) as a whole."""
    scans = scan_sources(sources, library, redactor=redactor, threads=threads)
    if not any(s.bytes for s in scans) or all(s.blank for s in scans):
        raise EmptyLog("the log is empty: there is nothing to diagnose")
    return assemble(scans, library, top=top)


# A rank in a file's name: "rank3.log", "node1-rank3.out", "rank_3.txt", else a number the
# name ends with: "worker-3.log", "train-3.err" (a bare "node1" is a host, not a rank).
_NAMED_RANK = regex.compile(r"rank[_-]?(\d{1,6})(?!\d)", regex.IGNORECASE)
_TRAILING_NUMBER = regex.compile(r"[-_.](\d{1,6})$")


def rank_from_name(name: str | None) -> int | None:
    """The rank a log file's name declares, if any."""
    if not name:
        return None
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    stem = base.rsplit(".", 1)[0] if "." in base else base
    m = _NAMED_RANK.search(base) or _TRAILING_NUMBER.search(stem)
    return int(m[1]) if m else None


def _picked_lines(scan: FileScan) -> Iterator[Line]:
    yield from scan.edge_lines
    for ph in scan.hits.values():
        for hit in ph.first:
            yield hit.line


def file_rank(scan: FileScan) -> tuple[int | None, bool]:
    """A file's rank from its lines' prefixes (the most common), else from its name; and whether from the name."""
    seen = Counter(line.rank for line in _picked_lines(scan) if line.rank is not None)
    if seen:
        return min(seen, key=lambda r: (-seen[r], r)), False
    return rank_from_name(scan.name), True


def canonical_order(scans: Sequence[FileScan]) -> list[FileScan]:
    """The job's files by rank, then name, re-indexed: the answer never depends on argument order."""

    def key(scan: FileScan) -> tuple[object, ...]:
        rank, _ = file_rank(scan)
        edges = tuple(line.text for line in scan.edge_lines)
        return (rank is None, rank or 0, scan.name or "", scan.bytes, scan.lines, edges)

    ordered = sorted(scans, key=key)
    for i, scan in enumerate(ordered):
        scan.index = i
    return ordered


def settle_lines(scans: Sequence[FileScan]) -> None:
    """Give year-less times the job's year and rank-less lines their file's named rank, in place."""
    resolve = year_resolver(line.time for scan in scans for line in _picked_lines(scan) if line.time is not None)
    for scan in scans:
        rank, named = file_rank(scan)
        _settle_scan(scan, resolve, rank if named else None)


def _settle_scan(scan: FileScan, resolve: Callable[[datetime], datetime], fill_rank: int | None) -> None:
    settled: dict[int, Line] = {}  # by id: a line picked by several patterns stays one object

    def settle(line: Line) -> Line:
        if id(line) not in settled:
            update: dict[str, object] = {}
            if line.time is not None and (time := resolve(line.time)) is not line.time:
                update["time"] = time
            if line.rank is None and fill_rank is not None:
                update["rank"] = fill_rank
            settled[id(line)] = line.model_copy(update=update) if update else line
        return settled[id(line)]

    scan.edge_lines = [settle(line) for line in scan.edge_lines]
    for ph in scan.hits.values():
        for hit in ph.first:
            hit.line = settle(hit.line)


def assemble(scans: Sequence[FileScan], library: Library, *, top: int | None = None) -> Diagnosis:
    """Rank what the scans found into a `Diagnosis`."""
    scans = canonical_order(scans)
    settle_lines(scans)
    versions: dict[str, str] = {}
    for scan in scans:
        for key, value in scan.versions.items():
            versions.setdefault(key, value)
    found, _ = find_signatures(library, scans, versions)
    candidates = rank_found([f for f in found if f.sig.role != "benign"], scans)
    if top is not None:
        candidates = candidates[:top]
    # After settle_lines, times are all full or (no year anywhere in the job) all year-less.
    # The ends of each file and every line a pattern picked: a file's last chunk may be short.
    times = sorted(line.time for scan in scans for line in _picked_lines(scan) if line.time is not None)
    ranks = sorted({e.rank for c in candidates for e in c.evidence if e.rank is not None})
    cut = {(s.index, h.line.no) for s in scans for ph in s.hits.values() for h in ph.first if h.line.cut}
    unexplained_lines = unexplained(library, scans, (f.sig.id for f in found))
    return Diagnosis(
        library_version=library.version,
        input=InputInfo(
            bytes=sum(s.bytes for s in scans),
            lines=sum(s.lines for s in scans),
            files=[s.name for s in scans if s.name],
            ranks=ranks,
            start=times[0] if times else None,
            end=times[-1] if times else None,
            cut_lines=len(cut),
            versions=versions,
        ),
        candidates=candidates,
        unexplained=unexplained_lines,
        unrecognised_start=with_similar(unrecognised_start(candidates, unexplained_lines), library),
        hang=hang_suspect(candidates, scans, library),
        harmless=harmless([f for f in found if f.sig.role == "benign"]),
        redactions=shown_redactions(candidates, unexplained_lines, [s.name for s in scans]),
    )


def shown_redactions(
    candidates: Sequence[Candidate], unexplained_lines: Sequence[Unexplained], names: Sequence[str | None]
) -> dict[str, int]:
    """Secrets removed from what a diagnosis shows (each log line counted once), by type."""
    texts: dict[tuple[str | None, int], str] = {}
    for candidate in candidates:
        for e in candidate.evidence:
            texts[(e.file, e.line)] = e.text
    for u in unexplained_lines:
        texts[(u.file, u.line)] = u.text
    ordered = [texts[k] for k in sorted(texts, key=lambda k: (k[0] or "", k[1]))]
    return count_placeholders([*ordered, *(n for n in names if n)])


def with_similar(start: UnknownStart | None, library: Library) -> UnknownStart | None:
    """An unrecognised start with the library entries worded most like it (leads, not matches)."""
    if start is None:
        return None
    similar = [
        SimilarEntry(id=sid, title=library.signatures[sid].title, path=f"/failures/{sid}", score=score)
        for sid, score in library.similar.nearest(start.text)
    ]
    return start.model_copy(update={"similar": similar})
