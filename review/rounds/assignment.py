"""Experts claim tasks from a round: k per task, enforced in one transaction, reservations
that lapse, least-covered and best-matching tasks first."""

from datetime import timedelta

from itsmreview.accounts import acting
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.db import utcnow
from itsmreview.errors import Busy, Conflict, NotFound, PermissionDenied
from itsmreview.ledger.service import append_entry
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.models import (
    Assignment,
    AssignmentStatus,
    ReviewRound,
    RoundExpert,
    RoundStatus,
)
from itsmreview.review.rounds import queries
from sqlalchemy.orm import make_transient_to_detached
from sqlmodel import Session

CLAIM_ATTEMPTS = 20  # looks at the best tasks short of k before telling the expert to retry


def release_expired(*, session: Session, round_id: int) -> int:
    """Mark lapsed reservations released; returns how many. Flushes."""
    released = queries.release_lapsed(session=session, round_id=round_id, now=utcnow())
    session.flush()
    return released


def places_taken_now(*, session: Session, round_id: int, task_version_id: int, now) -> int:
    """Places of k taken on one task once its lapsed reservations are released, counted under
    the task's claim lock (held until the transaction ends), so the count stays true."""
    queries.lock_task_of_round(session=session, round_id=round_id, task_version_id=task_version_id)
    queries.release_lapsed(
        session=session, round_id=round_id, task_version_id=task_version_id, now=now
    )
    return queries.places_taken(
        session=session, round_id=round_id, task_version_id=task_version_id, now=now
    )


def claim_next(
    *, session: Session, actor: User, round_name: str | None = None
) -> Assignment | None:
    """The expert's open reservation, or a new one on the best task still short of k experts:
    tasks matching the expert's expertise first, then by priority (uncovered log weight), then
    the fewest experts so far. Never a task the expert authored, edited or already had.
    Lapsed reservations of the round are released first, so they never count towards k.
    Returns None when nothing is left. Raises Conflict for a closed round."""
    require_role(actor, Role.expert)
    now = utcnow()
    context = queries.claim_context(
        session=session, expert_id=actor.id, now=now, round_name=round_name
    )
    if context is None:
        raise NotFound(f"no review round {round_name!r}" if round_name else "no review round")
    review_round = context  # the round's columns
    if review_round.status != RoundStatus.open:
        raise Conflict(f"round {review_round.name!r} is closed")
    if context.blind_over:
        raise Conflict(
            f"round {review_round.name!r} is a Delphi round past its blind phase: no task is "
            "handed out; revise your answers on the Consensus page"
        )
    if not context.admitted:
        raise PermissionDenied(f"you are not among the experts of round {review_round.name!r}")
    acting.share_locked(  # the commit's session check reads this row, not the table again
        session,
        acting.ActingRow(
            context.user_id, context.username, context.active, context.role, context.session_epoch
        ),
    )
    locked = queries.candidates_stay_locked(session=session)
    if context.open_id is not None:
        return session.get(Assignment, context.open_id)
    if context.lapsed:
        queries.release_lapsed(session=session, round_id=review_round.id, now=now)
    for _ in range(CLAIM_ATTEMPTS):
        for skip_locked in (True, False):  # tasks others are claiming: wait only if no other
            candidates = queries.claim_candidates(
                session=session,
                review_round=review_round,
                expert_id=actor.id,
                expertise=list(actor.expertise or []),
                # locked rows are short of k as they are now: the first is taken
                limit=1 if locked else 5,
                skip_locked=skip_locked,
            )
            if candidates:
                break
        else:
            return None
        for task_version_id, _ in candidates:
            if locked:  # its row stays locked: placed, or found full by its assignments
                assignment = _reserve(session, review_round, task_version_id, actor, now)
                if assignment is not None:
                    return assignment
                queries.recount_places(
                    session=session, round_id=review_round.id, task_version_ids=[task_version_id]
                )
                continue
            taken = places_taken_now(
                session=session, round_id=review_round.id, task_version_id=task_version_id, now=now
            )
            if taken >= review_round.k:
                # filled while we looked: correct its count so the next look skips it
                queries.recount_places(
                    session=session, round_id=review_round.id, task_version_ids=[task_version_id]
                )
                continue
            assignment = Assignment(**_reservation(review_round, task_version_id, actor, now))
            session.add(assignment)
            session.flush()
            queries.recount_places(
                session=session, round_id=review_round.id, task_version_ids=[task_version_id]
            )
            return assignment
    raise Busy("every task short of experts was being claimed at once; try again")


def _reservation(review_round: ReviewRound, task_version_id: int, actor: User, now) -> dict:
    return {
        "round_id": review_round.id,
        "task_version_id": task_version_id,
        "expert_id": actor.id,
        "status": AssignmentStatus.reserved,
        "reserved_until": now + timedelta(minutes=review_round.reservation_minutes),
        "created_at": now,
        "submitted_at": None,
    }


def _reserve(
    session: Session, review_round: ReviewRound, task_version_id: int, actor: User, now
) -> Assignment | None:
    """A new reservation and its task's count in one statement (PostgreSQL), None when the
    task's assignments fill its k places; the returned object is the session's, as loaded."""
    values = _reservation(review_round, task_version_id, actor, now)
    row = {**values, "status": str(values["status"])}
    placed = queries.place_reservation(session=session, values=row, k=review_round.k, now=now)
    if placed is None:
        return None
    assignment = Assignment(id=placed, **values)
    make_transient_to_detached(assignment)
    session.add(assignment)
    return assignment


