"""The diagnosis page's view model: everything diagnosis.html shows, worked out before it runs.

The template only reads what is here: each candidate's evidence lines grouped and highlighted,
its times as people read them, the log context it shows and the ranks it names, the timeline's
rows, the environment's facts grouped and the reader's notes. It calls nothing: what needs the
core (the spans merged, a year-less time, the verdict's sentences) is done here, once per page.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from app.core import Candidate, Diagnosis
from app.core.models import Evidence, Window
from app.core.rendering import merged_spans, quiet_heading, trust, verdict_line
from app.core.stored import StoredDiagnosis
from app.core.times import Yearless, comparable, span
from app.web.templating import visible, when
from app.web.timeline import job_picture


@dataclass(frozen=True)
class TimelineEntry:
    time: datetime | None
    rank: int | None
    line: int
    candidate: Candidate
    file: str | None = None


def _timeline(diagnosis: Diagnosis) -> list[TimelineEntry]:
    """When each failure first appeared on each rank, in time (or line) order.

    On a failure's own rank the entry is the line its heading states: a traceback frame a few lines
    above it is part of the same occurrence, not an earlier one, and drawing it apart made the
    picture mark "the same failure again" before the failure itself.
    """
    first: dict[tuple[str, int | None], TimelineEntry] = {}
    for c in diagnosis.candidates:
        first[(c.id, c.rank)] = TimelineEntry(c.time, c.rank, c.line, c, c.file)
        for e in c.evidence:
            key = (c.id, e.rank)
            if e.rank == c.rank:
                continue
            if key not in first or e.line < first[key].line:
                first[key] = TimelineEntry(e.time or c.time, e.rank, e.line, c, e.file)
    entries = list(first.values())
    if all(e.time is not None for e in entries):
        entries.sort(key=lambda e: (_comparable(e.time) if e.time else datetime.min, e.line))
    else:
        entries.sort(key=lambda e: e.line)
    return entries[:60]


def _comparable(value: datetime) -> datetime:
    """Logs mix naive and zoned timestamps; compare them all as naive UTC."""
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def log_time(value: datetime | None) -> str:
    """A time from the log as people read it; one the log gave no year (nor did the rest of the job) says so."""
    if isinstance(value, Yearless):
        return value.strftime("%m-%d %H:%M:%S") + " (no year in the log)"
    return when(value)


def began_gap(c: Candidate) -> str:
    """How long before its line a failure began ("10 min"), when both times can be compared."""
    if c.began is None or c.time is None or not comparable(c.began, c.time):
        return ""
    return span((c.time - c.began).total_seconds())


@dataclass(frozen=True)
class EvidenceLine:
    """One evidence line with every span that matched on it, and its text with them marked."""

    line: int
    file: str | None
    rank: int | None
    text: str
    spans: tuple[tuple[int, int], ...]
    html: Markup  # the text escaped, the spans marked: worked out here, not while the page renders


def by_line(evidence: Iterable[Evidence]) -> list[EvidenceLine]:
    """Evidence grouped by line, in order: several patterns matching one line show as one line."""
    grouped: dict[tuple[str | None, int, str], list[Evidence]] = {}
    for e in evidence:
        grouped.setdefault((e.file, e.line, e.text), []).append(e)
    lines = []
    for (file, line, text), items in grouped.items():
        spans = tuple(e.span for e in items)
        lines.append(EvidenceLine(line, file, items[0].rank, text, spans, marked(text, spans)))
    return lines


def marked(text: str, spans: Iterable[tuple[int, int]]) -> Markup:
    """Text with the union of the spans in <mark>, everything escaped."""
    out, pos = [], 0
    for start, end in merged_spans(text, spans):
        out.append(f"{visible(text[pos:start])}<mark>{visible(text[start:end])}</mark>")
        pos = end
    out.append(str(visible(text[pos:])))
    return Markup("".join(out))


def _context(windows: list[Window], candidate: Candidate) -> list[Window]:
    # By file and line: in a job of several files, line 20 of rank0.log is not line 20 of rank3.log.
    lines = {(e.file, e.line) for e in candidate.evidence}
    return [w for w in windows if any((w.file, wl.no) in lines for wl in w.lines)]


@dataclass(frozen=True)
class Context:
    """A candidate's log context on the page: the windows shown with it, and those shown earlier."""

    windows: list[Window]
    shown_with: list[Candidate]  # earlier candidates on the page that already show the rest


