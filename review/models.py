"""Rubrics (versioned), review rounds, assignments, ratings (with revisions), adjudications."""

from datetime import datetime
from enum import StrEnum

from itsmreview.db import utcnow
from sqlalchemy import JSON, Float, Index, LargeBinary, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


class RoundStatus(StrEnum):
    open = "open"
    closed = "closed"


class AssignmentStatus(StrEnum):
    reserved = "reserved"
    submitted = "submitted"
    released = "released"
    model = "model"  # a model rater's rating of the task: holds no place, in no queue


class RatingStatus(StrEnum):
    draft = "draft"
    submitted = "submitted"


class Verdict(StrEnum):
    accept = "accept"
    revise = "revise"
    reject = "reject"


class Rubric(SQLModel, table=True):
    __tablename__ = "rubrics"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=String(128), index=True)
    version: int = 1
    title: str = Field(sa_type=String(256))
    definition: dict = Field(sa_type=JSON)
    content_hash: str = Field(sa_type=String(64))
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = Field(default=None, foreign_key="users.id")


class ReviewRound(SQLModel, table=True):
    __tablename__ = "review_rounds"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=String(128), unique=True)
    rubric_id: int = Field(foreign_key="rubrics.id")
    k: int = 3
    reservation_minutes: int = 120
    status: RoundStatus = Field(default=RoundStatus.open, sa_type=String(16))
    approval: dict = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = Field(default=None, foreign_key="users.id")
    closed_at: datetime | None = None


class RoundTask(SQLModel, table=True):
    """A task version put up for review in a round."""

    __tablename__ = "round_tasks"
    __table_args__ = (
        UniqueConstraint("round_id", "task_version_id"),
        # a claim's shortlist: each number of places held below k, in priority order, merged
        Index("ix_round_tasks_round_places", "round_id", "places_held", "priority", "id"),
        # the expertise pass walks a round's tasks in priority order
        Index("ix_round_tasks_round_priority", "round_id", "priority", "places_held"),
    )

    id: int | None = Field(default=None, primary_key=True)
    round_id: int = Field(foreign_key="review_rounds.id", index=True, ondelete="CASCADE")
    task_version_id: int = Field(foreign_key="task_versions.id", index=True)
    priority: float = Field(default=0.0, sa_type=Float)
    # assignments holding or having held a place (reserved or submitted); kept by
    # queries.recount_places, read by claims to find tasks short of k without counting
    places_held: int = Field(default=0)


