"""Engine and session factory; SQLite gets WAL and a busy timeout, PostgreSQL a pre-ping."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers run while one writer writes; busy_timeout makes writers wait, not fail.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def make_engine(url: str) -> Engine:
    """Create an engine for a SQLAlchemy URL; SQLite files get their folder created."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # Named by process in pg_stat_activity, so an operator (or a test) sees which process holds what.
    return create_engine(url, pool_pre_ping=True, connect_args={"application_name": f"tracelore {os.getpid()}"})


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """A session factory; the caller owns the transaction (`with factory.begin() as session`)."""
    return sessionmaker(engine, expire_on_commit=False)
