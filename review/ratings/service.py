"""An expert's ratings: submit and revise (queued for the gate), drafts, turn notes."""

from collections.abc import Mapping, Sequence

from itsmreview.accounts import acting
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.models import Transcript
from itsmreview.db import utcnow
from itsmreview.errors import Conflict, InvalidInput
from itsmreview.ledger.service import chain_at_commit
from itsmreview.review.commitments import rating_digest
from itsmreview.review.gate import work as gatework
from itsmreview.review.gate.queries import spreads as spread_queries
from itsmreview.review.models import (
    Assignment,
    AssignmentStatus,
    Rating,
    RatingScore,
    RatingStatus,
    ReviewRound,
    RoundStatus,
    TurnNote,
    Verdict,
)
from itsmreview.review.ratings import queries
from itsmreview.review.rounds import queries as rounds_queries
from itsmreview.review.rounds.assignment import places_taken_now
from itsmreview.review.rounds.service import check_own, own_assignment
from itsmreview.review.rubrics.service import RubricDefinition, definition_by_id
from itsmreview.review.scorevector import pack
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session


def _validate(
    definition: RubricDefinition,
    scores: Mapping[str, float | None],
    verdict: Verdict | str,
    flags: Sequence[str],
    *,
    has_source_variant: bool = True,
) -> None:
    """Raise InvalidInput naming the first score, verdict or flag the rubric does not allow;
    a dimension that does not apply to the task is never required."""
    unknown = sorted(set(scores) - {d.key for d in definition.dimensions})
    if unknown:
        raise InvalidInput(f"unknown rubric dimension(s): {', '.join(unknown)}")
    for dimension in definition.dimensions:
        value = scores.get(dimension.key)
        if not dimension.applies(has_source_variant=has_source_variant):
            continue  # whatever was sent, it is stored empty (`applicable_scores`)
        if value is None:
            if dimension.required:
                raise InvalidInput(f"dimension {dimension.label!r} is required")
            continue
        low, high = dimension.scale
        if not low <= value <= high:
            raise InvalidInput(
                f"dimension {dimension.label!r}: {value} is outside the scale {low}..{high}"
            )
    if str(verdict) not in definition.verdicts:
        raise InvalidInput(f"verdict {verdict!r} is not one of {', '.join(definition.verdicts)}")
    unknown_flags = sorted(set(flags) - {f.key for f in definition.flags})
    if unknown_flags:
        raise InvalidInput(f"unknown flag(s): {', '.join(unknown_flags)}")


def not_applicable_marks(
    definition: RubricDefinition,
    scores: Mapping[str, float | None],
    marks: Mapping[str, str] | None,
) -> dict[str, str]:
    """The expert's marks of optional dimensions as not applying to the task, {dimension:
    reason} with each reason trimmed. Raises InvalidInput for a dimension the rubric lacks, a
    required one (it must be scored), one that also has a score, or an empty reason."""
    known = {d.key: d for d in definition.dimensions}
    unknown = sorted(set(marks or {}) - set(known))
    if unknown:
        raise InvalidInput(
            f"unknown rubric dimension(s) marked not applicable: {', '.join(unknown)}"
        )
    kept = {}
    for key, reason in sorted((marks or {}).items()):
        label = known[key].label
        if known[key].required:
            raise InvalidInput(
                f"dimension {label!r} is required: it cannot be marked not applicable; score it"
            )
        if scores.get(key) is not None:
            raise InvalidInput(
                f"dimension {label!r} has a score and is marked not applicable: "
                "keep the score or the mark, not both"
            )
        if not (reason or "").strip():
            raise InvalidInput(
                f"dimension {label!r} is marked not applicable without a reason: "
                "say why it does not apply to this task"
            )
        kept[key] = reason.strip()
    return kept


def applicable_scores(
    definition: RubricDefinition,
    scores: Mapping[str, float | None],
    *,
    has_source_variant: bool,
) -> dict[str, float | None]:
    """The scores with every dimension that does not apply to the task emptied: a value
    there would be an answer to a question the task cannot raise (it stays missing in alpha,
    the gate and exports)."""
    empty = {
        d.key for d in definition.dimensions if not d.applies(has_source_variant=has_source_variant)
    }
    return {key: None if key in empty else value for key, value in scores.items()}


