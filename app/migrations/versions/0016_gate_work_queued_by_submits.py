"""gate work queued by submits

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02

A submit no longer moves the round's coincidence counts and re-decides its task itself: it
writes a `gate_pending` row beside the rating, with the rating's ledger entry, and the gate's
work is applied from these rows, in batches, by whoever applies it (the submitting thread, or
the server's gate worker), which also chains the entries. The table starts empty: every
existing rating is applied and chained already.
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0016'
down_revision: str | None = '0015'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'gate_pending',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('round_id', sa.Integer(), nullable=False),
        sa.Column('task_version_id', sa.Integer(), nullable=False),
        sa.Column('rating_id', sa.Integer(), nullable=False),
        sa.Column('replaced_id', sa.Integer(), nullable=True),
        sa.Column('actor_id', sa.Integer(), nullable=True),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('applying', sa.Boolean(), nullable=False),
        sa.Column('entry', sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(['actor_id'], ['users.id']),
        sa.ForeignKeyConstraint(['rating_id'], ['ratings.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['replaced_id'], ['ratings.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['round_id'], ['review_rounds.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['task_version_id'], ['task_versions.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(
        'ix_gate_pending_round_task', 'gate_pending', ['round_id', 'task_version_id'], unique=False
    )


def downgrade() -> None:
    op.drop_index('ix_gate_pending_round_task', table_name='gate_pending')
    op.drop_table('gate_pending')
