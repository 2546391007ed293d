"""Leads: when nothing in a log is recognised, the failure of the labelled logs most like it."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from app.core import diagnose
from app.core.knowledge.loading import NEIGHBOURS_FILE, Library, load_library, read_neighbours
from app.core.knowledge.neighbours import LazyNeighbours, NeighbourIndex
from app.core.rendering.text import render_markdown, render_text
from app.core.rendering.verdict import verdict

WIDGET = "https://github.com/example/widgets/issues/1"
GIZMO = "https://github.com/example/gizmos/issues/2"
SPROCKET = "https://github.com/example/sprockets/issues/3"

# Three labelled logs whose words no signature knows: each a failure of a made-up component.
DOCS = [
    (
        "gh-example-widgets-1",
        WIDGET,
        "cuda.oom",
        "loading frobnicator shards\nFrobnicatorError: widget arena exhausted while packing quux tensors\n",
    ),
    (
        "gh-example-gizmos-2",
        GIZMO,
        "storage.disk_full",
        "writing gizmo snapshot\nGizmoError: spool device rejected the zorblax segment write\n",
    ),
    (
        "gh-example-sprockets-3",
        SPROCKET,
        "cuda.oom",
        "warming sprocket cache\nFrobnicatorError: widget arena exhausted at sprocket quux stage\n",
    ),
]
UNKNOWN = b"epoch 1 started\nFrobnicatorError: widget arena exhausted while packing quux buffers\n"


@pytest.fixture(scope="module")
def index() -> NeighbourIndex:
    return NeighbourIndex.build(DOCS)


@pytest.fixture(scope="module")
def led(library: Library, index: NeighbourIndex) -> Library:
    return dataclasses.replace(library, neighbours=LazyNeighbours.of(index))


def test_the_nearest_logs_are_those_sharing_the_rare_words(index: NeighbourIndex) -> None:
    near = index.nearest(UNKNOWN.decode())
    assert [n.case for n in near] == ["gh-example-widgets-1", "gh-example-sprockets-3"]
    assert near[0].similarity > near[1].similarity >= 0.15


def test_a_log_sharing_nothing_has_no_neighbour(index: NeighbourIndex) -> None:
    assert index.nearest("all quiet on the training front\n") == []


def test_the_vote_sums_the_neighbours_of_each_failure(index: NeighbourIndex, library: Library) -> None:
    vote = index.vote(UNKNOWN.decode(), library.signatures)
    assert vote is not None and vote.expected == "cuda.oom"
    assert [n.source for n in vote.neighbours] == [WIDGET, SPROCKET]
    assert vote.score == pytest.approx(sum(n.similarity for n in vote.neighbours), abs=0.002)
    # Failures the library has no entry for are not offered.
    assert index.vote(UNKNOWN.decode(), {"storage.disk_full": object()}) is None


def test_left_out_sources_never_vote(index: NeighbourIndex) -> None:
    near = index.without([WIDGET]).nearest(UNKNOWN.decode())
    assert [n.source for n in near] == [SPROCKET]


def test_the_index_survives_its_json(index: NeighbourIndex, tmp_path: Path) -> None:
    path = tmp_path / NEIGHBOURS_FILE
    path.write_text(json.dumps(index.to_json()))
    again = read_neighbours(path)
    assert again is not None
    assert again.nearest(UNKNOWN.decode()) == index.nearest(UNKNOWN.decode())


@pytest.mark.parametrize("text", ["", "{not json", '{"format": 99, "idf": {}, "logs": []}', '{"format": 1}'])
def test_a_missing_or_unreadable_index_gives_no_leads(tmp_path: Path, text: str) -> None:
    path = tmp_path / NEIGHBOURS_FILE
    if text:
        path.write_text(text)
    assert read_neighbours(path) is None


def test_a_library_without_an_index_offers_no_lead(library: Library) -> None:
    bare = dataclasses.replace(library, neighbours=LazyNeighbours.of(None))
    d = diagnose(UNKNOWN, bare)
    assert d.candidates == [] and d.unrecognised_start is not None


def test_an_unrecognised_log_gets_a_possible_lead_naming_the_threads(led: Library) -> None:
    d = diagnose(UNKNOWN, led)
    (lead,) = d.candidates
    assert (lead.id, lead.basis, lead.band, lead.role) == ("cuda.oom", "neighbours", "possible", "initiating")
    assert WIDGET in lead.why and SPROCKET in lead.why and GIZMO not in lead.why
    # The line whose words weigh most in the logs that voted is its evidence.
    (evidence,) = lead.evidence
    assert evidence.line == 2 and evidence.text.startswith("FrobnicatorError")
    # The unrecognised line is still shown as such: the lead does not pretend to recognise it.
    assert d.unrecognised_start is not None and d.unrecognised_start.line == 2
    assert "a lead, not a match" in verdict(d)
    assert "LEAD (not recognised; like other logs)" in render_text(d)
    assert "A lead, not a match:" in render_markdown(d)


def test_a_recognised_failure_gets_no_lead(led: Library) -> None:
    oom = led.signatures["cuda.oom"].examples.match[0].log.encode()
    d = diagnose(UNKNOWN + oom, led)
    assert all(c.basis == "signature" for c in d.candidates)
    assert d.candidates[0].id == "cuda.oom"


def test_a_run_that_finished_gets_no_lead(led: Library) -> None:
    finished = UNKNOWN + b"{'train_runtime': 120.5, 'train_samples_per_second': 8.1, 'epoch': 3.0}\n"
    d = diagnose(finished, led)
    assert d.ending is not None and d.ending.state == "completed"
    assert d.candidates == []


def test_the_shipped_library_reads_its_index_only_when_it_needs_a_lead(signatures_dir: Path) -> None:
    library = load_library(signatures_dir)
    oom = library.signatures["cuda.oom"].examples.match[0].log.encode()
    diagnose(oom, library)
    assert not library.neighbours.loaded  # recognised: the index was never read
    diagnose(UNKNOWN, library)
    assert library.neighbours.get() is not None and len(library.neighbours.get().logs) > 1000


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("[18:39:51.660] [error] training_manager.cpp:562  Training failed: widget arena exhausted", True),
        ('time="2024-05-06T14:09:55Z" level=error msg="widget arena exhausted"', True),
        ("error: widget arena exhausted while packing quux tensors", True),
        ("ImportError: /opt/venv/lib/libwidget.so: undefined symbol: _ZN6widget5arenaEv", True),
        ("Killed", True),
        ("train.sh: line 12:  4242 Killed                  python train.py", True),
        ("[info] errors seen so far: 0", False),
        ("error_rate: 0.013 after epoch 3", False),
        ("Killed 3 stale workers before the restart", False),
    ],
)
def test_error_lines_of_other_forms_are_error_lines(library: Library, line: str, error: bool) -> None:
    """C++ and Go loggers' lower-case levels, an "error:" prefix, the linker's and the shell's refusals."""
    hits = [library.regexes[i] for i in library.kinds["error"] if re.search(library.regexes[i], line)]
    assert bool(hits) is error, hits
