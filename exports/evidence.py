"""The evidence beside an exported task set: ratings, agreement, the gate and its decisions,
adjudications, coverage, rubrics and the ledger slice. Each function returns
{relative path: text}; nothing here reads the clock."""

import csv
import io
import math
from collections.abc import Iterable

import pandas as pd
from itsmreview.exports.bundle import canonical, jsonl

TOP_GAPS = 20


def pseudonyms(ids: Iterable[int], prefix: str) -> dict[int, str]:
    """Stable pseudonyms by id order: the same people get the same names in every export.

    >>> pseudonyms([7, 3], "rater")
    {3: 'rater-01', 7: 'rater-02'}
    """
    ordered = sorted(set(ids))
    width = max(2, len(str(len(ordered))))
    return {user: f"{prefix}-{i:0{width}d}" for i, user in enumerate(ordered, start=1)}


def _clean(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def ratings_table(
    ratings: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    versions: dict[int, tuple[str, int]],
    names: dict[int, str],
    dimensions: list[str],
) -> list[dict]:
    """One row per current submitted rating: task, version, round, rater, verdict, flags,
    comment and one value per rubric dimension."""
    wide = (
        scores.pivot_table(index="rating_id", columns="dimension", values="value", aggfunc="first")
        if len(scores)
        else pd.DataFrame()
    )
    rows = []
    for rating in ratings.itertuples(index=False):
        task, version = versions[int(rating.task_version_id)]
        row = {
            "task": task,
            "version": version,
            "round": rating.round,
            "rater": names[int(rating.expert_id)],
            "rater_kind": rating.rater_kind,
            "revision": int(rating.revision),
            "verdict": _clean(rating.verdict),
            "flags": sorted(rating.flags or []),
            "confidence": None if pd.isna(rating.confidence) else int(rating.confidence),
            "comment": rating.comment or "",
            "submitted_at": _clean(pd.Timestamp(rating.submitted_at))
            if rating.submitted_at is not None
            else None,
        }
        for dimension in dimensions:
            value = (
                wide.at[rating.rating_id, dimension]
                if dimension in wide.columns and rating.rating_id in wide.index
                else None
            )
            row[dimension] = _clean(None if value is None else float(value))
        rows.append(row)
    rows.sort(key=lambda r: (r["task"], r["version"], r["round"], r["rater"]))
    return rows


def ratings_files(rows: list[dict], dimensions: list[str]) -> dict[str, str]:
    columns = [
        "task",
        "version",
        "round",
        "rater",
        "rater_kind",
        "revision",
        "verdict",
        "flags",
        "confidence",
        *dimensions,
        "comment",
        "submitted_at",
    ]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {
                **{k: row.get(k) for k in columns},
                "flags": ";".join(row["flags"]),
            }
        )
    return {"evidence/ratings.csv": buffer.getvalue(), "evidence/ratings.jsonl": jsonl(rows)}


def task_summary(rows: list[dict], dimensions: list[str]) -> list[dict]:
    """Per exported task: rating count, median of each dimension, verdict counts."""
    frame = pd.DataFrame(rows)
    out = []
    if frame.empty:
        return out
    for (task, version), group in frame.groupby(["task", "version"], sort=True):
        humans = group[group["rater_kind"] == "human"]
        out.append(
            {
                "task": task,
                "version": int(version),
                "ratings": len(humans),
                "median": {
                    d: _clean(float(humans[d].median())) if d in humans else None
                    for d in dimensions
                },
                "verdicts": {
                    str(k): int(v) for k, v in humans["verdict"].value_counts().sort_index().items()
                },
            }
        )
    return out


def agreement_file(per_round: dict[str, list[dict]], summary: list[dict]) -> dict[str, str]:
    return {"evidence/agreement.json": canonical({"rounds": per_round, "tasks": summary})}


def gate_file(per_round: dict[str, dict]) -> dict[str, str]:
    return {"evidence/gate.json": canonical(per_round)}


def adjudications_file(
    adjudications: pd.DataFrame, *, versions: dict[int, tuple[str, int]], names: dict[int, str]
) -> dict[str, str]:
    rows = [
        {
            "task": versions[int(a.task_version_id)][0],
            "version": versions[int(a.task_version_id)][1],
            "round": a.round,
            "lead": names[int(a.lead_id)],
            "decision": a.decision,
            "reason": a.reason,
            "created_at": _clean(pd.Timestamp(a.created_at)),
        }
        for a in adjudications.itertuples(index=False)
    ]
    return {"evidence/adjudications.jsonl": jsonl(rows)}


def coverage_file(reports: dict[str, dict]) -> dict[str, str]:
    trimmed = {}
    for log, report in sorted(reports.items()):
        gaps = report.get("gaps", {})
        trimmed[log] = {
            **report,
            "gaps": {
                key: (value[:TOP_GAPS] if isinstance(value, list) else value)
                for key, value in gaps.items()
            },
        }
    return {"evidence/coverage.json": canonical(trimmed)}


def rubrics_file(rubrics: list) -> dict[str, str]:
    return {
        "evidence/rubrics.json": canonical(
            [
                {
                    "name": r.name,
                    "version": r.version,
                    "content_hash": r.content_hash,
                    "definition": r.definition,
                }
                for r in rubrics
            ]
        )
    }


def ledger_rows(entries: list, names: dict[int | None, str]) -> list[dict]:
    return [
        {
            "seq": e.seq,
            "created_at": e.created_at.isoformat(),
            "artifact_type": e.artifact_type,
            "artifact_id": e.artifact_id,
            "field": e.field,
            "source_kind": e.source_kind,
            "reference": e.reference,
            "action": e.action,
            "actor": names.get(e.actor_id),
            "payload": e.payload,
            "prev_hash": e.prev_hash,
            "entry_hash": e.entry_hash,
        }
        for e in entries
    ]
