"""Response shapes of the API that add to the core's `Diagnosis`."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from app.core.models import Diagnosis


class DiagnosisRecord(Diagnosis):
    """A Diagnosis with its permalink: the Diagnosis JSON plus `id`, `url` and `created_at`."""

    id: str | None = Field(None, description="permalink id; null when the diagnosis was not stored")
    url: str | None = Field(None, description="the diagnosis page")
    created_at: datetime | None = None


class SignatureSummary(BaseModel):
    """One failure class in the library."""

    id: str
    title: str
    layer: str
    severity: str
    role: str
    tags: list[str]
    summary: str
    path: str = Field(description="encyclopedia page")
    url: str = Field(description="this signature in the API")


class Status(BaseModel):
    """Health and readiness."""

    status: str
    checks: dict[str, str] = Field(default_factory=dict)
