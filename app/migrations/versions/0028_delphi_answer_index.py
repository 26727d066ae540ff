"""Delphi answers indexed by round, phase and expert

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-04

Issue 37's benchmark: the Consensus page asks which tasks an expert has answered in the
current phase on every rerun; on the (round, phase) index that read every answer of the phase
(90,000 of a 1,000-task round of 10 experts), on (round, phase, expert) only the expert's. The
new index serves every query the old one did.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("delphi_answers", schema=None) as batch_op:
        batch_op.create_index(
            "ix_delphi_answers_round_phase_expert", ["round_id", "phase", "expert_id"]
        )
        batch_op.drop_index("ix_delphi_answers_round_phase")


def downgrade() -> None:
    with op.batch_alter_table("delphi_answers", schema=None) as batch_op:
        batch_op.create_index("ix_delphi_answers_round_phase", ["round_id", "phase"])
        batch_op.drop_index("ix_delphi_answers_round_phase_expert")
