"""The admission gate of diagnoses: slots in flight, a short queue for them, and the worker threads they run in."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio

from app.config import usable_cores
from app.errors import Overloaded

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
