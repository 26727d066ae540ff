"""round coincidences for the gate

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

The gate's alpha is kept per round and rubric dimension as exact coincidence counts that each
submit updates, instead of being recomputed from every rating of the round on each submit.
The table starts empty; a round's rows are built from its ratings the first time they are
needed.
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'round_coincidences',
        sa.Column('round_id', sa.Integer(), nullable=False),
        sa.Column('dimension', sa.String(length=64), nullable=False),
        sa.Column('pairs', sa.JSON(), nullable=False),
        sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['round_id'], ['review_rounds.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('round_id', 'dimension'),
    )


def downgrade() -> None:
    op.drop_table('round_coincidences')
