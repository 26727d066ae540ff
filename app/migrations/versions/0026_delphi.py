"""Delphi rounds: phases, pseudonyms per round, and each phase's answers

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04

Issue 37: a round can run as a Delphi consensus; phase 1's blind ratings are kept as they
were (the unbiased estimate) beside each later phase's revisions.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "delphi_rounds",
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("phase", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("iqr_max", sa.Float(), nullable=False),
        sa.Column("w_min", sa.Float(), nullable=True),
        sa.Column("max_phases", sa.Integer(), nullable=False),
        sa.Column("started_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["round_id"], ["review_rounds.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("round_id"),
    )
    op.create_table(
        "delphi_pseudonyms",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("expert_id", sa.Integer(), nullable=False),
        sa.Column("pseudonym", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(["expert_id"], ["users.id"]),
        sa.ForeignKeyConstraint(["round_id"], ["review_rounds.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("round_id", "expert_id"),
        sa.UniqueConstraint("round_id", "pseudonym"),
    )
    with op.batch_alter_table("delphi_pseudonyms", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_delphi_pseudonyms_round_id"), ["round_id"])
    op.create_table(
        "delphi_answers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("task_version_id", sa.Integer(), nullable=False),
        sa.Column("expert_id", sa.Integer(), nullable=False),
        sa.Column("phase", sa.Integer(), nullable=False),
        sa.Column("item", sa.String(length=64), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("changed", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["expert_id"], ["users.id"]),
        sa.ForeignKeyConstraint(["round_id"], ["review_rounds.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_version_id"], ["task_versions.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("round_id", "task_version_id", "expert_id", "phase", "item"),
    )
    with op.batch_alter_table("delphi_answers", schema=None) as batch_op:
        batch_op.create_index("ix_delphi_answers_round_phase", ["round_id", "phase"])


def downgrade() -> None:
    with op.batch_alter_table("delphi_answers", schema=None) as batch_op:
        batch_op.drop_index("ix_delphi_answers_round_phase")
    op.drop_table("delphi_answers")
    with op.batch_alter_table("delphi_pseudonyms", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_delphi_pseudonyms_round_id"))
    op.drop_table("delphi_pseudonyms")
    op.drop_table("delphi_rounds")
