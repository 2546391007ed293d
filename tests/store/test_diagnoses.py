"""Store functions on the real engine and the real migrations, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from app.core.models import Window, WindowLine
from app.core.stored import StoredDiagnosis
from app.store.db import make_engine, make_sessionmaker
from app.store.diagnoses import (
    count_diagnoses,
    get_diagnosis,
    list_made_by,
    purge_expired,
    save_diagnosis,
)
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
        StoredDiagnosis.keeping(
            diagnosis,
            windows=[Window(file=None, lines=[WindowLine(no=6, text="Out of memory: Killed process 31877 (python)")])],
            input_bytes=1544,
            input_sha256="0" * 64,
        ),
        subject="anonymous",
        tier="free",
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


def test_the_record_save_returns_is_the_record_read_back(factory: sessionmaker[Session], library: Library) -> None:
    diagnosis = diagnose((SAMPLES / "oom-killed.log").read_bytes(), library)
    windows = [Window(file="train.log", lines=[WindowLine(no=6, text="Out of memory: Killed process 31877 (python)")])]
    with factory.begin() as session:
        saved = save_diagnosis(
            session,
            StoredDiagnosis.keeping(
                diagnosis, windows=windows, input_bytes=1544, input_sha256="0" * 64, log_gz=b"\x1f\x8b"
            ),
            subject="anonymous",
            tier="free",
            created_at=datetime.now(UTC),
        )
    with factory.begin() as session:
        read = get_diagnosis(session, saved.id)
    assert saved.delete_token and read is not None and read.delete_token is None
    assert saved.model_copy(update={"delete_token": None}) == read


def test_sqlite_connections_get_wal_and_a_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'pragmas.sqlite'}")
    try:
        with engine.connect() as conn:
            pragma = {
                name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")
            }
    finally:
        engine.dispose()
    # WAL: readers never wait for the writer; NORMAL: a commit does not wait for fsync (WAL keeps it durable
    # across a crash of the process); the busy timeout makes a second writer wait for the lock, not fail.
    assert pragma == {"journal_mode": "wal", "synchronous": 1, "busy_timeout": 10000, "foreign_keys": 1}


def test_an_account_lists_what_it_made_newest_first(factory: sessionmaker[Session], library: Library) -> None:
    now = datetime.now(UTC)
    logs = {
        "old": (SAMPLES / "oom-killed.log").read_bytes(),
        "new": (SAMPLES / "ddp-cuda-oom.log").read_bytes(),
        "nothing": b"all fine\n",
        "expired": (SAMPLES / "torn-checkpoint.log").read_bytes(),
    }
    ages = {"old": 2, "new": 0, "nothing": 1, "expired": 40}
    ids = {}
    with factory.begin() as session:
        for name, log in logs.items():
            ids[name] = save_diagnosis(
                session,
                StoredDiagnosis.keeping(
                    diagnose(log, library), windows=[], input_bytes=len(log), input_sha256="0" * 64
                ),
                subject="account:a1",
                tier="verified",
                created_at=now - timedelta(days=ages[name]),
            ).id
        _save(session, library, now)  # someone else's
    with factory.begin() as session:
        made = list_made_by(session, "account:a1", not_before=now - timedelta(days=30))
    assert [m.id for m in made] == [ids["new"], ids["nothing"], ids["old"]]
    assert [m.headline for m in made] == [
        "CUDA out of memory",
        "No known failure found",
        "Process killed by the host OOM killer",
    ]
    assert made[0].failure_id == "cuda.oom" and made[1].failure_id is None
    assert made[0].input_bytes == len(logs["new"])


def test_an_account_s_list_is_read_through_its_index(factory: sessionmaker[Session]) -> None:
    """The account page's query finds a subject's rows by index, not by reading every diagnosis."""
    statements: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if "FROM diagnoses" in statement:
            statements.append((statement, parameters))

    engine = factory.kw["bind"]
    event.listen(engine, "before_cursor_execute", capture)
    try:
        with factory.begin() as session:
            list_made_by(session, "account:a1", not_before=datetime.now(UTC) - timedelta(days=30))
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    ((statement, parameters),) = statements
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        cursor = raw.cursor()
        if engine.dialect.name == "sqlite":
            cursor.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
        else:
            cursor.execute("SET enable_seqscan = off")  # an empty table would be read whole anyway
            cursor.execute(f"EXPLAIN {statement}", parameters)
        plan = " ".join(str(row) for row in cursor.fetchall())
        cursor.close()
    assert "ix_diagnoses_subject_created_at" in plan, plan
