"""Ratings' statements: a submit in one statement, drafts, histories, turn notes, the expert's
queue, machine checks, persona completeness."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from itsmreview.accounts.models import User
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import distinct_walk, frame_of, in_ids, utcnow
from itsmreview.jobs.queries import CHANNEL
from itsmreview.review.gate.queries.reads import newest_checks
from itsmreview.review.models import (
    Assignment,
    AssignmentStatus,
    CompletenessReview,
    DelphiRound,
    Finding,
    FindingVote,
    GatePending,
    MachineCheck,
    PersonaActivity,
    Rating,
    RatingScore,
    RatingStatus,
    ResolutionProposal,
    ReviewRound,
    RoundExpert,
    RoundStatus,
    RoundTask,
    Rubric,
    TurnNote,
)
from itsmreview.review.rounds.queries import holds_place
from sqlalchemy import (
    Integer,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    literal,
    or_,
    text,
    update,
)
from sqlmodel import Session, select

if TYPE_CHECKING:
    import pandas as pd


def expert_rounds(*, session: Session, expert_id: int) -> list[tuple[str, str]]:
    """(name, status) of the rounds an expert can work in or has worked in, open ones first,
    newest first: open rounds open to every expert or naming them, and rounds where they hold
    a place."""
    named = select(RoundExpert.id).where(RoundExpert.round_id == ReviewRound.id)
    member = exists(named.where(RoundExpert.expert_id == expert_id))
    held = exists(
        select(Assignment.id).where(
            Assignment.round_id == ReviewRound.id,
            Assignment.expert_id == expert_id,
            holds_place(utcnow()),
        )
    )
    admitted = (ReviewRound.status == RoundStatus.open) & (~exists(named) | member)
    rows = session.exec(
        select(ReviewRound.name, ReviewRound.status)
        .where(admitted | held)
        .order_by(
            case((ReviewRound.status == RoundStatus.open, 0), else_=1),
            ReviewRound.created_at.desc(),
            ReviewRound.id.desc(),
        )
    ).all()
    return [(name, str(status)) for name, status in rows]


def queue_frame(
    *,
    session: Session,
    expert_id: int,
    rated_limit: int | None = None,
    round_id: int | None = None,
) -> pd.DataFrame:
    """The expert's assignments that hold a place (in one round when `round_id` is given),
    open ones first; of the rated ones only the `rated_limit` most recent when given."""
    columns = select(
        Assignment.id.label("assignment_id"),
        ReviewRound.name.label("round"),
        Task.external_id.label("task"),
        Task.title,
        Task.persona,
        Task.track,
        TaskVersion.version,
        Assignment.status,
    ).join(ReviewRound, ReviewRound.id == Assignment.round_id)
    columns = columns.join(TaskVersion, TaskVersion.id == Assignment.task_version_id).join(
        Task, Task.id == TaskVersion.task_id
    )
    mine = Assignment.expert_id == expert_id
    if round_id is not None:
        mine = mine & (Assignment.round_id == round_id)
    if rated_limit is None:
        return frame_of(
            session,
            columns.where(mine, holds_place(utcnow())).order_by(
                Assignment.status.desc(), Assignment.id
            ),
        )
    open_now = (Assignment.status == AssignmentStatus.reserved) & (
        Assignment.reserved_until > utcnow()
    )
    rated = Assignment.status == AssignmentStatus.submitted
    import pandas as pd

    return pd.concat(
        [
            frame_of(session, columns.where(mine, open_now).order_by(Assignment.id)),
            frame_of(
                session,
                columns.where(mine, rated).order_by(Assignment.id.desc()).limit(rated_limit),
            ),
        ],
        ignore_index=True,
    )


def queue_counts(
    *, session: Session, expert_id: int, round_id: int | None = None
) -> tuple[int, int]:
    """(places the expert holds, in one round when `round_id` is given, of which rated)."""
    rated = func.sum(case((Assignment.status == AssignmentStatus.submitted, 1), else_=0))
    mine = [Assignment.expert_id == expert_id, holds_place(utcnow())]
    if round_id is not None:
        mine.append(Assignment.round_id == round_id)
    held, done = session.exec(select(func.count(), rated).where(*mine)).one()
    return int(held or 0), int(done or 0)


def rating_count(*, session: Session) -> int:
    return session.exec(select(func.count()).select_from(Rating)).one()


def current_rating(*, session: Session, assignment_id: int) -> Rating | None:
    return session.exec(
        select(Rating).where(Rating.assignment_id == assignment_id, Rating.is_current)
    ).first()


def scores_of(*, session: Session, rating_id: int) -> dict[str, float | None]:
    rows = session.exec(
        select(RatingScore.dimension, RatingScore.value).where(RatingScore.rating_id == rating_id)
    ).all()
    return {dimension: value for dimension, value in rows}


def submit_context(*, session: Session, assignment_id: int):
    """What a submit reads, in one statement: the assignment, its round, the hash of the
    round's rubric, and the id, status, revision and rater kind of each of the assignment's
    draft and current rating (one row each; one row of None when it has neither), then the
    assignment's expert's row as the commit's session check reads it (id, username, active,
    role, session_epoch), and the stage of its round's Delphi run (None outside one). The
    assignment's row stays locked until the transaction ends: two
    submits of one assignment take turns; on PostgreSQL the expert's row is share-locked as
    long. Empty when the assignment does not exist."""
    postgres = session.get_bind().dialect.name == "postgresql"
    return session.exec(_submit_context(postgres), params={"assignment_id": assignment_id}).all()


@lru_cache(maxsize=2)
def _submit_context(postgres: bool):
    """`submit_context`'s statement, built once (building and keying it cost more than
    running it)."""
    return (
        select(
            Assignment,
            ReviewRound,
            Rubric.content_hash,
            Rating.id,
            Rating.status,
            Rating.revision,
            Rating.rater_kind,
            User.id,
            User.username,
            User.active,
            User.role,
            User.session_epoch,
            DelphiRound.stage,
        )
        .join(ReviewRound, ReviewRound.id == Assignment.round_id)
        .join(Rubric, Rubric.id == ReviewRound.rubric_id)
        .outerjoin(DelphiRound, DelphiRound.round_id == ReviewRound.id)
        .outerjoin(
            Rating,
            (Rating.assignment_id == Assignment.id)
            & or_(Rating.status == RatingStatus.draft, Rating.is_current),
        )
        .join(User, User.id == Assignment.expert_id)
        .where(Assignment.id == bindparam("assignment_id", type_=Integer))
        .with_for_update(of=Assignment)
        # a second locking clause (SQLAlchemy renders one): after FOR UPDATE OF assignments
        .suffix_with("FOR SHARE OF users" if postgres else "")
    )


@lru_cache(maxsize=2)
def _submitted_rating(wake: bool):
    """`write_submitted_rating`'s statement on PostgreSQL; `wake`: with the NOTIFY that wakes
    the workers when it commits (one round trip fewer than a statement of its own)."""
    woken = ", woken AS (SELECT pg_notify(:channel, :wake))" if wake else ""
    return text(
        f"""
