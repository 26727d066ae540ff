"""Machine checks beside the human ones: results of external checks (structure,
reproducibility, verifiability, ...) per task version, imported from JSON, shown beside the
ratings and used by the gate (a failed check sends the task back for revision)."""

import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries as catalog_queries
from itsmreview.db import utcnow
from itsmreview.errors import InvalidInput
from itsmreview.files import parse_json, read_text_bounded
from itsmreview.ledger.chain import content_digest
from itsmreview.ledger.service import append_entries
from itsmreview.review.commitments import check_row_content
from itsmreview.review.models import ReviewRound, Rubric
from itsmreview.review.ratings import builtin_checks, queries
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlmodel import Session

MAX_CHECKS_BYTES = 50 * 2**20


MAX_VERSION = 2**31 - 1  # task version numbers are stored as 32-bit integers


_STATUS = {"pass": "pass", "passed": "pass", "ok": "pass", "warn": "warn", "warning": "warn"}


_STATUS |= {"fail": "fail", "failed": "fail", "error": "error"}


# C0 controls but tab, line feed and carriage return, DEL, and lone surrogates: no tool writes
# them in a result, PostgreSQL cannot store NUL, and they hide text from a reader
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def _no_controls(text: str) -> str:
    found = _CONTROL.search(text)
    if found:
        raise ValueError(
            f"holds the control character U+{ord(found.group()):04X} at character "
            f"{found.start() + 1}; remove it (tab and line breaks are allowed)"
        )
    return text


def _clean_json(value: Any, where: str) -> None:
    """ValueError naming the first place in a JSON value with a control character (in a key or
    a text) or a number that is not finite (NaN, Infinity)."""
    stack = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            try:
                _no_controls(item)
            except ValueError as exc:
                raise ValueError(f"{at} {exc}") from None
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{at} is {item}, not a number; give a finite number or null")
        elif isinstance(item, dict):
            for key, inner in item.items():
                stack.append((key, f"{at} key {key!r}"))
                stack.append((inner, f"{at}.{key}"))
        elif isinstance(item, list):
            stack.extend((inner, f"{at}[{i}]") for i, inner in enumerate(item))


class CheckIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=256)
    version: int | None = None
    content_hash: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    check: str = Field(pattern=r"^[a-z][a-z0-9_.-]{0,63}$")
    status: Literal["pass", "warn", "fail", "error"]
    summary: str = Field(default="", max_length=5000)
    details: dict[str, Any] = Field(default_factory=dict)
    tool: str = Field(default="", max_length=128)
    ran_at: datetime | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> str:
        found = _STATUS.get(str(value).strip().lower()) if isinstance(value, str) else None
        if found is None:
            raise ValueError(f"status {value!r} is not one of pass, warn, fail, error")
        return found

    @field_validator("task", "summary", "tool", mode="after")
    @classmethod
    def _text(cls, value: str) -> str:
        return _no_controls(value)

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VERSION:
            shown = json.dumps(value) if isinstance(value, bool | int | float) else repr(value)
            raise ValueError(
                f"version {shown[:40]} is not a version number: give a whole number from 1 to "
                f"{MAX_VERSION:,} (or leave it out for the newest version)"
            )
        return value

    @field_validator("details", mode="after")
    @classmethod
    def _details(cls, value: dict) -> dict:
        if value:
            _clean_json(value, "details")
        return value

    @field_validator("ran_at", mode="before")
    @classmethod
    def _ran_at(cls, value: Any) -> datetime | None:
        if value is None:
            return None
        example = "such as 2026-12-01T10:00:00Z or 2026-12-01T11:00:00+01:00"
        if not isinstance(value, str):
            raise ValueError(f"ran_at {value!r} is not ISO 8601 text {example}")
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            shown = value if len(value) <= 60 else f"{value[:60]}..."
            raise ValueError(
                f"ran_at {shown!r} is not an ISO 8601 date and time {example}"
            ) from None
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            raise ValueError(
                f"ran_at {value!r} has no time zone, so the moment it names is unknown; add Z "
                "for UTC or the offset it was taken in (+01:00)"
            )
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise ValueError(f"ran_at {value!r} is out of range in UTC") from None


