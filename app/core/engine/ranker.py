"""Turn pattern hits into ranked candidates: what started it, what only echoes it.

Rules (DESIGN.md, "Ranking"):

* confidence is a noisy-or of the weights of the distinct patterns that matched;
* a failure the run survived (much training progress after it) is earlier trouble;
* in the terminal episode, a failure whose `consequence_of` names one seen before it,
  or whose role is `collateral`, is collateral; the earliest remaining root failure
  initiates, unless a launcher summary names the rank that failed first;
* error lines no signature explains are reported as unexplained (app/core/engine/left_over.py,
  with the harmless signatures and the likely start when only echoes were recognised).
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Mapping, Sequence

from app.core.engine.advice import Setting
from app.core.engine.candidate import began_at_earliest, candidate_of
from app.core.engine.clues import CLUE_CAP, clue_note, rewrap_notes, unique_context
from app.core.engine.environment import judge_versions
from app.core.engine.file_scan import FileScan, LineHit, PatternHits
from app.core.engine.found import (
    AGENT_LOCAL_RANK_FACT,
    ROOT_RANK_FACT,
    Found,
    hit_rank,
    stalled_rank_of,
    stated_rank,
)
from app.core.knowledge.loading import Library
from app.core.knowledge.schema import Pattern, Signature
from app.core.models import (
    LIKELY,
    Candidate,
    EnvFact,
    Role,
)
from app.core.times import comparable

SURVIVED_PROGRESS = 10  # progress lines after a failure that mean the run went on
QUIET_PROGRESS = 3  # fewer suffice when nothing else fails after it (a retry that recovered)
MAX_EVIDENCE = 8


def _near(lines: Sequence[int], anchor: int, before: int, after: int) -> bool:
    """Whether a line is within the window; `lines` ascend (a scan records them in line order),
    so a binary search: a companion can have thousands of lines and be asked for each hit."""
    i = bisect.bisect_left(lines, anchor - before)
    return i < len(lines) and lines[i] <= anchor + after


class _Judge:
    """Decides which hits of a signature count (emitted, near, excludes)."""

    def __init__(self, library: Library, scan: FileScan) -> None:
        self.library = library
        self.scan = scan

    def lines_of(self, pattern: str) -> list[int] | None:
        """Lines where a companion pattern matched; None when too frequent to have kept them all."""
        idx = self.library.index.get(pattern)
        hits = self.scan.hits.get(idx) if idx is not None else None
        if hits is None:
            return []
        return None if hits.saturated else hits.lines

    def valid(self, sig: Signature, pattern: Pattern, hit: LineHit) -> str | None:
        """Why a hit does not count, or None when it does."""
        emitted = (pattern.source or sig.source) == "emitted"
        # Indentation is not content: a paste often indents a line (a markdown list, a UI's copy).
        start = hit.line.content_start
        if emitted and hit.span[0] > start and hit.line.text[start : hit.span[0]].strip():
            return f"{pattern.name}: not at the start of the line's content (source: emitted)"
        window = pattern.window or sig.window
        no = hit.line.no
        # A companion too frequent to track is taken as present, an exclude as absent:
        # noise must not veto a real hit.
        for companion in pattern.near:
            lines = self.lines_of(companion)
            if lines is not None and not _near(lines, no, window.before, window.after):
                return f"{pattern.name}: companion {companion!r} not within the window"
        for ex in sig.excludes:
            lines = self.lines_of(ex.regex)
            if lines is not None and _near(lines, no, sig.window.before, sig.window.after):
                return f"{pattern.name}: vetoed by exclude {ex.regex!r} ({ex.reason})"
        return None

    def context(self, sig: Signature, pattern: Pattern, hit: LineHit) -> list[LineHit]:
        """The companion lines that made a clue count: the nearest line of each within the window."""
        window = pattern.window or sig.window
        no = hit.line.no
        found = []
        for companion in pattern.near:
            idx = self.library.index.get(companion)
            hits = self.scan.hits.get(idx) if idx is not None else None
            inside = [h for h in hits.first if no - window.before <= h.line.no <= no + window.after] if hits else []
            if inside:
                found.append(min(inside, key=lambda h: abs(h.line.no - no)))
        return found


def find_signatures(
    library: Library, scans: Sequence[FileScan], versions: Mapping[str, EnvFact]
) -> tuple[list[Found], dict[str, list[str]]]:
    """Every signature with at least one valid fingerprint hit; also why others did not count."""
    found: list[Found] = []
    rejected: dict[str, list[str]] = {}
    users = library.matched_by
    seen = {sig_id for scan in scans for index in scan.hits for sig_id in users[index]}
    # By id, not by value: a signature of the parse cache is rebuilt when first read.
    for sig in (library.signatures[sig_id] for sig_id in library.signatures if sig_id in seen):
        matched: dict[str, float] = {}
        hits: list[tuple[FileScan, LineHit, Pattern, str]] = []
        clues: list[tuple[FileScan, LineHit, Pattern]] = []
        context: list[tuple[FileScan, LineHit, Pattern, str]] = []
        last_line: dict[int, int] = {}
        count = 0
        reasons: list[str] = []
        for scan in scans:
            judge = _Judge(library, scan)
            for kind, patterns in (("fingerprint", sig.fingerprints), ("symptom", sig.symptoms)):
                for pattern in patterns:
                    ph: PatternHits | None = scan.hits.get(library.index[pattern.regex])
                    if ph is None:
                        continue
                    valid = []
                    for hit in ph.first:
                        why = judge.valid(sig, pattern, hit)
                        if why:
                            reasons.append(why)
                        else:
                            valid.append(hit)
                            hits.append((scan, hit, pattern, kind))
                    if not valid:
                        continue
                    if pattern.clue is not None and kind == "fingerprint":
                        clues.append((scan, valid[0], pattern))
                        context += [(scan, c, pattern, "context") for c in judge.context(sig, pattern, valid[0])]
                    matched[pattern.name] = pattern.weight
                    if kind == "fingerprint":
                        # Hits past the kept ones were not judged; trust them only if all kept ones passed.
                        every = len(valid) == len(ph.first)
                        count = max(count, ph.count if every else len(valid))
                        last = ph.last_line if every else valid[-1].line.no
                        last_line[scan.index] = max(last_line.get(scan.index, 0), last)
        fingerprints = [h for h in hits if h[3] == "fingerprint"]
        if not fingerprints:
            if reasons:
                rejected[sig.id] = reasons
            continue
        confidence = 1 - math.prod(1 - w for w in matched.values())
        factor, notes, version_texts = judge_versions(sig, versions, several=len(scans) > 1)
        confidence *= factor
        notes += rewrap_notes(h[1].line for h in fingerprints)
        if all(h[2].clue is not None for h in fingerprints):
            # Only indirect evidence: a lead worth checking, never a verdict on its own.
            confidence = min(confidence, CLUE_CAP)
            notes = [clue_note(clues, context), *notes]
        fingerprints.sort(key=lambda h: (h[0].index, h[1].line.no))
        first_scan, first_hit = fingerprints[0][0], fingerprints[0][1]
        evidence = sorted(
            _pick_evidence(hits) + unique_context(context, hits, MAX_EVIDENCE), key=lambda h: (h[0].index, h[1].line.no)
        )
        facts: dict[str, str] = {}
        for _, hit, _, _ in sorted(hits, key=lambda h: (h[3] != "fingerprint", h[0].index, h[1].line.no)):
            for key, value in hit.groups.items():
                facts.setdefault(key, value.strip())
        ranks = {r for h in fingerprints if (r := hit_rank(h[1])) is not None}
        named = stalled_rank_of(h[1] for h in hits)
        if named is not None:
            ranks = {named}  # the printer (the coordinator) reports it; the failure is on that rank
        if (first_rank := named if named is not None else hit_rank(first_hit)) is not None:
            facts["rank"] = str(first_rank)
        found.append(
            Found(
                sig=sig,
                confidence=round(min(confidence, 0.99), 3),
                first=(first_scan, first_hit),
                last_line=last_line,
                count=count,
                evidence=[(h, p, k) for _, h, p, k in evidence],
                facts=facts,
                ranks=ranks,
                notes=notes,
                versions=version_texts,
                named_rank=named,
            )
        )
    return found, rejected


def _pick_evidence(
    hits: list[tuple[FileScan, LineHit, Pattern, str]],
) -> list[tuple[FileScan, LineHit, Pattern, str]]:
    """The first hit of each pattern, then the first hit on each other rank, in log order."""
    chosen: list[tuple[FileScan, LineHit, Pattern, str]] = []
    seen_patterns: set[str] = set()
    seen_ranks: set[int | None] = set()
    ordered = sorted(hits, key=lambda h: (h[0].index, h[1].line.no))
    for h in ordered:
        if h[2].name not in seen_patterns:
            seen_patterns.add(h[2].name)
            seen_ranks.add(h[1].line.rank)
            chosen.append(h)
    for h in ordered:
        if len(chosen) >= MAX_EVIDENCE:
            break
        if h[1].line.rank not in seen_ranks and h[3] == "fingerprint":
            seen_ranks.add(h[1].line.rank)
            chosen.append(h)
    unique = {(id(h[0]), h[1].line.no, h[2].name): h for h in chosen[:MAX_EVIDENCE]}
    return sorted(unique.values(), key=lambda h: (h[0].index, h[1].line.no))


def _followed(f: Found, found: Sequence[Found]) -> bool:
    """Whether another failure is recorded after this one's last line in one of its files."""
    return any(g is not f and g.last_line.get(index, -1) > last for g in found for index, last in f.last_line.items())


