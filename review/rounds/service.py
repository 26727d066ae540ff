"""Review rounds opened over task versions and given to k experts each (service layer)."""

from collections.abc import Sequence
from datetime import timedelta

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import analyze, bulk_insert, utcnow
from itsmreview.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from itsmreview.review.gate import cache as gatecache
from itsmreview.review.models import (
    Assignment,
    AssignmentStatus,
    ReviewRound,
    RoundStatus,
    Rubric,
)
from itsmreview.review.rounds import queries
from itsmreview.review.rounds.priority import set_priorities
from itsmreview.review.rubrics.service import RubricDefinition
from sqlmodel import Session


def create_round(
    *,
    session: Session,
    actor: User,
    name: str,
    rubric: Rubric,
    task_version_ids: Sequence[int],
    k: int = 3,
) -> ReviewRound:
    """Open a round over the given task versions. Leads only."""
    require_role(actor, Role.lead)
    if k < 1:
        raise InvalidInput(f"k must be at least 1, got {k}")
    if queries.round_by_name(session=session, name=name):
        raise Conflict(f"a round named {name!r} exists already")
    review_round = ReviewRound(name=name, rubric_id=rubric.id, k=k, created_by_id=actor.id)
    session.add(review_round)
    session.flush()
    version_ids = sorted({int(v) for v in task_version_ids})
    bulk_insert(
        session,
        "round_tasks",
        ("round_id", "task_version_id", "priority"),
        ((review_round.id, v, 0.0) for v in version_ids),
    )
    set_priorities(session=session, round_id=review_round.id)
    gatecache.ensure(
        session=session,
        review_round=review_round,
        rubric=RubricDefinition.model_validate(rubric.definition),
    )
    queries.start_review_of_drafts(session=session, round_id=review_round.id)
    session.flush()
    analyze(session, "round_tasks", "task_versions", "tasks")
    return review_round


def assign_round(
    *, session: Session, actor: User, review_round: ReviewRound, experts: Sequence[User]
) -> int:
    """Give every task of the round to k experts, least-loaded first, never to its author.

    Returns the number of new assignments. Raises Conflict when fewer than k eligible
    experts exist for a task.
    """
    require_role(actor, Role.lead)
    if review_round.status != RoundStatus.open:
        raise Conflict(f"round {review_round.name!r} is closed")
    load = queries.assignment_counts(session=session, round_id=review_round.id)
    created = 0
    ordered = sorted(experts, key=lambda e: e.id)
    for version_id in queries.round_task_ids(session=session, round_id=review_round.id):
        version = session.get(TaskVersion, version_id)
        task = session.get(Task, version.task_id)
        every = queries.assignments_of_task(
            session=session,
            round_id=review_round.id,
            task_version_id=version_id,
            holding_only=False,
        )
        now = utcnow()
        current = {
            a.expert_id
            for a in every
            if a.status == AssignmentStatus.submitted
            or (a.status == AssignmentStatus.reserved and a.reserved_until > now)
        }
        had = {a.expert_id for a in every}  # a released place is not handed back
        eligible = [
            e
            for e in ordered
            if e.id not in had and e.id not in (task.author_id, version.edited_by_id)
        ]
        need = review_round.k - len(current)
        if need <= 0:
            continue
        if len(eligible) < need:
            raise Conflict(
                f"task {task.external_id!r} needs {need} more expert(s) but only "
                f"{len(eligible)} eligible expert(s) remain; add experts or lower k"
            )
        eligible.sort(key=lambda e: (load.get(e.id, 0), e.id))
        for expert in eligible[:need]:
            session.add(
                Assignment(
                    round_id=review_round.id,
                    task_version_id=version_id,
                    expert_id=expert.id,
                    status=AssignmentStatus.reserved,
                    reserved_until=utcnow() + timedelta(minutes=review_round.reservation_minutes),
                )
            )
            load[expert.id] = load.get(expert.id, 0) + 1
            created += 1
    session.flush()
    queries.recount_places(session=session, round_id=review_round.id)
    return created


def own_assignment(*, session: Session, actor: User, assignment_id: int) -> Assignment:
    """The actor's own assignment. Raises NotFound, or PermissionDenied for another's (blind
    review: no expert reads or writes anything of another expert's)."""
    assignment = session.get(Assignment, assignment_id)
    check_own(assignment, actor, assignment_id)
    return assignment


def check_own(assignment: Assignment | None, actor: User, assignment_id: int) -> None:
    if assignment is None:
        raise NotFound(f"assignment {assignment_id} does not exist")
    if assignment.expert_id != actor.id:
        raise PermissionDenied("this task is assigned to another expert")
