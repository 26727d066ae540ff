"""Every select of the model features."""

import pandas as pd
from itsmreview.accounts.models import User
from itsmreview.db import frame_of
from itsmreview.review.assist.models import ModelRequest, ModelRun, ModelRunStatus
from itsmreview.review.models import Assignment, AssignmentStatus
from sqlmodel import Session, select


def user_by_username(*, session: Session, username: str) -> User | None:
    return session.exec(select(User).where(User.username == username)).first()


def rated_by(*, session: Session, round_id: int, rater_id: int) -> set[int]:
    """Task versions of the round the model rater has rated."""
    return set(
        session.exec(
            select(Assignment.task_version_id).where(
                Assignment.round_id == round_id,
                Assignment.expert_id == rater_id,
                Assignment.status == AssignmentStatus.model,
            )
        ).all()
    )


def has_rated(*, session: Session, round_id: int, rater_id: int, task_version_id: int) -> bool:
    """Whether the model rater has rated this task version of the round (one indexed row)."""
    return (
        session.exec(
            select(Assignment.id).where(
                Assignment.round_id == round_id,
                Assignment.task_version_id == task_version_id,
                Assignment.expert_id == rater_id,
            )
        ).first()
        is not None
    )


def runs_of_round(*, session: Session, round_id: int, limit: int | None = None) -> list[ModelRun]:
    query = select(ModelRun).where(ModelRun.round_id == round_id).order_by(ModelRun.id.desc())
    return list(session.exec(query if limit is None else query.limit(limit)).all())


def running_run(*, session: Session, round_id: int, rater_id: int) -> ModelRun | None:
    return session.exec(
        select(ModelRun).where(
            ModelRun.round_id == round_id,
            ModelRun.rater_id == rater_id,
            ModelRun.status == ModelRunStatus.running,
        )
    ).first()


def run_for_update(*, session: Session, run_id: int) -> ModelRun | None:
    return session.exec(
        select(ModelRun)
        .where(ModelRun.id == run_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).first()


def cancel_requested(*, session: Session, run_id: int) -> bool:
    return bool(
        session.exec(select(ModelRun.cancel_requested).where(ModelRun.id == run_id)).first()
    )


def failed_requests_frame(*, session: Session, run_id: int, limit: int = 200) -> pd.DataFrame:
    from itsmreview.catalog.models import Task, TaskVersion

    return frame_of(
        session,
        select(
            Task.external_id.label("task"),
            ModelRequest.outcome,
            ModelRequest.reason,
            ModelRequest.created_at,
        )
        .join(TaskVersion, TaskVersion.id == ModelRequest.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .where(ModelRequest.run_id == run_id, ModelRequest.rating_id.is_(None))
        .order_by(ModelRequest.id.desc())
        .limit(limit),
    )
