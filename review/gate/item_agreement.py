"""Agreement of a round per rubric item: alpha, Gwet's AC, per-rater figures, model raters."""

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.errors import InvalidInput
from itsmreview.review.gate import agreement
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.gate.round_data import (
    HUMAN,
    VERDICT_CODES,
    ItemCounts,
    LongRatings,
    RoundData,
    find_round,
    gate_items,
    load_round,
    reliability_matrix,
    round_counts,
    round_long,
)
from itsmreview.review.models import ReviewRound, Rubric
from itsmreview.review.rubrics.service import RubricDefinition
from itsmreview.summaries.service import lead_figures
from sqlmodel import Session


def model_agreement(
    data: RoundData,
    item: str,
    level: str,
    *,
    bootstrap: int = 0,
    seed: int = 0,
    names: dict[int, str] | None = None,
) -> dict:
    """With model raters in the round, the measured answer to "could a model stand in for an
    expert here?": alpha of the humans, alpha of humans and models together, and each model's
    alpha against the human consensus (median; mode for nominal items; of tasks with two or
    more human ratings) on the tasks both rated, each with a bootstrap interval. {} without
    model ratings."""
    models = data.ratings[data.ratings["rater_kind"] == "model"]
    if models.empty:
        return {}

    def figure(matrix: np.ndarray) -> dict:
        if not matrix.size:
            return agreement.Alpha(None, level, 0, 0, reason="no ratings").as_dict()
        return agreement.alpha(matrix, level, bootstrap=bootstrap, seed=seed).as_dict()

    humans, _, human_units = reliability_matrix(data, item)
    both, _, _ = reliability_matrix(data, item, ("human", "model"))
    out = {"humans": figure(humans), "humans_and_models": figure(both), "models": {}}
    model_matrix, model_ids, model_units = reliability_matrix(data, item, ("model",))
    if humans.size == 0:
        consensus = np.array([])
    elif level == "nominal":
        consensus = np.array([_mode(humans[:, j]) for j in range(humans.shape[1])])
    else:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # tasks with no human rating
            consensus = np.nanmedian(humans, axis=0)
    if consensus.size:  # a consensus needs two experts: one expert's rating is no consensus
        consensus = np.where((~np.isnan(humans)).sum(axis=0) >= 2, consensus, np.nan)
    for row, model_id in enumerate(model_ids):
        model_values = dict(zip(model_units, model_matrix[row], strict=True))
        paired = (
            np.array(
                [
                    [c, model_values.get(u, np.nan)]
                    for c, u in zip(consensus, human_units, strict=True)
                ]
            )
            .reshape(-1, 2)
            .T
        )
        both_rated = int((~np.isnan(paired)).all(axis=0).sum()) if paired.size else 0
        out["models"][str(int(model_id))] = {
            "rater": (names or {}).get(int(model_id), str(int(model_id))),
            "tasks_rated": int((~np.isnan(model_matrix[row])).sum()),
            "tasks_with_consensus": both_rated,
            "vs_consensus": figure(paired if both_rated else np.empty((0, 0))),
        }
    return out


def _mode(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    if not len(values):
        return np.nan
    found, counts = np.unique(values, return_counts=True)
    return float(found[np.argmax(counts)])


@dataclass
class ItemAgreement:
    item: str
    label: str
    alpha: agreement.Alpha
    ac: agreement.Gwet | None
    leave_one_out: dict[str, float | None]
    bias: dict[str, float | None]
    models: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "item": self.item,
            "label": self.label,
            **self.alpha.as_dict(),
            "gwet": None
            if self.ac is None
            else {"value": self.ac.value, "weights": self.ac.weights},
            "leave_one_rater_out": self.leave_one_out,
            "rater_bias": self.bias,
            "model_raters": self.models,
        }


def _alpha_and_ac(
    rubric: RubricDefinition, item: str, level: str, found: ItemCounts, bootstrap: int, seed: int
) -> tuple[agreement.Alpha, agreement.Gwet]:
    """Alpha (with a bootstrap CI) and Gwet's AC of one rubric item's counts: AC2 quadratic
    on the dimension's scale for ordinal and interval items, AC1 for nominal ones."""
    alpha = agreement.alpha_of_counts(
        found.counts, found.values, level, bootstrap=bootstrap, seed=seed
    )
    scale = None
    if item in {d.key for d in rubric.dimensions}:
        low, high = rubric.dimension(item).scale
        scale = list(range(low, high + 1))
    weights = "identity" if level == "nominal" else "quadratic"
    return alpha, agreement.gwet_of_counts(found.counts, found.values, weights, categories=scale)


