"""The learning summary reads only what is new, on both backends with the real migrations: each run
counts the diagnoses stored since the last one; deleting or purging takes a diagnosis off again; a run
killed with SIGKILL half-way is finished by the next, every failure counted once; a new library checks
the clusters seen before once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library, load_library
from app.core.stored import StoredDiagnosis
from app.jobs.learning import summarise
from app.jobs.retention import purge_once
from app.store.db import make_engine, make_sessionmaker
from app.store.diagnoses import delete_diagnosis, save_diagnosis
from app.store.learning import all_entry_stats, clusters
from app.store.migrate import upgrade
from app.store.tables import DiagnosisFailureRow, FailureDayRow
from tests.conftest import BACKENDS
from tests.support import REPO, library_without, make_settings

OOM = (REPO / "app" / "web" / "samples" / "ddp-cuda-oom.log").read_bytes()
CASES = REPO / "tests" / "corpus" / "cases"
TRUNCATED = ("gh-media-smart-vedastr-72", "gh-pytorch-vision-138")


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of its own, migrated (the statistics count every row in it)."""
    if request.param == "sqlite":
        made = f"sqlite:///{tmp_path / 'summary.sqlite'}"
    else:
        made = str(request.getfixturevalue("make_pg_database")())
    upgrade(made)
    return made


@pytest.fixture
def engine(url: str) -> Iterator[Engine]:
    made = make_engine(url)
    yield made
    made.dispose()


def _save(factory: sessionmaker[Session], library: Library, log: bytes, *, at: datetime | None = None) -> str:
    kept = StoredDiagnosis.keeping(diagnose(log, library), windows=[], input_bytes=len(log), input_sha256="0" * 64)
    with factory.begin() as session:
        return save_diagnosis(session, kept, subject="anonymous", tier="free", created_at=at or datetime.now(UTC)).id


def _initiating(factory: sessionmaker[Session], sig: str) -> int | None:
    with factory.begin() as session:
        stats = all_entry_stats(session, min_count=1).get(sig)
    return stats.initiating if stats else None


def _recount_matches(engine: Engine) -> tuple[dict[tuple[str, str, str], int], dict[tuple[str, str, str], int]]:
    """The per-day counts summed, against a count of every failure row from scratch."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                DiagnosisFailureRow.signature_id,
                DiagnosisFailureRow.role,
                func.coalesce(DiagnosisFailureRow.caused_by, ""),
                func.count(),
            ).group_by(DiagnosisFailureRow.signature_id, DiagnosisFailureRow.role, DiagnosisFailureRow.caused_by)
        ).all()
        days = conn.execute(
            select(
                FailureDayRow.signature_id,
                FailureDayRow.role,
                FailureDayRow.caused_by,
                func.sum(FailureDayRow.diagnoses),
            )
            .group_by(FailureDayRow.signature_id, FailureDayRow.role, FailureDayRow.caused_by)
            .having(func.sum(FailureDayRow.diagnoses) != 0)
        ).all()
    return {(s, r, c): n for s, r, c, n in rows}, {(s, r, c): int(n) for s, r, c, n in days}


def test_each_summary_counts_only_the_diagnoses_stored_since_the_last(engine: Engine, library: Library) -> None:
    factory = make_sessionmaker(engine)
    ids = [_save(factory, library, OOM) for _ in range(3)]
    first = diagnose(OOM, library).candidates[0].id
    with factory.begin() as session:
        rows = session.scalar(select(func.count()).select_from(DiagnosisFailureRow))
    summary = summarise(factory, library, now=datetime.now(UTC), window_days=30)
    assert summary.counted == rows and summary.stats >= 1
    assert _initiating(factory, first) == 3
    again = summarise(factory, library, now=datetime.now(UTC), window_days=30)
    assert (again.counted, again.checked) == (0, 0)  # nothing new: nothing read
    _save(factory, library, OOM)
    assert summarise(factory, library, now=datetime.now(UTC), window_days=30).counted == rows // 3
    assert _initiating(factory, first) == 4

    # The owner deletes one: it is taken off at once, and the next summary shows it.
    with factory.begin() as session:
        assert delete_diagnosis(session, ids[0])
    summarise(factory, library, now=datetime.now(UTC), window_days=30)
    assert _initiating(factory, first) == 3
    assert _recount_matches(engine)[0] == _recount_matches(engine)[1]
    # The retention purge takes the rest; a diagnosis outside the window is not counted.
    settings = make_settings(str(engine.url.render_as_string(hide_password=False)), Path("."), retention_days=1)
    assert purge_once(factory, settings, now=datetime.now(UTC) + timedelta(days=2), batch=2).diagnoses == 3
    assert summarise(factory, library, now=datetime.now(UTC), window_days=30).stats == 0
    _save(factory, library, OOM, at=datetime.now(UTC) - timedelta(days=40))
    assert summarise(factory, library, now=datetime.now(UTC), window_days=30).stats == 0


def test_a_summary_killed_half_way_is_finished_by_the_next(url: str, engine: Engine, library: Library) -> None:
    factory = make_sessionmaker(engine)
    for _ in range(150):
        _save(factory, library, OOM)
    with engine.connect() as conn:
        total = conn.execute(text("SELECT count(*) FROM diagnosis_failures")).scalar_one()
    # One failure a transaction, so the kill lands between commits with work left.
    script = (
        "import sys, datetime, pathlib\n"
        "from app.core.knowledge.loading import load_library\n"
        "from app.jobs.learning import summarise\n"
        "from app.store.db import make_engine, make_sessionmaker\n"
        "lib = load_library(pathlib.Path(sys.argv[2]))\n"
        "print('go', flush=True)\n"
        "summarise(make_sessionmaker(make_engine(sys.argv[1])), lib, now=datetime.datetime.now(datetime.UTC),"
        " window_days=30, batch=1)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, url, str(REPO / "signatures")], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "go\n"
    deadline = time.monotonic() + 60
    counted = 0
    while counted < total // 4:
        assert proc.poll() is None and time.monotonic() < deadline
        with engine.connect() as conn:
            counted = conn.execute(text("SELECT count(*) FROM diagnosis_failures WHERE counted")).scalar_one()
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    with engine.connect() as conn:
        left = conn.execute(text("SELECT count(*) FROM diagnosis_failures WHERE NOT counted")).scalar_one()
    assert 0 < left < total  # killed with work done and work left
    summary = summarise(factory, library, now=datetime.now(UTC), window_days=30)
    assert summary.counted == left
    rows, days = _recount_matches(engine)
    assert rows == days  # every failure counted exactly once


def test_a_new_library_checks_the_clusters_seen_before_once(
    engine: Engine, library: Library, signatures_dir: Path, tmp_path: Path
) -> None:
    reduced = load_library(library_without(signatures_dir, ["data.corrupt_image"], tmp_path))
    factory = make_sessionmaker(engine)
    for case in TRUNCATED:
        _save(factory, reduced, (CASES / case / "log.txt").read_bytes())
    first = summarise(factory, reduced, now=datetime.now(UTC), window_days=30)
    assert first.checked >= 2 and first.resolved == []
    assert summarise(factory, reduced, now=datetime.now(UTC), window_days=30).checked == 0
    with factory.begin() as session:
        unresolved = len(clusters(session))
    upgraded = summarise(factory, library, now=datetime.now(UTC), window_days=30)
    assert upgraded.checked == unresolved and ("data.corrupt_image" in {sig for _, sig in upgraded.resolved})
    assert summarise(factory, library, now=datetime.now(UTC), window_days=30).checked == 0