class Assignment(SQLModel, table=True):
    __tablename__ = "assignments"
    __table_args__ = (
        UniqueConstraint("round_id", "task_version_id", "expert_id"),
        Index("ix_assignments_round_status_until", "round_id", "status", "reserved_until"),
        Index(
            "ix_assignments_round_expert_status",
            "round_id",
            "expert_id",
            "status",
            "reserved_until",
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    round_id: int = Field(foreign_key="review_rounds.id", index=True, ondelete="CASCADE")
    task_version_id: int = Field(foreign_key="task_versions.id", index=True)
    expert_id: int = Field(foreign_key="users.id", index=True)
    status: AssignmentStatus = Field(default=AssignmentStatus.reserved, sa_type=String(16))
    reserved_until: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    submitted_at: datetime | None = None


class Rating(SQLModel, table=True):
    """One revision of an expert's rating; the newest revision of an assignment is current."""

    __tablename__ = "ratings"
    __table_args__ = (
        UniqueConstraint("assignment_id", "revision"),
        Index("ix_ratings_round_status_id", "round_id", "status", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    assignment_id: int = Field(foreign_key="assignments.id", index=True, ondelete="CASCADE")
    round_id: int = Field(foreign_key="review_rounds.id", index=True)
    task_version_id: int = Field(foreign_key="task_versions.id", index=True)
    expert_id: int = Field(foreign_key="users.id", index=True)
    rubric_id: int = Field(foreign_key="rubrics.id")
    revision: int = 1
    is_current: bool = True
    status: RatingStatus = Field(default=RatingStatus.draft, sa_type=String(16))
    verdict: Verdict | None = Field(default=None, sa_type=String(16))
    flags: list[str] = Field(default_factory=list, sa_type=JSON)
    comment: str = Field(default="", sa_type=Text)
    confidence: int | None = None
    rater_kind: str = Field(default="human", sa_type=String(16))
    created_at: datetime = Field(default_factory=utcnow)
    submitted_at: datetime | None = None
    # the scores packed in the rubric's dimension order (review.scorevector); None on rows
    # written without it, which agreement then reads from rating_scores
    score_vector: bytes | None = Field(default=None, sa_type=LargeBinary)
    # optional dimensions the expert marked as not applying to the task, with the reason:
    # {dimension: reason}; their scores stay empty (missing in alpha, the gate and exports).
    # None when nothing is marked
    not_applicable: dict[str, str] | None = Field(default=None, sa_type=JSON(none_as_null=True))


class RatingScore(SQLModel, table=True):
    """A rating's value on one rubric dimension, in long form for agreement statistics."""

    __tablename__ = "rating_scores"
    __table_args__ = (UniqueConstraint("rating_id", "dimension"),)

    id: int | None = Field(default=None, primary_key=True)
    rating_id: int = Field(foreign_key="ratings.id", index=True, ondelete="CASCADE")
    dimension: str = Field(sa_type=String(64))
    value: float | None = Field(default=None, sa_type=Float)


class Adjudication(SQLModel, table=True):
    __tablename__ = "adjudications"

    id: int | None = Field(default=None, primary_key=True)
    round_id: int = Field(foreign_key="review_rounds.id", index=True)
    task_version_id: int = Field(foreign_key="task_versions.id", index=True)
    lead_id: int = Field(foreign_key="users.id")
    decision: Verdict = Field(sa_type=String(16))
    reason: str = Field(sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow)


class PersonaActivity(SQLModel, table=True):
    """A work activity of a job persona, against which experts judge the task set."""

    __tablename__ = "persona_activities"
    __table_args__ = (UniqueConstraint("persona", "activity"),)

    id: int | None = Field(default=None, primary_key=True)
    persona: str = Field(sa_type=String(128), index=True)
    activity: str = Field(sa_type=String(512))
    source: str = Field(default="lead", sa_type=String(16))  # logs | lead | expert
    position: int = 0
    active: bool = True
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = Field(default=None, foreign_key="users.id")


class CompletenessReview(SQLModel, table=True):
    """One expert's judgement of a persona's task set: activities captured, ones missing."""

    __tablename__ = "completeness_reviews"

    id: int | None = Field(default=None, primary_key=True)
    persona: str = Field(sa_type=String(128), index=True)
    expert_id: int = Field(foreign_key="users.id", index=True)
    captured_ids: list[int] = Field(default_factory=list, sa_type=JSON)
    missing: list[str] = Field(default_factory=list, sa_type=JSON)
    comment: str = Field(default="", sa_type=Text)
    is_current: bool = True
    submitted_at: datetime = Field(default_factory=utcnow)


class TurnNote(SQLModel, table=True):
    """An expert's flag or comment on one turn of a transcript, kept with their assignment."""

    __tablename__ = "turn_notes"

    id: int | None = Field(default=None, primary_key=True)
    assignment_id: int = Field(foreign_key="assignments.id", index=True, ondelete="CASCADE")
    transcript_id: int = Field(foreign_key="transcripts.id", index=True)
    turn: int
    flag: str | None = Field(default=None, sa_type=String(64))
    comment: str = Field(default="", sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow)


class RoundExpert(SQLModel, table=True):
    """Experts admitted to a round; a round without members is open to every expert."""

    __tablename__ = "round_experts"
    __table_args__ = (UniqueConstraint("round_id", "expert_id"),)

    id: int | None = Field(default=None, primary_key=True)
    round_id: int = Field(foreign_key="review_rounds.id", index=True, ondelete="CASCADE")
    expert_id: int = Field(foreign_key="users.id", index=True)


class RoundCoincidence(SQLModel, table=True):
    """The coincidence counts of one rubric dimension over a round's current human ratings,
    kept up to date by each submit so that the gate's alpha never rereads the round: per
    number of ratings m of a task, the integer sums of n_c (n_k - [c == k]) as {"m": {"c|k":
    n}} (exact: no rounding drift however many submits)."""

    __tablename__ = "round_coincidences"

    round_id: int = Field(foreign_key="review_rounds.id", primary_key=True, ondelete="CASCADE")
    dimension: str = Field(sa_type=String(64), primary_key=True)
    pairs: dict = Field(default_factory=dict, sa_type=JSON)
    updated_at: datetime = Field(default_factory=utcnow)


class GatePending(SQLModel, table=True):
    """A submitted human rating whose effect on the round's gate (its coincidence counts and
    its task's decision) is not applied yet: written in the submit's transaction, deleted by
    the transaction that applies it (`review.gatework`), which also chains its ledger entry
    (`entry`: the fields `ledger.service.append_entry` takes). `replaced_id`: the human
    revision it replaced, whose values leave the counts."""

    __tablename__ = "gate_pending"
    __table_args__ = (Index("ix_gate_pending_round_task", "round_id", "task_version_id"),)

    id: int | None = Field(default=None, primary_key=True)
    round_id: int = Field(foreign_key="review_rounds.id", ondelete="CASCADE")
    task_version_id: int = Field(foreign_key="task_versions.id")
    rating_id: int = Field(foreign_key="ratings.id", ondelete="CASCADE")
    replaced_id: int | None = Field(default=None, foreign_key="ratings.id", ondelete="CASCADE")
    actor_id: int | None = Field(default=None, foreign_key="users.id")
    created_at: datetime = Field(default_factory=utcnow)
    applying: bool = False  # taken by the batch being applied (never seen committed as True)
    entry: dict | None = Field(default=None, sa_type=JSON)  # its ledger entry, chained when applied
    # why the gate refuses to apply it (the rating changed since its submit committed to it);
    # a held rating stays queued, out of the gate and the ledger, and `ledger verify` names it
    held_reason: str | None = Field(default=None, sa_type=Text)


class CheckStatus(StrEnum):
    passed = "pass"
    warn = "warn"
    failed = "fail"
    error = "error"  # the check itself could not run: blocks like a failure


class MachineCheck(SQLModel, table=True):
    """The result of an external machine check of one task version (structure,
    reproducibility, verifiability, ...); the newest result per check counts."""

    __tablename__ = "machine_checks"
    __table_args__ = (Index("ix_machine_checks_version_check", "task_version_id", "check", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    task_version_id: int = Field(foreign_key="task_versions.id", index=True, ondelete="CASCADE")
    check: str = Field(sa_type=String(64))
    status: CheckStatus = Field(sa_type=String(16))
    summary: str = Field(default="", sa_type=Text)
    details: dict = Field(default_factory=dict, sa_type=JSON)
    tool: str = Field(default="", sa_type=String(128))
    ran_at: datetime | None = None
    imported_at: datetime = Field(default_factory=utcnow)
    imported_by_id: int | None = Field(default=None, foreign_key="users.id")


class ProposalStatus(StrEnum):
    proposed = "proposed"
    accepted = "accepted"
    dismissed = "dismissed"


class ResolutionProposal(SQLModel, table=True):
    """An expert's proposal of another acceptable end state of a task, for the lead to accept
    into the task's next version or to dismiss."""

    __tablename__ = "resolution_proposals"

    id: int | None = Field(default=None, primary_key=True)
    round_id: int = Field(foreign_key="review_rounds.id", index=True, ondelete="CASCADE")
    task_version_id: int = Field(foreign_key="task_versions.id", index=True)
    assignment_id: int = Field(foreign_key="assignments.id", index=True, ondelete="CASCADE")
    expert_id: int = Field(foreign_key="users.id", index=True)
    description: str = Field(sa_type=Text)
    changes: list[dict] = Field(default_factory=list, sa_type=JSON)
    status: ProposalStatus = Field(default=ProposalStatus.proposed, sa_type=String(16))
    decided_by_id: int | None = Field(default=None, foreign_key="users.id")
    decided_at: datetime | None = None
    reason: str = Field(default="", sa_type=Text)
    accepted_version_id: int | None = Field(default=None, foreign_key="task_versions.id")
    created_at: datetime = Field(default_factory=utcnow)


class TaskRepair(SQLModel, table=True):
    """One repair iteration: a new version of a task that needed revision in a round, put
    back into that round's queue in place of the version it revises."""

    __tablename__ = "task_repairs"
    __table_args__ = (UniqueConstraint("round_id", "to_version_id"),)

    id: int | None = Field(default=None, primary_key=True)
    task_id: int = Field(foreign_key="tasks.id", index=True, ondelete="CASCADE")
    round_id: int = Field(foreign_key="review_rounds.id", index=True, ondelete="CASCADE")
    from_version_id: int = Field(foreign_key="task_versions.id")
    to_version_id: int = Field(foreign_key="task_versions.id")
    iteration: int = 1
    created_at: datetime = Field(default_factory=utcnow)


class Finding(SQLModel, table=True):
    """What an expert or a lead found wrong with a task version: a category of the taxonomy
    (review.ratings.findings), a severity, the evidence it points at (transcript turns, log
    variant steps, task fields, end-state records) and, once the panel has decided, whether it
    stands."""

    __tablename__ = "findings"

    id: int | None = Field(default=None, primary_key=True)
    task_version_id: int = Field(foreign_key="task_versions.id", index=True, ondelete="CASCADE")
    author_id: int = Field(foreign_key="users.id", index=True)
    category: str = Field(sa_type=String(64), index=True)
    severity: str = Field(sa_type=String(16))
    description: str = Field(sa_type=Text)
    anchors: list[dict] = Field(default_factory=list, sa_type=JSON)
    state: str = Field(default="open", sa_type=String(16), index=True)
    decided_by_id: int | None = Field(default=None, foreign_key="users.id")
    decided_at: datetime | None = None
    decision_reason: str = Field(default="", sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow)
    # the later version of the task that fixes it, when one does (the fix trail)
    fixed_in_version_id: int | None = Field(
        default=None, foreign_key="task_versions.id", ondelete="SET NULL"
    )


class FindingVote(SQLModel, table=True):
    """An expert's vote on whether someone else's finding stands; enough agreeing votes
    settle it (review.ratings.findings.PANEL_QUORUM)."""

    __tablename__ = "finding_votes"
    __table_args__ = (UniqueConstraint("finding_id", "expert_id"),)

    id: int | None = Field(default=None, primary_key=True)
    finding_id: int = Field(foreign_key="findings.id", index=True, ondelete="CASCADE")
    expert_id: int = Field(foreign_key="users.id")
    stands: bool
    reason: str = Field(default="", sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow)


class DelphiRound(SQLModel, table=True):
    """A review round run as a Delphi consensus: phase 1 is blind rating as usual; each later
    phase reveals the panel's anonymous answers and lets every expert revise theirs, until
    the stop rule set in advance holds."""

    __tablename__ = "delphi_rounds"

    round_id: int = Field(foreign_key="review_rounds.id", primary_key=True, ondelete="CASCADE")
    phase: int = 1
    stage: str = Field(default="rating", sa_type=String(16))  # rating, revising, closed
    iqr_max: float = 1.0
    w_min: float | None = None
    max_phases: int = 3
    started_at: datetime = Field(default_factory=utcnow)
    # whether delphi_spreads holds every answered task item (rounds from before migration
    # 0029 have none until their next phase change or revision builds them)
    spreads_built: bool = Field(default=False, sa_column_kwargs={"server_default": "0"})


class DelphiPseudonym(SQLModel, table=True):
    """How an expert appears to the rest of a Delphi round's panel ("Panelist 3")."""

    __tablename__ = "delphi_pseudonyms"
    __table_args__ = (
        UniqueConstraint("round_id", "expert_id"),
        UniqueConstraint("round_id", "pseudonym"),
    )

    id: int | None = Field(default=None, primary_key=True)
    round_id: int = Field(foreign_key="review_rounds.id", index=True, ondelete="CASCADE")
    expert_id: int = Field(foreign_key="users.id")
    pseudonym: str = Field(sa_type=String(32))


class DelphiAnswer(SQLModel, table=True):
    """An expert's answer on one rubric item of one task in a revision phase of a Delphi
    round, kept or changed (a change gives a reason). Phase 1's answers are the round's
    submitted blind ratings, frozen once phase 1 ends (rounds from before migration 0029 hold
    a copy of them here as phase 1); an expert who does not revise a task in a phase keeps
    their answers of the phase before."""

    __tablename__ = "delphi_answers"
    __table_args__ = (
        UniqueConstraint("round_id", "task_version_id", "expert_id", "phase", "item"),
        Index("ix_delphi_answers_round_phase_expert", "round_id", "phase", "expert_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    round_id: int = Field(foreign_key="review_rounds.id", ondelete="CASCADE")
    task_version_id: int = Field(foreign_key="task_versions.id")
    expert_id: int = Field(foreign_key="users.id")
    phase: int
    item: str = Field(sa_type=String(64))
    score: float
    changed: bool = False
    reason: str = Field(default="", sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow)


class DelphiSpread(SQLModel, table=True):
    """The interquartile range of the panel's latest answers on one item of one task of a
    Delphi round, kept current by the gate's work in phase 1 and by each revision after: a
    phase change counts the items beyond the stop rule's limit instead of reading every
    answer."""

    __tablename__ = "delphi_spreads"

    round_id: int = Field(foreign_key="review_rounds.id", primary_key=True, ondelete="CASCADE")
    task_version_id: int = Field(foreign_key="task_versions.id", primary_key=True)
    item: str = Field(sa_type=String(64), primary_key=True)
    iqr: float
