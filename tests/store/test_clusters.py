"""Clusters of unknown lines on the real engine and migrations, on both backends, while
diagnoses are deleted under the summary (as their owners and the retention purge do)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from app.core.stored import StoredDiagnosis
from app.store.db import make_engine, make_sessionmaker
from app.store.diagnoses import delete_diagnosis, save_diagnosis
from app.store.learning import clusters
from tests.conftest import BACKENDS, database_for

# A failure no signature knows, twice in one log: its line is kept as an unknown one.
UNKNOWN = b"step 10 loss 2.31\nFrobnicatorError: the flux capacitor of shard 7 is out of phase\nTraceback ends\n"


@pytest.fixture(params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    made = make_engine(database_for(request.param, request, tmp_path))
    with made.begin() as conn:  # PostgreSQL's database is shared by the session's tests
        conn.execute(text("DELETE FROM unknown_lines"))
    yield made
    made.dispose()


def _save(factory: sessionmaker[Session], library: Library) -> str:
    diagnosis = diagnose(UNKNOWN, library)
    kept = StoredDiagnosis.keeping(diagnosis, windows=[], input_bytes=len(UNKNOWN), input_sha256="0" * 64)
    with factory.begin() as session:
        saved = save_diagnosis(session, kept, subject="anonymous", tier="free", created_at=datetime.now(UTC))
    return saved.id


def test_a_cluster_whose_diagnosis_is_deleted_while_it_is_read_is_left_out(engine: Engine, library: Library) -> None:
    factory = make_sessionmaker(engine)
    doomed = _save(factory, library)
    with factory.begin() as session:
        (before,) = clusters(session)
    assert "FrobnicatorError" in before.template and before.members == [doomed]

    deleted: list[str] = []

    def delete_after_the_count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # Once the lines are counted, the owner deletes the diagnosis from another connection.
        if "GROUP BY" in statement and not deleted:
            with factory.begin() as other:
                assert delete_diagnosis(other, doomed)
            deleted.append(doomed)

    with factory.begin() as session:
        event.listen(session.connection(), "after_cursor_execute", delete_after_the_count)
        found = clusters(session)
    assert deleted == [doomed]
    # The next statement sees the deletion (PostgreSQL's read committed; SQLite's driver holds
    # no read transaction between statements): the cluster is gone, not half read.
    assert found == [], found
    with factory.begin() as session:
        assert clusters(session) == []
