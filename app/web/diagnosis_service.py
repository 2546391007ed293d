"""A diagnosis request, from its body to its count: the one walk the API and the diagnose form share.

`diagnose_request` is the entry point. It admits the request (a gate slot free, the caller's
allowance not spent) before the body is read, reads and bounds the upload, diagnoses and keeps
the log (`app.core.keep`) in one worker thread holding a gate slot, then stores the row and
counts it in one short transaction there (or only counts it when it is not stored). A request
that fails once its log was read says it was not counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NamedTuple, TypeVar

import anyio.to_thread
from fastapi import Request

from app.core.keep import Logs, keep
from app.core.stored import StoredDiagnosis
from app.errors import QuotaSpent, TraceloreError
from app.quota.tiers import Usage
from app.store.diagnoses import save_diagnosis
from app.web import allowance
from app.web.deps import Sessions, Subject
from app.web.sessions import engine_of
from app.web.state import AppState, state_of
from app.web.upload import Upload, read_upload

log = logging.getLogger("tracelore")

T = TypeVar("T")

NOT_CHARGED = "This request was not counted against your daily allowance."


class Diagnosed(NamedTuple):
    """A request's log, diagnosed, kept (stored, unless the caller said not to) and counted."""

    record: StoredDiagnosis
    usage: Usage  # where the caller stands, this diagnosis counted


async def diagnose_request(
    request: Request,
    subject: Subject,
    *,
    top: int | None = None,
    store: bool | None = None,
    body_may_refuse: bool = True,
) -> Diagnosed:
    """Read, bound, diagnose, store and count the log in a request.

    It is stored unless `store` is false, or the body says `store: false` and `body_may_refuse`.

    The row and the count are written in the worker thread that diagnosed, right after it: one
    hop off the event loop for the whole walk once the log is read.
    """
    state = state_of(request.app)
    sessions = state.sessionmaker
    state.gate.check()  # refuse before reading a body we could not serve
    admitted = await allowance.admit(request, sessions, subject)  # a spent allowance is refused before the body
    upload = await read_upload(request, limit=admitted.tier.max_log_bytes)
    keeping = store is not False and not (body_may_refuse and upload.store is False)

    def count(kept: StoredDiagnosis) -> Diagnosed:
        if keeping:
            return Diagnosed(*_save_counted(request, sessions, kept, subject))
        return Diagnosed(kept, allowance.count_alone(request, sessions, subject))

    try:
        return await _run_keep(state, upload, top=upload.top or top, keep_log=keeping, then=count)
    except BaseException as exc:
        raise _uncounted(request, exc, admitted) from None
    finally:
        upload.close()


async def _run_keep(
    state: AppState, upload: Upload, *, top: int | None, keep_log: bool, then: Callable[[StoredDiagnosis], T]
) -> T:
    """Diagnose and keep a log (`app.core.keep`), then `then(kept)`, in one worker thread holding a gate slot.

    `then` stores and counts what was kept (blocking): the whole walk is one hop off the event loop.
    An excerpt's lines are loaded only once the slot is held: the slots bound that memory.
    A log not stored is not kept whole either (`keep_log` false).
    """
    settings, metrics, gate = state.settings, state.metrics, state.gate
    logs: Logs = upload.files
    excerpt = upload.excerpt

    def work() -> T:
        kept = keep(
            logs,
            state.library,
            top=top,
            context=settings.context_lines,
            keep_log=settings.store_log and keep_log,
            redactor=state.redactor,
            excerpt=excerpt.load(logs[0][1]) if excerpt is not None else None,
            threads=state.threads.scan,
        )
        metrics.diagnosis(kept.seconds, ((c.id, c.role) for c in kept.candidates))
        return then(kept)

    async with gate.slot():
        metrics.add_in_flight(1)
        try:
            return await anyio.to_thread.run_sync(work, limiter=gate.limiter)
        finally:
            metrics.add_in_flight(-1)


def _save_counted(
    request: Request, sessions: Sessions, kept: StoredDiagnosis, subject: Subject
) -> tuple[StoredDiagnosis, Usage]:
    """Count and save a diagnosis in one short transaction, committed before this returns (blocking).

    The count and the row commit together: a process killed at any moment leaves no diagnosis
    counted that was not stored. Nothing else runs between the first write and the COMMIT, so
    the database's write lock is held for two statements (SQLite has one for the whole file).
    """
    # A plain connection: the statements are Core inserts and an upsert, with no ORM object for a session to track.
    with engine_of(sessions).begin() as conn:
        record = save_diagnosis(conn, kept, subject=subject.id, tier=subject.tier, created_at=datetime.now(UTC))
        # Counted last: on PostgreSQL the subject's counter row stays locked until the commit.
        usage = allowance.count(conn, request, subject)
    return record, usage


def _uncounted(request: Request, exc: BaseException, admitted: Usage) -> BaseException:
    """The error to raise for a request that failed once its log was read, before it was counted.

    It says it was not counted, with the headers of where the caller still stands; the caught
    error itself is left as it was.
    """
    if isinstance(exc, QuotaSpent):
        return exc
    if isinstance(exc, TraceloreError):
        said = f"{exc.detail}. {NOT_CHARGED}" if not exc.detail.endswith(".") else f"{exc.detail} {NOT_CHARGED}"
        return exc.amended(
            detail=said, headers={**admitted.headers(), **exc.headers}, extra={**exc.extra, "charged": False}
        )
    if isinstance(exc, Exception):
        log.error("diagnosis failed on %s", request.url.path, exc_info=exc)
        return TraceloreError(
            f"the diagnosis failed on this server and the error has been logged. {NOT_CHARGED}",
            headers=admitted.headers(),
            extra={"charged": False},
        )
    return exc  # cancellation and exit: nobody is waiting for an answer
