"""Every select of the catalog: tasks, their versions, declared variants and transcripts."""

from dataclasses import dataclass

import pandas as pd
from itsmreview.catalog.models import Task, TaskVersion, TaskVersionVariant, Transcript
from itsmreview.db import distinct_walk, frame_of, in_ids
from sqlalchemy import func, or_
from sqlalchemy import literal as literal_text
from sqlalchemy.orm import aliased
from sqlmodel import Session, select


def task_by_external_id(*, session: Session, external_id: str) -> Task | None:
    return session.exec(select(Task).where(Task.external_id == external_id)).first()


def latest_version(*, session: Session, task_id: int) -> TaskVersion | None:
    return session.exec(
        select(TaskVersion)
        .where(TaskVersion.task_id == task_id)
        .order_by(TaskVersion.version.desc())
        .limit(1)
    ).first()


def version_of(*, session: Session, task_id: int, version: int) -> TaskVersion | None:
    return session.exec(
        select(TaskVersion).where(TaskVersion.task_id == task_id, TaskVersion.version == version)
    ).first()


def task_of_version(*, session: Session, task_version_id: int) -> Task | None:
    return session.exec(
        select(Task)
        .join(TaskVersion, TaskVersion.task_id == Task.id)
        .where(TaskVersion.id == task_version_id)
    ).first()


def version_by_hash(*, session: Session, task_id: int, content_hash: str) -> TaskVersion | None:
    return session.exec(
        select(TaskVersion).where(
            TaskVersion.task_id == task_id, TaskVersion.content_hash == content_hash
        )
    ).first()


def _in_names(session: Session, column, names: list[str]):
    """column IN (names) with the whole list as ONE bind parameter (a text array on
    PostgreSQL, a JSON array read by `json_each` on SQLite), whatever its length."""
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy import String, any_, literal
        from sqlalchemy.dialects.postgresql import ARRAY

        return column == any_(literal(names, ARRAY(String)))
    import json

    listed = func.json_each(literal_text(json.dumps(names))).table_valued("value")
    return column.in_(select(listed.c.value))


NAMES_PER_QUERY = 10_000


def tasks_by_external_ids(*, session: Session, external_ids: list[str]) -> dict[str, Task]:
    """external id -> stored task, for those of `external_ids` in the catalog (a query per
    NAMES_PER_QUERY ids)."""
    names = sorted(set(external_ids))
    out: dict[str, Task] = {}
    for start in range(0, len(names), NAMES_PER_QUERY):
        chunk = names[start : start + NAMES_PER_QUERY]
        rows = session.exec(select(Task).where(_in_names(session, Task.external_id, chunk)))
        out.update({task.external_id: task for task in rows})
    return out


def version_keys_of_tasks(*, session: Session, task_ids: list[int]) -> list[tuple]:
    """(task id, version id, version number, content hash) of every version of these tasks."""
    out: list[tuple] = []
    ids = sorted(set(task_ids))
    for start in range(0, len(ids), NAMES_PER_QUERY):
        chunk = ids[start : start + NAMES_PER_QUERY]
        out += session.exec(
            select(
                TaskVersion.task_id, TaskVersion.id, TaskVersion.version, TaskVersion.content_hash
            ).where(in_ids(session, TaskVersion.task_id, chunk))
        ).all()
    return out


def transcripts_of(*, session: Session, task_version_id: int) -> list[Transcript]:
    return list(
        session.exec(
            select(Transcript)
            .where(Transcript.task_version_id == task_version_id)
            .order_by(Transcript.id)
        ).all()
    )


def _latest_versions():
    """Subquery: each task's newest version number (columns task_id, version)."""
    return (
        select(TaskVersion.task_id, func.max(TaskVersion.version).label("version"))
        .group_by(TaskVersion.task_id)
        .subquery()
    )


def _listed():
    """A task's columns as the task lists show them."""
    return (Task.id, Task.external_id, Task.title, Task.persona, Task.track, Task.status)


AUTHORING_COLUMNS = (Task.difficulty, Task.user_type, Task.simulator_backbone)


def task_names(
    *, session: Session, search: str = "", limit: int | None = None
) -> list[tuple[str, str]]:
    """(external id, title) of the tasks whose id or title holds `search` (every task when
    empty; case-insensitive), by id, at most `limit`."""
    query = (  # the Tasks page's text filter: '%' and '_' match themselves
        select(Task.external_id, Task.title)
        .where(*_matching(TaskFilters(text=search)))
        .order_by(Task.external_id)
    )
    return list(session.exec(query.limit(limit) if limit else query))


