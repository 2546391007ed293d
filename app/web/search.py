"""Encyclopedia search: a pasted error line or traceback goes through the diagnosis matcher first,
then entries are found by the words of their titles, tags and messages, tolerant of typos and
partial messages.

The word index is built once per `Library` (no database): a vocabulary with trigram postings
finds close spellings, and `difflib` scores them.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.core import Library, diagnose
from app.core.knowledge import Signature
from app.core.models import Evidence
from app.errors import TraceloreError

MAX_QUERY = 8000  # characters: a traceback fits; a whole log belongs in the diagnosis form
MAX_TOKENS = 48  # distinct query words scored (a pasted traceback has many)
MAX_RESULTS = 15
RELATIVE_FLOOR = 0.3  # word results scoring under this share of the best one are noise
# When the matcher recognised the text, the reader has their answer: the word results after it
# are only the entries the recognised ones name as related (a pasted error line shares "error",
# "runtimeerror", "memory" with a dozen entries that have nothing to do with it).
MAX_RELATED = 4

# Where a word appears in an entry, and how much that says about the entry.
FIELD_WEIGHTS = {"id": 3.0, "title": 3.0, "tag": 3.0, "message": 2.0, "layer": 1.0, "summary": 0.6}
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were with".split()
)
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-case words of a text, without stop words and one-letter words."""
    return [w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in STOPWORDS]


def _trigrams(word: str) -> set[str]:
    padded = f"  {word} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def _squash(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


@dataclass(frozen=True)
class Result:
    """One entry found for a query, with why it was found."""

    signature: Signature
    how: str  # "matcher": its fingerprints match the text; "words": its words do
    score: float
    evidence: Evidence | None = None  # matcher results: the line that matched
    confidence: float | None = None
    words: tuple[str, ...] = ()  # word results: the entry's words that matched


@dataclass(frozen=True)
class Results:
    """What a search found: matcher results first, then word results."""

    query: str
    matched: tuple[Result, ...] = ()
    by_words: tuple[Result, ...] = ()
    corrected: tuple[tuple[str, str], ...] = ()  # (query word, the word it was read as)

    @property
    def all(self) -> tuple[Result, ...]:
        return self.matched + self.by_words


