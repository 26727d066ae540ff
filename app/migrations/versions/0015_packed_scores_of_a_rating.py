"""packed scores of a rating

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02

Each rating keeps its scores packed in one column (a float64 per dimension of its rubric, in
the rubric's order, NaN where unscored) beside its `rating_scores` rows, so that agreement reads
one row a rating. Existing submitted ratings are packed from their rows here, in batches.
"""
import json
import struct
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0015'
down_revision: str | None = '0014'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 20_000


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


def _pack(keys: list[str], scores: dict) -> bytes:
    return struct.pack(
        f"<{len(keys)}d",
        *[float("nan") if scores.get(k) is None else float(scores[k]) for k in keys],
    )


def upgrade() -> None:
    with op.batch_alter_table('ratings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('score_vector', sa.LargeBinary(), nullable=True))
    bind = op.get_bind()
    keys = {
        rubric_id: [d["key"] for d in (_json(definition) or {}).get("dimensions", [])]
        for rubric_id, definition in bind.execute(
            sa.text("SELECT id, definition FROM rubrics")
        ).all()
    }
    update = sa.text("UPDATE ratings SET score_vector = :v WHERE id = :i").bindparams(
        sa.bindparam("v", type_=sa.LargeBinary)
    )
    last = 0
    while True:
        ratings = bind.execute(
            sa.text(
                "SELECT id, rubric_id FROM ratings WHERE status = 'submitted' AND id > :last "
                "ORDER BY id LIMIT :n"
            ),
            {"last": last, "n": BATCH},
        ).all()
        if not ratings:
            break
        low, high = ratings[0][0], ratings[-1][0]
        scores: dict[int, dict] = {}
        for rating_id, dimension, value in bind.execute(
            sa.text(
                "SELECT rating_id, dimension, value FROM rating_scores "
                "WHERE rating_id BETWEEN :low AND :high"
            ),
            {"low": low, "high": high},
        ):
            scores.setdefault(rating_id, {})[dimension] = value
        bind.execute(
            update,
            [
                {"v": _pack(keys[rubric_id], scores.get(rating_id, {})), "i": rating_id}
                for rating_id, rubric_id in ratings
            ],
        )
        last = high


def downgrade() -> None:
    with op.batch_alter_table('ratings', schema=None) as batch_op:
        batch_op.drop_column('score_vector')