def tasks_frame(*, session: Session) -> pd.DataFrame:
    latest = _latest_versions()
    frame = frame_of(
        session,
        select(*_listed(), latest.c.version, *AUTHORING_COLUMNS)
        .join(latest, latest.c.task_id == Task.id)
        .order_by(Task.persona, Task.external_id),
    )
    return frame


def status_counts(*, session: Session) -> dict[str, int]:
    rows = session.exec(select(Task.status, func.count()).group_by(Task.status)).all()
    return {status: count for status, count in rows}


def task_sources(
    *,
    session: Session,
    log_name: str,
    statuses: tuple[str, ...] | None = None,
    rated_only: bool = False,
    persona: str | None = None,
    track: str | None = None,
) -> list[tuple[str, dict]]:
    """(external id, source) of each task's newest version derived from `log_name`.

    With `statuses`, each task's newest version decided so (an approved version 2 counts
    while version 3 is unreviewed); `rated_only` keeps tasks with a submitted
    rating of any version; `persona` and `track` keep the tasks of that persona or track.
    """
    from itsmreview.review.models import Rating

    latest = _latest_versions() if statuses is None else _newest_versions_with(statuses)
    query = (
        select(Task.external_id, TaskVersion.source)
        .join(TaskVersion, TaskVersion.task_id == Task.id)
        .join(
            latest,
            (latest.c.task_id == TaskVersion.task_id) & (latest.c.version == TaskVersion.version),
        )
        .order_by(Task.external_id)
    )
    if persona is not None:
        query = query.where(TaskVersion.persona == persona)
    if track is not None:
        query = query.where(TaskVersion.track == track)
    if rated_only:
        rated = (
            select(TaskVersion.task_id)
            .join(Rating, Rating.task_version_id == TaskVersion.id)
            .where(Rating.status == "submitted", Rating.rater_kind == "human")
        )
        query = query.where(Task.id.in_(rated))
    return [
        (external_id, source)
        for external_id, source in session.exec(query).all()
        if source and source.get("log") == log_name
    ]


def catalog_state(*, session: Session, ratings: bool = False) -> tuple[int, ...]:
    """Changes whenever a task version is added (versions are never changed or removed),
    and with `ratings` whenever a rating is added (ratings only ever are): newest ids."""
    from itsmreview.review.models import Rating

    state = (int(session.exec(select(func.max(TaskVersion.id))).one() or 0),)
    if ratings:
        state += (int(session.exec(select(func.max(Rating.id))).one() or 0),)
    return state


def version_number(*, session: Session, task_id: int, number: int) -> TaskVersion | None:
    return session.exec(
        select(TaskVersion).where(TaskVersion.task_id == task_id, TaskVersion.version == number)
    ).first()


def latest_version_ids(
    *,
    session: Session,
    external_ids: list[str] | None = None,
    filters: "TaskFilters | None" = None,
) -> list[int]:
    """Ids of the newest version of every task (of the given tasks, of those matching
    `filters`), by task id."""
    latest = _latest_versions()
    query = (
        select(TaskVersion.id)
        .join(
            latest,
            (latest.c.task_id == TaskVersion.task_id) & (latest.c.version == TaskVersion.version),
        )
        .order_by(TaskVersion.task_id)
    )
    if external_ids:
        query = query.where(
            TaskVersion.task_id.in_(select(Task.id).where(Task.external_id.in_(external_ids)))
        )
    if filters is not None and (conditions := _matching(filters)):
        query = query.where(TaskVersion.task_id.in_(select(Task.id).where(*conditions)))
    return list(session.exec(query).all())


def latest_versions_of(
    *, session: Session, external_ids: list[str] | None = None
) -> list[tuple[Task, TaskVersion]]:
    latest = _latest_versions()
    query = (
        select(Task, TaskVersion)
        .join(TaskVersion, TaskVersion.task_id == Task.id)
        .join(
            latest,
            (latest.c.task_id == TaskVersion.task_id) & (latest.c.version == TaskVersion.version),
        )
        .order_by(Task.external_id)
    )
    if external_ids:
        query = query.where(Task.external_id.in_(external_ids))
    return list(session.exec(query).all())


