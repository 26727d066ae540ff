"""Repair's and adjudication's statements: repairs, revisions, feedback, proposals, the
adjudication queue's pages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from itsmreview.accounts.models import User
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import frame_of, in_ids
from itsmreview.review.gate.queries.reads import current_submitted, newest_checks
from itsmreview.review.models import (
    Assignment,
    MachineCheck,
    Rating,
    RatingScore,
    ResolutionProposal,
    ReviewRound,
    RoundStatus,
    RoundTask,
    TaskRepair,
    TurnNote,
)
from sqlalchemy import (
    func,
    or_,
)
from sqlmodel import Session, select

if TYPE_CHECKING:
    import pandas as pd


def checks_of_versions(*, session: Session, task_version_ids: Sequence[int]) -> list:
    """The newest result of each check of these task versions, by version and check."""
    if not task_version_ids:
        return []
    return list(
        session.exec(
            newest_checks()
            .where(in_ids(session, MachineCheck.task_version_id, task_version_ids))
            .order_by(MachineCheck.task_version_id, MachineCheck.check)
        ).all()
    )


def proposals_frame(
    *, session: Session, round_id: int | None = None, status: str | None = None
) -> pd.DataFrame:
    """Proposed alternative resolutions with their task, version and expert."""
    query = (
        select(
            ResolutionProposal.id,
            ReviewRound.name.label("round"),
            Task.external_id.label("task"),
            TaskVersion.version,
            User.username.label("expert"),
            ResolutionProposal.description,
            ResolutionProposal.changes,
            ResolutionProposal.status,
            ResolutionProposal.reason,
            ResolutionProposal.created_at,
        )
        .join(ReviewRound, ReviewRound.id == ResolutionProposal.round_id)
        .join(TaskVersion, TaskVersion.id == ResolutionProposal.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .join(User, User.id == ResolutionProposal.expert_id)
    )
    if round_id is not None:
        query = query.where(ResolutionProposal.round_id == round_id)
    if status is not None:
        query = query.where(ResolutionProposal.status == status)
    return frame_of(session, query.order_by(ResolutionProposal.id))


def round_task_row(*, session: Session, round_id: int, task_version_id: int):
    return session.exec(
        select(RoundTask).where(
            RoundTask.round_id == round_id, RoundTask.task_version_id == task_version_id
        )
    ).first()


def repairs_of_task(*, session: Session, task_id: int, round_id: int | None = None) -> list:
    query = select(TaskRepair).where(TaskRepair.task_id == task_id)
    if round_id is not None:
        query = query.where(TaskRepair.round_id == round_id)
    return list(session.exec(query.order_by(TaskRepair.id)).all())


def repair_counts(*, session: Session, task_ids: Sequence[int]) -> dict[int, int]:
    """task id -> repair iterations (new versions put back into a round after revision)."""
    if not task_ids:
        return {}
    rows = session.exec(
        select(TaskRepair.task_id, func.count())
        .where(in_ids(session, TaskRepair.task_id, task_ids))
        .group_by(TaskRepair.task_id)
    ).all()
    return {int(t): int(n) for t, n in rows}


def feedback_ratings(*, session: Session, round_id: int, task_version_ids: Sequence[int]):
    """Current submitted human ratings (id, task version, verdict, flags, comment) of these
    versions, and their scores: what the author's feedback quotes (no expert names)."""
    if not task_version_ids:
        return [], []
    ratings = session.exec(
        select(Rating.id, Rating.task_version_id, Rating.verdict, Rating.flags, Rating.comment)
        .where(*current_submitted(round_id, ("human",)))
        .where(in_ids(session, Rating.task_version_id, task_version_ids))
        .order_by(Rating.task_version_id, Rating.id)
    ).all()
    ids = [r[0] for r in ratings]
    scores = (
        session.exec(
            select(RatingScore.rating_id, RatingScore.dimension, RatingScore.value).where(
                in_ids(session, RatingScore.rating_id, ids)
            )
        ).all()
        if ids
        else []
    )
    return ratings, scores


