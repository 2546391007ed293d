"""The daily allowance is exact under concurrency: `tracelore serve --workers 3` on SQLite and on PostgreSQL,
a few hundred diagnoses at once for one API key whose allowance is N, and exactly N get through (none shed
with 503: at the default MAX_IN_FLIGHT a burst waits for a slot)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import text

from app.cli import main
from app.store.db import make_engine
from app.store.migrate import upgrade
from tests.support import free_port, start_serve, stop_serve, wait_until_ready

ALLOWANCE = 29
ATTEMPTS = 240
LOG = b"[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'quota.sqlite'}"
    else:
        url = str(request.getfixturevalue("make_pg_database")())
    upgrade(url)
    return url


async def _fire(url: str, key: str) -> Counter[int]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "text/plain"}
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60, headers=headers) as client:

        async def one() -> tuple[int, httpx.Headers]:
            r = await client.post("/api/v1/diagnoses?store=true", content=LOG)
            return r.status_code, r.headers

        results = await asyncio.gather(*(one() for _ in range(ATTEMPTS)))
    for status, headers in results:
        # Every counted or refused answer says where the caller stands.
        assert headers["x-ratelimit-limit"] == str(ALLOWANCE)
        assert headers["ratelimit-policy"] == f'"daily";q={ALLOWANCE};w=86400'
        if status == 429:
            assert int(headers["retry-after"]) > 0 and headers["x-ratelimit-remaining"] == "0"
    return Counter(status for status, _ in results)


def test_exactly_the_allowance_is_admitted_across_worker_processes(
    database: str, tmp_path: Path, signatures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACELORE_DATABASE_URL", database)
    created = CliRunner().invoke(main, ["admin", "create-key", "ci@example.org"])
    assert created.exit_code == 0, created.output
    key = created.stdout.strip().splitlines()[-1]

    small = tmp_path / "signatures" / "memory"  # a one-signature library keeps three workers' start-up cheap
    small.mkdir(parents=True)
    shutil.copyfile(signatures_dir / "memory" / "cuda.oom.yaml", small / "cuda.oom.yaml")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELORE_")}
    env.update(
        {
            "TRACELORE_DATABASE_URL": database,
            "TRACELORE_DATA_DIR": str(tmp_path / "data"),
            "TRACELORE_SIGNATURES_DIR": str(small.parent),
            "TRACELORE_QUOTA_FREE": str(ALLOWANCE),
            "TRACELORE_QUOTA_ANONYMOUS": "3",
            # The default MAX_IN_FLIGHT (4 per process): a burst of 64 clients waits its turn, none is shed.
            "TRACELORE_MAX_IN_FLIGHT": "4",
            "TRACELORE_SECRET_KEY": "workers-test",
        }
    )
    proc = start_serve(env, port, workers=3)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proc, url)
        # In a thread of its own: another test's browser may hold an event loop in this one.
        with ThreadPoolExecutor(1) as pool:
            statuses = pool.submit(lambda: asyncio.run(_fire(url, key))).result()
        # X-Forwarded-For is not trusted by default: made-up addresses share the peer's anonymous allowance.
        spoofed = [
            httpx.post(
                f"{url}/api/v1/diagnoses", content=LOG, headers={"X-Forwarded-For": f"203.0.113.{i}"}
            ).status_code
            for i in range(4)
        ]
        quota = httpx.get(f"{url}/api/v1/quota", headers={"Authorization": f"Bearer {key}"}).json()
    finally:
        stop_serve(proc)
    assert statuses == Counter({201: ALLOWANCE, 429: ATTEMPTS - ALLOWANCE})
    assert quota["used"] == ALLOWANCE and quota["remaining"] == 0
    assert spoofed == [201, 201, 201, 429]
    engine = make_engine(database)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT sum(used) FROM quota_usage")).scalar_one() == ALLOWANCE + 3
            assert conn.execute(text("SELECT count(*) FROM diagnoses")).scalar_one() == ALLOWANCE + 3
    finally:
        engine.dispose()
