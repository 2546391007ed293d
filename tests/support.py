"""Helpers for web and store tests: a real uvicorn server in a thread, test settings."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from sqlalchemy import text

from app.config import Settings
from app.core.knowledge.loading import Library
from app.web.app import create_app
from app.web.state import state_of

REPO = Path(__file__).resolve().parents[1]
SIGNATURES = REPO / "signatures"
SAMPLES = REPO / "app" / "web" / "samples"
METRICS_TOKEN = "test-metrics"
METRICS_AUTH = {"Authorization": f"Bearer {METRICS_TOKEN}"}  # what /metrics asks of test servers


@dataclass
class LiveServer:
    """A real uvicorn server running create_app() in a thread."""

    url: str
    app: FastAPI

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)

    def count(self) -> int:
        """Rows in the diagnoses table."""
        with state_of(self.app).engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM diagnoses")).scalar_one())

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


@contextlib.contextmanager
def live_server(settings: Settings, library: Library) -> Iterator[LiveServer]:
    """Serve create_app(settings) with uvicorn on a free port until the block ends."""
    app = create_app(settings, library=library)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", ws="none", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", app)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def make_settings(database_url: str, tmp: Path, **overrides: Any) -> Settings:
    """Settings for a test server: the shipped library, small limits so limits are cheap to test."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "data_dir": tmp,
        "signatures_dir": SIGNATURES,
        "max_upload_bytes": 256 << 10,
        "max_in_flight": 4,
        "quota_anonymous": 100_000,  # tests of other things are not held up by the daily allowance
        "secret_key": "test-secret",
        "metrics_token": METRICS_TOKEN,
    }
    values.update(overrides)
    return Settings(**values)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_serve(proc: subprocess.Popen[str]) -> str:
    """Stop a `tracelore serve` subprocess as Ctrl+C does (killed if it takes over 30 s); its output."""
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


def start_serve(env: dict[str, str], port: int, *, workers: int | None = None) -> subprocess.Popen[str]:
    """`tracelore serve` in a subprocess on `port` with `env`, its output captured (wait_until_ready reads it)."""
    args = [sys.executable, "-m", "app", "serve", "--port", str(port)]
    if workers is not None:
        args += ["--workers", str(workers)]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_until_ready(proc: subprocess.Popen[str], url: str, *, seconds: float = 90) -> None:
    """Wait for a `tracelore serve` subprocess to answer /readyz; fail with its output if it dies."""
    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "server did not become ready"
        time.sleep(0.25)


def library_without(signatures: Path, ids: Iterable[str], into: Path) -> Path:
    """A copy of a signature library without some classes: their real logs become unknown failures."""
    root = into / "signatures"
    shutil.copytree(signatures, root)
    for sig_id in ids:
        next(root.rglob(f"{sig_id}.yaml")).unlink()
    return root
