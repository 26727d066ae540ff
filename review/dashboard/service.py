"""Numbers for the lead's dashboard."""

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import datetime

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.queries import status_counts
from itsmreview.catalog.state import DIFFICULTIES
from itsmreview.review.dashboard import queries
from itsmreview.review.gate.agreement import Alpha, Gwet
from itsmreview.review.gate.item_agreement import ItemAgreement, computed_round_agreement
from itsmreview.review.gate.queries import pending as pending_queries
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.gate.round_data import find_round
from itsmreview.review.gate.service import queue_built_at
from itsmreview.review.models import ReviewRound
from itsmreview.review.repair.adjudication import (
    QueuePage,
    adjudication_queue,
    build_adjudication_queue,
)
from itsmreview.review.rounds import queries as round_queries
from itsmreview.summaries.service import Materialised, computation, lead_figures, materialised
from sqlmodel import Session


@dataclass
class Dashboard:
    progress: pd.DataFrame
    task_status: dict[str, int]
    rounds: list[dict]
    round_name: str | None = None
    agreement: list[ItemAgreement] = field(default_factory=list)
    disagreements: pd.DataFrame = field(default_factory=pd.DataFrame)  # the queue's page
    queue: QueuePage | None = None  # the adjudication queue as stored (None: being built)
    open_assignments: pd.DataFrame = field(default_factory=pd.DataFrame)
    agreement_computed_at: datetime | None = None
    agreement_current: bool = True  # False: the ratings changed since; a refresh is running
    gate_waiting: int = 0  # submitted ratings of the round not yet applied to the gate
    gate_waiting_since: datetime | None = None
    progress_computed_at: datetime | None = None  # None: counted now (or being counted)
    status_computed_at: datetime | None = None  # None: current; else when they were counted

    def agreement_frame(self) -> pd.DataFrame:
        columns = ["item", "key", "alpha", "ci_low", "ci_high", "units", "level", "gwet"]
        return pd.DataFrame(
            columns=[*columns, "undefined", "alpha_with_models"],
            data=[
                {
                    "item": a.label,
                    "key": a.item,
                    "alpha": a.alpha.value,
                    "ci_low": a.alpha.ci_low,
                    "ci_high": a.alpha.ci_high,
                    "units": a.alpha.units,
                    "level": a.alpha.level,
                    "gwet": None if a.ac is None else a.ac.value,
                    "undefined": a.alpha.reason,
                    "alpha_with_models": (a.models.get("humans_and_models") or {}).get("alpha"),
                }
                for a in self.agreement
            ],
        )

    def model_frame(self) -> pd.DataFrame:
        """Per rubric item and model rater: alpha of humans, of humans with the models, and
        of the model against the human consensus, each with its 95% interval. Empty without
        model ratings."""
        rows = []
        for a in self.agreement:
            figures = a.models or {}
            for model in (figures.get("models") or {}).values():
                row = {"item": a.label, "key": a.item, "model": model["rater"]}
                for name, found in (
                    ("humans", figures.get("humans")),
                    ("with_models", figures.get("humans_and_models")),
                    ("model_vs_consensus", model.get("vs_consensus")),
                ):
                    found = found or {}
                    row[name] = found.get("alpha")
                    row[f"{name}_low"] = found.get("ci_low")
                    row[f"{name}_high"] = found.get("ci_high")
                row["tasks"] = model.get("tasks_with_consensus")
                rows.append(row)
        return pd.DataFrame(rows)

    def bias_frame(self) -> pd.DataFrame:
        """Rater x rubric dimension: mean deviation from the other raters (ordinal items)."""
        rows = {a.label: a.bias for a in self.agreement if a.bias and a.alpha.level != "nominal"}
        return pd.DataFrame(rows, dtype=float)  # a rater sharing no unit is None -> NaN


