"""A lead's adjudication of a round's tasks and the adjudication queue (service layer)."""

from dataclasses import dataclass

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.errors import InvalidInput, NotFound
from itsmreview.ledger.chain import content_digest
from itsmreview.ledger.service import append_entries
from itsmreview.review.commitments import adjudication_content
from itsmreview.review.gate.approval import Decision, TaskRatings, decide
from itsmreview.review.gate.queries import pending as pending_queries
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.gate.round_data import find_round, task_ratings
from itsmreview.review.gate.service import (
    current_gate,
    gate_config,
    gating_alphas,
    queue_built_at,
    queue_decided,
    redecide_task,
)
from itsmreview.review.models import Adjudication, ReviewRound, Rubric, Verdict
from itsmreview.review.repair import queries
from itsmreview.review.rounds import queries as rounds_queries
from itsmreview.review.rubrics.service import RubricDefinition
from sqlmodel import Session


def build_adjudication_queue(*, session: Session, review_round: ReviewRound) -> int:
    """Build the round's adjudication queue from its stored statuses (the tasks waiting for
    a lead) and the gate's reasons for each, and mark it built: once per round, the first
    time it is read (rounds decided before the queue existed). Takes the round's gate lock,
    so no applier changes a status meanwhile. Returns how many tasks wait."""
    pending_queries.lock_gate(session=session, round_id=review_round.id)
    if queue_built_at(session=session, round_id=review_round.id) is not None:
        return queries.adjudication_queue_count(session=session, round_id=review_round.id)
    tasks, reasons = _waiting_with_reasons(session, review_round)
    decisions = {v: Decision("adjudication", r) for v, r in reasons.items()}
    queue_decided(session, review_round.id, tasks.itertuples(), decisions, whole=True)
    return len(decisions)


def adjudicate(
    *,
    session: Session,
    actor: User,
    task_version_id: int,
    decision: Verdict | str,
    reason: str,
    round_name: str | int | None = None,
) -> Decision:
    """Record a lead's decision on a task of the round, with a reason, and apply it."""
    require_role(actor, Role.lead)
    if not reason.strip():
        raise InvalidInput("an adjudication needs a reason")
    try:
        decision = Verdict(decision)
    except ValueError:
        raise InvalidInput(f"decision {decision!r} is not one of accept, revise, reject") from None
    review_round = find_round(session, round_name)
    if task_version_id not in rounds_queries.round_task_ids(
        session=session, round_id=review_round.id
    ):
        raise NotFound(f"task version {task_version_id} is not in round {review_round.name!r}")
    record_adjudications(
        session=session,
        actor=actor,
        review_round=review_round,
        decisions={task_version_id: (decision, reason.strip())},
    )
    config, rubric = current_gate(session=session, round_name=review_round.id)
    return redecide_task(
        session=session,
        review_round=review_round,
        task_version_id=task_version_id,
        config=config,
        alphas=gating_alphas(session=session, review_round=review_round, rubric=rubric),
        actor_id=actor.id,
    )


def record_adjudications(
    *,
    session: Session,
    actor: User,
    review_round: ReviewRound,
    decisions: dict[int, tuple[Verdict, str]],
) -> None:
    """Store a lead's decisions (task version id -> (decision, reason)) on tasks of the
    round, each with its ledger entry committing to its content; the caller re-decides the
    tasks. In bulk: a round's whole consensus is one call."""
    rows = [
        Adjudication(
            round_id=review_round.id,
            task_version_id=task,
            lead_id=actor.id,
            decision=Verdict(decision),
            reason=reason,
        )
        for task, (decision, reason) in decisions.items()
    ]
    session.add_all(rows)
    session.flush()
    append_entries(
        session=session,
        entries=[
            {
                "artifact_type": "adjudication",
                "artifact_id": str(row.id),
                "action": "adjudicate",
                "source_kind": "expert",
                "actor_id": actor.id,
                "reference": f"round {review_round.name}",
                "payload": {
                    "task_version_id": row.task_version_id,
                    "decision": str(row.decision),
                    "content_sha256": content_digest(adjudication_content(row)),
                },
            }
            for row in rows
        ],
    )