@dataclass(frozen=True)
class TaskFilters:
    """What the Tasks page filters by; empty means any."""

    personas: tuple[str, ...] = ()
    tracks: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    text: str = ""
    variant_key: str | None = None
    difficulties: tuple[str, ...] = ()
    user_types: tuple[str, ...] = ()
    backbones: tuple[str, ...] = ()
    external_ids: tuple[str, ...] = ()


def _matching(filters: TaskFilters) -> list:
    conditions = []
    if filters.external_ids:
        conditions.append(Task.external_id.in_(list(filters.external_ids)))
    if filters.personas:
        conditions.append(Task.persona.in_(list(filters.personas)))
    if filters.tracks:
        conditions.append(Task.track.in_(list(filters.tracks)))
    if filters.statuses:
        conditions.append(Task.status.in_(list(filters.statuses)))
    for column, chosen in zip(
        AUTHORING_COLUMNS,
        (filters.difficulties, filters.user_types, filters.backbones),
        strict=True,
    ):
        if chosen:
            conditions.append(column.in_(list(chosen)))
    if filters.text:
        needle = "%" + _escape_like(filters.text.lower()) + "%"
        conditions.append(
            or_(
                func.lower(Task.external_id).like(needle, escape="\\"),
                func.lower(Task.title).like(needle, escape="\\"),
            )
        )
    if filters.variant_key:
        # from the variant's index to its tasks: a correlated EXISTS made SQLite test every
        # task of the catalogue (130 ms at 100,000 tasks, 4-6 ms this way)
        conditions.append(
            Task.id.in_(
                select(TaskVersion.task_id)
                .join(TaskVersionVariant, TaskVersion.id == TaskVersionVariant.task_version_id)
                .where(
                    TaskVersionVariant.sequence_key == filters.variant_key,
                    TaskVersion.version == _newest_for(TaskVersion),
                )
            )
        )
    return conditions


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def count_tasks(*, session: Session, filters: TaskFilters = TaskFilters()) -> int:
    return session.exec(select(func.count()).select_from(Task).where(*_matching(filters))).one()


def count_in_open_rounds(*, session: Session, filters: TaskFilters = TaskFilters()) -> int:
    """How many tasks matching `filters` an open review round holds (any of their versions)."""
    from itsmreview.review.models import ReviewRound, RoundTask

    held = (
        select(RoundTask.id)
        .join(TaskVersion, TaskVersion.id == RoundTask.task_version_id)
        .join(ReviewRound, ReviewRound.id == RoundTask.round_id)
        .where(TaskVersion.task_id == Task.id, ReviewRound.status == "open")
        .exists()
    )
    return session.exec(
        select(func.count()).select_from(Task).where(*_matching(filters), held)
    ).one()


def task_page(
    *, session: Session, filters: TaskFilters = TaskFilters(), offset: int = 0, limit: int = 50
) -> pd.DataFrame:
    """One page of the task list (by persona, then id), with each task's newest version, the
    newest version experts rated, the newest approved version and the source log: the page's
    rows only, whatever the catalog's size."""
    from itsmreview.review.models import Rating

    page = session.exec(
        select(*_listed(), *AUTHORING_COLUMNS)
        .where(*_matching(filters))
        .order_by(Task.persona, Task.external_id)
        .offset(max(0, offset))
        .limit(max(1, limit))
    ).all()
    columns = ["id", "title", "persona", "track", "status", "version", "rated_version"]
    columns += ["approved_version", "log", "difficulty", "user_type", "simulator_backbone"]
    columns += ["task_id"]
    if not page:
        return pd.DataFrame(columns=[*columns, "changed_after_rating", "decision"])
    task_ids = [row[0] for row in page]
    newest = {
        task_id: (version, (source or {}).get("log"))
        for task_id, version, source in session.exec(
            select(TaskVersion.task_id, TaskVersion.version, TaskVersion.source).where(
                in_ids(session, TaskVersion.task_id, task_ids),
                TaskVersion.version == _newest_for(TaskVersion),
            )
        ).all()
    }
    rated = _newest_version_where(
        session,
        task_ids,
        select(Rating.id)
        .where(
            Rating.task_version_id == TaskVersion.id,
            Rating.status == "submitted",
            Rating.rater_kind == "human",
        )
        .exists(),
    )
    approved = _newest_version_where(session, task_ids, TaskVersion.status == "approved")
    rows = []
    for (
        task_id,
        external_id,
        title,
        persona,
        track,
        status,
        difficulty,
        user_type,
        backbone,
    ) in page:
        version, log = newest.get(task_id, (None, None))
        rated_version, approved_version = rated.get(task_id), approved.get(task_id)
        rows.append(
            {
                "id": external_id,
                "title": title,
                "persona": persona,
                "track": track,
                "status": str(status),
                "version": version,
                "rated_version": rated_version,
                "approved_version": approved_version,
                "log": log,
                "changed_after_rating": rated_version is not None and rated_version < version,
                "decision": decision_label(str(status), int(version), approved_version),
                "difficulty": difficulty,
                "user_type": user_type,
                "simulator_backbone": backbone,
                "task_id": task_id,
            }
        )
    return pd.DataFrame(rows)


