"""Diagnose an excerpt of a log: lines picked out of a larger file, each with its original number.

A client that reads a large log locally (`app.core.selection.rules`) sends only some of its
lines. The excerpt is scanned like any log, then every line number the scan recorded
is mapped back to the original file, so the diagnosis, its evidence and the windows
around it speak of the lines the person has in front of them.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.core.engine.diagnose import assemble, scan_sources
from app.core.engine.file_scan import FileScan, LineHit
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis, ExcerptInfo, Line
from app.errors import EmptyLog, Invalid

MAX_TEXT = 1 << 20  # characters of one excerpt line (the browser keeps far less)


@dataclass(frozen=True)
class Excerpt:
    """Lines of a log (original number, text without the newline), in order, and the log's size."""

    lines: tuple[tuple[int, str], ...]
    total_lines: int
    total_bytes: int

    def check(self) -> None:
        """Raise `Invalid` unless the lines are numbered 1..total_lines, strictly increasing, one line each."""
        previous = 0
        for i, (no, text) in enumerate(self.lines):
            if no <= previous:
                raise Invalid(f"excerpt[{i}].line: line numbers must increase ({no} follows {previous})")
            if "\n" in text:
                raise Invalid(f"excerpt[{i}].text: one line per entry (line {no} holds a newline)")
            if len(text) > MAX_TEXT:
                raise Invalid(f"excerpt[{i}].text: longer than {MAX_TEXT} characters")
            previous = no
        if previous > self.total_lines:
            raise Invalid(f"total_lines: {self.total_lines} is less than the last line sent ({previous})")
        if self.total_bytes < 0:
            raise Invalid("total_bytes: must not be negative")

    def data(self) -> bytes:
        """The excerpt as log text: one line per entry."""
        return "".join(text + "\n" for _, text in self.lines).encode("utf-8", errors="replace")

    @property
    def numbers(self) -> tuple[int, ...]:
        return tuple(no for no, _ in self.lines)


def _line(line: Line, numbers: Sequence[int]) -> Line:
    return line.model_copy(update={"no": _map(line.no, numbers)})


def _map(no: int, numbers: Sequence[int]) -> int:
    return numbers[no - 1] if 0 < no <= len(numbers) else (numbers[-1] if numbers else no)


def remap_scan(scan: FileScan, excerpt: Excerpt) -> FileScan:
    """The scan of an excerpt, its line numbers and size those of the original log."""
    numbers = excerpt.numbers
    for hits in scan.hits.values():
        hits.first = [LineHit(_line(h.line, numbers), h.span, h.groups) for h in hits.first]
        hits.lines = [_map(n, numbers) for n in hits.lines]
        hits.last_line = _map(hits.last_line, numbers) if hits.last_line else 0
    return dataclasses.replace(
        scan,
        lines=excerpt.total_lines,
        bytes=excerpt.total_bytes,
        progress=[_map(n, numbers) for n in scan.progress],
        edge_lines=[_line(line, numbers) for line in scan.edge_lines],
    )


def diagnose_excerpt(
    excerpt: Excerpt, library: Library, *, top: int | None = None, name: str | None = None, **scan_options: Any
) -> Diagnosis:
    """Diagnose an excerpt; line numbers and sizes in the result are those of the original log.

    `scan_options` go to `scan_sources` as they do for a whole log.
    """
    excerpt.check()
    data = excerpt.data()
    (scan,) = scan_sources([(name, data)], library, **scan_options)
    if scan.blank:
        raise EmptyLog("the excerpt is empty: there is nothing to diagnose")
    diagnosis = assemble([remap_scan(scan, excerpt)], library, top=top)
    info = diagnosis.input.model_copy(update={"excerpt": ExcerptInfo(lines=len(excerpt.lines), bytes=len(data))})
    return diagnosis.model_copy(update={"input": info})


def excerpt_windows(excerpt: Excerpt, wanted: Sequence[tuple[int, int]]) -> list[list[tuple[int, str]]]:
    """The excerpt's lines inside each wanted span of original line numbers (empty spans left out)."""
    out: list[list[tuple[int, str]]] = []
    lines = excerpt.lines
    starts = [no for no, _ in lines]
    for start, end in wanted:
        i = bisect.bisect_left(starts, start)
        window = []
        while i < len(lines) and lines[i][0] <= end:
            window.append(lines[i])
            i += 1
        if window:
            out.append(window)
    return out
