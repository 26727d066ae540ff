"""What an expert sees for one assignment: task, transcripts, source variants, own rating."""

from dataclasses import dataclass, field

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries as catalog_queries
from itsmreview.catalog.models import Task, TaskVersion, Transcript
from itsmreview.coverage import queries as coverage_queries
from itsmreview.coverage.variants import sequence_key
from itsmreview.errors import NotFound, PermissionDenied
from itsmreview.review import queries
from itsmreview.review.models import Assignment, Rating, ReviewRound, Rubric
from itsmreview.review.rubrics import RubricDefinition
from sqlmodel import Session


@dataclass
class SourceVariant:
    sequence: list[str]
    found: bool
    rank: int | None = None
    case_count: int | None = None
    share: float | None = None
    median_throughput_s: float | None = None
    example_case_ids: list[str] = field(default_factory=list)


@dataclass
class AssignmentView:
    assignment: Assignment
    task: Task
    version: TaskVersion
    transcripts: list[Transcript]
    rubric: RubricDefinition
    variants: list[SourceVariant]
    own_rating: Rating | None
    own_scores: dict[str, float | None]


def expert_queue(*, session: Session, actor: User) -> pd.DataFrame:
    """The actor's assignments, open ones first."""
    require_role(actor, Role.expert)
    return queries.queue_frame(session=session, expert_id=actor.id)


def assignment_view(*, session: Session, actor: User, assignment_id: int) -> AssignmentView:
    """Everything the rating page shows for one of the actor's own assignments.

    Raises NotFound, or PermissionDenied when the assignment belongs to someone else.
    """
    require_role(actor, Role.expert)
    assignment = session.get(Assignment, assignment_id)
    if assignment is None:
        raise NotFound(f"assignment {assignment_id} does not exist")
    if assignment.expert_id != actor.id:
        raise PermissionDenied("this task is assigned to another expert")
    version = session.get(TaskVersion, assignment.task_version_id)
    task = session.get(Task, version.task_id)
    review_round = session.get(ReviewRound, assignment.round_id)
    rubric = session.get(Rubric, review_round.rubric_id)
    log = None
    if version.source.get("log"):
        log = coverage_queries.latest_log(session=session, name=version.source["log"])
    variants = []
    for sequence in version.source.get("variants", []):
        found = log and coverage_queries.variant_by_key(
            session=session, log_id=log.id, sequence_key=sequence_key(sequence)
        )
        if found:
            variants.append(
                SourceVariant(
                    sequence,
                    True,
                    found.rank,
                    found.case_count,
                    found.share,
                    found.median_throughput_s,
                    found.example_case_ids,
                )
            )
        else:
            variants.append(SourceVariant(sequence, False))
    rating = queries.current_rating(session=session, assignment_id=assignment.id)
    return AssignmentView(
        assignment=assignment,
        task=task,
        version=version,
        transcripts=catalog_queries.transcripts_of(session=session, task_version_id=version.id),
        rubric=RubricDefinition.model_validate(rubric.definition),
        variants=variants,
        own_rating=rating,
        own_scores=queries.scores_of(session=session, rating_id=rating.id) if rating else {},
    )
