"""Machine checks beside the human ones: results of external checks (structure,
reproducibility, verifiability, ...) per task version, imported from JSON, shown beside the
ratings and used by the gate (a failed check sends the task back for revision)."""

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries as catalog_queries
from itsmreview.errors import InvalidInput
from itsmreview.files import parse_json, read_text_bounded
from itsmreview.ledger.chain import content_digest
from itsmreview.ledger.service import append_entry
from itsmreview.review import queries
from itsmreview.review.models import MachineCheck, ReviewRound, Rubric
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlmodel import Session

MAX_CHECKS_BYTES = 50 * 2**20
_STATUS = {"pass": "pass", "passed": "pass", "ok": "pass", "warn": "warn", "warning": "warn"}
_STATUS |= {"fail": "fail", "failed": "fail", "error": "error"}


class CheckIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=256)
    version: int | None = Field(default=None, ge=1)
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
        found = _STATUS.get(str(value).strip().lower())
        if found is None:
            raise ValueError(f"status {value!r} is not one of pass, warn, fail, error")
        return found


def read_checks(path: Path | str) -> list[CheckIn]:
    """Validate a checks file: a JSON list, {"checks": [...]}, or JSON Lines. Raises
    ValueError listing each problem with its place."""
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
    for where, item in items:
        try:
            out.append(CheckIn.model_validate(item))
        except ValidationError as exc:
            for error in exc.errors()[:5]:
                field = ".".join(str(p) for p in error["loc"]) or "(the record)"
                problems.append(f"  {where}.{field}: {error['msg']}")
    if problems:
        raise ValueError(f"{path}: {len(problems)} problem(s)\n" + "\n".join(problems[:20]))
    return out


def import_checks(
    path: Path | str, *, session: Session, actor: User, dry_run: bool = False
) -> dict:
    """Store every result of the file (all or nothing), each with a ledger entry, then
    re-decide the checked task versions in their open rounds. Leads and admins. Returns
    counts by status and the re-decided tasks."""
    require_role(actor, Role.lead)
    try:
        found = read_checks(path)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    resolved, problems = [], []
    tasks: dict[str, object] = {}  # a file lists many checks of one task
    for index, item in enumerate(found):
        if item.task not in tasks:
            tasks[item.task] = catalog_queries.task_by_external_id(
                session=session, external_id=item.task
            )
        task = tasks[item.task]
        version = None
        if task is None:
            problems.append(f"  check {index + 1}: no task {item.task!r} in the catalog")
        elif item.content_hash:
            version = catalog_queries.version_by_hash(
                session=session, task_id=task.id, content_hash=item.content_hash
            )
        elif item.version:
            version = catalog_queries.version_number(
                session=session, task_id=task.id, number=item.version
            )
        else:
            version = catalog_queries.latest_version(session=session, task_id=task.id)
        if task is not None and version is None:
            which = item.content_hash or f"version {item.version}"
            problems.append(f"  check {index + 1}: task {item.task!r} has no {which}")
        resolved.append((item, task, version))
    if problems:
        raise InvalidInput(
            f"{path}: {len(problems)} check(s) name no stored task version\n"
            + "\n".join(problems[:20])
        )
    counts: dict[str, int] = {}
    savepoint = session.begin_nested() if dry_run else None
    try:
        for item, task, version in resolved:
            row = MachineCheck(
                task_version_id=version.id,
                check=item.check,
                status=item.status,
                summary=item.summary,
                details=item.details,
                tool=item.tool,
                ran_at=item.ran_at,
                imported_by_id=actor.id,
            )
            session.add(row)
            session.flush()
            append_entry(
                session=session,
                artifact_type="machine_check",
                artifact_id=str(row.id),
                action=f"check:{item.status}",
                source_kind="external",
                reference=item.tool or "machine check",
                actor_id=actor.id,
                payload={
                    "task": f"{task.external_id}@v{version.version}",
                    "check": item.check,
                    "content_sha256": content_digest(check_content(row)),
                },
            )
            counts[item.status] = counts.get(item.status, 0) + 1
        redecided = _redecide(session, sorted({v.id for _, _, v in resolved}), actor.id)
    finally:
        if savepoint is not None:
            savepoint.rollback()
    return {"imported": len(resolved), "by_status": counts, "redecided": redecided}


def check_content(check: MachineCheck) -> dict:
    """What a machine check's ledger entry commits to: the stored result, every field that
    the gate or a reader uses."""
    ran_at = check.ran_at
    if ran_at is not None and ran_at.tzinfo is None:  # SQLite hands naive UTC back
        ran_at = ran_at.replace(tzinfo=UTC)
    return {
        "task_version_id": check.task_version_id,
        "check": check.check,
        "status": str(check.status),
        "summary": check.summary,
        "details": check.details,
        "tool": check.tool,
        "ran_at": None if ran_at is None else ran_at.astimezone(UTC).isoformat(),
    }


def _redecide(session: Session, version_ids: list[int], actor_id: int) -> dict[str, str]:
    """Re-decide these versions in every open round that holds them: round -> statuses."""
    from itsmreview.review.reliability import (
        gate_config,
        gating_alphas,
        recompute_statuses,
        redecide_task,
    )
    from itsmreview.review.rubrics import RubricDefinition

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