def _resumes(session: Session, assignment: Assignment, review_round: ReviewRound, now) -> bool:
    """Whether the submit takes its place back (its reservation lapsed or was released);
    raises Conflict when the task has its k experts meanwhile."""
    lapsed = (
        assignment.status == AssignmentStatus.reserved
        and assignment.reserved_until is not None
        and assignment.reserved_until <= now
    )
    resumed = lapsed or assignment.status == AssignmentStatus.released
    if resumed:
        taken = places_taken_now(
            session=session,
            round_id=review_round.id,
            task_version_id=assignment.task_version_id,
            now=now,
        )
        if taken >= review_round.k:
            raise Conflict(
                "your reservation lapsed and the task now has its "
                f"{review_round.k} experts; take the next task in your queue"
            )
    return resumed


def _replace_earlier(session: Session, rows: list) -> tuple | None:
    """Delete the assignment's draft and make its submitted rating not current (`rows`: the
    submit's context); returns the submitted rating's row, None on a first submit."""
    draft = next((r for r in rows if r[4] == RatingStatus.draft), None)
    previous = next((r for r in rows if r[4] == RatingStatus.submitted), None)
    if draft is not None:
        queries.delete_rating(session=session, rating_id=draft[3])
        held = session.identity_map.get(session.identity_key(Rating, draft[3]))
        if held is not None:  # gone from the database: gone from the session too
            session.expunge(held)
    if previous is not None:
        queries.set_rating_not_current(session=session, rating_id=previous[3])
        _keep_in_step(session, Rating, previous[3], is_current=False)
    return previous


def _submit_entry(
    actor: User, review_round: ReviewRound, rating: Rating, scores, first: bool
) -> dict:
    """The rating's ledger entry; its artifact id, the rating's id, is filled in when it is
    chained."""
    return {
        "artifact_type": "rating",
        "action": "submit" if first else "revise",
        "source_kind": "expert",
        "actor_id": actor.id,
        "payload": {
            "task_version_id": rating.task_version_id,
            "round": review_round.name,
            "revision": rating.revision,
            "content_sha256": rating_digest(rating, scores),
        },
    }


def _rating_of(assignment: Assignment, rubric_id: int, **fields) -> Rating:
    """A rating of the assignment's expert, round and task version (not yet stored)."""
    return Rating(
        assignment_id=assignment.id,
        round_id=assignment.round_id,
        task_version_id=assignment.task_version_id,
        expert_id=assignment.expert_id,
        rubric_id=rubric_id,
        **fields,
    )


def submit_rating(
    *,
    session: Session,
    actor: User,
    assignment_id: int,
    scores: Mapping[str, float | None],
    verdict: Verdict | str,
    flags: Sequence[str] = (),
    comment: str = "",
    confidence: int | None = None,
    not_applicable: Mapping[str, str] | None = None,
    recompute: bool = True,
) -> Rating:
    """Submit the expert's rating of an assignment; a second submit makes a new revision.
    `not_applicable`: {dimension: reason} of optional dimensions left unscored as not
    applying to the task (`not_applicable_marks`).
    The rating is queued with its ledger entry for the approval gate (`gate.work`): applied
    in this transaction with the `inline` setting (unless `recompute` is False: the caller
    applies the queue), otherwise by the gate worker once this transaction commits.

    One read (the assignment, locked, its round, rubric and ratings) and a few writes: no
    lock but the assignment's is held, unless the reservation had lapsed (its task's)."""
    require_role(actor, Role.expert)
    chain_at_commit(session)  # the ledger's lock for the commit only
    rows = queries.submit_context(session=session, assignment_id=assignment_id)
    assignment, review_round, rubric_hash = rows[0][:3] if rows else (None, None, None)
    check_own(assignment, actor, assignment_id)
    acting.share_locked(session, acting.ActingRow(*rows[0][7:12]))  # its expert's row
    if review_round.status != RoundStatus.open:
        raise Conflict(f"round {review_round.name!r} is closed")
    if rows[0][12] is not None:  # a Delphi round: its blind phase may have ended meanwhile
        _still_blind(session, review_round)
    definition = definition_by_id(
        session=session, rubric_id=review_round.rubric_id, content_hash=rubric_hash
    )
    has_variant = not definition.conditional or queries.declares_variant(
        session=session, task_version_id=assignment.task_version_id
    )
    marks = not_applicable_marks(definition, scores, not_applicable)
    _validate(definition, scores, verdict, flags, has_source_variant=has_variant)
    scores = applicable_scores(definition, scores, has_source_variant=has_variant)
    scores.update(dict.fromkeys(marks))  # stored empty, like a dimension that does not apply
    now = utcnow()
    resumed = _resumes(session, assignment, review_round, now)
    previous = _replace_earlier(session, rows)
    rating = _rating_of(
        assignment,
        review_round.rubric_id,
        revision=previous[5] + 1 if previous is not None else 1,
        is_current=True,
        status=RatingStatus.submitted,
        verdict=Verdict(verdict),
        flags=sorted(flags),
        comment=comment,
        confidence=confidence,
        rater_kind="human",
        created_at=now,
        submitted_at=now,
        score_vector=pack([d.key for d in definition.dimensions], scores),
        not_applicable=marks or None,
    )
    replaced_id = previous[3] if previous is not None and previous[6] == "human" else None
    entry = _submit_entry(actor, review_round, rating, scores, first=previous is None)
    wake = gatework.queued_wake()
    rating.id = queries.write_submitted_rating(
        session=session,
        values=rating.model_dump(exclude={"id"}),
        scores=scores,
        replaced_id=replaced_id,
        actor_id=actor.id,
        entry=entry,
        wake=wake,
    )
    _keep_in_step(
        session, Assignment, assignment.id, status=AssignmentStatus.submitted, submitted_at=now
    )
    if resumed:
        rounds_queries.recount_places(
            session=session, round_id=review_round.id, task_version_ids=[assignment.task_version_id]
        )
    gatework.rating_queued(
        session=session,
        review_round=review_round,
        task_version_id=assignment.task_version_id,
        apply=recompute,
        woken=wake is not None,
    )
    return rating


