"""SQLAlchemy 2.0 tables. Classes end in `Row`; the migrations in migrations/ must match them."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    text,
)
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
    # The account page lists one subject's diagnoses, newest first.
    __table_args__ = (Index("ix_diagnoses_subject_created_at", "subject", "created_at"),)

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
    # SHA-256 of the delete token handed to whoever made it (the token itself is never stored).
    delete_token_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)


class AccountRow(Base):
    """A person who signs in by e-mail link; the tier decides the daily allowance."""

    __tablename__ = "accounts"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)  # lower-cased
    tier: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    verified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_sign_in_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")


class LoginTokenRow(Base):
    """A one-time sign-in link, stored only as a hash."""

    __tablename__ = "login_tokens"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    email: Mapped[str] = mapped_column(String(320), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class SessionRow(Base):
    """A signed-in browser, stored only as a hash of its cookie token."""

    __tablename__ = "sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ApiKeyRow(Base):
    """An API key for CI: only its hash and a short visible prefix are kept."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class QuotaUsageRow(Base):
    """Diagnoses counted for one subject on one UTC day."""

    __tablename__ = "quota_usage"
    __table_args__ = (CheckConstraint("used >= 0", name="used_not_negative"),)

    subject: Mapped[str] = mapped_column(String(200), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    tier: Mapped[str] = mapped_column(String(32))  # the tier of the first count that day, for usage reports
    used: Mapped[int] = mapped_column(Integer)


class ServerSecretRow(Base):
    """A generated secret shared by every process when TRACELORE_SECRET_KEY is not set."""

    __tablename__ = "server_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class UnknownLineRow(Base):
    """A line a stored diagnosis could not explain, as a template (goes with its diagnosis)."""

    __tablename__ = "unknown_lines"
    # The lines the learning summary has not looked at yet: each run reads only these.
    __table_args__ = (
        Index(
            "ix_unknown_lines_unchecked", "id", sqlite_where=text("NOT checked"), postgresql_where=text("NOT checked")
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    diagnosis_id: Mapped[str] = mapped_column(ForeignKey("diagnoses.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(16), index=True)  # the template's key: the cluster
    template: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)  # the line as the diagnosis shows it (redacted)
    kind: Mapped[str] = mapped_column(String(16))  # "start" or "unexplained"
    library_version: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    checked: Mapped[bool] = mapped_column(Boolean, server_default="0")  # looked at by a learning summary


class UnknownResolutionRow(Base):
    """A cluster of unknown lines that a later library recognises, and the signature that took it."""

    __tablename__ = "unknown_resolutions"

    key: Mapped[str] = mapped_column(String(16), primary_key=True)
    signature_id: Mapped[str] = mapped_column(String(100))
    library_version: Mapped[str] = mapped_column(String(64))
    resolved_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class DiagnosisFailureRow(Base):
    """One failure a stored diagnosis named, with its role: what the entry statistics count."""

    __tablename__ = "diagnosis_failures"
    # The rows not yet counted into `failure_days`: each learning summary reads only these.
    __table_args__ = (
        Index(
            "ix_diagnosis_failures_uncounted",
            "created_at",
            sqlite_where=text("NOT counted"),
            postgresql_where=text("NOT counted"),
        ),
    )

    diagnosis_id: Mapped[str] = mapped_column(ForeignKey("diagnoses.id", ondelete="CASCADE"), primary_key=True)
    signature_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))  # initiating, contributing, collateral
    caused_by: Mapped[str | None] = mapped_column(String(100), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    counted: Mapped[bool] = mapped_column(Boolean, server_default="0")  # added into failure_days


class FailureDayRow(Base):
    """Stored diagnoses per UTC day that named a failure in a role: what the entry statistics sum.

    Kept up to date incrementally: the learning summary adds the rows of `diagnosis_failures` it
    has not counted yet; deleting or purging a counted diagnosis takes it off in its transaction.
    """

    __tablename__ = "failure_days"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    signature_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    role: Mapped[str] = mapped_column(String(16), primary_key=True)
    caused_by: Mapped[str] = mapped_column(String(100), primary_key=True)  # "" when none
    diagnoses: Mapped[int] = mapped_column(Integer)


class LearningStateRow(Base):
    """Where the learning summary stands between runs (e.g. the library its clusters were checked with)."""

    __tablename__ = "learning_state"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))


class EntryStatRow(Base):
    """What the service has seen of one failure class, summarised periodically for its page."""

    __tablename__ = "entry_stats"

    signature_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    initiating: Mapped[int] = mapped_column(Integer)  # diagnoses it started, in the window
    causes_json: Mapped[str] = mapped_column(Text)  # {echo id: diagnoses where it came as this one's echo}
    caused_by_json: Mapped[str] = mapped_column(Text)  # {cause id: diagnoses where this one echoed it}
    window_days: Mapped[int] = mapped_column(Integer)
    computed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
