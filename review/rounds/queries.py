"""Rounds' statements: their members and tasks, assignments, places and claims, priorities."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from itsmreview.accounts.models import User
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import bulk_insert, frame_of, in_ids, utcnow
from itsmreview.review.models import (
    Assignment,
    AssignmentStatus,
    DelphiRound,
    ReviewRound,
    RoundExpert,
    RoundStatus,
    RoundTask,
    Rubric,
)
from sqlalchemy import (
    Integer,
    Text,
    bindparam,
    case,
    cast,
    func,
    insert,
    literal_column,
    or_,
    text,
    union_all,
    update,
)
from sqlmodel import Session, select

if TYPE_CHECKING:
    pass


_RESERVED_UNTIL = Assignment.__table__.c.reserved_until.type  # the type of `now` parameters


def holds_place(now):
    """An assignment that counts towards k: submitted, or reserved and not yet lapsed."""
    return or_(
        Assignment.status == AssignmentStatus.submitted,
        (Assignment.status == AssignmentStatus.reserved) & (Assignment.reserved_until > now),
    )


def release_lapsed(
    *, session: Session, round_id: int, now, task_version_id: int | None = None
) -> int:
    """Mark the round's lapsed reservations (of one task version, or all) released, in one
    statement, and recount the places of the tasks they held; returns how many. Loaded
    assignments see the change."""
    lapsed = (
        Assignment.round_id == round_id,
        Assignment.status == AssignmentStatus.reserved,
        Assignment.reserved_until <= now,
    )
    if task_version_id is not None:
        lapsed = (*lapsed, Assignment.task_version_id == task_version_id)
        found = session.exec(select(Assignment.task_version_id).where(*lapsed)).all()
    else:  # every claim looks: a statement built once
        found = session.exec(_lapsed_tasks(), params={"round_id": round_id, "now": now}).all()
    tasks = sorted(set(found))
    if not tasks:
        return 0
    released = session.exec(
        update(Assignment)
        .where(*lapsed)
        .values(status=AssignmentStatus.released)
        .execution_options(synchronize_session="fetch")
    ).rowcount
    recount_places(session=session, round_id=round_id, task_version_ids=tasks)
    return released


@lru_cache(maxsize=1)
def _lapsed_tasks():
    return select(Assignment.task_version_id).where(
        Assignment.round_id == bindparam("round_id", type_=Integer),
        Assignment.status == AssignmentStatus.reserved,
        Assignment.reserved_until <= bindparam("now", type_=_RESERVED_UNTIL),
    )


def recount_places(
    *, session: Session, round_id: int, task_version_ids: Sequence[int] | None = None
) -> None:
    """Set `places_held` of the round's tasks (the given task versions, or all) from their
    assignments: one statement, the ids as one parameter. Call after any change of an
    assignment's status or a new assignment."""
    statement = (
        update(RoundTask)
        .where(RoundTask.round_id == round_id)
        .values(places_held=_places_held())
        .execution_options(synchronize_session=False)
    )
    if task_version_ids is not None:
        if not task_version_ids:
            return
        if len(task_version_ids) == 1:  # a claim's: a statement built once
            values = {"of_round": round_id, "of_task": int(task_version_ids[0])}
            session.connection().execute(_recount_one(), values)  # Core: no ORM bookkeeping
            return
        statement = statement.where(in_ids(session, RoundTask.task_version_id, task_version_ids))
    session.exec(statement)


@lru_cache(maxsize=1)
def _recount_one():
    return (
        update(RoundTask)
        .where(
            RoundTask.round_id == bindparam("of_round", type_=Integer),
            RoundTask.task_version_id == bindparam("of_task", type_=Integer),
        )
        .values(places_held=_places_held())
        .execution_options(synchronize_session=False)
    )


def place_reservation(*, session: Session, values: dict, k: int, now) -> int | None:
    """PostgreSQL: insert a reservation (`values`: the assignment's columns but its id) unless
    its task already has k places taken at `now` (a count that has fallen behind), and recount
    the task's places, in one statement; returns the assignment's id, or None when the task
    was full. The caller holds the task's row lock (its claim candidates are locked rows)."""
    row = {f"new_{name}": value for name, value in values.items()}
    return session.execute(_place_reservation(), {**row, "k": k, "now": now}).scalar()


