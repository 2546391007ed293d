"""One account per mailbox: addresses stored in their canonical spelling.

Accounts made earlier under a spelling their provider ignores (dots and plus tags at Gmail,
plus tags at Outlook, iCloud, Fastmail, Proton) take the canonical spelling, unless another
account already has it; those keep theirs and are still found by it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.store.accounts import canonical_email

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    conn = op.get_bind()
    accounts = sa.table("accounts", sa.column("id", sa.String), sa.column("email", sa.String))
    rows = conn.execute(sa.select(accounts.c.id, accounts.c.email)).all()
    taken = {email for _, email in rows}
    wanted: dict[str, list[str]] = {}
    for account_id, email in rows:
        canonical = canonical_email(email)
        if canonical != email:
            wanted.setdefault(canonical, []).append(account_id)
    for canonical, ids in wanted.items():
        if canonical in taken or len(ids) > 1:
            continue  # two accounts for one mailbox: neither is merged silently
        conn.execute(sa.update(accounts).where(accounts.c.id == ids[0]).values(email=canonical))


def downgrade() -> None:
    pass  # the canonical spelling reaches the same mailbox: nothing to undo
