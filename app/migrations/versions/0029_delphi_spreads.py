"""Delphi rounds keep each task item's spread; phase 1 is read from the blind ratings

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-04

Issue 37's phase change (<= 200 ms at 1,000 tasks x 10 experts): it no longer copies the
phase's answers (phase 1 is the round's submitted blind ratings, frozen once phase 1 ends; an
answer not revised in a phase stands) and counts the items beyond the stop rule's limit in
`delphi_spreads`, kept current by the gate's work and each revision. Rounds started before
this migration keep their stored answers (phase 1 copies and carried answers read as before);
their spreads are built at their next phase change or revision (`spreads_built` false).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "delphi_spreads",
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("task_version_id", sa.Integer(), nullable=False),
        sa.Column("item", sa.String(length=64), nullable=False),
        sa.Column("iqr", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["round_id"], ["review_rounds.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_version_id"], ["task_versions.id"]),
        sa.PrimaryKeyConstraint("round_id", "task_version_id", "item"),
    )
    with op.batch_alter_table("delphi_rounds", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("spreads_built", sa.Boolean(), server_default="0", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("delphi_rounds", schema=None) as batch_op:
        batch_op.drop_column("spreads_built")
    op.drop_table("delphi_spreads")
