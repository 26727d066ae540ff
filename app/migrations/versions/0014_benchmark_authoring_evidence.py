"""benchmark authoring evidence

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0014'
down_revision: str | None = '0013'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('machine_checks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_version_id', sa.Integer(), nullable=False),
    sa.Column('check', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('summary', sa.Text(), nullable=False),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.Column('tool', sa.String(length=128), nullable=False),
    sa.Column('ran_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('imported_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('imported_by_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['imported_by_id'], ['users.id'], ),
    sa.ForeignKeyConstraint(['task_version_id'], ['task_versions.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('machine_checks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_machine_checks_task_version_id'), ['task_version_id'], unique=False)
        batch_op.create_index('ix_machine_checks_version_check', ['task_version_id', 'check', 'id'], unique=False)

    op.create_table('task_repairs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('round_id', sa.Integer(), nullable=False),
    sa.Column('from_version_id', sa.Integer(), nullable=False),
    sa.Column('to_version_id', sa.Integer(), nullable=False),
    sa.Column('iteration', sa.Integer(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['from_version_id'], ['task_versions.id'], ),
    sa.ForeignKeyConstraint(['round_id'], ['review_rounds.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['to_version_id'], ['task_versions.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('round_id', 'to_version_id')
    )
    with op.batch_alter_table('task_repairs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_task_repairs_round_id'), ['round_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_task_repairs_task_id'), ['task_id'], unique=False)

    op.create_table('resolution_proposals',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('round_id', sa.Integer(), nullable=False),
    sa.Column('task_version_id', sa.Integer(), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('expert_id', sa.Integer(), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('changes', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('decided_by_id', sa.Integer(), nullable=True),
    sa.Column('decided_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('accepted_version_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['accepted_version_id'], ['task_versions.id'], ),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['decided_by_id'], ['users.id'], ),
    sa.ForeignKeyConstraint(['expert_id'], ['users.id'], ),
    sa.ForeignKeyConstraint(['round_id'], ['review_rounds.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['task_version_id'], ['task_versions.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('resolution_proposals', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_resolution_proposals_assignment_id'), ['assignment_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_resolution_proposals_expert_id'), ['expert_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_resolution_proposals_round_id'), ['round_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_resolution_proposals_task_version_id'), ['task_version_id'], unique=False)

    with op.batch_alter_table('task_versions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('difficulty', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('user_type', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('simulator_backbone', sa.String(length=128), nullable=True))
        batch_op.create_index(batch_op.f('ix_task_versions_difficulty'), ['difficulty'], unique=False)
        batch_op.create_index(batch_op.f('ix_task_versions_simulator_backbone'), ['simulator_backbone'], unique=False)
        batch_op.create_index(batch_op.f('ix_task_versions_user_type'), ['user_type'], unique=False)

    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('difficulty', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('user_type', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('simulator_backbone', sa.String(length=128), nullable=True))
        batch_op.create_index(batch_op.f('ix_tasks_difficulty'), ['difficulty'], unique=False)
        batch_op.create_index(batch_op.f('ix_tasks_simulator_backbone'), ['simulator_backbone'], unique=False)
        batch_op.create_index(batch_op.f('ix_tasks_user_type'), ['user_type'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_tasks_user_type'))
        batch_op.drop_index(batch_op.f('ix_tasks_simulator_backbone'))
        batch_op.drop_index(batch_op.f('ix_tasks_difficulty'))
        batch_op.drop_column('simulator_backbone')
        batch_op.drop_column('user_type')
        batch_op.drop_column('difficulty')

    with op.batch_alter_table('task_versions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_task_versions_user_type'))
        batch_op.drop_index(batch_op.f('ix_task_versions_simulator_backbone'))
        batch_op.drop_index(batch_op.f('ix_task_versions_difficulty'))
        batch_op.drop_column('simulator_backbone')
        batch_op.drop_column('user_type')
        batch_op.drop_column('difficulty')

    with op.batch_alter_table('resolution_proposals', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_resolution_proposals_task_version_id'))
        batch_op.drop_index(batch_op.f('ix_resolution_proposals_round_id'))
        batch_op.drop_index(batch_op.f('ix_resolution_proposals_expert_id'))
        batch_op.drop_index(batch_op.f('ix_resolution_proposals_assignment_id'))

    op.drop_table('resolution_proposals')
    with op.batch_alter_table('task_repairs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_task_repairs_task_id'))
        batch_op.drop_index(batch_op.f('ix_task_repairs_round_id'))

    op.drop_table('task_repairs')
    with op.batch_alter_table('machine_checks', schema=None) as batch_op:
        batch_op.drop_index('ix_machine_checks_version_check')
        batch_op.drop_index(batch_op.f('ix_machine_checks_task_version_id'))

    op.drop_table('machine_checks')
