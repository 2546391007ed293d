"""The periodic purge, shared by the service (hourly) and `tracelore purge`: expired diagnoses,
daily quota counters past their use, and spent sign-in links.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.quota.counters import purge_usage
from app.quota.tiers import utc_day
from app.store.accounts import purge_login_tokens
from app.store.diagnoses import purge_expired
from app.store.summary import BATCH, forget_days

log = logging.getLogger("tracelore")

# Days of quota counters kept (today included): enough for `tracelore admin usage`'s default
# week; a counter only admits requests on its own day, so older ones serve nothing else.
COUNTER_DAYS = 7


@dataclass(frozen=True)
class Purged:
    """How many rows one purge deleted, by kind."""

    diagnoses: int = 0
    counters: int = 0
    login_tokens: int = 0


def not_before(settings: Settings) -> datetime | None:
    """Diagnoses created before this time have expired (None: kept forever)."""
    if not settings.retention_days:
        return None
    return datetime.now(UTC) - timedelta(days=settings.retention_days)


def purge_once(
    make_session: sessionmaker[Session], settings: Settings, *, now: datetime | None = None, batch: int = BATCH
) -> Purged:
    """Delete diagnoses older than the retention time (none when kept forever), old counters and spent links.

    Diagnoses go `batch` at a time, each batch in its own transaction: a purge stopped half-way
    (a process killed) keeps what it deleted, and the next purge deletes the rest. Deleting what
    is gone already deletes nothing, so two purges at once do no harm either.
    """
    now = now or datetime.now(UTC)
    diagnoses = 0
    if settings.retention_days:
        before = now - timedelta(days=settings.retention_days)
        while True:
            with make_session.begin() as session:
                done = purge_expired(session, before=before, limit=batch)
            diagnoses += done
            if done < batch:
                break
        with make_session.begin() as session:
            forget_days(session, before=before.astimezone(UTC).date())
    with make_session.begin() as session:
        counters = purge_usage(session, before=utc_day(now) - timedelta(days=COUNTER_DAYS - 1))
        tokens = purge_login_tokens(session, now=now)
    return Purged(diagnoses, counters, tokens)


def purge_logged(make_session: sessionmaker[Session], settings: Settings) -> Purged:
    """`purge_once`, logging instead of raising (a database that is down must not stop the service)."""
    try:
        purged = purge_once(make_session, settings)
    except SQLAlchemyError as exc:
        log.warning("could not purge expired diagnoses (is the database migrated? `tracelore db upgrade`): %s", exc)
        return Purged()
    if purged.diagnoses:
        log.info("purged %d diagnoses older than %d days", purged.diagnoses, settings.retention_days)
    if purged.counters or purged.login_tokens:
        log.info("purged %d old quota counters and %d spent sign-in links", purged.counters, purged.login_tokens)
    return purged