def _contexts(record: StoredDiagnosis, order: list[Candidate]) -> dict[int, Context]:
    """Each window of log context once on the page, with the first candidate (in page order) it belongs to.

    Echoes on many ranks share the lines around them: repeating the same window under each
    echo made the page long and said nothing new.
    """
    owner: dict[tuple[str | None, int], Candidate] = {}
    out: dict[int, Context] = {}
    for c in order:
        mine, elsewhere = [], []
        for w in _context(record.windows, c):
            key = (w.file, w.lines[0].no if w.lines else 0)
            if key in owner:
                if owner[key] not in elsewhere:
                    elsewhere.append(owner[key])
            else:
                owner[key] = c
                mine.append(w)
        out[id(c)] = Context(mine, elsewhere)
    return out


def ranks_text(ranks: list[int]) -> str:
    """Ranks as runs: [0, 1, 2, 3, 7] -> '0–3, 7'."""
    runs: list[list[int]] = []
    for r in sorted(set(ranks)):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}–{b}" for a, b in runs)


def shown_ranks(candidate: Candidate) -> tuple[list[int], list[int]]:
    """The ranks whose lines the page shows for a candidate, and the ranks it was seen on without them.

    A candidate keeps a few evidence lines (one per pattern, then one per rank up to a cap), while
    `ranks` lists every rank it was seen on; the page names the two apart so that a rank it names
    with "lines on" is one whose line is there.
    """
    shown = sorted({e.rank for e in candidate.evidence if e.rank is not None})
    return shown, sorted(set(candidate.ranks) - set(shown))


@dataclass(frozen=True)
class CandidateView:
    """A candidate as its card (or its collapsed entry) shows it."""

    candidate: Candidate
    time: str  # its line's time as people read it ("" without one)
    began: str  # when its operation began, and how long before its line
    began_gap: str
    lines: list[EvidenceLine]  # its evidence by line, the matched spans marked
    context: Context
    shown: list[int]  # the ranks whose lines are shown, and those it was seen on besides
    unshown: list[int]
    shown_text: str
    unshown_text: str


def candidate_view(c: Candidate, context: Context) -> CandidateView:
    shown, unshown = shown_ranks(c)
    return CandidateView(
        candidate=c,
        time=log_time(c.time) if c.time else "",
        began=log_time(c.began) if c.began else "",
        began_gap=began_gap(c),
        lines=by_line(c.evidence),
        context=context,
        shown=shown,
        unshown=unshown,
        shown_text=ranks_text(shown),
        unshown_text=ranks_text(unshown),
    )


@dataclass(frozen=True)
class TimelineRow:
    """A row of the timeline table: an entry and its time as people read it."""

    time: str
    rank: int | None
    line: int
    candidate: Candidate
    file: str | None


def diagnosis_context(record: StoredDiagnosis) -> dict[str, Any]:
    """What diagnosis.html needs, grouped the way a person reads it, and nothing left to work out."""
    d = record
    main, echoes, earlier = d.groups()
    timeline = _timeline(d)
    picture = job_picture(d, timeline)
    contexts = _contexts(record, [*main, *echoes, *earlier])

    def views(candidates: list[Candidate]) -> list[CandidateView]:
        return [candidate_view(c, contexts[id(c)]) for c in candidates]

    # A one-rank log drawn without times would repeat the cards: no timeline then.
    shown = picture is not None or len({(t.rank, t.file) for t in timeline}) > 1
    return {
        "record": record,
        "d": d,
        "main": views(main),
        "echoes": views(echoes),
        "earlier": views(earlier),
        "first": d.initiating or (main[0] if main else None),
        "timeline": [TimelineRow(log_time(t.time), t.rank, t.line, t.candidate, t.file) for t in timeline]
        if shown
        else [],
        "picture": picture,
        "several_files": len(d.input.files) > 1,  # then every evidence line says which file it is from
        "environment_groups": d.environment.grouped(),
        "reading_notes": d.input.reading_notes(),
        "verdict": verdict_line(d).removeprefix("Verdict: "),
        "trust": trust(d),
        "heading": quiet_heading(d),
    }
