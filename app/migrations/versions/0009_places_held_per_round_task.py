"""places held per round task

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

A claim finds the tasks still short of k from a count kept on each round task (assignments
reserved or submitted) instead of counting every assignment of the round; reservations are
found by round and status through an index. The count is filled from the assignments.
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('round_tasks') as batch:
        batch.add_column(
            sa.Column('places_held', sa.Integer(), nullable=False, server_default='0')
        )
    op.execute(
        "UPDATE round_tasks SET places_held = (SELECT count(*) FROM assignments a"
        " WHERE a.round_id = round_tasks.round_id"
        " AND a.task_version_id = round_tasks.task_version_id"
        " AND a.status IN ('reserved', 'submitted'))"
    )
    op.create_index(
        'ix_round_tasks_round_places', 'round_tasks', ['round_id', 'places_held'], unique=False
    )
    op.create_index(
        'ix_assignments_round_status_until',
        'assignments',
        ['round_id', 'status', 'reserved_until'],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index('ix_assignments_round_status_until', table_name='assignments')
    op.drop_index('ix_round_tasks_round_places', table_name='round_tasks')
    with op.batch_alter_table('round_tasks') as batch:
        batch.drop_column('places_held')