def read_checks(path: Path | str) -> list[CheckIn]:
    """Validate a checks file: a JSON list, {"checks": [...]}, or JSON Lines. Raises
    ValueError listing each problem with its place (file, record, field)."""
    path = Path(path)
    text = read_text_bounded(path, MAX_CHECKS_BYTES, what="checks file")
    if path.suffix.lower() == ".jsonl":
        items = [
            (f"line {n}", parse_json(line, f"{path}: line {n}"))
            for n, line in enumerate(text.splitlines(), start=1)
            if line.strip()
        ]
    else:
        data = parse_json(text, path)
        if isinstance(data, dict) and "checks" in data:
            data = data["checks"]
        if not isinstance(data, list):
            raise ValueError(f'{path}: expected a list of check results or {{"checks": [...]}}')
        items = [(f"$[{i}]", item) for i, item in enumerate(data)]
    if not items:
        raise ValueError(f"{path}: holds no check result")
    out, problems = [], []
    for number, (where, item) in enumerate(items, start=1):
        try:
            out.append(CheckIn.model_validate(item))
        except ValidationError as exc:
            for error in exc.errors()[:5]:
                field = ".".join(str(p) for p in error["loc"]) or "(the record)"
                message = error["msg"].removeprefix("Value error, ")
                problems.append(f"  {where}.{field}: {message}")
        if len(problems) >= MAX_PROBLEMS and number < len(items):
            stop = f"  (stopped at {where} of {len(items):,} records: fix these, import again)"
            problems.append(stop)
            break
    if problems:
        raise ValueError(f"{path}: problems in check results\n" + "\n".join(problems))
    return out


MAX_PROBLEMS = 20  # listed before reading stops: a wrong file would list every record


def _resolve(path, found: list[CheckIn], session: Session) -> list[tuple]:
    """(check, external id, version id, version number) of each result, from one read of the
    named tasks and their versions. Raises InvalidInput listing results naming no version."""
    tasks = catalog_queries.tasks_by_external_ids(
        session=session, external_ids=[item.task for item in found]
    )
    by_hash: dict[tuple[int, str], tuple[int, int]] = {}
    by_number: dict[tuple[int, int], int] = {}
    newest: dict[int, tuple[int, int]] = {}
    for task_id, version_id, number, digest in catalog_queries.version_keys_of_tasks(
        session=session, task_ids=[t.id for t in tasks.values()]
    ):
        by_hash[(task_id, digest)] = (version_id, number)
        by_number[(task_id, number)] = version_id
        if number > newest.get(task_id, (0, 0))[1]:
            newest[task_id] = (version_id, number)
    resolved, problems = [], []
    for index, item in enumerate(found, start=1):
        task = tasks.get(item.task)
        if task is None:
            problems.append(f"  check {index}: no task {item.task!r} in the catalog")
            continue
        if item.content_hash:
            version = by_hash.get((task.id, item.content_hash))
        elif item.version:
            version_id = by_number.get((task.id, item.version))
            version = None if version_id is None else (version_id, item.version)
        else:
            version = newest.get(task.id)
        if version is None:
            which = item.content_hash or f"version {item.version}"
            problems.append(f"  check {index}: task {item.task!r} has no {which}")
            continue
        resolved.append((item, task.external_id, *version))
    if problems:
        raise InvalidInput(
            f"{path}: {len(problems)} check(s) name no stored task version\n"
            + "\n".join(problems[:20])
        )
    return resolved


def import_checks(
    path: Path | str, *, session: Session, actor: User, dry_run: bool = False
) -> dict:
    """Store every result of the file (all or nothing), each with a ledger entry, then
    re-decide the checked task versions in their open rounds. Leads and admins. Results are
    written BATCH at a time, their ledger entries after one read of the ledger's head. With
    `dry_run` everything is checked and the re-decisions reported, and nothing is kept.
    Returns counts by status and the re-decided tasks. Raises InvalidInput naming the file,
    record and field of every problem."""
    require_role(actor, Role.lead)
    try:
        found = read_checks(path)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    resolved = _resolve(path, found, session)
    counts: dict[str, int] = {}
    for item, *_ in resolved:
        counts[item.status] = counts.get(item.status, 0) + 1
    savepoint = session.begin_nested() if dry_run else None
    try:
        now = utcnow()
        for start in range(0, len(resolved), BATCH):
            batch = resolved[start : start + BATCH]
            rows = [
                {
                    "task_version_id": version_id,
                    "check": item.check,
                    "status": item.status,
                    "summary": item.summary,
                    "details": item.details,
                    "tool": item.tool,
                    "ran_at": item.ran_at,
                    "imported_at": now,
                    "imported_by_id": actor.id,
                }
                for item, _, version_id, _ in batch
            ]
            ids = queries.insert_checks(session=session, rows=rows)
            append_entries(
                session=session,
                entries=[
                    {
                        "artifact_type": "machine_check",
                        "artifact_id": str(check_id),
                        "action": f"check:{item.status}",
                        "source_kind": "external",
                        "reference": item.tool or "machine check",
                        "actor_id": actor.id,
                        "payload": {
                            "task": f"{external_id}@v{number}",
                            "check": item.check,
                            "content_sha256": content_digest(check_row_content(row)),
                        },
                    }
                    for check_id, row, (item, external_id, _, number) in zip(
                        ids, rows, batch, strict=True
                    )
                ],
            )
        redecided = _redecide(session, sorted({v for _, _, v, _ in resolved}), actor.id)
    finally:
        if savepoint is not None:
            savepoint.rollback()
    return {"imported": len(resolved), "by_status": counts, "redecided": redecided}


