"""/healthz is answered on the event loop: a process whose worker threads are all busy is still alive."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import anyio.to_thread
import httpx

from app.core.knowledge.loading import Library
from app.web.app import create_app
from app.web.state import state_of
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


def test_a_stopping_server_closes_the_store_only_once_running_diagnoses_are_done(
    sqlite_url: str, tmp_path: Path, library: Library
) -> None:
    # uvicorn cancels requests still running when its graceful timeout ends, but a diagnosis in
    # its worker thread goes on and then stores its row: the store must still be open for it.
    app = create_app(make_settings(sqlite_url, tmp_path), library=library)
    gate = state_of(app).gate
    order: list[str] = []

    async def stop_while_busy() -> None:
        release = anyio.Event()

        async def diagnosis() -> None:
            async with gate.slot():
                await release.wait()
                order.append("diagnosis done")

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                async with app.router.lifespan_context(app):
                    tasks.start_soon(diagnosis)
                    await anyio.sleep(0.05)
                    assert gate.busy == 1
                    pool = state_of(app).engine.pool

                    async def let_it_finish() -> None:
                        await anyio.sleep(0.3)
                        assert state_of(app).engine.pool is pool, "the store was closed under a running diagnosis"
                        release.set()

                    tasks.start_soon(let_it_finish)
                order.append("store closed")  # the lifespan's exit returns once it disposed of the engine
                assert state_of(app).engine.pool is not pool

    anyio.run(stop_while_busy)
    assert order == ["diagnosis done", "store closed"]
