"""Renderings of a diagnosis: terminal text, Markdown, CI formats, and the registry of them.

Its face: the formats and their rendering, the terminal text and its highlighted spans, and
the verdict's sentences (`verdict_line` is the module's `verdict()`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.faces import Home, lazy_names

if TYPE_CHECKING:
    from app.core.rendering.registry import FORMATS as FORMATS
    from app.core.rendering.registry import Links as Links
    from app.core.rendering.registry import render_report as render_report
    from app.core.rendering.text import merged_spans as merged_spans
    from app.core.rendering.text import render_text as render_text
    from app.core.rendering.verdict import quiet_heading as quiet_heading
    from app.core.rendering.verdict import trust as trust
    from app.core.rendering.verdict import verdict as verdict_line

HOMES: dict[str, Home] = {
    "FORMATS": "app.core.rendering.registry",
    "Links": "app.core.rendering.registry",
    "render_report": "app.core.rendering.registry",
    "merged_spans": "app.core.rendering.text",
    "render_text": "app.core.rendering.text",
    "quiet_heading": "app.core.rendering.verdict",
    "trust": "app.core.rendering.verdict",
    "verdict_line": ("app.core.rendering.verdict", "verdict"),
}
__all__ = ["FORMATS", "Links", "merged_spans", "quiet_heading", "render_report", "render_text", "trust", "verdict_line"]
if not TYPE_CHECKING:  # type checkers read the imports above, and so find a misspelt name
    __getattr__ = lazy_names(__name__, HOMES)
