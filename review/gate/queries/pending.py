"""Submitted ratings queued for the gate (gate_pending): batches and the value counts they move."""

from __future__ import annotations

from itsmreview.review.gate.queries.reads import current_submitted
from itsmreview.review.models import (
    GatePending,
    Rating,
    RatingScore,
)
from sqlalchemy import (
    delete,
    func,
    literal,
    text,
    union_all,
    update,
)
from sqlmodel import Session, select


def lock_gate(*, session: Session, round_id: int, wait: bool = True) -> bool:
    """Serialise the appliers of a round's gate work until the transaction ends (an advisory
    lock on PostgreSQL; SQLite has one writer at a time anyway). With `wait` False, returns
    False at once when another applier holds it."""
    if session.get_bind().dialect.name != "postgresql":
        return True
    if wait:
        session.exec(text("SELECT pg_advisory_xact_lock(727002, :r)").bindparams(r=round_id))
        return True
    return bool(
        session.exec(
            text("SELECT pg_try_advisory_xact_lock(727002, :r)").bindparams(r=round_id)
        ).scalar()
    )


def pending_rounds(*, session: Session) -> list[int]:
    """The rounds with gate work waiting."""
    return list(session.exec(select(GatePending.round_id).distinct()).all())


def pending_count(*, session: Session, round_id: int) -> int:
    """Ratings of the round queued for the gate."""
    return pending_summary(session=session, round_id=round_id)[0]


def pending_summary(*, session: Session, round_id: int | None = None) -> tuple[int, object]:
    """How many ratings are queued for the gate (of a round, or all) and when the oldest was
    queued (None when none is), in one read."""
    query = select(func.count(), func.min(GatePending.created_at)).select_from(GatePending)
    if round_id is not None:
        query = query.where(GatePending.round_id == round_id)
    count, oldest = session.exec(query).one()
    return int(count), oldest


def pending_tasks(*, round_id: int, applying: bool = False):
    """A select of the task versions with queued ratings in the round (of the batch being
    applied), to use as a subquery."""
    query = select(GatePending.task_version_id).where(GatePending.round_id == round_id)
    if applying:
        query = query.where(GatePending.applying)
    return query


def take_batch(
    *,
    session: Session,
    round_id: int,
    limit: int | None = None,
    task_version_id: int | None = None,
) -> int:
    """Take the round's first `limit` queued ratings (or those of one task version, or all)
    for the batch being applied; returns how many. Only this transaction marks rows, so the
    batch is the same for every statement after, whatever is queued meanwhile."""
    query = update(GatePending).where(
        GatePending.round_id == round_id, GatePending.held_reason.is_(None)
    )
    if limit is not None:
        first = (
            select(GatePending.id)
            .where(GatePending.round_id == round_id, GatePending.held_reason.is_(None))
            .order_by(GatePending.id)
            .limit(limit)
        )
        query = query.where(GatePending.id.in_(first))
    if task_version_id is not None:
        query = query.where(GatePending.task_version_id == task_version_id)
    return session.exec(query.values(applying=True)).rowcount


def batch_rows(*, session: Session, round_id: int) -> list[tuple]:
    """(task version id, actor id, rating id, ledger entry) of every rating of the batch, in
    queue order."""
    return list(
        session.exec(
            select(
                GatePending.task_version_id,
                GatePending.actor_id,
                GatePending.rating_id,
                GatePending.entry,
            )
            .where(GatePending.round_id == round_id, GatePending.applying)
            .order_by(GatePending.id)
        ).all()
    )


def ratings_with_scores(*, session: Session, rating_ids: list[int]) -> tuple[dict, dict]:
    """{id: Rating} of these ratings and {rating id: {dimension: value}} of their scores."""
    if not rating_ids:
        return {}, {}
    ratings = {r.id: r for r in session.exec(select(Rating).where(Rating.id.in_(rating_ids)))}
    scores: dict[int, dict] = {}
    for rating_id, dimension, value in session.exec(
        select(RatingScore.rating_id, RatingScore.dimension, RatingScore.value).where(
            RatingScore.rating_id.in_(rating_ids)
        )
    ).all():
        scores.setdefault(rating_id, {})[dimension] = value
    return ratings, scores


