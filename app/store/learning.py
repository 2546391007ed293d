"""What the service learns from its stored diagnoses: unknown-failure clusters and entry statistics.

Both are written with the diagnosis they come from (same transaction, `record_learning`) and go
with it when it is deleted or purged (foreign keys with ON DELETE CASCADE). A diagnosis made
with store=false is never saved, so it leaves nothing here. Functions take a Session first and
never commit.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, Connection, Table, delete, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.core import Diagnosis
from app.core.authoring import unknown_lines
from app.store.summary import day_counts
from app.store.tables import DiagnosisFailureRow, EntryStatRow, UnknownLineRow, UnknownResolutionRow

MEMBERS_SHOWN = 5  # member diagnoses a cluster lists

# Built once: every stored diagnosis runs them.
_INSERT_UNKNOWN = insert(cast(Table, UnknownLineRow.__table__))
_INSERT_NAMED = insert(cast(Table, DiagnosisFailureRow.__table__))


def record_learning(
    session: Session | Connection, diagnosis_id: str, diagnosis: Diagnosis, created_at: datetime
) -> None:
    """Keep what a just-saved diagnosis teaches: its unknown lines and the failures it named.

    `session` may be a plain connection (the request path's transaction uses one).
    """
    unknown = [
        {
            "diagnosis_id": diagnosis_id,
            "key": u.key,
            "template": u.template,
            "text": u.text,
            "kind": u.kind,
            "library_version": diagnosis.library_version,
            "created_at": created_at,
        }
        for u in unknown_lines(diagnosis)
    ]
    named: dict[str, dict[str, Any]] = {}
    for c in diagnosis.candidates:
        if c.episode == "terminal" and c.id not in named:
            named[c.id] = {
                "diagnosis_id": diagnosis_id,
                "signature_id": c.id,
                "role": c.role,
                "caused_by": c.caused_by,
                "created_at": created_at,
            }
    # Plain INSERTs of many rows at once: the unit of work's bookkeeping was most of the insert's cost.
    if unknown:
        session.execute(_INSERT_UNKNOWN, unknown)
    if named:
        session.execute(_INSERT_NAMED, list(named.values()))


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass
class Cluster:
    """Unknown lines of one template, across the stored diagnoses."""

    key: str
    template: str
    example: str
    lines: int
    diagnoses: int
    first_seen: datetime
    last_seen: datetime
    libraries: list[str] = field(default_factory=list)
    members: list[str] = field(default_factory=list)  # diagnosis ids, newest first
    resolved_by: str | None = None


def clusters(
    session: Session, *, since: datetime | None = None, min_count: int = 1, include_resolved: bool = False
) -> list[Cluster]:
    """Clusters of unknown lines, biggest first (by diagnoses, then lines, then newest)."""
    where = [UnknownLineRow.created_at >= since] if since is not None else []
    rows = session.execute(
        select(
            UnknownLineRow.key,
            func.count(UnknownLineRow.id),
            func.count(func.distinct(UnknownLineRow.diagnosis_id)),
            func.min(UnknownLineRow.created_at),
            func.max(UnknownLineRow.created_at),
        )
        .where(*where)
        .group_by(UnknownLineRow.key)
    ).all()
    resolved = {row.key: row.signature_id for row in session.execute(select(UnknownResolutionRow)).scalars()}
    found = []
    for key, lines, diagnoses, first, last in rows:
        if diagnoses < min_count or (key in resolved and not include_resolved):
            continue
        cluster = _cluster(session, key, lines, diagnoses, first, last, resolved.get(key), where)
        if cluster is not None:
            found.append(cluster)
    found.sort(key=lambda c: (-c.diagnoses, -c.lines, -c.last_seen.timestamp(), c.key))
    return found


def _cluster(
    session: Session,
    key: str,
    lines: int,
    diagnoses: int,
    first: datetime,
    last: datetime,
    resolved_by: str | None,
    where: list[ColumnElement[bool]],
) -> Cluster | None:
    """The cluster of `key`, or None when its lines were deleted since they were counted.

    On PostgreSQL each statement sees what is committed when it starts: a diagnosis deleted
    (by its owner, or by the retention purge) between the count and this read takes its lines.
    """
    newest = session.execute(
        select(UnknownLineRow.template, UnknownLineRow.text, UnknownLineRow.diagnosis_id)
        .where(UnknownLineRow.key == key, *where)
        .order_by(UnknownLineRow.created_at.desc(), UnknownLineRow.id.desc())
        .limit(50)
    ).all()
    if not newest:
        return None
    libraries = session.scalars(
        select(UnknownLineRow.library_version).where(UnknownLineRow.key == key, *where).distinct()
    ).all()
    members = list(dict.fromkeys(row.diagnosis_id for row in newest))[:MEMBERS_SHOWN]
    return Cluster(
        key=key,
        template=newest[0].template,
        example=newest[0].text,
        lines=lines,
        diagnoses=diagnoses,
        first_seen=_aware(first),
        last_seen=_aware(last),
        libraries=sorted(libraries),
        members=members,
        resolved_by=resolved_by,
    )


def cluster_lines(session: Session, key: str, *, limit: int = 20) -> list[str]:
    """The distinct lines of a cluster, newest first."""
    newest = func.max(UnknownLineRow.created_at)
    texts = session.scalars(
        select(UnknownLineRow.text)
        .where(UnknownLineRow.key == key)
        .group_by(UnknownLineRow.text)
        .order_by(newest.desc(), UnknownLineRow.text)
        .limit(limit)
    ).all()
    return list(texts)


def find_cluster(session: Session, key: str) -> Cluster | None:
    """One cluster by its key (or a unique prefix of it)."""
    keys = session.scalars(select(UnknownLineRow.key).where(UnknownLineRow.key.startswith(key)).distinct()).all()
    if len(keys) != 1:
        return None
    return next((c for c in clusters(session, include_resolved=True) if c.key == keys[0]), None)


def mark_resolved(session: Session, key: str, signature_id: str, library_version: str, at: datetime) -> None:
    """Record that a library recognises a cluster's lines now (a cluster resolved already stays as it was)."""
    values = {"key": key, "signature_id": signature_id, "library_version": library_version, "resolved_at": at}
    table = cast(Table, UnknownResolutionRow.__table__)
    dialect = session.get_bind().dialect.name
    stmt = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table).values(values)
    session.execute(stmt.on_conflict_do_nothing(index_elements=["key"]))


