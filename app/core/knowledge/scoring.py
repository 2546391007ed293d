"""How good the library is on labelled logs: the figures `tracelore eval` reports.

Pure: it takes what each case expected and what the diagnosis answered, and counts.
Reading the corpus and running `diagnose()` is the caller's business (app/evaluation/evaluate.py).
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from app.core.knowledge.measured import Measured
from app.core.knowledge.sights import Ratio, Sight, SightGroup, coverage_by_ecosystem, first_sight

NOTHING = "nothing"  # what a miss "got" when the diagnosis named no failure
NO_SIGNATURE = "(no signature yet)"  # the layer of an expected id the library does not know
FIGURES = ("top1", "top3", "collateral_order", "healthy_clean", "order_independent", "rank_right")


@dataclass(frozen=True)
class Outcome:
    """One case: what it expected and what the diagnosis ranked."""

    case: str
    expected: str  # a taxonomy id, or "none" for a healthy run
    accepted: frozenset[str]  # expected and its acceptable alternatives
    collateral: tuple[str, ...]  # the echoes the log holds
    ranked: tuple[str, ...]  # candidate ids, in the diagnosis's order
    likely: frozenset[str]  # the candidates at band `likely`
    tags: tuple[str, ...] = ()
    # For a job of several ranks diagnosed from per-rank files in shuffled orders: whether
    # every order gave the same answer. None for a single-rank log.
    order_stable: bool | None = None
    first: Sight | None = None
    expected_rank: int | None = None  # the rank the label names (a hang: the rank waited for)
    rank: int | None = None  # the rank the diagnosis named
    lead: bool = False  # the first candidate is a lead from similar logs, not a signature's match

    @property
    def healthy(self) -> bool:
        return self.expected == "none"

    @property
    def top(self) -> str:
        return self.ranked[0] if self.ranked else NOTHING

    @property
    def right(self) -> bool:
        return not self.healthy and self.top in self.accepted

    @property
    def in_top3(self) -> bool:
        return not self.healthy and any(r in self.accepted for r in self.ranked[:3])

    @property
    def collateral_ordered(self) -> bool:
        """The expected failure is found and ranked above every echo the diagnosis lists."""
        found = [i for i, r in enumerate(self.ranked) if r in self.accepted]
        if not found:
            return False
        echoes = [i for i, r in enumerate(self.ranked) if r in self.collateral and r not in self.accepted]
        return all(found[0] < i for i in echoes)

    @property
    def ok(self) -> bool:
        """Right for a failed run, clean for a healthy one."""
        return self.clean if self.healthy else self.right

    @property
    def clean(self) -> bool:
        """A healthy run with no failure named at `likely`."""
        return self.healthy and not self.likely


@dataclass(frozen=True)
class Miss:
    case: str
    expected: str
    got: str  # the top candidate, `nothing`, or for a healthy run the false alarm(s)
    ranked: tuple[str, ...]


@dataclass(frozen=True)
class Report:
    """Every figure of one evaluation."""

    top1: Ratio
    top3: Ratio
    collateral_order: Ratio
    healthy_clean: Ratio
    signatures: Mapping[str, Measured]
    layers: Mapping[str, tuple[Ratio, Ratio]]  # layer -> (top1, top3)
    confusions: Sequence[tuple[str, str, int]]  # expected, got, count; most frequent first
    misses: Sequence[Miss]
    unknown_classes: Mapping[str, int]  # expected ids the library has no signature for -> cases
    cases: int
    failures: int
    tags: Mapping[str, Ratio] = field(default_factory=dict)  # kind of log -> right (or clean) / cases
    outcomes: Sequence[Outcome] = ()
    # multi-rank cases whose per-rank files gave the same answer in every order
    order_independent: Ratio = Ratio(0, 0)
    # failures whose first answer was a lead (nothing recognised; the failure of similar logs): right / offered
    leads: Ratio = Ratio(0, 0)
    healthy_leads: Ratio = Ratio(0, 0)  # healthy runs given a lead (a possible false alarm)
    rank_right: Ratio = Ratio(0, 0)  # failures whose label names a rank, named first on that rank
    # what the library said of each case when it was added (cases added since first sight was kept)
    first_sight: tuple[SightGroup, ...] = ()
    # the library's breadth over the sampled failures, per ecosystem (coverage then and now)
    coverage: tuple[SightGroup, ...] = ()
    # The same figures over the cases written from before first sight was kept ("established")
    # and over those sampled since ("sampled"), when the corpus holds both.
    parts: Mapping[str, Report] = field(default_factory=dict)

    def rank_misses(self) -> list[Outcome]:
        """The failures whose label names a rank and that were not named first on that rank."""
        return [
            o
            for o in self.outcomes
            if not o.healthy and o.expected_rank is not None and not (o.right and o.rank == o.expected_rank)
        ]

    def changes(self, before: Mapping[str, bool]) -> tuple[list[Outcome], list[Outcome]]:
        """Against an earlier run's right/wrong per case: (now wrong, now right), common cases only."""
        worse = [o for o in self.outcomes if before.get(o.case) is True and not o.ok]
        better = [o for o in self.outcomes if before.get(o.case) is False and o.ok]
        return worse, better

    def figure(self, name: str) -> float | None:
        """A figure by name; "sampled.top1" is the sampled part's, a bare name the established part's."""
        scope, _, figure = name.rpartition(".")
        part = self.parts.get(scope or ESTABLISHED) if self.parts else self
        if part is None:
            return None  # no case of that part: nothing to hold it to
        ratio: Ratio = getattr(part, figure)
        return ratio.value

    def below(self, thresholds: Mapping[str, float]) -> list[str]:
        """The figures under their threshold, as sentences."""
        failed = []
        for name, minimum in thresholds.items():
            scope = name.rpartition(".")[0]
            if scope.startswith(f"{SAMPLED}.") and scope not in self.parts:
                failed.append(f"{name} names a batch with no case")  # a misspelt batch would hold nothing
                continue
            value = self.figure(name)
            if value is not None and value + 1e-9 < minimum:
                failed.append(f"{name} {value:.3f} is below the threshold {minimum:.3f}")
        return failed


