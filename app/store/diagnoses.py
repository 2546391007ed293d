"""Stored diagnoses: save, fetch, purge. Functions take a Session first and never commit."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from datetime import UTC, datetime
from typing import cast

from pydantic import BaseModel, ConfigDict, TypeAdapter
from sqlalchemy import Connection, Table, delete, func, insert, select
from sqlalchemy.orm import Session

from app.core.models import Window
from app.core.stored import StoredDiagnosis
from app.store.learning import record_learning
from app.store.summary import uncount
from app.store.tables import DiagnosisRow

_WINDOWS = TypeAdapter(list[Window])
_INSERT = insert(cast(Table, DiagnosisRow.__table__))  # built once: every stored diagnosis runs it


def new_id() -> str:
    """An unguessable permalink id (128 random bits)."""
    return secrets.token_urlsafe(16)


def new_delete_token() -> str:
    """A token that lets the maker of a diagnosis delete it (shown once, stored as a hash)."""
    return "tld_" + secrets.token_urlsafe(24)


def token_hash(token: str) -> str:
    """What is stored of a delete token."""
    return hashlib.sha256(token.encode("utf-8", errors="replace")).hexdigest()


def _aware(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything stored is UTC.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _record(row: DiagnosisRow) -> StoredDiagnosis:
    return StoredDiagnosis.model_validate_json(row.diagnosis_json).model_copy(
        update={
            "id": row.id,
            "created_at": _aware(row.created_at),
            "subject": row.subject,
            "tier": row.tier,
            "input_bytes": row.input_bytes,
            "input_sha256": row.input_sha256,
            "windows": _WINDOWS.validate_json(row.windows_json),
            "has_log": row.log_gz is not None,
        }
    )


def save_diagnosis(
    session: Session | Connection, kept: StoredDiagnosis, *, subject: str, tier: str, created_at: datetime
) -> StoredDiagnosis:
    """Add a diagnosis and what is kept of its log to the session (flushed, not committed); return it as stored.

    `session` may be a plain connection in a transaction (the request path uses one). The returned
    diagnosis carries a fresh delete token; only its hash is stored.
    """
    token = new_delete_token()
    diagnosis_id = new_id()
    session.execute(
        _INSERT,
        [
            {
                "id": diagnosis_id,
                "created_at": created_at,
                "subject": subject,
                "tier": tier,
                "input_bytes": kept.input_bytes,
                "input_sha256": kept.input_sha256,
                "library_version": kept.library_version,
                "schema_version": kept.schema_version,
                "diagnosis_json": kept.diagnosis_json(),
                "windows_json": _WINDOWS.dump_json(kept.windows).decode(),
                "log_gz": kept.log_gz,
                "delete_token_hash": token_hash(token),
            }
        ],
    )
    record_learning(session, diagnosis_id, kept, created_at)
    # Built from what was written, not read back: parsing the JSON just dumped would only cost time.
    return kept.model_copy(
        update={
            "id": diagnosis_id,
            "created_at": _aware(created_at),
            "subject": subject,
            "tier": tier,
            "log_gz": None,
            "delete_token": token,
        }
    )


def get_diagnosis(session: Session, diagnosis_id: str, *, not_before: datetime | None = None) -> StoredDiagnosis | None:
    """A stored diagnosis by id, or None (also when it is older than not_before)."""
    row = session.get(DiagnosisRow, diagnosis_id)
    if row is None or (not_before is not None and _aware(row.created_at) < not_before):
        return None
    return _record(row)


def get_log(session: Session, diagnosis_id: str, *, not_before: datetime | None = None) -> bytes | None:
    """The gzip-compressed whole log of a stored diagnosis, if it was kept."""
    row = session.execute(
        select(DiagnosisRow.log_gz, DiagnosisRow.created_at).where(DiagnosisRow.id == diagnosis_id)
    ).first()
    if row is None or (not_before is not None and _aware(row.created_at) < not_before):
        return None
    log_gz: bytes | None = row.log_gz
    return log_gz


def may_delete(session: Session, diagnosis_id: str, *, token: str | None, subject: str | None) -> bool | None:
    """None if there is no such diagnosis; else whether the token (or the account subject) owns it."""
    row = session.execute(
        select(DiagnosisRow.subject, DiagnosisRow.delete_token_hash).where(DiagnosisRow.id == diagnosis_id)
    ).first()
    if row is None:
        return None
    if token and row.delete_token_hash and hmac.compare_digest(token_hash(token), row.delete_token_hash):
        return True
    return bool(subject and subject.startswith("account:") and subject == row.subject)


def delete_diagnosis(session: Session, diagnosis_id: str) -> bool:
    """Delete one diagnosis (and its kept log, and its part of the entry statistics); whether it existed."""
    uncount(session, [diagnosis_id])
    result = session.execute(delete(DiagnosisRow).where(DiagnosisRow.id == diagnosis_id))
    return bool(getattr(result, "rowcount", 0))


def purge_expired(session: Session, *, before: datetime, limit: int | None = None) -> int:
    """Delete diagnoses created before a time (the oldest `limit` of them, when given); return how many."""
    pick = select(DiagnosisRow.id).where(DiagnosisRow.created_at < before).order_by(DiagnosisRow.created_at)
    ids = list(session.scalars(pick.limit(limit) if limit is not None else pick))
    if not ids:
        return 0
    uncount(session, ids)
    result = session.execute(delete(DiagnosisRow).where(DiagnosisRow.id.in_(ids)))
    return int(getattr(result, "rowcount", 0) or 0)


def count_diagnoses(session: Session) -> int:
    """How many diagnoses are stored."""
    return int(session.scalar(select(func.count()).select_from(DiagnosisRow)) or 0)


class Made(BaseModel):
    """One line of an account's history: a diagnosis it made, and what it found first."""

    model_config = ConfigDict(frozen=True)

    id: str
    created_at: datetime
    input_bytes: int
    headline: str  # the initiating failure's title, or what the page would say instead
    failure_id: str | None = None


def _headline(diagnosis_json: str) -> tuple[str, str | None]:
    d = json.loads(diagnosis_json)
    terminal = [c for c in d.get("candidates", []) if c.get("episode", "terminal") == "terminal"]
    first = next((c for c in terminal if c.get("role") == "initiating"), None) or next(
        (c for c in terminal if c.get("role") != "collateral"), None
    )
    if first is not None:
        return str(first["title"]), str(first["id"])
    if terminal:
        return "Not recognised (only echoes were found)", None
    ending = (d.get("ending") or {}).get("state")
    if ending == "completed":
        return "Looks healthy", None
    if ending == "stopped":
        return "No error: the log stops mid-run", None
    return "No known failure found", None


def list_made_by(session: Session, subject: str, *, not_before: datetime | None = None, limit: int = 50) -> list[Made]:
    """The diagnoses a subject made, newest first (at most `limit`)."""
    query = select(DiagnosisRow.id, DiagnosisRow.created_at, DiagnosisRow.input_bytes, DiagnosisRow.diagnosis_json)
    query = query.where(DiagnosisRow.subject == subject)
    if not_before is not None:
        query = query.where(DiagnosisRow.created_at >= not_before)
    rows = session.execute(query.order_by(DiagnosisRow.created_at.desc(), DiagnosisRow.id).limit(limit)).all()
    made = []
    for row in rows:
        headline, failure_id = _headline(row.diagnosis_json)
        made.append(
            Made(
                id=row.id,
                created_at=_aware(row.created_at),
                input_bytes=row.input_bytes,
                headline=headline,
                failure_id=failure_id,
            )
        )
    return made
