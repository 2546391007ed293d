"""Why a signature did or did not fire on a log: for signature authors (`tracelore explain`).

Runs the same scan and ranker as `diagnose()` and reports, for one signature, which of
its patterns hit on which lines, which hits did not count (companion missing, vetoed by an
exclude, not emitted at the start of a line) and what the ranker made of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from app.core.engine.advice import setting_of
from app.core.engine.diagnose import Progress, scan_sources
from app.core.engine.environment import on_one_node, read_environment, versions_of
from app.core.engine.file_scan import FileScan
from app.core.engine.ranker import _Judge, find_signatures, rank_found
from app.core.engine.reader import Source
from app.core.knowledge.loading import Library
from app.core.models import Candidate
from app.errors import NotFound

SHOWN_HITS = 5  # hits listed per pattern and file


@dataclass
class Hit:
    file: str | None
    line: int
    text: str
    span: tuple[int, int]
    rejected: str | None = None  # why this hit does not count, or None when it does


@dataclass
class PatternReport:
    """What one pattern of the signature found."""

    kind: str  # fingerprint, symptom, near, exclude
    name: str
    regex: str
    weight: float | None = None
    count: int = 0  # matching lines (a lower bound for very frequent patterns)
    hits: list[Hit] = field(default_factory=list)
    note: str | None = None  # e.g. the reason of an exclude, the pattern a companion belongs to


@dataclass
class Explanation:
    """The whole story of one signature on one log."""

    id: str
    title: str
    fired: bool
    verdict: str
    patterns: list[PatternReport]
    candidate: Candidate | None
    initiating: Candidate | None  # what the ranker chose to have started the failure
    lines: int
    files: list[str]


def explain(
    sources: Sequence[tuple[str | None, Source]],
    library: Library,
    signature_id: str,
    *,
    progress: Progress | None = None,
) -> Explanation:
    """Explain what one signature made of the logs of one job (`progress`: as `scan_sources`)."""
    sig = library.signatures.get(signature_id)
    if sig is None:
        close = sorted(i for i in library.signatures if signature_id.split(".")[-1] in i)[:5]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise NotFound(f"no signature {signature_id!r} in the library{hint}")
    scans = scan_sources(sources, library, progress=progress)
    environment = read_environment(library, scans)
    found, rejected = find_signatures(library, scans, versions_of(environment))
    candidates = rank_found(found, scans, one_node=on_one_node(environment, scans), setting=setting_of(environment))
    candidate = next((c for c in candidates if c.id == sig.id), None)
    initiating = next((c for c in candidates if c.role == "initiating"), None)

    reports: list[PatternReport] = []
    for kind, patterns in (("fingerprint", sig.fingerprints), ("symptom", sig.symptoms)):
        for p in patterns:
            report = PatternReport(kind, p.name, p.regex, p.weight)
            for scan in scans:
                judge = _Judge(library, scan)
                ph = scan.hits.get(library.index[p.regex])
                if ph is None:
                    continue
                report.count += ph.count
                for hit in ph.first[:SHOWN_HITS]:
                    why = judge.valid(sig, p, hit)
                    report.hits.append(Hit(scan.name, hit.line.no, hit.line.text, hit.span, why))
            reports.append(report)
            for i, companion in enumerate(p.near):
                reports.append(
                    _plain(scans, library, "near", f"{p.name}.near[{i}]", companion, f"needed near {p.name}")
                )
    for i, ex in enumerate(sig.excludes):
        reports.append(_plain(scans, library, "exclude", f"excludes[{i}]", ex.regex, ex.reason))

    fingerprint_hits = [r for r in reports if r.kind == "fingerprint" and r.count]
    if candidate is not None:
        verdict = _decision(candidate)
    elif not fingerprint_hits:
        symptoms = [r.name for r in reports if r.kind == "symptom" and r.count]
        verdict = "did not fire: no fingerprint matched any line" + (
            f" (symptoms {', '.join(symptoms)} matched, but symptoms only raise confidence)" if symptoms else ""
        )
    else:
        reasons = rejected.get(sig.id, [])
        verdict = "did not fire: every fingerprint hit was rejected" + (f" ({reasons[0]})" if reasons else "")
    return Explanation(
        id=sig.id,
        title=sig.title,
        fired=candidate is not None,
        verdict=verdict,
        patterns=reports,
        candidate=candidate,
        initiating=initiating,
        lines=sum(s.lines for s in scans),
        files=[s.name for s in scans if s.name],
    )


def _plain(scans: Sequence[FileScan], library: Library, kind: str, name: str, regex: str, note: str) -> PatternReport:
    report = PatternReport(kind, name, regex, note=note)
    idx = library.index.get(regex)
    for scan in scans:
        ph = scan.hits.get(idx) if idx is not None else None
        if ph is None:
            continue
        report.count += ph.count
        report.hits += [Hit(scan.name, n, "", (0, 0)) for n in ph.lines[:SHOWN_HITS]]
    return report


def _decision(c: Candidate) -> str:
    where = f"line {c.line}" + (f" of {c.file}" if c.file else "")
    role = "earlier trouble (the run went on after it)" if c.episode == "earlier" else c.role
    caused = f", an echo of {c.caused_by}" if c.caused_by else ""
    return f"fired at {where}: {role}{caused}, {c.band} (confidence {c.confidence:.2f}); {c.why}"


def render_explanation(e: Explanation) -> str:
    """The explanation as terminal text."""
    several = len(e.files) > 1
    out = [f"{e.id} ({e.title}) on {e.lines:,} lines: {e.verdict}", ""]
    for r in e.patterns:
        weight = f", weight {r.weight}" if r.weight is not None else ""
        counted = sum(1 for h in r.hits if h.rejected is None)
        status = "no hit" if not r.count else f"{r.count} line{'s' if r.count != 1 else ''}"
        out.append(f"{r.kind} {r.name}{weight}: {status}" + (f"  ({r.note})" if r.note else ""))
        out.append(f"    /{r.regex}/")
        for h in r.hits:
            where = f"{h.file}:{h.line}" if several and h.file else f"line {h.line}"
            if h.text:
                start, end = h.span
                shown = f"{h.text[:start]}»{h.text[start:end]}«{h.text[end:]}" if end > start else h.text
                out.append(f"    {where} | {shown[:300]}")
            else:
                out.append(f"    {where}")
            if h.rejected:
                out.append(f"        does not count: {h.rejected}")
        if r.kind in ("fingerprint", "symptom") and r.hits and not counted:
            out.append("    (no hit of this pattern counts)")
    out.append("")
    if e.initiating is not None and (e.candidate is None or e.candidate.id != e.initiating.id):
        out.append(f"The ranker chose {e.initiating.id} (line {e.initiating.line}) as the initiating failure.")
    elif e.initiating is None:
        out.append("The ranker found no initiating failure in this log.")
    return "\n".join(out).rstrip("\n") + "\n"
