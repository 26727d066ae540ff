"""decisions belong to task versions

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

Each task's decision moves to the version that was reviewed: the newest version that is in a
review round (or, for a task never in one, its newest version). The task's own status then
mirrors its newest version, so a newer, unreviewed version no longer reads as approved.
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('task_versions', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('status', sa.String(length=32), server_default='draft', nullable=False)
        )
        batch_op.create_index(batch_op.f('ix_task_versions_status'), ['status'], unique=False)
    bind = op.get_bind()
    reviewed = bind.execute(
        sa.text(
            "SELECT t.id, t.status, COALESCE("
            " (SELECT MAX(v.version) FROM task_versions v JOIN round_tasks r"
            "  ON r.task_version_id = v.id WHERE v.task_id = t.id),"
            " (SELECT MAX(v.version) FROM task_versions v WHERE v.task_id = t.id))"
            " FROM tasks t WHERE t.status <> 'draft'"
        )
    ).all()
    for task_id, status, version in reviewed:
        if version is None:
            continue
        bind.execute(
            sa.text(
                "UPDATE task_versions SET status = :status "
                "WHERE task_id = :task_id AND version = :version"
            ),
            {"status": status, "task_id": task_id, "version": version},
        )
    bind.execute(
        sa.text(
            "UPDATE tasks SET status = (SELECT v.status FROM task_versions v "
            "WHERE v.task_id = tasks.id ORDER BY v.version DESC LIMIT 1) "
            "WHERE EXISTS (SELECT 1 FROM task_versions v WHERE v.task_id = tasks.id)"
        )
    )


def downgrade() -> None:
    bind = op.get_bind()
    bind.execute(
        sa.text(
            "UPDATE tasks SET status = COALESCE((SELECT v.status FROM task_versions v "
            "WHERE v.task_id = tasks.id AND v.status <> 'draft' "
            "ORDER BY v.version DESC LIMIT 1), tasks.status)"
        )
    )
    with op.batch_alter_table('task_versions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_task_versions_status'))
        batch_op.drop_column('status')
