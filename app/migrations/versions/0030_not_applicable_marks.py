"""An expert marks an optional rubric dimension not applicable, with a reason

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-04

Issue 35: `ratings.not_applicable` keeps {dimension: reason} of the optional dimensions an
expert marked as not applying to the task (their scores stay empty). NULL, as every rating
before this migration has it, means nothing is marked.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("ratings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("not_applicable", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ratings", schema=None) as batch_op:
        batch_op.drop_column("not_applicable")
