"""The repair loop: a task that needs revision goes back to its author with the reasons
(feedback export), and its next version re-enters the round's queue by itself, each
re-entry counted as one repair iteration. Also: experts' proposals of other acceptable
resolutions, which a lead accepts into the task's next version or dismisses."""

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries as catalog_queries
from itsmreview.catalog.importing import FileImport
from itsmreview.catalog.importing import import_path as catalog_import_path
from itsmreview.catalog.models import Task, TaskStatus, TaskVersion
from itsmreview.catalog.native import NativeTask
from itsmreview.catalog.service import import_tasks, version_to_native
from itsmreview.catalog.state import RecordChange
from itsmreview.db import utcnow
from itsmreview.errors import Conflict, InvalidInput, NotFound
from itsmreview.files import jsonl_and_markdown, write_text_atomically
from itsmreview.ledger.chain import content_digest
from itsmreview.ledger.service import append_entry
from itsmreview.review.gate.approval import TaskRatings, decide
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.gate.round_data import find_round
from itsmreview.review.gate.service import gate_config, gating_alphas
from itsmreview.review.models import (
    ProposalStatus,
    ResolutionProposal,
    ReviewRound,
    RoundStatus,
    RoundTask,
    Rubric,
    TaskRepair,
)
from itsmreview.review.ratings import queries as ratings_queries
from itsmreview.review.repair import queries
from itsmreview.review.rounds.service import own_assignment
from itsmreview.review.rubrics.service import RubricDefinition
from pydantic import ValidationError
from sqlmodel import Session


def _enter_round(
    session: Session,
    *,
    task: Task,
    version: TaskVersion,
    review_round: ReviewRound,
    priority: float,
    actor_id: int | None,
    payload: dict,
) -> None:
    """`version` joins `review_round` at `priority`, in review if it was a draft, and the
    ledger records the requeue with `payload` (why it joined)."""
    session.add(RoundTask(round_id=review_round.id, task_version_id=version.id, priority=priority))
    if version.status == TaskStatus.draft:
        version.status = TaskStatus.in_review
        task.status = TaskStatus.in_review
        task.updated_at = utcnow()
    session.flush()
    append_entry(
        session=session,
        artifact_type="task",
        artifact_id=f"{task.external_id}@v{version.version}",
        action="requeue",
        source_kind="system",
        actor_id=actor_id,
        reference=f"round {review_round.name}",
        payload=payload,
    )


def requeue_revisions(
    *, session: Session, external_ids: Sequence[str], actor_id: int | None = None
) -> list[str]:
    """Put the newest version of each of these tasks into every open round where an older
    version of it needs revision, in that version's place in the priority order: one repair
    iteration each. Returns "task@vN -> round" for each re-entry."""
    done = []
    waiting = queries.tasks_needing_revision_in_open_rounds(session=session)
    for external_id in [e for e in external_ids if e in waiting]:  # usually few of an import
        task = catalog_queries.task_by_external_id(session=session, external_id=external_id)
        if task is None:
            continue
        newest = catalog_queries.latest_version(session=session, task_id=task.id)
        for old_id, round_id, priority in queries.revisions_of_task(
            session=session, task_id=task.id, before_version=newest.version
        ):
            review_round = session.get(ReviewRound, round_id)
            if review_round.status != RoundStatus.open or queries.round_task_row(
                session=session, round_id=round_id, task_version_id=newest.id
            ):
                continue
            iteration = len(queries.repairs_of_task(session=session, task_id=task.id)) + 1
            session.add(
                TaskRepair(
                    task_id=task.id,
                    round_id=round_id,
                    from_version_id=old_id,
                    to_version_id=newest.id,
                    iteration=iteration,
                )
            )
            _enter_round(
                session,
                task=task,
                version=newest,
                review_round=review_round,
                priority=priority,
                actor_id=actor_id,
                payload={"repair_iteration": iteration, "revises_task_version_id": old_id},
            )
            done.append(f"{task.external_id}@v{newest.version} -> {review_round.name}")
    return done


