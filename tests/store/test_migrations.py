"""The migrations create exactly what the models describe, and go down and up again, on both backends."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from app.store.db import make_engine
from app.store.migrate import alembic_config, current, downgrade, ours, upgrade
from app.store.tables import Base
from tests.conftest import BACKENDS


@pytest.fixture(params=BACKENDS)
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.sqlite'}"
    return str(request.getfixturevalue("make_pg_database")())


def _diff(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return list(compare_metadata(MigrationContext.configure(conn, opts={"include_name": ours}), Base.metadata))
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_models_and_migrations_agree_and_downgrade_works(empty_url: str) -> None:
    head = ScriptDirectory.from_config(alembic_config(empty_url)).get_current_head()
    assert current(empty_url) is None
    upgrade(empty_url)
    assert current(empty_url) == head
    assert _diff(empty_url) == []  # autogenerate would find nothing to do
    downgrade(empty_url, "base")
    assert current(empty_url) is None
    assert _tables(empty_url) <= {"alembic_version"}
    upgrade(empty_url)
    assert _diff(empty_url) == []


def test_instances_starting_together_migrate_one_at_a_time(make_pg_database: Callable[[], str]) -> None:
    url = make_pg_database()
    code = f"from app.store.migrate import upgrade; upgrade({url!r})"
    procs = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(3)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert _diff(url) == []
