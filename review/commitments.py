"""What the ledger entry of each review record commits to (its content_sha256)."""

import hashlib
import json
import math
from collections.abc import Mapping
from datetime import UTC

from itsmreview.ledger.chain import canonical_json
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


def rating_digest(rating: Rating, scores: Mapping[str, float | None]) -> str:
    """`content_digest(rating_content(rating, scores))`, its canonical text written field by
    field (no dicts, no key sorting: the ledger check hashes every rating); a rating whose
    fields are not the stored types (text, whole numbers, finite scores) goes the general
    way."""
    return hashlib.sha256(_rating_text(rating, scores).encode()).hexdigest()


_TEXT = json.encoder.encode_basestring  # a str as JSON text, as the canonical encoder writes it


def _rating_text(rating, scores: Mapping) -> str:
    verdict, flags, marks, comment = (
        rating.verdict,
        rating.flags or [],
        rating.not_applicable,
        rating.comment or "",
    )
    if not (
        _whole(rating.task_version_id, rating.expert_id, rating.revision, rating.confidence)
        and _whole(rating.round_id)
        and type(rating.rater_kind) is str
        and type(comment) is str
        and (verdict is None or isinstance(verdict, str))
        and all(type(f) is str for f in flags)
        and all(type(k) is str and type(v) is str for k, v in (marks or {}).items())
        and all(
            type(k) is str and (v is None or (type(v) in (int, float) and math.isfinite(v)))
            for k, v in scores.items()
        )
    ):
        return canonical_json(rating_content(rating, scores))
    score_text = ",".join(
        f"{_TEXT(k)}:{'null' if v is None else repr(float(v))}" for k, v in sorted(scores.items())
    )
    marks_text = (
        ',"not_applicable":{'
        + ",".join(f"{_TEXT(k)}:{_TEXT(v)}" for k, v in sorted(marks.items()))
        + "}"
        if marks
        else ""
    )
    return (
        f'{{"comment":{_TEXT(comment)},"confidence":{_number(rating.confidence)},'
        f'"expert_id":{_number(rating.expert_id)},'
        f'"flags":[{",".join(_TEXT(f) for f in sorted(flags))}]{marks_text},'
        f'"rater_kind":{_TEXT(rating.rater_kind)},"revision":{_number(rating.revision)},'
        f'"round_id":{_number(rating.round_id)},"scores":{{{score_text}}},'
        f'"task_version_id":{_number(rating.task_version_id)},'
        f'"verdict":{"null" if verdict is None else _TEXT(str(verdict))}}}'
    )


def _whole(*values) -> bool:
    return all(v is None or type(v) is int for v in values)


def _number(value: int | None) -> str:
    return "null" if value is None else str(value)


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