@lru_cache(maxsize=1)
def _place_reservation():
    columns = Assignment.__table__.c
    binds = {
        name: bindparam(f"new_{name}", type_=columns[name].type) for name in _RESERVATION_COLUMNS
    }
    taken = (
        select(func.count())
        .select_from(Assignment)
        .where(
            Assignment.round_id == binds["round_id"],
            Assignment.task_version_id == binds["task_version_id"],
            holds_place(bindparam("now", type_=_RESERVED_UNTIL)),
        )
        .scalar_subquery()
    )
    placed = (
        insert(Assignment.__table__)
        .from_select(
            list(binds), select(*binds.values()).where(taken < bindparam("k", type_=Integer))
        )
        .returning(columns.id, columns.round_id, columns.task_version_id)
        .cte("placed")
    )
    tasks = RoundTask.__table__
    # the count cannot see the row its statement inserts (one snapshot): plus one
    return (
        update(tasks)
        .add_cte(placed)
        .where(  # UPDATE ... FROM placed: no row when nothing was placed
            tasks.c.round_id == placed.c.round_id,
            tasks.c.task_version_id == placed.c.task_version_id,
        )
        .values(places_held=_places_held() + 1)
        .returning(placed.c.id)
    )


_RESERVATION_COLUMNS = (
    "round_id",
    "task_version_id",
    "expert_id",
    "status",
    "reserved_until",
    "created_at",
    "submitted_at",
)


def _places_held():
    """A round task's assignments that hold a place (correlated to `round_tasks`)."""
    return (
        select(func.count())
        .select_from(Assignment)
        .where(
            Assignment.round_id == RoundTask.round_id,
            Assignment.task_version_id == RoundTask.task_version_id,
            Assignment.status.in_([AssignmentStatus.reserved, AssignmentStatus.submitted]),
        )
        .scalar_subquery()
    )


def places_taken(*, session: Session, round_id: int, task_version_id: int, now) -> int:
    values = {"round_id": round_id, "task_version_id": task_version_id, "now": now}
    return session.exec(_places_taken(), params=values).one()


@lru_cache(maxsize=1)
def _places_taken():
    """`places_taken`'s statement, built once: every claim runs it."""
    return (
        select(func.count())
        .select_from(Assignment)
        .where(
            Assignment.round_id == bindparam("round_id", type_=Integer),
            Assignment.task_version_id == bindparam("task_version_id", type_=Integer),
            holds_place(bindparam("now", type_=_RESERVED_UNTIL)),
        )
    )


def lock_task_of_round(*, session: Session, round_id: int, task_version_id: int) -> None:
    """Serialise claims and submits of one task of a round until the transaction ends: a row
    lock on PostgreSQL; on SQLite, a no-op write that takes the database's single write lock
    (waiting up to the busy timeout)."""
    if session.get_bind().dialect.name == "postgresql":
        statement = (
            "SELECT id FROM round_tasks WHERE round_id = :r AND task_version_id = :t FOR UPDATE"
        )
    else:
        statement = "UPDATE round_tasks SET id = id WHERE round_id = :r AND task_version_id = :t"
    session.exec(text(statement).bindparams(r=round_id, t=task_version_id))


def newest_round(*, session: Session, name: str | None = None) -> ReviewRound | None:
    if not name:  # every claim asks: a statement built once
        return session.exec(_newest_round()).first()
    rounds = select(ReviewRound).order_by(ReviewRound.created_at.desc())
    return session.exec(rounds.where(ReviewRound.name == name).limit(1)).first()


# the round an unnamed claim or page means: the newest open one, else the newest
_OPEN_FIRST = case((ReviewRound.status == RoundStatus.open, 0), else_=1)


@lru_cache(maxsize=1)
def _newest_round():
    return select(ReviewRound).order_by(_OPEN_FIRST, ReviewRound.created_at.desc()).limit(1)