def _still_blind(session: Session, review_round: ReviewRound) -> None:
    """Refuse a rating once the Delphi round's blind phase has ended: its ratings are phase
    1's answers, the panel has seen them; answers change on the Consensus page now."""
    if spread_queries.blind_phase_over(session=session, round_id=review_round.id):
        raise Conflict(
            f"round {review_round.name!r} is a Delphi round past its blind phase: ratings "
            "are closed; revise your answers on the Consensus page"
        )


def _keep_in_step(session: Session, model, ident: int, **values) -> None:
    """A row this session holds as an object, changed by a statement: its object says the
    same (as loaded, so the session does not write it again)."""
    held = session.identity_map.get(session.identity_key(model, ident))
    for name, value in values.items() if held is not None else ():
        set_committed_value(held, name, value)


DRAFT_REVISION = 0


def save_draft(
    *,
    session: Session,
    actor: User,
    assignment_id: int,
    scores: Mapping[str, float | None],
    verdict: str | None = None,
    flags: Sequence[str] = (),
    comment: str = "",
    confidence: int | None = None,
    not_applicable: Mapping[str, str] | None = None,
) -> Rating:
    """Keep the expert's unfinished answers (one draft per assignment, never counted in
    agreement, never shown to anyone else), the marks of dimensions that do not apply with
    their reasons as typed so far. Nothing is validated until submit."""
    require_role(actor, Role.expert)
    assignment = own_assignment(session=session, actor=actor, assignment_id=assignment_id)
    draft = queries.draft_of(session=session, assignment_id=assignment.id)
    review_round = session.get(ReviewRound, assignment.round_id)
    if draft is None:
        draft = _rating_of(
            assignment,
            review_round.rubric_id,
            revision=DRAFT_REVISION,
            is_current=False,
            status=RatingStatus.draft,
        )
        session.add(draft)
        session.flush()
    draft.verdict = Verdict(verdict) if verdict else None
    draft.flags = sorted(flags)
    draft.comment = comment
    draft.confidence = confidence
    draft.not_applicable = dict(not_applicable) if not_applicable else None
    draft.created_at = utcnow()
    for row in queries.score_rows(session=session, rating_id=draft.id):
        session.delete(row)
    session.flush()
    for key, value in scores.items():
        if value is not None:
            session.add(RatingScore(rating_id=draft.id, dimension=key, value=float(value)))
    session.flush()
    return draft


def add_turn_note(
    *,
    session: Session,
    actor: User,
    assignment_id: int,
    transcript_id: int,
    turn: int,
    flag: str | None = None,
    comment: str = "",
) -> TurnNote:
    """An expert's flag or comment on one turn of a transcript of their assignment."""
    require_role(actor, Role.expert)
    assignment = own_assignment(session=session, actor=actor, assignment_id=assignment_id)
    transcript = session.get(Transcript, transcript_id)
    if transcript is None or transcript.task_version_id != assignment.task_version_id:
        raise InvalidInput(f"transcript {transcript_id} does not belong to this task")
    if not 1 <= turn <= transcript.n_turns:
        raise InvalidInput(f"turn {turn} is outside 1..{transcript.n_turns}")
    if not flag and not comment.strip():
        raise InvalidInput("give a flag or a comment")
    note = TurnNote(
        assignment_id=assignment.id,
        transcript_id=transcript.id,
        turn=turn,
        flag=flag or None,
        comment=comment.strip(),
    )
    session.add(note)
    session.flush()
    return note
