"""Response shapes of the API besides a diagnosis (`app.core.stored.StoredDiagnosis`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.core import Library
from app.core.knowledge import Signature


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


class Measurement(BaseModel):
    """What the corpus of real logs measured for a signature (`tracelore eval`)."""

    library_version: str = Field(description="the library version the corpus was run on")
    cases: int = Field(description="real logs of this failure in the corpus")
    recognised: int = Field(description="of those, the logs where this failure was named first")
    named_wrongly: int = Field(description="logs of other failures where this one was named first")
    false_alarms: int = Field(description="healthy logs where this failure was named as likely")
    healthy: int = Field(description="healthy logs in the corpus")
    recall: float | None
    precision: float | None
    enough: bool = Field(description="at least 3 real logs are behind the figures")
    summary: str = Field(description="the figures in words")


class SignatureEntry(Signature):
    """A signature with what the corpus measured for it (null when this library was not measured)."""

    measured: Measurement | None = None

    @classmethod
    def of(cls, sig: Signature, library: Library) -> SignatureEntry:
        m = library.measured.get(sig.id)
        measurement = (
            Measurement(
                library_version=library.version,
                **m.as_dict(),
                recall=m.recall,
                precision=m.precision,
                enough=m.enough,
                summary=m.sentence(),
            )
            if m
            else None
        )
        return cls.model_validate({**sig.model_dump(exclude_unset=True), "measured": measurement})


class Status(BaseModel):
    """Health and readiness."""

    status: str
    checks: dict[str, str] = Field(default_factory=dict)