def claim_context(*, session: Session, expert_id: int, now, round_name: str | None = None):
    """What a claim reads before it looks for a task, in one statement: the round (the newest,
    or by name: its id, name, status, k and reservation_minutes), whether the expert may claim
    in it (a member, or it has none), the id of their reservation that has not lapsed, whether
    any of the round's reservations has lapsed, whether it is a Delphi round past its blind
    phase, and the expert's own row (user_id, username,
    active, role, session_epoch): on PostgreSQL it stays share-locked until the transaction
    ends, as the commit's session check reads it. None when there is no such round."""
    postgres = session.get_bind().dialect.name == "postgresql"
    values = {"expert_id": expert_id, "now": now} | ({"name": round_name} if round_name else {})
    return session.exec(_claim_context(postgres, bool(round_name)), params=values).first()


# LIMIT 1 written into the statement: with a parameter, PostgreSQL's generic plan of a
# prepared statement assumes a tenth of the rows and never wins over planning every run
_ONE = literal_column("1")
_RESERVED = literal_column("'reserved'")  # a constant the planner sees, not a parameter


@lru_cache(maxsize=4)
def _claim_context(postgres: bool, named: bool):
    expert_id = bindparam("expert_id", type_=Integer)
    now = bindparam("now", type_=_RESERVED_UNTIL)
    members = select(RoundExpert.id).where(RoundExpert.round_id == ReviewRound.id)
    admitted = or_(~members.exists(), members.where(RoundExpert.expert_id == expert_id).exists())
    reserved = (Assignment.round_id == ReviewRound.id, Assignment.status == _RESERVED)
    open_id = (
        select(Assignment.id)
        .where(*reserved, Assignment.expert_id == expert_id, Assignment.reserved_until > now)
        .limit(_ONE)
        .scalar_subquery()
    )
    # the round's earliest deadline, not EXISTS(... <= now): a prepared statement's generic
    # plan cannot see `now` and may scan the table for a match that is not there; min() walks
    # the (round, status, reserved_until) index from its start whatever `now` is
    earliest = select(func.min(Assignment.reserved_until)).where(*reserved).scalar_subquery()
    lapsed = func.coalesce(earliest <= now, False)
    blind_over = (
        select(DelphiRound.round_id)
        .where(DelphiRound.round_id == ReviewRound.id, DelphiRound.stage != "rating")
        .exists()
    )
    query = (
        select(
            ReviewRound.id,
            ReviewRound.name,
            ReviewRound.status,
            ReviewRound.k,
            ReviewRound.reservation_minutes,
            admitted.label("admitted"),
            open_id.label("open_id"),
            lapsed.label("lapsed"),
            blind_over.label("blind_over"),
            User.id.label("user_id"),
            User.username,
            User.active,
            User.role,
            User.session_epoch,
        )
        .join(User, User.id == expert_id)
        .limit(_ONE)
    )
    if named:
        query = query.where(ReviewRound.name == bindparam("name"))
    else:
        # a Delphi round past its blind phase hands out nothing: after the other open rounds
        query = query.order_by(
            _OPEN_FIRST, case((blind_over, 1), else_=0), ReviewRound.created_at.desc()
        )
    return query.with_for_update(read=True, of=User) if postgres else query


def round_members(*, session: Session, round_id: int) -> list:
    return list(session.exec(select(RoundExpert).where(RoundExpert.round_id == round_id)).all())


def reservations(
    *, session: Session, round_id: int, expert_id: int | None = None
) -> list[Assignment]:
    query = select(Assignment).where(
        Assignment.round_id == round_id, Assignment.status == AssignmentStatus.reserved
    )
    if expert_id is not None:
        query = query.where(Assignment.expert_id == expert_id)
    return list(session.exec(query).all())


def assignment_of(
    *, session: Session, round_id: int, task_version_id: int, expert_id: int
) -> Assignment | None:
    return session.exec(
        select(Assignment).where(
            Assignment.round_id == round_id,
            Assignment.task_version_id == task_version_id,
            Assignment.expert_id == expert_id,
        )
    ).first()


