"""The approval gate applied to a round's tasks: settings, gating alphas, stored decisions."""

from dataclasses import fields

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import utcnow
from itsmreview.errors import InvalidInput
from itsmreview.ledger.chain import content_digest
from itsmreview.ledger.service import append_entries, append_entry
from itsmreview.review.gate import agreement
from itsmreview.review.gate import cache as gatecache
from itsmreview.review.gate.approval import Decision, GateConfig, TaskRatings, decide
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.gate.round_data import (
    HUMAN,
    ItemCounts,
    RoundData,
    find_round,
    load_round,
    task_ratings,
)
from itsmreview.review.models import ReviewRound, Rubric
from itsmreview.review.rubrics.service import RubricDefinition
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session


def _task_ratings(data: RoundData) -> dict[int, TaskRatings]:
    return task_ratings(data.ratings, data.scores)


def gate_config(review_round: ReviewRound, rubric: RubricDefinition) -> GateConfig:
    required = tuple(d.key for d in rubric.dimensions if d.required)
    blocking = tuple(f.key for f in rubric.flags if f.blocking)
    config = dict(review_round.approval or {})
    config.setdefault("k_min", review_round.k)
    scoring = rubric.scoring.model_dump(mode="json") if rubric.scoring is not None else None
    return GateConfig.from_dict(config, required=required, blocking=blocking, scoring=scoring)


def gating_alphas(
    *,
    session: Session,
    review_round: ReviewRound,
    rubric: RubricDefinition,
    counts: dict[str, ItemCounts] | None = None,
) -> dict[str, float | None]:
    """Alpha of each gating dimension over the round's human ratings (None: undefined): from
    `counts` when given, else from the round's stored coincidence counts (`gatecache`)."""
    config = gate_config(review_round, rubric)
    if counts is None:
        return gatecache.gate_alphas(
            session=session,
            review_round=review_round,
            rubric=rubric,
            dimensions=config.gating_dimensions,
        )
    return {
        item: None
        if counts[item].empty
        else agreement.alpha_of_counts(
            counts[item].counts, counts[item].values, rubric.dimension(item).level
        ).value
        for item in config.gating_dimensions
    }


def gate_decisions(
    *, session: Session, data: RoundData
) -> tuple[pd.DataFrame, dict[int, Decision]]:
    """The gate's decision for every task of the round, without storing anything: the
    round's tasks with their stored status, and task version id -> decision."""
    config = gate_config(data.review_round, data.rubric)
    round_alpha = gating_alphas(session=session, review_round=data.review_round, rubric=data.rubric)
    ratings = _task_ratings(data)
    adjudicated = gate_queries.adjudications_of_round(
        session=session, round_id=data.review_round.id
    )
    failed = gate_queries.failed_checks(session=session, round_id=data.review_round.id)
    tasks = gate_queries.round_task_statuses(session=session, round_id=data.review_round.id)
    decisions = {
        int(v): decide(
            ratings.get(int(v), TaskRatings({}, [], [])),
            config,
            round_alpha,
            adjudicated.get(int(v)),
            failed.get(int(v), ()),
        )
        for v in tasks["task_version_id"]
    }
    return tasks, decisions


def recompute_statuses(
    *,
    session: Session,
    round_name: str | int | None = None,
    actor_id: int | None = None,
) -> dict[int, Decision]:
    """Apply the round's gate to every task of the round; store changed statuses and record
    each change in the ledger. Returns task version id -> decision. Flushes."""
    data = load_round(session=session, round_name=round_name)
    tasks, decisions = gate_decisions(session=session, data=data)
    _store_decisions(
        session,
        [(row, decisions[int(row.task_version_id)], actor_id) for row in tasks.itertuples()],
        data.review_round,
    )
    session.flush()
    queue_decided(session, data.review_round.id, tasks.itertuples(), decisions, whole=True)
    return decisions


QUEUE_KIND = "adjudication-queue"  # the summaries row that says a round's queue is built


def queue_built_at(*, session: Session, round_id: int):
    """When the round's adjudication queue was built from its tasks (None: not yet, and
    the queue's rows do not count)."""
    from itsmreview.summaries.queries import stored

    found = stored(session=session, kind=QUEUE_KIND, key=str(round_id))
    return None if found is None else found.computed_at


def _mark_queue_built(session: Session, round_id: int) -> None:
    from itsmreview.summaries.models import Summary
    from itsmreview.summaries.queries import replace

    replace(
        session=session,
        summary=Summary(kind=QUEUE_KIND, key=str(round_id), fingerprint="built", payload={}),
    )