def dashboard(
    *,
    session: Session,
    actor: User,
    round_name: str | None = None,
    bootstrap: int = 1000,
    queue_search: str = "",
    queue_page: int = 0,
    per_page: int = 25,
) -> Dashboard:
    """Progress, the statuses of the round's tasks, agreement with CIs and one page of the
    tasks waiting for adjudication (`queue_search`, `queue_page`) of a round (the newest
    when `round_name` is None), all as stored. Leads only."""
    require_role(actor, Role.lead)
    rounds = [
        {"name": r.name, "status": r.status, "k": r.k, "created_at": r.created_at}
        for r in gate_queries.list_rounds(session=session)
    ]
    board = Dashboard(
        open_assignments=round_queries.open_assignments_frame(session=session),
        progress=pd.DataFrame(),
        task_status={},
        rounds=rounds,
    )
    if not rounds:
        board.progress = queries.progress_frame(session=session)
        board.task_status = status_counts(session=session)
        return board
    review_round = find_round(session, round_name)
    inline = not queries.round_larger_than(
        session=session, round_id=review_round.id, tasks=INLINE_TASKS
    )
    board.progress, board.progress_computed_at = _progress_materialised(
        session=session, inline=inline
    )
    figures = _round_agreement_materialised(
        session=session, actor=actor, review_round=review_round, bootstrap=bootstrap, inline=inline
    )
    board.round_name = review_round.name
    board.task_status, board.status_computed_at = _round_status_materialised(
        session=session, review_round=review_round, inline=inline
    )
    board.agreement = (
        [item_from_record(r) for r in figures.payload["items"]] if figures.payload else []
    )
    board.agreement_computed_at = figures.computed_at
    board.agreement_current = figures.current
    board.gate_waiting, board.gate_waiting_since = pending_queries.pending_summary(
        session=session, round_id=review_round.id
    )
    if _queue_ready(session=session, review_round=review_round, inline=inline):
        board.queue = adjudication_queue(
            session=session,
            actor=actor,
            round_name=review_round.id,
            search=queue_search,
            page=queue_page,
            per_page=per_page,
        )
        board.disagreements = board.queue.rows
    return board


def _queue_ready(*, session: Session, review_round: ReviewRound, inline: bool) -> bool:
    """Whether the round's adjudication queue is built; if not, build it: at once for a
    small round, else in the background (once per round, for rounds decided before the
    queue was kept)."""
    if queue_built_at(session=session, round_id=review_round.id) is not None:
        return True
    from itsmreview.db import write_transaction
    from itsmreview.summaries.service import run_in_background

    key = str(review_round.id)
    engine = session.get_bind()
    if inline:
        write_transaction(lambda writer: build_round_queue(writer, key), engine=engine)
        return True
    run_in_background(engine, "adjudication-queue", key)
    return False


@computation("adjudication-queue", writes=True)
def build_round_queue(session: Session, key: str) -> int:
    """Build the adjudication queue of the round whose id is `key`."""
    return build_adjudication_queue(
        session=session, review_round=session.get(ReviewRound, int(key))
    )


INLINE_TASKS = 2000  # rounds of up to this many tasks get their figures at once
PROGRESS_REFRESH_S = 300  # reservations lapse with time alone: counted again this often


@computation("progress")
def progress_figures(session: Session, key: str) -> dict:
    """Assigned and submitted tasks per round and expert (`key`: "all")."""
    frame = queries.progress_frame(session=session)
    return {"rows": frame.to_dict(orient="records"), "columns": list(frame.columns)}


