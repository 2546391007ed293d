"""The daily counter: one atomic statement per diagnosis, exact across processes and hosts.

`consume` is `INSERT ... ON CONFLICT DO UPDATE SET used = used + 1 WHERE used < :limit RETURNING used`:
a row back means admitted, no row means the allowance is spent. PostgreSQL makes the upsert
atomic under concurrency; SQLite runs it under its write lock. Run each call in its own short
transaction (not the request's), so the count is settled before the expensive work starts.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date
from typing import Any, cast

from sqlalchemy import Connection, Date, Integer, String, Table, bindparam, delete, func, literal, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.store.tables import QuotaUsageRow

# The counter of one subject on one day, with bound parameters: built once (the ORM's cache key of a
# freshly built SELECT cost more than running it).
_USED = select(QuotaUsageRow.used).where(
    QuotaUsageRow.subject == bindparam("subject", type_=String), QuotaUsageRow.day == bindparam("day", type_=Date)
)


def dialect_name(db: Session | Connection) -> str:
    """The database's dialect name ("sqlite", "postgresql") of a session or a connection."""
    return db.dialect.name if isinstance(db, Connection) else db.get_bind().dialect.name


def consume(db: Session | Connection, *, subject: str, tier: str, day: date, limit: int) -> int | None:
    """Count one diagnosis if the allowance has room: the new count, or None when it is spent.

    `db` is a session or a plain connection (the request path uses one: no unit of work to keep).
    """
    values = {"subject": subject, "day": day, "tier": tier, "limit": limit}
    row = db.execute(_consume_statement(dialect_name(db)), values).first()
    return None if row is None else int(row[0])


@functools.cache
def _consume_statement(dialect: str) -> Any:
    """The upsert of `consume`, built once per dialect with bound parameters (building it cost more than running it)."""
    table = cast(Table, QuotaUsageRow.__table__)
    limit = bindparam("limit", type_=Integer)
    source = select(
        bindparam("subject", type_=String), bindparam("day", type_=Date), bindparam("tier", type_=String), literal(1)
    ).where(limit > 0)
    stmt = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)
    stmt = stmt.from_select(["subject", "day", "tier", "used"], source)
    return stmt.on_conflict_do_update(
        index_elements=["subject", "day"],
        set_={"used": table.c.used + 1, "tier": stmt.excluded.tier},
        where=table.c.used < limit,
    ).returning(table.c.used)


def refund(session: Session, *, subject: str, day: date) -> None:
    """Give back one diagnosis counted today (its diagnosis failed on our side)."""
    session.execute(
        update(QuotaUsageRow)
        .where(QuotaUsageRow.subject == subject, QuotaUsageRow.day == day, QuotaUsageRow.used > 0)
        .values(used=QuotaUsageRow.used - 1)
    )


def used(db: Session | Connection, *, subject: str, day: date) -> int:
    """Diagnoses counted for a subject on a day (`db`: a session or a plain connection)."""
    value = db.scalar(_USED, {"subject": subject, "day": day})
    return int(value or 0)


@dataclass(frozen=True, slots=True)
class DayUsage:
    day: date
    tier: str
    subjects: int
    used: int


def usage_by_day(session: Session, *, since: date) -> list[DayUsage]:
    """Diagnoses counted per day and tier since a day, newest first."""
    rows = session.execute(
        select(QuotaUsageRow.day, QuotaUsageRow.tier, func.count(), func.sum(QuotaUsageRow.used))
        .where(QuotaUsageRow.day >= since, QuotaUsageRow.used > 0, ~QuotaUsageRow.subject.startswith("mail:"))
        .group_by(QuotaUsageRow.day, QuotaUsageRow.tier)
        .order_by(QuotaUsageRow.day.desc(), QuotaUsageRow.tier)
    )
    return [DayUsage(day, tier, int(n), int(total or 0)) for day, tier, n, total in rows]


def purge_usage(session: Session, *, before: date) -> int:
    """Delete counters of days before a day."""
    result = session.execute(delete(QuotaUsageRow).where(QuotaUsageRow.day < before))
    return int(getattr(result, "rowcount", 0) or 0)
