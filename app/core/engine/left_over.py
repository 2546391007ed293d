"""What the ranked candidates leave over: the harmless signatures, the error lines no
signature explains, and, when no failure that starts a run was recognised (only echoes, or
nothing at all), the line most likely to have started the run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from app.core.engine.file_scan import FileScan
from app.core.engine.found import ROOT_RANK_FACT, Found
from app.core.knowledge.loading import Library
from app.core.models import (
    Candidate,
    Harmless,
    Unexplained,
    UnknownStart,
    entry_path,
)

MAX_UNEXPLAINED = 20


_NORMALISE = re.compile(r"0x[0-9a-fA-F]+|\d+")
# A raised exception as a traceback's last line prints it ("torch.OutOfMemoryError: ...",
# "ValueError", "KeyError: 'x'"), possibly after a forwarding prefix the reader left.
_RAISED = re.compile(r"^(?:\[[^\]]{1,40}\]:? ?)?(?:[A-Za-z_]\w{0,60}\.){0,6}[A-Z]\w{0,60}(?:Error|Exception)\b(?::|$)")


def unrecognised_start(
    candidates: Sequence[Candidate], lines: Sequence[Unexplained], *, finished: bool = False
) -> UnknownStart | None:
    """When no failure that starts a run was recognised: the error line most likely to have started it.

    When nothing at all was recognised, it is the first exception the log raised (its first
    error line when it raised none), unless the run finished (`finished`: a healthy run may log
    errors it survived). When only echoes were recognised, the launcher's "first observed
    failure" rank is the best guide; else the earliest unexplained error line before the first
    echo (a traceback's last line comes after its frames, so of one rank's lines the first error
    line is the start of its trouble).
    """
    if not lines or any(c.role == "initiating" for c in candidates):
        return None
    echoes = [c for c in candidates if c.episode == "terminal"]
    if not echoes:
        return None if candidates or finished else _unrecognised_error(lines)
    root = next(
        (c.facts[ROOT_RANK_FACT] for c in echoes if c.facts.get(ROOT_RANK_FACT, "").lstrip("-").isdigit()), None
    )
    if root is not None:
        on_rank = [u for u in lines if u.rank == int(root)]
        if on_rank:
            return _start(
                on_rank[0], f"the launcher names rank {root} as the first failure; this is its first error line"
            )
    first = min(echoes, key=lambda c: (c.file or "", c.line))
    before = [u for u in lines if (u.file or "") == (first.file or "") and u.line < first.line]
    if before:
        return _start(before[0], f"the first error line before the earliest echo ({first.id}, line {first.line})")
    return _start(lines[0], "the first error line no signature explains")


def _unrecognised_error(lines: Sequence[Unexplained]) -> UnknownStart:
    """Nothing recognised: the first exception raised (what a traceback ends on), else the first error line.

    The first, not the last: a later traceback is most often the handling of an earlier one.
    """
    raised = next((u for u in lines if _RAISED.match(u.text)), None)
    if raised is not None:
        return _start(raised, "nothing in the log is recognised; this is the first exception it raised")
    return _start(lines[0], "nothing in the log is recognised; this is its first error line")


def _start(u: Unexplained, why: str) -> UnknownStart:
    return UnknownStart(text=u.text, line=u.line, file=u.file, rank=u.rank, why=why)


def harmless(found: Iterable[Found]) -> list[Harmless]:
    """What benign signatures explain, in log order: shown as harmless, never as candidates."""
    out = []
    for f in sorted(found, key=lambda f: (f.position.file_index, f.position.line)):
        _, hit = f.first
        line = hit.line
        out.append(
            Harmless(
                id=f.sig.id,
                title=f.sig.title,
                summary=f.sig.summary,
                line=line.no,
                file=line.file,
                rank=line.rank,
                time=line.time,
                count=f.count,
                text=line.text[line.content_start :].strip()[:500],
                path=entry_path(f.sig.id),
            )
        )
    return out


def unexplained(library: Library, scans: Iterable[FileScan], fired: Iterable[str]) -> list[Unexplained]:
    """Generic error lines that no signature found in the log explains, deduplicated.

    A line is explained by a fingerprint or symptom of a signature that fired; a pattern of
    one that did not (an exclude, a companion, a lone symptom) explains nothing to the reader.
    """
    error_ids = library.kinds["error"]
    names = set(fired)

    def explains(i: int) -> bool:
        return any(r.signature in names and r.kind in ("fingerprint", "symptom") for r in library.rules[i])

    groups: dict[str, Unexplained] = {}
    for scan in scans:
        explained = {n for i, h in scan.hits.items() if explains(i) for n in h.lines}
        seen_lines: set[int] = set()
        for idx in error_ids:
            hits = scan.hits.get(idx)
            for hit in hits.first if hits else ():
                line = hit.line
                if line.no in explained or line.no in seen_lines:
                    continue
                seen_lines.add(line.no)
                text = line.text[line.content_start :].strip()
                if not text:
                    continue  # the error marker was only in its prefix ("ERROR 08-19 ... [core.py:708]" alone)
                key = _NORMALISE.sub("#", text)[:300]
                prior = groups.get(key)
                if prior is None:
                    groups[key] = Unexplained(text=text[:500], count=1, line=line.no, file=line.file, rank=line.rank)
                else:
                    groups[key] = prior.model_copy(update={"count": prior.count + 1})
    return sorted(groups.values(), key=lambda u: (u.file or "", u.line))[:MAX_UNEXPLAINED]
