"""`tracelore eval`: the real `diagnose()` over the corpus, scored, rendered and checked.

Also writes what the corpus measured per signature (`measured.json` beside the
signatures); the library loads it and the encyclopedia shows it on every entry.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, NamedTuple

from app.core import Library, diagnose_many
from app.core.authoring import load_taxonomy
from app.core.engine import parse_prefixes, strip_ansi
from app.core.knowledge import ESTABLISHED, FIGURES, SAMPLED, Outcome, Ratio, Report, Sight, SightGroup, score
from app.errors import CorpusError, TraceloreError
from app.evaluation.corpus import Case, FirstSight
from app.evaluation.neighbours import lead_lines, leads_note

ORDERS = 4  # orders a multi-rank case's files are diagnosed in: as given, reversed, two seeded shuffles
UNRANKED_FILE = "launcher.log"  # where a split log's lines with no rank prefix go


def rank_files(logs: Sequence[tuple[str, bytes]]) -> list[tuple[str, bytes]] | None:
    """A multi-rank case as per-rank files: its own `*.log` files, or its one log split by rank prefix.

    None when the case holds one rank only. Lines without a rank prefix (the launcher's)
    make a file of their own.
    """
    if len(logs) > 1:
        return list(logs)
    groups: dict[int | None, list[bytes]] = {}
    for raw in logs[0][1].splitlines(keepends=True):
        rank = parse_prefixes(strip_ansi(raw).decode("utf-8", errors="replace")).rank
        groups.setdefault(rank, []).append(raw)
    ranks = sorted(r for r in groups if r is not None)
    if len(ranks) < 2:
        return None
    files = [(f"rank{r}.log", b"".join(groups[r])) for r in ranks]
    if None in groups:
        files.append((UNRANKED_FILE, b"".join(groups[None])))
    return files


def shuffled_orders(case_id: str, n: int) -> list[list[int]]:
    """A few orders of n files: as given, reversed, then shuffles seeded by the case id (deterministic)."""
    given = list(range(n))
    orders = [given, given[::-1]]
    rng = random.Random(case_id)
    while len(orders) < ORDERS:
        order = given[:]
        rng.shuffle(order)
        orders.append(order)
    return orders


def answer(
    files: Sequence[tuple[str, bytes]], library: Library, unlike: Collection[str] = ()
) -> tuple[tuple[object, ...], ...] | None:
    """What order independence compares: each candidate's id, role and where it starts, in the diagnosis's order."""
    try:
        d = diagnose_many(list(files), library, threads=1, unlike=unlike)
    except TraceloreError:
        return None
    return tuple((c.id, c.role, c.caused_by, c.file, c.line, c.rank) for c in d.candidates)


def order_stable(
    case_id: str, logs: Sequence[tuple[str, bytes]], library: Library, unlike: Collection[str] = ()
) -> bool | None:
    """Whether a multi-rank case's per-rank files give the same answer in every order (None: one rank)."""
    files = rank_files(logs)
    if files is None:
        return None
    orders = shuffled_orders(case_id, len(files))
    answers = {answer([files[i] for i in order], library, unlike) for order in orders}
    return len(answers) == 1


FIRST_SIGHT_TOP = 5  # candidates a first sight records


class Answer(NamedTuple):
    ranked: tuple[str, ...]  # the candidates' ids, best first
    likely: frozenset[str]  # those at `likely`
    rank: int | None  # the rank it names: a hang's suspect, else the first candidate's
    lead: bool = False  # the first candidate is a lead from similar logs, not a signature's match


def answer_of(logs: Sequence[tuple[str, bytes]], library: Library, unlike: Collection[str] = ()) -> Answer:
    """What the library names for a case's logs (as one job; `unlike`: its own thread, never its lead)."""
    named = [(name if len(logs) > 1 else None, data) for name, data in logs]
    try:
        d = diagnose_many(named, library, threads=1, unlike=unlike)
    except TraceloreError:
        return Answer((), frozenset(), None)
    rank = d.hang.rank if d.hang is not None else d.candidates[0].rank if d.candidates else None
    lead = bool(d.candidates) and d.candidates[0].basis == "neighbours"
    likely = frozenset(c.id for c in d.candidates if c.band == "likely")
    return Answer(tuple(c.id for c in d.candidates), likely, rank, lead)


def first_sight_of(logs: Sequence[tuple[str, bytes]], library: Library, *, expected: str, today: date) -> FirstSight:
    """What the library says of a new case's logs, to be kept in the case for ever."""
    from app import __version__

    ranked, likely, _, lead = answer_of(logs, library)
    top = ranked[:FIRST_SIGHT_TOP]
    return FirstSight(
        added=today,
        library=library.version,
        engine=__version__,
        ranked=top,
        likely=tuple(i for i in top if i in likely),
        known=expected == "none" or expected in library.signatures,
        lead=lead,
    )


def sight(case: Case) -> Sight | None:
    first = case.spec.first_sight
    if first is None:
        return None
    batch = case.spec.sampled.batch if case.spec.sampled is not None else None
    ecosystem = case.spec.sampled.ecosystem if case.spec.sampled is not None else None
    return Sight(
        ranked=first.ranked,
        known=first.known,
        added=first.added.isoformat(),
        batch=batch,
        ecosystem=ecosystem,
        lead=first.lead,
    )


def run_case(case: Case, library: Library) -> Outcome:
    """Diagnose one case's logs as one job (each file read once)."""
    logs = case.read()
    unlike = (case.spec.source,)  # a case's own thread is no lead for it: the corpus measures unseen logs
    ranked, likely, rank, lead = answer_of(logs, library, unlike)
    return Outcome(
        case=case.id,
        expected=case.spec.expected,
        accepted=case.accepted,
        collateral=case.spec.collateral,
        ranked=ranked,
        likely=likely,
        tags=case.spec.tags,
        order_stable=order_stable(case.id, logs, library, unlike),
        first=sight(case),
        expected_rank=case.spec.rank,
        rank=rank,
        lead=lead,
    )


def evaluate(cases: Sequence[Case], library: Library, *, taxonomy: Path | None = None) -> Report:
    """Every case diagnosed and scored; a class with no signature yet counts in its taxonomy layer."""
    outcomes = [run_case(case, library) for case in cases]
    planned = load_taxonomy(taxonomy).layers if taxonomy is not None and taxonomy.is_file() else {}
    layer_of = {**planned, **{sid: sig.layer for sid, sig in library.signatures.items()}}
    return score(outcomes, layer_of=layer_of, known=library.signatures)


def measured_document(report: Report, library: Library) -> dict[str, Any]:
    """What `measured.json` holds: per signature of the library, the corpus's counts."""
    return {
        "library_version": library.version,
        "cases": report.cases,
        "failures": report.failures,
        "healthy": report.healthy_clean.total,
        "signatures": {sid: report.signatures[sid].as_dict() for sid in sorted(library.signatures)},
    }


def write_measured(path: Path, report: Report, library: Library) -> None:
    text = json.dumps(measured_document(report, library), indent=1, sort_keys=True) + "\n"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


# -- rendering -------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:5.3f}"


_PART_HEADINGS = {
    ESTABLISHED: "the cases from before first sight was kept (the fingerprints were written from them)",
    SAMPLED: "the sampled cases (each with its first sight), as the library does on them now",
}


def _figure_lines(report: Report, thresholds: Mapping[str, float]) -> list[str]:
    """Each figure with its threshold; with sampled cases, per part, then over the whole corpus."""

    def lines(part: Report, scope: str | None) -> list[str]:
        out = []
        for name in FIGURES:
            key = f"{scope}.{name}" if scope else name
            limit = thresholds.get(key)
            below = limit is not None and bool(report.below({key: limit}))
            mark = "" if limit is None else f"  (threshold {limit:.3f}{', BELOW' if below else ''})"
            out.append(f"{name:<17} {getattr(part, name)}{mark}")
        return out

    if len(report.parts) < 2:
        (scope,) = report.parts or (ESTABLISHED,)
        return lines(report, None if scope == ESTABLISHED else scope) + lead_lines(report)
    out = []
    for scope, part in report.parts.items():  # established, sampled, then each sampled batch under it
        batch = scope.partition(".")[2]
        heading = f"  batch {batch}, as the library does on it now" if batch else _PART_HEADINGS[scope]
        out += [f"{heading}: {part.cases} cases"]
        out += [("    " if batch else "  ") + line for line in lines(part, None if scope == ESTABLISHED else scope)]
        out += [""]
    out += [f"the whole corpus: {report.cases} cases (no threshold)"]
    out += ["  " + f"{name:<17} {getattr(report, name)}" for name in FIGURES]
    return out + lead_lines(report)


def _sight_lines(groups: Sequence[SightGroup]) -> list[str]:
    """First sight next to today, per group (no threshold: a first sight cannot be re-earned)."""
    if not groups:
        return []
    out = [
        "",
        "first sight: what the library said of each case when it was added, before any fingerprint",
        "changed for it; over the cases whose class the library had then (no threshold: it cannot be re-earned)",
    ]
    for g in groups:
        out.append(f"  {g.label}: {g.cases} failed runs, class known for {g.coverage} then, {g.coverage_now} now")
        then = f"top-1 {g.then_top1}  top-3 {g.then_top3}  no candidate {g.then_none}{leads_note(g.then_leads)}"
        now = f"top-1 {g.now_top1}  top-3 {g.now_top3}  no candidate {g.now_none}{leads_note(g.now_leads)}"
        out += [f"    then  {then}", f"    now   {now}"]
    return out


def _coverage_lines(groups: Sequence[SightGroup]) -> list[str]:
    """The share of sampled failures whose class had a signature when sampled, and has one today."""
    if not groups:
        return []
    width = max(len(g.label) for g in groups)
    out = ["", "coverage of the sampled failures by ecosystem (class had a signature when sampled -> has one now)"]
    out += [f"  {g.label:<{width}}  {g.coverage} -> {g.coverage_now}" for g in groups]
    return out


_SIGHT_KEYS = ("top1", "top3", "no_candidate", "leads")


def _sight_json(g: SightGroup) -> dict[str, Any]:
    def ratio(r: Ratio) -> dict[str, Any]:
        return {"value": r.value, "hits": r.hits, "total": r.total}

    return {
        "label": g.label,
        "cases": g.cases,
        "known": g.known,
        "known_now": g.known_now,
        "then": dict(zip(_SIGHT_KEYS, map(ratio, (g.then_top1, g.then_top3, g.then_none, g.then_leads)), strict=True)),
        "now": dict(zip(_SIGHT_KEYS, map(ratio, (g.now_top1, g.now_top3, g.now_none, g.now_leads)), strict=True)),
    }


def _rank_miss_line(o: Outcome) -> str:
    named = "no rank" if o.rank is None else f"rank {o.rank}"
    top = "" if o.right else f" (and the class: got {o.top})"
    return f"  {o.case}: rank {o.expected_rank}, named {named}{top}"


def render_text(report: Report, thresholds: Mapping[str, float], *, worst: int = 10) -> str:
    outside = sum(report.unknown_classes.values())
    out = [
        f"{report.cases} cases: {report.failures} failed runs, {report.healthy_clean.total} healthy"
        + (f", {outside} failed runs of classes with no signature yet (counted apart)" if outside else ""),
        "",
    ]
    out += _figure_lines(report, thresholds)
    if report.layers:
        out += ["", "by layer (top-1, top-3):"]
        for layer, (top1, top3) in report.layers.items():
            out.append(f"  {layer:<22} {top1}   {top3}")
    measured = [m for m in report.signatures.values() if m.cases or m.named_wrongly or m.false_alarms]
    if measured:
        out += ["", "per signature: recall (recognised/cases), precision, named wrongly, false alarms in healthy logs"]
        for m in sorted(measured, key=lambda m: (m.recall if m.recall is not None else 2, m.id)):
            out.append(
                f"  {m.id:<36} {_pct(m.recall)} ({m.recognised}/{m.cases})  {_pct(m.precision)}"
                f"  wrong {m.named_wrongly}  false alarms {m.false_alarms}"
            )
    if report.unknown_classes:
        out += ["", "expected classes the library has no signature for:"]
        out += [f"  {sid} ({n} cases)" for sid, n in report.unknown_classes.items()]
    if report.confusions:
        out += ["", "confusions (expected -> got):"]
        out += [f"  {n:3d}  {e} -> {g}" for e, g, n in report.confusions[: max(worst, 20)]]
    if report.misses:
        out += ["", "misses:"]
        out += [f"  {m.case}: expected {m.expected}, got {m.got}" for m in report.misses]
    rank_misses = report.rank_misses()
    if rank_misses:
        out += ["", "rank misses (the rank the label names, the rank named first):"]
        out += [_rank_miss_line(o) for o in rank_misses]
    if report.tags:
        out += ["", "by kind of log (right or clean / cases):"]
        out += [f"  {t:<17} {ratio}" for t, ratio in report.tags.items()]
    out += _sight_lines(report.first_sight)
    out += _coverage_lines(report.coverage)
    failed = report.below(thresholds)
    out += ["", "FAILED: " + "; ".join(failed) if failed else "all figures at or above their thresholds"]
    return "\n".join(out) + "\n"


def read_baseline(path: Path) -> dict[str, bool]:
    """Per case, whether an earlier `tracelore eval --format json` run got it right."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {str(o["case"]): bool(o["ok"]) for o in raw["outcomes"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorpusError([f"{path}: not the JSON of a `tracelore eval --format json` run ({exc})"]) from None


def render_changes(report: Report, before: Mapping[str, bool]) -> str:
    """What changed against a baseline: a fix that wins one case and loses another shows both."""
    worse, better = report.changes(before)
    common = sum(1 for o in report.outcomes if o.case in before)
    out = [f"against the baseline ({common} cases in both runs): {len(better)} now right, {len(worse)} now wrong"]
    out += [f"  now right: {o.case} ({o.expected})" for o in better]
    out += [f"  NOW WRONG: {o.case} (expected {o.expected}, got {o.top})" for o in worse]
    return "\n".join(out) + "\n"


def render_json(report: Report, thresholds: Mapping[str, float]) -> str:
    body = {
        "cases": report.cases,
        "failures": report.failures,
        "leads": {"hits": report.leads.hits, "total": report.leads.total},
        "healthy_leads": {"hits": report.healthy_leads.hits, "total": report.healthy_leads.total},
        "figures": {
            name: {
                "value": getattr(report, name).value,
                "hits": getattr(report, name).hits,
                "total": getattr(report, name).total,
                "threshold": thresholds.get(name),
            }
            for name in FIGURES
        },
        "parts": {
            scope: {
                name: {
                    "value": getattr(part, name).value,
                    "hits": getattr(part, name).hits,
                    "total": getattr(part, name).total,
                    "threshold": thresholds.get(name if scope == ESTABLISHED else f"{scope}.{name}"),
                }
                for name in FIGURES
            }
            for scope, part in report.parts.items()
            if len(report.parts) > 1
        },
        "layers": {
            layer: {"top1": top1.value, "top3": top3.value, "cases": top1.total}
            for layer, (top1, top3) in report.layers.items()
        },
        "signatures": {
            sid: {**m.as_dict(), "recall": m.recall, "precision": m.precision} for sid, m in report.signatures.items()
        },
        "confusions": [{"expected": e, "got": g, "count": n} for e, g, n in report.confusions],
        "misses": [
            {"case": m.case, "expected": m.expected, "got": m.got, "ranked": list(m.ranked)} for m in report.misses
        ],
        "rank_misses": [
            {"case": o.case, "expected_rank": o.expected_rank, "rank": o.rank, "class_right": o.right}
            for o in report.rank_misses()
        ],
        "unknown_classes": dict(report.unknown_classes),
        "first_sight": [_sight_json(g) for g in report.first_sight],
        "coverage_by_ecosystem": [_sight_json(g) for g in report.coverage],
        "tags": {t: {"value": r.value, "hits": r.hits, "total": r.total} for t, r in report.tags.items()},
        "below": report.below(thresholds),
        "outcomes": [
            {"case": o.case, "expected": o.expected, "ranked": list(o.ranked), "lead": o.lead, "ok": o.ok}
            for o in report.outcomes
        ],
    }
    return json.dumps(body, indent=2) + "\n"
