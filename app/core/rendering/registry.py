"""Every report format of a diagnosis by name: one registry for the CLI's --format and --report.

Each renderer imports its module when it runs, so a command pays only for the format it prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from app.core.models import Diagnosis


@dataclass(frozen=True, slots=True)
class Links:
    """Where a report's links point: the service's address, the stored diagnosis, the tool's version."""

    base_url: str = ""
    permalink: str | None = None
    tool_version: str = ""


def _text(d: Diagnosis, links: Links) -> str:
    from app.core.rendering.text import render_text

    text = render_text(d, base_url=links.base_url)
    return text + (f"Full diagnosis: {links.permalink}\n" if links.permalink else "")


def _json(d: Diagnosis, _links: Links) -> str:
    return d.model_dump_json(indent=2) + "\n"


def _markdown(d: Diagnosis, links: Links) -> str:
    from app.core.rendering.text import render_markdown

    return render_markdown(d, permalink=links.permalink, base_url=links.base_url)


def _sarif(d: Diagnosis, links: Links) -> str:
    from app.core.rendering.ci import render_sarif

    report = render_sarif(d, tool_version=links.tool_version, base_url=links.base_url, permalink=links.permalink)
    return json.dumps(report, indent=2) + "\n"


def _junit(d: Diagnosis, links: Links) -> str:
    from app.core.rendering.ci import render_junit

    return render_junit(d, base_url=links.base_url, permalink=links.permalink)


def _github(d: Diagnosis, links: Links) -> str:
    from app.core.rendering.ci import render_github

    return render_github(d, base_url=links.base_url, permalink=links.permalink)


REPORTS: dict[str, Callable[[Diagnosis, Links], str]] = {
    "text": _text,
    "json": _json,
    "markdown": _markdown,
    "sarif": _sarif,
    "junit": _junit,
    "github": _github,
}
FORMATS = tuple(REPORTS)


def render_report(d: Diagnosis, fmt: str, links: Links = Links()) -> str:
    """The report of a diagnosis in format `fmt` (one of FORMATS)."""
    return REPORTS[fmt](d, links)
