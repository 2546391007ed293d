"""Public-thread logs most like a log whose first failure no signature recognises.

The corpus holds thousands of real logs, each labelled with the failure its thread concluded
started the run. When nothing in a new log is recognised, the failure of the labelled logs it
reads most like is a lead worth showing, never more than possible: a vote of the nearest logs
(TF-IDF over the words of the lines a scan keeps: each file's ends and every line a pattern
picked, numbers, paths and hex masked), each vote weighted by its cosine similarity, with the
threads that voted named so the reader can go and compare.

Pure: the index is built from texts and kept as JSON by the corpus tooling; the engine only
reads it.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

FORMAT = 1
TERMS = 48  # the heaviest terms kept per log: enough to tell logs apart, small enough to ship
NEAREST = 5  # logs that vote
MIN_SIMILARITY = 0.15  # below this the nearest log shares too little with the new one to be a lead


@dataclass(frozen=True, slots=True)
class Labelled:
    """One corpus log as the index keeps it."""

    case: str
    source: str
    expected: str
    weights: Mapping[str, float]  # the heaviest terms, normalised to unit length


@dataclass(frozen=True, slots=True)
class Neighbour:
    case: str
    source: str
    expected: str
    similarity: float


@dataclass(frozen=True, slots=True)
class Vote:
    """The failure the nearest labelled logs name, and those that named it."""

    expected: str
    score: float  # summed similarity of the logs that named it
    neighbours: tuple[Neighbour, ...]  # best first


@dataclass(frozen=True)
class NeighbourIndex:
    idf: Mapping[str, float]
    logs: tuple[Labelled, ...]
    excluded: frozenset[str] = frozenset()  # sources left out (a log is not its own neighbour)
    _postings: dict[str, list[tuple[int, float]]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._postings:
            return  # shared with the index this one was made from (`without`)
        for i, log in enumerate(self.logs):
            for term, weight in log.weights.items():
                self._postings.setdefault(term, []).append((i, weight))

    @classmethod
    def build(cls, docs: Iterable[tuple[str, str, str, str]]) -> NeighbourIndex:
        """From (case, source, expected, text) of labelled logs."""
        from app.core.knowledge.similar import words  # here: `regex` is not imported by a diagnosis that recognises

        docs = list(docs)
        counts = [Counter(words(text)) for _, _, _, text in docs]
        n = len(docs) or 1
        df = Counter(t for c in counts for t in c)
        idf = {t: round(math.log(n / f), 4) for t, f in df.items() if f < n}
        logs = []
        for (case, source, expected, _), c in zip(docs, counts, strict=True):
            weights = _unit(_heaviest(_tfidf(c, idf), TERMS))
            if weights:
                logs.append(Labelled(case, source, expected, weights))
        kept = {t for log in logs for t in log.weights}
        return cls({t: v for t, v in idf.items() if t in kept}, tuple(logs))

    def without(self, sources: Iterable[str]) -> NeighbourIndex:
        """The same index with the logs of these sources left out."""
        return NeighbourIndex(self.idf, self.logs, self.excluded | frozenset(sources), self._postings)

    def nearest(self, text: str, *, limit: int = NEAREST) -> list[Neighbour]:
        """The labelled logs most like the text, best first (those above the floor)."""
        from app.core.knowledge.similar import words

        query = _unit(_tfidf(Counter(words(text)), self.idf))
        scores: dict[int, float] = defaultdict(float)
        for term, weight in query.items():
            for i, w in self._postings.get(term, ()):
                scores[i] += weight * w
        ranked = sorted(scores.items(), key=lambda s: (-s[1], self.logs[s[0]].case))
        out: list[Neighbour] = []
        for i, score in ranked:
            log = self.logs[i]
            if score < MIN_SIMILARITY or len(out) == limit:
                break
            if log.source not in self.excluded:
                out.append(Neighbour(log.case, log.source, log.expected, round(score, 3)))
        return out

    def weigher(self, vote: Vote) -> Callable[[str], float]:
        """How much a line's words weigh in the logs that voted (which line made the vote), per line."""
        from app.core.knowledge.similar import words

        cases = {n.case for n in vote.neighbours}
        voters = [log for log in self.logs if log.case in cases]  # found once, not per line weighed

        def weight(text: str) -> float:
            terms = set(words(text))
            return sum(self.idf.get(t, 0.0) * log.weights.get(t, 0.0) for t in terms for log in voters)

        return weight

    def vote(self, text: str, allowed: Mapping[str, Any]) -> Vote | None:
        """The failure the nearest logs name (of those in `allowed`), if any log is near enough."""
        near = [n for n in self.nearest(text) if n.expected in allowed]
        if not near:
            return None
        totals: dict[str, float] = defaultdict(float)
        for n in near:
            totals[n.expected] += n.similarity
        best = min(totals, key=lambda e: (-totals[e], e))
        return Vote(best, round(totals[best], 3), tuple(n for n in near if n.expected == best))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "idf": dict(sorted(self.idf.items())),
            "logs": [[g.case, g.source, g.expected, dict(g.weights)] for g in self.logs],
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> NeighbourIndex:
        if raw.get("format") != FORMAT:
            raise ValueError(f"neighbour index format {raw.get('format')!r}, expected {FORMAT}")
        logs = tuple(Labelled(c, s, e, w) for c, s, e, w in raw["logs"])
        return cls(raw["idf"], logs)


def _tfidf(counts: Counter[str], idf: Mapping[str, float]) -> dict[str, float]:
    return {t: (1 + math.log(k)) * idf[t] for t, k in counts.items() if idf.get(t)}


def _heaviest(weights: Mapping[str, float], n: int) -> dict[str, float]:
    return dict(sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:n])


def _unit(weights: Mapping[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(v * v for v in weights.values()))
    return {t: round(v / norm, 4) for t, v in weights.items()} if norm else {}


class LazyNeighbours:
    """A library's neighbour index, read when a diagnosis first needs it (most recognise something).

    `read` returns the index or None (no index beside the library, or one that cannot be read:
    a custom library has no corpus). Two threads reading it at once both get an equal index.
    """

    __slots__ = ("_index", "_read", "_done")

    def __init__(self, read: Callable[[], NeighbourIndex | None] | None = None) -> None:
        self._read = read
        self._index: NeighbourIndex | None = None
        self._done = read is None

    @classmethod
    def of(cls, index: NeighbourIndex | None) -> LazyNeighbours:
        lazy = cls()
        lazy._index = index
        return lazy

    @property
    def loaded(self) -> bool:
        """Whether the index was read (or given)."""
        return self._done

    def get(self) -> NeighbourIndex | None:
        if not self._done and self._read is not None:
            self._index = self._read()
            self._done = True
        return self._index
