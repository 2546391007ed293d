"""`StoredDiagnosis`: the one envelope of a diagnosis and what is kept of its log.

`keep()` returns it (not yet stored: no id), the store saves and reads it, the API answers
with it and remote mode reads it back. Its JSON is the `Diagnosis` JSON plus `id`, `url` and
`created_at`; what the store keeps beside the diagnosis (the context windows, the log's size
and hash, the kept log, who made it) is carried along but never written as its JSON.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from app.core.models import Diagnosis, Window

ENVELOPE = frozenset({"id", "url", "created_at"})  # the JSON fields a stored diagnosis adds


class StoredDiagnosis(Diagnosis):
    """A diagnosis with its permalink (once stored) and what is kept of its log."""

    id: str | None = Field(None, description="permalink id; null when the diagnosis was not stored")
    url: str | None = Field(None, description="the diagnosis page")
    created_at: datetime | None = None
    # Kept beside the diagnosis, never part of its JSON (the windows have their own route).
    windows: SkipJsonSchema[list[Window]] = Field(default_factory=list, exclude=True)
    input_bytes: SkipJsonSchema[int] = Field(0, exclude=True, description="bytes received (of the lines sent)")
    input_sha256: SkipJsonSchema[str] = Field("", exclude=True)
    log_gz: SkipJsonSchema[bytes | None] = Field(None, exclude=True, description="the redacted log, when kept")
    has_log: SkipJsonSchema[bool] = Field(False, exclude=True)
    subject: SkipJsonSchema[str] = Field("", exclude=True, description="who made it")
    tier: SkipJsonSchema[str] = Field("", exclude=True)
    delete_token: SkipJsonSchema[str | None] = Field(
        None, exclude=True, description="set only on the diagnosis the store has just saved (shown once)"
    )
    seconds: SkipJsonSchema[float] = Field(0.0, exclude=True, description="how long diagnosing took (not stored)")

    @classmethod
    def keeping(cls, diagnosis: Diagnosis, **kept: Any) -> StoredDiagnosis:
        """A diagnosis, already valid, with what is kept of its log (not validated again; `kept` may replace fields)."""
        return cls.model_construct(**{**dict(diagnosis), "has_log": kept.get("log_gz") is not None, **kept})

    @property
    def permalink_id(self) -> str:
        """The id of a diagnosis the store has saved (a ValueError for one it has not)."""
        if self.id is None:
            raise ValueError("this diagnosis was not stored: it has no permalink")
        return self.id

    @property
    def diagnosis(self) -> Diagnosis:
        """The plain diagnosis: what `diagnose()` returns for the same log."""
        return Diagnosis.model_construct(**{name: getattr(self, name) for name in Diagnosis.model_fields})

    def diagnosis_json(self) -> str:
        """The `Diagnosis` JSON of it, as stored."""
        return self.model_dump_json(exclude=set(ENVELOPE))
