"""The learning summary's incremental part: what each run reads is only what came since the last.

* `count_new_failures` adds a batch of `diagnosis_failures` rows not yet counted into the per-day
  counts (`failure_days`) and marks them counted, in the caller's transaction: a run killed
  half-way loses only its open batch, which the next run counts again.
* `uncount` takes a diagnosis's counted rows off again before it is deleted (by its owner or
  the retention purge), so the statistics keep counting stored diagnoses only.
* `claim_new_lines` marks a batch of unknown lines checked and returns them.

On PostgreSQL a batch is claimed with FOR UPDATE SKIP LOCKED and a deletion locks the rows of
its diagnoses first: a row is counted once, and taken off only if it was counted. On SQLite a
claim is one UPDATE ... RETURNING (one writer at a time). Functions take a Session first and
never commit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any, cast

from sqlalchemy import Table, delete, false, func, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.store.tables import DiagnosisFailureRow, FailureDayRow, LearningStateRow, UnknownLineRow

BATCH = 2000  # rows a claim takes: one transaction of a run

_FAILURES = cast(Table, DiagnosisFailureRow.__table__)
_LINES = cast(Table, UnknownLineRow.__table__)
_DAYS = cast(Table, FailureDayRow.__table__)
_STATE = cast(Table, LearningStateRow.__table__)

DayKey = tuple[date, str, str, str]  # day, signature, role, cause ("" when none)


def _day(created_at: datetime) -> date:
    aware = created_at if created_at.tzinfo else created_at.replace(tzinfo=UTC)
    return aware.astimezone(UTC).date()


def _upsert(session: Session, table: Table, rows: list[dict[str, Any]], keys: list[str], add: str | None) -> None:
    """INSERT ... ON CONFLICT on either backend: add to column `add`, or replace the other columns."""
    dialect = session.get_bind().dialect.name
    stmt = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table).values(rows)
    if add is not None:
        changes = {add: table.c[add] + stmt.excluded[add]}
    else:
        changes = {c.name: stmt.excluded[c.name] for c in table.c if c.name not in keys}
    session.execute(stmt.on_conflict_do_update(index_elements=keys, set_=changes))


def _add_days(session: Session, counts: Counter[DayKey], sign: int) -> None:
    """Add (or take off) diagnoses per day and failure; in key order, so concurrent writers lock alike."""
    rows = [
        {"day": d, "signature_id": s, "role": r, "caused_by": c, "diagnoses": sign * n}
        for (d, s, r, c), n in sorted(counts.items())
        if n
    ]
    if rows:
        _upsert(session, _DAYS, rows, ["day", "signature_id", "role", "caused_by"], "diagnoses")


def count_new_failures(session: Session, *, limit: int = BATCH) -> int:
    """Count up to `limit` uncounted failure rows into the per-day counts; how many were counted."""
    pick = (
        select(_FAILURES.c.diagnosis_id, _FAILURES.c.signature_id)
        .where(_FAILURES.c.counted == false())
        .order_by(_FAILURES.c.created_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    claimed = session.execute(
        update(_FAILURES)
        .where(tuple_(_FAILURES.c.diagnosis_id, _FAILURES.c.signature_id).in_(pick))
        .values(counted=True)
        .returning(_FAILURES.c.created_at, _FAILURES.c.signature_id, _FAILURES.c.role, _FAILURES.c.caused_by)
    ).all()
    counts: Counter[DayKey] = Counter((_day(at), sig, role, cause or "") for at, sig, role, cause in claimed)
    _add_days(session, counts, +1)
    return len(claimed)


def uncount(session: Session, diagnosis_ids: Iterable[str]) -> None:
    """Take the counted failure rows of diagnoses about to be deleted off the per-day counts.

    The rows are locked first, counted or not, so a summary cannot count them in between.
    """
    ids = list(diagnosis_ids)
    if not ids:
        return
    rows = session.execute(
        select(_FAILURES.c.created_at, _FAILURES.c.signature_id, _FAILURES.c.role, _FAILURES.c.caused_by)
        .where(_FAILURES.c.diagnosis_id.in_(ids), _FAILURES.c.counted)
        .with_for_update()
    ).all()
    _add_days(session, Counter((_day(at), sig, role, cause or "") for at, sig, role, cause in rows), -1)


def day_counts(session: Session, *, since: date) -> list[tuple[str, str, str, int]]:
    """(signature, role, cause, diagnoses) summed over the days from `since` on."""
    rows = session.execute(
        select(_DAYS.c.signature_id, _DAYS.c.role, _DAYS.c.caused_by, func.sum(_DAYS.c.diagnoses))
        .where(_DAYS.c.day >= since)
        .group_by(_DAYS.c.signature_id, _DAYS.c.role, _DAYS.c.caused_by)
    ).all()
    return [(sig, role, cause, int(n or 0)) for sig, role, cause, n in rows]


def forget_days(session: Session, *, before: date) -> int:
    """Delete per-day counts of days before `before` (their diagnoses are purged) and empty ones."""
    result = session.execute(delete(_DAYS).where((_DAYS.c.day < before) | (_DAYS.c.diagnoses == 0)))
    return int(getattr(result, "rowcount", 0) or 0)


def claim_new_lines(session: Session, *, limit: int = BATCH) -> list[tuple[str, str]]:
    """Mark up to `limit` unchecked unknown lines checked; their (cluster key, text), oldest first."""
    pick = (
        select(_LINES.c.id)
        .where(_LINES.c.checked == false())
        .order_by(_LINES.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    rows = session.execute(
        update(_LINES).where(_LINES.c.id.in_(pick)).values(checked=True).returning(_LINES.c.key, _LINES.c.text)
    ).all()
    return [(key, line) for key, line in rows]


def cluster_keys_after(session: Session, after: str, *, limit: int = BATCH) -> list[str]:
    """Keys of clusters after `after` in key order (the resolved ones included), `limit` at most."""
    return list(
        session.scalars(
            select(_LINES.c.key).where(_LINES.c.key > after).group_by(_LINES.c.key).order_by(_LINES.c.key).limit(limit)
        )
    )


def state(session: Session, name: str) -> str | None:
    """A value of the learning summary's state, or None."""
    return session.scalar(select(_STATE.c.value).where(_STATE.c.name == name))


def set_state(session: Session, name: str, value: str | None) -> None:
    """Set (None: remove) a value of the learning summary's state."""
    if value is None:
        session.execute(delete(_STATE).where(_STATE.c.name == name))
    else:
        _upsert(session, _STATE, [{"name": name, "value": value}], ["name"], None)
