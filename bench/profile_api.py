"""Where one `POST /api/v1/diagnoses` spends its time, end to end, under pyinstrument.

    pip install pyinstrument
    python bench/profile_api.py [--requests 200] [--html out.html]

The app (`create_app`, a throwaway SQLite database, the allowance lifted) is served by uvicorn
in this process's main thread. Work the service hands to worker threads (the quota check, the
diagnosis, the insert) runs inline instead, so that one sampling profiler sees a request's whole
walk in order: the event loop, the middleware, reading the body, the quota counter, `keep()`
(diagnose, windows, their redaction, hashing), the transaction and the JSON answer. A client
thread posts the 20 KB log of `bench/api.py` one request at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anyio.to_thread  # noqa: E402
import httpx  # noqa: E402
import starlette.concurrency  # noqa: E402
import uvicorn  # noqa: E402
from pyinstrument import Profiler  # noqa: E402

from app.config import Settings  # noqa: E402
from app.store.migrate import upgrade  # noqa: E402
from app.web.app import create_app  # noqa: E402
from bench.api import free_port, small_log  # noqa: E402


async def _call(func: Any) -> None:
    func()


async def _inline(func: Any, *args: Any, **_options: Any) -> Any:
    return func(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="requests profiled (after 20 untimed)")
    parser.add_argument("--html", type=Path, help="also write pyinstrument's HTML report here")
    parser.add_argument("--flat", action="store_true", help="functions by their own time, not the call tree")
    args = parser.parse_args()
    body = small_log(ROOT / "bench" / "out", 20 << 10).read_bytes()
    # Worker-thread hops run inline: one thread, one profile (the hops' own cost is not in it).
    anyio.to_thread.run_sync = _inline
    starlette.concurrency.run_in_threadpool = _inline  # fastapi.concurrency re-exports it
    import fastapi.concurrency

    fastapi.concurrency.run_in_threadpool = _inline
    for module in ("app.web.api", "app.web.allowance", "app.web.quota", "app.web.deps", "app.web.pages"):
        mod = sys.modules.get(module)
        if mod is not None and hasattr(mod, "run_in_threadpool"):
            mod.run_in_threadpool = _inline  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="tracelore-profile-") as tmp:
        settings = Settings(data_dir=Path(tmp), cache_dir=Path(tmp) / "cache", quota_anonymous=10**9, secret_key="p")
        upgrade(settings.effective_database_url)
        app = create_app(settings)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="on"))
        profiler = Profiler(interval=0.0005)
        seconds: list[float] = []

        def client() -> None:
            while not server.started:
                time.sleep(0.01)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                for i in range(20 + args.requests):
                    if i == 20:  # the profiler samples the thread that starts it: the event loop's
                        asyncio.run_coroutine_threadsafe(_call(profiler.start), loop[0]).result()
                        started = time.perf_counter()
                    answer = http.post("/api/v1/diagnoses", content=body, headers={"Content-Type": "text/plain"})
                    assert answer.status_code == 201, answer.text
                seconds.append(time.perf_counter() - started)
                asyncio.run_coroutine_threadsafe(_call(profiler.stop), loop[0]).result()
            server.should_exit = True

        async def serve() -> None:
            loop.append(asyncio.get_running_loop())
            await server.serve()

        loop: list[asyncio.AbstractEventLoop] = []
        threading.Thread(target=client, daemon=True).start()
        asyncio.run(serve())
    per = seconds[0] / args.requests * 1000
    print(f"{args.requests} requests, {per:.1f} ms each (client included, worker threads inline)")
    print(profiler.output_text(unicode=True, color=False, show_all=args.flat, flat=args.flat))
    if args.html:
        args.html.write_text(profiler.output_html())


if __name__ == "__main__":
    main()
