"""Name the suspect rank of a hang: the rank the others were waiting for.

When a job ends in collective timeouts and no failure is recognised before them, the
ranks that report the timeout were waiting; the suspect is the one they waited for:

* the one rank the flight recorder's analysis (torchfrtrace) finds missing from a collective
  the other ranks of its group issued ("missing ranks: {1}"), when its output is in the job;
* a rank another rank names (gloo's "Rank 1 failed to pass monitoredBarrier");
* the rank whose NCCL work sequence numbers lag the others' in the same process group
  ("last enqueued NCCL work: 1580" where the others enqueued 1582);
* the one rank of the job that never reports the timeout;
* the one rank whose own log stops before the collective the others timed out in began,
  while every other rank logged after it began (a job of per-rank files with times; when
  the collective began is known from the duration the timeout line prints).

When nothing tells, there is no suspect: it is never guessed. The answer depends only on
sets and minima of what the scans picked, so never on the order of a job's files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from app.core.engine.file_scan import FileScan, LineHit
from app.core.knowledge.loading import Library
from app.core.models import Candidate, HangLine, HangSuspect, Line
from app.core.times import comparable, span

HANG_IDS = frozenset({"nccl.watchdog_timeout", "dist.gloo_timeout", "dist.heartbeat_monitor_stuck"})
# The lines only a rank that waited prints (pattern names in signatures/distributed/). Not the
# heartbeat monitor's: its watchdog stuck, that rank may be the hung one; not gloo's pair
# closure or NCCL's dump signal, which the hung rank may print too.
WAITING = {
    "nccl.watchdog_timeout": frozenset(
        {"watchdog_timeout", "watchdog_timeout_wrapped", "worknccl_ran_for", "pg_status"}
    ),
    "dist.gloo_timeout": frozenset({"gloo_wait_timeout", "gloo_wait_timeout_bare", "monitored_barrier"}),
}
# torchfrtrace's report of a collective some ranks never issued (symptoms of both hang signatures).
RECORDER = dict.fromkeys(("nccl.watchdog_timeout", "dist.gloo_timeout"), frozenset({"fr_missing_ranks"}))
RECORDER_HEADER = dict.fromkeys(RECORDER, frozenset({"fr_not_all_joined"}))
RECORDER_FACT, RECORDER_COLLECTIVE = "fr_missing_ranks", "fr_collective"
HEADER_LOOKBACK = 12  # the analysis prints the group, the collective and the ranks a few lines under its header
NAMED_FACT = "missing_rank"  # a waiting rank names the rank it waits for (monitored barrier)
LAUNCHER_FACT = "root_rank"  # the launcher's summary lists every failed rank of the job
ENQUEUED, COMPLETED = "last_enqueued", "last_completed"

_PROCESS_GROUP = re.compile(r"\[PG (?:ID )?(\d+)\b")


@dataclass(frozen=True, slots=True)
class _Report:
    """A timeout line and the rank that printed it."""

    line: Line
    rank: int | None
    groups: dict[str, str]

    @property
    def key(self) -> tuple[str, int]:
        return (self.line.file or "", self.line.no)


def hang_suspect(candidates: Sequence[Candidate], scans: Sequence[FileScan], library: Library) -> HangSuspect | None:
    """The rank a job that ended in collective timeouts most likely hung on, if the log tells."""
    first = next((c for c in candidates if c.role == "initiating"), None)
    if first is None or first.id not in HANG_IDS:
        return None  # a recognised root failure explains the timeouts
    recorded = _recorded(scans, library)
    reports = sorted(_reports(scans, library), key=lambda r: r.key)
    if not reports:
        return recorded
    found = _named(reports) or _lagging(reports) or _silent(reports, scans, library)
    return _agreeing(_agreeing(recorded, found), _stopped(first, scans))


def _agreeing(found: HangSuspect | None, other: HangSuspect | None) -> HangSuspect | None:
    """The first sign, with the second's reason and evidence when both point at the same rank."""
    if found is None or other is None:
        return found or other
    if other.rank != found.rank:
        return found
    return found.model_copy(update={"why": f"{found.why}; {other.why}", "evidence": [*found.evidence, *other.evidence]})


def _patterns(library: Library, wanted: Mapping[str, frozenset[str] | None]) -> set[int]:
    """Engine indexes of the signatures' patterns: those named, or all of a signature's (None)."""
    return {
        library.index[p.regex]
        for sig_id, names in wanted.items()
        if (sig := library.signatures.get(sig_id)) is not None
        for p in (*sig.fingerprints, *sig.symptoms)
        if names is None or p.name in names
    }


