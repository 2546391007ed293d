"""Jinja2 set-up for the pages: autoescaped templates and the filters they use."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from app.core.models import Evidence
from app.web.upload import human_bytes

TEMPLATES = Path(__file__).resolve().parent.parent.parent / "templates"


def highlight(evidence: Evidence) -> Markup:
    """The evidence text with the matched span in <mark>."""
    text = evidence.text
    start, end = evidence.span
    start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
    if end <= start:
        return Markup(escape(text))
    return Markup(f"{escape(text[:start])}<mark>{escape(text[start:end])}</mark>{escape(text[end:])}")


def when(value: datetime | None) -> str:
    """A log timestamp as people read it."""
    if value is None:
        return ""
    return value.strftime("%Y-%m-%d %H:%M:%S") + (
        " UTC" if value.utcoffset() is not None and not value.utcoffset() else ""
    )


def make_templates() -> Jinja2Templates:
    """The page templates with Tracelore's filters."""
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.filters["highlight"] = highlight
    templates.env.filters["when"] = when
    templates.env.filters["bytes"] = human_bytes
    return templates