def compute_entry_stats(session: Session, *, now: datetime, window_days: int = 30) -> int:
    """Summarise the window's counted diagnoses per failure class into `entry_stats`; how many classes.

    The window is the last `window_days` UTC days, today included, read from the per-day counts
    (`app.store.summary`): the cost grows with the days and failure classes, not the diagnoses.
    """
    since = now.astimezone(UTC).date() - timedelta(days=window_days - 1)
    initiating: Counter[str] = Counter()
    causes: defaultdict[str, Counter[str]] = defaultdict(Counter)
    caused_by: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for sig, role, cause, n in day_counts(session, since=since):
        if n <= 0:
            continue
        if role == "initiating":
            initiating[sig] += n
        if role == "collateral" and cause and cause != sig:
            causes[cause][sig] += n
            caused_by[sig][cause] += n
    session.execute(delete(EntryStatRow))
    ids = set(initiating) | set(causes) | set(caused_by)
    for sig in sorted(ids):
        session.add(
            EntryStatRow(
                signature_id=sig,
                initiating=initiating[sig],
                causes_json=json.dumps(dict(causes[sig].most_common())),
                caused_by_json=json.dumps(dict(caused_by[sig].most_common())),
                window_days=window_days,
                computed_at=now,
            )
        )
    return len(ids)


@dataclass(frozen=True)
class EntryStats:
    """What the service has seen of one failure class, only the counts at or above the minimum."""

    initiating: int | None
    causes: list[tuple[str, int]]
    caused_by: list[tuple[str, int]]
    window_days: int
    computed_at: datetime


def all_entry_stats(session: Session, *, min_count: int, shown: int = 5) -> dict[str, EntryStats]:
    """The summaries for the entry pages, by failure class; those with nothing above the minimum left out."""
    out = {}
    for row in session.scalars(select(EntryStatRow)):
        stats = _shown(row, min_count, shown)
        if stats is not None:
            out[row.signature_id] = stats
    return out


def _shown(row: EntryStatRow, min_count: int, shown: int) -> EntryStats | None:
    """One summary with the counts below `min_count` left out (no single upload identifiable)."""

    def kept(raw: str) -> list[tuple[str, int]]:
        return [(k, v) for k, v in json.loads(raw).items() if v >= min_count][:shown]

    stats = EntryStats(
        initiating=row.initiating if row.initiating >= min_count else None,
        causes=kept(row.causes_json),
        caused_by=kept(row.caused_by_json),
        window_days=row.window_days,
        computed_at=_aware(row.computed_at),
    )
    if stats.initiating is None and not stats.causes and not stats.caused_by:
        return None
    return stats
