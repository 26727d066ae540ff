"""team mappings of logs

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0013'
down_revision: str | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('team_mappings',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('log_name', sa.String(length=128), nullable=False),
    sa.Column('attribute', sa.String(length=128), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('teams', sa.JSON(), nullable=False),
    sa.Column('levels', sa.JSON(), nullable=False),
    sa.Column('source_kind', sa.String(length=16), nullable=False),
    sa.Column('reference', sa.Text(), nullable=False),
    sa.Column('content_sha256', sa.String(length=64), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('created_by_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['created_by_id'], ['users.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('log_name', 'attribute', 'version')
    )
    with op.batch_alter_table('team_mappings', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_team_mappings_log_name'), ['log_name'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('team_mappings', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_team_mappings_log_name'))

    op.drop_table('team_mappings')