def repair_iterations(*, session: Session, actor: User, task_ids: Sequence[int]) -> dict[int, int]:
    """task id -> repair iterations of these tasks (the Tasks page, `tasks list`). Leads."""
    require_role(actor, Role.lead)
    return queries.repair_counts(session=session, task_ids=task_ids)


def import_path(path: Path | str, *, session: Session, dry_run: bool = False, **options):
    """Import a task file (catalog.importing.import_path), then put each revised task's new
    version back into the rounds where its last version needs revision."""
    found: FileImport = catalog_import_path(path, session=session, dry_run=dry_run, **options)
    if not dry_run:
        found.requeued = requeue_revisions(
            session=session,
            external_ids=found.report.new_versions,
            actor_id=options.get("actor_id"),
        )
    return found


def import_as(path: Path | str, *, session: Session, actor, dry_run: bool = False, **options):
    """`import_path` on behalf of a lead or admin (the Imports page). Raises PermissionDenied."""
    require_role(actor, Role.lead)
    return import_path(path, session=session, actor_id=actor.id, dry_run=dry_run, **options)


# --- feedback to the task's author -------------------------------------------------------


def _failing_criteria(scores: dict[str, list[float]], rubric: RubricDefinition, config) -> list:
    out = []
    for dimension in rubric.dimensions:
        values = scores.get(dimension.key)
        if not values:
            continue
        middle = median(values)
        if rubric.scoring is not None:
            worst = min(values)
            if worst < max(rubric.scoring.credit):  # any rater below Pass
                out.append(
                    {
                        "criterion": dimension.key,
                        "label": dimension.label,
                        "ratings": [rubric.choice_label(dimension.key, int(v)) for v in values],
                    }
                )
        elif dimension.key in config.gating_dimensions and middle < config.dimension_min:
            out.append(
                {
                    "criterion": dimension.key,
                    "label": dimension.label,
                    "median": middle,
                    "needed": config.dimension_min,
                    "ratings": sorted(values),
                }
            )
    return out


def _ratings_by_task(session: Session, round_id: int, ids: list[int]) -> dict[int, dict]:
    """Each version's current ratings for feedback: scores by dimension, verdicts, flags and
    the comments (without who wrote them)."""
    ratings, scores = queries.feedback_ratings(
        session=session, round_id=round_id, task_version_ids=ids
    )
    by_rating: dict[int, dict[str, float]] = {}
    for rating_id, dimension, value in scores:
        if value is not None:
            by_rating.setdefault(rating_id, {})[dimension] = float(value)
    per_task: dict[int, dict] = {
        v: {"scores": {}, "comments": [], "verdicts": [], "flags": []} for v in ids
    }
    for rating_id, version_id, verdict, flags, comment in ratings:
        entry = per_task[version_id]
        for dimension, value in by_rating.get(rating_id, {}).items():
            entry["scores"].setdefault(dimension, []).append(value)
        entry["verdicts"].append(str(verdict) if verdict else None)
        entry["flags"].append(sorted(flags or []))
        if comment and comment.strip():
            entry["comments"].append({"comment": comment.strip(), "flags": sorted(flags or [])})
    return per_task


def _notes_checks_and_proposals(session: Session, round_id: int, ids: list[int]) -> tuple:
    """The versions' turn notes and failed machine checks (by version id) and the round's
    proposed resolutions (by task and version)."""
    notes: dict[int, list] = {}
    for version_id, transcript, turn, flag, comment in queries.feedback_turn_notes(
        session=session, round_id=round_id, task_version_ids=ids
    ):
        notes.setdefault(version_id, []).append(
            {"transcript": transcript, "turn": turn, "flag": flag, "comment": comment}
        )
    failing_checks: dict[int, list[dict]] = {}
    for check in queries.checks_of_versions(session=session, task_version_ids=ids):
        if check.status in gate_queries.FAILING_CHECK:
            failing_checks.setdefault(check.task_version_id, []).append(
                {"check": check.check, "status": check.status, "summary": check.summary}
            )
    proposed: dict[tuple[str, int], list[dict]] = {}
    for p in queries.proposals_frame(session=session, round_id=round_id).itertuples():
        proposed.setdefault((p.task, int(p.version)), []).append(
            {"description": p.description, "status": p.status, "changes": p.changes}
        )
    return notes, failing_checks, proposed