ESTABLISHED = "established"  # cases from before first sight was kept: the fingerprints were written from them
SAMPLED = "sampled"  # cases sampled since, each with its first sight
SCOPES = (SAMPLED,)  # the scopes a threshold may name ("sampled.top1"); a bare name holds the established


def batch_scope(batch: str) -> str:
    """The part of one sampled batch ("sampled.2026-12-a"): a new batch is held apart from those before it."""
    return f"{SAMPLED}.{batch}"


def score(outcomes: Iterable[Outcome], *, layer_of: Mapping[str, str], known: Iterable[str]) -> Report:
    """Count the figures over outcomes. `layer_of` maps an id to its layer; `known` are the library's ids.

    When some cases carry a first sight and some do not, the figures are also counted over each
    part, and over each sampled batch, which thresholds hold apart.
    """
    items = list(outcomes)
    report = _score(items, layer_of=layer_of, known=known)
    groups = {
        ESTABLISHED: [o for o in items if o.first is None],
        SAMPLED: [o for o in items if o.first is not None],
    }
    present = {scope: group for scope, group in groups.items() if group}
    if len(present) < 2:  # one population: the whole corpus is it
        parts = dict.fromkeys(present, report)
    else:
        parts = {scope: _score(group, layer_of=layer_of, known=known) for scope, group in present.items()}
    for batch in sorted({o.first.batch for o in items if o.first is not None and o.first.batch}):
        group = [o for o in items if o.first is not None and o.first.batch == batch]
        parts[batch_scope(batch)] = _score(group, layer_of=layer_of, known=known)
    return dataclasses.replace(report, parts=parts)


