"""What `tracelore watch` reads: standard input, or watched files and folders."""

from __future__ import annotations

import contextlib
import os
import select
import sys
from datetime import datetime

import click

from app.core.engine import BLOCK, LiveJob
from app.watch.follow import Follower, Waiter


class Stdin:
    """Standard input as a source: what is there now, without blocking past a timeout."""

    def __init__(self, job: LiveJob) -> None:
        self.fd = sys.stdin.buffer.fileno()
        self.live = job.file("<stdin>")
        self.ended = False
        self.mode = "standard input"

    def wait(self, timeout: float) -> None:
        # Short waits: a signal sets the stop flag, and select() retries after it.
        with contextlib.suppress(InterruptedError, OSError, ValueError):
            select.select([self.fd], [], [], max(0.0, min(timeout, 0.5)))

    def poll(self) -> int:
        read = 0
        while not self.ended and read < 16 * BLOCK:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0)
            except (InterruptedError, OSError, ValueError):
                break
            if not ready:
                break
            data = os.read(self.fd, BLOCK)
            if not data:
                self.ended = True
                break
            self.live.feed(data)
            read += len(data)
        return read

    def flush(self) -> None:
        self.live.flush()

    def written(self) -> datetime | None:
        return None  # as `tracelore diagnose -`: a year comes only from the log

    def close(self) -> None:
        pass


class Files:
    """Watched files and folders as a source."""

    def __init__(self, job: LiveJob, follower: Follower, *, poll: bool) -> None:
        self.follower = follower
        self.waiter = Waiter(follower.watched_dirs(), poll=poll)
        self.ended = False
        self.mode = self.waiter.mode

    def wait(self, timeout: float) -> None:
        if not self.follower.behind:  # catching up with a long file: no event will say there is more
            self.waiter.wait(timeout)

    def poll(self) -> int:
        read = self.follower.poll()
        for problem in self.follower.problems:
            click.echo(f"tracelore watch: {problem}", err=True)
        self.follower.problems.clear()
        return read

    def flush(self) -> None:
        self.follower.flush()

    def written(self) -> datetime | None:
        stamp = self.follower.written()
        return datetime.fromtimestamp(stamp) if stamp is not None else None

    def close(self) -> None:
        self.waiter.close()
        self.follower.close()