BATCH = 10_000  # check results inserted and chained together


def _redecide(session: Session, version_ids: list[int], actor_id: int) -> dict[str, str]:
    """Re-decide these versions in every open round that holds them: round -> statuses."""
    from itsmreview.review.gate.service import (
        gate_config,
        gating_alphas,
        recompute_statuses,
        redecide_task,
    )
    from itsmreview.review.rubrics.service import RubricDefinition

    out: dict[str, str] = {}
    for round_id in queries.open_rounds_of_versions(session=session, task_version_ids=version_ids):
        review_round = session.get(ReviewRound, round_id)
        rubric = RubricDefinition.model_validate(
            session.get(Rubric, review_round.rubric_id).definition
        )
        in_round = queries.versions_in_round(
            session=session, round_id=round_id, task_version_ids=version_ids
        )
        if len(in_round) > REDECIDE_ONE_BY_ONE:  # one pass over the round beats many tasks
            decisions = recompute_statuses(session=session, round_name=round_id, actor_id=actor_id)
            out.update({f"{review_round.name}:{v}": decisions[v].status for v in in_round})
            continue
        config = gate_config(review_round, rubric)
        alphas = gating_alphas(session=session, review_round=review_round, rubric=rubric)
        for version_id in sorted(in_round):
            decision = redecide_task(
                session=session,
                review_round=review_round,
                task_version_id=version_id,
                config=config,
                alphas=alphas,
                actor_id=actor_id,
            )
            out[f"{review_round.name}:{version_id}"] = decision.status
    return out


REDECIDE_ONE_BY_ONE = 500  # checked versions of a round re-decided one at a time, at most


def checks_of_version(*, session: Session, actor: User, task_version_id: int):
    """`checks_frame` for a lead's Tasks page."""
    require_role(actor, Role.lead)
    return checks_frame(session=session, task_version_id=task_version_id)


def checks_frame(*, session: Session, task_version_id: int):
    """The newest result of each check of a task version, for the pages."""
    import pandas as pd

    rows = queries.checks_of(session=session, task_version_id=task_version_id)
    return pd.DataFrame(
        [
            {
                "check": c.check,
                "status": c.status,
                "summary": c.summary,
                "tool": c.tool,
                "ran_at": c.ran_at,
            }
            for c in rows
        ],
        columns=["check", "status", "summary", "tool", "ran_at"],
    )


def builtin_results(
    *, session: Session, actor: User, threshold: float = builtin_checks.THRESHOLD
) -> list[dict]:
    """The built-in checks (do-nothing, duplicate) of every task's newest version, as
    records `checks import` reads. Leads only."""
    require_role(actor, Role.lead)
    if not 0.5 <= threshold <= 1.0:
        raise InvalidInput(f"the similarity threshold lies between 0.5 and 1, not {threshold}")
    pairs = catalog_queries.latest_versions_of(session=session)
    texts = {task.external_id: f"{version.instruction}" for task, version in pairs}
    by_text: dict[str, list[str]] = {}
    for task_id, text in texts.items():
        by_text.setdefault(" ".join(builtin_checks.normalised(text)), []).append(task_id)
    exact = {task_id for same in by_text.values() if len(same) > 1 for task_id in same}
    twins = builtin_checks.near_duplicates(texts, threshold)
    now = utcnow().isoformat()
    out = []
    for task, version in pairs:
        state = (version.extra or {}).get("state")
        for check, (status, summary, details) in (
            ("do-nothing", builtin_checks.do_nothing(state, version.ground_truth or "")),
            (
                "duplicate",
                builtin_checks.duplicate_result(
                    task.external_id, twins.get(task.external_id, []), exact
                ),
            ),
        ):
            out.append(
                {
                    "task": task.external_id,
                    "version": version.version,
                    "content_hash": version.content_hash,
                    "check": check,
                    "status": status,
                    "summary": summary,
                    "details": details,
                    "tool": builtin_checks.TOOL,
                    "ran_at": now,
                }
            )
    return out