def disputed_ratings(
    *, session: Session, actor: User, task_version_id: int, round_name: str | int | None = None
) -> pd.DataFrame:
    """The current human ratings of one task of the round, as the lead deciding it reads
    them: expert, verdict, flags, confidence, comment, then a column per rubric dimension (in
    the rubric's order; empty where the expert gave no value). Leads only."""
    require_role(actor, Role.lead)
    review_round = find_round(session, round_name)
    ratings = gate_queries.current_ratings_wide(
        session=session, round_id=review_round.id, task_version_id=task_version_id
    )
    ratings = ratings[ratings["rater_kind"] == "human"]
    scores = gate_queries.scores_long(
        session=session, round_id=review_round.id, task_version_id=task_version_id
    )
    rubric = RubricDefinition.model_validate(session.get(Rubric, review_round.rubric_id).definition)
    names = gate_queries.experts_by_id(
        session=session, ids=sorted(int(e) for e in ratings["expert_id"])
    )
    wide = scores.pivot(index="rating_id", columns="dimension", values="value")
    rows = []
    for rating in ratings.itertuples():
        row = {
            "expert": names.get(int(rating.expert_id), str(rating.expert_id)),
            "verdict": rating.verdict,
            "flags": sorted(rating.flags or []) or None,
            "confidence": rating.confidence,
            "comment": rating.comment or None,
        }
        for dimension in rubric.dimensions:
            found = (
                wide.at[rating.rating_id, dimension.key]
                if rating.rating_id in wide.index and dimension.key in wide.columns
                else None
            )
            row[dimension.label] = found
        rows.append(row)
    labels = ["expert", "verdict", "flags", "confidence", "comment"]
    return pd.DataFrame(rows, columns=labels + [d.label for d in rubric.dimensions])


def _waiting_with_reasons(
    session: Session, review_round: ReviewRound
) -> tuple[pd.DataFrame, dict[int, list[str]]]:
    """The round's tasks whose stored status is adjudication, and the gate's reasons for
    each, decided again from their own ratings (not the round's)."""
    rubric = RubricDefinition.model_validate(session.get(Rubric, review_round.rubric_id).definition)
    tasks = gate_queries.round_task_statuses(
        session=session, round_id=review_round.id, status="adjudication"
    )
    waiting = gate_queries.round_versions_with_status(
        round_id=review_round.id, status="adjudication"
    )
    per_task = task_ratings(
        gate_queries.current_ratings_wide(
            session=session, round_id=review_round.id, task_version_id=waiting
        ),
        gate_queries.scores_long(
            session=session, round_id=review_round.id, task_version_id=waiting
        ),
    )
    config = gate_config(review_round, rubric)
    alphas = gating_alphas(session=session, review_round=review_round, rubric=rubric)
    adjudicated = gate_queries.adjudications_of_round(session=session, round_id=review_round.id)
    reasons = {
        int(v): decide(
            per_task.get(int(v), TaskRatings({}, [], [])), config, alphas, adjudicated.get(int(v))
        ).reasons
        for v in tasks["task_version_id"]
    }
    return tasks, reasons


@dataclass
class QueuePage:
    """One page of a round's adjudication queue as stored."""

    rows: pd.DataFrame  # task_version_id, external_id, title, reasons, decided_at
    total: int  # tasks waiting in the round
    matching: int  # of them, those the search finds
    built_at: object  # when the queue was built (None: not built yet)
    changed_at: object  # when a task last came into it (None: empty)


def adjudication_queue(
    *,
    session: Session,
    actor: User,
    round_name: str | int | None = None,
    search: str = "",
    page: int = 0,
    per_page: int = 25,
) -> QueuePage:
    """The round's tasks waiting for a lead's adjudication, with the gate's reasons, as the
    gate stored them: one page (`page` from 0) of those whose id, title or reasons hold
    `search`, in task order. Reads the materialised queue only. Leads only."""
    require_role(actor, Role.lead)
    review_round = find_round(session, round_name)
    built_at = queue_built_at(session=session, round_id=review_round.id)
    if built_at is None:
        empty = pd.DataFrame(
            columns=["task_version_id", "external_id", "title", "reasons", "decided_at"]
        )
        return QueuePage(empty, 0, 0, None, None)
    search = search.strip()
    total = queries.adjudication_queue_count(session=session, round_id=review_round.id)
    matching = (
        queries.adjudication_queue_count(session=session, round_id=review_round.id, search=search)
        if search
        else total
    )
    last_page = max(0, (matching - 1) // per_page)
    rows = queries.adjudication_queue_page(
        session=session,
        round_id=review_round.id,
        search=search or None,
        offset=min(max(0, page), last_page) * per_page,
        limit=per_page,
    )
    changed_at = queries.adjudication_queue_newest(session=session, round_id=review_round.id)
    return QueuePage(rows, total, matching, built_at, changed_at)


def disagreements(
    *, session: Session, actor: User, round_name: str | int | None = None
) -> pd.DataFrame:
    """Every task of the round waiting for adjudication, with the gate's reasons, decided
    again from the round's ratings (what the stored queue must equal; pages read the queue,
    `adjudication_queue`). Leads only. Columns task_version_id, task_id, external_id,
    title, status, version, is_newest, reasons."""
    require_role(actor, Role.lead)
    review_round = find_round(session, round_name)
    tasks, reasons = _waiting_with_reasons(session, review_round)
    tasks["reasons"] = ["; ".join(reasons[int(v)]) for v in tasks["task_version_id"]]
    return tasks.reset_index(drop=True)