def feedback(*, session: Session, actor: User, round_name: str | int) -> list[dict]:
    """Per task version of the round that needs revision, what its author needs to fix it:
    the gate's reasons, the failing criteria with their ratings, the experts' comments and
    turn notes (without their names), failed machine checks, proposed alternative
    resolutions and the repair iterations so far. Leads only."""
    require_role(actor, Role.lead)
    review_round = find_round(session, round_name)
    rubric = RubricDefinition.model_validate(session.get(Rubric, review_round.rubric_id).definition)
    config = gate_config(review_round, rubric)
    rows = gate_queries.round_task_statuses(
        session=session, round_id=review_round.id, status="needs_revision"
    )
    ids = [int(v) for v in rows["task_version_id"]]
    per_task = _ratings_by_task(session, review_round.id, ids)
    notes, failing_checks, proposed = _notes_checks_and_proposals(session, review_round.id, ids)
    alphas = gating_alphas(session=session, review_round=review_round, rubric=rubric)
    adjudicated = gate_queries.adjudications_of_round(session=session, round_id=review_round.id)
    repairs = queries.repair_counts(session=session, task_ids=[int(t) for t in rows["task_id"]])
    out = []
    for row in rows.itertuples():
        version_id = int(row.task_version_id)
        entry = per_task[version_id]
        failed = failing_checks.get(version_id, [])
        reasons = decide(
            TaskRatings(entry["scores"], [v for v in entry["verdicts"] if v], entry["flags"]),
            config,
            alphas,
            adjudicated.get(version_id),
            [c["check"] for c in failed],
        ).reasons
        out.append(
            {
                "task": row.external_id,
                "title": row.title,
                "version": int(row.version),
                "round": review_round.name,
                "reasons": reasons,
                "failing_criteria": _failing_criteria(entry["scores"], rubric, config),
                "verdicts": entry["verdicts"],
                "comments": entry["comments"],
                "turn_notes": notes.get(version_id, []),
                "failed_checks": failed,
                "proposed_resolutions": proposed.get((row.external_id, int(row.version)), []),
                "repair_iterations": repairs.get(int(row.task_id), 0),
            }
        )
    return out


_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>()#+!|~-])")


def _md(text) -> str:
    """Text from experts and authors shown as written: no markup, no HTML, one line."""
    return _MARKDOWN.sub(r"\\\1", " ".join(str(text).split()))


def feedback_markdown(items: list[dict]) -> str:
    lines = ["# Tasks that need revision", ""]
    if not items:
        lines.append("No task of the round needs revision.")
    for item in items:
        lines += [f"## {_md(item['task'])} v{item['version']}: {_md(item['title'])}", ""]
        lines += [
            f"Round {_md(item['round'])}; repair iterations so far: {item['repair_iterations']}."
        ]
        lines += [""] + [f"- {_md(reason)}" for reason in item["reasons"]]
        if item["failing_criteria"]:
            lines += ["", "**Failing criteria**", ""]
            for c in item["failing_criteria"]:
                middle = (
                    f" (median {c['median']:g}, needs {c['needed']:g})" if "median" in c else ""
                )
                given = ", ".join(str(v) for v in c["ratings"])
                lines.append(f"- {_md(c['label'])}{middle}: {_md(given)}")
        if item["failed_checks"]:
            lines += ["", "**Failed machine checks**", ""]
            for c in item["failed_checks"]:
                lines.append(f"- {_md(c['check'])} ({c['status']}): {_md(c['summary'])}")
        if item["comments"]:
            lines += ["", "**Comments**", ""]
            for c in item["comments"]:
                flags = f" ({_md(', '.join(c['flags']))})" if c["flags"] else ""
                lines.append(f"- {_md(c['comment'])}{flags}")
        if item["turn_notes"]:
            lines += ["", "**Turn notes**", ""]
            for n in item["turn_notes"]:
                flag = f" ({_md(n['flag'])})" if n["flag"] else ""
                lines.append(
                    f"- {_md(n['transcript'])}, turn {n['turn']}{flag}: {_md(n['comment'])}"
                )
        if item["proposed_resolutions"]:
            lines += ["", "**Other acceptable resolutions proposed**", ""]
            for p in item["proposed_resolutions"]:
                lines.append(f"- {p['status']}: {_md(p['description'])}")
        lines.append("")
    return "\n".join(lines)


