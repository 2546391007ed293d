"""What one POST /api/v1/diagnoses does to the database and the worker threads (behaviour, never timing)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event, select

from app.core.knowledge.loading import Library
from app.store.tables import QuotaUsageRow
from app.web import diagnosis_service
from app.web.gate import Gate
from app.web.state import state_of
from tests.support import SAMPLES, live_server, make_settings

OOM = (SAMPLES / "ddp-cuda-oom.log").read_bytes()


@pytest.fixture
def events(sqlite_url: str, tmp_path: Path, library: Library) -> Iterator[tuple[Any, list[tuple[int, int, str]]]]:
    """A live server on SQLite and the statements and commits it runs, by connection, in order."""
    settings = make_settings(sqlite_url, tmp_path)
    seen: list[tuple[int, int, str]] = []
    with live_server(settings, library) as server:
        engine = state_of(server.app).engine

        def statement(conn: Any, _cursor: Any, sql: str, *_args: Any) -> None:
            seen.append(
                (id(conn.connection.dbapi_connection), threading.get_ident(), sql.split("(")[0].strip().upper())
            )

        def commit(conn: Any) -> None:
            seen.append((id(conn.connection.dbapi_connection), threading.get_ident(), "COMMIT"))

        event.listen(engine, "before_cursor_execute", statement)
        event.listen(engine, "commit", commit)
        with server.client() as client:
            assert client.post("/api/v1/diagnoses", content=OOM).status_code == 201  # warm: secret, caches
            seen.clear()
            yield client, seen


def test_a_stored_diagnosis_is_one_transaction_for_the_row_and_the_count(
    events: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.web import api

    client, seen = events
    with_url = api.with_url

    def answer(*args: Any, **kwargs: Any) -> Any:
        seen.append((0, threading.get_ident(), "ANSWER"))
        return with_url(*args, **kwargs)

    monkeypatch.setattr(api, "with_url", answer)
    made = client.post("/api/v1/diagnoses", content=OOM)
    assert made.status_code == 201
    writes = [sql for _, _, sql in seen if sql.startswith(("INSERT", "UPDATE", "DELETE"))]
    # The row, what it teaches (the failure it named: a CUDA OOM, no unexplained line) and the count.
    assert writes == ["INSERT INTO DIAGNOSES", "INSERT INTO DIAGNOSIS_FAILURES", "INSERT INTO QUOTA_USAGE"]
    # They commit together (a crash leaves all or none), right after the statements, in one worker
    # thread, before the answer is built: the write lock is held for these statements, not for the
    # rest of the request.
    at = next(i for i, (_, _, sql) in enumerate(seen) if sql == "INSERT INTO DIAGNOSES")
    conn, thread = seen[at][:2]
    assert seen[at + 1] == (conn, thread, "INSERT INTO DIAGNOSIS_FAILURES")
    assert seen[at + 2] == (conn, thread, "INSERT INTO QUOTA_USAGE")
    assert seen[at + 3] == (conn, thread, "COMMIT")
    assert seen[at + 4][2] == "ANSWER"
    assert client.get(made.headers["location"]).status_code == 200


def test_a_diagnosis_not_stored_writes_only_the_count(events: Any) -> None:
    client, seen = events
    assert client.post("/api/v1/diagnoses?store=false", content=OOM).status_code == 200
    writes = [sql for _, _, sql in seen if sql.startswith(("INSERT", "UPDATE", "DELETE"))]
    assert writes == ["INSERT INTO QUOTA_USAGE"]


def test_a_failed_save_counts_nothing(
    sqlite_url: str, tmp_path: Path, library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(diagnosis_service, "save_diagnosis", broken)
    settings = make_settings(sqlite_url, tmp_path)
    with live_server(settings, library) as server, server.client() as client:
        failed = client.post("/api/v1/diagnoses", content=OOM)
        assert failed.status_code == 500 and failed.json()["charged"] is False
        with state_of(server.app).sessionmaker() as session:
            assert not session.scalar(select(QuotaUsageRow.used))
        assert server.count() == 0


def test_the_gate_runs_at_most_one_diagnosis_per_thread_and_queues_the_rest(
    sqlite_url: str, tmp_path: Path, library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(sqlite_url, tmp_path, max_in_flight=4)
    running, peak, lock = [0], [0], threading.Lock()
    keep = diagnosis_service.keep

    def counted(*args: Any, **kwargs: Any) -> Any:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            return keep(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(diagnosis_service, "keep", counted)
    with live_server(settings, library) as server:
        state_of(server.app).gate = Gate(4, 5, threads=1)
        results: list[int] = []

        def post() -> None:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                results.append(client.post("/api/v1/diagnoses", content=OOM * 20).status_code)

        posts = [threading.Thread(target=post) for _ in range(4)]
        for t in posts:
            t.start()
        for t in posts:
            t.join(120)
        # Admitted requests wait for the thread instead of being refused; one diagnoses at a time.
        assert results == [201] * 4
        assert peak[0] == 1
        assert server.count() == 4


def test_the_gate_has_no_more_threads_than_it_admits() -> None:
    assert Gate(2, 5, threads=8).threads == 2
    assert Gate(16, 5, threads=2).threads == 2
    assert 1 <= Gate(16, 5).threads <= 16


@pytest.mark.parametrize("root_path", ["", "/tracelore"])
def test_diagnosis_urls_are_what_url_for_gives(
    root_path: str, sqlite_url: str, tmp_path: Path, library: Library
) -> None:
    from starlette.requests import Request

    from app.web.app import create_app
    from app.web.urls import diagnosis_url

    app = create_app(make_settings(sqlite_url, tmp_path), library=library)
    scope = {
        "type": "http",
        "app": app,
        "method": "GET",
        "path": "/",
        "root_path": root_path,
        "scheme": "https",
        "server": ("tracelore.example.org", 8443),
        "headers": [(b"host", b"tracelore.example.org:8443")],
        "query_string": b"",
    }
    request = Request(scope)
    for route in ("read_diagnosis", "diagnosis_page", "read_diagnosis"):  # the second lookup is the cached one
        assert diagnosis_url(request, route, "Ab-c_9") == str(request.url_for(route, diagnosis_id="Ab-c_9"))
    state_of(app).engine.dispose()
