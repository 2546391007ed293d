"""Every shipped signature keeps its promises: it loads, its examples behave, nothing steals them."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core import diagnose, load_library
from app.core.library import Library, load_signatures
from app.core.lint import check_examples, lint, load_taxonomy
from app.core.signature import Signature

SIGNATURES = Path(__file__).resolve().parents[1] / "signatures"
LOADED, LOAD_ISSUES = load_signatures(SIGNATURES)
BY_ID = {sig.id: (path, sig) for path, sig in LOADED}


@pytest.fixture(scope="module")
def library() -> Library:
    return load_library(SIGNATURES)


def test_the_library_loads_without_issues() -> None:
    assert [str(i) for i in LOAD_ISSUES] == []


def test_lint_is_clean() -> None:
    report = lint(SIGNATURES, taxonomy=load_taxonomy(SIGNATURES / "taxonomy.yaml"))
    assert [str(i) for i in report.issues] == []


def test_every_taxonomy_id_has_a_file() -> None:
    taxonomy = load_taxonomy(SIGNATURES / "taxonomy.yaml")
    assert sorted(set(taxonomy.layers) - set(BY_ID)) == []


@pytest.mark.parametrize("sig_id", sorted(BY_ID))
def test_examples(sig_id: str, library: Library) -> None:
    issues = list(check_examples(library, {sig_id: BY_ID[sig_id]}))
    assert [i.message for i in issues] == []


@pytest.mark.parametrize("sig_id", sorted(BY_ID))
def test_knowledge_is_complete(sig_id: str) -> None:
    sig: Signature = BY_ID[sig_id][1]
    assert len(sig.faq) >= 3, "at least three FAQ entries"
    assert len(sig.examples.match) >= 2 or sig.role == "collateral", "two real match examples"
    assert all(r.url.startswith("https://") for r in sig.references)
    assert set(sig.related) <= set(BY_ID)


def test_no_signature_steals_another_ones_examples(library: Library) -> None:
    """The confusion check over all pairs: a match example's top candidate is its own signature."""
    stolen = []
    for sig_id, (_, sig) in sorted(BY_ID.items()):
        for example in sig.examples.match:
            top = diagnose(example.log.encode(), library).candidates
            if sig.role != "collateral" and top and top[0].id != sig_id:
                stolen.append(f"{sig_id} <- {top[0].id}")
    assert stolen == []
