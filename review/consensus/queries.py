"""Reads and writes of Delphi rounds (the only module of consensus that builds queries)."""

from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import frame_of, in_ids
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


def _fetch(session: Session, query, columns: list[str]):
    """The query's rows as a frame, read from the driver's rows without a row object each:
    the figures of a phase read 100,000 of them."""
    import pandas as pd

    result = session.connection().execute(query)
    try:
        rows = result.cursor.fetchall()
    finally:
        result.close()
    return pd.DataFrame.from_records(rows, columns=columns)


BLIND = ["task_version_id", "expert_id", "item", "score"]
REVISIONS = ["task_version_id", "expert_id", "phase", "item", "score", "changed", "reason"]


def _blind_filter(round_id: int):
    return (
        Rating.round_id == round_id,
        Rating.is_current,
        Rating.status == RatingStatus.submitted,
        Rating.rater_kind == "human",
        RatingScore.value.is_not(None),
    )


def _stored_blind(session: Session, round_id: int) -> bool:
    """Whether the round holds a copy of its blind answers as phase 1 (started before
    migration 0029, whose phase change copied them)."""
    query = select(DelphiAnswer.id).where(
        DelphiAnswer.round_id == round_id, DelphiAnswer.phase == 1
    )
    return session.exec(query.limit(1)).first() is not None


def blind_scores(
    *,
    session: Session,
    round_id: int,
    task_version_id: int | None = None,
    expert_id: int | None = None,
):
    """Phase 1's answers (of one task, of one expert): the scores of the round's current
    submitted human ratings, frozen once phase 1 ends (a copy for rounds from before
    migration 0029). A frame: task_version_id, expert_id, item, score; unordered."""
    if _stored_blind(session, round_id):
        query = select(
            DelphiAnswer.task_version_id,
            DelphiAnswer.expert_id,
            DelphiAnswer.item,
            DelphiAnswer.score,
        ).where(DelphiAnswer.round_id == round_id, DelphiAnswer.phase == 1)
        task, expert = DelphiAnswer.task_version_id, DelphiAnswer.expert_id
    else:
        query = (
            select(
                Rating.task_version_id, Rating.expert_id, RatingScore.dimension, RatingScore.value
            )
            .join(RatingScore, RatingScore.rating_id == Rating.id)
            .where(*_blind_filter(round_id))
        )
        task, expert = Rating.task_version_id, Rating.expert_id
    if task_version_id is not None:
        query = query.where(task == task_version_id)
    if expert_id is not None:
        query = query.where(expert == expert_id)
    frame = _fetch(session, query, BLIND)
    return frame.astype({"task_version_id": "int64", "expert_id": "int64", "score": "float64"})


def revisions(
    *,
    session: Session,
    round_id: int,
    up_to: int | None = None,
    task_version_id: int | None = None,
    expert_id: int | None = None,
    scores_only: bool = False,
):
    """The answers given in the round's revision phases (up to a phase; of one task, of one
    expert): task_version_id, expert_id, phase, item, score, and unless `scores_only`,
    changed and reason; unordered."""
    columns = REVISIONS[:5] if scores_only else REVISIONS
    query = select(*(getattr(DelphiAnswer, c) for c in columns)).where(
        DelphiAnswer.round_id == round_id, DelphiAnswer.phase > 1
    )
    if up_to is not None:
        query = query.where(DelphiAnswer.phase <= up_to)
    if task_version_id is not None:
        query = query.where(DelphiAnswer.task_version_id == task_version_id)
    if expert_id is not None:
        query = query.where(DelphiAnswer.expert_id == expert_id)
    frame = _fetch(session, query, columns)
    types = {"task_version_id": "int64", "expert_id": "int64", "phase": "int64", "score": "float64"}
    return frame.astype(types if scores_only else {**types, "changed": "bool"})


def blind_comments(*, session: Session, round_id: int):
    """The comments of the round's current submitted human ratings that say something:
    task_version_id, expert_id, comment (a frame)."""
    query = (
        select(Rating.task_version_id, Rating.expert_id, Rating.comment)
        .where(
            Rating.round_id == round_id,
            Rating.is_current,
            Rating.status == RatingStatus.submitted,
            Rating.rater_kind == "human",
            Rating.comment != "",
        )
        .order_by(Rating.task_version_id, Rating.expert_id)
    )
    return frame_of(session, query)


def _rated(round_id: int):
    return (
        Rating.round_id == round_id,
        Rating.is_current,
        Rating.status == RatingStatus.submitted,
        Rating.rater_kind == "human",
    )


def blind_experts(*, session: Session, round_id: int) -> list[int]:
    """The experts with a submitted rating in the round, by id."""
    query = select(Rating.expert_id).where(*_rated(round_id)).distinct().order_by(Rating.expert_id)
    return [int(e) for e in session.exec(query).all()]


def rated_blind(*, session: Session, round_id: int, expert_id: int) -> bool:
    """Whether the expert has a submitted rating in the round."""
    query = select(Rating.id).where(*_rated(round_id), Rating.expert_id == expert_id)
    return session.exec(query.limit(1)).first() is not None


def mark_spreads_built(*, session: Session, round_id: int) -> None:
    session.exec(
        update(DelphiRound).where(DelphiRound.round_id == round_id).values(spreads_built=True)
    )


def answered_tasks(*, session: Session, round_id: int, phase: int, expert_id: int) -> set[int]:
    """The tasks on which the expert has answers in this phase of the round."""
    query = (
        select(DelphiAnswer.task_version_id)
        .where(
            DelphiAnswer.round_id == round_id,
            DelphiAnswer.phase == phase,
            DelphiAnswer.expert_id == expert_id,
        )
        .distinct()
    )
    return {int(v) for v in session.exec(query).all()}


def task_names(*, session: Session, ids: list[int]) -> dict[int, str]:
    """Task version id -> the task's external id."""
    if not ids:
        return {}
    query = (
        select(TaskVersion.id, Task.external_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .where(in_ids(session, TaskVersion.id, ids))  # one parameter, whatever the count
    )
    return {int(v): name for v, name in session.exec(query).all()}


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