WITH rating AS (
    INSERT INTO ratings (assignment_id, round_id, task_version_id, expert_id, rubric_id,
        revision, is_current, status, verdict, flags, comment, confidence, rater_kind,
        created_at, submitted_at, score_vector, not_applicable)
    VALUES (:assignment_id, :round_id, :task_version_id, :expert_id, :rubric_id, :revision,
        :is_current, :status, :verdict, CAST(:flags AS JSON), :comment, :confidence,
        :rater_kind, :created_at, :submitted_at, :score_vector, CAST(:not_applicable AS JSON))
    RETURNING id
), scores AS (
    INSERT INTO rating_scores (rating_id, dimension, value)
    SELECT rating.id, score.dimension, score.value
    FROM rating, unnest(CAST(:dimensions AS VARCHAR[]), CAST(:score_values AS FLOAT8[]))
        AS score (dimension, value)
), queued AS (
    INSERT INTO gate_pending (round_id, task_version_id, rating_id, replaced_id, actor_id,
        created_at, applying, entry)
    SELECT :round_id, :task_version_id, rating.id, :replaced_id, :actor_id, :created_at,
        false, CAST(:entry AS JSON)
    FROM rating
), submitted AS (
    UPDATE assignments SET status = :assignment_status, submitted_at = :submitted_at
    WHERE id = :assignment_id
){woken}
SELECT id FROM rating{", woken" if wake else ""}
"""
    )


def write_submitted_rating(
    *,
    session: Session,
    values: dict,
    scores,
    replaced_id: int | None,
    actor_id: int | None,
    entry: dict,
    wake: str | None = None,
) -> int:
    """Write a submitted rating, its score rows, its place in the gate's queue (with its
    ledger entry, whose artifact id the applier fills in) and its assignment's status; returns
    the rating's id. One statement on PostgreSQL (one round trip while fifty experts share two
    cores), four elsewhere. `wake`: the kind of work to wake `itsmreview worker`s for when
    this commits (PostgreSQL's NOTIFY, in the same statement; SQLite's workers poll)."""
    if session.get_bind().dialect.name == "postgresql":
        return (
            session.connection()
            .execute(
                _submitted_rating(wake is not None),
                {
                    "channel": CHANNEL,
                    "wake": wake,
                    **values,
                    "status": str(values["status"]),
                    "verdict": None if values["verdict"] is None else str(values["verdict"]),
                    "flags": json.dumps(values["flags"]),
                    "not_applicable": None
                    if values["not_applicable"] is None
                    else json.dumps(values["not_applicable"]),
                    "dimensions": list(scores),
                    "score_values": [None if v is None else float(v) for v in scores.values()],
                    "replaced_id": replaced_id,
                    "actor_id": actor_id,
                    "entry": json.dumps(entry),
                    "assignment_status": str(AssignmentStatus.submitted),
                },
            )
            .scalar_one()
        )
    rating_id = (
        session.connection()
        .execute(insert(Rating.__table__).values(**values).returning(Rating.__table__.c.id))
        .scalar_one()
    )
    add_scores(session=session, rating_id=rating_id, scores=scores)
    set_assignment_submitted(
        session=session, assignment_id=values["assignment_id"], at=values["submitted_at"]
    )
    queue_gate_work(
        session=session,
        round_id=values["round_id"],
        task_version_id=values["task_version_id"],
        rating_id=rating_id,
        replaced_id=replaced_id,
        actor_id=actor_id,
        entry=entry,
    )
    return rating_id


def delete_rating(*, session: Session, rating_id: int) -> None:
    """Delete a rating row (a draft) with its score rows."""
    session.connection().execute(
        delete(RatingScore.__table__).where(RatingScore.__table__.c.rating_id == rating_id)
    )
    session.connection().execute(delete(Rating.__table__).where(Rating.__table__.c.id == rating_id))


def set_rating_not_current(*, session: Session, rating_id: int) -> None:
    session.connection().execute(
        update(Rating.__table__).where(Rating.__table__.c.id == rating_id).values(is_current=False)
    )


def set_assignment_submitted(*, session: Session, assignment_id: int, at) -> None:
    session.connection().execute(
        update(Assignment.__table__)
        .where(Assignment.__table__.c.id == assignment_id)
        .values(status=AssignmentStatus.submitted, submitted_at=at)
    )


def add_scores(*, session: Session, rating_id: int, scores) -> None:
    """A submitted rating's score rows, in one statement."""
    if scores:
        session.connection().execute(
            insert(RatingScore.__table__),
            [
                {"rating_id": rating_id, "dimension": key, "value": None if v is None else float(v)}
                for key, v in scores.items()
            ],
        )


