"""finding votes and the fix trail: the panel settles findings; a later version fixes one

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-04

Issue 37: findings are confirmed or rejected by the panel like any other item (each expert
votes once on another's finding; enough agreeing votes settle it), and a revision made in
response to a finding links to it (`findings.fixed_in_version_id`).
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "finding_votes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("finding_id", sa.Integer(), nullable=False),
        sa.Column("expert_id", sa.Integer(), nullable=False),
        sa.Column("stands", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["expert_id"], ["users.id"]),
        sa.ForeignKeyConstraint(["finding_id"], ["findings.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("finding_id", "expert_id"),
    )
    with op.batch_alter_table("finding_votes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_finding_votes_finding_id"), ["finding_id"])
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("fixed_in_version_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            "fk_findings_fixed_in_version_id",
            "task_versions",
            ["fixed_in_version_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.drop_constraint("fk_findings_fixed_in_version_id", type_="foreignkey")
        batch_op.drop_column("fixed_in_version_id")
    with op.batch_alter_table("finding_votes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_finding_votes_finding_id"))
    op.drop_table("finding_votes")
