"""Diagnoses found by who made them: the account page lists a subject's newest first.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_diagnoses_subject_created_at", "diagnoses", ["subject", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_diagnoses_subject_created_at", table_name="diagnoses")
