"""Numbers for the lead's dashboard."""

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.queries import status_counts
from itsmreview.review import queries
from itsmreview.review.reliability import (
    ItemAgreement,
    disagreements,
    find_round,
    round_agreement,
)
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

    def agreement_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
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
                    "alpha_with_models": a.models.get("alpha_humans_and_models"),
                }
                for a in self.agreement
            ]
        )

    def bias_frame(self) -> pd.DataFrame:
        """Rater x rubric dimension: mean deviation from the other raters (ordinal items)."""
        rows = {a.label: a.bias for a in self.agreement if a.bias and a.alpha.level != "nominal"}
        return pd.DataFrame(rows, dtype=float)  # a rater sharing no unit is None -> NaN


def dashboard(
    *, session: Session, actor: User, round_name: str | None = None, bootstrap: int = 1000
) -> Dashboard:
    """Progress, task statuses, agreement with CIs and disagreements of a round. Leads only."""
    require_role(actor, Role.lead)
    rounds = [
        {"name": r.name, "status": r.status, "k": r.k, "created_at": r.created_at}
        for r in queries.list_rounds(session=session)
    ]
    board = Dashboard(
        open_assignments=queries.open_assignments_frame(session=session),
        progress=queries.progress_frame(session=session),
        task_status=status_counts(session=session),
        rounds=rounds,
    )
    if not rounds:
        return board
    review_round, items = _round_agreement_cached(
        session=session, actor=actor, round_name=round_name, bootstrap=bootstrap
    )
    board.round_name = review_round.name
    board.agreement = items
    board.disagreements = disagreements(session=session, actor=actor, round_name=review_round.id)
    board.task_status = status_counts(session=session)
    return board


_AGREEMENT_CACHE: OrderedDict[tuple, list[ItemAgreement]] = OrderedDict()
_AGREEMENT_CACHE_SIZE = 16
_AGREEMENT_LOCK = threading.Lock()


def _round_agreement_cached(*, session: Session, actor: User, round_name, bootstrap: int):
    """round_agreement, reused while the round's current ratings stay the same: a lead's
    clicks on the dashboard rerun the page, and bootstraps of large rounds take a while."""
    review_round = find_round(session, round_name)
    key = (
        session.get_bind().url.render_as_string(hide_password=False),
        review_round.id,
        review_round.rubric_id,
        bootstrap,
        queries.ratings_fingerprint(session=session, round_id=review_round.id),
    )
    with _AGREEMENT_LOCK:
        if key in _AGREEMENT_CACHE:
            _AGREEMENT_CACHE.move_to_end(key)
            return review_round, _AGREEMENT_CACHE[key]
    _, items = round_agreement(
        session=session, actor=actor, round_name=review_round.id, bootstrap=bootstrap
    )
    with _AGREEMENT_LOCK:
        _AGREEMENT_CACHE[key] = items  # plain data, no database objects
        while len(_AGREEMENT_CACHE) > _AGREEMENT_CACHE_SIZE:
            _AGREEMENT_CACHE.popitem(last=False)
    return review_round, items
