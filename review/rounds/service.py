"""Review rounds opened over task versions and given to k experts each (service layer)."""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.queries import list_users
from itsmreview.accounts.service import find_user, require_role
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.catalog.queries import TaskFilters, tasks_by_external_ids
from itsmreview.catalog.task_list import matching_tasks, matching_version_ids
from itsmreview.db import analyze, bulk_insert, utcnow
from itsmreview.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from itsmreview.ledger.chain import content_digest
from itsmreview.ledger.service import append_entry
from itsmreview.review.gate import cache as gatecache
from itsmreview.review.gate.service import set_gate
from itsmreview.review.models import (
    Assignment,
    AssignmentStatus,
    ReviewRound,
    RoundStatus,
    Rubric,
)
from itsmreview.review.rounds import queries
from itsmreview.review.rounds.assignment import reassign, set_round_experts
from itsmreview.review.rounds.priority import set_priorities
from itsmreview.review.rubrics.service import RubricDefinition, ensure_rubric
from sqlmodel import Session


def create_round(
    *,
    session: Session,
    actor: User,
    name: str,
    rubric: Rubric,
    task_version_ids: Sequence[int],
    k: int = 3,
    selection: dict | None = None,
) -> ReviewRound:
    """Open a round over the given task versions, with a ledger entry of what it holds
    (`selection`: how the tasks were chosen, recorded with it). Leads only. Raises
    InvalidInput for an empty or long name, k below 1 or no task; Conflict for a name in use."""
    require_role(actor, Role.lead)
    name = (name or "").strip()
    if not 1 <= len(name) <= ROUND_NAME_MAX:
        raise InvalidInput(f"a round name is 1-{ROUND_NAME_MAX} characters; got {len(name)}")
    if k < 1:
        raise InvalidInput(f"k must be at least 1, got {k}")
    if not task_version_ids:
        raise InvalidInput("a round needs at least one task")
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
    # review_rounds too: never analysed, the planner takes "rounds that are open" for a
    # fraction of a row and joins every round's tasks to the catalogue (the Rounds page's
    # "already in an open round" took 0.6-1.1 s at 100,000 tasks; 0.15-0.27 s analysed)
    analyze(session, "round_tasks", "review_rounds", "task_versions", "tasks")
    append_entry(
        session=session,
        artifact_type="review_round",
        artifact_id=review_round.name,
        action="create",
        source_kind="expert",
        actor_id=actor.id,
        reference=f"rubric {rubric.name} v{rubric.version}",
        payload={
            "k": k,
            "tasks": len(version_ids),
            "task_version_ids_sha256": content_digest(version_ids),
            **({"selection": selection} if selection else {}),
        },
    )
    return review_round


ROUND_NAME_MAX = 128
MAX_NAMED_TASKS = 10_000  # ids pasted or given with --id: one IN list
LISTED_IDS = 50  # more named ids than this are recorded as a count and a digest
PREVIEW_ROWS = 10


@dataclass(frozen=True)
class RoundPreview:
    """What a round over a filter would hold: how many tasks, how many of them an open round
    holds already (a version of them), and the first rows as the task list shows them."""

    matching: int
    in_open_rounds: int
    rows: pd.DataFrame


def preview_round(
    *, session: Session, actor: User, filters: TaskFilters, limit: int = PREVIEW_ROWS
) -> RoundPreview:
    """The newest versions of the tasks matching `filters`, as `open_round` would take them.
    Leads only."""
    require_role(actor, Role.lead)
    count, busy, rows = matching_tasks(session=session, filters=filters, limit=limit)
    return RoundPreview(matching=count, in_open_rounds=busy, rows=rows)


