"""Store functions on the real engine and the real migrations, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.core.diagnose import diagnose
from app.core.library import Library
from app.store.db import make_engine, make_sessionmaker
from app.store.diagnoses import Window, WindowLine, count_diagnoses, get_diagnosis, purge_expired, save_diagnosis
from tests.conftest import BACKENDS, database_for
from tests.support import SAMPLES


@pytest.fixture(params=BACKENDS)
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(database_for(request.param, request, tmp_path))
    yield make_sessionmaker(engine)
    engine.dispose()


def _save(session: Session, library: Library, created_at: datetime) -> str:
    diagnosis = diagnose((SAMPLES / "oom-killed.log").read_bytes(), library)
    record = save_diagnosis(
        session,
        diagnosis=diagnosis,
        windows=[Window(file=None, lines=[WindowLine(no=6, text="Out of memory: Killed process 31877 (python)")])],
        subject="anonymous",
        tier="free",
        input_bytes=1544,
        input_sha256="0" * 64,
        created_at=created_at,
    )
    return record.id


def test_a_saved_diagnosis_reads_back_identical(factory: sessionmaker[Session], library: Library) -> None:
    now = datetime.now(UTC)
    with factory.begin() as session:
        diagnosis_id = _save(session, library, now)
    with factory.begin() as session:
        record = get_diagnosis(session, diagnosis_id)
    assert record is not None
    assert record.diagnosis == diagnose((SAMPLES / "oom-killed.log").read_bytes(), library)
    assert record.windows[0].lines[0].no == 6 and not record.has_log
    assert abs(record.created_at - now) < timedelta(seconds=1)


def test_a_failed_request_stores_nothing(factory: sessionmaker[Session], library: Library) -> None:
    with factory.begin() as session:
        before = count_diagnoses(session)
    with pytest.raises(RuntimeError), factory.begin() as session:
        _save(session, library, datetime.now(UTC))
        raise RuntimeError("the request failed after saving")
    with factory.begin() as session:
        assert count_diagnoses(session) == before


def test_expired_diagnoses_are_hidden_then_purged(factory: sessionmaker[Session], library: Library) -> None:
    now = datetime.now(UTC)
    with factory.begin() as session:
        old = _save(session, library, now - timedelta(days=40))
        fresh = _save(session, library, now)
    cutoff = now - timedelta(days=30)
    with factory.begin() as session:
        assert get_diagnosis(session, old, not_before=cutoff) is None
        assert get_diagnosis(session, fresh, not_before=cutoff) is not None
        assert purge_expired(session, before=cutoff) >= 1
    with factory.begin() as session:
        assert get_diagnosis(session, old) is None and get_diagnosis(session, fresh) is not None
