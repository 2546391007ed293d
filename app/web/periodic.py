"""Blocking work the service repeats while it runs: the retention purge, the learning summary."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread

log = logging.getLogger("tracelore")

Sleep = Callable[[float], Awaitable[object]]


async def repeat(
    work: Callable[[], object], *, every: float, what: str, first: bool = True, sleep: Sleep = anyio.sleep
) -> None:
    """Run `work` in a worker thread every `every` seconds (at once too when `first`) until cancelled.

    A failure is logged and the loop goes on. An exception leaving a background job ends the
    app's lifespan: the store would be closed under the requests still being served, and the
    other jobs (the retention purge among them) would stop for good.
    """
    if not first:
        await sleep(every)
    while True:
        try:
            await anyio.to_thread.run_sync(work)
        except Exception:
            log.exception("%s failed; it runs again in %g s", what, every)
        await sleep(every)
