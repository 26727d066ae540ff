"""The dashboard's statements: status and check counts, progress, a round's task attributes and
repairs, the fingerprints its stored figures are keyed on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from itsmreview.accounts.models import User
from itsmreview.catalog.models import TaskVersion
from itsmreview.db import frame_of, utcnow
from itsmreview.review.gate.queries.reads import newest_checks
from itsmreview.review.models import (
    Assignment,
    AssignmentStatus,
    MachineCheck,
    Rating,
    RatingStatus,
    ResolutionProposal,
    ReviewRound,
    RoundTask,
    TaskRepair,
)
from itsmreview.review.rounds.queries import holds_place
from sqlalchemy import (
    case,
    func,
)
from sqlmodel import Session, select

if TYPE_CHECKING:
    import pandas as pd


def round_status_counts(*, session: Session, round_id: int) -> dict[str, int]:
    """How many task versions of a round stand at each decision status."""
    rows = session.exec(
        select(TaskVersion.status, func.count())
        .join(RoundTask, RoundTask.task_version_id == TaskVersion.id)
        .where(RoundTask.round_id == round_id)
        .group_by(TaskVersion.status)
    ).all()
    return {str(status): int(count) for status, count in rows}


def progress_frame(*, session: Session) -> pd.DataFrame:
    """Per round and expert: assigned and submitted counts (grouped on an index of the
    assignments, then named)."""
    submitted = func.sum(case((Assignment.status == AssignmentStatus.submitted, 1), else_=0))
    grouped = (
        select(
            Assignment.round_id,
            Assignment.expert_id,
            func.count().label("assigned"),
            submitted.label("submitted"),
        )
        .where(holds_place(utcnow()))
        .group_by(Assignment.round_id, Assignment.expert_id)
        .subquery()
    )
    return frame_of(
        session,
        select(
            ReviewRound.name.label("round"),
            User.username.label("expert"),
            grouped.c.assigned,
            grouped.c.submitted,
        )
        .join(ReviewRound, ReviewRound.id == grouped.c.round_id)
        .join(User, User.id == grouped.c.expert_id)
        .order_by(ReviewRound.name, User.username),
    )


def ratings_fingerprint(*, session: Session, round_id: int) -> tuple:
    """Changes whenever the round's set of current submitted ratings changes: ratings are
    only ever added (a revision is a new row that retires the one before), so the newest
    submitted id tells, read from an index."""
    newest = session.exec(
        select(func.max(Rating.id)).where(
            Rating.round_id == round_id, Rating.status == RatingStatus.submitted
        )
    ).one()
    return (int(newest or 0),)


def check_status_counts(*, session: Session, round_id: int) -> dict[str, int]:
    """status -> newest check results of the round's task versions."""
    newest = newest_checks().where(
        select(RoundTask.id)
        .where(
            RoundTask.round_id == round_id,
            RoundTask.task_version_id == MachineCheck.task_version_id,
        )
        .exists()
    )
    sub = newest.subquery()
    rows = session.exec(select(sub.c.status, func.count()).group_by(sub.c.status)).all()
    return {str(s): int(n) for s, n in rows}


def round_task_attributes(*, session: Session, round_id: int) -> pd.DataFrame:
    """The round's task versions with their status and authoring fields."""
    return frame_of(
        session,
        select(
            TaskVersion.id.label("task_version_id"),
            TaskVersion.status,
            TaskVersion.difficulty,
            TaskVersion.user_type,
            TaskVersion.simulator_backbone,
        )
        .join(RoundTask, RoundTask.task_version_id == TaskVersion.id)
        .where(RoundTask.round_id == round_id),
    )


def round_repair_count(*, session: Session, round_id: int) -> int:
    return int(
        session.exec(
            select(func.count()).select_from(TaskRepair).where(TaskRepair.round_id == round_id)
        ).one()
    )


def proposal_count(*, session: Session, round_id: int) -> dict[str, int]:
    rows = session.exec(
        select(ResolutionProposal.status, func.count())
        .where(ResolutionProposal.round_id == round_id)
        .group_by(ResolutionProposal.status)
    ).all()
    return {str(s): int(n) for s, n in rows}


def round_larger_than(*, session: Session, round_id: int, tasks: int) -> bool:
    """Whether the round holds more than `tasks` task versions (stops after that many rows
    of its index instead of counting them all)."""
    query = (
        select(RoundTask.task_version_id)
        .where(RoundTask.round_id == round_id)
        .offset(tasks)
        .limit(1)
    )
    return session.exec(query).first() is not None


def assignments_fingerprint(*, session: Session) -> tuple:
    """(newest assignment id, newest rating id): a claim adds an assignment, a submit a
    rating, so progress per expert moves with them (and with lapsing reservations)."""
    newest_assignment = session.exec(select(func.max(Assignment.id))).one()
    newest_rating = session.exec(select(func.max(Rating.id))).one()
    return (newest_assignment or 0, newest_rating or 0)
