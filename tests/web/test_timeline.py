"""The layout of the job picture: waits said as people say them, many ranks folded, marks in their lanes."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.engine.diagnose import diagnose, diagnose_many
from app.core.knowledge.loading import Library
from app.web.diagnosis_view import TimelineEntry, _timeline
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


CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "cases"


@pytest.mark.parametrize("case", ["gen-ckpt-not-found-rank-local-torchrun", "gen-ckpt-truncated-zip-small-einval"])
def test_the_first_failure_is_marked_at_the_line_its_heading_states(library: Library, case: str) -> None:
    # The traceback frames above a failure's message are the same occurrence: they were drawn as
    # "the same failure again" at an earlier line, with no first failure marked at all.
    d = diagnose((CORPUS / case / "log.txt").read_bytes(), library)
    first = d.initiating
    assert first is not None
    (row,) = [t for t in _timeline(d) if t.candidate is first and t.rank == first.rank]
    assert row.line == first.line
    picture = job_picture(d, _timeline(d))
    assert picture is not None
    (mark,) = [m for m in picture.marks if m.kind == "initiating"]
    assert (mark.rank, mark.line) == (first.rank, first.line)
    assert all(m.line > first.line for m in picture.marks if m.kind == "repeat")


def test_a_single_process_log_without_times_is_not_drawn(library: Library) -> None:
    d = diagnose((CORPUS / "gen-ckpt-truncated-pickle-dump" / "log.txt").read_bytes(), library)
    assert d.initiating is not None and _timeline(d)
    assert job_picture(d, _timeline(d)) is None


def test_line_numbers_of_several_files_are_never_one_axis(library: Library) -> None:
    oom = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.15 GiB"
    watchdog = (
        b"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, "
        b"NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600089 milliseconds before timing out."
    )
    files = [("rank0.log", b"step 9\n" * 5 + watchdog + b"\n"), ("rank1.log", b"step 9\n" + oom + b"\n")]
    d = diagnose_many(files, library, threads=1)
    events = _timeline(d)
    assert len({e.file for e in events}) > 1 and not any(e.time for e in events)
    assert job_picture(d, events) is None


def test_every_rank_of_the_world_gets_a_lane(library: Library) -> None:
    log = b"[2024-06-14 11:10:00,000] INFO: world_size=4\n" + failure_cascade(2)
    d = diagnose(log, library)
    picture = job_picture(d, _timeline(d))
    assert picture is not None
    assert {r for lane in picture.lanes for r in lane.ranks} >= {0, 1, 2, 3}


def test_an_echo_drawn_before_its_cause_says_why(library: Library) -> None:
    d = diagnose(failure_cascade(8), library)
    first = d.initiating
    echo = next(c for c in d.candidates if c.role == "collateral")
    assert first is not None
    events = [TimelineEntry(None, 2, 3, echo), TimelineEntry(None, 5, first.line, first)]
    picture = job_picture(d, events)
    assert picture is not None
    (early,) = [m for m in picture.marks if m.kind == "collateral"]
    assert "printed before its cause" in early.title
