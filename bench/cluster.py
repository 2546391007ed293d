"""The deployed topology without containers: `tracelore serve` instances on one PostgreSQL database
behind Caddy, which runs `deploy/Caddyfile` (the file compose.yaml mounts). Used by
tests/web/test_cluster.py and bench/capacity.py.

Each instance is a process group of its own (the server and its uvicorn workers), so it can be
killed with SIGKILL whole, as a host that dies. The proxy connects to the instances from
127.0.0.1, the only address they trust X-Forwarded-* from; a client that should count as
another address connects from another loopback address (127.0.0.2, ...).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parents[1]
CADDYFILE = REPO / "deploy" / "Caddyfile"
PROXY_ADDRESS = "127.0.0.1"  # where the proxy's connections to the instances come from
METRICS_TOKEN = "cluster-metrics"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Instance:
    """One `tracelore serve` process group."""

    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pids(self) -> set[int]:
        """The server and its workers: every process of its group."""
        found = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.getpgid(int(entry)) == self.proc.pid:
                        found.add(int(entry))
                except ProcessLookupError:
                    continue
        return found

    def kill(self) -> None:
        """SIGKILL to the whole instance, as when its host dies."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def served(self) -> dict[str, int]:
        """Responses of `POST /api/v1/diagnoses` by status, from the instance's own /metrics."""
        body = httpx.get(f"{self.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).text
        counts: dict[str, int] = {}
        pattern = r'^tracelore_http_requests_total\{method="POST",route="/api/v1/diagnoses",status="(\d+)"\} (\S+)$'
        for status, value in re.findall(pattern, body, re.M):
            counts[status] = counts.get(status, 0) + int(float(value))
        return counts


@dataclass
class Cluster:
    database_url: str
    instances: list[Instance]
    proxy_port: int
    proxy: subprocess.Popen[bytes] | None
    folder: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """Where clients go: the proxy (or the first instance, without one)."""
        return f"http://127.0.0.1:{self.proxy_port}" if self.proxy else self.instances[0].url

    def sql(self, query: str, **params: object) -> list[tuple[object, ...]]:
        engine = create_engine(self.database_url)
        try:
            with engine.begin() as conn:
                result = conn.execute(text(query), params)
                return [tuple(row) for row in result] if result.returns_rows else []
        finally:
            engine.dispose()


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} stopped: {log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not become ready: {log.read_text()[-3000:]}")
        time.sleep(0.25)


def start_instance(env: dict[str, str], folder: Path, name: str) -> Instance:
    port = free_port()
    log = folder / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(port)],
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    instance = Instance(port, proc, log)
    _wait_ready(instance.url, proc, log)
    return instance


@contextmanager
def cluster(
    database_url: str, folder: Path, *, instances: int = 2, workers: int = 2, proxy: bool = True, **settings: str
) -> Iterator[Cluster]:
    """Start `instances` x `workers` servers on one database, and Caddy in front when `proxy` (and installed).

    `settings` are TRACELORE_* values (lower-case names, e.g. learn_every="10").
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELORE_")}
    env.update(
        TRACELORE_DATABASE_URL=database_url,
        TRACELORE_WORKERS=str(workers),
        TRACELORE_DATA_DIR=str(folder),
        TRACELORE_CACHE_DIR=os.environ.get("TRACELORE_CACHE_DIR", str(folder / "cache")),
        TRACELORE_FORWARDED_ALLOW_IPS=PROXY_ADDRESS,
        TRACELORE_SECRET_KEY="cluster-secret",
        TRACELORE_METRICS_TOKEN=METRICS_TOKEN,
    )
    env.update({f"TRACELORE_{k.upper()}": v for k, v in settings.items()})
    started: list[Instance] = []
    caddy: subprocess.Popen[bytes] | None = None
    try:
        for i in range(instances):
            started.append(start_instance(env, folder, f"instance{i + 1}"))
        port = free_port()
        if proxy and shutil.which("caddy"):
            upstreams = " ".join(f"127.0.0.1:{i.port}" for i in started)
            caddy_env = {**os.environ, "TRACELORE_SITE": f"http://127.0.0.1:{port}", "TRACELORE_UPSTREAMS": upstreams}
            caddy_env["XDG_DATA_HOME"] = caddy_env["XDG_CONFIG_HOME"] = str(folder / "caddy")
            with (folder / "caddy.log").open("wb") as out:
                caddy = subprocess.Popen(
                    ["caddy", "run", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
                    env=caddy_env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            _wait_ready(f"http://127.0.0.1:{port}", caddy, folder / "caddy.log", 30)
        yield Cluster(database_url, started, port, caddy, folder, env)
    finally:
        if caddy is not None and caddy.poll() is None:
            caddy.terminate()
            caddy.wait(10)
        for instance in started:
            instance.stop()