def _survived(f: Found, scans: Sequence[FileScan]) -> int:
    """Progress lines after the failure's last hit (0 if the run did not go on)."""
    best = 0
    for scan in scans:
        last = f.last_line.get(scan.index)
        if last is not None:
            best = max(best, sum(1 for n in scan.progress if n > last))
    return best


def rank_found(
    found: list[Found], scans: Sequence[FileScan], *, one_node: bool = False, setting: Setting | None = None
) -> list[Candidate]:
    """Give each found signature its role and order them best first (`one_node`: the job ran on one
    node, so the local rank torchrun's agent names as the first failed worker is its global rank;
    `setting`: the log's facts that choose the fix steps, see `advice`)."""
    terminal: list[Found] = []
    earlier: list[tuple[Found, int]] = []
    for f in found:
        progress = _survived(f, scans)
        went_on = progress >= SURVIVED_PROGRESS or (progress >= QUIET_PROGRESS and not _followed(f, found))
        (earlier.append((f, progress)) if went_on else terminal.append(f))
    terminal.sort(key=functools.cmp_to_key(_compare))

    roles: dict[str, tuple[Role, str | None, str]] = {}
    for f in terminal:
        source = next((p for p in terminal if _is_cause(p, f, roles)), None)
        if source is not None:
            roles[f.sig.id] = (
                "collateral",
                source.sig.id,
                f"comes with {source.sig.title} (line {source.position.line}); it is usually an echo of that failure",
            )
        elif f.sig.role == "collateral":
            roles[f.sig.id] = ("collateral", None, "a report of a failure, not a cause of its own")

    roots = [f for f in terminal if f.sig.id not in roles]
    root_rank = stated_rank(terminal, ROOT_RANK_FACT)
    if root_rank is None and one_node:
        root_rank = stated_rank(terminal, AGENT_LOCAL_RANK_FACT)
    # Only a root failure can start the run (all echoes: the diagnosis names the unrecognised start).
    initiating = _choose_initiating(roots, root_rank)
    if initiating is not None:
        if root_rank is not None and root_rank in initiating.ranks:
            why = f"the launcher names rank {root_rank} as the first failure, and this failure is on that rank"
        elif root_rank is not None and not initiating.ranks:
            why = f"the launcher names rank {root_rank} as the first failure; this failure's lines name no rank"
        else:
            why = "the earliest root failure of the run's final episode"
        roles[initiating.sig.id] = ("initiating", None, why)
        later: tuple[Role, str | None, str] = ("contributing", None, "a later failure of the final episode")
        for f in terminal:
            role, cause, text = roles.get(f.sig.id, later)
            if role == "collateral" and cause is None and f is not initiating:
                roles[f.sig.id] = (role, initiating.sig.id, text)
            elif f.sig.id not in roles:
                roles[f.sig.id] = (role, cause, text)

    out: list[tuple[tuple[int, float, int], Candidate]] = []
    for f in terminal:
        role, cause, why = roles[f.sig.id]
        order = {"initiating": 0, "contributing": 1, "collateral": 2}[role]
        stated = None
        if role == "initiating" and not f.ranks:
            stated = root_rank
        elif initiating is None and not f.ranks:
            # Nothing recognised started the run: a launcher's report leads the answer, and the
            # rank it names as failed is the failure's rank.
            stated = stated_rank([f], ROOT_RANK_FACT)
            if stated is None and one_node:
                stated = stated_rank([f], AGENT_LOCAL_RANK_FACT)
        candidate = candidate_of(f, role, cause, why, "terminal", stated, setting)
        out.append(((order, -f.confidence, terminal.index(f)), candidate))
    for f, progress in earlier:
        why = f"the run went on for at least {progress} progress lines after it: earlier trouble, not the final failure"
        out.append(
            (
                (3, -f.confidence, f.position.line),
                candidate_of(f, "contributing", None, why, "earlier", setting=setting),
            )
        )
    return [c for _, c in sorted(out, key=lambda o: o[0])]


