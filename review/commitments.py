"""What the ledger entry of each review record commits to (its content_sha256)."""

from collections.abc import Mapping
from datetime import UTC

from itsmreview.review.models import (
    Adjudication,
    MachineCheck,
    Rating,
)


def adjudication_content(adjudication: Adjudication) -> dict:
    """What an adjudication's ledger entry commits to."""
    return {
        "round_id": adjudication.round_id,
        "task_version_id": adjudication.task_version_id,
        "lead_id": adjudication.lead_id,
        "decision": str(adjudication.decision),
        "reason": adjudication.reason,
    }


def rating_content(rating: Rating, scores: Mapping[str, float | None]) -> dict:
    """What a submitted rating's ledger entry commits to: every judgement in it. The marks
    of dimensions that do not apply ({dimension: reason}) only when there are any, so that the
    content of a rating without them is what it was before they existed."""
    marks = rating.not_applicable
    return {
        "task_version_id": rating.task_version_id,
        "round_id": rating.round_id,
        "expert_id": rating.expert_id,
        "revision": rating.revision,
        "rater_kind": rating.rater_kind,
        "verdict": str(rating.verdict) if rating.verdict is not None else None,
        "flags": sorted(rating.flags or []),
        "comment": rating.comment or "",
        "confidence": rating.confidence,
        "scores": {k: (None if v is None else float(v)) for k, v in sorted(scores.items())},
        **({"not_applicable": dict(sorted(marks.items()))} if marks else {}),
    }


CHECK_CONTENT_FIELDS = (
    "task_version_id",
    "check",
    "status",
    "summary",
    "details",
    "tool",
    "ran_at",
)


def check_content(check: MachineCheck) -> dict:
    """What a machine check's ledger entry commits to: the stored result, every field that
    the gate or a reader uses."""
    return check_row_content({name: getattr(check, name) for name in CHECK_CONTENT_FIELDS})


def check_row_content(row: dict) -> dict:
    """`check_content` of a check's fields as a row (before it is stored, or as read)."""
    ran_at = row["ran_at"]
    if ran_at is not None and ran_at.tzinfo is None:  # SQLite hands naive UTC back
        ran_at = ran_at.replace(tzinfo=UTC)
    return {
        "task_version_id": row["task_version_id"],
        "check": row["check"],
        "status": str(row["status"]),
        "summary": row["summary"],
        "details": row["details"],
        "tool": row["tool"],
        "ran_at": None if ran_at is None else ran_at.astimezone(UTC).isoformat(),
    }
