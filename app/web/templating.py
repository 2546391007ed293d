"""Jinja2 set-up for the pages: autoescaped templates and the filters they use."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from app.core.fill import template
from app.core.models import Evidence
from app.core.times import Yearless
from app.resources import resource_dir
from app.web.upload import human_bytes

TEMPLATES = resource_dir("templates")


def highlight(evidence: Evidence) -> Markup:
    """The evidence text with the matched span in <mark>."""
    text = evidence.text
    start, end = evidence.span
    start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
    if end <= start:
        return Markup(escape(text))
    return Markup(f"{escape(text[:start])}<mark>{escape(text[start:end])}</mark>{escape(text[end:])}")


@dataclass(frozen=True)
class EvidenceLine:
    """One evidence line with every span that matched on it."""

    line: int
    file: str | None
    rank: int | None
    text: str
    spans: tuple[tuple[int, int], ...]


def by_line(evidence: Iterable[Evidence]) -> list[EvidenceLine]:
    """Evidence grouped by line, in order: several patterns matching one line show as one line."""
    grouped: dict[tuple[str | None, int, str], list[Evidence]] = {}
    for e in evidence:
        grouped.setdefault((e.file, e.line, e.text), []).append(e)
    return [
        EvidenceLine(line, file, items[0].rank, text, tuple(e.span for e in items))
        for (file, line, text), items in grouped.items()
    ]


def marked(text: str, spans: Iterable[tuple[int, int]]) -> Markup:
    """Text with the union of the spans in <mark>, everything escaped."""
    merged: list[list[int]] = []
    for start, end in sorted((max(0, s), min(e, len(text))) for s, e in spans):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, pos = [], 0
    for start, end in merged:
        out.append(f"{escape(text[pos:start])}<mark>{escape(text[start:end])}</mark>")
        pos = end
    out.append(str(escape(text[pos:])))
    return Markup("".join(out))


def when(value: datetime | None) -> str:
    """A log timestamp as people read it."""
    if value is None:
        return ""
    if isinstance(value, Yearless):  # the log gave no year, nor did the rest of the job
        return value.strftime("%m-%d %H:%M:%S") + " (no year in the log)"
    return value.strftime("%Y-%m-%d %H:%M:%S") + (
        " UTC" if value.utcoffset() is not None and not value.utcoffset() else ""
    )


def reset_time(value: datetime) -> Markup:
    """A UTC moment the reader's browser rewrites in their own time (tracelore.js); UTC without it."""
    utc = value.astimezone(UTC)
    iso = utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    shown = "midnight UTC" if (utc.hour, utc.minute) == (0, 0) else utc.strftime("%H:%M UTC")
    return Markup(f'<time class="local" datetime="{escape(iso)}">{escape(shown)}</time>')


def sentence(text: str | None) -> str:
    """A problem's detail as a sentence: capital first letter, final full stop."""
    text = (text or "").strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def make_templates() -> Jinja2Templates:
    """The page templates with Tracelore's filters."""
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.filters["highlight"] = highlight
    templates.env.filters["by_line"] = by_line
    templates.env.filters["marked"] = marked
    templates.env.filters["when"] = when
    templates.env.filters["bytes"] = human_bytes
    templates.env.filters["sentence"] = sentence
    templates.env.globals["reset_time"] = reset_time
    templates.env.filters["template"] = template  # a fix text's optional parts shown as written
    return templates