def hold_queued(*, session: Session, round_id: int, reasons: dict[int, str]) -> None:
    """Take these ratings out of the batch being applied and keep them queued, held with
    the reason (`take_batch` passes them over from then on)."""
    for rating_id, reason in reasons.items():
        session.exec(
            update(GatePending)
            .where(GatePending.round_id == round_id, GatePending.rating_id == rating_id)
            .values(applying=False, held_reason=reason)
        )


def queued_rating_ids(*, session: Session) -> set[int]:
    """The ratings still queued for the gate (and so for the ledger)."""
    return set(session.exec(select(GatePending.rating_id)).all())


def _queued_scores(round_id: int, applying: bool | None, replaced: bool, sign: int):
    """(task version id, dimension, value, sign) of each score that queued ratings (of the
    batch, of the rest, or all: `applying` None) added, or took away with the revisions they
    replaced."""
    rating = GatePending.replaced_id if replaced else GatePending.rating_id
    query = (
        select(
            GatePending.task_version_id.label("task_version_id"),
            RatingScore.dimension.label("dimension"),
            RatingScore.value.label("value"),
            literal(sign).label("n"),
        )
        .join(RatingScore, RatingScore.rating_id == rating)
        .where(GatePending.round_id == round_id, RatingScore.value.is_not(None))
    )
    if applying is not None:
        query = query.where(GatePending.applying == applying)
    return query


def task_score_counts(
    *, session: Session, round_id: int, tasks, besides_batch: bool
) -> list[tuple[int, str, float, int]]:
    """(task version id, dimension, value, ratings) of these tasks' current submitted human
    ratings, with `besides_batch` as if the queued ratings other than the batch's had not
    come yet: their values taken out, those of the revisions they replaced put back. One
    statement, so one view of the database: a rating and its queued row are both in it or
    both not, whatever commits meanwhile."""
    current = (
        select(
            Rating.task_version_id.label("task_version_id"),
            RatingScore.dimension.label("dimension"),
            RatingScore.value.label("value"),
            literal(1).label("n"),
        )
        .join(Rating, Rating.id == RatingScore.rating_id)
        .where(
            *current_submitted(round_id, ("human",)),
            Rating.task_version_id.in_(tasks),
            RatingScore.value.is_not(None),
        )
    )
    parts = [current]
    if besides_batch:
        parts += [
            _queued_scores(round_id, False, replaced=replaced, sign=sign).where(
                GatePending.task_version_id.in_(tasks)
            )
            for replaced, sign in ((False, -1), (True, 1))
        ]
    every = union_all(*parts).subquery()
    return [
        row
        for row in session.exec(
            select(
                every.c.task_version_id, every.c.dimension, every.c.value, func.sum(every.c.n)
            ).group_by(every.c.task_version_id, every.c.dimension, every.c.value)
        ).all()
        if row[3]
    ]


def batch_score_counts(
    *, session: Session, round_id: int, replaced: bool, every_queued: bool = False
) -> list[tuple[int, str, float, int]]:
    """(task version id, dimension, value, ratings) of the scores that the batch's ratings
    (or every queued one) added, or took away with the revisions they replaced."""
    queued = _queued_scores(round_id, None if every_queued else True, replaced, 1).subquery()
    return list(
        session.exec(
            select(
                queued.c.task_version_id, queued.c.dimension, queued.c.value, func.count()
            ).group_by(queued.c.task_version_id, queued.c.dimension, queued.c.value)
        ).all()
    )


def delete_batch(*, session: Session, round_id: int) -> int:
    """Remove the batch's queued ratings (applied). Returns how many."""
    result = session.exec(
        delete(GatePending).where(GatePending.round_id == round_id, GatePending.applying)
    )
    return result.rowcount