def write_feedback(items: list[dict], out: Path | str) -> tuple[Path, Path]:
    """OUT.jsonl (one task a line) and OUT.md, each whole or not at all."""
    try:
        jsonl, markdown = jsonl_and_markdown(out)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    write_text_atomically(
        jsonl, "".join(json.dumps(i, ensure_ascii=False, default=str) + "\n" for i in items)
    )
    write_text_atomically(markdown, feedback_markdown(items))
    return jsonl, markdown


# --- other acceptable resolutions --------------------------------------------------------

MAX_PROPOSAL = 5000


def propose_resolution(
    *,
    session: Session,
    actor: User,
    assignment_id: int,
    description: str,
    changes: Sequence[dict] = (),
) -> ResolutionProposal:
    """An expert proposes another acceptable end state of the task they rate."""
    require_role(actor, Role.expert)
    assignment = own_assignment(session=session, actor=actor, assignment_id=assignment_id)
    text = (description or "").strip()
    if not text:
        raise InvalidInput("describe the other acceptable end state")
    if len(text) > MAX_PROPOSAL:
        raise InvalidInput(f"keep the description under {MAX_PROPOSAL:,} characters")
    try:
        parsed = [RecordChange.model_validate(c).model_dump(mode="json") for c in changes]
    except ValidationError as exc:
        raise InvalidInput(f"record change: {exc.errors()[0]['msg']}") from None
    proposal = ResolutionProposal(
        round_id=assignment.round_id,
        task_version_id=assignment.task_version_id,
        assignment_id=assignment.id,
        expert_id=actor.id,
        description=text,
        changes=parsed,
    )
    session.add(proposal)
    session.flush()
    return proposal


def _carry_review(
    session: Session,
    task: Task,
    before: TaskVersion,
    accepted: TaskVersion,
    proposal: ResolutionProposal,
    actor_id: int,
) -> None:
    """The version made by accepting a proposal carries on the review of the version it
    follows: it joins each open round that holds that version (in its place in the priority
    order), in review, instead of falling back to a draft outside every round while its task
    still waits for a decision. Rounds where the version needs revision took it already
    (`requeue_revisions`, a repair iteration); a version never in a round stays a draft."""
    if before.status == TaskStatus.draft:
        return
    for round_id in ratings_queries.open_rounds_of_versions(
        session=session, task_version_ids=[before.id]
    ):
        place = queries.round_task_row(
            session=session, round_id=round_id, task_version_id=before.id
        )
        if place is None or queries.round_task_row(
            session=session, round_id=round_id, task_version_id=accepted.id
        ):
            continue
        _enter_round(
            session,
            task=task,
            version=accepted,
            review_round=session.get(ReviewRound, round_id),
            priority=place.priority,
            actor_id=actor_id,
            payload={"accepted_proposal": proposal.id, "follows_task_version_id": before.id},
        )


def _undecided_proposal(session: Session, proposal_id: int) -> ResolutionProposal:
    """The proposal, still waiting for a lead. Raises NotFound or Conflict."""
    proposal = session.get(ResolutionProposal, proposal_id)
    if proposal is None:
        raise NotFound(f"no proposal {proposal_id}")
    if proposal.status != ProposalStatus.proposed:
        raise Conflict(f"proposal {proposal_id} is {proposal.status} already")
    return proposal


@dataclass(frozen=True)
class AcceptanceOutcome:
    """What accepting a proposal does: the task's next version (`new_version`, following its
    newest, `version`) and the open rounds that version joins in review, to be rated there
    (none: it is a draft outside every round until a round is opened over it)."""

    task: str
    version: int
    new_version: int
    rounds: list[str]


