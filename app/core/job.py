"""One job of several files: each file's rank, an order that never depends on how the
files were given, and the times and ranks lines take from the job as a whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

import regex

from app.core.matcher import FileScan
from app.core.models import Line
from app.core.times import year_resolver

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


def picked_lines(scan: FileScan) -> Iterator[Line]:
    """The lines a scan kept: each file's ends and every line a pattern picked."""
    yield from scan.edge_lines
    for ph in scan.hits.values():
        for hit in ph.first:
            yield hit.line


def file_rank(scan: FileScan) -> tuple[int | None, bool]:
    """A file's rank from its lines' prefixes (the most common), else from its name; and whether from the name."""
    seen = Counter(line.rank for line in picked_lines(scan) if line.rank is not None)
    if seen:
        return min(seen, key=lambda r: (-seen[r], r)), False
    return rank_from_name(scan.name), True


def arrange(scans: Sequence[FileScan]) -> list[FileScan]:
    """The job's files by rank, then name, re-indexed, their lines settled.

    The order, not the one the files were given in, breaks every tie the times cannot, so
    the answer never depends on argument order. Year-less times take the job's year, and a
    file ranked by its name lends that rank to its lines without a prefix.
    """
    ranks = {id(scan): file_rank(scan) for scan in scans}

    def key(scan: FileScan) -> tuple[object, ...]:
        rank, _ = ranks[id(scan)]
        edges = tuple(line.text for line in scan.edge_lines)
        return (rank is None, rank or 0, scan.name or "", scan.bytes, scan.lines, edges)

    ordered = sorted(scans, key=key)
    resolve = year_resolver(line.time for scan in ordered for line in picked_lines(scan) if line.time is not None)
    for i, scan in enumerate(ordered):
        scan.index = i
        rank, named = ranks[id(scan)]
        _settle_scan(scan, resolve, rank if named else None)
    return ordered


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