def _open_places(with_expertise: bool):
    """The round's tasks short of k that the expert never had (task version id, places held),
    and how each fits the expert: 0 one of their personas, 1 any other, 2 their own task.
    Parameters: round_id, expert_id, k, and with_expertise the expanding `expertise`."""
    expert_id = bindparam("expert_id", type_=Integer)
    round_id = bindparam("round_id", type_=Integer)
    author = or_(Task.author_id == expert_id, TaskVersion.edited_by_id == expert_id)
    personas = [(Task.persona.in_(bindparam("expertise", expanding=True)), 0)]
    fit = (
        select(case((author, 2), *(personas if with_expertise else []), else_=1))
        .select_from(TaskVersion)
        .join(Task, Task.id == TaskVersion.task_id)
        .where(TaskVersion.id == RoundTask.task_version_id)
        .scalar_subquery()
    )
    had = (
        select(Assignment.id)
        .where(
            Assignment.round_id == round_id,
            Assignment.task_version_id == RoundTask.task_version_id,
            Assignment.expert_id == expert_id,
        )
        .limit(1)
        .scalar_subquery()
    )
    open_places = select(RoundTask.task_version_id, RoundTask.places_held).where(
        RoundTask.round_id == round_id,
        RoundTask.places_held < bindparam("k", type_=Integer),
        had.is_(None),
    )
    return open_places, fit


@lru_cache(maxsize=64)
def _candidates_statement(
    with_expertise: bool, wanted: int, window: int | None, skip_locked: bool, k: int
):
    """One look of `claim_candidates`, built once and reused with its parameters (round_id,
    expert_id, k, limit, expertise): building and keying a statement of this size cost more
    than running it."""
    open_places, fit = _open_places(with_expertise)
    order = (RoundTask.priority.desc(), RoundTask.places_held, RoundTask.id)
    query = open_places.where(fit == wanted)
    if window is not None:
        # the `window` open tasks best by priority: for each number of places held below k,
        # its slice of ix_round_tasks_round_places read in priority order, the slices merged
        # (walking the priority index instead steps over every full task ranked above them)
        slices = [
            select(RoundTask.id, RoundTask.priority, RoundTask.places_held)
            .where(
                RoundTask.round_id == bindparam("round_id", type_=Integer),
                RoundTask.places_held == literal_column(str(int(held))),
            )
            .order_by(RoundTask.priority.desc(), RoundTask.id)
            .limit(literal_column(str(int(window))))
            .subquery(f"held_{held}")
            for held in range(max(1, k))
        ]
        shortlist = (
            union_all(*(select(*held.c) for held in slices))
            .order_by(text("priority DESC, places_held, id"))
            .limit(literal_column(str(int(window))))
            .subquery("shortlist")
        )
        # joined in its order, row by row: with no sort above it, the look-ups stop at the
        # first row that passes them (and is not locked), not after all `window`
        query = query.join(shortlist, shortlist.c.id == RoundTask.id)
        order = (shortlist.c.priority.desc(), shortlist.c.places_held, shortlist.c.id)
    return (
        query.order_by(*order)
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(skip_locked=skip_locked, of=RoundTask)
    )


def claim_candidates(
    *,
    session: Session,
    review_round: ReviewRound,
    expert_id: int,
    expertise: Sequence[str] = (),
    limit: int = 5,
    skip_locked: bool = True,
) -> list[tuple[int, int]]:
    """(task version id, places held) of the best tasks the expert may still claim, best
    first: short of k by the kept count, never had by the expert, not authored or edited by
    them; the expert's personas first, then by priority, then the fewest places held.

    The round's tasks are walked in priority order on an index and each is checked by index
    look-ups as it comes, so a claim reads a few rows, not the round. On PostgreSQL the rows
    are locked until the transaction ends, skipping rows another claim holds with
    `skip_locked` (experts claiming at once take different tasks instead of queueing for
    one), else waiting for them; SQLite's write lock already serialises claims."""
    with_expertise = bool(expertise)
    values = {"round_id": review_round.id, "expert_id": expert_id, "k": review_round.k}
    if with_expertise:
        values["expertise"] = list(expertise)
    rows: list = []
    for wanted in [0, 1] if with_expertise else [1]:  # the expert's personas first
        # the look-ups run on a shortlist of the open tasks best by priority (a top-N of the
        # open places, cheap), widened only when too few of it are left for this expert; the
        # expertise pass looks at every open task (a match may sit anywhere)
        for window in (None,) if wanted == 0 else CLAIM_SHORTLISTS:
            statement = _candidates_statement(
                with_expertise, wanted, window, skip_locked, review_round.k
            )
            found = session.exec(statement, params={**values, "limit": limit - len(rows)}).all()
            if len(rows) + len(found) >= limit or window is None:
                break
        rows += found
        if len(rows) >= limit:
            break
    return [(version_id, held) for version_id, held in rows]