@dataclass
class SearchIndex:
    """Words of every entry, weighted by field and rarity; built once per library."""

    library: Library
    weights: dict[str, dict[str, float]] = field(default_factory=dict)  # word -> entry id -> field weight
    idf: dict[str, float] = field(default_factory=dict)
    grams: dict[str, set[str]] = field(default_factory=dict)  # trigram -> words
    phrases: dict[str, list[str]] = field(default_factory=dict)  # entry id -> squashed titles and messages

    @classmethod
    def build(cls, library: Library) -> SearchIndex:
        """Index every entry of a library."""
        index = cls(library)
        weights: dict[str, dict[str, float]] = defaultdict(dict)
        for sig in library.signatures.values():
            for name, text in _fields(sig):
                w = FIELD_WEIGHTS[name]
                for word in words(text):
                    weights[word][sig.id] = max(weights[word].get(sig.id, 0.0), w)
            index.phrases[sig.id] = [_squash(t) for n, t in _fields(sig) if n in ("title", "message")]
        n = max(len(library), 1)
        index.weights = dict(weights)
        index.idf = {w: math.log(1 + n / len(entries)) for w, entries in weights.items()}
        grams: dict[str, set[str]] = defaultdict(set)
        for word in weights:
            for g in _trigrams(word):
                grams[g].add(word)
        index.grams = dict(grams)
        return index

    def expand(self, token: str) -> list[tuple[str, float]]:
        """Vocabulary words a query word may mean, with a similarity in (0, 1]."""
        if token in self.weights:
            return [(token, 1.0)]
        out: list[tuple[str, float]] = []
        if len(token) < 3:
            return out
        counts: dict[str, int] = defaultdict(int)
        for g in _trigrams(token):
            for word in self.grams.get(g, ()):
                counts[word] += 1
        matcher = difflib.SequenceMatcher(b=token, autojunk=False)
        for word, shared in counts.items():
            if word == token or shared < 2:
                continue
            if word.startswith(token) and len(token) >= 4:
                out.append((word, 0.8))  # a word cut short: "watchd" for "watchdog"
                continue
            if len(token) < 4 or abs(len(word) - len(token)) > 2:
                continue
            matcher.set_seq1(word)
            if matcher.real_quick_ratio() < 0.78 or matcher.quick_ratio() < 0.78:
                continue
            ratio = matcher.ratio()
            if ratio >= 0.78:
                out.append((word, 0.85 * ratio))  # a typo: "memroy" for "memory"
        return out

    def search(self, query: str, *, exclude: Iterable[str] = ()) -> tuple[list[Result], list[tuple[str, str]]]:
        """Entries ranked by the query's words (and phrases), best first; plus the typo corrections used."""
        tokens = list(dict.fromkeys(words(query)))[:MAX_TOKENS]
        skip = set(exclude)
        scores: dict[str, float] = defaultdict(float)
        found: dict[str, set[str]] = defaultdict(set)
        corrected: list[tuple[str, str]] = []
        for token in tokens:
            best: dict[str, tuple[float, str]] = {}
            for word, similarity in self.expand(token):
                for sig_id, weight in self.weights[word].items():
                    value = similarity * weight * self.idf[word]
                    if value > best.get(sig_id, (0.0, ""))[0]:
                        best[sig_id] = (value, word)
            if token not in self.weights and best:
                top = max(best.values())[1]
                corrected.append((token, top))
            for sig_id, (value, word) in best.items():
                scores[sig_id] += value
                found[sig_id].add(word)
        squashed = _squash(query)
        if len(squashed) >= 8:
            for sig_id, phrases in self.phrases.items():
                if any(squashed in p or (len(p) >= 12 and p in squashed) for p in phrases):
                    scores[sig_id] += 10.0  # the query quotes a title or message (or is quoted by one)
        sigs = self.library.signatures
        ranked = sorted((i for i in scores if i not in skip and scores[i] > 0), key=lambda i: (-scores[i], i))
        floor = RELATIVE_FLOOR * scores[ranked[0]] if ranked else 0.0
        ranked = [i for i in ranked if scores[i] >= floor]  # drop the long tail of one shared common word
        results = [
            Result(sigs[i], "words", round(scores[i], 3), words=tuple(sorted(found[i]))) for i in ranked[:MAX_RESULTS]
        ]
        return results, corrected


def _fields(sig: Signature) -> Iterable[tuple[str, str]]:
    yield "id", sig.id.replace("_", " ")
    yield "title", sig.title
    for tag in sig.tags:
        yield "tag", tag.replace("_", " ")
        yield "tag", tag
    yield "layer", sig.layer.replace("_", " ")
    yield "summary", sig.summary
    for p in sig.all_patterns():
        if p.message:
            yield "message", p.message


def search(query: str, library: Library, index: SearchIndex) -> Results:
    """Find entries for a query: the matcher's candidates first, then entries by words."""
    query = query.strip()
    if not query:
        return Results(query)
    matched: list[Result] = []
    try:
        diagnosis = diagnose(query.encode("utf-8", "replace"), library, name="query")
    except TraceloreError:  # e.g. only blank lines: nothing for the matcher, words may still find it
        diagnosis = None
    if diagnosis is not None:
        for c in diagnosis.candidates:
            sig = library.signatures.get(c.id)
            if sig is not None:
                evidence = next(
                    (e for e in c.evidence if e.kind == "fingerprint"), c.evidence[0] if c.evidence else None
                )
                matched.append(Result(sig, "matcher", c.confidence, evidence=evidence, confidence=c.confidence))
    by_words, corrected = index.search(query, exclude=[r.signature.id for r in matched])
    if matched:
        related = {i for r in matched for i in r.signature.related}
        by_words = [r for r in by_words if r.signature.id in related][:MAX_RELATED]
    return Results(query, tuple(matched), tuple(by_words), tuple(corrected))