def _hits(scans: Iterable[FileScan], indexes: set[int]) -> Iterator[tuple[FileScan, LineHit]]:
    """The lines the patterns of `indexes` picked in each file, with the file."""
    for scan in scans:
        for idx in sorted(indexes):
            hits = scan.hits.get(idx)
            for hit in hits.first if hits else ():
                yield scan, hit


def _reports(scans: Iterable[FileScan], library: Library) -> Iterator[_Report]:
    for _, hit in _hits(scans, _patterns(library, WAITING)):
        rank = hit.line.rank
        if rank is None and hit.groups.get("rank", "").isdigit():
            rank = int(hit.groups["rank"])  # "[Rank 3] Watchdog caught ..." without a launcher prefix
        yield _Report(hit.line, rank, hit.groups)


def _recorded(scans: Sequence[FileScan], library: Library) -> HangSuspect | None:
    """The one rank torchfrtrace finds missing from a collective the other ranks of its group issued."""
    named = sorted(
        ((scan.name or "", hit.line.no, hit) for scan, hit in _hits(scans, _patterns(library, RECORDER))),
        key=lambda x: x[:2],
    )
    ranks = {int(r) for *_, hit in named for r in hit.groups.get(RECORDER_FACT, "").split(", ") if r.isdigit()}
    if len(ranks) != 1:
        return None  # several ranks missing (or none read): the analysis itself does not single one out
    suspect = ranks.pop()
    name, no, hit = named[0]
    headers = [
        h
        for scan, h in _hits(scans, _patterns(library, RECORDER_HEADER))
        if (scan.name or "") == name and 0 <= no - h.line.no <= HEADER_LOOKBACK
    ]
    header = max(headers, key=lambda h: h.line.no, default=None)
    collective = header.groups.get(RECORDER_COLLECTIVE, "") if header else ""
    which = f"collective sequence number {collective}" if collective.isdigit() else "a collective"
    lines = [header.line] if header is not None and header.line.no != no else []
    return HangSuspect(
        rank=suspect,
        why=f"the flight recorder's analysis (torchfrtrace) reports rank {suspect} missing from {which}, which "
        f"the other ranks of its process group issued and waited in",
        # No rank printed these lines (the analysis reads every rank's trace), whatever rank a
        # console log of one rank's output lends its unprefixed lines.
        evidence=[_shown(line).model_copy(update={"rank": None}) for line in (*lines, hit.line)],
    )


def _shown(line: Line, rank: int | None = None) -> HangLine:
    text = line.text[line.content_start :].strip()[:500] or line.text[:500]
    return HangLine(line=line.no, file=line.file, rank=line.rank if rank is None else rank, time=line.time, text=text)


def _named(reports: Sequence[_Report]) -> HangSuspect | None:
    """A rank that a waiting rank names as the one that did not arrive."""
    named = [r for r in reports if r.groups.get(NAMED_FACT, "").isdigit()]
    ranks = {int(r.groups[NAMED_FACT]) for r in named}
    if len(ranks) != 1:
        return None
    suspect, r = ranks.pop(), named[0]
    by = f"rank {r.rank}" if r.rank is not None else "a waiting rank"
    return HangSuspect(
        rank=suspect,
        why=f"{by} reports that rank {suspect} did not reach the barrier the others waited at",
        evidence=[_shown(r.line, r.rank)],
    )


def _work(r: _Report) -> tuple[int, int]:
    """A report's (last enqueued, last completed) NCCL work sequence numbers."""
    return int(r.groups[ENQUEUED]), int(r.groups[COMPLETED])


def _lagging(reports: Sequence[_Report]) -> HangSuspect | None:
    """The rank whose NCCL work sequence numbers lag the other ranks' of its process group."""
    state: dict[tuple[int | None, int], _Report] = {}
    for r in reports:
        if r.rank is None or not (r.groups.get(ENQUEUED, "").isdigit() and r.groups.get(COMPLETED, "").isdigit()):
            continue
        m = _PROCESS_GROUP.search(r.line.text)
        key = (int(m[1]) if m else None, r.rank)
        # A rank that reports twice: its least advanced report stands.
        state[key] = min(state.get(key, r), r, key=lambda x: (*_work(x), x.key))
    found: dict[int, HangSuspect] = {}
    for group in sorted({pg for pg, _ in state}, key=lambda pg: (pg is not None, pg or 0)):
        ranks = {rank: r for (pg, rank), r in state.items() if pg == group}
        if len(ranks) < 2:
            continue
        for pos, label in enumerate(("last enqueued", "last completed")):
            low = min(_work(r)[pos] for r in ranks.values())
            behind = [rank for rank, r in ranks.items() if _work(r)[pos] == low]
            if len(behind) != 1:
                continue
            rank = behind[0]
            others = " and ".join(map(str, sorted({_work(r)[pos] for k, r in ranks.items() if k != rank})))
            where = f" in process group {group}" if group is not None else ""
            why = f"rank {rank}'s {label} NCCL work is {low} while the other ranks'{where} is {others}: " + (
                "it never reached the collective they wait in" if pos == 0 else "it fell behind them"
            )
            shown = [ranks[rank], *(ranks[k] for k in sorted(ranks) if k != rank)][:3]
            found.setdefault(rank, HangSuspect(rank=rank, why=why, evidence=[_shown(x.line, x.rank) for x in shown]))
            break
    return next(iter(found.values())) if len(found) == 1 else None


