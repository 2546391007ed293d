"""Daily allowances on the web: where a caller stands, checked before a body is read, counted atomically in
the transaction that stores the diagnosis; the rate-limit headers go on every answer to a request whose log
was read. The `/api/v1/quota` route is in `app.web.quota`; a diagnosis request's walk in
`app.web.diagnosis_service`.

Counting and storing commit together, so a process killed at any moment leaves no diagnosis
counted that was not stored (nor one stored that was not counted). The price: requests admitted
together while the allowance has room left may all be diagnosed, and the ones over it are refused
when they are counted (429) after the work; the allowance itself is never exceeded.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.errors import NotReady, QuotaSpent
from app.quota import counters
from app.quota.tiers import Tier, Usage, next_tier, spent_message, utc_day
from app.web.deps import Sessions
from app.web.identity import Subject, clock
from app.web.sessions import engine_of
from app.web.state import state_of

log = logging.getLogger("tracelore")


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


def quota_upgrade(request: Request, usage: Usage | None) -> Tier | None:
    """The next tier up from where a caller stands, for pages."""
    return next_tier(tiers(request), usage.tier.name) if usage is not None else None
