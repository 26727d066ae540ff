"""Reads and writes of Delphi rounds (the only module of consensus that builds queries)."""

from itsmreview.accounts.models import User
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import frame_of
from itsmreview.review.models import (
    DelphiAnswer,
    DelphiPseudonym,
    DelphiRound,
    Rating,
    RatingScore,
    RatingStatus,
)
from sqlalchemy import update
from sqlmodel import Session, select


def delphi_of(*, session: Session, round_id: int, lock: bool = False) -> DelphiRound | None:
    query = select(DelphiRound).where(DelphiRound.round_id == round_id)
    return session.exec(query.with_for_update() if lock else query).first()


def delphi_rounds(*, session: Session) -> dict[int, DelphiRound]:
    return {d.round_id: d for d in session.exec(select(DelphiRound)).all()}


def blind_scores(*, session: Session, round_id: int):
    """Every score of the round's current submitted human ratings: task_version_id,
    expert_id, item, score, comment (a frame)."""
    query = (
        select(
            Rating.task_version_id,
            Rating.expert_id,
            RatingScore.dimension.label("item"),
            RatingScore.value.label("score"),
            Rating.comment,
        )
        .join(RatingScore, RatingScore.rating_id == Rating.id)
        .where(
            Rating.round_id == round_id,
            Rating.is_current,
            Rating.status == RatingStatus.submitted,
            Rating.rater_kind == "human",
            RatingScore.value.is_not(None),
        )
        .order_by(Rating.task_version_id, Rating.expert_id, RatingScore.dimension)
    )
    return frame_of(session, query)


def answers_frame(
    *, session: Session, round_id: int, phase: int | None = None, expert_id: int | None = None
):
    """Answers of the round (of one phase, of one expert): task_version_id, task, expert_id,
    phase, item, score, changed, reason."""
    query = (
        select(
            DelphiAnswer.task_version_id,
            Task.external_id.label("task"),
            DelphiAnswer.expert_id,
            DelphiAnswer.phase,
            DelphiAnswer.item,
            DelphiAnswer.score,
            DelphiAnswer.changed,
            DelphiAnswer.reason,
        )
        .join(TaskVersion, TaskVersion.id == DelphiAnswer.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .where(DelphiAnswer.round_id == round_id)
        .order_by(DelphiAnswer.phase, Task.external_id, DelphiAnswer.expert_id, DelphiAnswer.item)
    )
    if phase is not None:
        query = query.where(DelphiAnswer.phase == phase)
    if expert_id is not None:
        query = query.where(DelphiAnswer.expert_id == expert_id)
    return frame_of(session, query)


def add_answers(*, session: Session, rows: list[dict]) -> None:
    session.add_all(DelphiAnswer(**row) for row in rows)
    session.flush()


def pseudonyms_of(*, session: Session, round_id: int) -> dict[int, str]:
    query = select(DelphiPseudonym.expert_id, DelphiPseudonym.pseudonym).where(
        DelphiPseudonym.round_id == round_id
    )
    return dict(session.exec(query).all())


def add_pseudonyms(*, session: Session, round_id: int, names: dict[int, str]) -> None:
    session.add_all(
        DelphiPseudonym(round_id=round_id, expert_id=e, pseudonym=p) for e, p in names.items()
    )
    session.flush()


def move_phase(
    *, session: Session, round_id: int, phase: int, stage: str, to_phase: int, to_stage: str
) -> bool:
    """Move the round from (phase, stage) to (to_phase, to_stage) in one statement; False
    when another lead moved it meanwhile."""
    done = session.exec(
        update(DelphiRound)
        .where(
            DelphiRound.round_id == round_id,
            DelphiRound.phase == phase,
            DelphiRound.stage == stage,
        )
        .values(phase=to_phase, stage=to_stage)
    )
    return done.rowcount == 1


def usernames(*, session: Session, ids: list[int]) -> dict[int, str]:
    if not ids:
        return {}
    return dict(session.exec(select(User.id, User.username).where(User.id.in_(ids))).all())


def revised(
    *, session: Session, round_id: int, task_version_id: int, expert_id: int, phase: int
) -> bool:
    query = select(DelphiAnswer.id).where(
        DelphiAnswer.round_id == round_id,
        DelphiAnswer.task_version_id == task_version_id,
        DelphiAnswer.expert_id == expert_id,
        DelphiAnswer.phase == phase,
    )
    return session.exec(query.limit(1)).first() is not None