def queue_decided(
    session: Session,
    round_id: int,
    rows,
    decisions: dict[int, Decision],
    *,
    whole=False,
    tasks=None,
) -> None:
    """Keep the round's adjudication queue equal to its decisions: `rows` (external_id and
    task_version_id each) were just decided; with `whole` they are every task of the round
    (the queue is rebuilt and marked built), else `tasks` selects them (while the queue is
    not built and other tasks of the round wait, nothing is done: it is built whole when
    first read)."""
    if not whole and queue_built_at(session=session, round_id=round_id) is None:
        if gate_queries.round_has_status(
            session=session, round_id=round_id, status="adjudication", besides=tasks
        ):
            return  # tasks wait that the queue does not hold yet: built whole when read
        _mark_queue_built(session, round_id)  # no other task waits: the queue starts here
    now = utcnow()
    gate_queries.clear_adjudication_queue(
        session=session, round_id=round_id, tasks=None if whole else tasks
    )
    gate_queries.add_to_adjudication_queue(
        session=session,
        rows=[
            {
                "round_id": round_id,
                "task_version_id": int(row.task_version_id),
                "external_id": row.external_id,
                "reasons": "; ".join(decision.reasons),
                "decided_at": now,
            }
            for row in rows
            if (decision := decisions.get(int(row.task_version_id))) is not None
            and decision.status == "adjudication"
        ],
    )
    if whole:
        _mark_queue_built(session, round_id)
    session.flush()


def _store_decisions(session: Session, decided: list, review_round: ReviewRound) -> None:
    """Store each (row, decision, actor id) whose status changed, on its version (and on its
    task when it is the newest version), each with a ledger entry: a few statements for any
    number of tasks (a whole-round re-decision changes thousands), not two look-ups each."""
    changed = [(row, d, actor) for row, d, actor in decided if d.status != row.status]
    if not changed:
        return
    now = utcnow()
    versions = {int(row.task_version_id): d.status for row, d, _ in changed}
    tasks = {int(row.task_id): d.status for row, d, _ in changed if row.is_newest}
    gate_queries.store_statuses(session=session, versions=versions, tasks=tasks, at=now)
    for model, values in ((TaskVersion, versions), (Task, tasks)):
        for ident, status in values.items():  # objects the session holds say the same
            held = session.identity_map.get(session.identity_key(model, ident))
            if held is not None:
                set_committed_value(held, "status", status)
                if model is Task:
                    set_committed_value(held, "updated_at", now)
    append_entries(
        session=session,
        entries=[
            {
                "artifact_type": "task",
                "artifact_id": f"{row.external_id}@v{row.version}",
                "action": f"status:{d.status}",
                "source_kind": "expert",
                "actor_id": actor,
                "reference": f"round {review_round.name}",
                "payload": {
                    "from": row.status,
                    "reasons": d.reasons,
                    "task_version_id": int(row.task_version_id),
                },
            }
            for row, d, actor in changed
        ],
    )


def _ratings_of_counts(counts: gatecache.UnitCounts, rated: list) -> TaskRatings:
    """A task's ratings as the gate reads them, from its value counts per dimension and the
    (verdict, flags) of each rating: the gate looks at the values, not at who gave which."""
    return TaskRatings(
        {d: [v for v, n in sorted(c.items()) for _ in range(n)] for d, c in counts.items()},
        [str(v) for v, _ in rated if v],
        [list(f or []) for _, f in rated],
    )


def decide_tasks(
    *,
    session: Session,
    review_round: ReviewRound,
    config: GateConfig,
    alphas: dict[str, float | None],
    counts: dict[int, gatecache.UnitCounts],
    tasks,
    actors: dict[int, int | None],
) -> dict[int, Decision]:
    """Decide some tasks of the round (`tasks`: a select of their version ids) from their own
    ratings (`counts`: each one's current human value counts per dimension), adjudications
    and machine checks and the round's alphas, in one read of each, and store the decisions
    that changed (recorded in the ledger as `actors` of each task). Returns version id ->
    decision."""
    rated: dict[int, list] = {}
    for version_id, verdict, flags in gate_queries.verdicts_and_flags_of_tasks(
        session=session, round_id=review_round.id, tasks=tasks, kinds=HUMAN
    ):
        rated.setdefault(int(version_id), []).append((verdict, flags))
    adjudicated = gate_queries.adjudications_of_round(
        session=session, round_id=review_round.id, tasks=tasks
    )
    failed = gate_queries.failed_checks(session=session, tasks=tasks)
    decisions, decided = {}, []
    for row in gate_queries.version_status_rows(
        session=session, round_id=review_round.id, tasks=tasks
    ):
        version_id = int(row.task_version_id)
        decision = decide(
            _ratings_of_counts(counts.get(version_id, {}), rated.get(version_id, [])),
            config,
            alphas,
            adjudicated.get(version_id),
            failed.get(version_id, ()),
        )
        decisions[version_id] = decision
        decided.append(row)
    _store_decisions(
        session,
        [
            (row, decisions[int(row.task_version_id)], actors.get(int(row.task_version_id)))
            for row in decided
        ],
        review_round,
    )
    session.flush()
    queue_decided(session, review_round.id, decided, decisions, tasks=tasks)
    return decisions


