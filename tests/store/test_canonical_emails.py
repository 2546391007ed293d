"""Accounts made before addresses were stored canonically: the migration gives them their mailbox's
canonical spelling, merges none silently, and sign-in and the admin commands still find them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from app.store import accounts
from app.store.db import make_engine, make_sessionmaker
from app.store.migrate import upgrade
from tests.conftest import BACKENDS

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
def url_at_0003(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    else:
        make: Callable[[], str] = request.getfixturevalue("make_pg_database")
        url = make()
    upgrade(url, "0003")
    return url


def test_old_accounts_take_the_canonical_spelling(url_at_0003: str) -> None:
    engine = make_engine(url_at_0003)
    try:
        with engine.begin() as conn:
            for n, email in enumerate(
                ["j.smith+ci@gmail.com", "ann.lee@googlemail.com", "an.nlee@gmail.com", "b.o+x@example.org"]
            ):
                conn.execute(
                    text("INSERT INTO accounts (id, email, tier, created_at) VALUES (:id, :email, 'pro', :now)"),
                    {"id": f"a{n}", "email": email, "now": NOW},
                )
        upgrade(url_at_0003)
        with engine.connect() as conn:
            emails = dict(conn.execute(text("SELECT id, email FROM accounts")).all())
        assert emails == {
            "a0": "jsmith@gmail.com",
            "a1": "ann.lee@googlemail.com",  # two accounts for one mailbox: both left as they were
            "a2": "an.nlee@gmail.com",
            "a3": "b.o+x@example.org",  # a provider not known to ignore tags and dots
        }
        with make_sessionmaker(engine).begin() as session:
            # Any spelling finds the migrated account; an unmerged one by its own spelling.
            assert accounts.find_account(session, "J.Smith@gmail.com").id == "a0"  # type: ignore[union-attr]
            assert accounts.find_account(session, "Ann.Lee@googlemail.com").id == "a1"  # type: ignore[union-attr]
            assert accounts.ensure_account(session, "jsmith+other@googlemail.com", now=NOW).tier == "pro"
            assert accounts.set_tier(session, "j.s.m.i.t.h@gmail.com", "verified") is not None
            assert accounts.find_account(session, "bo@example.org") is None
    finally:
        engine.dispose()
