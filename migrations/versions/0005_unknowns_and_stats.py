"""Unknown failures kept as templates, the failures each diagnosis named, entry statistics, admins.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("is_admin", sa.Boolean(), nullable=False, server_default="0"))
    op.create_table(
        "unknown_lines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("diagnosis_id", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=16), nullable=False),
        sa.Column("template", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("library_version", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["diagnosis_id"],
            ["diagnoses.id"],
            name=op.f("fk_unknown_lines_diagnosis_id_diagnoses"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_unknown_lines")),
    )
    op.create_index(op.f("ix_unknown_lines_diagnosis_id"), "unknown_lines", ["diagnosis_id"])
    op.create_index(op.f("ix_unknown_lines_key"), "unknown_lines", ["key"])
    op.create_index(op.f("ix_unknown_lines_created_at"), "unknown_lines", ["created_at"])
    op.create_table(
        "unknown_resolutions",
        sa.Column("key", sa.String(length=16), nullable=False),
        sa.Column("signature_id", sa.String(length=100), nullable=False),
        sa.Column("library_version", sa.String(length=64), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_unknown_resolutions")),
    )
    op.create_table(
        "diagnosis_failures",
        sa.Column("diagnosis_id", sa.String(length=32), nullable=False),
        sa.Column("signature_id", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("caused_by", sa.String(length=100), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["diagnosis_id"],
            ["diagnoses.id"],
            name=op.f("fk_diagnosis_failures_diagnosis_id_diagnoses"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("diagnosis_id", "signature_id", name=op.f("pk_diagnosis_failures")),
    )
    op.create_index(op.f("ix_diagnosis_failures_created_at"), "diagnosis_failures", ["created_at"])
    op.create_table(
        "entry_stats",
        sa.Column("signature_id", sa.String(length=100), nullable=False),
        sa.Column("initiating", sa.Integer(), nullable=False),
        sa.Column("causes_json", sa.Text(), nullable=False),
        sa.Column("caused_by_json", sa.Text(), nullable=False),
        sa.Column("window_days", sa.Integer(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("signature_id", name=op.f("pk_entry_stats")),
    )


def downgrade() -> None:
    op.drop_table("entry_stats")
    op.drop_index(op.f("ix_diagnosis_failures_created_at"), table_name="diagnosis_failures")
    op.drop_table("diagnosis_failures")
    op.drop_table("unknown_resolutions")
    op.drop_index(op.f("ix_unknown_lines_created_at"), table_name="unknown_lines")
    op.drop_index(op.f("ix_unknown_lines_key"), table_name="unknown_lines")
    op.drop_index(op.f("ix_unknown_lines_diagnosis_id"), table_name="unknown_lines")
    op.drop_table("unknown_lines")
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("is_admin")