def candidates_stay_locked(*, session: Session) -> bool:
    """Whether `claim_candidates` leaves its rows locked until the transaction ends (row locks
    on PostgreSQL; SQLite has only its database-wide write lock)."""
    return session.get_bind().dialect.name == "postgresql"


CLAIM_SHORTLISTS = (64, 1024, None)  # None: every open task of the round


def round_by_name(*, session: Session, name: str) -> ReviewRound | None:
    return session.exec(select(ReviewRound).where(ReviewRound.name == name)).first()


def round_task_ids(*, session: Session, round_id: int) -> list[int]:
    return list(
        session.exec(
            select(RoundTask.task_version_id)
            .where(RoundTask.round_id == round_id)
            .order_by(RoundTask.priority.desc(), RoundTask.id)
        ).all()
    )


def assignment_counts(*, session: Session, round_id: int) -> dict[int, int]:
    rows = session.exec(
        select(Assignment.expert_id, func.count())
        .where(Assignment.round_id == round_id, holds_place(utcnow()))
        .group_by(Assignment.expert_id)
    ).all()
    return {expert: count for expert, count in rows}


def assignments_of_task(
    *, session: Session, round_id: int, task_version_id: int, holding_only: bool = True
) -> list[Assignment]:
    """The task's assignments in the round: those holding a place, or all (released too)."""
    query = select(Assignment).where(
        Assignment.round_id == round_id, Assignment.task_version_id == task_version_id
    )
    if holding_only:
        query = query.where(holds_place(utcnow()))
    return list(session.exec(query).all())


def round_progress(*, session: Session) -> dict[str, tuple[int, int]]:
    """Per round name: (assigned, submitted) assignments that hold a place, counted in the
    database (no frame: light commands stay light)."""
    submitted = func.sum(case((Assignment.status == AssignmentStatus.submitted, 1), else_=0))
    rows = session.exec(
        select(ReviewRound.name, func.count(Assignment.id), submitted)
        .join(ReviewRound, ReviewRound.id == Assignment.round_id)
        .where(holds_place(utcnow()))
        .group_by(ReviewRound.name)
    ).all()
    return {name: (int(assigned), int(done or 0)) for name, assigned, done in rows}


def round_size(*, session: Session, round_id: int) -> int:
    """How many task versions the round holds (an index count)."""
    return session.exec(
        select(func.count()).select_from(RoundTask).where(RoundTask.round_id == round_id)
    ).one()


def start_review_of_drafts(*, session: Session, round_id: int) -> None:
    """The round's task versions that no round has decided on yet go in review, and so do
    their tasks where that version is the newest (a task mirrors its newest version): two
    statements, touching only those rows."""
    in_round = select(RoundTask.task_version_id).where(RoundTask.round_id == round_id)
    newest = (
        select(func.max(TaskVersion.version))
        .where(TaskVersion.task_id == Task.id)
        .correlate(Task)
        .scalar_subquery()
    )
    newest_drafts = select(TaskVersion.task_id).where(
        TaskVersion.id.in_(in_round),
        TaskVersion.status == "draft",
        TaskVersion.task_id == Task.id,
        TaskVersion.version == newest,
    )
    session.exec(
        update(Task)
        .where(newest_drafts.exists())
        .values(status="in_review", updated_at=utcnow())
        .execution_options(synchronize_session="fetch")
    )
    session.exec(
        update(TaskVersion)
        .where(TaskVersion.status == "draft", TaskVersion.id.in_(in_round))
        .values(status="in_review")
        .execution_options(synchronize_session="fetch")
    )


