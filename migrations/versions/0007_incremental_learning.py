"""The learning summary reads only what is new: counted/checked marks, per-day failure counts, its state.

Rows stored before this revision are unmarked, so the first summary after it counts them all once.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-10
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("diagnosis_failures") as batch:
        batch.add_column(sa.Column("counted", sa.Boolean(), nullable=False, server_default="0"))
    with op.batch_alter_table("unknown_lines") as batch:
        batch.add_column(sa.Column("checked", sa.Boolean(), nullable=False, server_default="0"))
    not_counted, not_checked = sa.text("NOT counted"), sa.text("NOT checked")
    op.create_index(
        "ix_diagnosis_failures_uncounted",
        "diagnosis_failures",
        ["created_at"],
        sqlite_where=not_counted,
        postgresql_where=not_counted,
    )
    op.create_index(
        "ix_unknown_lines_unchecked", "unknown_lines", ["id"], sqlite_where=not_checked, postgresql_where=not_checked
    )
    op.create_table(
        "failure_days",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("signature_id", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("caused_by", sa.String(length=100), nullable=False),
        sa.Column("diagnoses", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("day", "signature_id", "role", "caused_by", name=op.f("pk_failure_days")),
    )
    op.create_table(
        "learning_state",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_learning_state")),
    )


def downgrade() -> None:
    op.drop_table("learning_state")
    op.drop_table("failure_days")
    op.drop_index("ix_unknown_lines_unchecked", table_name="unknown_lines")
    op.drop_index("ix_diagnosis_failures_uncounted", table_name="diagnosis_failures")
    with op.batch_alter_table("unknown_lines") as batch:
        batch.drop_column("checked")
    with op.batch_alter_table("diagnosis_failures") as batch:
        batch.drop_column("counted")
