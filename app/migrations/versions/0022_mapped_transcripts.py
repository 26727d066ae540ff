"""mapped transcripts: a transcript's events under a mapping spec

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04

Issue 36: a mapping spec turns a simulated conversation into events in a log's vocabulary;
the events, which rule made each, and the turns no rule covered are stored per transcript and
spec, with the simulator that wrote the transcript.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mapped_transcripts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("transcript_id", sa.Integer(), nullable=False),
        sa.Column("spec", sa.String(length=128), nullable=False),
        sa.Column("spec_version", sa.Integer(), nullable=False),
        sa.Column("spec_sha256", sa.String(length=64), nullable=False),
        sa.Column("log", sa.String(length=256), nullable=False),
        sa.Column("simulator", sa.String(length=128), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("units", sa.Integer(), nullable=False),
        sa.Column("unmapped", sa.JSON(), nullable=False),
        sa.Column("mapped_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["transcript_id"], ["transcripts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("transcript_id", "spec"),
    )
    with op.batch_alter_table("mapped_transcripts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_mapped_transcripts_simulator"), ["simulator"])
        batch_op.create_index(batch_op.f("ix_mapped_transcripts_spec"), ["spec"])
        batch_op.create_index(batch_op.f("ix_mapped_transcripts_transcript_id"), ["transcript_id"])


def downgrade() -> None:
    with op.batch_alter_table("mapped_transcripts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_mapped_transcripts_transcript_id"))
        batch_op.drop_index(batch_op.f("ix_mapped_transcripts_spec"))
        batch_op.drop_index(batch_op.f("ix_mapped_transcripts_simulator"))
    op.drop_table("mapped_transcripts")
