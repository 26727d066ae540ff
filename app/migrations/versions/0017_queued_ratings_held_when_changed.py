"""queued ratings held when changed

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03

A queued rating's ledger entry commits to its content when it is submitted. The gate's applier
compares the rating with that commitment before it chains the entry; a rating changed since is
not applied: it stays queued with the reason in `held_reason`, and `ledger verify` names it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("gate_pending") as batch:
        batch.add_column(sa.Column("held_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gate_pending") as batch:
        batch.drop_column("held_reason")
