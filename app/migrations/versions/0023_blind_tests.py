"""blind tests: fragments of real and simulated cases, and experts' answers

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04

Issue 36: experts see shuffled fragments, real cases and a simulator's mapped transcripts
drawn alike, and say which are simulated; d' and a binomial test say whether they can tell.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "blind_tests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("simulator", sa.String(length=128), nullable=False),
        sa.Column("spec", sa.String(length=128), nullable=False),
        sa.Column("spec_sha256", sa.String(length=64), nullable=False),
        sa.Column("log", sa.String(length=256), nullable=False),
        sa.Column("log_version", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("closed_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["created_by_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "blind_fragments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("test_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("reference", sa.String(length=512), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["test_id"], ["blind_tests.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("test_id", "position"),
    )
    with op.batch_alter_table("blind_fragments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_blind_fragments_test_id"), ["test_id"])
    op.create_table(
        "blind_answers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fragment_id", sa.Integer(), nullable=False),
        sa.Column("expert_id", sa.Integer(), nullable=False),
        sa.Column("judged", sa.String(length=16), nullable=False),
        sa.Column("confidence", sa.Integer(), nullable=False),
        sa.Column("answered_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["fragment_id"], ["blind_fragments.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["expert_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("fragment_id", "expert_id"),
    )
    with op.batch_alter_table("blind_answers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_blind_answers_expert_id"), ["expert_id"])
        batch_op.create_index(batch_op.f("ix_blind_answers_fragment_id"), ["fragment_id"])


def downgrade() -> None:
    with op.batch_alter_table("blind_answers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_blind_answers_fragment_id"))
        batch_op.drop_index(batch_op.f("ix_blind_answers_expert_id"))
    op.drop_table("blind_answers")
    with op.batch_alter_table("blind_fragments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_blind_fragments_test_id"))
    op.drop_table("blind_fragments")
    op.drop_table("blind_tests")
