"""adjudication queue

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04

The tasks of a round that wait for a lead, with the gate's reasons, kept by every path that
decides tasks (issue 31): the Dashboard pages through them instead of re-deciding the round.
A round's queue is built from its tasks the first time it is read (its `summaries` row of
kind `adjudication-queue` says it was), so this revision only creates the table.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "adjudication_queue",
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("task_version_id", sa.Integer(), nullable=False),
        sa.Column("external_id", sa.String(length=256), nullable=False),
        sa.Column("reasons", sa.Text(), nullable=False),
        sa.Column("decided_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["round_id"], ["review_rounds.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_version_id"], ["task_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("round_id", "task_version_id"),
    )
    op.create_index(
        "ix_adjudication_queue_round_task", "adjudication_queue", ["round_id", "external_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_adjudication_queue_round_task", table_name="adjudication_queue")
    op.drop_table("adjudication_queue")
