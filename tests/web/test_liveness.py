"""/healthz is answered on the event loop: a process whose worker threads are all busy is still alive."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import anyio.to_thread
import httpx

from app.core.knowledge.loading import Library
from app.web.app import create_app
from tests.support import make_settings


def test_healthz_answers_while_every_worker_thread_is_busy(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    # Diagnoses, quota counts and stores all run in the worker-thread pool; a liveness probe
    # that queued behind them would get a busy but healthy process restarted.
    app = create_app(make_settings(sqlite_url, tmp_path), library=library)
    release = threading.Event()

    async def probe() -> int:
        anyio.to_thread.current_default_thread_limiter().total_tokens = 1
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(anyio.to_thread.run_sync, release.wait)  # holds the only thread
            await anyio.sleep(0.05)
            try:
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                    with anyio.fail_after(3):
                        response = await client.get("/healthz")
            finally:
                release.set()
        assert response.json()["status"] == "ok"
        return response.status_code

    assert anyio.run(probe) == 200
