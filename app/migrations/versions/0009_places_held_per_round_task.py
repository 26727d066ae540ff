"""places held per round task, declared variants per task version, summaries

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

A claim finds the tasks still short of k from a count kept on each round task (assignments
reserved or submitted) instead of counting every assignment of the round; reservations are
found by round and status through an index. The count is filled from the assignments.

The variants each task version's source declares get a table of their own (by sequence key),
filled from the stored sources, so the Tasks page filters and pages in SQL; tasks get an index
in the order the page lists them.

Figures that need a whole round or catalog (agreement with its bootstrap, coverage) are
stored in `summaries` with the state of the data they came from; the table starts empty.
"""
import hashlib
import json
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('round_tasks') as batch:
        batch.add_column(
            sa.Column('places_held', sa.Integer(), nullable=False, server_default='0')
        )
    op.execute(
        "UPDATE round_tasks SET places_held = (SELECT count(*) FROM assignments a"
        " WHERE a.round_id = round_tasks.round_id"
        " AND a.task_version_id = round_tasks.task_version_id"
        " AND a.status IN ('reserved', 'submitted'))"
    )
    op.create_index(
        'ix_round_tasks_round_places', 'round_tasks', ['round_id', 'places_held'], unique=False
    )
    op.create_index(
        'ix_assignments_round_status_until',
        'assignments',
        ['round_id', 'status', 'reserved_until'],
        unique=False,
    )


    op.create_index(
        'ix_assignments_round_expert_status',
        'assignments',
        ['round_id', 'expert_id', 'status', 'reserved_until'],
        unique=False,
    )
    op.create_index(
        'ix_ratings_round_status_id', 'ratings', ['round_id', 'status', 'id'], unique=False
    )
    op.create_index(
        'ix_tasks_persona_external_id', 'tasks', ['persona', 'external_id'], unique=False
    )
    variants = op.create_table(
        'task_version_variants',
        sa.Column('task_version_id', sa.Integer(), nullable=False),
        sa.Column('sequence_key', sa.String(length=64), nullable=False),
        sa.Column('sequence', sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(['task_version_id'], ['task_versions.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('task_version_id', 'sequence_key'),
    )
    op.create_index(
        'ix_task_version_variants_sequence_key',
        'task_version_variants',
        ['sequence_key'],
        unique=False,
    )
    _fill_variants(variants)
    op.create_table(
        'summaries',
        sa.Column('kind', sa.String(length=64), nullable=False),
        sa.Column('key', sa.String(length=256), nullable=False),
        sa.Column('fingerprint', sa.String(length=256), nullable=False),
        sa.Column('payload', sa.JSON(), nullable=False),
        sa.Column('computed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('seconds', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('kind', 'key'),
    )


def _fill_variants(variants) -> None:
    """Each stored source's declared variants, keyed as `itsmreview.sequences` keys them
    (inlined: a migration does not follow later changes of the code)."""
    connection = op.get_bind()
    batch = []
    rows = connection.execute(sa.text('SELECT id, source FROM task_versions ORDER BY id')).all()
    for version_id, source in rows:
        if isinstance(source, str):
            source = json.loads(source)
        seen = set()
        for sequence in (source or {}).get('variants', []) or []:
            if not isinstance(sequence, list):
                continue
            sequence = [str(a) for a in sequence]
            key = hashlib.sha256('\x1f'.join(sequence).encode('utf-8')).hexdigest()
            if key not in seen:
                seen.add(key)
                batch.append(
                    {'task_version_id': version_id, 'sequence_key': key, 'sequence': sequence}
                )
        if len(batch) >= 5000:
            op.bulk_insert(variants, batch)
            batch = []
    if batch:
        op.bulk_insert(variants, batch)


def downgrade() -> None:
    op.drop_table('summaries')
    op.drop_index(
        'ix_task_version_variants_sequence_key', table_name='task_version_variants'
    )
    op.drop_table('task_version_variants')
    op.drop_index('ix_tasks_persona_external_id', table_name='tasks')
    op.drop_index('ix_ratings_round_status_id', table_name='ratings')
    op.drop_index('ix_assignments_round_expert_status', table_name='assignments')
    op.drop_index('ix_assignments_round_status_until', table_name='assignments')
    op.drop_index('ix_round_tasks_round_places', table_name='round_tasks')
    with op.batch_alter_table('round_tasks') as batch:
        batch.drop_column('places_held')
