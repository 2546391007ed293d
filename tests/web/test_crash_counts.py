"""`kill -9` under load leaves no counted diagnosis that does not exist: a real `tracelore serve` on
SQLite and on PostgreSQL, killed while diagnoses are in flight; afterwards the daily counters add up to
the stored diagnoses, and a restarted server counts on from there."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from app.store.db import make_engine
from app.store.migrate import upgrade
from tests.support import SAMPLES, free_port, wait_until_ready

LOG = (SAMPLES / "ddp-cuda-oom.log").read_bytes() * 250  # about 1 MB: long enough to be caught mid-diagnosis
CLIENTS = 6


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'crash.sqlite'}"
    else:
        url = str(request.getfixturevalue("make_pg_database")())
    upgrade(url)
    return url


def _serve(database: str, tmp_path: Path, signatures_dir: Path) -> tuple[subprocess.Popen[str], str]:
    small = tmp_path / "signatures"
    if not small.exists():
        shutil.copytree(signatures_dir / "memory", small / "memory")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELORE_")}
    env.update(
        {
            "TRACELORE_DATABASE_URL": database,
            "TRACELORE_DATA_DIR": str(tmp_path / "data"),
            "TRACELORE_SIGNATURES_DIR": str(small),
            "TRACELORE_QUOTA_ANONYMOUS": "100000",
            "TRACELORE_MAX_IN_FLIGHT": str(CLIENTS * 2),
            "TRACELORE_SECRET_KEY": "crash-test",
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_ready(proc, url)
    return proc, url


def _counts(database: str) -> tuple[int, int]:
    engine = make_engine(database)
    try:
        with engine.connect() as conn:
            used = int(conn.execute(text("SELECT coalesce(sum(used), 0) FROM quota_usage")).scalar_one())
            stored = int(conn.execute(text("SELECT count(*) FROM diagnoses")).scalar_one())
    finally:
        engine.dispose()
    return used, stored


def test_kill_9_leaves_no_counted_diagnosis_missing(database: str, tmp_path: Path, signatures_dir: Path) -> None:
    proc, url = _serve(database, tmp_path, signatures_dir)
    answered: list[int] = []
    cut = [0]  # requests the kill left without an answer
    stop = threading.Event()

    def client() -> None:
        with httpx.Client(base_url=url, timeout=60) as c:
            while not stop.is_set():
                try:
                    answered.append(c.post("/api/v1/diagnoses", content=LOG).status_code)
                except httpx.ConnectError:  # the server was gone before this request was sent
                    return
                except httpx.TransportError:  # sent, never answered: in flight when the server died
                    cut[0] += 1
                    return

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        while len(answered) < CLIENTS and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # no shutdown, no rollback: the process is gone
        proc.wait(30)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        if proc.poll() is None:
            proc.kill()
    assert answered and set(answered) == {201}, answered
    assert cut[0] > 0, "the kill caught no request in flight; nothing was tested"
    used, stored = _counts(database)
    assert used == stored, f"{used} diagnoses counted, {stored} stored"
    assert stored >= len(answered)  # every acknowledged diagnosis is there

    # A restarted server counts on from the stored diagnoses.
    proc, url = _serve(database, tmp_path, signatures_dir)
    try:
        quota = httpx.get(f"{url}/api/v1/quota").json()
        assert quota["used"] == stored
        assert httpx.post(f"{url}/api/v1/diagnoses", content=LOG, timeout=60).status_code == 201
        assert _counts(database) == (stored + 1, stored + 1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
