"""Reads and writes of Delphi rounds (the only module of consensus that builds queries)."""

from itsmreview.accounts.models import User
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import frame_of, in_ids, utcnow
from itsmreview.review.models import (
    DelphiAnswer,
    DelphiPseudonym,
    DelphiRound,
    Rating,
    RatingScore,
    RatingStatus,
)
from sqlalchemy import exists, literal, update
from sqlmodel import Session, select


def delphi_of(*, session: Session, round_id: int, lock: bool = False) -> DelphiRound | None:
    query = select(DelphiRound).where(DelphiRound.round_id == round_id)
    return session.exec(query.with_for_update() if lock else query).first()


def delphi_rounds(*, session: Session) -> dict[int, DelphiRound]:
    return {d.round_id: d for d in session.exec(select(DelphiRound)).all()}


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


def _blind_filter(round_id: int):
    return (
        Rating.round_id == round_id,
        Rating.is_current,
        Rating.status == RatingStatus.submitted,
        Rating.rater_kind == "human",
        RatingScore.value.is_not(None),
    )


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


def keep_blind_scores(*, session: Session, round_id: int) -> list[int]:
    """Phase 1's answers: every score of the round's current submitted human ratings stored as
    it was, in one INSERT ... SELECT. Returns the experts who answered (none: nothing kept)."""
    experts = select(Rating.expert_id).join(RatingScore, RatingScore.rating_id == Rating.id)
    found = session.exec(
        experts.where(*_blind_filter(round_id)).distinct().order_by(Rating.expert_id)
    ).all()
    if not found:
        return []
    scores = select(
        literal(round_id),
        Rating.task_version_id,
        Rating.expert_id,
        literal(1),
        RatingScore.dimension,
        RatingScore.value,
        *_constants(),
    ).join(RatingScore, RatingScore.rating_id == Rating.id)
    session.exec(
        _insert_answers().from_select(_ANSWER_COLUMNS, scores.where(*_blind_filter(round_id)))
    )
    return [int(e) for e in found]


_ANSWER_COLUMNS = (
    "round_id",
    "task_version_id",
    "expert_id",
    "phase",
    "item",
    "score",
    "changed",
    "reason",
    "created_at",
)


def _constants():
    """changed, reason and created_at of answers kept as they were."""
    columns = DelphiAnswer.__table__.c
    return (
        literal(False, columns.changed.type),
        literal("", columns.reason.type),
        literal(utcnow(), columns.created_at.type),
    )


def _insert_answers():
    from sqlalchemy import insert

    return insert(DelphiAnswer)


def carry_forward(*, session: Session, round_id: int, phase: int) -> None:
    """Copy into `phase`, unchanged, the answers of the phase before of every (task, expert)
    without an answer in `phase`: one INSERT ... SELECT."""
    later = DelphiAnswer.__table__.alias("later")
    before = DelphiAnswer.__table__.alias("before")
    answered = exists().where(
        later.c.round_id == round_id,
        later.c.phase == phase,
        later.c.task_version_id == before.c.task_version_id,
        later.c.expert_id == before.c.expert_id,
    )
    rows = select(
        before.c.round_id,
        before.c.task_version_id,
        before.c.expert_id,
        literal(phase),
        before.c.item,
        before.c.score,
        *_constants(),
    ).where(before.c.round_id == round_id, before.c.phase == phase - 1, ~answered)
    session.exec(_insert_answers().from_select(_ANSWER_COLUMNS, rows))


def answer_scores(*, session: Session, round_id: int, phase: int | None = None):
    """The scores of the round's answers (of one phase): task_version_id, expert_id, phase,
    item, score (a frame, unordered), read from the driver's rows without a row object each:
    the figures of a phase read 100,000 of them."""
    import pandas as pd

    query = select(
        DelphiAnswer.task_version_id,
        DelphiAnswer.expert_id,
        DelphiAnswer.phase,
        DelphiAnswer.item,
        DelphiAnswer.score,
    ).where(DelphiAnswer.round_id == round_id)
    if phase is not None:
        query = query.where(DelphiAnswer.phase == phase)
    result = session.connection().execute(query)
    try:
        rows = result.cursor.fetchall()
    finally:
        result.close()
    frame = pd.DataFrame.from_records(
        rows, columns=["task_version_id", "expert_id", "phase", "item", "score"]
    )
    return frame.astype(
        {"task_version_id": "int64", "expert_id": "int64", "phase": "int64", "score": "float64"}
    )


def own_answers(
    *, session: Session, round_id: int, task_version_id: int, expert_id: int, phase: int
) -> dict[str, float]:
    """Item -> score of one expert's answers on one task in one phase, by item."""
    query = (
        select(DelphiAnswer.item, DelphiAnswer.score)
        .where(
            DelphiAnswer.round_id == round_id,
            DelphiAnswer.task_version_id == task_version_id,
            DelphiAnswer.expert_id == expert_id,
            DelphiAnswer.phase == phase,
        )
        .order_by(DelphiAnswer.item)
    )
    return {item: float(score) for item, score in session.exec(query).all()}


def answered(*, session: Session, round_id: int, phase: int, expert_id: int) -> bool:
    """Whether the expert has an answer in this phase of the round."""
    query = select(DelphiAnswer.id).where(
        DelphiAnswer.round_id == round_id,
        DelphiAnswer.phase == phase,
        DelphiAnswer.expert_id == expert_id,
    )
    return session.exec(query.limit(1)).first() is not None


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
