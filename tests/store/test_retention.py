"""The periodic purge on SQLite and PostgreSQL: old daily counters and spent sign-in links go too."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.jobs.retention import COUNTER_DAYS, purge_once
from app.quota import counters
from app.store import accounts
from app.store.db import make_engine, make_sessionmaker
from app.store.tables import LoginTokenRow
from tests.conftest import BACKENDS, database_for
from tests.support import make_settings

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, sessionmaker[Session]]]:
    url = database_for(request.param, request, tmp_path)
    engine = make_engine(url)
    yield url, make_sessionmaker(engine)
    engine.dispose()


@pytest.mark.parametrize("retention_days", [30, 0])
def test_purge_deletes_counters_older_than_a_week_even_when_diagnoses_are_kept_forever(
    database: tuple[str, sessionmaker[Session]], tmp_path: Path, retention_days: int
) -> None:
    url, sessions = database
    subject = f"test:purge:{retention_days}:{id(sessions)}"
    ages = (0, 1, COUNTER_DAYS - 1, COUNTER_DAYS, 40)
    with sessions.begin() as session:
        for age in ages:
            day = NOW.date() - timedelta(days=age)
            assert counters.consume(session, subject=subject, tier="free", day=day, limit=5) == 1
    purged = purge_once(sessions, make_settings(url, tmp_path, retention_days=retention_days), now=NOW)
    assert purged.counters >= 2
    with sessions.begin() as session:
        kept = {age for age in ages if counters.used(session, subject=subject, day=NOW.date() - timedelta(days=age))}
    assert kept == {0, 1, COUNTER_DAYS - 1}


def test_purge_deletes_spent_sign_in_links_once_they_no_longer_count(
    database: tuple[str, sessionmaker[Session]], tmp_path: Path
) -> None:
    url, sessions = database
    email = f"purge-{id(sessions)}@example.org"
    two_hours_ago = NOW - timedelta(hours=2)
    with sessions.begin() as session:
        # A recent link that has expired still counts towards the hourly limit: kept.
        accounts.create_login_token(session, email, now=NOW - timedelta(minutes=20), lifetime=timedelta(minutes=15))
        accounts.create_login_token(session, email, now=two_hours_ago, lifetime=timedelta(minutes=15))  # expired
        used = accounts.create_login_token(session, email, now=two_hours_ago, lifetime=timedelta(hours=3))
        accounts.create_login_token(session, email, now=two_hours_ago, lifetime=timedelta(hours=3))  # still valid
    with sessions.begin() as session:
        assert accounts.use_login_token(session, used, now=two_hours_ago + timedelta(minutes=1)) is not None

    def left() -> list[tuple[datetime, datetime]]:
        with sessions.begin() as session:
            rows = session.execute(
                select(LoginTokenRow.created_at, LoginTokenRow.expires_at)
                .where(LoginTokenRow.email == email)
                .order_by(LoginTokenRow.created_at, LoginTokenRow.expires_at)
            )
            # SQLite hands back naive datetimes; everything stored is UTC.
            return [(c.replace(tzinfo=UTC), e.replace(tzinfo=UTC)) for c, e in rows]

    assert len(left()) == 4
    purged = purge_once(sessions, make_settings(url, tmp_path), now=NOW)
    assert purged.login_tokens >= 2
    assert left() == [
        (two_hours_ago, two_hours_ago + timedelta(hours=3)),  # unused and valid
        (NOW - timedelta(minutes=20), NOW - timedelta(minutes=5)),  # expired, but sent within the hour
    ]
