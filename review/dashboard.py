"""Numbers for the lead's dashboard."""

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import datetime

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.queries import status_counts
from itsmreview.review import queries
from itsmreview.review.agreement import Alpha, Gwet
from itsmreview.review.models import ReviewRound
from itsmreview.review.reliability import (
    ItemAgreement,
    disagreements,
    find_round,
    round_agreement,
)
from itsmreview.summaries.service import Materialised, materialised
from sqlmodel import Session


@dataclass
class Dashboard:
    progress: pd.DataFrame
    task_status: dict[str, int]
    rounds: list[dict]
    round_name: str | None = None
    agreement: list[ItemAgreement] = field(default_factory=list)
    disagreements: pd.DataFrame = field(default_factory=pd.DataFrame)
    open_assignments: pd.DataFrame = field(default_factory=pd.DataFrame)
    agreement_computed_at: datetime | None = None
    agreement_current: bool = True  # False: the ratings changed since; a refresh is running

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
    *, session: Session, actor: User, round_name: str | None = None, bootstrap: int = 1000
) -> Dashboard:
    """Progress, the statuses of the round's tasks, agreement with CIs and disagreements of a
    round (the newest when `round_name` is None). Leads only."""
    require_role(actor, Role.lead)
    rounds = [
        {"name": r.name, "status": r.status, "k": r.k, "created_at": r.created_at}
        for r in queries.list_rounds(session=session)
    ]
    board = Dashboard(
        open_assignments=queries.open_assignments_frame(session=session),
        progress=queries.progress_frame(session=session),
        task_status={},
        rounds=rounds,
    )
    if not rounds:
        board.task_status = status_counts(session=session)
        return board
    review_round = find_round(session, round_name)
    inline = queries.round_size(session=session, round_id=review_round.id) <= INLINE_TASKS
    figures = _round_agreement_materialised(
        session=session, actor=actor, review_round=review_round, bootstrap=bootstrap, inline=inline
    )
    board.round_name = review_round.name
    board.task_status = _round_status_materialised(
        session=session, review_round=review_round, inline=inline
    )
    board.agreement = (
        [item_from_record(r) for r in figures.payload["items"]] if figures.payload else []
    )
    board.agreement_computed_at = figures.computed_at
    board.agreement_current = figures.current
    board.disagreements = disagreements(session=session, actor=actor, round_name=review_round.id)
    return board


INLINE_TASKS = 2000  # rounds of up to this many tasks get their figures at once


def _round_status_materialised(
    *, session: Session, review_round: ReviewRound, inline: bool
) -> dict[str, int]:
    """How many of the round's tasks stand at each status, as stored for the ledger's head
    (every decision, rating, gate change and import appends to it): counted at once for a
    small round, else in the background while the last counts (or none yet) are shown."""
    from itsmreview.ledger.queries import last_entry

    head = last_entry(session=session)
    round_id = review_round.id
    found = materialised(
        session=session,
        kind="round-status",
        key=str(round_id),
        fingerprint=str(head.seq if head else 0),
        compute=lambda background: queries.round_status_counts(
            session=background, round_id=round_id
        ),
        inline=inline,
    )
    return dict(found.payload or {})


def _round_agreement_materialised(
    *, session: Session, actor: User, review_round: ReviewRound, bootstrap: int, inline: bool
) -> Materialised:
    """The round's agreement as stored for its current ratings: computed at once for a small
    round (`inline`), else in the background while the stored figures (or none yet) are
    shown."""
    fingerprint = queries.ratings_fingerprint(session=session, round_id=review_round.id)
    round_id = review_round.id

    def compute(background: Session) -> dict:
        _, items = round_agreement(
            session=background, actor=actor, round_name=round_id, bootstrap=bootstrap
        )
        return {"items": [item_record(item) for item in items]}

    found = materialised(
        session=session,
        kind="round-agreement",
        key=f"{round_id}:{review_round.rubric_id}:{bootstrap}",
        fingerprint=json.dumps(list(fingerprint)),
        compute=compute,
        inline=inline,
    )
    return found


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
