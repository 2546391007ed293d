"""Create the diagnoses table.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "diagnoses",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("tier", sa.String(length=32), nullable=False),
        sa.Column("input_bytes", sa.BigInteger(), nullable=False),
        sa.Column("input_sha256", sa.String(length=64), nullable=False),
        sa.Column("library_version", sa.String(length=64), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("diagnosis_json", sa.Text(), nullable=False),
        sa.Column("windows_json", sa.Text(), nullable=False),
        sa.Column("log_gz", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_diagnoses")),
    )
    with op.batch_alter_table("diagnoses") as batch:
        batch.create_index(batch.f("ix_diagnoses_created_at"), ["created_at"], unique=False)
        batch.create_index(batch.f("ix_diagnoses_input_sha256"), ["input_sha256"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("diagnoses") as batch:
        batch.drop_index(batch.f("ix_diagnoses_input_sha256"))
        batch.drop_index(batch.f("ix_diagnoses_created_at"))
    op.drop_table("diagnoses")
