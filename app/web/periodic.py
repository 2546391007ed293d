"""Blocking work the service repeats while it runs: the retention purge, the learning summary.

Where it runs depends on the database:

* SQLite (one host): each server process runs it in a loop of its own (`repeat`), as before.
* PostgreSQL (instances that share one database): the cluster runs each job once a period, on
  Procrastinate, a job queue kept in that database. Every server process runs a Procrastinate
  worker; the periodic deferrer of each one offers the job of a period, the database takes it
  once (`procrastinate_periodic_defers` is unique per task and time) and one worker runs it. A
  job's lock keeps two runs of it apart. A process killed in the middle of a job stops sending
  its heartbeat; the stalled-job task of another worker then puts the job back in the queue and
  it runs again from where the last committed batch left it (the jobs work in batches, each its
  own transaction, and only take what is not done yet).

Each process still reads the entry statistics the last summary wrote (`state_of(app).seen`) itself.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from app.web.state import state_of

if TYPE_CHECKING:
    import procrastinate

log = logging.getLogger("tracelore")

Sleep = Callable[[float], Awaitable[object]]

QUEUE = "tracelore"  # the queue of the service's jobs
PURGE_CRON = "0 * * * *"  # the retention purge, hourly
STALLED_CRON = "* * * * * */10"  # every 10 s: the jobs of workers gone silent are queued again
HEARTBEAT_SECONDS = 5.0  # a worker says it is alive this often...
STALLED_SECONDS = 20.0  # ...and is taken for dead after this long without a word
JOBS_KEPT_HOURS = 48  # finished jobs are deleted by the purge after this long (their record: runs, failures)
RESTART_SECONDS = 10.0  # a worker that stopped on an error (the database away) starts again after this
STOP_SECONDS = 20.0  # a stopping server lets a running job finish this long, then leaves it to the stalled-job task
SEEN_EVERY = 60.0  # each process re-reads the entry statistics this often


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


def cron_every(seconds: float) -> str:
    """A cron line that fires every `seconds` (Procrastinate's sixth column counts seconds).

    A period must divide a minute, an hour or a day to be one; another is rounded to the nearest
    that does (5000 s: every 80 min is none, so every 60 min).
    """
    periods = sorted(
        {s for s in range(1, 61) if 60 % s == 0}
        | {60 * m for m in range(1, 61) if 60 % m == 0}
        | {3600 * h for h in range(1, 25) if 24 % h == 0}
    )
    period = min(periods, key=lambda p: (abs(math.log(p / max(seconds, 1))), p))
    if period != seconds:
        log.warning("the period of %g s is taken as %d s, which divides a minute, an hour or a day", seconds, period)
    if period < 60:
        return f"* * * * * */{period}"
    if period < 3600:
        return f"*/{period // 60} * * * *"
    return f"0 */{period // 3600} * * *"


def conninfo(database_url: str) -> str:
    """The libpq address of a SQLAlchemy PostgreSQL URL (its driver name dropped)."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def cluster_wide(app: FastAPI) -> bool:
    """Whether the app's database is shared by instances (PostgreSQL), so its jobs run once for all."""
    return bool(state_of(app).engine.dialect.name == "postgresql")


def _learn(app: FastAPI) -> None:
    from app.jobs.learning import summarise

    summary = summarise(
        state_of(app).sessionmaker,
        state_of(app).library,
        now=datetime.now(UTC),
        window_days=state_of(app).settings.stats_window_days,
    )
    for key, sig_id in summary.resolved:
        log.info("unknown-failure cluster %s is now recognised as %s", key, sig_id)
    log.info(
        "learning summary: %d failures counted, %d unknown lines or clusters checked, %d classes with statistics",
        summary.counted,
        summary.checked,
        summary.stats,
    )
    _read_seen(app)


def _read_seen(app: FastAPI) -> None:
    """Hold the entry statistics the last summary wrote, so a page view reads no database."""
    from app.store.learning import all_entry_stats

    with state_of(app).sessionmaker.begin() as session:
        state_of(app).seen = all_entry_stats(session, min_count=state_of(app).settings.stats_min_count)


def job_queue(app: FastAPI) -> procrastinate.App:
    """The Procrastinate app of a server process: the service's jobs, on the app's PostgreSQL database."""
    import procrastinate

    from app.jobs.retention import purge_once

    settings = state_of(app).settings
    queue = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=conninfo(settings.effective_database_url), min_size=1, max_size=3
        )
    )

    @queue.periodic(cron=PURGE_CRON)
    @queue.task(name="tracelore.purge", queue=QUEUE, lock="tracelore.purge")
    async def purge(timestamp: int) -> None:
        """Expired diagnoses, old quota counters, spent sign-in links and old finished jobs."""
        purged = await anyio.to_thread.run_sync(purge_once, state_of(app).sessionmaker, settings)
        await queue.job_manager.delete_old_jobs(
            nb_hours=JOBS_KEPT_HOURS, queue=QUEUE, include_failed=True, include_cancelled=True, include_aborted=True
        )
        log.info("purge of %s: %s", datetime.fromtimestamp(timestamp, UTC).isoformat(), purged)

    @queue.periodic(cron=cron_every(settings.learn_every))
    @queue.task(name="tracelore.learn", queue=QUEUE, lock="tracelore.learn")
    def learn(timestamp: int) -> None:  # noqa: ARG001 (the period's time, given by the deferrer)
        """The learning summary: new diagnoses into the entry statistics, new unknown lines checked."""
        _learn(app)

    @queue.periodic(cron=STALLED_CRON)
    @queue.task(name="tracelore.retry_stalled", queue=QUEUE, queueing_lock="tracelore.retry_stalled")
    async def retry_stalled(timestamp: int) -> None:  # noqa: ARG001
        """Queue again the jobs whose worker stopped sending its heartbeat (a process killed mid-job)."""
        manager = queue.job_manager
        for job in await manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=STALLED_SECONDS):
            log.warning("job %s (%s) lost its worker; it is queued again", job.id, job.task_name)
            await manager.retry_job(job)

    return queue


