"""ledger commits to existing content

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

Ratings and adjudications recorded before the ledger committed to content get one `commit`
entry each, appended to the chain, carrying the sha256 of their content as it stands now.
From then on `itsmreview ledger verify` detects any change to them. (Task versions were
committed to from the start: their import entries carry the content hash.)
"""
import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GENESIS = "0" * 64


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _digest(value) -> str:
    return hashlib.sha256(_canonical(value).encode("utf-8")).hexdigest()


def _link(content: dict, prev_hash: str) -> str:
    digest = hashlib.sha256()
    digest.update(prev_hash.encode("ascii"))
    digest.update(b"\n")
    digest.update(_canonical(content).encode("utf-8"))
    return digest.hexdigest()


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


def upgrade() -> None:
    bind = op.get_bind()
    committed = {
        (kind, ident)
        for kind, ident, payload in bind.execute(
            sa.text(
                "SELECT artifact_type, artifact_id, payload FROM ledger_entries "
                "WHERE artifact_type IN ('rating', 'adjudication')"
            )
        ).all()
        if "content_sha256" in (_json(payload) or {})
    }
    ratings = bind.execute(
        sa.text(
            "SELECT id, task_version_id, round_id, expert_id, revision, rater_kind, verdict, "
            "flags, comment, confidence FROM ratings WHERE status = 'submitted' ORDER BY id"
        )
    ).all()
    scores: dict[int, dict] = {}
    for rating_id, dimension, value in bind.execute(
        sa.text("SELECT rating_id, dimension, value FROM rating_scores")
    ).all():
        scores.setdefault(rating_id, {})[dimension] = None if value is None else float(value)
    pending = []
    for r in ratings:
        if ("rating", str(r.id)) in committed:
            continue
        content = {
            "task_version_id": r.task_version_id,
            "round_id": r.round_id,
            "expert_id": r.expert_id,
            "revision": r.revision,
            "rater_kind": r.rater_kind,
            "verdict": r.verdict,
            "flags": sorted(_json(r.flags) or []),
            "comment": r.comment or "",
            "confidence": r.confidence,
            "scores": dict(sorted(scores.get(r.id, {}).items())),
        }
        pending.append(("rating", str(r.id), {"task_version_id": r.task_version_id,
                                               "content_sha256": _digest(content)}))
    for a in bind.execute(
        sa.text(
            "SELECT id, round_id, task_version_id, lead_id, decision, reason "
            "FROM adjudications ORDER BY id"
        )
    ).all():
        if ("adjudication", str(a.id)) in committed:
            continue
        content = {
            "round_id": a.round_id,
            "task_version_id": a.task_version_id,
            "lead_id": a.lead_id,
            "decision": a.decision,
            "reason": a.reason,
        }
        pending.append(("adjudication", str(a.id), {"task_version_id": a.task_version_id,
                                                    "content_sha256": _digest(content)}))
    if not pending:
        return
    last = bind.execute(
        sa.text("SELECT seq, entry_hash FROM ledger_entries ORDER BY seq DESC LIMIT 1")
    ).first()
    seq, prev = (last.seq, last.entry_hash) if last else (0, GENESIS)
    now = datetime.now(UTC)
    typed = {"created_at": sqlmodel.sql.sqltypes.UTCDateTime(), "payload": sa.JSON()}
    table = sa.table(
        "ledger_entries",
        *(sa.column(c, typed.get(c)) for c in ("seq", "created_at", "artifact_type",
                                               "artifact_id", "field", "source_kind",
                                               "reference", "action", "actor_id", "payload",
                                               "prev_hash", "entry_hash")),
    )
    rows = []
    for kind, ident, payload in pending:
        seq += 1
        content = {
            "seq": seq,
            "created_at": now.isoformat(timespec="microseconds"),
            "artifact_type": kind,
            "artifact_id": ident,
            "field": None,
            "source_kind": "system",
            "reference": "content recorded before the ledger committed to it (migration 0007)",
            "action": "commit",
            "actor_id": None,
            "payload": payload,
        }
        entry_hash = _link(content, prev)
        rows.append({**content, "created_at": now, "payload": payload,
                     "prev_hash": prev, "entry_hash": entry_hash})
        prev = entry_hash
    for start in range(0, len(rows), 5000):
        bind.execute(table.insert(), rows[start:start + 5000])


def downgrade() -> None:
    """Ledger entries are never removed: the commit entries stay (they are still true)."""