def open_round(
    *,
    session: Session,
    actor: User,
    name: str,
    rubric: RubricDefinition,
    filters: TaskFilters,
    k: int = 3,
    members: Sequence[str] = (),
    gate: dict | None = None,
) -> tuple[ReviewRound, int]:
    """Open a round over the newest version of every task matching `filters`, admit the
    experts named in `members` (none: every expert may claim) and set its gate (changes of
    GateConfig's settings), with `rubric` stored as its next version if new, in the caller's
    transaction; each step writes its ledger entry. Leads only. Returns the round and its
    number of tasks. Raises InvalidInput when nothing matches or a setting is out of range."""
    require_role(actor, Role.lead)
    version_ids = matching_version_ids(session=session, filters=filters)
    named = set(filters.external_ids)
    if len(named) > MAX_NAMED_TASKS:
        raise InvalidInput(
            f"{len(named):,} task ids given; name at most {MAX_NAMED_TASKS:,}, or choose the "
            "tasks by their status, persona, track or text instead"
        )
    found = tasks_by_external_ids(session=session, external_ids=sorted(named)) if named else {}
    if missing := sorted(named - set(found)):
        raise InvalidInput(
            f"{len(missing)} task id(s) not in the catalog: {', '.join(missing[:5])}"
            f"{', ...' if len(missing) > 5 else ''}; `itsmreview tasks list` shows the ids"
        )
    if not version_ids:
        raise InvalidInput("no task matches these filters; widen them or import tasks first")
    chosen = {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in asdict(filters).items()
        if value
    }
    if len(filters.external_ids) > LISTED_IDS:  # the ledger keeps a digest, not 10,000 ids
        ids = sorted(filters.external_ids)
        chosen["external_ids"] = {"count": len(ids), "sha256": content_digest(ids)}
    review_round = create_round(
        session=session,
        actor=actor,
        name=name,
        rubric=ensure_rubric(rubric, session=session, actor_id=actor.id),
        task_version_ids=version_ids,
        k=k,
        selection={"filters": chosen},
    )
    if members:
        set_round_experts(
            session=session,
            actor=actor,
            round_name=review_round.name,
            add=_experts(session, members),
        )
    if gate:
        set_gate(session=session, actor=actor, round_name=review_round.name, changes=gate)
    return review_round, len(version_ids)


def rounds_overview(*, session: Session, actor: User) -> pd.DataFrame:
    """Every round, newest first, with its rubric, size, admitted experts and progress
    (assignments holding a place and those submitted). Leads only."""
    require_role(actor, Role.lead)
    frame = queries.rounds_frame(session=session)
    progress = queries.round_progress(session=session)
    frame["assigned"] = [progress.get(name, (0, 0))[0] for name in frame["name"]]
    frame["submitted"] = [progress.get(name, (0, 0))[1] for name in frame["name"]]
    return frame


def round_assignments(
    *, session: Session, actor: User, round_name: str, limit: int | None = None
) -> pd.DataFrame:
    """The round's reserved (unsubmitted) assignments with expert, task and expiry, by
    expert (the first `limit`). Leads only."""
    require_role(actor, Role.lead)
    review_round = queries.round_by_name(session=session, name=round_name)
    if review_round is None:
        raise NotFound(f"no review round {round_name!r}")
    return queries.open_assignments_frame(session=session, round_id=review_round.id, limit=limit)


def round_member_names(*, session: Session, actor: User, round_name: str) -> list[str]:
    """Usernames of the experts admitted to a round (empty: open to every expert). Leads only."""
    require_role(actor, Role.lead)
    review_round = queries.round_by_name(session=session, name=round_name)
    if review_round is None:
        raise NotFound(f"no review round {round_name!r}")
    return queries.member_usernames(session=session, round_id=review_round.id)


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


def expert_names(*, session: Session, actor: User) -> list[str]:
    """Usernames of the active experts a lead may admit or hand an assignment to."""
    require_role(actor, Role.lead)
    return [u.username for u in list_users(session=session, role=Role.expert) if u.active]


def _experts(session: Session, usernames: Sequence[str]) -> list[User]:
    return [find_user(session=session, username=name) for name in usernames]


def admit_experts(
    *, session: Session, actor: User, round_name: str, usernames: Sequence[str]
) -> list[int]:
    """Make the round's members exactly these experts (none: open to every expert); those
    removed lose their open reservations. Leads only. Returns the member ids."""
    current = set(round_member_names(session=session, actor=actor, round_name=round_name))
    wanted = set(usernames)
    return set_round_experts(
        session=session,
        actor=actor,
        round_name=round_name,
        add=_experts(session, sorted(wanted - current)),
        remove=_experts(session, sorted(current - wanted)),
    )


def reassign_to(*, session: Session, actor: User, assignment_id: int, username: str) -> Assignment:
    """Move an unsubmitted assignment to the expert named `username`. Leads only."""
    return reassign(
        session=session,
        actor=actor,
        assignment_id=assignment_id,
        expert=find_user(session=session, username=username),
    )
