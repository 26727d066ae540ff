"""The expert's side of a round: their queue, and what they see of one assignment."""

from dataclasses import dataclass, field

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries as catalog_queries
from itsmreview.catalog.models import Task, TaskVersion, Transcript
from itsmreview.errors import NotFound
from itsmreview.review.models import Assignment, Rating, ReviewRound, Rubric
from itsmreview.review.ratings import queries
from itsmreview.review.ratings.checks import checks_frame
from itsmreview.review.rounds import queries as rounds_queries
from itsmreview.review.rounds.service import own_assignment
from itsmreview.review.rubrics.service import RubricDefinition
from sqlmodel import Session


@dataclass
class AssignmentView:
    assignment: Assignment
    task: Task
    version: TaskVersion
    transcripts: list[Transcript]
    rubric: RubricDefinition
    source_log: str | None
    source_sequences: list[list[str]]
    own_rating: Rating | None
    own_scores: dict[str, float | None]
    newest_version: int = 0
    draft: Rating | None = None
    draft_scores: dict[str, float | None] | None = None
    checks: pd.DataFrame | None = None  # newest result of each machine check
    proposals: list = field(default_factory=list)  # the expert's proposed resolutions

    @property
    def state(self) -> dict | None:
        return (self.version.extra or {}).get("state")

    @property
    def alternatives(self) -> list[dict]:
        return list((self.version.extra or {}).get("alternatives") or [])


QUEUE_RATED_SHOWN = 50


@dataclass
class ExpertQueue:
    """The actor's open assignments and their most recently rated ones, with the totals."""

    rows: pd.DataFrame
    held: int
    rated: int

    @property
    def empty(self) -> bool:
        return self.held == 0


def expert_queue(
    *,
    session: Session,
    actor: User,
    rated_shown: int = QUEUE_RATED_SHOWN,
    round_name: str | None = None,
) -> ExpertQueue:
    """The actor's open assignments, then the `rated_shown` they rated last; of one round when
    `round_name` is given (NotFound if there is no such round)."""
    require_role(actor, Role.expert)
    round_id = None
    if round_name is not None:
        review_round = rounds_queries.newest_round(session=session, name=round_name)
        if review_round is None:
            raise NotFound(f"no review round {round_name!r}")
        round_id = review_round.id
    held, rated = queries.queue_counts(session=session, expert_id=actor.id, round_id=round_id)
    rows = queries.queue_frame(
        session=session, expert_id=actor.id, rated_limit=rated_shown, round_id=round_id
    )
    return ExpertQueue(rows=rows, held=held, rated=rated)


def expert_rounds(*, session: Session, actor: User) -> list[str]:
    """Names of the rounds the actor can rate in or holds tasks of, newest first."""
    require_role(actor, Role.expert)
    return [name for name, _ in queries.expert_rounds(session=session, expert_id=actor.id)]


def assignment_view(*, session: Session, actor: User, assignment_id: int) -> AssignmentView:
    """Everything the rating page shows for one of the actor's own assignments.

    Raises NotFound, or PermissionDenied when the assignment belongs to someone else.
    """
    require_role(actor, Role.expert)
    assignment = own_assignment(session=session, actor=actor, assignment_id=assignment_id)
    version = session.get(TaskVersion, assignment.task_version_id)
    task = session.get(Task, version.task_id)
    review_round = session.get(ReviewRound, assignment.round_id)
    rubric = session.get(Rubric, review_round.rubric_id)
    rating = queries.current_rating(session=session, assignment_id=assignment.id)
    draft = queries.draft_of(session=session, assignment_id=assignment.id)
    return AssignmentView(
        assignment=assignment,
        task=task,
        version=version,
        transcripts=catalog_queries.transcripts_of(session=session, task_version_id=version.id),
        rubric=RubricDefinition.model_validate(rubric.definition),
        source_log=version.source.get("log"),
        source_sequences=[list(s) for s in version.source.get("variants", [])],
        own_rating=rating,
        own_scores=queries.scores_of(session=session, rating_id=rating.id) if rating else {},
        newest_version=catalog_queries.latest_version(session=session, task_id=task.id).version,
        draft=draft,
        draft_scores=queries.scores_of(session=session, rating_id=draft.id) if draft else None,
        checks=checks_frame(session=session, task_version_id=version.id),
        proposals=queries.proposals_of_assignment(session=session, assignment_id=assignment.id),
    )


def rating_history(*, session: Session, actor: User, external_id: str) -> pd.DataFrame:
    """All submitted rating revisions of a task with their scores. Leads only (experts never
    see other experts' ratings)."""
    require_role(actor, Role.lead)
    return queries.history_frame(session=session, external_id=external_id)


def turn_notes_of_task(*, session: Session, actor: User, external_id: str) -> pd.DataFrame:
    """Every expert's notes on the turns of the task's transcripts. Leads only."""
    require_role(actor, Role.lead)
    return queries.turn_notes(session=session, external_id=external_id)


def turn_notes_of_assignment(*, session: Session, assignment_id: int) -> pd.DataFrame:
    """The notes the assignment's expert left on the turns of its task's transcripts."""
    return queries.turn_notes(session=session, assignment_id=assignment_id)