def _job_ranks(scans: Iterable[FileScan], library: Library) -> set[int]:
    """The ranks the job shows: on picked lines (file-named ranks included) or in the launcher's summary.

    A rank seen only on the hang's own lines (its heartbeat monitor firing) is left out: that
    proves neither that it waited nor that it was there to be waited for.
    """
    hang_lines = _patterns(library, dict.fromkeys(HANG_IDS))
    ranks: set[int] = set()
    for scan in scans:
        own = {hit.line.no for idx in hang_lines if (hits := scan.hits.get(idx)) for hit in hits.first}
        ranks.update(line.rank for line in scan.edge_lines if line.rank is not None and line.no not in own)
        for ph in scan.hits.values():
            for hit in ph.first:
                if hit.line.no in own:
                    continue
                if hit.line.rank is not None:
                    ranks.add(hit.line.rank)
                if hit.groups.get(LAUNCHER_FACT, "").isdigit():
                    ranks.add(int(hit.groups[LAUNCHER_FACT]))
    return ranks


def _silent(reports: Sequence[_Report], scans: Sequence[FileScan], library: Library) -> HangSuspect | None:
    """The one rank of the job that never reports the timeout the others report."""
    waiting = {r.rank for r in reports if r.rank is not None}
    missing = _job_ranks(scans, library) - waiting
    if not waiting or len(missing) != 1:
        return None
    suspect = missing.pop()
    names = ", ".join(map(str, sorted(waiting)))
    plural = "s" if len(waiting) > 1 else ""
    seen: dict[int, _Report] = {}
    for r in reports:
        if r.rank is not None:
            seen.setdefault(r.rank, r)
    return HangSuspect(
        rank=suspect,
        why=f"rank{plural} {names} report{'' if plural else 's'} the collective timeout and rank {suspect} never "
        f"does: the others were waiting for it",
        evidence=[_shown(seen[rank].line, rank) for rank in sorted(seen)][:3],
    )


def _last_lines(scans: Iterable[FileScan]) -> dict[int, tuple[datetime, Line]]:
    """Each rank's last timed line with its time, from the ends of the files that hold one rank's output."""
    last: dict[int, tuple[datetime, Line]] = {}
    for scan in scans:
        ranks = {line.rank for line in scan.edge_lines if line.rank is not None}
        if len(ranks) != 1:
            continue  # no rank, or a merged log: its end says nothing about one rank
        rank = ranks.pop()
        timed = [(line.time, line) for line in scan.edge_lines if line.time is not None]
        if not timed:
            continue
        time, line = max(timed, key=lambda x: (x[0], x[1].no))
        if rank not in last or comparable(last[rank][0], time) and time > last[rank][0]:
            last[rank] = (time, line)
    return last


def _stopped(first: Candidate, scans: Sequence[FileScan]) -> HangSuspect | None:
    """The one rank that stopped logging before the collective the others timed out in began."""
    began = first.began
    if began is None:
        return None
    last = {r: (t, line) for r, (t, line) in _last_lines(scans).items() if comparable(t, began)}
    if len(last) < 2:
        return None
    quiet = [r for r, (t, _) in last.items() if t < began]
    if len(quiet) != 1:
        return None  # several ranks silent since before (e.g. only rank 0 logs): no telling which
    suspect = quiet[0]
    stopped_at, stop = last[suspect]
    others = sorted(r for r in last if r != suspect)
    until = min(last[r][0] for r in others)
    when = stopped_at.isoformat(sep=" ", timespec="milliseconds")
    names = ", ".join(map(str, others))
    plural = "s" if len(others) > 1 else ""
    why = (
        f"rank {suspect}'s log stops at {when}, {span((began - stopped_at).total_seconds())} before the collective "
        f"the others timed out in began ({began.isoformat(sep=' ', timespec='seconds')}), while rank{plural} {names} "
        f"logged until at least {until.isoformat(sep=' ', timespec='seconds')}"
    )
    return HangSuspect(rank=suspect, why=why, evidence=[_shown(stop, suspect)])
