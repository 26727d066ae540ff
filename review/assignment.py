"""Experts claim tasks from a round: k per task, enforced in one transaction, reservations
that lapse, least-covered and best-matching tasks first."""

from datetime import timedelta

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import utcnow
from itsmreview.errors import Conflict, NotFound, PermissionDenied
from itsmreview.review.models import (
    Assignment,
    AssignmentStatus,
    ReviewRound,
    RoundExpert,
    RoundStatus,
    RoundTask,
)
from sqlalchemy import func, or_, text
from sqlmodel import Session, select


def _active(now):
    return or_(
        Assignment.status == AssignmentStatus.submitted,
        (Assignment.status == AssignmentStatus.reserved) & (Assignment.reserved_until > now),
    )


def release_expired(*, session: Session, round_id: int) -> int:
    """Mark lapsed reservations released; returns how many. Flushes."""
    now = utcnow()
    lapsed = session.exec(
        select(Assignment).where(
            Assignment.round_id == round_id,
            Assignment.status == AssignmentStatus.reserved,
            Assignment.reserved_until <= now,
        )
    ).all()
    for assignment in lapsed:
        assignment.status = AssignmentStatus.released
    session.flush()
    return len(lapsed)


def _lock_round_task(session: Session, round_task_id: int) -> None:
    """Serialise claims of one task until the transaction ends: a row lock on PostgreSQL; on
    SQLite, a no-op write that takes the database's single write lock (waiting up to the busy
    timeout) before the places left are counted."""
    if session.get_bind().dialect.name == "postgresql":
        statement = "SELECT id FROM round_tasks WHERE id = :id FOR UPDATE"
    else:
        statement = "UPDATE round_tasks SET id = id WHERE id = :id"
    session.exec(text(statement).bindparams(id=round_task_id))


def active_count(*, session: Session, round_id: int, task_version_id: int) -> int:
    return session.exec(
        select(func.count())
        .select_from(Assignment)
        .where(
            Assignment.round_id == round_id,
            Assignment.task_version_id == task_version_id,
            _active(utcnow()),
        )
    ).one()


