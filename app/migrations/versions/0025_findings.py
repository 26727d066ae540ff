"""findings: what experts found wrong with a task version, with evidence anchors

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04

Issue 37: a finding has a category of a fixed taxonomy, a severity and anchors (a transcript
turn, a log variant step, a task field, an end-state record); the panel confirms or rejects
it, and exports carry it in each task's audit record.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "findings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_version_id", sa.Integer(), nullable=False),
        sa.Column("author_id", sa.Integer(), nullable=False),
        sa.Column("category", sa.String(length=64), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("anchors", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("decided_by_id", sa.Integer(), nullable=True),
        sa.Column("decided_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("decision_reason", sa.Text(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["author_id"], ["users.id"]),
        sa.ForeignKeyConstraint(["decided_by_id"], ["users.id"]),
        sa.ForeignKeyConstraint(["task_version_id"], ["task_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_findings_author_id"), ["author_id"])
        batch_op.create_index(batch_op.f("ix_findings_category"), ["category"])
        batch_op.create_index(batch_op.f("ix_findings_state"), ["state"])
        batch_op.create_index(batch_op.f("ix_findings_task_version_id"), ["task_version_id"])


def downgrade() -> None:
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_findings_task_version_id"))
        batch_op.drop_index(batch_op.f("ix_findings_state"))
        batch_op.drop_index(batch_op.f("ix_findings_category"))
        batch_op.drop_index(batch_op.f("ix_findings_author_id"))
    op.drop_table("findings")