CAUSE_AFTER_LINES = 5  # a cause printed just after its echo (a chained exception) still counts


def _is_cause(cause: Found, echo: Found, roles: Mapping[str, tuple[Role, str | None, str]]) -> bool:
    """Whether `cause` is a failure `echo` is usually an echo of, seen before it or right with it."""
    if cause is echo or cause.sig.id not in echo.sig.consequence_of:
        return False
    if roles.get(cause.sig.id, ("", None, ""))[1] == echo.sig.id:
        return False  # already its echo: no cycles
    a, b = cause.position, echo.position
    began_at = began_at_earliest(echo)
    if (
        cause.sig.role == "collateral"
        and a.time is not None
        and began_at is not None
        and comparable(a.time, began_at)
        and a.time >= began_at
    ):
        # A report of a failure (a peer's closed connection) that came after the echo's own
        # operation had begun waiting cannot be why it waited: the waiting came first.
        return False
    if not b.before(a):
        return True  # before it, or on the same line
    same_place = a.file_index == b.file_index and cause.first[1].line.rank == echo.first[1].line.rank
    return same_place and 0 <= a.line - b.line <= CAUSE_AFTER_LINES


def _compare(a: Found, b: Found) -> int:
    if a.position.before(b.position):
        return -1
    return 1 if b.position.before(a.position) else 0


def _choose_initiating(roots: list[Found], root_rank: int | None) -> Found | None:
    """Prefer the launcher's first-failed rank, then likely over possible, then the earliest."""
    if root_rank is not None:
        on_rank = [f for f in roots if root_rank in f.ranks]
        if on_rank:
            roots = on_rank
    likely = [f for f in roots if f.confidence >= LIKELY]
    chosen = likely or roots
    return chosen[0] if chosen else None
