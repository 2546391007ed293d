"""Accounts, sign-in links, keys and the daily counter in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.quota import counters
from app.quota.tiers import Usage, next_reset, next_tier, tier_table
from app.store import accounts
from app.store.db import make_engine, make_sessionmaker
from tests.conftest import BACKENDS, database_for

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(database_for(request.param, request, tmp_path))
    yield make_sessionmaker(engine)
    engine.dispose()


def test_the_counter_never_admits_more_than_the_limit_across_threads(sessions: sessionmaker[Session]) -> None:
    subject = f"test:{id(sessions)}:{datetime.now(UTC).timestamp()}"
    admitted: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        for _ in range(10):
            try:
                with sessions.begin() as session:
                    used = counters.consume(session, subject=subject, tier="free", day=NOW.date(), limit=25)
                if used is not None:
                    admitted.append(used)
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sorted(admitted) == list(range(1, 26))
    with sessions.begin() as session:
        counters.refund(session, subject=subject, day=NOW.date())
        assert counters.used(session, subject=subject, day=NOW.date()) == 24
        assert counters.consume(session, subject=subject, tier="free", day=NOW.date(), limit=0) is None
        assert counters.used(session, subject=subject, day=date(2026, 12, 1)) == 0


def test_sign_in_links_work_once_and_expire(sessions: sessionmaker[Session]) -> None:
    email = f"Link-{id(sessions)}@Example.org"
    with sessions.begin() as session:
        token = accounts.create_login_token(session, email, now=NOW, lifetime=timedelta(minutes=15))
        late = accounts.create_login_token(session, email, now=NOW, lifetime=timedelta(minutes=15))
    with sessions.begin() as session:
        assert accounts.use_login_token(session, late, now=NOW + timedelta(minutes=16)) is None
        account = accounts.use_login_token(session, token, now=NOW + timedelta(minutes=1))
        assert account is not None and account.email == email.lower() and account.tier == "verified"
        assert account.verified_at is not None
        assert accounts.use_login_token(session, token, now=NOW + timedelta(minutes=2)) is None
        assert accounts.recent_login_tokens(session, email, since=NOW - timedelta(hours=1)) == 2


def test_keys_are_stored_as_hashes_and_can_be_revoked(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        account = accounts.ensure_account(session, f"keys-{id(sessions)}@example.org", now=NOW)
        assert account.tier == "free" and account.verified_at is None
        key, secret = accounts.create_api_key(session, account.id, name="CI", now=NOW)
    assert accounts.well_formed_key(secret) and not accounts.well_formed_key(
        secret[:-1] + ("y" if secret.endswith("x") else "x")
    )
    assert key.prefix == secret[:12]
    with sessions.begin() as session:
        found = accounts.key_account(session, secret, now=NOW)
        assert found is not None and found[1].id == account.id and found[0].last_used_at == NOW
        assert accounts.revoke_api_key(session, "tlk_", now=NOW) is None  # ambiguous or unknown: nothing
        assert accounts.revoke_api_key(session, key.prefix, now=NOW, account_id="someone-else") is None
        assert accounts.revoke_api_key(session, key.prefix, now=NOW) is not None
    with sessions.begin() as session:
        assert accounts.key_account(session, secret, now=NOW) is None


def test_tiers_come_from_settings_and_point_upwards() -> None:
    table = tier_table(Settings(quota_free=20, max_upload_bytes=1 << 20, max_log_pro=300 << 20))
    assert [t.daily for t in table.values()] == [3, 20, 50, 5000]
    assert table["pro"].max_log_bytes == 1 << 20  # never more than the server accepts
    assert next_tier(table, "anonymous").name == "verified"  # type: ignore[union-attr]
    assert next_tier(table, "verified").name == "pro"  # type: ignore[union-attr]
    assert next_tier(table, "pro") is None
    assert next_reset(datetime(2026, 12, 31, 23, 59, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)
    usage = Usage(tier=table["free"], used=20, now=datetime(2026, 11, 30, 23, 59, 59, 500000, tzinfo=UTC))
    assert usage.remaining == 0 and usage.seconds_to_reset == 1
    assert usage.headers()["RateLimit"] == '"daily";r=0;t=1'
