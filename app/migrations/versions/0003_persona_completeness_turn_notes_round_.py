"""persona completeness, turn notes, round members

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('completeness_reviews',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('persona', sa.String(length=128), nullable=False),
    sa.Column('expert_id', sa.Integer(), nullable=False),
    sa.Column('captured_ids', sa.JSON(), nullable=False),
    sa.Column('missing', sa.JSON(), nullable=False),
    sa.Column('comment', sa.Text(), nullable=False),
    sa.Column('is_current', sa.Boolean(), nullable=False),
    sa.Column('submitted_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['expert_id'], ['users.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('completeness_reviews', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_completeness_reviews_expert_id'), ['expert_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_completeness_reviews_persona'), ['persona'], unique=False)

    op.create_table('persona_activities',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('persona', sa.String(length=128), nullable=False),
    sa.Column('activity', sa.String(length=512), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('created_by_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['created_by_id'], ['users.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('persona', 'activity')
    )
    with op.batch_alter_table('persona_activities', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_persona_activities_persona'), ['persona'], unique=False)

    op.create_table('round_experts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('round_id', sa.Integer(), nullable=False),
    sa.Column('expert_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['expert_id'], ['users.id'], ),
    sa.ForeignKeyConstraint(['round_id'], ['review_rounds.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('round_id', 'expert_id')
    )
    with op.batch_alter_table('round_experts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_round_experts_expert_id'), ['expert_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_round_experts_round_id'), ['round_id'], unique=False)

    op.create_table('turn_notes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('transcript_id', sa.Integer(), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=False),
    sa.Column('flag', sa.String(length=64), nullable=True),
    sa.Column('comment', sa.Text(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['transcript_id'], ['transcripts.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('turn_notes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_turn_notes_assignment_id'), ['assignment_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_turn_notes_transcript_id'), ['transcript_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('turn_notes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_turn_notes_transcript_id'))
        batch_op.drop_index(batch_op.f('ix_turn_notes_assignment_id'))

    op.drop_table('turn_notes')
    with op.batch_alter_table('round_experts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_round_experts_round_id'))
        batch_op.drop_index(batch_op.f('ix_round_experts_expert_id'))

    op.drop_table('round_experts')
    with op.batch_alter_table('persona_activities', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_persona_activities_persona'))

    op.drop_table('persona_activities')
    with op.batch_alter_table('completeness_reviews', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_completeness_reviews_persona'))
        batch_op.drop_index(batch_op.f('ix_completeness_reviews_expert_id'))

    op.drop_table('completeness_reviews')
