"""First sight: what the library said of each sampled case when it was added, grouped next to today.

Pure, like the rest of scoring; `Ratio` lives here because the groups and the report both count with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.core.knowledge.scoring import Outcome

__all__ = ["Ratio", "Sight", "SightGroup", "coverage_by_ecosystem", "first_sight", "sight_group"]


@dataclass(frozen=True)
class Ratio:
    hits: int
    total: int

    @property
    def value(self) -> float | None:
        return self.hits / self.total if self.total else None

    def __str__(self) -> str:
        return f"{self.value:.3f} ({self.hits}/{self.total})" if self.total else "n/a (0 cases)"


@dataclass(frozen=True)
class Sight:
    """What the library said of a case when the case was added (its first sight)."""

    ranked: tuple[str, ...]
    known: bool  # the library had a signature for the expected class then
    added: str  # ISO date
    batch: str | None = None
    ecosystem: str | None = None  # the project or ecosystem its sampling query was about
    lead: bool = False  # the first candidate was a lead from similar logs, not a signature's match


@dataclass(frozen=True)
class SightGroup:
    """First sight over a group of failed-run cases (all, a month added, a sampled batch), next to today.

    Judged over the cases whose class the library had when each was added (`known`): a class
    with no signature yet measures the library's breadth (`coverage`), not how it generalises.
    """

    label: str
    cases: int  # failed-run cases with a first sight
    known: int  # of them, whose class had a signature when the case was added
    known_now: int  # of them, whose class has a signature today
    then_top1: Ratio
    then_top3: Ratio
    then_none: Ratio  # no candidate at all
    now_top1: Ratio
    now_top3: Ratio
    now_none: Ratio
    then_leads: Ratio = Ratio(0, 0)  # first answers that were leads: right / offered
    now_leads: Ratio = Ratio(0, 0)

    @property
    def coverage(self) -> Ratio:
        return Ratio(self.known, self.cases)

    @property
    def coverage_now(self) -> Ratio:
        return Ratio(self.known_now, self.cases)


def sight_group(label: str, outcomes: Sequence[Outcome], known_ids: frozenset[str] = frozenset()) -> SightGroup:
    """First sight and today's answer over failed-run outcomes that carry a first sight."""
    seen = [o for o in outcomes if o.first is not None and not o.healthy]
    known = [o for o in seen if o.first is not None and o.first.known]

    def then(test: Callable[[Outcome, tuple[str, ...]], bool]) -> Ratio:
        return Ratio(sum(1 for o in known if o.first is not None and test(o, o.first.ranked)), len(known))

    def now(test: Callable[[Outcome, tuple[str, ...]], bool]) -> Ratio:
        return Ratio(sum(1 for o in known if test(o, o.ranked)), len(known))

    def top1(o: Outcome, ranked: tuple[str, ...]) -> bool:
        return bool(ranked) and ranked[0] in o.accepted

    def top3(o: Outcome, ranked: tuple[str, ...]) -> bool:
        return any(r in o.accepted for r in ranked[:3])

    def none(_: Outcome, ranked: tuple[str, ...]) -> bool:
        return not ranked

    def leads(lead: Callable[[Outcome], bool], ranked: Callable[[Outcome], tuple[str, ...]]) -> Ratio:
        offered = [o for o in known if lead(o)]
        return Ratio(sum(1 for o in offered if top1(o, ranked(o))), len(offered))

    return SightGroup(
        label=label,
        cases=len(seen),
        known=len(known),
        known_now=sum(1 for o in seen if o.expected in known_ids),
        then_top1=then(top1),
        then_top3=then(top3),
        then_none=then(none),
        now_top1=now(top1),
        now_top3=now(top3),
        now_none=now(none),
        then_leads=leads(lambda o: o.first is not None and o.first.lead, lambda o: o.first.ranked if o.first else ()),
        now_leads=leads(lambda o: o.lead, lambda o: o.ranked),
    )


def first_sight(outcomes: Sequence[Outcome], known: Iterable[str] = ()) -> tuple[SightGroup, ...]:
    """First sight over every case that records one, then by sampled batch, then by month added."""
    seen = [o for o in outcomes if o.first is not None and not o.healthy]
    if not seen:
        return ()
    ids = frozenset(known)
    groups = [sight_group("all", seen, ids)]
    batches = sorted({o.first.batch for o in seen if o.first is not None and o.first.batch})
    groups += [
        sight_group(f"batch {b}", [o for o in seen if o.first is not None and o.first.batch == b], ids) for b in batches
    ]
    months = sorted({o.first.added[:7] for o in seen if o.first is not None})
    groups += [
        sight_group(f"added {m}", [o for o in seen if o.first is not None and o.first.added[:7] == m], ids)
        for m in months
    ]
    return tuple(groups)


def coverage_by_ecosystem(outcomes: Sequence[Outcome], known: Iterable[str] = ()) -> tuple[SightGroup, ...]:
    """The breadth of the library over the sampled failures, per ecosystem their query was about."""
    seen = [o for o in outcomes if o.first is not None and o.first.ecosystem and not o.healthy]
    ids = frozenset(known)
    names = sorted({o.first.ecosystem for o in seen if o.first is not None and o.first.ecosystem})
    return tuple(
        sight_group(name, [o for o in seen if o.first is not None and o.first.ecosystem == name], ids) for name in names
    )
