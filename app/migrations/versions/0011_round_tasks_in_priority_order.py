"""round tasks indexed in priority order for claims

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""
from collections.abc import Sequence

from alembic import op


revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('round_tasks', schema=None) as batch_op:
        batch_op.create_index(
            'ix_round_tasks_round_priority', ['round_id', 'priority', 'places_held'], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table('round_tasks', schema=None) as batch_op:
        batch_op.drop_index('ix_round_tasks_round_priority')
