"""Diagnoses on the web: the admission gate, and the hop to a worker thread where the core keeps the log."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from app.config import usable_cores
from app.core.keep import Logs, keep
from app.core.knowledge.loading import Library
from app.core.redaction.redactor import DEFAULT, Redactor
from app.core.stored import StoredDiagnosis
from app.errors import Overloaded
from app.web.metrics import Metrics
from app.web.upload_fields import ExcerptBody

T = TypeVar("T")

QUEUE_PER_SLOT = 16  # requests that may wait for a slot, per slot: each holds at most a spool buffer


class Gate:
    """Admission for diagnoses: at most `limit` in flight in this process; more wait briefly, then are refused.

    A request that finds every slot taken waits up to `wait` seconds for one, in arrival order,
    so a burst a little larger than the slots is served late rather than shed; at most
    `QUEUE_PER_SLOT * limit` wait at once, and the rest are refused at once with 503.
    Of those admitted, at most `threads` diagnose at once; the others wait their turn for a thread
    (after their count is settled), so a burst is served at full speed in turn.
    """

    def __init__(self, limit: int, retry_after: int, *, wait: float = 0.0, threads: int | None = None) -> None:
        self.limit = limit
        self.retry_after = retry_after
        self.wait = wait
        self.busy = 0  # touched only from the event loop
        self.waiting = 0
        # Diagnosing is CPU work under the GIL: more threads than cores would take turns, every log
        # finishing late, and keep the event loop and the short transactions waiting for the GIL.
        self.threads = max(1, min(limit, threads or usable_cores()))
        self._limiter: anyio.CapacityLimiter | None = None  # made on first use, inside the event loop
        self._freed: anyio.Event | None = None

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        """The worker threads diagnoses run in (separate from the pool database calls use)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.threads)
        return self._limiter

    def _refuse(self) -> Overloaded:
        return Overloaded(
            f"{self.busy} diagnoses are already running on this server; try again in {self.retry_after} s",
            headers={"Retry-After": str(self.retry_after)},
        )

    def check(self) -> None:
        """Refuse now if every slot is taken and the queue is full (before reading a body we could not serve)."""
        if self.busy >= self.limit and (self.wait <= 0 or self.waiting >= QUEUE_PER_SLOT * self.limit):
            raise self._refuse()

    async def _acquire(self) -> None:
        if self.busy < self.limit and not self.waiting:
            self.busy += 1
            return
        self.check()
        self.waiting += 1
        try:
            with anyio.move_on_after(self.wait):
                # Woken whenever a slot is freed; the first waiter in line that finds one free takes it.
                while self.busy >= self.limit:
                    if self._freed is None:
                        self._freed = anyio.Event()
                    await self._freed.wait()
                self.busy += 1
                return
        finally:
            self.waiting -= 1
        raise self._refuse()

    def _release(self) -> None:
        self.busy -= 1
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    async def drained(self) -> None:
        """Return once no diagnosis holds a slot (a server stopping waits here before it closes the store)."""
        while self.busy:
            if self._freed is None:
                self._freed = anyio.Event()
            await self._freed.wait()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the duration of a diagnosis, waiting up to `wait` seconds for it."""
        await self._acquire()
        try:
            yield
        finally:
            self._release()


async def run_keep(
    gate: Gate,
    logs: Logs,
    library: Library,
    *,
    top: int | None,
    context: int,
    keep_log: bool,
    metrics: Metrics,
    then: Callable[[StoredDiagnosis], T],
    redactor: Redactor = DEFAULT,
    excerpt: ExcerptBody | None = None,
    scan_threads: int = 2,
) -> T:
    """Diagnose and keep a log (`app.core.keep`), then `then(kept)`, in one worker thread holding a gate slot.

    `then` stores and counts what was kept (blocking): the whole walk is one hop off the event loop.
    An excerpt's lines are loaded only once the slot is held: the slots bound that memory.
    """

    def work() -> T:
        kept = keep(
            logs,
            library,
            top=top,
            context=context,
            keep_log=keep_log,
            redactor=redactor,
            excerpt=excerpt.load(logs[0][1]) if excerpt is not None else None,
            threads=scan_threads,
        )
        metrics.diagnosis(kept.seconds, ((c.id, c.role) for c in kept.candidates))
        return then(kept)

    async with gate.slot():
        metrics.add_in_flight(1)
        try:
            return await anyio.to_thread.run_sync(work, limiter=gate.limiter)
        finally:
            metrics.add_in_flight(-1)