def feedback_turn_notes(*, session: Session, round_id: int, task_version_ids: Sequence[int]):
    """(task version, transcript, turn, flag, comment) of every turn note on these versions
    in the round."""
    from itsmreview.catalog.models import Transcript

    if not task_version_ids:
        return []
    return session.exec(
        select(
            Assignment.task_version_id,
            Transcript.external_id,
            TurnNote.turn,
            TurnNote.flag,
            TurnNote.comment,
        )
        .join(Assignment, Assignment.id == TurnNote.assignment_id)
        .join(Transcript, Transcript.id == TurnNote.transcript_id)
        .where(Assignment.round_id == round_id)
        .where(in_ids(session, Assignment.task_version_id, task_version_ids))
        .order_by(Assignment.task_version_id, Transcript.external_id, TurnNote.turn)
    ).all()


def tasks_needing_revision_in_open_rounds(*, session: Session) -> set[str]:
    """Ids of the tasks with a version that needs revision in an open round."""
    return set(
        session.exec(
            select(Task.external_id)
            .join(TaskVersion, TaskVersion.task_id == Task.id)
            .join(RoundTask, RoundTask.task_version_id == TaskVersion.id)
            .join(ReviewRound, ReviewRound.id == RoundTask.round_id)
            .where(TaskVersion.status == "needs_revision", ReviewRound.status == RoundStatus.open)
            .distinct()
        ).all()
    )


def revisions_of_task(
    *, session: Session, task_id: int, before_version: int
) -> list[tuple[int, int, float]]:
    """(task version id, round id, priority) of the task's versions older than
    `before_version` that need revision, per round, newest version first."""
    rows = session.exec(
        select(TaskVersion.id, RoundTask.round_id, RoundTask.priority)
        .join(RoundTask, RoundTask.task_version_id == TaskVersion.id)
        .where(
            TaskVersion.task_id == task_id,
            TaskVersion.version < before_version,
            TaskVersion.status == "needs_revision",
        )
        .order_by(RoundTask.round_id, TaskVersion.version.desc())
    ).all()
    seen, out = set(), []
    for version_id, round_id, priority in rows:
        if round_id not in seen:
            seen.add(round_id)
            out.append((int(version_id), int(round_id), float(priority)))
    return out


def _queue_matching(round_id: int, search: str | None):
    from itsmreview.summaries.models import QueuedAdjudication as Q

    query = select(Q.task_version_id, Q.external_id, Task.title, Q.reasons, Q.decided_at).join(
        TaskVersion, TaskVersion.id == Q.task_version_id
    )
    query = query.join(Task, Task.id == TaskVersion.task_id).where(Q.round_id == round_id)
    if search:
        pattern = (
            "%" + search.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        )
        query = query.where(
            or_(
                func.lower(Q.external_id).like(pattern, escape="\\"),
                func.lower(Task.title).like(pattern, escape="\\"),
                func.lower(Q.reasons).like(pattern, escape="\\"),
            )
        )
    return query


def adjudication_queue_page(
    *, session: Session, round_id: int, search: str | None = None, offset: int = 0, limit: int = 25
) -> pd.DataFrame:
    """One page of the round's queue in task order (columns task_version_id, external_id,
    title, reasons, decided_at), only tasks whose id, title or reasons hold `search`."""
    from itsmreview.summaries.models import QueuedAdjudication as Q

    query = _queue_matching(round_id, search).order_by(Q.external_id, Q.task_version_id)
    return frame_of(session, query.offset(offset).limit(limit))


def adjudication_queue_count(*, session: Session, round_id: int, search: str | None = None) -> int:
    """How many tasks of the round's queue match `search` (all without one)."""
    from itsmreview.summaries.models import QueuedAdjudication as Q

    if not search:
        query = select(func.count()).select_from(Q).where(Q.round_id == round_id)
    else:
        query = select(func.count()).select_from(_queue_matching(round_id, search).subquery())
    return int(session.exec(query).one())


def adjudication_queue_rows(*, session: Session, round_id: int) -> dict[int, str]:
    """task version id -> reasons of every task in the round's queue."""
    from itsmreview.summaries.models import QueuedAdjudication as Q

    rows = session.exec(select(Q.task_version_id, Q.reasons).where(Q.round_id == round_id)).all()
    return {int(v): reasons for v, reasons in rows}


def adjudication_queue_newest(*, session: Session, round_id: int):
    """When the round's queue last took a task in (None when it is empty)."""
    from itsmreview.summaries.models import QueuedAdjudication as Q

    return session.exec(select(func.max(Q.decided_at)).where(Q.round_id == round_id)).one()