def claim_next(
    *, session: Session, actor: User, round_name: str | None = None
) -> Assignment | None:
    """The expert's open reservation, or a new one on the best task still short of k experts:
    tasks matching the expert's expertise first, then by priority (uncovered log weight), then
    the fewest experts so far. Never a task the expert authored, edited or already had.
    Returns None when nothing is left. Raises Conflict for a closed round."""
    require_role(actor, Role.expert)
    rounds = select(ReviewRound).order_by(ReviewRound.created_at.desc())
    if round_name:
        rounds = rounds.where(ReviewRound.name == round_name)
    review_round = session.exec(rounds.limit(1)).first()
    if review_round is None:
        raise NotFound(f"no review round {round_name!r}" if round_name else "no review round")
    if review_round.status != RoundStatus.open:
        raise Conflict(f"round {review_round.name!r} is closed")
    members = set(
        session.exec(
            select(RoundExpert.expert_id).where(RoundExpert.round_id == review_round.id)
        ).all()
    )
    if members and actor.id not in members:
        raise PermissionDenied(f"you are not among the experts of round {review_round.name!r}")
    now = utcnow()
    mine = session.exec(
        select(Assignment).where(
            Assignment.round_id == review_round.id,
            Assignment.expert_id == actor.id,
            Assignment.status == AssignmentStatus.reserved,
            Assignment.reserved_until > now,
        )
    ).first()
    if mine is not None:
        return mine
    had = select(Assignment.task_version_id).where(
        Assignment.round_id == review_round.id, Assignment.expert_id == actor.id
    )
    counts = (
        select(Assignment.task_version_id, func.count().label("n"))
        .where(Assignment.round_id == review_round.id, _active(now))
        .group_by(Assignment.task_version_id)
        .subquery()
    )
    expertise = list(actor.expertise or [])
    candidates = session.exec(
        select(RoundTask, func.coalesce(counts.c.n, 0), Task.persona)
        .join(TaskVersion, TaskVersion.id == RoundTask.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .outerjoin(counts, counts.c.task_version_id == RoundTask.task_version_id)
        .where(
            RoundTask.round_id == review_round.id,
            RoundTask.task_version_id.not_in(had),
            func.coalesce(counts.c.n, 0) < review_round.k,
            or_(Task.author_id.is_(None), Task.author_id != actor.id),
            or_(TaskVersion.edited_by_id.is_(None), TaskVersion.edited_by_id != actor.id),
        )
    ).all()
    ordered = sorted(
        candidates, key=lambda row: (row[2] not in expertise, -row[0].priority, row[1], row[0].id)
    )
    for round_task, _, _ in ordered:
        _lock_round_task(session, round_task.id)
        if (
            active_count(
                session=session,
                round_id=review_round.id,
                task_version_id=round_task.task_version_id,
            )
            >= review_round.k
        ):
            continue  # someone else took the last place while we looked
        assignment = Assignment(
            round_id=review_round.id,
            task_version_id=round_task.task_version_id,
            expert_id=actor.id,
            status=AssignmentStatus.reserved,
            reserved_until=now + timedelta(minutes=review_round.reservation_minutes),
        )
        session.add(assignment)
        session.flush()
        return assignment
    return None


def close_round(*, session: Session, actor: User, round_name: str) -> ReviewRound:
    """Close a round: no more claims or ratings; open reservations are released."""
    require_role(actor, Role.lead)
    review_round = session.exec(select(ReviewRound).where(ReviewRound.name == round_name)).first()
    if review_round is None:
        raise NotFound(f"no review round {round_name!r}")
    review_round.status = RoundStatus.closed
    review_round.closed_at = utcnow()
    for assignment in session.exec(
        select(Assignment).where(
            Assignment.round_id == review_round.id, Assignment.status == AssignmentStatus.reserved
        )
    ).all():
        assignment.status = AssignmentStatus.released
    session.flush()
    return review_round


def reassign(*, session: Session, actor: User, assignment_id: int, expert: User) -> Assignment:
    """Move an unsubmitted assignment to another expert (leads only)."""
    require_role(actor, Role.lead)
    assignment = session.get(Assignment, assignment_id)
    if assignment is None:
        raise NotFound(f"assignment {assignment_id} does not exist")
    if assignment.status == AssignmentStatus.submitted:
        raise Conflict("this assignment is rated already; its rating stays with its expert")
    if Role(expert.role) != Role.expert:
        raise Conflict(f"{expert.username} is not an expert")
    taken = session.exec(
        select(Assignment).where(
            Assignment.round_id == assignment.round_id,
            Assignment.task_version_id == assignment.task_version_id,
            Assignment.expert_id == expert.id,
        )
    ).first()
    if taken is not None:
        raise Conflict(f"{expert.username} already has this task in the round")
    review_round = session.get(ReviewRound, assignment.round_id)
    assignment.status = AssignmentStatus.released
    moved = Assignment(
        round_id=assignment.round_id,
        task_version_id=assignment.task_version_id,
        expert_id=expert.id,
        status=AssignmentStatus.reserved,
        reserved_until=utcnow() + timedelta(minutes=review_round.reservation_minutes),
    )
    session.add(moved)
    session.flush()
    return moved


def set_round_experts(
    *, session: Session, actor: User, round_name: str, add: list[User] = (), remove: list[User] = ()
) -> list[int]:
    """Admit experts to a round or remove them (their unsubmitted reservations are released).
    A round with no members is open to every expert. Returns the member ids. Leads only."""
    require_role(actor, Role.lead)
    review_round = session.exec(select(ReviewRound).where(ReviewRound.name == round_name)).first()
    if review_round is None:
        raise NotFound(f"no review round {round_name!r}")
    members = {
        m.expert_id: m
        for m in session.exec(
            select(RoundExpert).where(RoundExpert.round_id == review_round.id)
        ).all()
    }
    for expert in add:
        if Role(expert.role) != Role.expert:
            raise Conflict(f"{expert.username} is not an expert")
        if expert.id not in members:
            members[expert.id] = RoundExpert(round_id=review_round.id, expert_id=expert.id)
            session.add(members[expert.id])
    for expert in remove:
        member = members.pop(expert.id, None)
        if member is not None:
            session.delete(member)
        for assignment in session.exec(
            select(Assignment).where(
                Assignment.round_id == review_round.id,
                Assignment.expert_id == expert.id,
                Assignment.status == AssignmentStatus.reserved,
            )
        ).all():
            assignment.status = AssignmentStatus.released
    session.flush()
    return sorted(members)
