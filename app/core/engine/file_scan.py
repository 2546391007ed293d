"""What the matcher's pass found in one file: per pattern, its hits and the lines they are on."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.models import Line


@dataclass(slots=True)
class LineHit:
    """One line on which a pattern matched."""

    line: Line
    span: tuple[int, int]
    groups: dict[str, str]


@dataclass(slots=True)
class PatternHits:
    """Where one pattern matched in one file."""

    count: int = 0  # matching lines; a lower bound once saturated
    first: list[LineHit] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    last_line: int = 0
    saturated: bool = False  # so frequent that only its last line per chunk is tracked
    located: int = 0  # lines read to record it: the work it cost, bounded once saturated


@dataclass(slots=True)
class FileScan:
    """What the pass found in one file."""

    name: str | None
    index: int
    bytes: int = 0
    lines: int = 0
    hits: dict[int, PatternHits] = field(default_factory=dict)
    progress: list[int] = field(default_factory=list)  # last progress line numbers
    edge_lines: list[Line] = field(default_factory=list)  # head and tail, for the time span
    blank: bool = True  # nothing but white space so far
