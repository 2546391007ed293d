"""SQLAlchemy 2.0 tables. Classes end in `Row`; the migrations in migrations/ must match them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Integer, LargeBinary, MetaData, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Stable constraint names, so migrations can refer to them on every backend.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class DiagnosisRow(Base):
    """One stored diagnosis: the permalink target."""

    __tablename__ = "diagnoses"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    subject: Mapped[str] = mapped_column(String(200))  # who asked: "anonymous" until accounts exist
    tier: Mapped[str] = mapped_column(String(32))
    input_bytes: Mapped[int] = mapped_column(BigInteger)
    input_sha256: Mapped[str] = mapped_column(String(64), index=True)
    library_version: Mapped[str] = mapped_column(String(64))
    schema_version: Mapped[int] = mapped_column(Integer)
    diagnosis_json: Mapped[str] = mapped_column(Text)  # Diagnosis.model_dump_json(), byte for byte
    windows_json: Mapped[str] = mapped_column(Text)  # evidence windows: the only log text kept by default
    log_gz: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)  # whole log, only if store_log
