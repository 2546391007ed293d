"""Every shipped signature keeps its promises: it loads, its examples behave, nothing steals them."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core import diagnose, load_library
from app.core.authoring.lint import check_examples, lint, load_taxonomy
from app.core.knowledge.loading import Library, load_signatures
from app.core.knowledge.schema import Signature

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
    # A candidate is a failure sampled threads showed and no signature covers yet; it must not have a file.
    assert sorted(set(taxonomy.layers) - set(BY_ID) - taxonomy.candidates) == []
    assert sorted(taxonomy.candidates & set(BY_ID)) == []


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


WORKER_INDEX_ERROR = """\
IndexError: Caught IndexError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/torch/utils/data/_utils/fetch.py", line 52, in fetch
    data = [self.dataset[idx] for idx in possibly_batched_index]
  File "/home/user/project/data.py", line 31, in __getitem__
{frames}
"""
EMBEDDING = """\
    feats = self.embed(torch.tensor(ids))
  File "/usr/lib/python3/site-packages/torch/nn/functional.py", line 2237, in embedding
    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)
IndexError: index out of range in self"""
LIST_INDEX = """\
    return self.samples[idx], self.labels[idx]
IndexError: list index out of range"""


@pytest.mark.parametrize(
    ("frames", "expected", "absent"),
    [
        (EMBEDDING, "data.index_out_of_range", "data.dataset_index_error"),
        (LIST_INDEX, "data.dataset_index_error", "data.index_out_of_range"),
    ],
    ids=["embedding-id", "dataset-list"],
)
def test_a_worker_index_error_is_named_by_its_original_error(
    frames: str, expected: str, absent: str, library: Library
) -> None:
    """The same "Caught IndexError" wrapper: an embedding id is not the Dataset's own list indexing."""
    candidates = diagnose(WORKER_INDEX_ERROR.format(frames=frames).encode(), library).candidates
    assert candidates[0].id == expected
    assert candidates[0].band == "likely"
    assert absent not in {c.id for c in candidates}


def test_a_bare_worker_index_error_is_likely_the_datasets(library: Library) -> None:
    """Only the wrapper line pasted: an IndexError in a worker's fetch, most likely the Dataset's."""
    candidates = diagnose(b"IndexError: Caught IndexError in DataLoader worker process 3.\n", library).candidates
    assert [(c.id, c.band, c.facts.get("worker")) for c in candidates] == [("data.dataset_index_error", "likely", "3")]
