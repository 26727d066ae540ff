"""a round's open places in priority order: ix_round_tasks_round_places takes priority and id

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06

Issue 30: a claim's shortlist walked ix_round_tasks_round_priority backwards from the highest
priority, and late in a round the highest-priority tasks are the full ones: at 100,000 tasks
each claim stepped over tens of thousands of index entries. The shortlist now reads, for each
number of places held below k, that slice of (round_id, places_held, priority, id) in order and
merges them: no full task is visited.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_round_tasks_round_places", table_name="round_tasks")
    op.create_index(
        "ix_round_tasks_round_places",
        "round_tasks",
        ["round_id", "places_held", "priority", "id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_round_tasks_round_places", table_name="round_tasks")
    op.create_index(
        "ix_round_tasks_round_places", "round_tasks", ["round_id", "places_held"], unique=False
    )
