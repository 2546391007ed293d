"""Short logs are screened by the patterns' atoms until the Set is built (app/core/knowledge/screen.py):
the same patterns are found, so the diagnosis is the same, on every log of the corpus."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.engine.diagnose import diagnose, diagnose_many
from app.core.knowledge.loading import Library, load_library
from app.core.knowledge.screen import SCREEN_BYTES, SCREEN_TOTAL, PatternSet
from app.core.patterns.re2calls import find
from app.evaluation.corpus import load_corpus
from tests.support import REPO, SIGNATURES

TWO_LINES = b"Traceback (most recent call last):\nRuntimeError: CUDA error: out of memory\n"


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory) -> Library:
    """The shipped library as a command loads it: from a warm parse cache."""
    cache = tmp_path_factory.mktemp("cache")
    assert not load_library(SIGNATURES, cache=cache).patterns.screening  # parsed: no atoms at hand yet
    library = load_library(SIGNATURES, cache=cache)
    assert library.patterns.screening
    return library


def fresh(library: Library) -> Library:
    return dataclasses.replace(library, patterns=library.patterns.restarted())


def slices(data: bytes, size: int = SCREEN_BYTES) -> list[bytes]:
    """Whole lines, at most `size` bytes a piece (a longer line alone), as a short log would be."""
    out, start = [], 0
    while start < len(data):
        end = data.rfind(b"\n", start, start + size) + 1 or data.find(b"\n", start + size) + 1 or len(data)
        out.append(data[start:end])
        start = end
    return out


def test_a_short_log_is_diagnosed_without_building_the_set(cached: Library) -> None:
    library = fresh(cached)
    d = diagnose(TWO_LINES, library)
    assert d.candidates[0].id == "cuda.oom"
    assert not library.patterns.built
    assert diagnose(TWO_LINES, fresh(cached)).model_dump_json(exclude={"seconds"}) == d.model_dump_json(
        exclude={"seconds"}
    )


def test_a_long_log_or_enough_short_ones_build_the_set(cached: Library) -> None:
    library = fresh(cached)
    diagnose(TWO_LINES * (SCREEN_BYTES // len(TWO_LINES) + 1), library)  # one chunk over the screen's size
    assert library.patterns.built
    library = fresh(cached)
    for _ in range(SCREEN_TOTAL // len(TWO_LINES) + 1):
        diagnose(TWO_LINES, library)
    assert library.patterns.built  # what a long-running process screens is bounded, then the Set serves it


def test_the_screen_keeps_every_pattern_that_matches_any_corpus_log(cached: Library) -> None:
    """Every pattern that matches a piece of a real log holds one of its atoms there (soundness),
    in pieces of about 1 KiB: a few lines, each pattern's atoms looked for near its match."""
    prefilter, compiled = cached.prefilter, cached.compiled
    missed: list[str] = []
    pieces = 0
    for case in load_corpus(REPO / "tests" / "corpus"):
        for path in case.logs:
            for piece in slices(path.read_bytes(), 1024):
                pieces += 1
                matching = {i for i in prefilter.Match(piece) or () if find(compiled[i], piece) >= 0}
                kept = set(cached.patterns.candidates(piece))
                missed += [f"{case.id}: {cached.regexes[i]}" for i in sorted(matching - kept)]
    assert pieces > 1500 and missed == []


def test_a_screened_diagnosis_equals_the_sets_on_every_short_corpus_log(cached: Library) -> None:
    built = fresh(cached)
    built.prefilter  # noqa: B018 - built now: every diagnosis below by the Set
    compared = 0
    for case in load_corpus(REPO / "tests" / "corpus"):
        logs = [(p.name, p.read_bytes()) for p in case.logs]
        if sum(len(data) for _, data in logs) > SCREEN_BYTES:
            continue
        screened = fresh(cached)
        got = diagnose_many(logs, screened)
        assert not screened.patterns.built, case.id
        want = diagnose_many(logs, built)
        assert got.model_dump_json(exclude={"seconds"}) == want.model_dump_json(exclude={"seconds"}), case.id
        compared += 1
    assert compared > 300


def test_a_library_not_from_the_cache_uses_the_set_from_the_start(tmp_path: Path) -> None:
    library = load_library(SIGNATURES)
    assert library.patterns.built and not library.patterns.screening
    assert isinstance(library.patterns, PatternSet) and diagnose(TWO_LINES, library).candidates[0].id == "cuda.oom"
