"""A round's ratings, statuses and checks as the gate reads them; the decisions it stores."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from itsmreview.accounts.models import User
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import frame_of, in_ids, numeric_batches
from itsmreview.review.models import (
    Adjudication,
    MachineCheck,
    Rating,
    RatingScore,
    ReviewRound,
    RoundCoincidence,
    RoundTask,
)
from sqlalchemy import (
    Integer,
    Text,
    case,
    cast,
    delete,
    func,
    literal,
    update,
)
from sqlalchemy.orm import aliased
from sqlmodel import Session, select

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def list_rounds(*, session: Session) -> list[ReviewRound]:
    return list(session.exec(select(ReviewRound).order_by(ReviewRound.created_at)).all())


def _version_filter(column, versions):
    """column == versions for one id; column IN versions for a subquery of ids."""
    return column == versions if isinstance(versions, int) else column.in_(versions)


def round_versions_with_status(*, round_id: int, status: str):
    """Subquery: ids of the round's task versions whose stored decision is `status`."""
    return (
        select(TaskVersion.id)
        .join(RoundTask, RoundTask.task_version_id == TaskVersion.id)
        .where(RoundTask.round_id == round_id, TaskVersion.status == status)
    )


def rating_columns() -> tuple:
    """The columns of a rating as the agreement, the gate and exports read it."""
    return (
        Rating.id.label("rating_id"),
        Rating.task_version_id,
        Rating.expert_id,
        Rating.verdict,
        Rating.flags,
        Rating.submitted_at,
        Rating.rater_kind,
        Rating.revision,
        Rating.comment,
        Rating.confidence,
        Rating.rubric_id,
    )


def current_ratings_wide(*, session: Session, round_id: int, task_version_id=None) -> pd.DataFrame:
    """One row per current submitted rating (human or model) of the round (of one task
    version, or of a subquery of versions, when given): ids, verdict, flags, time, revision,
    comment, confidence, rubric."""
    query = (
        select(*rating_columns())
        .where(
            Rating.round_id == round_id,
            Rating.is_current,
            Rating.status == "submitted",
        )
        .order_by(Rating.id)
    )
    if task_version_id is not None:
        query = query.where(_version_filter(Rating.task_version_id, task_version_id))
    return frame_of(session, query)


def scores_long(*, session: Session, round_id: int, task_version_id=None) -> pd.DataFrame:
    query = (
        select(RatingScore.rating_id, RatingScore.dimension, RatingScore.value)
        .join(Rating, Rating.id == RatingScore.rating_id)
        .where(
            Rating.round_id == round_id,
            Rating.is_current,
            Rating.status == "submitted",
        )
    )
    if task_version_id is not None:
        query = query.where(_version_filter(Rating.task_version_id, task_version_id))
    return frame_of(session, query)


