"""The corpus's public-thread logs indexed as neighbours (`neighbours.json` beside the library).

Each log is indexed by the lines a scan of it keeps, the same lines a new log is compared by
when nothing in it is recognised (`app.core.engine.lead`). Only logs from public threads are
indexed: a lead names the threads that voted, so a reader can go and compare.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from app.core import Library
from app.core.engine import indexed_text
from app.core.knowledge import NeighbourIndex, Ratio, Report
from app.evaluation.corpus import Case


def kept_text(logs: Sequence[tuple[str, bytes]], library: Library) -> str:
    """The lines a scan of a case's logs keeps, as the engine reads them."""
    return indexed_text([(name if len(logs) > 1 else None, data) for name, data in logs], library)


def corpus_neighbours(cases: Sequence[Case], library: Library) -> NeighbourIndex:
    """The index of every failure log from a public thread (a healthy run names no failure)."""
    docs = [
        (case.id, case.spec.source, case.spec.expected, kept_text(case.read(), library))
        for case in cases
        if case.spec.expected != "none" and case.spec.source.startswith(("https://", "http://"))
    ]
    return NeighbourIndex.build(docs)


def write_neighbours(path: Path, index: NeighbourIndex) -> None:
    text = json.dumps(index.to_json(), separators=(",", ":"), sort_keys=False) + "\n"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def lead_lines(report: Report) -> list[str]:
    """How many failures got a lead rather than a signature's match, and how often it was right."""
    if not report.leads.total and not report.healthy_leads.hits:
        return []
    return [
        f"  first answer a lead (no signature recognised the log; the failure of the most similar"
        f" other threads' logs): {report.leads.total}, right {report.leads}",
        f"  healthy runs given a lead (possible, never likely): {report.healthy_leads}",
    ]


def leads_note(leads: Ratio) -> str:
    """How many of the first answers were leads, and how many of those were right."""
    return f"  (first answer a lead: {leads.total}, right {leads.hits})" if leads.total else ""