def acceptance_outcome(*, session: Session, actor: User, proposal_id: int) -> AcceptanceOutcome:
    """What `decide_proposal(..., accept=True)` would do, told before it is done: the rounds
    are those `requeue_revisions` and `_carry_review` put the new version into. Leads only.
    Raises NotFound or Conflict (decided already)."""
    require_role(actor, Role.lead)
    proposal = _undecided_proposal(session, proposal_id)
    task = session.get(Task, session.get(TaskVersion, proposal.task_version_id).task_id)
    newest = catalog_queries.latest_version(session=session, task_id=task.id)
    joined = {
        round_id
        for _, round_id, _ in queries.revisions_of_task(
            session=session, task_id=task.id, before_version=newest.version + 1
        )
    }
    if newest.status != TaskStatus.draft:
        joined |= set(
            ratings_queries.open_rounds_of_versions(session=session, task_version_ids=[newest.id])
        )
    rounds = [session.get(ReviewRound, round_id) for round_id in joined]
    return AcceptanceOutcome(
        task=task.external_id,
        version=newest.version,
        new_version=newest.version + 1,
        rounds=sorted(r.name for r in rounds if r.status == RoundStatus.open),
    )


def decide_proposal(
    *, session: Session, actor: User, proposal_id: int, accept: bool, reason: str = ""
) -> ResolutionProposal:
    """A lead accepts a proposal, which makes the task's next version with it among the
    task's alternatives, or dismisses it. The new version takes the place of the task's
    newest version in its open rounds (a repair iteration where that one needs revision),
    in review: an acceptance never turns a task under review into a draft."""
    require_role(actor, Role.lead)
    proposal = _undecided_proposal(session, proposal_id)
    proposal.status = ProposalStatus.accepted if accept else ProposalStatus.dismissed
    proposal.decided_by_id = actor.id
    proposal.decided_at = utcnow()
    proposal.reason = reason.strip()
    version = session.get(TaskVersion, proposal.task_version_id)
    task = session.get(Task, version.task_id)
    if accept:
        newest = catalog_queries.latest_version(session=session, task_id=task.id)
        native = version_to_native(
            task, newest, catalog_queries.transcripts_of(session=session, task_version_id=newest.id)
        )
        alternatives = list(native.get("alternatives") or [])
        alternatives.append(
            {
                "id": f"proposal-{proposal.id}",
                "description": proposal.description,
                "changes": proposal.changes,
                "source": "expert",
            }
        )
        native["alternatives"] = alternatives
        native["provenance"] = [
            *native.get("provenance", []),
            {
                "field": "alternatives",
                "source": "expert",
                "reference": f"proposal {proposal.id}, accepted by {actor.username}",
            },
        ]
        import_tasks(
            [NativeTask.model_validate(native)],
            session=session,
            source_format=newest.source_format,
            actor_id=actor.id,
        )
        accepted = catalog_queries.latest_version(session=session, task_id=task.id)
        proposal.accepted_version_id = accepted.id
        requeue_revisions(session=session, external_ids=[task.external_id], actor_id=actor.id)
        if accepted.id != newest.id:
            _carry_review(session, task, newest, accepted, proposal, actor.id)
    session.flush()
    append_entry(
        session=session,
        artifact_type="resolution_proposal",
        artifact_id=str(proposal.id),
        action=str(proposal.status),
        source_kind="expert",
        actor_id=actor.id,
        reference=f"{task.external_id}@v{version.version}",
        payload={
            "content_sha256": content_digest(
                {"description": proposal.description, "changes": proposal.changes}
            ),
            "reason": proposal.reason,
        },
    )
    return proposal


def proposals_frame(*, session: Session, round_id: int | None = None, status: str | None = None):
    """Proposed resolutions (of one round, of one status, or all) with their task, version,
    expert and description, as a DataFrame."""
    return queries.proposals_frame(session=session, round_id=round_id, status=status)
