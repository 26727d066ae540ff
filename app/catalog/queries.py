import pandas as pd
from itsmreview.catalog.models import Task, TaskVersion, Transcript
from itsmreview.db import frame_of
from sqlalchemy import func
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


def version_by_hash(*, session: Session, task_id: int, content_hash: str) -> TaskVersion | None:
    return session.exec(
        select(TaskVersion).where(
            TaskVersion.task_id == task_id, TaskVersion.content_hash == content_hash
        )
    ).first()


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


def tasks_frame(*, session: Session) -> pd.DataFrame:
    latest = _latest_versions()
    return frame_of(
        session,
        select(
            Task.id,
            Task.external_id,
            Task.title,
            Task.persona,
            Task.track,
            Task.status,
            latest.c.version,
        )
        .join(latest, latest.c.task_id == Task.id)
        .order_by(Task.persona, Task.external_id),
    )


def status_counts(*, session: Session) -> dict[str, int]:
    rows = session.exec(select(Task.status, func.count()).group_by(Task.status)).all()
    return {status: count for status, count in rows}


def task_sources(
    *,
    session: Session,
    log_name: str,
    statuses: tuple[str, ...] | None = None,
    rated_only: bool = False,
) -> list[tuple[str, dict]]:
    """(external id, source) of each task's newest version derived from `log_name`.

    With `statuses`, each task's newest version decided so (an approved version 2 counts
    while version 3 is unreviewed); `rated_only` keeps tasks with a submitted
    rating of any version.
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
    if rated_only:
        rated = (
            select(TaskVersion.task_id)
            .join(Rating, Rating.task_version_id == TaskVersion.id)
            .where(Rating.status == "submitted")
        )
        query = query.where(Task.id.in_(rated))
    return [
        (external_id, source)
        for external_id, source in session.exec(query).all()
        if source and source.get("log") == log_name
    ]


def version_number(*, session: Session, task_id: int, number: int) -> TaskVersion | None:
    return session.exec(
        select(TaskVersion).where(TaskVersion.task_id == task_id, TaskVersion.version == number)
    ).first()


def latest_version_ids(*, session: Session, external_ids: list[str] | None = None) -> list[int]:
    """Ids of the newest version of every task (of the given tasks), by task id."""
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


def browser_frame(*, session: Session) -> pd.DataFrame:
    """One row per task: newest version, newest rated version, source log, declared
    sequences."""
    from itsmreview.review.models import Rating

    latest = _latest_versions()
    rated = (
        select(TaskVersion.task_id, func.max(TaskVersion.version).label("rated_version"))
        .join(Rating, Rating.task_version_id == TaskVersion.id)
        .where(Rating.status == "submitted")
        .group_by(TaskVersion.task_id)
        .subquery()
    )
    approved = _newest_versions_with(("approved",))
    frame = frame_of(
        session,
        select(
            Task.external_id.label("id"),
            Task.title,
            Task.persona,
            Task.track,
            Task.status,
            latest.c.version,
            rated.c.rated_version,
            approved.c.version.label("approved_version"),
            TaskVersion.source,
        )
        .join(latest, latest.c.task_id == Task.id)
        .join(
            TaskVersion,
            (TaskVersion.task_id == Task.id) & (TaskVersion.version == latest.c.version),
        )
        .outerjoin(rated, rated.c.task_id == Task.id)
        .outerjoin(approved, approved.c.task_id == Task.id)
        .order_by(Task.persona, Task.external_id),
    )
    frame["log"] = frame["source"].map(lambda s: (s or {}).get("log"))
    frame["changed_after_rating"] = frame["rated_version"].notna() & (
        frame["rated_version"] < frame["version"]
    )
    frame["decision"] = [
        decision_label(status, int(newest), approved)
        for status, newest, approved in zip(
            frame["status"], frame["version"], frame["approved_version"], strict=True
        )
    ]
    return frame


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
