"""turn labels: a model's labels for turns no mapping rule matched, confirmed by experts

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04

Issue 36: turns a mapping spec does not cover may be classified by the model client; each
label is shown to an expert and counts only once confirmed.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "turn_labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("transcript_id", sa.Integer(), nullable=False),
        sa.Column("spec", sa.String(length=128), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("call", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=256), nullable=True),
        sa.Column("reason", sa.String(length=2000), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("prompt_sha256", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("decided_by_id", sa.Integer(), nullable=True),
        sa.Column("decided_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["decided_by_id"], ["users.id"]),
        sa.ForeignKeyConstraint(["transcript_id"], ["transcripts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("transcript_id", "spec", "turn", "call"),
    )
    with op.batch_alter_table("turn_labels", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_turn_labels_spec"), ["spec"])
        batch_op.create_index(batch_op.f("ix_turn_labels_state"), ["state"])
        batch_op.create_index(batch_op.f("ix_turn_labels_transcript_id"), ["transcript_id"])


def downgrade() -> None:
    with op.batch_alter_table("turn_labels", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_turn_labels_transcript_id"))
        batch_op.drop_index(batch_op.f("ix_turn_labels_state"))
        batch_op.drop_index(batch_op.f("ix_turn_labels_spec"))
    op.drop_table("turn_labels")