def draft_of(*, session: Session, assignment_id: int) -> Rating | None:
    return session.exec(
        select(Rating).where(Rating.assignment_id == assignment_id, Rating.status == "draft")
    ).first()


def history_frame(*, session: Session, external_id: str) -> pd.DataFrame:
    """Every submitted revision of every rating of a task (all versions), newest first."""
    frame = frame_of(
        session,
        select(
            Rating.id.label("rating_id"),
            ReviewRound.name.label("round"),
            User.username.label("expert"),
            TaskVersion.version,
            Rating.revision,
            Rating.is_current.label("current"),
            Rating.verdict,
            Rating.flags,
            Rating.comment,
            Rating.submitted_at,
        )
        .join(TaskVersion, TaskVersion.id == Rating.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .join(ReviewRound, ReviewRound.id == Rating.round_id)
        .join(User, User.id == Rating.expert_id)
        .where(Task.external_id == external_id, Rating.status == "submitted")
        .order_by(Rating.submitted_at.desc(), Rating.id.desc()),
    )
    if frame.empty:
        return frame
    wide = frame_of(
        session,
        select(RatingScore.rating_id, RatingScore.dimension, RatingScore.value).where(
            RatingScore.rating_id.in_(frame["rating_id"].tolist())
        ),
    )
    if not wide.empty:
        wide = wide.pivot_table(index="rating_id", columns="dimension", values="value")
        frame = frame.merge(wide, left_on="rating_id", right_index=True, how="left")
    return frame.drop(columns=["rating_id"])


def turn_notes(
    *, session: Session, assignment_id: int | None = None, external_id: str | None = None
) -> pd.DataFrame:
    """Turn notes of one assignment, or of every assignment of a task (for leads)."""
    from itsmreview.catalog.models import Transcript

    query = (
        select(
            TurnNote.id,
            User.username.label("expert"),
            Transcript.external_id.label("transcript"),
            TurnNote.turn,
            TurnNote.flag,
            TurnNote.comment,
            TurnNote.created_at,
        )
        .join(Assignment, Assignment.id == TurnNote.assignment_id)
        .join(User, User.id == Assignment.expert_id)
        .join(Transcript, Transcript.id == TurnNote.transcript_id)
        .order_by(Transcript.external_id, TurnNote.turn, TurnNote.id)
    )
    if assignment_id is not None:
        query = query.where(TurnNote.assignment_id == assignment_id)
    if external_id is not None:
        query = (
            query.join(TaskVersion, TaskVersion.id == Assignment.task_version_id)
            .join(Task, Task.id == TaskVersion.task_id)
            .where(Task.external_id == external_id)
        )
    return frame_of(session, query)


def persona_activities(*, session: Session, persona: str, active_only: bool = True) -> list:
    query = select(PersonaActivity).where(PersonaActivity.persona == persona)
    if active_only:
        query = query.where(PersonaActivity.active)
    return list(session.exec(query.order_by(PersonaActivity.position, PersonaActivity.id)).all())


def persona_names(*, session: Session) -> set[str]:
    # a walk of the persona index: DISTINCT read every task (94 ms at 100,000 on PostgreSQL)
    return set(session.exec(distinct_walk(Task.persona)).all()) | set(
        session.exec(distinct_walk(PersonaActivity.persona, "activity_walk")).all()
    )


def persona_tasks_frame(*, session: Session, persona: str, with_status: bool) -> pd.DataFrame:
    """The persona's tasks: id, title, track (and status, for leads only: an expert who saw
    it before rating would learn how others judged the task)."""
    columns = [Task.external_id.label("id"), Task.title, Task.track]
    if with_status:
        columns.append(Task.status)
    return frame_of(
        session, select(*columns).where(Task.persona == persona).order_by(Task.external_id)
    )


def completeness_reviews(*, session: Session, persona: str, expert_id: int | None = None) -> list:
    """Current completeness reviews of a persona (of one expert, or all)."""
    query = select(CompletenessReview).where(
        CompletenessReview.persona == persona, CompletenessReview.is_current
    )
    if expert_id is not None:
        query = query.where(CompletenessReview.expert_id == expert_id)
    return list(session.exec(query).all())


def score_rows(*, session: Session, rating_id: int) -> list[RatingScore]:
    """The score rows of one rating, as ORM objects (a draft replaces them)."""
    return list(session.exec(select(RatingScore).where(RatingScore.rating_id == rating_id)).all())


def any_persona_activity(*, session: Session) -> bool:
    """Whether any persona's work activities are stored."""
    return session.exec(select(PersonaActivity.id).limit(1)).first() is not None


def checks_of(*, session: Session, task_version_id: int) -> list:
    """The newest result of each check of one task version, by check name."""
    return list(
        session.exec(
            newest_checks()
            .where(MachineCheck.task_version_id == task_version_id)
            .order_by(MachineCheck.check)
        ).all()
    )


def open_rounds_of_versions(*, session: Session, task_version_ids: Sequence[int]) -> list[int]:
    """Ids of the open rounds holding any of these task versions."""
    if not task_version_ids:
        return []
    return list(
        session.exec(
            select(RoundTask.round_id)
            .join(ReviewRound, ReviewRound.id == RoundTask.round_id)
            .where(
                in_ids(session, RoundTask.task_version_id, task_version_ids),
                ReviewRound.status == RoundStatus.open,
            )
            .distinct()
        ).all()
    )


def proposals_of_assignment(*, session: Session, assignment_id: int) -> list:
    return list(
        session.exec(
            select(ResolutionProposal)
            .where(ResolutionProposal.assignment_id == assignment_id)
            .order_by(ResolutionProposal.id)
        ).all()
    )


def versions_in_round(
    *, session: Session, round_id: int, task_version_ids: Sequence[int]
) -> set[int]:
    """Which of these task versions the round holds (one query, the ids as one parameter)."""
    if not task_version_ids:
        return set()
    return {
        int(v)
        for v in session.exec(
            select(RoundTask.task_version_id).where(
                RoundTask.round_id == round_id,
                in_ids(session, RoundTask.task_version_id, task_version_ids),
            )
        ).all()
    }


def queue_gate_work(
    *,
    session: Session,
    round_id: int,
    task_version_id: int,
    rating_id: int,
    replaced_id: int | None,
    actor_id: int | None,
    entry: dict | None = None,
) -> None:
    session.connection().execute(
        insert(GatePending.__table__).values(
            round_id=round_id,
            task_version_id=task_version_id,
            rating_id=rating_id,
            replaced_id=replaced_id,
            actor_id=actor_id,
            created_at=utcnow(),
            applying=False,
            entry=entry,
        )
    )


def insert_checks(*, session: Session, rows: list[dict]) -> list[int]:
    """Insert machine check results (column -> value each) in a few statements; returns their
    ids in the order of `rows`. The ids are taken first (a block of the sequence on
    PostgreSQL; on SQLite the next ones after the largest, under its write lock), so the rows
    go in at driver speed (COPY on PostgreSQL), not one INSERT ... RETURNING a row."""
    from itsmreview.db import bulk_insert_records

    if not rows:
        return []
    table = MachineCheck.__table__
    if session.get_bind().dialect.name == "postgresql":
        ids = list(
            session.execute(
                text(
                    "SELECT nextval(pg_get_serial_sequence('machine_checks', 'id')) "
                    "FROM generate_series(1, :n)"
                ),
                {"n": len(rows)},
            ).scalars()
        )
    else:
        session.execute(update(table).where(literal(False)).values(id=table.c.id))  # the lock
        last = session.execute(select(func.coalesce(func.max(table.c.id), 0))).scalar_one()
        ids = list(range(last + 1, last + 1 + len(rows)))
    bulk_insert_records(
        session, table, [{"id": id_, **row} for id_, row in zip(ids, rows, strict=True)]
    )
    return ids


def declares_variant(*, session: Session, task_version_id: int) -> bool:
    """Whether the task version declares a source log variant (its primary key's index)."""
    from itsmreview.catalog.models import TaskVersionVariant

    return (
        session.exec(
            select(TaskVersionVariant.sequence_key)
            .where(TaskVersionVariant.task_version_id == task_version_id)
            .limit(1)
        ).first()
        is not None
    )


# findings ----------------------------------------------------------------------------------


def findings_of_versions(*, session: Session, version_ids: Sequence[int]) -> list:
    """(Finding, task id, version number) of the given task versions, by task and id."""
    if not version_ids:
        return []
    query = (
        select(Finding, Task.external_id, TaskVersion.version)
        .join(TaskVersion, TaskVersion.id == Finding.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .where(in_ids(session, Finding.task_version_id, list(version_ids)))
        .order_by(Task.external_id, Finding.id)
    )
    return list(session.exec(query).all())


def findings_of_tasks(*, session: Session, version_ids: Sequence[int]) -> list:
    """(Finding, task id, version number) of every version of the tasks of these versions."""
    if not version_ids:
        return []
    tasks = select(TaskVersion.task_id).where(in_ids(session, TaskVersion.id, list(version_ids)))
    query = (
        select(Finding, Task.external_id, TaskVersion.version)
        .join(TaskVersion, TaskVersion.id == Finding.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .where(Task.id.in_(tasks))
        .order_by(Task.external_id, Finding.id)
    )
    return list(session.exec(query).all())


def findings_listed(
    *, session: Session, external_id: str | None = None, state: str | None = None
) -> list:
    """(Finding, task id, version number, author username), oldest first."""
    query = (
        select(Finding, Task.external_id, TaskVersion.version, User.username)
        .join(TaskVersion, TaskVersion.id == Finding.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .join(User, User.id == Finding.author_id)
        .order_by(Finding.id)
    )
    if external_id is not None:
        query = query.where(Task.external_id == external_id)
    if state is not None:
        query = query.where(Finding.state == state)
    return list(session.exec(query).all())


def settle_finding(
    *, session: Session, finding_id: int, state: str, user_id: int | None, at, reason: str
) -> bool:
    """Decide an open finding in one statement; False when it was decided meanwhile."""
    done = session.exec(
        update(Finding)
        .where(Finding.id == finding_id, Finding.state == "open")
        .values(state=state, decided_by_id=user_id, decided_at=at, decision_reason=reason)
    )
    return done.rowcount == 1


def add_finding_vote(
    *, session: Session, finding_id: int, expert_id: int, stands: bool, reason: str, at
) -> bool:
    """An expert's vote on a finding still open, in one statement; False when the expert
    voted on it already or it is decided."""
    # correlate(None): the subqueries read their own tables, never the insert's target
    still_open = exists(
        select(Finding.id).where(Finding.id == finding_id, Finding.state == "open").correlate(None)
    )
    voted = exists(
        select(FindingVote.id)
        .where(FindingVote.finding_id == finding_id, FindingVote.expert_id == expert_id)
        .correlate(None)
    )
    values = select(
        literal(finding_id), literal(expert_id), literal(stands), literal(reason), literal(at)
    ).where(still_open, ~voted)
    added = session.exec(
        insert(FindingVote)
        .from_select(["finding_id", "expert_id", "stands", "reason", "created_at"], values)
        .returning(FindingVote.id)  # psycopg reports no row count for INSERT ... SELECT
    )
    return added.first() is not None


def finding_votes(*, session: Session, finding_ids: list[int]) -> list[FindingVote]:
    """The votes on these findings, oldest first."""
    if not finding_ids:
        return []
    query = select(FindingVote).where(in_ids(session, FindingVote.finding_id, finding_ids))
    return list(session.exec(query.order_by(FindingVote.id)).all())


def mark_fixed(*, session: Session, finding_id: int, version_id: int) -> bool:
    """Link a finding to the version that fixes it; False when it is linked already."""
    done = session.exec(
        update(Finding)
        .where(Finding.id == finding_id, Finding.fixed_in_version_id.is_(None))
        .values(fixed_in_version_id=version_id)
    )
    return done.rowcount == 1


def findings_to_vote(*, session: Session, task_version_id: int, expert_id: int) -> list[Finding]:
    """The open findings on a task version that the expert neither reported nor voted on,
    oldest first."""
    voted = exists(
        select(FindingVote.id).where(
            FindingVote.finding_id == Finding.id, FindingVote.expert_id == expert_id
        )
    )
    query = select(Finding).where(
        Finding.task_version_id == task_version_id,
        Finding.state == "open",
        Finding.author_id != expert_id,
        ~voted,
    )
    return list(session.exec(query.order_by(Finding.id)).all())


def version_numbers(*, session: Session, ids: list[int]) -> dict[int, int]:
    """Task version id -> its version number."""
    if not ids:
        return {}
    query = select(TaskVersion.id, TaskVersion.version).where(in_ids(session, TaskVersion.id, ids))
    return dict(session.exec(query).all())
