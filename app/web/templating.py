"""Jinja2 set-up for the pages: autoescaped templates and the filters they use."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from app.core.engine.advice import written
from app.core.engine.fill import template
from app.core.models import Candidate, Evidence
from app.core.rendering.text import merged_spans
from app.core.times import Yearless, comparable, span
from app.resources import resource_dir
from app.web.upload import human_bytes

TEMPLATES = resource_dir("templates")


# Characters that change how text around them reads without showing themselves: bidi overrides
# and isolates (U+202E turns `exe.txt` into `txt.exe`), zero-width and format characters
# (U+200B, U+FEFF), control characters, line and paragraph separators.
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"}


def _shown(ch: str) -> str:
    point = ord(ch)
    name = unicodedata.name(ch, "").lower() or "control or unassigned character"
    shown = f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"
    return f'<span class="esc" title="U+{point:04X} {escape(name)}">{shown}</span>'


def visible(text: str) -> Markup:
    """Text escaped for HTML, every invisible or reordering character shown as a `\\uXXXX` escape."""
    if text.replace("\t", " ").isprintable():  # nearly every log line: no character to show
        return Markup(escape(text))
    out = []
    for ch in text:
        if ch != "\t" and unicodedata.category(ch) in _HIDDEN:
            out.append(_shown(ch))
        else:
            out.append(str(escape(ch)))
    return Markup("".join(out))


def title_text(text: str) -> str:
    """Text for a place that holds no markup (a page's `<title>`): one line, every invisible or
    reordering character written as a `\\uXXXX` escape.

    A right-to-left override from a search query would otherwise reorder the tab's title and the
    browser's history entry.
    """
    text = " ".join(text.split())  # line breaks and tabs: the title is one line
    if text.isprintable():
        return text
    return "".join(
        (f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        if unicodedata.category(ch) in _HIDDEN
        else ch
        for ch in text
    )


def highlight(evidence: Evidence) -> Markup:
    """The evidence text with the matched span in <mark>."""
    text = evidence.text
    start, end = evidence.span
    start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
    if end <= start:
        return visible(text)
    return Markup(f"{visible(text[:start])}<mark>{visible(text[start:end])}</mark>{visible(text[end:])}")


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
    out, pos = [], 0
    for start, end in merged_spans(text, spans):
        out.append(f"{visible(text[pos:start])}<mark>{visible(text[start:end])}</mark>")
        pos = end
    out.append(str(visible(text[pos:])))
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


def began_gap(c: Candidate) -> str:
    """How long before its line a failure began ("10 min"), when both times can be compared."""
    if c.began is None or c.time is None or not comparable(c.began, c.time):
        return ""
    return span((c.time - c.began).total_seconds())


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


def condition(when: Mapping[str, Sequence[str]]) -> str:
    """A fix step's condition as the encyclopedia writes it: 'If the job runs under Slurm'."""
    said = written(when)
    return said[0].upper() + said[1:]


def make_templates() -> Jinja2Templates:
    """The page templates with Tracelore's filters."""
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.filters["highlight"] = highlight
    templates.env.filters["by_line"] = by_line
    templates.env.filters["marked"] = marked
    templates.env.filters["visible"] = visible
    templates.env.filters["title_text"] = title_text
    templates.env.filters["when"] = when
    templates.env.filters["began_gap"] = began_gap
    templates.env.filters["bytes"] = human_bytes
    templates.env.filters["sentence"] = sentence
    templates.env.globals["reset_time"] = reset_time
    templates.env.filters["template"] = template  # a fix text's optional parts shown as written
    templates.env.filters["condition"] = condition  # a fix step's `when`, written out
    return templates
