"""Library entries whose wording is nearest to an error line no signature recognises.

When the failure that started a run is not one the library knows, the entries that read
most like its line are still a useful lead. They are offered as similar, never as matched:
BM25 over each entry's messages (its patterns' and its raise sites'), titles and symptom
meanings, words only (numbers, paths, hex and hosts are masked), with a floor so that noise
suggests nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import regex

from app.core.knowledge.schema import Signature

_WORD = regex.compile(r"[a-z][a-z0-9_]{2,40}")
_MASK = regex.compile(r"(?:[\w.-]*[/\\][\w./\\-]*)|0x[0-9a-f]+|\b\d[\d.:,]*\b")
# Words every traceback and log carries: they say nothing about which failure it is.
_STOP = frozenset(
    "the and for with from that this was not are but has have had its into when then than none "
    "error errors exception traceback most recent call last file line raise raised runtimeerror "
    "valueerror assertionerror failed failure please see above below info warning warn self args kwargs "
    "return".split()
)
K1, B = 1.2, 0.75  # the usual BM25 constants
MIN_SCORE = 4.0  # below this the nearest entry shares too little with the line to be a lead
LIMIT = 3


def words(text: str) -> list[str]:
    """The words of a text that can tell failures apart."""
    masked = _MASK.sub(" ", text.lower())
    return [w for w in _WORD.findall(masked) if w not in _STOP]


def _document(sig: Signature) -> list[str]:
    parts = [sig.title, sig.id.replace(".", " ").replace("_", " ")]
    for p in sig.all_patterns():
        parts += [p.message or "", p.means or ""]
    parts += [site.message for site in sig.raise_sites]
    return words(" ".join(parts))


@dataclass(frozen=True)
class SimilarIndex:
    """BM25 statistics of a library's entries, built once per library."""

    terms: Mapping[str, Counter[str]]  # entry id -> term counts
    lengths: Mapping[str, int]
    idf: Mapping[str, float]
    average: float

    @classmethod
    def build(cls, signatures: Iterable[Signature]) -> SimilarIndex:
        terms = {s.id: Counter(_document(s)) for s in signatures}
        n = len(terms) or 1
        df: Counter[str] = Counter(t for counts in terms.values() for t in counts)
        idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        lengths = {k: sum(v.values()) for k, v in terms.items()}
        return cls(terms, lengths, idf, sum(lengths.values()) / n)

    def nearest(self, text: str, *, limit: int = LIMIT) -> list[tuple[str, float]]:
        """Entry ids nearest to the text, best first, with their scores (those above the floor)."""
        query = set(words(text))
        scored = []
        for sid, counts in self.terms.items():
            norm = K1 * (1 - B + B * self.lengths[sid] / (self.average or 1))
            score = sum(self.idf[t] * counts[t] * (K1 + 1) / (counts[t] + norm) for t in query if t in counts)
            if score >= MIN_SCORE:
                scored.append((sid, round(score, 2)))
        return sorted(scored, key=lambda s: (-s[1], s[0]))[:limit]
