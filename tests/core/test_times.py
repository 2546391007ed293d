"""Year-less log times (glog, c10, torchrun, syslog) take the job's year, never 1900."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from app.core.engine.diagnose import diagnose, diagnose_many
from app.core.engine.found import Position
from app.core.engine.prefixes import parse_prefixes
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis
from app.core.rendering.text import render_markdown, render_text
from app.core.times import Yearless, span, year_resolver
from app.errors import TraceloreError
from app.evaluation.corpus import load_corpus

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASES = CORPUS / "cases"
# torchrun's glog lines (no year) and Python logging's ISO times (2026) in one real log
MIXED = CASES / "gen-dist-shape-error-logging" / "log.txt"
# per-rank files whose only times are torchrun's year-less glog lines
YEARLESS = CASES / "gen-dist-two-node-store-host-dies"


def _first_glog_line(path: Path) -> str:
    return next(line for line in path.read_text().splitlines() if re.match(r"W\d{4} ", line))


def test_a_glog_time_is_yearless_until_the_job_gives_it_a_year() -> None:
    line = _first_glog_line(MIXED)
    time = parse_prefixes(line).time
    assert isinstance(time, Yearless)
    assert time.isoformat() == "--12-01T14:39:51.155000"


def test_29_february_parses_and_keeps_to_leap_years() -> None:
    # The real torchrun line of the corpus, dated 29 February instead of 1 December.
    line = _first_glog_line(MIXED).replace("W1201 ", "W0229 ", 1)
    time = parse_prefixes(line).time
    assert isinstance(time, Yearless) and (time.month, time.day) == (2, 29)
    assert year_resolver([time, datetime(2028, 3, 1)])(time) == datetime(2028, 2, 29, 14, 39, 51, 155000)
    assert year_resolver([time, datetime(2027, 6, 1)])(time).year == 2028  # never 29 February 2027
    assert Yearless.parse(time.isoformat()) == time


def test_a_job_that_crosses_new_year_gives_january_the_next_year() -> None:
    december, january = Yearless.at(12, 31, 23, 59, 58), Yearless.at(1, 1, 0, 0, 3)
    resolve = year_resolver([datetime(2026, 12, 31, 23, 59, 50), december, january])
    assert resolve(december) == datetime(2026, 12, 31, 23, 59, 58)
    assert resolve(january) == datetime(2027, 1, 1, 0, 0, 3)
    # With no year anywhere, December still comes before the January that follows it.
    wrapped = year_resolver([december, january])
    assert isinstance(wrapped(december), Yearless) and isinstance(wrapped(january), Yearless)
    assert wrapped(december) < wrapped(january)


def test_yearless_and_full_times_are_ordered_only_with_their_kind() -> None:
    yearless, full = Yearless.at(12, 1, 14, 0, 0), datetime(2026, 12, 1, 13, 0, 0)
    # Not comparable: the log's order decides (line 1 before line 2), not the placeholder year.
    assert Position(0, 1, yearless).before(Position(0, 2, full))
    assert Position(0, 1, full).before(Position(0, 2, yearless))
    assert Position(0, 2, Yearless.at(12, 1, 13, 0, 0)).before(Position(0, 1, yearless))


def test_a_log_with_full_dates_lends_its_year_to_the_glog_lines(shipped_library: Library) -> None:
    d = diagnose(MIXED, shipped_library)
    times = [t for c in d.candidates for t in (c.time, *(e.time for e in c.evidence)) if t is not None]
    assert times and all(not isinstance(t, Yearless) and t.year == 2026 for t in times)
    # The run starts at the first torchrun line (year-less in the log), not at the first ISO line.
    assert d.input.start == datetime(2026, 12, 1, 14, 39, 51, 155000)
    assert d.input.end is not None and d.input.end > d.input.start


def test_a_job_with_no_year_shows_none_in_every_format(shipped_library: Library) -> None:
    d = diagnose_many([(p.name, p) for p in sorted(YEARLESS.glob("*.log"))], shipped_library)
    assert isinstance(d.input.start, Yearless) and isinstance(d.input.end, Yearless)
    echo = next(c for c in d.candidates if c.id == "dist.child_failed")
    assert isinstance(echo.time, Yearless)
    body = d.model_dump_json()
    assert '"time":"--12-01T14:48:41.172000"' in body
    assert "1900" not in body and "1900" not in render_text(d) and "1900" not in render_markdown(d)
    assert "--12-01 14:48:41.172000" in render_text(d)
    again = Diagnosis.model_validate_json(body)
    assert again == d and isinstance(again.input.start, Yearless)


def test_a_stored_diagnosis_from_before_keeps_reading(shipped_library: Library) -> None:
    d = diagnose_many([(p.name, p) for p in sorted(YEARLESS.glob("*.log"))], shipped_library)
    old = d.model_dump_json().replace('"--12-01T', '"1900-12-01T')  # how year-less times were stored
    read = Diagnosis.model_validate_json(old)
    assert read == d and isinstance(read.input.start, Yearless)


_SHOWN_DATE = re.compile(r"\b(\d{4})-\d\d-\d\d[T ]\d\d:\d\d")


def test_no_output_of_the_corpus_shows_a_year_its_logs_did_not_give(shipped_library: Library) -> None:
    checked = 0
    for case in load_corpus(CORPUS):
        logs = b"".join(p.read_bytes() for p in case.logs).decode("utf-8", errors="replace")
        names = [p.name if len(case.logs) > 1 else None for p in case.logs]
        try:
            d = diagnose_many(list(zip(names, case.logs, strict=True)), shipped_library, threads=1)
        except TraceloreError:
            continue
        for output in (d.model_dump_json(), render_text(d), render_markdown(d)):
            years = {m[1] for m in _SHOWN_DATE.finditer(output)}
            assert all(year in logs for year in years), (case.id, years)
            assert "1900-" not in output, case.id
        checked += 1
    assert checked > 800


@pytest.mark.parametrize("text", ["--12-01T03:14:21.618403", "--02-29T00:00:00"])
def test_the_json_form_without_a_year_reads_back(text: str) -> None:
    assert Yearless.parse(text).isoformat() == text


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0.329, "329 ms"),
        (15.0, "15 s"),
        (588.0, "9 min 48 s"),
        (600.06, "10 min"),
        (7500, "2 h 5 min"),
        (90061, "1 d 1 h"),
    ],
)
def test_a_duration_reads_as_people_say_it(seconds: float, said: str) -> None:
    assert span(seconds) == said


def test_a_timeout_line_dates_the_start_of_the_collective_it_waited_in(shipped_library: Library) -> None:
    # "[rank0]:[E321 02:07:08.408271257 ...] ... ran for 600060 milliseconds before timing out." and
    # "[rank4]:[E321 02:07:08.414640780 ...] ... ran for 600067 milliseconds": the earliest start counts.
    d = diagnose(CASES / "gh-hiyouga-llamafactory-7396" / "log.txt", shipped_library)
    c = d.initiating
    assert c is not None and c.id == "nccl.watchdog_timeout"
    assert c.time == Yearless.at(3, 21, 2, 7, 8, 408271)
    assert c.began == Yearless.at(3, 21, 1, 57, 8, 347640)
    assert "began --03-21 01:57:08, 10 min earlier" in render_text(d)
    assert '"began":"--03-21T01:57:08.347640"' in d.model_dump_json()


def test_a_traceback_is_dated_by_the_timed_line_that_introduced_it(shipped_library: Library) -> None:
    # rank1.log: line 9 "2026-12-01 16:41:43,319 - ERROR - train - [rank1] training failed", then
    # the logged traceback, whose last line (22) is the gloo timeout and prints no time itself.
    logs = sorted((CASES / "gen-dist-per-rank-hang-logged").glob("rank*.log"))
    d = diagnose_many([(p.name, p) for p in logs], shipped_library, threads=1)
    first = d.initiating
    assert first is not None and (first.file, first.line) == ("rank1.log", 22)
    assert first.time == datetime(2026, 12, 1, 16, 41, 43, 319000)
    assert first.began == datetime(2026, 12, 1, 16, 41, 28, 319000)


def test_a_line_is_dated_only_by_a_line_of_its_own_rank(shipped_library: Library) -> None:
    # torchrun --tee: rank 1's "[default1]:[rank1]: FileNotFoundError" traceback prints no time, and
    # the only timed lines above it are the launcher's (no rank): they do not date a worker's line.
    d = diagnose(CASES / "gen-dist-missing-shard" / "log.txt", shipped_library)
    first = d.initiating
    assert first is not None and (first.id, first.rank, first.time) == ("data.file_not_found", 1, None)


def test_with_no_year_in_the_job_the_time_the_log_was_written_gives_one() -> None:
    written = datetime(2027, 1, 1, 0, 10)
    resolve = year_resolver([Yearless.at(12, 31, 23, 50, 0), Yearless.at(1, 1, 0, 5, 0)], written)
    assert resolve(Yearless.at(12, 31, 23, 50, 0)) == datetime(2026, 12, 31, 23, 50)
    assert resolve(Yearless.at(1, 1, 0, 5, 0)) == datetime(2027, 1, 1, 0, 5)
    # 29 February takes the last leap year that keeps it before the log was written.
    assert year_resolver([Yearless.at(2, 29, 1, 0, 0)], written)(Yearless.at(2, 29, 1, 0, 0)) == datetime(
        2024, 2, 29, 1
    )
    # A full date anywhere in the job wins over the file's time.
    full = year_resolver([Yearless.at(12, 1, 3, 0, 0), datetime(2025, 12, 1, 2, 0)], written)
    assert full(Yearless.at(12, 1, 3, 0, 0)) == datetime(2025, 12, 1, 3, 0)