def _newest_version_where(session: Session, task_ids: list[int], condition) -> dict[int, int]:
    """Task id -> its newest version number meeting `condition`, for the given tasks."""
    return dict(
        session.exec(
            select(TaskVersion.task_id, func.max(TaskVersion.version))
            .where(in_ids(session, TaskVersion.task_id, task_ids), condition)
            .group_by(TaskVersion.task_id)
        ).all()
    )


def _newest_for(version_table):
    """Correlated: the newest version number of the task of `version_table`'s row."""
    newest = aliased(TaskVersion)
    return (
        select(func.max(newest.version))
        .where(newest.task_id == version_table.task_id)
        .scalar_subquery()
    )


def filter_choices(*, session: Session) -> dict[str, list[str]]:
    """The personas, tracks and statuses the catalog holds, each sorted (indexed columns)."""
    return {
        name: sorted(str(v) for v in session.exec(distinct_walk(column)).all())
        for name, column in (
            ("persona", Task.persona),
            ("track", Task.track),
            ("status", Task.status),
            ("difficulty", Task.difficulty),
            ("user_type", Task.user_type),
            ("simulator_backbone", Task.simulator_backbone),
        )
    }


def declared_variant_sequences(*, session: Session) -> dict[str, list[str]]:
    """Sequence key -> sequence of every variant some newest task version declares: each
    distinct key (from its index), kept when a newest version declares it."""
    keys = distinct_walk(TaskVersionVariant.sequence_key).subquery()
    declaring = aliased(TaskVersionVariant)
    newer = aliased(TaskVersion)
    by_newest = (
        select(declaring.task_version_id)
        .join(TaskVersion, TaskVersion.id == declaring.task_version_id)
        .where(
            declaring.sequence_key == keys.c.value,
            ~select(newer.id)
            .where(newer.task_id == TaskVersion.task_id, newer.version > TaskVersion.version)
            .exists(),
        )
        .exists()
    )
    sequence = (
        select(TaskVersionVariant.sequence)
        .where(TaskVersionVariant.sequence_key == keys.c.value)
        .limit(1)
        .scalar_subquery()
    )
    rows = session.exec(select(keys.c.value, sequence).where(by_newest)).all()
    return {key: list(declared) for key, declared in rows}


def decision_label(status: str, newest: int, approved_version) -> str:
    """The decision a lead reads: the newest version's status, and an older approved version
    when the newest is not the approved one.

    >>> decision_label("draft", 3, 2)
    'approved v2, newest v3 unreviewed'
    >>> decision_label("approved", 3, 3)
    'approved'
    """
    readable = {"draft": "unreviewed", "in_review": "in review"}.get(status, status)
    readable = readable.replace("_", " ")
    known = approved_version is not None and approved_version == approved_version  # not NaN
    if known and int(approved_version) < newest:
        return f"approved v{int(approved_version)}, newest v{newest} {readable}"
    return readable


def _newest_versions_with(statuses: tuple[str, ...]):
    """Subquery: each task's newest version whose decision is one of `statuses` (task_id,
    version)."""
    return (
        select(TaskVersion.task_id, func.max(TaskVersion.version).label("version"))
        .where(TaskVersion.status.in_(statuses))
        .group_by(TaskVersion.task_id)
        .subquery()
    )


def personas_and_tracks(*, session: Session) -> tuple[list[str], list[str]]:
    """The personas and tracks of the tasks' newest versions (which each task mirrors), sorted:
    a walk of each indexed column, one probe a value, not a pass over every version."""
    return tuple(  # type: ignore[return-value]
        [str(v) for v in session.exec(distinct_walk(column)).all() if v]
        for column in (Task.persona, Task.track)
    )