def round_task_sources(*, session: Session, round_id: int) -> Iterator[tuple[int, str | None]]:
    """(round task id, source of its task version as JSON text) of every task of the round,
    in batches (text: tasks sharing a source are weighed once)."""
    yield from session.exec(
        select(RoundTask.id, cast(TaskVersion.source, Text))
        .join(TaskVersion, TaskVersion.id == RoundTask.task_version_id)
        .where(RoundTask.round_id == round_id)
        .execution_options(yield_per=5000)
    )


def set_round_task_priorities(*, session: Session, priorities: list[tuple[int, float]]) -> None:
    """(round task id, priority) pairs: loaded in bulk into a temporary table, then applied
    with one UPDATE (one statement per row costs seconds at 100,000 tasks on PostgreSQL)."""
    if not priorities:
        return
    temporary = "round_task_priority_load"
    drop = " ON COMMIT DROP" if session.get_bind().dialect.name == "postgresql" else ""
    session.exec(
        text(f"CREATE TEMPORARY TABLE {temporary} (id INTEGER PRIMARY KEY, priority FLOAT){drop}")
    )
    bulk_insert(session, temporary, ("id", "priority"), priorities)
    session.exec(
        text(
            f"UPDATE round_tasks SET priority = (SELECT p.priority FROM {temporary} p "
            f"WHERE p.id = round_tasks.id) WHERE id IN (SELECT id FROM {temporary})"
        )
    )
    session.exec(text(f"DROP TABLE {temporary}"))


def open_assignments_frame(
    *, session: Session, round_id: int | None = None, limit: int | None = None
):
    """Reserved (unsubmitted) assignments with their round, expert and task (of one round;
    the first `limit`)."""
    rounds = select(ReviewRound.id)  # searched per round on its index
    if round_id is not None:
        rounds = rounds.where(ReviewRound.id == round_id)
    return frame_of(
        session,
        select(
            Assignment.id.label("assignment"),
            ReviewRound.name.label("round"),
            User.username.label("expert"),
            Task.external_id.label("task"),
            Assignment.reserved_until,
        )
        .join(ReviewRound, ReviewRound.id == Assignment.round_id)
        .join(User, User.id == Assignment.expert_id)
        .join(TaskVersion, TaskVersion.id == Assignment.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .where(
            Assignment.round_id.in_(rounds),
            Assignment.status == AssignmentStatus.reserved,
        )
        .order_by(ReviewRound.name, User.username, Assignment.id)
        .limit(limit),
    )


def rounds_frame(*, session: Session):
    """Every round with its rubric, size and number of admitted experts, newest first."""
    size = (
        select(func.count())
        .select_from(RoundTask)
        .where(RoundTask.round_id == ReviewRound.id)
        .scalar_subquery()
    )
    members = (
        select(func.count())
        .select_from(RoundExpert)
        .where(RoundExpert.round_id == ReviewRound.id)
        .scalar_subquery()
    )
    return frame_of(
        session,
        select(
            ReviewRound.name,
            ReviewRound.status,
            ReviewRound.k,
            Rubric.name.label("rubric"),
            Rubric.version.label("rubric_version"),
            size.label("tasks"),
            members.label("members"),
            ReviewRound.created_at,
            ReviewRound.closed_at,
        )
        .join(Rubric, Rubric.id == ReviewRound.rubric_id)
        .order_by(ReviewRound.created_at.desc(), ReviewRound.id.desc()),
    )


def member_usernames(*, session: Session, round_id: int) -> list[str]:
    return list(
        session.exec(
            select(User.username)
            .join(RoundExpert, RoundExpert.expert_id == User.id)
            .where(RoundExpert.round_id == round_id)
            .order_by(User.username)
        ).all()
    )
