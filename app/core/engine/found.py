"""A signature found in a log, before roles are given, and where its first hit is."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from app.core.engine.file_scan import FileScan, LineHit
from app.core.knowledge.schema import Pattern, Signature
from app.core.times import comparable

ROOT_RANK_FACT = "root_rank"  # capture name of a launcher's "first observed failure" rank
# Capture name of the local rank torchrun's agent names when it first sees a worker fail
# ("failed (exitcode: -9) local_rank: 4 (pid: ...)"): the global rank too when the job runs on one node.
AGENT_LOCAL_RANK_FACT = "failed_local_rank"
# Capture name of the rank(s) a report lists as the ones the others wait for (Horovod's stall
# report, printed by the coordinator, rank 0: "Missing ranks:" then "6: [tensors ...]"; before
# 0.16 one line a tensor, "tensor [missing ranks: 6, 7]"): one rank, or a comma-separated list.
STALLED_RANK_FACT = "stalled_rank"


@dataclass(frozen=True, slots=True)
class Position:
    """Where a hit is, comparable across files by time and within a file by line."""

    file_index: int
    line: int
    time: datetime | None

    def before(self, other: Position) -> bool:
        """Earlier in time when both lines carry comparable times, else earlier in the log."""
        a, b = self.time, other.time
        # A time the job could not give a year (glog, syslog) compares only with its kind.
        if a is not None and b is not None and comparable(a, b) and a != b:
            return a < b
        if self.file_index == other.file_index:
            return self.line < other.line
        # Files come in the job's canonical order (job.arrange), never the
        # order they were given in.
        return self.file_index < other.file_index


@dataclass(slots=True)
class Found:
    """A signature that matched, before roles are given."""

    sig: Signature
    confidence: float
    first: tuple[FileScan, LineHit]
    last_line: dict[int, int]  # file index -> last fingerprint line
    count: int
    evidence: list[tuple[LineHit, Pattern, str]]
    facts: dict[str, str]
    ranks: set[int] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)  # what the log's versions mean for it
    named_rank: int | None = None  # the one rank its report names as stalled, not the printer's

    @property
    def rank(self) -> int | None:
        """The rank it is on: the one rank its report names as stalled, else its first line's."""
        return self.named_rank if self.named_rank is not None else hit_rank(self.first[1])

    @property
    def position(self) -> Position:
        scan, hit = self.first
        return Position(scan.index, hit.line.no, hit.line.time)


def hit_rank(hit: LineHit) -> int | None:
    """The rank a hit is on: its line's launcher prefix, else the rank its own message states
    (a fingerprint's `rank` group: Megatron's "Rank 3: found NaN ...", c10d's "[Rank 3] Watchdog ...")."""
    if hit.line.rank is not None:
        return hit.line.rank
    stated = hit.groups.get("rank", "")
    return int(stated) if stated.isdigit() else None


def stalled_rank_of(hits: Iterable[LineHit]) -> int | None:
    """The rank the hits' stall report names, when it names exactly one: that is the rank the
    others waited for, as the suspect of a hang; several stalled ranks (on one line or over
    several) name none."""
    named: set[int] = set()
    for h in hits:
        listed = [r.strip() for r in h.groups.get(STALLED_RANK_FACT, "").split(",")]
        named.update(int(r) for r in listed if r.isdigit())
    return named.pop() if len(named) == 1 else None


def stated_rank(terminal: Sequence[Found], fact: str) -> int | None:
    """The first rank a launcher's line states under `fact`, among the final episode's failures."""
    return next((int(f.facts[fact]) for f in terminal if f.facts.get(fact, "").isdigit()), None)
