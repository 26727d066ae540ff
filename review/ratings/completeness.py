"""Persona completeness: does the task set capture all the work activities of a job persona?

Leads keep each persona's list of work activities (seeded from the log's activities); experts
mark which ones the persona's tasks capture and name missing ones; the report gives, per
persona, the share of activities that most reviewing experts find captured, and what is
missing."""

from dataclasses import dataclass

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.coverage import queries as coverage_queries
from itsmreview.db import utcnow
from itsmreview.errors import InvalidInput, NotFound
from itsmreview.ledger.service import append_entry
from itsmreview.review.models import CompletenessReview, PersonaActivity
from itsmreview.review.ratings import queries
from sqlmodel import Session


def activities_of(session: Session, persona: str) -> list[PersonaActivity]:
    return queries.persona_activities(session=session, persona=persona)


def personas(*, session: Session) -> list[str]:
    return sorted(queries.persona_names(session=session))


def add_activities(
    *,
    session: Session,
    actor: User,
    persona: str,
    activities: list[str],
    source: str = "lead",
    log_name: str | None = None,
) -> int:
    """Add work activities to a persona's list (and, with `log_name`, every activity of that
    log); existing ones are kept. Returns how many were added. Leads only."""
    require_role(actor, Role.lead)
    names = [(a.strip(), source) for a in activities if a.strip()]
    if log_name:
        log = coverage_queries.latest_log(session=session, name=log_name)
        if log is None:
            raise NotFound(f"no log named {log_name!r}")
        names += [
            (n, "logs")
            for n in coverage_queries.activities_frame(session=session, log_id=log.id)["name"]
        ]
    if not persona.strip():
        raise InvalidInput("name the persona")
    existing = {
        a.activity: a
        for a in queries.persona_activities(session=session, persona=persona, active_only=False)
    }
    position = max((a.position for a in existing.values()), default=0)
    added = 0
    for name, kind in names:
        if name in existing:
            if existing[name] is not None:
                existing[name].active = True
            continue
        position += 1
        session.add(
            PersonaActivity(
                persona=persona,
                activity=name[:512],
                source=kind,
                position=position,
                created_by_id=actor.id,
            )
        )
        existing[name] = None
        added += 1
    session.flush()
    return added


def remove_activity(*, session: Session, actor: User, activity_id: int) -> None:
    """Take an activity off its persona's list (kept for earlier reviews). Leads only."""
    require_role(actor, Role.lead)
    activity = session.get(PersonaActivity, activity_id)
    if activity is None:
        raise NotFound(f"activity {activity_id} does not exist")
    activity.active = False
    session.flush()


@dataclass
class Checklist:
    persona: str
    activities: list[PersonaActivity]
    tasks: pd.DataFrame  # id, title, track (and status for leads)
    mine: CompletenessReview | None


def persona_activity_list(*, session: Session, actor: User, persona: str) -> list:
    """The persona's active work activities, in their order (without its tasks)."""
    require_role(actor, Role.expert, Role.lead)
    return activities_of(session, persona)


def checklist(*, session: Session, actor: User, persona: str) -> Checklist:
    """What an expert judges for a persona: its activities and its tasks, with their own
    current review. Experts and leads; experts never see a task's review status (blindness)."""
    require_role(actor, Role.expert, Role.lead)
    tasks = queries.persona_tasks_frame(
        session=session, persona=persona, with_status=actor.role in (Role.lead, Role.admin)
    )
    mine = next(
        iter(queries.completeness_reviews(session=session, persona=persona, expert_id=actor.id)),
        None,
    )
    return Checklist(
        persona,
        activities_of(session, persona),
        tasks,
        mine,
    )


def submit_review(
    *,
    session: Session,
    actor: User,
    persona: str,
    captured_ids: list[int],
    missing: list[str],
    comment: str = "",
) -> CompletenessReview:
    """An expert's judgement of a persona's task set; a new one replaces their earlier one."""
    require_role(actor, Role.expert)
    valid = {a.id for a in activities_of(session, persona)}
    if not valid:
        raise InvalidInput(f"persona {persona!r} has no work activities to judge yet")
    unknown = sorted(set(captured_ids) - valid)
    if unknown:
        raise InvalidInput(f"activities {unknown} are not on the list of {persona!r}")
    for old in queries.completeness_reviews(session=session, persona=persona, expert_id=actor.id):
        old.is_current = False
    review = CompletenessReview(
        persona=persona,
        expert_id=actor.id,
        captured_ids=sorted(set(captured_ids)),
        missing=[m.strip() for m in missing if m.strip()],
        comment=comment,
        submitted_at=utcnow(),
    )
    session.add(review)
    session.flush()
    append_entry(
        session=session,
        artifact_type="persona",
        artifact_id=persona,
        action="completeness-review",
        source_kind="expert",
        actor_id=actor.id,
        payload={"captured": review.captured_ids, "missing": review.missing},
    )
    return review


@dataclass
class PersonaReport:
    persona: str
    experts: int
    activities: pd.DataFrame  # activity, source, captured_by, share, captured
    share_captured: float | None
    missing: pd.DataFrame  # activity named missing, experts


def report(*, session: Session, actor: User) -> list[PersonaReport]:
    """Per persona: for each activity the share of reviewing experts who find it captured
    (captured = at least half of them), the share of activities captured, and the missing
    activities experts named, with how many named each. Leads only."""
    require_role(actor, Role.lead)
    out = []
    for persona in personas(session=session):
        activities = activities_of(session, persona)
        reviews = queries.completeness_reviews(session=session, persona=persona)
        n = len(reviews)
        rows = []
        for activity in activities:
            votes = sum(activity.id in r.captured_ids for r in reviews)
            share = votes / n if n else None
            rows.append(
                {
                    "activity": activity.activity,
                    "source": activity.source,
                    "captured_by": votes,
                    "share": share,
                    "captured": share is not None and share >= 0.5,
                }
            )
        frame = pd.DataFrame(
            rows, columns=["activity", "source", "captured_by", "share", "captured"]
        )
        named = pd.Series([m for r in reviews for m in r.missing], dtype=object)
        missing = (
            named.value_counts().rename_axis("activity").reset_index(name="experts")
            if len(named)
            else pd.DataFrame(columns=["activity", "experts"])
        )
        share = float(frame["captured"].mean()) if n and len(frame) else None
        out.append(PersonaReport(persona, n, frame, share, missing))
    return out