def _progress_materialised(*, session: Session, inline: bool) -> tuple[pd.DataFrame, object]:
    """Assigned and submitted tasks per round and expert, as stored for the newest claim and
    submit (and counted again every PROGRESS_REFRESH_S, as reservations lapse): counted at
    once when the newest round is small, else in the background while the stored counts are
    shown with their time (None when counted now)."""
    import time as clock

    fingerprint = [
        *queries.assignments_fingerprint(session=session),
        int(clock.time() // PROGRESS_REFRESH_S),
    ]
    found = materialised(
        session=session,
        kind="progress",
        key="all",
        fingerprint=json.dumps(fingerprint),
        inline=inline,
    )
    columns = ["round", "expert", "assigned", "submitted"]
    if found.payload is None:
        return pd.DataFrame(columns=columns), None
    frame = pd.DataFrame(found.payload["rows"], columns=found.payload.get("columns", columns))
    return frame, None if found.current else found.computed_at


@computation("round-status")
def round_status_figures(session: Session, key: str) -> dict:
    """How many tasks of the round whose id is `key` stand at each status."""
    return queries.round_status_counts(session=session, round_id=int(key))


def _round_status_materialised(
    *, session: Session, review_round: ReviewRound, inline: bool
) -> tuple[dict[str, int], datetime | None]:
    """How many of the round's tasks stand at each status, as stored for the ledger's head
    (every decision, rating, gate change and import appends to it): counted at once for a
    small round, else in the background while the last counts (or none yet) are shown, with
    the time they were counted (None when current)."""
    from itsmreview.ledger.queries import last_entry

    head = last_entry(session=session)
    found = materialised(
        session=session,
        kind="round-status",
        key=str(review_round.id),
        fingerprint=str(head.seq if head else 0),
        inline=inline,
    )
    return dict(found.payload or {}), None if found.current else found.computed_at


@computation("round-agreement")
def round_agreement_figures(session: Session, key: str) -> dict:
    """The agreement of every item of a round; `key` is "ROUND_ID:RUBRIC_ID:BOOTSTRAP" (the
    rubric in the key, so that a round's new rubric never reads old figures)."""
    round_id, _, bootstrap = key.split(":")
    _, items = computed_round_agreement(
        session=session, round_name=int(round_id), bootstrap=int(bootstrap)
    )
    return {"items": [item_record(item) for item in items]}


def _round_agreement_materialised(
    *, session: Session, actor: User, review_round: ReviewRound, bootstrap: int, inline: bool
) -> Materialised:
    """The round's agreement as stored for its current ratings (the lead's: `dashboard`
    checked the role): computed at once for a small round (`inline`), else in the background
    while the stored figures (or none yet) are shown."""
    fingerprint = queries.ratings_fingerprint(session=session, round_id=review_round.id)
    return materialised(
        session=session,
        kind="round-agreement",
        key=f"{review_round.id}:{review_round.rubric_id}:{bootstrap}",
        fingerprint=json.dumps(list(fingerprint)),
        inline=inline,
    )


def item_record(item: ItemAgreement) -> dict:
    """An ItemAgreement as JSON-ready data (NaN as None)."""
    return _no_nan(asdict(item))


def item_from_record(record: dict) -> ItemAgreement:
    return ItemAgreement(
        item=record["item"],
        label=record["label"],
        alpha=Alpha(**record["alpha"]),
        ac=None if record["ac"] is None else Gwet(**record["ac"]),
        leave_one_out=record["leave_one_out"],
        bias=record["bias"],
        models=record.get("models") or {},
    )


def _no_nan(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nan(v) for v in value]
    return value


# --- benchmark-authoring figures: the audit score, realism and agreement per group ---------

GROUPINGS = {
    "difficulty": "Difficulty",
    "simulator_backbone": "Simulator backbone",
    "user_type": "User type",
}
UNSET = "(not set)"


def authoring_figures(*, session: Session, review_round: ReviewRound, rubric) -> dict:
    """From the round's counted scores (one grouped query) and its tasks' authoring fields:
    the audit-100 scores and admissions when the round is scored so, and per difficulty,
    simulator backbone and user type the tasks, their mean realism (per-task median) and
    alpha of the realism item among them, with its 95% interval."""
    import numpy as np
    from itsmreview.review.gate import agreement
    from itsmreview.review.gate.service import gate_config

    config = gate_config(review_round, rubric)
    keys = [d.key for d in rubric.dimensions]
    item = "scenario_realism" if "scenario_realism" in keys else keys[0]
    scores = _scores_by_task(session, review_round.id)
    tasks = queries.round_task_attributes(session=session, round_id=review_round.id)
    audit, per_task = None, {}
    if config.mode == "audit-100" and config.weights:
        per_task = _audit_scores(scores, config)
        status = dict(zip(tasks["task_version_id"], tasks["status"], strict=True))
        admitted = sum(status.get(v) == "approved" for v in per_task)
        audit = {
            "threshold": config.threshold,
            "scores": [round(s, 3) for s in per_task.values()],
            "scored": len(per_task),
            "admitted": admitted,
            "share_admitted": admitted / len(per_task) if per_task else None,
        }
    level = rubric.dimension(item).level
    values = sorted({v for d in scores.values() for v in d.get(item, [])})
    index = {v: i for i, v in enumerate(values)}
    breakdowns = {}
    for column in GROUPINGS:
        rows = []
        labels = tasks[column].fillna(UNSET)
        order = {d: i for i, d in enumerate(DIFFICULTIES)} if column == "difficulty" else {}
        grouped = sorted(tasks.groupby(labels), key=lambda g: (order.get(g[0], 99), g[0]))
        for group, members in grouped:
            ids = [int(v) for v in members["task_version_id"]]
            rated = [v for v in ids if scores.get(v, {}).get(item)]
            medians = [float(np.median(scores[v][item])) for v in rated]
            counts = np.zeros((len(rated), max(len(values), 1)))
            for row, v in enumerate(rated):
                for value in scores[v][item]:
                    counts[row, index[value]] += 1
            alpha = (
                agreement.alpha_of_counts(counts, np.array(values), level, bootstrap=200)
                if rated and len(values) >= 2
                else None
            )
            audit_scores_of = [per_task[v] for v in rated if v in per_task]
            rows.append(
                {
                    "group": str(group),
                    "tasks": len(ids),
                    "rated": len(rated),
                    "realism": float(np.mean(medians)) if medians else None,
                    "audit_score": float(np.mean(audit_scores_of)) if audit_scores_of else None,
                    "alpha": None if alpha is None else alpha.value,
                    "ci_low": None if alpha is None else alpha.ci_low,
                    "ci_high": None if alpha is None else alpha.ci_high,
                    "approved": int((members["status"] == "approved").sum()),
                }
            )
        breakdowns[column] = rows
    return _no_nan(
        {
            "item": item,
            "item_label": rubric.dimension(item).label,
            "mode": config.mode,
            "audit": audit,
            "breakdowns": breakdowns,
            "checks": queries.check_status_counts(session=session, round_id=review_round.id),
            "repairs": queries.round_repair_count(session=session, round_id=review_round.id),
            "proposals": queries.proposal_count(session=session, round_id=review_round.id),
            "needs_revision": int((tasks["status"] == "needs_revision").sum()),
        }
    )


@lead_figures
def round_authoring(*, session: Session, actor: User, round_name: str | int | None = None) -> dict:
    """`authoring_figures` of a round (the newest when None). Leads only; the page computes
    it in the background for a large round (`ui.cache.in_background`)."""
    from itsmreview.review.models import Rubric
    from itsmreview.review.rubrics.service import RubricDefinition

    require_role(actor, Role.lead)
    review_round = find_round(session, round_name)
    rubric = RubricDefinition.model_validate(session.get(Rubric, review_round.rubric_id).definition)
    return authoring_figures(session=session, review_round=review_round, rubric=rubric)


def _scores_by_task(session: Session, round_id: int) -> dict[int, dict[str, list[float]]]:
    """task version id -> dimension -> the values of its current human ratings, from one
    grouped count (rows grow with tasks x scale points, not with ratings)."""
    from itsmreview.review.gate.round_data import HUMAN

    scores: dict[int, dict[str, list[float]]] = {}
    for dimension, version_id, value, n in gate_queries.score_value_counts(
        session=session, round_id=round_id, kinds=HUMAN
    ):
        scores.setdefault(int(version_id), {}).setdefault(dimension, []).extend(
            [float(value)] * int(n)
        )
    return scores


def _audit_scores(scores: dict[int, dict[str, list[float]]], config) -> dict[int, float]:
    from itsmreview.review.gate.approval import audit_score

    return {v: s for v, d in scores.items() if (s := audit_score(d, config)) is not None}


def audit_scores(*, session: Session, review_round: ReviewRound) -> dict[int, float]:
    """task version id -> audit-100 score of the round's scored tasks."""
    from itsmreview.review.gate.service import gate_config
    from itsmreview.review.models import Rubric
    from itsmreview.review.rubrics.service import RubricDefinition

    rubric = RubricDefinition.model_validate(session.get(Rubric, review_round.rubric_id).definition)
    config = gate_config(review_round, rubric)
    return _audit_scores(_scores_by_task(session, review_round.id), config)
