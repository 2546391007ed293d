"""Alembic environment: the URL comes from the caller's Config (app.store.migrate) or from Settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from app.config import Settings
from app.store.db import make_engine
from app.store.migrate import ours
from app.store.tables import Base

config = context.config
target_metadata = Base.metadata
MIGRATION_LOCK = 7_301_944_512  # pg_advisory lock id: instances starting together migrate one at a time


def _url() -> str:
    url = config.attributes.get("url")
    return str(url) if url else Settings().effective_database_url


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def _migrate(conn: Connection) -> None:
    # render_as_batch: SQLite cannot ALTER most things; batch mode copies the table instead.
    context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True, include_name=ours)
    with context.begin_transaction():
        if conn.dialect.name == "postgresql":
            # DDL is transactional on PostgreSQL: the second instance waits, then finds nothing to do.
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK})
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # a test passed its own connection
        _migrate(connection)
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _migrate(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