def coincidence_rows(*, session: Session, round_id: int, for_update: bool = False) -> list:
    """The round's stored coincidence counts, one row per rubric dimension; `for_update`
    locks them until the transaction ends (PostgreSQL; SQLite has one writer anyway)."""
    query = select(RoundCoincidence).where(RoundCoincidence.round_id == round_id)
    if for_update:
        # in one order for every writer (a scan's order changes as rows get new versions,
        # and two writers locking in different orders deadlock), and read anew: rows this
        # session read before may have moved since
        query = (
            query.order_by(RoundCoincidence.dimension)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    return list(session.exec(query).all())


def current_submitted(round_id: int, kinds: tuple[str, ...]):
    return (
        Rating.round_id == round_id,
        Rating.is_current,
        Rating.status == "submitted",
        Rating.rater_kind.in_(kinds),
    )


def score_value_counts(
    *, session: Session, round_id: int, kinds: tuple[str, ...]
) -> list[tuple[str, int, float, int]]:
    """(dimension, task version id, value, ratings) over the round's current submitted
    ratings of these rater kinds, counted in the database; unscored values left out. Rows
    grow with tasks x scale points, not with ratings."""
    return list(
        session.exec(
            select(
                RatingScore.dimension,
                Rating.task_version_id,
                RatingScore.value,
                func.count(),
            )
            .join(Rating, Rating.id == RatingScore.rating_id)
            .where(*current_submitted(round_id, kinds), RatingScore.value.is_not(None))
            .group_by(RatingScore.dimension, Rating.task_version_id, RatingScore.value)
            .order_by(RatingScore.dimension, Rating.task_version_id, RatingScore.value)
        ).all()
    )


def ratings_by_rater(
    *,
    session: Session,
    round_id: int,
    kinds: tuple[str, ...],
    dimensions: Sequence[str],
    verdict_codes: dict[str, float],
    flag_keys: Sequence[str],
    batch: int = 100_000,
) -> Iterator[np.ndarray]:
    """The round's current submitted ratings of these kinds, one float row each: rater id,
    task version id, verdict code (NaN: none), 1 or 0 per flag key, then the value of each
    of `dimensions` (NaN: not scored), in arrays of up to `batch` rows, in no particular
    order. One row a rating, where a row a score read eight times as many from the driver."""
    scores = [
        func.max(case((RatingScore.dimension == dimension, RatingScore.value)))
        for dimension in dimensions
    ]
    return numeric_batches(
        session,
        select(
            Rating.expert_id,
            Rating.task_version_id,
            *_verdict_and_flags(verdict_codes, flag_keys),
            *scores,
        )
        .outerjoin(RatingScore, RatingScore.rating_id == Rating.id)
        .where(*current_submitted(round_id, kinds))
        .group_by(Rating.id),
        batch,
    )


def packed_ratings(
    *,
    session: Session,
    round_id: int,
    kinds: tuple[str, ...],
    width: int,
    verdict_codes: dict[str, float],
    flag_keys: Sequence[str],
    batch: int = 100_000,
) -> tuple[np.ndarray, np.ndarray] | None:
    """What `ratings_by_rater` gives, from each rating's packed scores (review.scorevector):
    rows of rater id, task version id, verdict code and 0/1 per flag, and the scores as a
    (ratings x width) array in the rubric's order. One column a rating, no pivot; None when a
    rating of the round has no packed scores of this width (then read `ratings_by_rater`)."""
    import numpy as np
    from itsmreview.review.scorevector import unpack

    result = session.connection().execute(
        select(
            Rating.expert_id,
            Rating.task_version_id,
            *_verdict_and_flags(verdict_codes, flag_keys),
            Rating.score_vector,
        ).where(*current_submitted(round_id, kinds))
    )
    cursor = result.cursor
    metas, blobs, size = [], [], 8 * width
    try:
        while rows := cursor.fetchmany(batch):
            packed = [row[-1] for row in rows]
            if any(b is None or len(b) != size for b in packed):
                return None
            blobs.extend(packed)
            metas.append(np.array([row[:-1] for row in rows], dtype=float))
    finally:
        result.close()
    meta = np.concatenate(metas) if metas else np.empty((0, 3 + len(flag_keys)))
    return meta, unpack(blobs, width) if blobs else np.empty((0, width))


def submission_times(*, session: Session, round_id: int) -> list:
    """When each current submitted rating of the round (any rater kind) was submitted."""
    return list(
        session.exec(
            select(Rating.submitted_at).where(
                Rating.round_id == round_id, Rating.is_current, Rating.status == "submitted"
            )
        ).all()
    )


def item_values_with_times(
    *, session: Session, round_id: int, item: str, kinds: tuple[str, ...]
) -> list[tuple]:
    """(task version id, value, submitted at) of one rubric item over the round's current
    submitted ratings of these kinds: a dimension's score (unscored left out), the verdict
    (`verdict`) or a flag's list of flags (`flag:<key>`: the rating's flags)."""
    if item == "verdict" or item.startswith("flag:"):
        column = Rating.verdict if item == "verdict" else Rating.flags
        query = select(Rating.task_version_id, column, Rating.submitted_at).where(
            *current_submitted(round_id, kinds)
        )
    else:
        query = (
            select(Rating.task_version_id, RatingScore.value, Rating.submitted_at)
            .join(Rating, Rating.id == RatingScore.rating_id)
            .where(
                *current_submitted(round_id, kinds),
                RatingScore.dimension == item,
                RatingScore.value.is_not(None),
            )
        )
    return list(session.exec(query).all())


def has_model_ratings(*, session: Session, round_id: int) -> bool:
    return (
        session.exec(
            select(Rating.id).where(*current_submitted(round_id, ("model",))).limit(1)
        ).first()
        is not None
    )


def verdicts_and_flags(
    *,
    session: Session,
    round_id: int,
    kinds: tuple[str, ...],
    verdict_codes: dict[str, float],
    flag_keys: Sequence[str],
    batch: int = 100_000,
) -> Iterator[np.ndarray]:
    """The round's current submitted ratings of these kinds as float rows (task version id,
    rater id, verdict code (NaN: no verdict), then 1 or 0 for each flag key: raised or not),
    in arrays of up to `batch` rows, by task version."""
    return numeric_batches(
        session,
        select(
            Rating.task_version_id, Rating.expert_id, *_verdict_and_flags(verdict_codes, flag_keys)
        )
        .where(*current_submitted(round_id, kinds))
        .order_by(Rating.task_version_id, Rating.id),
        batch,
    )


def _verdict_and_flags(verdict_codes: dict[str, float], flag_keys: Sequence[str]) -> list:
    """A rating's verdict as its code (NULL: none) and 1 or 0 per flag key: raised or not."""
    verdict = case(
        {name: code for name, code in verdict_codes.items()}, value=Rating.verdict, else_=None
    )
    flags = [
        case((cast(Rating.flags, Text).like(_json_string_pattern(key), escape="\\"), 1), else_=0)
        for key in flag_keys
    ]
    return [verdict, *flags]


def _json_string_pattern(key: str) -> str:
    """LIKE pattern of a JSON array (as stored) holding the string `key`."""
    quoted = json.dumps(key)
    return "%" + quoted.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def adjudications_of_round(
    *, session: Session, round_id: int, task_version_id: int | None = None, tasks=None
) -> dict[int, str]:
    """task version id -> the newest adjudicated decision (of one version, or of the versions
    a select `tasks` gives, when given)."""
    query = select(Adjudication.task_version_id, Adjudication.decision).where(
        Adjudication.round_id == round_id
    )
    if task_version_id is not None:
        query = query.where(Adjudication.task_version_id == task_version_id)
    if tasks is not None:
        query = query.where(Adjudication.task_version_id.in_(tasks))
    rows = session.exec(query.order_by(Adjudication.id)).all()
    return {version: decision for version, decision in rows}


def round_task_statuses(
    *,
    session: Session,
    round_id: int,
    task_version_id: int | None = None,
    status: str | None = None,
) -> pd.DataFrame:
    """The round's task versions (or one) with the decision stored on each version, and
    whether it is its task's newest version (whose decision the task mirrors)."""
    query = _version_statuses()
    if task_version_id is not None:
        query = query.where(TaskVersion.id == task_version_id)
    if status is None:
        query = query.join(RoundTask, RoundTask.task_version_id == TaskVersion.id).where(
            RoundTask.round_id == round_id
        )
        return frame_of(session, query.order_by(Task.external_id))
    # the few versions with that status, then whether they are in the round, sorted here: as
    # a join with an ORDER BY, SQLite walks the whole round instead
    in_round = (
        select(RoundTask.task_version_id)
        .where(RoundTask.task_version_id == TaskVersion.id, RoundTask.round_id == round_id)
        .exists()
    )
    found = frame_of(session, query.where(TaskVersion.status == status, in_round))
    return found.sort_values("external_id", kind="stable", ignore_index=True)


def _version_statuses():
    newer = aliased(TaskVersion)
    is_newest = ~(
        select(newer.id)
        .where(newer.task_id == TaskVersion.task_id, newer.version > TaskVersion.version)
        .exists()
    )
    return select(
        TaskVersion.id.label("task_version_id"),
        Task.id.label("task_id"),
        Task.external_id,
        Task.title,
        TaskVersion.status,
        TaskVersion.version,
        is_newest.label("is_newest"),
    ).join(Task, Task.id == TaskVersion.task_id)


def experts_by_id(*, session: Session, ids: list[int]) -> dict[int, str]:
    if not ids:
        return {}
    rows = session.exec(select(User.id, User.username).where(User.id.in_(ids))).all()
    return {i: name for i, name in rows}


def newest_checks():
    """The newest result of each check of each task version (a newer import replaces it)."""
    newer = aliased(MachineCheck)
    return select(MachineCheck).where(
        ~select(newer.id)
        .where(
            newer.task_version_id == MachineCheck.task_version_id,
            newer.check == MachineCheck.check,
            newer.id > MachineCheck.id,
        )
        .exists()
    )


FAILING_CHECK = ("fail", "error")


def failed_checks(
    *,
    session: Session,
    round_id: int | None = None,
    task_version_id: int | None = None,
    tasks=None,
) -> dict[int, list[str]]:
    """task version id -> the checks whose newest result failed (of a round's versions, of
    one version, or of the versions a select `tasks` gives)."""
    query = newest_checks().where(MachineCheck.status.in_(FAILING_CHECK))
    if task_version_id is not None:
        query = query.where(MachineCheck.task_version_id == task_version_id)
    if tasks is not None:
        query = query.where(MachineCheck.task_version_id.in_(tasks))
    if round_id is not None:
        query = query.where(
            select(RoundTask.id)
            .where(
                RoundTask.round_id == round_id,
                RoundTask.task_version_id == MachineCheck.task_version_id,
            )
            .exists()
        )
    out: dict[int, list[str]] = {}
    for check in session.exec(query.order_by(MachineCheck.check)).all():
        out.setdefault(check.task_version_id, []).append(check.check)
    return out


def versions(*, session: Session, ids: list[int]):
    """A select of these task version ids (one bind parameter, whatever their number)."""
    return select(TaskVersion.id).where(in_ids(session, TaskVersion.id, ids))


def one_version(task_version_id: int):
    """A select of one task version id: a set of one, where a select of versions is asked."""
    return select(literal(task_version_id, Integer))


def verdicts_and_flags_of_tasks(
    *, session: Session, round_id: int, tasks, kinds: tuple[str, ...]
) -> list[tuple[int, str | None, list | None]]:
    """(task version id, verdict, flags) of these tasks' current submitted ratings of these
    kinds."""
    return list(
        session.exec(
            select(Rating.task_version_id, Rating.verdict, Rating.flags).where(
                *current_submitted(round_id, kinds), Rating.task_version_id.in_(tasks)
            )
        ).all()
    )


def version_status_rows(*, session: Session, round_id: int, tasks) -> list:
    """These task versions of a round as `round_task_statuses` gives them, as rows."""
    return list(
        session.exec(
            _version_statuses()
            .join(RoundTask, RoundTask.task_version_id == TaskVersion.id)
            .where(RoundTask.round_id == round_id, TaskVersion.id.in_(tasks))
        ).all()
    )


def clear_adjudication_queue(*, session: Session, round_id: int, tasks=None) -> None:
    """Take the round's tasks (or those of the select `tasks`) out of its queue."""
    from itsmreview.summaries.models import QueuedAdjudication as Q

    statement = delete(Q).where(Q.round_id == round_id)
    if tasks is not None:
        statement = statement.where(Q.task_version_id.in_(tasks))
    session.exec(statement.execution_options(synchronize_session=False))


def add_to_adjudication_queue(*, session: Session, rows: list[dict]) -> None:
    """Put tasks into their round's queue: records of round_id, task_version_id,
    external_id, reasons and decided_at, in bulk (the caller cleared them first)."""
    from itsmreview.db import bulk_insert_records
    from itsmreview.summaries.models import QueuedAdjudication as Q

    session.flush()
    bulk_insert_records(session, Q.__table__, rows)


def round_has_status(*, session: Session, round_id: int, status: str, besides=None) -> bool:
    """Whether any task version of the round (other than those of the select `besides`)
    has this stored status (an index look-up)."""
    in_round = (
        select(RoundTask.task_version_id)
        .where(RoundTask.task_version_id == TaskVersion.id, RoundTask.round_id == round_id)
        .exists()
    )
    query = select(TaskVersion.id).where(TaskVersion.status == status, in_round)
    if besides is not None:
        query = query.where(TaskVersion.id.not_in(besides))
    return session.exec(query.limit(1)).first() is not None


def store_statuses(
    *, session: Session, versions: dict[int, str], tasks: dict[int, str], at
) -> None:
    """Set the status of task versions (id -> status) and of tasks (id -> status, with
    `updated_at`), one executemany each."""
    from sqlalchemy import bindparam

    session.flush()
    connection = session.connection()
    if versions:
        connection.execute(
            update(TaskVersion.__table__)
            .where(TaskVersion.__table__.c.id == bindparam("ident"))
            .values(status=bindparam("new_status")),
            [{"ident": v, "new_status": s} for v, s in versions.items()],
        )
    if tasks:
        connection.execute(
            update(Task.__table__)
            .where(Task.__table__.c.id == bindparam("ident"))
            .values(status=bindparam("new_status"), updated_at=bindparam("at")),
            [{"ident": t, "new_status": s, "at": at} for t, s in tasks.items()],
        )
