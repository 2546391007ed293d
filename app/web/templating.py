"""Jinja2 set-up for the pages: autoescaped templates and the filters they use.

The filters only format what a page's context holds (escape it, show a date, a size): none calls
into the core. A page whose text needs the core has it worked out before its template runs
(`app.web.diagnosis_view`), and an architecture test holds the filters to it.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from app.resources import resource_dir
from app.web.sizes import human_bytes

if TYPE_CHECKING:
    from app.core.models import Evidence

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


def when(value: datetime | None) -> str:
    """A moment as people read it (one from a log without its year is `diagnosis_view.log_time`'s)."""
    if value is None:
        return ""
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
    templates.env.filters["visible"] = visible
    templates.env.filters["title_text"] = title_text
    templates.env.filters["when"] = when
    templates.env.filters["bytes"] = human_bytes
    templates.env.filters["sentence"] = sentence
    templates.env.globals["reset_time"] = reset_time
    return templates
