"""transcript extra fields; title, persona and track per task version

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("task_versions", schema=None) as batch_op:
        for name, length in (("title", 512), ("persona", 128), ("track", 32)):
            batch_op.add_column(
                sa.Column(name, sa.String(length), nullable=False, server_default="")
            )
    with op.batch_alter_table('transcripts', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('extra', sa.JSON(), nullable=False, server_default=sa.text("'{}'"))
        )



def downgrade() -> None:
    with op.batch_alter_table("task_versions", schema=None) as batch_op:
        for name in ("track", "persona", "title"):
            batch_op.drop_column(name)
    with op.batch_alter_table('transcripts', schema=None) as batch_op:
        batch_op.drop_column('extra')