def close_round(*, session: Session, actor: User, round_name: str) -> ReviewRound:
    """Close a round: no more claims or ratings; open reservations are released."""
    require_role(actor, Role.lead)
    review_round = _round_named(session, round_name)
    if review_round.status == RoundStatus.closed:
        raise Conflict(f"round {review_round.name!r} is closed already")
    review_round.status = RoundStatus.closed
    review_round.closed_at = utcnow()
    released = queries.reservations(session=session, round_id=review_round.id)
    for assignment in released:
        assignment.status = AssignmentStatus.released
    session.flush()
    queries.recount_places(session=session, round_id=review_round.id)
    _record(session, actor, review_round, "close", {"released": len(released)})
    return review_round


def _round_named(session: Session, round_name: str) -> ReviewRound:
    review_round = queries.round_by_name(session=session, name=round_name)
    if review_round is None:
        raise NotFound(f"no review round {round_name!r}")
    return review_round


def _record(
    session: Session, actor: User, review_round: ReviewRound, action: str, payload: dict
) -> None:
    """The ledger entry of a lead's change to a round."""
    append_entry(
        session=session,
        artifact_type="review_round",
        artifact_id=review_round.name,
        action=action,
        source_kind="expert",
        actor_id=actor.id,
        payload=payload,
    )


def _unsubmitted(session: Session, assignment_id: int) -> Assignment:
    assignment = session.get(Assignment, assignment_id)
    if assignment is None:
        raise NotFound(f"assignment {assignment_id} does not exist")
    if assignment.status == AssignmentStatus.submitted:
        raise Conflict("this assignment is rated already; its rating stays with its expert")
    if assignment.status == AssignmentStatus.released:
        raise Conflict(f"assignment {assignment_id} was released already")
    if assignment.status != AssignmentStatus.reserved:  # a model rater's, say
        raise Conflict(f"assignment {assignment_id} is not an expert's open reservation")
    return assignment


def release_assignment(*, session: Session, actor: User, assignment_id: int) -> Assignment:
    """Give an unsubmitted assignment's place back to the round (leads only): another expert
    may claim it; the expert who held it does not get the task again."""
    require_role(actor, Role.lead)
    assignment = _unsubmitted(session, assignment_id)
    assignment.status = AssignmentStatus.released
    session.flush()
    queries.recount_places(
        session=session,
        round_id=assignment.round_id,
        task_version_ids=[assignment.task_version_id],
    )
    review_round = session.get(ReviewRound, assignment.round_id)
    _record(
        session,
        actor,
        review_round,
        "release",
        {"assignment": assignment.id, "expert_id": assignment.expert_id},
    )
    return assignment


def reassign(*, session: Session, actor: User, assignment_id: int, expert: User) -> Assignment:
    """Move an unsubmitted assignment to another expert (leads only)."""
    require_role(actor, Role.lead)
    assignment = _unsubmitted(session, assignment_id)
    if Role(expert.role) != Role.expert:
        raise Conflict(f"{expert.username} is not an expert")
    taken = queries.assignment_of(
        session=session,
        round_id=assignment.round_id,
        task_version_id=assignment.task_version_id,
        expert_id=expert.id,
    )
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
    queries.recount_places(
        session=session, round_id=moved.round_id, task_version_ids=[moved.task_version_id]
    )
    _record(
        session,
        actor,
        review_round,
        "reassign",
        {"assignment": assignment.id, "to": expert.username, "new_assignment": moved.id},
    )
    return moved


def set_round_experts(
    *, session: Session, actor: User, round_name: str, add: list[User] = (), remove: list[User] = ()
) -> list[int]:
    """Admit experts to a round or remove them (their unsubmitted reservations are released).
    A round with no members is open to every expert. Returns the member ids. Leads only."""
    require_role(actor, Role.lead)
    review_round = _round_named(session, round_name)
    members = {
        m.expert_id: m for m in queries.round_members(session=session, round_id=review_round.id)
    }
    added: list[str] = []
    for expert in add:
        if Role(expert.role) != Role.expert:
            raise Conflict(f"{expert.username} is not an expert")
        if expert.id not in members:
            members[expert.id] = RoundExpert(round_id=review_round.id, expert_id=expert.id)
            session.add(members[expert.id])
            added.append(expert.username)
    for expert in remove:
        member = members.pop(expert.id, None)
        if member is not None:
            session.delete(member)
        released = queries.reservations(
            session=session, round_id=review_round.id, expert_id=expert.id
        )
        for assignment in released:
            assignment.status = AssignmentStatus.released
        session.flush()
        queries.recount_places(
            session=session,
            round_id=review_round.id,
            task_version_ids=[a.task_version_id for a in released],
        )
    session.flush()
    removed = sorted(e.username for e in remove)
    if added or removed:
        _record(
            session, actor, review_round, "members", {"added": sorted(added), "removed": removed}
        )
    return sorted(members)


def rounds_progress(*, session: Session) -> tuple[list[ReviewRound], dict[str, tuple[int, int]]]:
    """Every review round, and per round name its (assigned, submitted) assignment counts."""
    return gate_queries.list_rounds(session=session), queries.round_progress(session=session)
