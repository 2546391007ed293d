"""Memory under hostile uploads: a real `tracelore serve` process, its peak resident memory read from /proc.

Concurrent large JSON logs, gzip-encoded JSON bombs, excerpts of many lines and large multipart
pastes must keep the server within the budget README.md states: reading an upload holds only
spool buffers, and a diagnosis in flight holds a bounded amount.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from app.store.migrate import upgrade
from tests.support import wait_until_ready

MiB = 1 << 20
LIMIT = 64 * MiB  # the anonymous tier's largest log on this server
IN_FLIGHT = 4
# README "Memory": a request being read or waiting holds at most about 3 MiB, a diagnosis in flight
# at most about 64 MiB. The burst below has 24 uploads of 5-130 MiB on the wire at once.
PER_REQUEST, PER_DIAGNOSIS = 3 * MiB, 64 * MiB

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _quiet_log(size: int) -> str:
    """Lines of a healthy run: nothing to match, so the time goes to reading the upload."""
    line = 'epoch 3 step 1200 loss 0.4312 lr 2.0e-05 grad_norm 0.91 tokens/s 18234 "ok"\n'
    return line * (size // len(line))


def _hostile_bodies() -> list[tuple[dict[str, str], bytes]]:
    json_type = {"Content-Type": "application/json"}
    big_log = json.dumps({"log": _quiet_log(24 * MiB), "store": False}).encode()  # within the limit
    over = json.dumps({"log": _quiet_log(LIMIT + MiB)}).encode()  # over it: refused as it is decoded
    # 1 MiB of gzip that decompresses to a JSON string of NUL escapes far over the wire cap.
    bomb = gzip.compress(b'{"log": "' + b"\\u0000" * (200 * MiB // 6) + b'"}', compresslevel=9)
    many = {"excerpt": [{"line": i, "text": "x"} for i in range(1, 200_001)], "store": False}
    excerpt = json.dumps(many).encode()  # 200,000 small objects: the most a request may send
    form = (
        b'--b\r\nContent-Disposition: form-data; name="log"\r\n\r\n' + _quiet_log(40 * MiB).encode() + b"\r\n--b--\r\n"
    )
    return [
        *[(json_type, big_log)] * 8,
        *[(json_type, over)] * 4,
        *[({**json_type, "Content-Encoding": "gzip"}, bomb)] * 4,
        *[(json_type, excerpt)] * 4,
        *[({"Content-Type": "multipart/form-data; boundary=b"}, form)] * 4,
    ]


async def _burst(url: str, bodies: list[tuple[dict[str, str], bytes]]) -> Counter[int]:
    limits = httpx.Limits(max_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=600) as client:

        async def one(headers: dict[str, str], body: bytes) -> int:
            r = await client.post("/api/v1/diagnoses?store=false", content=body, headers=headers)
            assert r.status_code < 500, r.text
            return r.status_code

        statuses = await asyncio.gather(*(one(h, b) for h, b in bodies))
    return Counter(statuses)


def test_hostile_uploads_stay_within_the_memory_budget(tmp_path: Path, signatures_dir: Path) -> None:
    database = f"sqlite:///{tmp_path / 'memory.sqlite'}"
    upgrade(database)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELORE_") or k == "TRACELORE_CACHE_DIR"}
    env.update(
        {
            "TRACELORE_DATABASE_URL": database,
            "TRACELORE_DATA_DIR": str(tmp_path / "data"),
            "TRACELORE_SIGNATURES_DIR": str(signatures_dir),
            "TRACELORE_MAX_UPLOAD_BYTES": str(LIMIT),
            "TRACELORE_MAX_LOG_ANONYMOUS": str(LIMIT),
            "TRACELORE_QUOTA_ANONYMOUS": "1000",
            "TRACELORE_MAX_IN_FLIGHT": str(IN_FLIGHT),
            "TRACELORE_QUEUE_SECONDS": "300",
            "TRACELORE_SECRET_KEY": "memory-test",
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port), "--workers", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    bodies = _hostile_bodies()
    try:
        wait_until_ready(proc, url)
        # Warm up: one diagnosis of each kind, so imports and caches are not counted as growth.
        warm = [(h, b) for h, b in bodies if len(b) < 2 * MiB][:1]
        warm.append(({"Content-Type": "text/plain"}, _quiet_log(4 * MiB).encode()))
        for headers, body in warm:
            httpx.post(f"{url}/api/v1/diagnoses?store=false", content=body, headers=headers, timeout=120)
        before = _peak_rss(proc.pid)
        with ThreadPoolExecutor(1) as pool:
            statuses = pool.submit(lambda: asyncio.run(_burst(url, bodies))).result()
        growth = _peak_rss(proc.pid) - before
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    # Within the limit: diagnosed (none shed); over it, bombs included: 413.
    assert statuses == Counter({200: 16, 413: 8}), statuses
    budget = PER_DIAGNOSIS * IN_FLIGHT + PER_REQUEST * len(bodies)
    assert growth <= budget, f"peak memory grew by {growth / MiB:.0f} MiB (budget {budget / MiB:.0f} MiB)"