def redecide_task(
    *,
    session: Session,
    review_round: ReviewRound,
    task_version_id: int,
    config: GateConfig,
    alphas: dict[str, float | None],
    actor_id: int | None = None,
) -> Decision:
    """Decide one task of the round (callers check that it is in the round) from its own
    ratings, its adjudication and the round's alphas, and store the decision when it changed
    (other tasks cannot be affected by that task's ratings or adjudication unless the round's
    alpha crosses the gate): `decide_tasks` for a set of one."""
    tasks = gate_queries.one_version(task_version_id)
    return decide_tasks(
        session=session,
        review_round=review_round,
        config=config,
        alphas=alphas,
        counts=gatecache.current_counts(session=session, round_id=review_round.id, tasks=tasks),
        tasks=tasks,
        actors={task_version_id: actor_id},
    )[task_version_id]


def current_gate(
    *, session: Session, round_name: str | int | None = None
) -> tuple[GateConfig, RubricDefinition]:
    """A round's gate in force and its rubric, without loading any rating."""
    review_round = find_round(session, round_name)
    rubric = RubricDefinition.model_validate(session.get(Rubric, review_round.rubric_id).definition)
    return gate_config(review_round, rubric), rubric


GATE_MODES = ("median", "audit-100")


# what a lead may set per round; the audit's weights and credit come from the rubric
GATE_SETTINGS = {f.name for f in fields(GateConfig)} - {"weights", "credit", "blocked_value"}


def set_gate(
    *, session: Session, actor: User, round_name: str, changes: dict
) -> tuple[GateConfig, dict[int, Decision]]:
    """Change a round's approval gate (keys of GateConfig; absent keys keep their value),
    then re-decide every task of the round. Leads only. Raises InvalidInput naming the bad
    value and what is allowed. Returns the gate in force and the new decisions."""
    require_role(actor, Role.lead)
    review_round = find_round(session, round_name)
    _, rubric = current_gate(session=session, round_name=review_round.id)
    unknown = sorted(set(changes) - GATE_SETTINGS)
    if unknown:
        raise InvalidInput(f"unknown gate setting(s): {', '.join(unknown)}")
    if "mode" in changes:
        if changes["mode"] not in GATE_MODES:
            raise InvalidInput(
                f"mode must be one of {', '.join(GATE_MODES)}, got {changes['mode']!r}"
            )
        if changes["mode"] == "audit-100" and rubric.scoring is None:
            raise InvalidInput(
                f"mode audit-100 needs a rubric with a 100-point scoring; round "
                f"{review_round.name!r} uses {rubric.name!r}: open the round with "
                "`--rubric audit-100`"
            )
    if "threshold" in changes and not 0 <= changes["threshold"] <= 100:
        raise InvalidInput(f"threshold must be between 0 and 100, got {changes['threshold']}")
    low = min(d.scale[0] for d in rubric.dimensions)
    high = max(d.scale[1] for d in rubric.dimensions)
    checks = {
        "k_min": (lambda v: v >= 1, "at least 1"),
        "dimension_min": (lambda v: low <= v <= high, f"on the rubric's scale, {low}-{high}"),
        "alpha_min": (lambda v: -1 <= v <= 1, "between -1 and 1"),
        "disagreement_range": (lambda v: v > 0, "more than 0"),
    }
    if "realism_required" in changes and not isinstance(changes["realism_required"], bool):
        raise InvalidInput(
            f"realism_required must be true or false, got {changes['realism_required']!r}"
        )
    for key, (valid, allowed) in checks.items():
        if key in changes and (changes[key] is None or not valid(changes[key])):
            raise InvalidInput(f"{key} must be {allowed}, got {changes[key]}")
    for key, known in (
        ("gating_dimensions", [d.key for d in rubric.dimensions]),
        ("blocking_flags", [f.key for f in rubric.flags]),
    ):
        bad = sorted(set(changes.get(key, ())) - set(known))
        if bad:
            raise InvalidInput(
                f"{key}: {', '.join(bad)} not in rubric {rubric.name!r}; choose from "
                f"{', '.join(known)}"
            )
    before = dict(review_round.approval or {})
    review_round.approval = {
        **before,
        **{k: list(v) if isinstance(v, list | tuple) else v for k, v in changes.items()},
    }
    session.flush()
    append_entry(
        session=session,
        artifact_type="review_round",
        artifact_id=review_round.name,
        action="gate",
        source_kind="expert",
        actor_id=actor.id,
        payload={
            "from": before,
            "to": review_round.approval,
            "content_sha256": content_digest(review_round.approval),
        },
    )
    decisions = recompute_statuses(session=session, round_name=review_round.id, actor_id=actor.id)
    return current_gate(session=session, round_name=review_round.id)[0], decisions
