"""Daily allowances on the web: check before reading a body, count atomically in the transaction that
stores the diagnosis; the rate-limit headers go on every answer to a request whose log was read.

Counting and storing commit together, so a process killed at any moment leaves no diagnosis
counted that was not stored (nor one stored that was not counted). The price: requests admitted
together while the allowance has room left may all be diagnosed, and the ones over it are refused
when they are counted (429) after the work; the allowance itself is never exceeded.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.errors import NotReady, QuotaSpent, TraceloreError
from app.quota import counters
from app.quota.tiers import Tier, Usage, next_tier, spent_message, utc_day
from app.web.deps import Sessions, SessionsDep, SubjectDep
from app.web.identity import Subject, clock
from app.web.sessions import engine_of
from app.web.state import state_of

log = logging.getLogger("tracelore")

NOT_CHARGED = "This request was not counted against your daily allowance."


def tiers(request: Request) -> dict[str, Tier]:
    """The tier table of the app's settings (made by create_app)."""
    table: dict[str, Tier] = state_of(request.app).tiers
    return table


def tier_of(request: Request, subject: Subject) -> Tier:
    """A subject's tier (an unknown tier name counts as anonymous)."""
    table = tiers(request)
    return table.get(subject.tier, table["anonymous"])


def usage_now(request: Request, sessions: Sessions, subject: Subject) -> Usage:
    """Where a subject stands today (blocking)."""
    now = clock(request)
    try:
        # One SELECT on a plain connection: a session's unit of work would cost more than the query.
        with engine_of(sessions).connect() as conn:
            used = counters.used(conn, subject=subject.id, day=utc_day(now))
    except SQLAlchemyError as exc:
        raise _unreachable(exc) from None
    return Usage(tier=tier_of(request, subject), used=used, now=now)


def _unreachable(exc: SQLAlchemyError) -> NotReady:
    log.warning("the quota counter is not reachable: %s", exc)
    return NotReady(f"the database is not reachable ({type(exc).__name__})", headers={"Retry-After": "5"})


def usage_for_page(request: Request, sessions: Sessions, subject: Subject) -> Usage | None:
    """usage_now for a page that works without it: None when the database cannot say."""
    try:
        return usage_now(request, sessions, subject)
    except NotReady:
        return None


def spent(request: Request, usage: Usage) -> QuotaSpent:
    """The 429 for a spent allowance: when it resets and what the next tier gives, with the rate-limit headers."""
    upgrade = next_tier(tiers(request), usage.tier.name)
    extra: dict[str, Any] = {"violated-policies": ["daily"], "quota": usage.as_dict()}
    if upgrade:
        extra["next_tier"] = {"name": upgrade.name, "limit": upgrade.daily, "how": upgrade.how}
    return QuotaSpent(
        spent_message(usage, upgrade),
        headers={**usage.headers(), "Retry-After": str(usage.seconds_to_reset)},
        extra=extra,
    )


async def admit(request: Request, sessions: Sessions, subject: Subject) -> Usage:
    """Where the caller stands today; refused at once, before any body is read, when the allowance is spent."""
    usage = await run_in_threadpool(usage_now, request, sessions, subject)
    if usage.used >= usage.limit:
        raise spent(request, usage)
    return usage


def count(session: Session | Connection, request: Request, subject: Subject) -> Usage:
    """Count one diagnosis in the caller's transaction (blocking); raise the 429 if the allowance is spent.

    Run it in the transaction that stores the diagnosis, so both commit or neither; the answer
    carries the headers of what it returns (`Usage.headers`) once that transaction has committed.
    """
    tier = tier_of(request, subject)
    now = clock(request)
    used = counters.consume(session, subject=subject.id, tier=tier.name, day=utc_day(now), limit=tier.daily)
    if used is None:
        raise spent(request, Usage(tier=tier, used=tier.daily, now=now))
    return Usage(tier=tier, used=used, now=now)


def count_alone(request: Request, sessions: Sessions, subject: Subject) -> Usage:
    """Count a diagnosis that is not stored, in a transaction of its own (blocking)."""
    try:
        with sessions.begin() as session:
            return count(session, request, subject)
    except SQLAlchemyError as exc:
        raise _unreachable(exc) from None


def uncounted(request: Request, exc: BaseException, admitted: Usage) -> BaseException:
    """The error to raise for a request that failed once its log was read, before it was counted.

    It says it was not counted, with the headers of where the caller still stands.
    """
    if isinstance(exc, QuotaSpent):
        return exc
    if isinstance(exc, TraceloreError):
        exc.detail = f"{exc.detail}. {NOT_CHARGED}" if not exc.detail.endswith(".") else f"{exc.detail} {NOT_CHARGED}"
        exc.extra["charged"] = False
        exc.headers = {**admitted.headers(), **exc.headers}
        return exc
    if isinstance(exc, Exception):
        log.error("diagnosis failed on %s", request.url.path, exc_info=exc)
        failed = TraceloreError(
            f"the diagnosis failed on this server and the error has been logged. {NOT_CHARGED}",
            headers=admitted.headers(),
        )
        failed.extra["charged"] = False
        return failed
    return exc  # cancellation and exit: nobody is waiting for an answer


router = APIRouter()


@router.get("/quota", responses={200: {"description": "Where the caller stands today"}})
async def read_quota(
    request: Request, response: Response, sessions: SessionsDep, subject: SubjectDep
) -> dict[str, Any]:
    """Your tier, today's allowance, what is used and left, and when it resets (UTC midnight)."""
    usage = await run_in_threadpool(usage_now, request, sessions, subject)
    response.headers.update(usage.headers())
    upgrade = next_tier(tiers(request), usage.tier.name)
    return {
        **usage.as_dict(),
        "subject": "account" if subject.account else "anonymous",
        "email": subject.account.email if subject.account else None,
        "next_tier": {"name": upgrade.name, "limit": upgrade.daily, "how": upgrade.how} if upgrade else None,
    }


def quota_upgrade(request: Request, usage: Usage | None) -> Tier | None:
    """The next tier up from where a caller stands, for pages."""
    return next_tier(tiers(request), usage.tier.name) if usage is not None else None
