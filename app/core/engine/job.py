"""One job of several files: each file's rank, an order that never depends on how the
files were given, and the times and ranks lines take from the job as a whole.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

from app.core.engine.file_scan import FileScan
from app.core.models import Line
from app.core.times import year_resolver

# A rank in a file's name: "rank3.log", "node1-rank3.out", "rank_3.txt", else, among the
# files of one job, a number the name ends with: "worker-3.log", "train-3.err" (a bare "node1"
# is a host, not a rank). A lone file's trailing number is more often a run, an issue or a job
# id ("run-2.log"), and Slurm's default output file is named for the job: "slurm-4242137.out",
# "slurm-4242137_3.out" for a task of an array.
_NAMED_RANK = re.compile(r"rank[_-]?(\d{1,6})(?!\d)", re.IGNORECASE)
_TRAILING_NUMBER = re.compile(r"[-_.](\d{1,6})$")
_SLURM_OUTPUT = re.compile(r"slurm-\d{1,12}(?:_\d{1,9})?\.(?:out|err)$", re.IGNORECASE)


def rank_from_name(name: str | None, *, of_several: bool = True) -> int | None:
    """The rank a log file's name declares, if any; `of_several`: the file is one of a job's several."""
    if not name:
        return None
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    named = _NAMED_RANK.search(base)
    if named:
        return int(named[1])
    if not of_several or _SLURM_OUTPUT.match(base):
        return None
    stem = base.rsplit(".", 1)[0] if "." in base else base
    m = _TRAILING_NUMBER.search(stem)
    return int(m[1]) if m else None


def picked_lines(scan: FileScan) -> Iterator[Line]:
    """The lines a scan kept: each file's ends and every line a pattern picked."""
    yield from scan.edge_lines
    for ph in scan.hits.values():
        for hit in ph.first:
            yield hit.line


def file_rank(scan: FileScan, *, of_several: bool = True) -> tuple[int | None, bool]:
    """A file's rank, and whether it is the file's only rank.

    From its lines' prefixes (the most common; the only one when no other rank's line is
    there), else from its name (a file named for a rank holds that rank's output).
    """
    seen = Counter(line.rank for line in picked_lines(scan) if line.rank is not None)
    if seen:
        return min(seen, key=lambda r: (-seen[r], r)), len(seen) == 1
    rank = rank_from_name(scan.name, of_several=of_several)
    return rank, rank is not None


def arrange(scans: Sequence[FileScan], written: datetime | None = None) -> list[FileScan]:
    """The job's files by rank, then name, re-indexed, their lines settled.

    The order, not the one the files were given in, breaks every tie the times cannot, so
    the answer never depends on argument order. Year-less times take the job's year (else the
    year of `written`, when the logs were last written), and a per-rank file (one of several
    files with one prefixed rank, or a file named for a rank) lends that rank to its lines
    without a prefix: a per-rank file's unprefixed traceback is that rank's. A lone merged log
    lends none: an unprefixed line does not inherit the last prefix seen above it.
    """
    ranks = {id(scan): file_rank(scan, of_several=len(scans) > 1) for scan in scans}

    def key(scan: FileScan) -> tuple[object, ...]:
        rank, _ = ranks[id(scan)]
        edges = tuple(line.text for line in scan.edge_lines)
        return (rank is None, rank or 0, scan.name or "", scan.bytes, scan.lines, edges)

    ordered = sorted(scans, key=key)
    resolve = year_resolver(
        (line.time for scan in ordered for line in picked_lines(scan) if line.time is not None), written
    )
    for i, scan in enumerate(ordered):
        scan.index = i
        rank, only = ranks[id(scan)]
        # A lone file is a merged log: its unprefixed lines are the launcher's or another
        # rank's as often as the prefixed rank's, unless its name says it holds one rank.
        per_rank = len(scans) > 1 or rank_from_name(scan.name, of_several=False) is not None
        _settle_scan(scan, resolve, rank if only and per_rank else None)
    return ordered


# How far above an untimed line the timed line that dates it may be: a traceback's length.
TIME_LOOKBACK = 40


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
    _date_untimed(scan)


def _date_untimed(scan: FileScan) -> None:
    """Give a picked line that prints no time the time of the timed picked line of its rank above it.

    A traceback or a wrapped message prints no time; the timed line that introduced it
    ("ERROR training failed", a glog header) dates it, so the job's events merge by time
    across files. Only the lines the scan picked are looked at, never the raw log: an
    excerpt of the log (which holds every picked line) dates them the same way.
    """
    timed: dict[int | None, list[tuple[int, datetime]]] = {}  # rank -> (line, time), in line order
    for line in picked_lines(scan):
        if line.time is not None:
            timed.setdefault(line.rank, []).append((line.no, line.time))
    for points in timed.values():
        points.sort(key=lambda p: p[0])
    starts = {rank: [no for no, _ in points] for rank, points in timed.items()}
    dated: dict[int, Line] = {}

    def date(line: Line) -> Line:
        if line.time is not None or line.rank not in timed:
            return line
        if id(line) not in dated:
            points = timed[line.rank]
            i = bisect.bisect_left(starts[line.rank], line.no) - 1
            if i >= 0 and line.no - points[i][0] <= TIME_LOOKBACK:
                dated[id(line)] = line.model_copy(update={"time": points[i][1]})
            else:
                dated[id(line)] = line
        return dated[id(line)]

    for ph in scan.hits.values():
        for hit in ph.first:
            hit.line = date(hit.line)