def _score(outcomes: Iterable[Outcome], *, layer_of: Mapping[str, str], known: Iterable[str]) -> Report:
    items = list(outcomes)
    known_ids = set(known)
    # A failure whose class has no signature yet measures breadth, not ranking: it is counted
    # apart (`unknown_classes`), not as a miss of every figure.
    failures = [o for o in items if not o.healthy and o.expected in known_ids]
    outside = [o for o in items if not o.healthy and o.expected not in known_ids]
    healthy = [o for o in items if o.healthy]
    with_echoes = [o for o in failures if o.collateral]

    measured: dict[str, Counter[str]] = defaultdict(Counter)
    # What a signature's own patterns did: a lead (the failure of similar logs) is not its doing.
    for o in failures:
        measured[o.expected]["cases"] += 1
        if o.lead:
            continue
        if o.right:
            measured[o.expected]["recognised"] += 1
        elif o.top != NOTHING:
            measured[o.top]["named_wrongly"] += 1
    for o in healthy:
        for sig in o.likely:
            measured[sig]["false_alarms"] += 1
    for o in items:
        for sig in set(o.collateral):
            measured[sig]["echo_cases"] += 1
    for o in failures:
        if o.first is not None and o.first.known:
            measured[o.expected]["first_sight_cases"] += 1
            right = bool(o.first.ranked) and o.first.ranked[0] in o.accepted and not o.first.lead
            measured[o.expected]["first_sight_right"] += right
    for sig in known_ids:
        measured[sig]  # every signature gets a row, measured or not
    signatures = {
        sig: Measured(id=sig, healthy=len(healthy), **{k: counts[k] for k in counts})
        for sig, counts in sorted(measured.items())
    }

    by_layer: dict[str, list[Outcome]] = defaultdict(list)
    for o in failures:
        by_layer[layer_of.get(o.expected, NO_SIGNATURE)].append(o)
    layers = {
        layer: (_ratio(group, lambda o: o.right), _ratio(group, lambda o: o.in_top3))
        for layer, group in sorted(by_layer.items())
    }

    misses = [Miss(o.case, o.expected, o.top, o.ranked) for o in failures if not o.right]
    misses += [Miss(o.case, o.expected, ", ".join(sorted(o.likely)), o.ranked) for o in healthy if not o.clean]
    confusions = Counter((m.expected, m.got) for m in misses)
    unknown = Counter(o.expected for o in outside)
    by_tag: dict[str, list[Outcome]] = defaultdict(list)
    for o in items:
        for t in o.tags:
            by_tag[t].append(o)
    return Report(
        top1=_ratio(failures, lambda o: o.right),
        top3=_ratio(failures, lambda o: o.in_top3),
        collateral_order=_ratio(with_echoes, lambda o: o.collateral_ordered),
        healthy_clean=_ratio(healthy, lambda o: o.clean),
        leads=_ratio([o for o in failures if o.lead], lambda o: o.right),
        healthy_leads=_ratio(healthy, lambda o: o.lead),
        order_independent=_ratio([o for o in items if o.order_stable is not None], lambda o: bool(o.order_stable)),
        rank_right=_ratio(
            [o for o in failures if o.expected_rank is not None], lambda o: o.right and o.rank == o.expected_rank
        ),
        signatures=signatures,
        layers=layers,
        confusions=sorted(((e, g, n) for (e, g), n in confusions.items()), key=lambda t: (-t[2], t[0], t[1])),
        misses=sorted(misses, key=lambda m: (m.expected, m.case)),
        unknown_classes=dict(sorted(unknown.items())),
        cases=len(items),
        failures=len(failures),
        tags={t: _ratio(group, lambda o: o.ok) for t, group in sorted(by_tag.items())},
        outcomes=sorted(items, key=lambda o: o.case),
        first_sight=first_sight(items, known_ids),
        coverage=coverage_by_ecosystem(items, known_ids),
    )


def _ratio(items: Sequence[Outcome], test: Callable[[Outcome], bool]) -> Ratio:
    return Ratio(sum(1 for o in items if test(o)), len(items))
