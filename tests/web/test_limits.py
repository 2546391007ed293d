"""Load shedding, readiness and storage settings, each on a server configured for it."""

from __future__ import annotations

import gzip
import threading
import time
from pathlib import Path

import httpx
from sqlalchemy import text

from app.config import Settings
from app.core.knowledge.loading import Library
from app.web.state import state_of
from tests.support import METRICS_AUTH, REPO, SAMPLES, live_server, make_settings

OOM = (SAMPLES / "ddp-cuda-oom.log").read_bytes()


def _in_flight(client: httpx.Client) -> int:
    for line in client.get("/metrics", headers=METRICS_AUTH).text.splitlines():
        if line.startswith("tracelore_diagnoses_in_flight "):
            return int(float(line.split()[1]))
    raise AssertionError("no in-flight gauge")


# A log that holds a diagnosis slot for well over a second even with the library warm: every public
# thread's paste of the corpus, one after the other (hundreds of different failures: many patterns
# located on many lines), cut at a line end to 4 MB so that the time it holds the slot does not grow
# with the corpus (some seconds on a quiet machine; it grows with the library). A log of one repeated
# line does not do: the matcher stops reading a pattern once the file has enough of it.
_PASTES = b"".join(p.read_bytes() for p in sorted((REPO / "tests" / "corpus" / "cases").glob("gh-*/log.txt"))) * 4
SLOW = _PASTES[: _PASTES.rindex(b"\n", 0, 4 << 20) + 1]
SLOW_WAIT = 180  # seconds the big diagnosis may take on a loaded machine (its request waits as long)
# Above it the anonymous and upload limits.
SLOW_LIMIT = max(32 << 20, 2 * len(SLOW))


def _one_slot(sqlite_url: str, tmp_path: Path, **overrides: object) -> Settings:
    """A server with one diagnosis slot, whose limits let SLOW in."""
    return make_settings(
        sqlite_url, tmp_path, max_in_flight=1, max_upload_bytes=SLOW_LIMIT, max_log_anonymous=SLOW_LIMIT, **overrides
    )


def test_beyond_max_in_flight_requests_get_503_quickly(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    settings = _one_slot(sqlite_url, tmp_path, retry_after=7, queue_seconds=0)
    with live_server(settings, library) as server, server.client() as client:
        results: list[int] = []
        slow = _hold_the_only_slot(client, results)
        started = time.monotonic()
        refused = client.post("/api/v1/diagnoses", content=OOM)
        elapsed = time.monotonic() - started
        slow.join(SLOW_WAIT)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "7"
        assert refused.headers["content-type"] == "application/problem+json"
        assert elapsed < 1.0
        assert results == [200]
        assert server.count() == 0
        # Once the slot is free, the next request is served.
        assert client.post("/api/v1/diagnoses", content=OOM).status_code == 201


def _hold_the_only_slot(client: httpx.Client, results: list[int]) -> threading.Thread:
    """Start a diagnosis of a large log and return once it holds the server's only slot."""
    slow = threading.Thread(
        target=lambda: results.append(
            client.post("/api/v1/diagnoses?store=false", content=SLOW, timeout=SLOW_WAIT).status_code
        )
    )
    slow.start()
    deadline = time.monotonic() + 20
    while _in_flight(client) == 0:
        assert time.monotonic() < deadline and slow.is_alive(), "the big diagnosis never started"
        time.sleep(0.01)
    return slow


def test_a_request_beyond_max_in_flight_waits_for_a_slot(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    settings = _one_slot(sqlite_url, tmp_path, queue_seconds=120)
    with live_server(settings, library) as server, server.client() as client:
        results: list[int] = []
        slow = _hold_the_only_slot(client, results)
        queued = client.post("/api/v1/diagnoses", content=OOM)
        slow.join(SLOW_WAIT)
        # Served once the slot is free, not shed: the burst is only late.
        assert queued.status_code == 201, queued.text
        assert results == [200]
        assert server.count() == 1


def test_a_request_that_waits_too_long_gets_503(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    settings = _one_slot(sqlite_url, tmp_path, queue_seconds=0.3, retry_after=9)
    with live_server(settings, library) as server, server.client() as client:
        results: list[int] = []
        slow = _hold_the_only_slot(client, results)
        started = time.monotonic()
        refused = client.post("/api/v1/diagnoses", content=OOM)
        elapsed = time.monotonic() - started
        slow.join(SLOW_WAIT)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "9"
        assert refused.json()["type"] == "/problems/overloaded"
        assert 0.3 <= elapsed  # it waited its turn first
        assert results == [200]
        with state_of(server.app).sessionmaker() as session:  # the refused request was given back
            assert session.scalar(text("SELECT coalesce(sum(used), 0) FROM quota_usage")) == 1


def test_readyz_is_503_when_the_database_is_unreachable(tmp_path: Path, library: Library) -> None:
    settings = make_settings("postgresql+psycopg://nobody@127.0.0.1:1/none", tmp_path)
    with live_server(settings, library) as server, server.client() as client:
        assert client.get("/healthz").status_code == 200
        r = client.get("/readyz")
        assert r.status_code == 503 and r.headers["retry-after"]
        assert r.json()["type"] == "/problems/not-ready"


def test_store_log_keeps_the_whole_log(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    settings = make_settings(sqlite_url, tmp_path, store_log=True, retention_days=0)
    with live_server(settings, library) as server, server.client() as client:
        created = client.post(
            "/api/v1/diagnoses", content=gzip.compress(OOM), headers={"Content-Encoding": "gzip"}
        ).json()
        log = client.get(f"/api/v1/diagnoses/{created['id']}/log")
        assert log.status_code == 200 and log.content == OOM
        home = client.get("/", headers={"Accept": "text/html"}).text
        assert "keep the whole log" in home and "kept until an operator deletes them" in home
        page = client.get(f"/d/{created['id']}", headers={"Accept": "text/html"}).text
        assert f"/api/v1/diagnoses/{created['id']}/log" in page


def test_store_log_keeps_every_log_of_a_job_under_its_name(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    settings = make_settings(sqlite_url, tmp_path, store_log=True)
    job = REPO / "tests" / "corpus" / "cases" / "gen-dist-per-rank-index-error"
    files = [(p.name, p.read_bytes()) for p in sorted(job.glob("rank*.log"))]
    with live_server(settings, library) as server, server.client() as client:
        created = client.post("/api/v1/diagnoses", files=[("file", f) for f in reversed(files)])
        assert created.status_code == 201, created.text
        log = client.get(f"/api/v1/diagnoses/{created.json()['id']}/log")
        # In name order whatever the upload order, each under a `==> name <==` line as `tail` prints them.
        assert log.content == b"".join(b"==> %s <==\n" % name.encode() + data for name, data in files)


def test_base_url_makes_the_permalinks(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    settings = make_settings(sqlite_url, tmp_path, base_url="https://tracelore.example.org/")
    with live_server(settings, library) as server, server.client() as client:
        created = client.post("/api/v1/diagnoses", content=OOM).json()
        assert created["url"] == f"https://tracelore.example.org/d/{created['id']}"