def _per_rater(
    ratings: LongRatings, level: str, names: dict[int, str]
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Leave-one-rater-out alpha and the bias of each rater of one rubric item, by name."""
    loo = agreement.leave_one_rater_out_long(ratings.raters, ratings.units, ratings.values, level)
    bias = agreement.rater_bias_long(ratings.raters, ratings.units, ratings.values)
    return (
        {names.get(r, str(r)): v for r, v in loo.items()},
        {names.get(r, str(r)): v for r, v in bias.items()},
    )


def round_agreement(
    *,
    session: Session,
    actor: User,
    round_name: str | int | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    detail: bool = True,
    counts: dict[str, ItemCounts] | None = None,
) -> tuple[ReviewRound, list[ItemAgreement]]:
    """Alpha (with a bootstrap CI) and Gwet's AC (AC2 quadratic for ordinal and interval
    items, AC1 for nominal) of every rubric item of a round, from per-unit counts; with
    `detail`, also leave-one-rater-out alpha, rater bias and model raters, which need the
    ratings themselves. `counts`: the round's `round_counts`, when the caller has them.
    Human ratings only. Leads only."""
    require_role(actor, Role.lead)
    return computed_round_agreement(
        session=session,
        round_name=round_name,
        bootstrap=bootstrap,
        seed=seed,
        detail=detail,
        counts=counts,
    )


def computed_round_agreement(
    *,
    session: Session,
    round_name: str | int | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    detail: bool = True,
    counts: dict[str, ItemCounts] | None = None,
) -> tuple[ReviewRound, list[ItemAgreement]]:
    """`round_agreement` for a caller that checked who asks (a worker computing the lead's
    Dashboard figures)."""
    review_round = find_round(session, round_name)
    rubric = RubricDefinition.model_validate(session.get(Rubric, review_round.rubric_id).definition)
    long = round_long(session=session, round_id=review_round.id, rubric=rubric) if detail else None
    if counts is None:
        counts = (
            {item: ratings.counts() for item, ratings in long.items()}
            if long is not None
            else round_counts(session=session, round_id=review_round.id, rubric=rubric)
        )
    data = (
        load_round(session=session, round_name=review_round.id)
        if detail and gate_queries.has_model_ratings(session=session, round_id=review_round.id)
        else None
    )
    names = {}
    if long is not None:
        raters = sorted({int(r) for ratings in long.values() for r in np.unique(ratings.raters)})
        names = gate_queries.experts_by_id(session=session, ids=raters)
    model_names = (
        gate_queries.experts_by_id(
            session=session, ids=sorted(map(int, data.ratings["expert_id"].unique()))
        )
        if data is not None
        else {}
    )
    results = []
    for item, label, level in gate_items(rubric):
        found = counts[item]
        if found.empty:
            none = agreement.Alpha(None, level, 0, 0, reason="no ratings yet")
            results.append(ItemAgreement(item, label, none, None, {}, {}))
            continue
        alpha, ac = _alpha_and_ac(rubric, item, level, found, bootstrap, seed)
        loo, bias = _per_rater(long[item], level, names) if long is not None else ({}, {})
        models = (
            model_agreement(data, item, level, bootstrap=bootstrap, seed=seed, names=model_names)
            if data is not None
            else {}
        )
        results.append(ItemAgreement(item, label, alpha, ac, loo, bias, models))
    return review_round, results


@lead_figures
def alpha_over_time(
    *, session: Session, actor: User, item: str, round_name: str | int | None = None
) -> pd.DataFrame:
    """Alpha of one rubric item on the ratings submitted up to the end of each day with
    submissions (the ratings current at the end, as they stood). Leads only.
    Columns: day, ratings, alpha (NaN where undefined). Reads the item's values with their
    submission times, not the round's ratings."""
    require_role(actor, Role.lead)
    review_round = find_round(session, round_name)
    rubric = RubricDefinition.model_validate(session.get(Rubric, review_round.rubric_id).definition)
    level = next((lv for key, _, lv in gate_items(rubric) if key == item), None)
    if level is None:
        raise InvalidInput(f"{item!r} is not an item of the round's rubric")
    times = gate_queries.submission_times(session=session, round_id=review_round.id)
    if not times:
        return pd.DataFrame(columns=["day", "ratings", "alpha"])
    all_days = pd.to_datetime(pd.Series(times), utc=True).dt.floor("D")
    rows = gate_queries.item_values_with_times(
        session=session, round_id=review_round.id, item=item, kinds=HUMAN
    )
    units = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    if item == "verdict":
        values = np.fromiter((VERDICT_CODES.get(r[1], np.nan) for r in rows), float, len(rows))
    elif item.startswith("flag:"):
        key = item[len("flag:") :]
        values = np.fromiter((key in (r[1] or ()) for r in rows), float, len(rows))
    else:
        values = np.fromiter((r[1] for r in rows), float, len(rows))
    value_days = pd.to_datetime(pd.Series([r[2] for r in rows], dtype=object), utc=True)
    value_days = value_days.dt.floor("D")
    out = []
    for day in sorted(all_days.unique()):
        kept = (value_days <= day).to_numpy(dtype=bool) & ~np.isnan(values)
        counts = ItemCounts.of(units[kept], values[kept])
        value = (
            None
            if counts.empty
            else agreement.alpha_of_counts(counts.counts, counts.values, level).value
        )
        out.append(
            {
                "day": day,
                "ratings": int((all_days <= day).sum()),
                "alpha": np.nan if value is None else value,
            }
        )
    return pd.DataFrame(out)
