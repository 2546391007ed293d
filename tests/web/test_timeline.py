"""The layout of the job picture: waits said as people say them, many ranks folded, marks in their lanes."""

from __future__ import annotations

import pytest

from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from app.web.pages import TimelineEntry, _timeline
from app.web.timeline import MAX_LANES, duration, job_picture
from bench.loggen import failure_cascade


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0.4, "0.4 s"),
        (3, "3 s"),
        (42, "42 s"),
        (588, "9 min 48 s"),
        (600, "10 min"),
        (7500, "2 h 5 min"),
        (90000, "1 d 1 h"),
    ],
)
def test_waits_are_said_as_people_say_them(seconds: float, said: str) -> None:
    assert duration(seconds) == said


def test_a_64_rank_job_folds_its_echoing_ranks_and_keeps_the_failing_one(library: Library) -> None:
    log = b"[rank5]:[2024-06-14 11:10:12,000] INFO: step 9\n" + failure_cascade(64).replace(
        b"[rank5]: torch.Out", b"[rank5]:[2024-06-14 11:10:12,500] ERROR: torch.Out"
    )
    d = diagnose(log, library)
    picture = job_picture(d, _timeline(d))
    assert picture is not None
    labels = [lane.label for lane in picture.lanes]
    assert "rank 5" in labels and len(picture.lanes) <= MAX_LANES + 1
    lane_of = {r: lane for lane in picture.lanes for r in lane.ranks}
    for mark in picture.marks:
        assert lane_of[mark.rank].y == mark.y, f"{mark.title} is not in its rank's lane"
    (first,) = [m for m in picture.marks if m.kind == "initiating"]
    assert first.rank == 5 and all(m.x > first.x for m in picture.marks if m.kind == "collateral")
    assert [w.label for w in picture.waits][:1] == ["9 min 48 s later"]
    assert len(picture.columns) <= 6, "echoes over a minute share a column"


def test_nothing_to_draw_without_candidates(library: Library) -> None:
    d = diagnose(b"all fine\n", library)
    assert job_picture(d, _timeline(d)) is None


def test_past_twelve_ranks_the_echoing_ones_share_a_lane(library: Library) -> None:
    d = diagnose(failure_cascade(8), library)
    first = d.initiating
    echo = next(c for c in d.candidates if c.role == "collateral")
    assert first is not None
    events = [TimelineEntry(None, 5, first.line, first)]
    events += [TimelineEntry(None, r, 100 + r, echo) for r in range(40) if r != 5]
    picture = job_picture(d, events)
    assert picture is not None
    assert len(picture.lanes) == MAX_LANES
    folded = picture.lanes[-1]
    assert folded.label == f"{len(folded.ranks)} more ranks" and 5 not in folded.ranks
    assert sorted(r for lane in picture.lanes for r in lane.ranks) == list(range(40))