async def _work(queue: procrastinate.App) -> None:
    """Run this process's Procrastinate worker until cancelled; start it again after an error."""
    name = f"{socket.gethostname()}:{os.getpid()}"
    while True:
        try:
            async with queue.open_async():
                await queue.run_worker_async(
                    queues=[QUEUE],
                    name=name,
                    concurrency=2,
                    install_signal_handlers=False,  # uvicorn's: the lifespan stops the worker
                    update_heartbeat_interval=HEARTBEAT_SECONDS,
                    stalled_worker_timeout=STALLED_SECONDS,
                    shutdown_graceful_timeout=STOP_SECONDS,
                )
            return
        except Exception:
            log.exception(
                "the job worker stopped (is the database migrated?); it starts again in %g s", RESTART_SECONDS
            )
            await asyncio.sleep(RESTART_SECONDS)


async def run_cluster_jobs(app: FastAPI) -> None:
    """This process's share of the cluster's jobs, until the app stops.

    The worker runs in a task of its own, outside the lifespan's cancel scope: told to stop, it
    lets a running job finish (up to STOP_SECONDS) and says it leaves, before the store closes.
    """
    worker = asyncio.ensure_future(_work(job_queue(app)))
    try:
        await anyio.sleep_forever()
    finally:
        worker.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.wait({worker}, timeout=STOP_SECONDS + 5)


async def start(tasks: TaskGroup, app: FastAPI) -> None:
    """Start the app's background work in `tasks`: the cluster's jobs on PostgreSQL, loops on SQLite."""
    from app.jobs.retention import purge_logged
    from app.web import learning, retention

    if cluster_wide(app):
        tasks.start_soon(run_cluster_jobs, app)
        read = functools.partial(_read_seen, app)
        tasks.start_soon(functools.partial(repeat, read, every=SEEN_EVERY, what="reading the entry statistics"))
        return
    await anyio.to_thread.run_sync(purge_logged, state_of(app).sessionmaker, state_of(app).settings)
    tasks.start_soon(retention.purge_periodically, state_of(app).sessionmaker, state_of(app).settings)
    tasks.start_soon(learning.learn_periodically, app)
