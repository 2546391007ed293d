"""Daily allowances on the web: check before reading a body, count atomically before diagnosing, give back
a count whose diagnosis failed on our side, and put the rate-limit headers on every counted response."""

from __future__ import annotations

import logging
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.exc import SQLAlchemyError
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
    return usage.tier


async def charge(request: Request, subject: Subject) -> Usage:
    """Count one diagnosis atomically; raise the 429 if the allowance is spent."""
    tier = tier_of(request, subject)
    now = clock(request)

    def consume() -> int | None:
        try:
            with request.app.state.sessionmaker.begin() as session:
                return counters.consume(session, subject=subject.id, tier=tier.name, day=utc_day(now), limit=tier.daily)
        except SQLAlchemyError as exc:
            raise _unreachable(exc) from None

    used = await run_in_threadpool(consume)
    if used is None:
        request.state.quota = Usage(tier=tier, used=tier.daily, now=now)
        raise spent(request, request.state.quota)
    request.state.quota = Usage(tier=tier, used=used, now=now)
    request.state.charged = (subject.id, utc_day(now))
    return request.state.quota  # type: ignore[no-any-return]


async def refund(request: Request, exc: BaseException) -> BaseException:
    """Give back the count of this request after a failure, and say so; returns the error to raise."""
    charged = getattr(request.state, "charged", None)
    if charged is None:
        return exc
    request.state.charged = None
    subject, day = charged

    def give_back() -> None:
        with request.app.state.sessionmaker.begin() as session:
            counters.refund(session, subject=subject, day=day)

    with anyio.CancelScope(shield=True):
        try:
            await run_in_threadpool(give_back)
        except Exception:  # the failure being reported matters more than the refund
            log.exception("could not give back a counted diagnosis")
            return exc
    usage: Usage = request.state.quota
    request.state.quota = Usage(tier=usage.tier, used=max(0, usage.used - 1), now=usage.now)
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
