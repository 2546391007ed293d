"""Daily allowances on the web: check before reading a body, count atomically in the transaction that
stores the diagnosis, and put the rate-limit headers on every counted response.

Counting and storing commit together, so a process killed at any moment leaves no diagnosis
counted that was not stored (nor one stored that was not counted). The price: requests admitted
together while the allowance has room left may all be diagnosed, and the ones over it are refused
when they are counted (429) after the work; the allowance itself is never exceeded.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import NotReady, QuotaSpent, TraceloreError
from app.quota import counters
from app.quota.tiers import Tier, Usage, next_tier, spent_message, tier_table, utc_day
from app.web.deps import SubjectDep
from app.web.identity import Subject, clock

log = logging.getLogger("tracelore")

NOT_CHARGED = "This request was not counted against your daily allowance."


def tiers(request: Request) -> dict[str, Tier]:
    """The tier table of the app's settings."""
    table: dict[str, Tier] | None = getattr(request.app.state, "tiers", None)
    if table is None:
        table = request.app.state.tiers = tier_table(request.app.state.settings)
    return table


def tier_of(request: Request, subject: Subject) -> Tier:
    """A subject's tier (an unknown tier name counts as anonymous)."""
    table = tiers(request)
    return table.get(subject.tier, table["anonymous"])


def usage_now(request: Request, subject: Subject) -> Usage:
    """Where a subject stands today (blocking)."""
    now = clock(request)
    try:
        with request.app.state.sessionmaker.begin() as session:
            used = counters.used(session, subject=subject.id, day=utc_day(now))
    except SQLAlchemyError as exc:
        raise _unreachable(exc) from None
    return Usage(tier=tier_of(request, subject), used=used, now=now)


def _unreachable(exc: SQLAlchemyError) -> NotReady:
    log.warning("the quota counter is not reachable: %s", exc)
    return NotReady(f"the database is not reachable ({type(exc).__name__})", headers={"Retry-After": "5"})


def usage_for_page(request: Request, subject: Subject) -> Usage | None:
    """usage_now for a page that works without it: None when the database cannot say."""
    try:
        return usage_now(request, subject)
    except NotReady:
        return None


def spent(request: Request, usage: Usage) -> QuotaSpent:
    """The 429 for a spent allowance: when it resets and what the next tier gives."""
    upgrade = next_tier(tiers(request), usage.tier.name)
    extra: dict[str, Any] = {"violated-policies": ["daily"], "quota": usage.as_dict()}
    if upgrade:
        extra["next_tier"] = {"name": upgrade.name, "limit": upgrade.daily, "how": upgrade.how}
    return QuotaSpent(
        spent_message(usage, upgrade),
        headers={"Retry-After": str(usage.seconds_to_reset)},
        extra=extra,
    )


async def admit(request: Request, subject: Subject) -> Tier:
    """Refuse at once, before reading any body, when today's allowance is already spent."""
    usage = await run_in_threadpool(usage_now, request, subject)
    if usage.used >= usage.limit:
        request.state.quota = usage
        raise spent(request, usage)
    request.state.admitted = usage
    return usage.tier


def read(request: Request) -> None:
    """The log is read and within bounds: from here on, answers say where the caller stands."""
    admitted = getattr(request.state, "admitted", None)
    if isinstance(admitted, Usage):
        request.state.quota = admitted
        request.state.read = True


def count(session: Session, request: Request, subject: Subject) -> Usage:
    """Count one diagnosis in the caller's transaction (blocking); raise the 429 if the allowance is spent.

    Run it in the transaction that stores the diagnosis, so both commit or neither, and pass
    what it returns to `counted` once that transaction has committed.
    """
    tier = tier_of(request, subject)
    now = clock(request)
    used = counters.consume(session, subject=subject.id, tier=tier.name, day=utc_day(now), limit=tier.daily)
    if used is None:
        request.state.quota = Usage(tier=tier, used=tier.daily, now=now)
        raise spent(request, request.state.quota)
    return Usage(tier=tier, used=used, now=now)


def counted(request: Request, usage: Usage) -> None:
    """Record a committed count: the answer's headers say so."""
    request.state.quota = usage
    request.state.counted = True


async def count_alone(request: Request, subject: Subject) -> None:
    """Count a diagnosis that is not stored, in a transaction of its own."""

    def run() -> Usage:
        try:
            with request.app.state.sessionmaker.begin() as session:
                return count(session, request, subject)
        except SQLAlchemyError as exc:
            raise _unreachable(exc) from None

    counted(request, await run_in_threadpool(run))


def uncounted(request: Request, exc: BaseException) -> BaseException:
    """The error to raise for a request that failed once its log was read: it says it was not counted."""
    if getattr(request.state, "counted", False) or not getattr(request.state, "read", False):
        return exc
    if isinstance(exc, QuotaSpent):
        return exc
    if isinstance(exc, TraceloreError):
        exc.detail = f"{exc.detail}. {NOT_CHARGED}" if not exc.detail.endswith(".") else f"{exc.detail} {NOT_CHARGED}"
        exc.extra["charged"] = False
        return exc
    if isinstance(exc, Exception):
        log.error("diagnosis failed on %s", request.url.path, exc_info=exc)
        failed = TraceloreError(f"the diagnosis failed on this server and the error has been logged. {NOT_CHARGED}")
        failed.extra["charged"] = False
        return failed
    return exc  # cancellation and exit: nobody is waiting for an answer


class QuotaHeadersMiddleware:
    """Add the rate-limit headers to every response whose request was counted (errors included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})

        async def send_with_headers(message: Message) -> None:
            usage = state.get("quota")
            if message["type"] == "http.response.start" and isinstance(usage, Usage):
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                extra = usage.headers()
                if message["status"] == 429:
                    extra["Retry-After"] = str(usage.seconds_to_reset)
                for name, value in extra.items():
                    if name.lower().encode() not in present:
                        headers.append((name.lower().encode(), value.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


router = APIRouter()


@router.get("/quota", responses={200: {"description": "Where the caller stands today"}})
async def read_quota(request: Request, subject: SubjectDep) -> dict[str, Any]:
    """Your tier, today's allowance, what is used and left, and when it resets (UTC midnight)."""
    usage = await run_in_threadpool(usage_now, request, subject)
    request.state.quota = usage
    upgrade = next_tier(tiers(request), usage.tier.name)
    return {
        **usage.as_dict(),
        "subject": "account" if subject.account else "anonymous",
        "email": subject.account.email if subject.account else None,
        "next_tier": {"name": upgrade.name, "limit": upgrade.daily, "how": upgrade.how} if upgrade else None,
    }


def quota_upgrade(request: Request) -> Tier | None:
    """The next tier up from where this request's usage stands, for pages."""
    usage = getattr(request.state, "quota", None)
    return next_tier(tiers(request), usage.tier.name) if isinstance(usage, Usage) else None
