"""Shared fixtures: the shipped library, migrated databases (SQLite always, PostgreSQL when
TRACELORE_TEST_DATABASE_URL is set) and real uvicorn servers on free ports."""

from __future__ import annotations

import gc
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.config import Settings
from app.core.knowledge.loading import Library, load_library
from app.store.db import make_engine
from app.store.migrate import upgrade
from tests.support import SIGNATURES, LiveServer, live_server, make_settings

PG_ENV = "TRACELORE_TEST_DATABASE_URL"
BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session", autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Commands and servers under test cache parsed signatures here, not in the user's ~/.cache."""
    path = tmp_path_factory.mktemp("cache")
    before = os.environ.get("TRACELORE_CACHE_DIR")
    os.environ["TRACELORE_CACHE_DIR"] = str(path)
    yield path
    if before is None:
        os.environ.pop("TRACELORE_CACHE_DIR", None)
    else:
        os.environ["TRACELORE_CACHE_DIR"] = before


@pytest.fixture(scope="module", autouse=True)
def collect_garbage_after_module() -> Iterator[None]:
    """Collect garbage as each module ends, so an unclosed connection or file fails the module that left it.

    Without this the collector runs whenever allocations say so, and the ResourceWarning of a
    connection one module leaked is raised in whichever later test happens to be running.
    """
    yield
    gc.collect()


@pytest.fixture(scope="session")
def signatures_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of signatures/ taken once, so every test (and the CLI) sees one library version.

    TRACELORE_TEST_SIGNATURES points at another folder to copy (e.g. a `git archive` of HEAD
    while signature files are being edited in the checkout).
    """
    root = tmp_path_factory.mktemp("library") / "signatures"
    shutil.copytree(os.environ.get("TRACELORE_TEST_SIGNATURES") or SIGNATURES, root)
    return root


@pytest.fixture(scope="session")
def library(signatures_dir: Path) -> Library:
    """The shipped signature library, loaded once."""
    return load_library(signatures_dir)


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once per session; tests copy it."""
    path = tmp_path_factory.mktemp("db") / "template.sqlite"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def sqlite_url(migrated_db: Path, tmp_path: Path) -> str:
    """A fresh, migrated SQLite database for one test."""
    db = tmp_path / "test.sqlite"
    shutil.copyfile(migrated_db, db)
    return f"sqlite:///{db}"


LOCAL_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def _local_postgres() -> str | None:
    """A PostgreSQL server on this machine's default port that lets `postgres` in, if there is one."""
    try:
        import psycopg

        with psycopg.connect(LOCAL_PG, connect_timeout=2):
            return LOCAL_PG
    except (ImportError, psycopg.Error):
        return None


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    """The PostgreSQL server for the PostgreSQL tests: TRACELORE_TEST_DATABASE_URL, else one found on
    localhost:5432; set the variable empty to run SQLite only. Tests that need it skip only when there is none."""
    url = os.environ.get(PG_ENV)
    if url is None:
        url = _local_postgres()
        if url is None:
            pytest.skip(
                f"no PostgreSQL: {PG_ENV} is not set and none answers on 127.0.0.1:5432 "
                "(start one, or set the variable to its URL)"
            )
    elif not url:
        pytest.skip(f"{PG_ENV} is set empty: SQLite only")
    return Settings(database_url=url).database_url


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say at the end of the run how many tests were skipped, and why, in a few lines."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        total = sum(reasons.values())
        terminalreporter.write_sep("-", f"{total} test{'' if total == 1 else 's'} skipped")
        for reason, n in sorted(reasons.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{n:5d}  {reason}")


@pytest.fixture(scope="session")
def make_pg_database(pg_server_url: str) -> Iterator[Callable[[], str]]:
    """Create empty PostgreSQL databases on the CI server (dropped at the end of the session)."""
    admin = make_engine(pg_server_url).execution_options(isolation_level="AUTOCOMMIT")
    created: list[str] = []

    def make() -> str:
        name = f"tracelore_test_{secrets.token_hex(6)}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        created.append(name)
        return make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)

    yield make
    with admin.connect() as conn:
        for name in created:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def pg_url(make_pg_database: Callable[[], str]) -> str:
    """A PostgreSQL database migrated to head, shared by the session's PostgreSQL tests."""
    url = make_pg_database()
    upgrade(url)
    return url


def database_for(backend: str, request: pytest.FixtureRequest, tmp: Path) -> str:
    """A migrated database on a backend: a fresh SQLite copy, or the session's PostgreSQL database."""
    if backend == "sqlite":
        db = tmp / "live.sqlite"
        shutil.copyfile(request.getfixturevalue("migrated_db"), db)
        return f"sqlite:///{db}"
    return str(request.getfixturevalue("pg_url"))


LIVE_UPLOAD_LIMIT = 256 << 10  # small, so the limits are cheap to test


@pytest.fixture(scope="module", params=BACKENDS)
def live(
    request: pytest.FixtureRequest, library: Library, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A real uvicorn server on a free port for a test module: once on SQLite, once on PostgreSQL."""
    tmp = tmp_path_factory.mktemp(f"live-{request.param}")
    settings = make_settings(database_for(request.param, request, tmp), tmp, max_upload_bytes=LIVE_UPLOAD_LIMIT)
    with live_server(settings, library) as server:
        yield server


@pytest.fixture
def client(live: LiveServer) -> Iterator[httpx.Client]:
    """An HTTP client for the module's live server."""
    with live.client() as c:
        yield c
