"""Indirect evidence: fingerprints marked as clues (a frame, an exception type under a known
operation, a warning that names the cause) and what a candidate found only by them says.

Such a candidate is a lead, never a verdict: it stays `possible` and names the lines that
made it, the clue and the companion lines (frames, the operation) that let it count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.core.engine.file_scan import FileScan, LineHit
from app.core.knowledge.schema import Pattern
from app.core.models import LIKELY, Line

CLUE_CAP = round(LIKELY - 0.01, 2)  # the most a candidate found only by clues can be: possible
_CLUE_WORDS = {
    "frame": "the traceback's frames",
    "type": "the exception's type and where it was raised",
    "warning": "a warning printed before the error",
}


def clue_note(
    clues: Sequence[tuple[FileScan, LineHit, Pattern]], context: Sequence[tuple[FileScan, LineHit, Pattern, str]]
) -> str:
    """Why a candidate found only by clues was offered, naming the lines that made it."""
    parts = []
    for _, hit, pattern in sorted(clues, key=lambda c: (c[0].index, c[1].line.no)):
        lines = sorted({hit.line.no, *(h.line.no for _, h, p, _ in context if p is pattern)})
        where = f"line {lines[0]}" if len(lines) == 1 else "lines " + ", ".join(map(str, lines))
        said = f": {pattern.means}" if pattern.means else ""
        parts.append(f"{_CLUE_WORDS[pattern.clue or 'frame']} ({where}){said}")
    return "offered from " + "; ".join(parts) + " (no message names this failure outright: possible, confirm it)"


def unique_context(
    context: Sequence[tuple[FileScan, LineHit, Pattern, str]],
    hits: Sequence[tuple[FileScan, LineHit, Pattern, str]],
    most: int,
) -> list[tuple[FileScan, LineHit, Pattern, str]]:
    """Context lines not already shown as evidence, each once."""
    shown = {(id(h[0]), h[1].line.no) for h in hits}
    out: dict[tuple[int, int], tuple[FileScan, LineHit, Pattern, str]] = {}
    for c in context:
        key = (id(c[0]), c[1].line.no)
        if key not in shown:
            out.setdefault(key, c)
    return sorted(out.values(), key=lambda h: (h[0].index, h[1].line.no))[:most]


def rewrap_notes(lines: Iterable[Line]) -> list[str]:
    """What the reader did to a message a console had hard-wrapped, so that it matched."""
    wrapped = sorted({(line.no, line.rewrapped) for line in lines if line.rewrapped})
    if not wrapped:
        return []
    width = wrapped[0][1]
    where = ", ".join(str(no) for no, _ in wrapped[:5])
    return [f"read rejoined: the console had wrapped the message of line {where} at {width} columns"]
