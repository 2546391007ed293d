"""A found signature made into the `Candidate` a report shows: its evidence as highlighted, its
facts, the rank it happened on, and the advice that fits the log."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from app.core.engine.advice import Setting, fix_steps, verify_parts
from app.core.engine.fill import fill
from app.core.engine.found import Found
from app.core.knowledge.schema import Signature
from app.core.models import LIKELY, Candidate, Episode, Evidence, Line, Role, entry_path
from app.core.times import began

# What a pattern consumes to find where the words it looks for start: the end of a prefix
# ("] "), a separator (": "), a tag's close ("<stderr>:"). The reader is not shown them as matched.
_LEADING = frozenset(" \t:]>|")


def _shown(text: str, span: tuple[int, int]) -> tuple[int, int]:
    """A match's span as the reader sees it highlighted: without the separators it begins with."""
    start, end = span
    while start < end - 1 and start < len(text) and text[start] in _LEADING:
        start += 1
    return start, end


def began_at_earliest(f: Found) -> datetime | None:
    """When a failure's operation began, from the durations its lines print (the earliest)."""
    return min((b for h, _, _ in f.evidence if (b := began(h.line.time, h.groups)) is not None), default=None)


def candidate_of(
    f: Found,
    role: Role,
    cause: str | None,
    why: str,
    episode: Episode,
    stated: int | None = None,
    setting: Setting | None = None,
) -> Candidate:
    """The candidate of a found signature in its role (`stated`: the rank a launcher names when the
    lines name none; `setting`: the log's facts that choose the fix steps)."""
    scan, hit = f.first
    sig = f.sig
    own = f.rank
    rank = own if own is not None else stated  # else a launcher's Root Cause rank
    facts = f.facts if rank is None or "rank" in f.facts else {**f.facts, "rank": str(rank)}
    why = "; ".join([why, *f.notes])
    verify, command, explain = verify_parts(sig, facts)
    return Candidate(
        id=sig.id,
        title=sig.title,
        layer=sig.layer,
        severity=sig.severity,
        confidence=f.confidence,
        # A failure the run went on after did not end it: at most possible, whatever its match.
        band="likely" if f.confidence >= LIKELY and episode == "terminal" else "possible",
        role=role,
        episode=episode,
        caused_by=cause,
        why=why,
        line=hit.line.no,
        file=scan.name,
        rank=rank,
        time=hit.line.time,
        began=began_at_earliest(f),
        ranks=sorted(f.ranks) or ([rank] if rank is not None else []),
        count=f.count,
        evidence=[
            Evidence(
                line=h.line.no,
                file=h.line.file,
                rank=h.line.rank,
                time=h.line.time,
                text=h.line.text,
                span=_shown(h.line.text, h.span),
                pattern=p.name,
                kind=kind,
            )
            for h, p, kind in f.evidence
        ],
        facts=facts,
        versions=f.versions,
        summary=sig.summary,
        fix=fix_steps(sig, facts, setting),
        verify=verify,
        verify_command=command,
        verify_explain=explain,
        resume=fill(sig.resume, facts),
        path=entry_path(sig.id),
    )


def one_line_candidate(
    sig: Signature,
    line: Line,
    span: tuple[int, int],
    *,
    confidence: float,
    why: str,
    pattern: str,
    kind: Literal["fingerprint", "context"],
    setting: Setting | None = None,
    basis: Literal["signature", "neighbours"] = "signature",
    file: str | None = None,
) -> Candidate:
    """A possible initiating failure that one line shows (a stall, a lead), with the entry's own advice."""
    start, end = span
    while start < end - 1 and (line.text[start].isspace() or line.text[start] in _LEADING):
        start += 1  # a highlight begins on the words, not on a quote marker or a separator
    end = len(line.text[:end].rstrip()) or end
    verify, command, explain = verify_parts(sig, {})
    return Candidate(
        id=sig.id,
        title=sig.title,
        layer=sig.layer,
        severity=sig.severity,
        confidence=confidence,
        band="possible",
        role="initiating",
        basis=basis,
        why=why,
        line=line.no,
        file=file if file is not None else line.file,
        rank=line.rank,
        time=line.time,
        ranks=[line.rank] if line.rank is not None else [],
        count=1,
        evidence=[
            Evidence(
                line=line.no,
                file=line.file,
                rank=line.rank,
                time=line.time,
                text=line.text,
                span=(start, end),
                pattern=pattern,
                kind=kind,
            )
        ],
        summary=sig.summary,
        fix=fix_steps(sig, {}, setting),
        verify=verify,
        verify_command=command,
        verify_explain=explain,
        resume=fill(sig.resume, {}),
        path=entry_path(sig.id),
    )
