"""`GET /api/v1/quota`: where the caller stands today (the bookkeeping is `app.web.allowance`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.quota.tiers import next_tier
from app.web.allowance import tiers, usage_now
from app.web.deps import SessionsDep, SubjectDep

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
