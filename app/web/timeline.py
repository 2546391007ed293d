"""The picture of a job on the diagnosis page: one lane per rank, events in time (or line) order.

Laid out here, drawn as inline SVG by `templates/_partials/job_picture.html`, so the page needs
no JavaScript. Events close together in time share a column and the columns are evenly spaced:
a ten-minute wait between a failure and its echoes would otherwise squeeze every echo into one
pixel. The wait is written on the picture instead ("9 min 48 s later").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from app.core import Candidate, Diagnosis

# "repeat": the first failure again, on another rank or later (only its first line is "initiating").
MarkKind = Literal["initiating", "repeat", "collateral", "contributing", "earlier"]

LABEL_WIDTH = 100  # the rank names on the left
COLUMN_WIDTH = 56
GAP_WIDTH = 96  # a column after a labelled wait is pushed right to make room for the label
LANE_HEIGHT = 28
TOP = 40  # room for the wait label above the lanes
BOTTOM = 34  # room for the column labels below them
MAX_LANES = 12  # more ranks than this fold into one lane: a 64-rank job stays one screen tall
SAME_MOMENT = 1.0  # seconds: events closer than this share a column
SAME_ECHO = 60.0  # seconds: one failure's appearances this close to its first share a column
LABELLED_WAIT = 1.0  # seconds: a longer wait between the first failure and its echoes is written out
MAX_COLUMNS = 24
MIN_WIDTH = 320  # fits a 390 px phone with the page's margins, wide enough to read on a desktop


class TimelineEvent(Protocol):
    """When a failure first appeared on one rank (diagnosis_view.TimelineEntry)."""

    @property
    def time(self) -> datetime | None: ...
    @property
    def rank(self) -> int | None: ...
    @property
    def line(self) -> int: ...
    @property
    def candidate(self) -> Candidate: ...
    @property
    def file(self) -> str | None: ...


@dataclass(frozen=True)
class Lane:
    y: int
    label: str
    ranks: tuple[int | None, ...]
    suspect: bool = False
    note: str = ""


@dataclass(frozen=True)
class Mark:
    x: int
    y: int
    kind: MarkKind
    title: str
    candidate_id: str
    rank: int | None
    line: int


@dataclass(frozen=True)
class Column:
    x: int
    label: str


@dataclass(frozen=True)
class Wait:
    x1: int
    x2: int
    label: str


@dataclass(frozen=True)
class LegendItem:
    kind: MarkKind
    title: str
    candidate_id: str
    href: str


@dataclass(frozen=True)
class JobPicture:
    """Everything the SVG template draws, in pixels."""

    width: int
    height: int
    axis: Literal["time", "line"]
    lanes: list[Lane]
    marks: list[Mark]
    columns: list[Column]
    waits: list[Wait] = field(default_factory=list)
    legend: list[LegendItem] = field(default_factory=list)
    description: str = ""
    left: int = LABEL_WIDTH
    lane_height: int = LANE_HEIGHT


def duration(seconds: float) -> str:
    """A wait as people say it: '9 min 48 s', '2 h 5 min', '0.4 s'."""
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


def _naive(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def _kind(c: Candidate) -> MarkKind:
    if c.episode == "earlier":
        return "earlier"
    return c.role


def _lanes(events: Sequence[TimelineEvent], suspect: int | None, first_rank: int | None, world: int = 0) -> list[Lane]:
    """One lane per rank of the world in rank order; past MAX_LANES, the ranks with only echoes share one lane.

    A rank that printed no failure gets its lane too: a rank missing from the picture of a hang is
    often the one that matters.
    """
    ranks = {e.rank for e in events} | set(range(world))
    if suspect is not None:
        ranks.add(suspect)
    numbered = sorted(r for r in ranks if r is not None)
    keep = list(numbered)
    folded: list[int] = []
    if len(numbered) > MAX_LANES:
        # Keep the ranks that tell the story (the first failure, the suspect, anything not an
        # echo), then the lowest ranks, and fold the rest.
        telling = {r for r in (suspect, first_rank) if r is not None}
        telling |= {e.rank for e in events if e.rank is not None and e.candidate.role != "collateral"}
        room = max(MAX_LANES - 1 - len(telling), 0)
        others = [r for r in numbered if r not in telling]
        keep = sorted(telling | set(others[:room]))
        folded = others[room:]
    lanes: list[Lane] = []
    for r in keep:
        lanes.append(
            Lane(
                y=0,
                label=f"rank {r}",
                ranks=(r,),
                suspect=r == suspect,
                note="suspect" if r == suspect else "",
            )
        )
    if folded:
        lanes.append(Lane(y=0, label=f"{len(folded)} more ranks", ranks=tuple(folded)))
    if None in ranks:
        lanes.append(Lane(y=0, label="no rank", ranks=(None,), note="launcher and unprefixed lines"))
    return [
        Lane(
            y=TOP + i * LANE_HEIGHT + LANE_HEIGHT // 2,
            label=lane.label,
            ranks=lane.ranks,
            suspect=lane.suspect,
            note=lane.note,
        )
        for i, lane in enumerate(lanes)
    ]


def _moments(events: Sequence[TimelineEvent], timed: bool) -> list[list[TimelineEvent]]:
    """Events grouped into columns: close in time (or adjacent in line order) share one."""
    groups: list[list[TimelineEvent]] = []
    for e in events:
        if groups:
            start = groups[-1][0]
            if timed and e.time is not None and start.time is not None:
                apart = (_naive(e.time) - _naive(start.time)).total_seconds()
                # One failure echoing on rank after rank over a minute is one moment of the story.
                close = apart < SAME_MOMENT or (e.candidate.id == start.candidate.id and apart < SAME_ECHO)
            else:
                close = not timed and e.candidate.id == start.candidate.id and e.line - groups[-1][-1].line <= 2
            if close:
                groups[-1].append(e)
                continue
        groups.append([e])
    return groups


def job_picture(diagnosis: Diagnosis, events: Sequence[TimelineEvent]) -> JobPicture | None:
    """Lay out the job: None when a picture would say nothing the cards do not.

    It is drawn for a job of more than one rank, or with times; never along the lines of several
    files at once (line 20 of rank0.log and line 20 of rank3.log are not one moment).
    """
    if not events:
        return None
    timed = all(e.time is not None for e in events)
    world = _world_size(diagnosis)
    several_ranks = len({e.rank for e in events if e.rank is not None}) > 1 or world > 1
    if not (several_ranks or timed) or (not timed and len({e.file for e in events}) > 1):
        return None
    first = diagnosis.initiating
    suspect = diagnosis.hang.rank if diagnosis.hang else None
    lanes = _lanes(events, suspect, first.rank if first else None, world)
    lane_of: dict[int | None, Lane] = {r: lane for lane in lanes for r in lane.ranks}

    # Echoes drawn left of their cause: the picture says why rather than let them read as the start.
    at = next((i for i, e in enumerate(events) if first is not None and e.candidate is first), 0)
    before_cause = {id(e) for e in events[:at]}
    groups = _moments(events, timed)[:MAX_COLUMNS]
    columns: list[Column] = []
    waits: list[Wait] = []
    marks: list[Mark] = []
    x = LABEL_WIDTH + COLUMN_WIDTH // 2
    previous: list[TimelineEvent] | None = None
    for group in groups:
        head = group[0]
        wait_label = ""
        if previous is not None:
            before, now = previous[-1].time, head.time
            if before is not None and now is not None:
                seconds = (_naive(now) - _naive(before)).total_seconds()
                starts_echoes = any(e.candidate.role == "initiating" for e in previous)
                if seconds >= LABELLED_WAIT and (starts_echoes or seconds >= 60):
                    wait_label = f"{duration(seconds)} later"
            x += GAP_WIDTH if wait_label else COLUMN_WIDTH
            if wait_label:
                waits.append(Wait(x1=columns[-1].x, x2=x, label=wait_label))
        if timed and head.time is not None:
            label = head.time.strftime("%H:%M:%S")
        else:
            label = f"line {head.line}"
        columns.append(Column(x=x, label=label))
        # Several failures in one lane and column sit side by side, not on top of each other.
        seen: dict[int, int] = {}
        for e in group:
            lane = lane_of[e.rank]
            n = seen.get(lane.y, 0)
            seen[lane.y] = n + 1
            if n >= 3:
                continue
            c = e.candidate
            kind = _kind(c)
            if kind == "initiating" and (e.rank, e.line) != (c.rank, c.line):
                kind = "repeat"
            when = f", {e.time.strftime('%H:%M:%S')}" if e.time is not None else ""
            if kind == "collateral" and id(e) in before_cause:
                when += "; " + (EARLY_STAMP if timed else EARLY_LINE)
            where = f"rank {e.rank}" if e.rank is not None else "no rank"
            marks.append(
                Mark(
                    x=x + n * 11,
                    y=lane.y,
                    kind=kind,
                    title=f"{c.title} ({'the same failure again' if kind == 'repeat' else _role_word(c)}): "
                    f"{where}, line {e.line}{when}",
                    candidate_id=c.id,
                    rank=e.rank,
                    line=e.line,
                )
            )
        previous = group

    if any(m.kind == "repeat" for m in marks) and first is not None:
        repeat = LegendItem(kind="repeat", title=first.title, candidate_id=first.id, href=f"#c-{first.id}")
    else:
        repeat = None
    legend: list[LegendItem] = []
    for e in events:
        c = e.candidate
        # The page's cards carry anchors; echoes and earlier trouble are folded away: link their entries.
        href = f"#c-{c.id}" if _kind(c) in ("initiating", "contributing") else c.path
        item = LegendItem(kind=_kind(c), title=c.title, candidate_id=c.id, href=href)
        if item not in legend:
            legend.append(item)
    if repeat is not None:
        legend.append(repeat)
    order = {"initiating": 0, "repeat": 1, "contributing": 2, "collateral": 3, "earlier": 4}
    legend.sort(key=lambda i: order[i.kind])

    width = max(x + COLUMN_WIDTH // 2 + 8, MIN_WIDTH)
    height = TOP + len(lanes) * LANE_HEIGHT + BOTTOM
    return JobPicture(
        width=width,
        height=height,
        axis="time" if timed else "line",
        lanes=lanes,
        marks=marks,
        columns=columns,
        waits=waits,
        legend=legend,
        description=_describe(diagnosis, lanes, waits, timed),
    )


EARLY_STAMP = "stamped before its cause: clocks of different hosts differ, or its wait began earlier"
EARLY_LINE = "printed before its cause: the ranks' output interleaves in the log"
MAX_WORLD = 4096  # a world size read from a log beyond this is not drawn lane by lane


def _world_size(diagnosis: Diagnosis) -> int:
    """The job's world size as its lines state it (0 when they do not)."""
    fact = diagnosis.environment.first("world_size")
    size = int(fact.value) if fact is not None and fact.value.isdigit() else 0
    return size if size <= MAX_WORLD else 0


def _role_word(c: Candidate) -> str:
    if c.episode == "earlier":
        return "earlier trouble"
    return {"initiating": "first failure", "collateral": "echo", "contributing": "also failed"}[c.role]


def _describe(diagnosis: Diagnosis, lanes: list[Lane], waits: list[Wait], timed: bool) -> str:
    """One sentence for screen readers: what the picture shows."""
    parts = [f"{len(lanes)} lane{'' if len(lanes) == 1 else 's'}, {'time' if timed else 'line order'} across."]
    first = diagnosis.initiating
    if first is not None:
        where = f"rank {first.rank}" if first.rank is not None else "a line with no rank"
        parts.append(f"The first failure, {first.title}, is on {where}.")
    if waits:
        parts.append(f"The echoes follow {waits[0].label.removesuffix(' later')} later.")
    if diagnosis.hang is not None:
        parts.append(f"Rank {diagnosis.hang.rank} is the suspect the others waited for.")
    return " ".join(parts)
