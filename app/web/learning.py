"""The learning loop in the service: the periodic summary, the admin page of unknown failures,
and what an entry page shows of the service's own diagnoses."""

from __future__ import annotations

import functools
import logging
from datetime import UTC, datetime, timedelta

import anyio
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from sqlalchemy.exc import SQLAlchemyError

from app.config import Settings
from app.errors import AdminsOnly, SignInFirst
from app.jobs.learning import Summary, summarise
from app.store import accounts as store
from app.store.learning import all_entry_stats, clusters
from app.web.deps import Sessions, SessionsDep
from app.web.identity import clock, session_token
from app.web.periodic import Sleep, repeat
from app.web.state import state_of

log = logging.getLogger("tracelore")

router = APIRouter()
ADMIN_DAYS = 30  # the admin page lists clusters seen in this many days


def learn_logged(app: FastAPI) -> Summary | None:
    """Recompute the entry statistics and resolve clusters, logging instead of raising.

    The summaries an entry page shows are then held by the app (`state_of(app).seen`, replaced
    whole), so a page view reads no database.
    """
    state = state_of(app)
    settings = state.settings
    try:
        summary = summarise(
            state.sessionmaker, state.library, now=datetime.now(UTC), window_days=settings.stats_window_days
        )
        with state.sessionmaker.begin() as session:
            state.seen = all_entry_stats(session, min_count=settings.stats_min_count)
    except SQLAlchemyError as exc:
        log.warning("could not summarise stored diagnoses (is the database migrated?): %s", exc)
        return None
    for key, sig_id in summary.resolved:
        log.info("unknown-failure cluster %s is now recognised as %s", key, sig_id)
    return summary


async def learn_periodically(app: FastAPI, *, sleep: Sleep = anyio.sleep) -> None:
    """Summarise at start-up, then every `learn_every` seconds until cancelled."""
    settings: Settings = state_of(app).settings
    await repeat(
        functools.partial(learn_logged, app), every=settings.learn_every, what="the learning summary", sleep=sleep
    )


def _admin_page(request: Request, sessions: Sessions) -> Response:
    token = session_token(request)
    if not token:
        raise SignInFirst()
    with sessions.begin() as session:
        account = store.session_account(session, token, now=clock(request))
        if account is None:
            raise SignInFirst()
        if not account.is_admin:
            raise AdminsOnly()
        since = clock(request) - timedelta(days=ADMIN_DAYS)
        found = clusters(session, since=since, include_resolved=True)
    response: Response = state_of(request.app).templates.TemplateResponse(
        request, "admin_unknowns.html", {"clusters": found, "days": ADMIN_DAYS}
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/admin/unknowns", name="admin_unknowns", response_class=HTMLResponse, include_in_schema=False)
async def admin_unknowns(request: Request, sessions: SessionsDep) -> Response:
    """Unknown-failure clusters, biggest first (signed-in admins only)."""
    return await run_in_threadpool(_admin_page, request, sessions)
