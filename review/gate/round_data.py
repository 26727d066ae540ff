"""A round's ratings as the gate reads them: frames, per-item counts and long form, per task."""

from dataclasses import dataclass

import numpy as np
import pandas as pd
from itsmreview.errors import NotFound
from itsmreview.review.gate import agreement
from itsmreview.review.gate.approval import TaskRatings
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.models import ReviewRound, RoundStatus, Rubric
from itsmreview.review.rubrics.service import RubricDefinition
from sqlmodel import Session

VERDICT_CODES = {"reject": 0.0, "revise": 1.0, "accept": 2.0}


@dataclass
class RoundData:
    review_round: ReviewRound
    rubric: RubricDefinition
    ratings: pd.DataFrame  # one row per current rating (rater_kind: human or model)
    scores: pd.DataFrame  # rating_id, dimension, value

    def humans(self) -> "RoundData":
        """The same round with its human ratings only."""
        ratings = self.ratings[self.ratings["rater_kind"].isin(HUMAN)]
        scores = self.scores[self.scores["rating_id"].isin(set(ratings["rating_id"]))]
        return RoundData(self.review_round, self.rubric, ratings, scores)


def find_round(session: Session, name_or_id: str | int | None) -> ReviewRound:
    rounds = gate_queries.list_rounds(session=session)
    if not rounds:
        raise NotFound("no review round exists yet")
    if name_or_id is None:  # the newest open round, the one a lead works in; else the newest
        return next((r for r in reversed(rounds) if r.status == RoundStatus.open), rounds[-1])
    for review_round in rounds:
        if review_round.name == name_or_id or review_round.id == name_or_id:
            return review_round
    raise NotFound(f"no review round {name_or_id!r}; rounds: {', '.join(r.name for r in rounds)}")


def load_round(*, session: Session, round_name: str | int | None = None) -> RoundData:
    review_round = find_round(session, round_name)
    rubric = session.get(Rubric, review_round.rubric_id)
    return RoundData(
        review_round,
        RubricDefinition.model_validate(rubric.definition),
        gate_queries.current_ratings_wide(session=session, round_id=review_round.id),
        gate_queries.scores_long(session=session, round_id=review_round.id),
    )


HUMAN = ("human",)


def reliability_matrix(
    data: RoundData, item: str, kinds: tuple[str, ...] = HUMAN
) -> tuple[np.ndarray, list[int], list[int]]:
    """(raters x task versions) of one rubric dimension, the verdict (`verdict`) or a flag
    (`flag:<key>`, 1 when raised); NaN where a rater did not rate. Returns the array, the
    rater ids (rows) and task version ids (columns)."""
    ratings = data.ratings[data.ratings["rater_kind"].isin(kinds)]
    if item == "verdict":
        long = ratings.assign(value=ratings["verdict"].map(VERDICT_CODES))
    elif item.startswith("flag:"):
        key = item[len("flag:") :]
        long = ratings.assign(value=ratings["flags"].map(lambda f: float(key in (f or []))))
    else:
        long = data.scores[data.scores["dimension"] == item].merge(
            ratings[["rating_id", "task_version_id", "expert_id"]], on="rating_id"
        )
    if long.empty:
        return np.empty((0, 0)), [], []
    wide = long.pivot_table(
        index="expert_id", columns="task_version_id", values="value", aggfunc="first"
    )
    return wide.to_numpy(dtype=float), list(wide.index), list(wide.columns)


@dataclass
class ItemCounts:
    """Per-unit value counts of one rubric item: the reliability data of `reliability_matrix`
    without the raters, counted from the long table."""

    units: np.ndarray  # task version ids, ascending
    counts: np.ndarray  # units x values
    values: np.ndarray

    @classmethod
    def of(cls, units, values, weights=None) -> "ItemCounts":
        """From parallel arrays of unit and value, one entry per rating (or per `weights`
        ratings)."""
        units, values = np.asarray(units, dtype=np.int64), np.asarray(values, dtype=float)
        found_units, unit_codes = agreement.dense_codes(units)
        found_values, value_codes = agreement.dense_codes(values)
        flat = np.bincount(
            unit_codes * len(found_values) + value_codes,
            weights=None if weights is None else np.asarray(weights, dtype=float),
            minlength=len(found_units) * len(found_values),
        )
        counts = flat.reshape(len(found_units), len(found_values)).astype(float)
        return cls(found_units, counts, found_values)

    @property
    def empty(self) -> bool:
        return self.counts.size == 0


@dataclass
class LongRatings:
    """One rubric item's ratings in long form: one entry per rating."""

    raters: np.ndarray
    units: np.ndarray
    values: np.ndarray

    def counts(self) -> ItemCounts:
        return ItemCounts.of(self.units, self.values)


def _joined(batches: list[np.ndarray], columns: int) -> np.ndarray:
    """Row batches as one (rows x columns) float array; empty when there are none."""
    return np.concatenate(batches) if batches else np.empty((0, columns))


def _verdict_rows(
    session: Session, round_id: int, kinds: tuple[str, ...], flag_keys: list[str]
) -> np.ndarray:
    """(task version id, rater id, verdict code, 0/1 per flag) of every current rating."""
    batches = gate_queries.verdicts_and_flags(
        session=session,
        round_id=round_id,
        kinds=kinds,
        verdict_codes=VERDICT_CODES,
        flag_keys=flag_keys,
    )
    return _joined(list(batches), 3 + len(flag_keys))


def round_long(
    *, session: Session, round_id: int, rubric: RubricDefinition, kinds: tuple[str, ...] = HUMAN
) -> dict[str, LongRatings]:
    """LongRatings of every rubric item of a round (dimensions, the verdict and each flag),
    read in batches: what per-rater figures (leave-one-rater-out, bias) need."""
    dimensions = [d.key for d in rubric.dimensions]
    flag_keys = [f.key for f in rubric.flags]
    packed = gate_queries.packed_ratings(
        session=session,
        round_id=round_id,
        kinds=kinds,
        width=len(dimensions),
        verdict_codes=VERDICT_CODES,
        flag_keys=flag_keys,
    )
    if packed is not None:
        rated = np.hstack(packed)
    else:  # ratings written without packed scores
        rated = _joined(
            list(
                gate_queries.ratings_by_rater(
                    session=session,
                    round_id=round_id,
                    kinds=kinds,
                    dimensions=dimensions,
                    verdict_codes=VERDICT_CODES,
                    flag_keys=flag_keys,
                )
            ),
            3 + len(flag_keys) + len(dimensions),
        )
    raters, units = rated[:, 0].astype(np.int64), rated[:, 1].astype(np.int64)

    def present(column: np.ndarray) -> LongRatings:
        kept = ~np.isnan(column)
        return LongRatings(raters[kept], units[kept], column[kept])

    out = {"verdict": present(rated[:, 2])}
    for i, key in enumerate(flag_keys):
        out[f"flag:{key}"] = LongRatings(raters, units, rated[:, 3 + i])
    for i, dimension in enumerate(dimensions):
        out[dimension] = present(rated[:, 3 + len(flag_keys) + i])
    empty = LongRatings(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))
    return {item: out.get(item, empty) for item, _, _ in gate_items(rubric)}


def round_counts(
    *,
    session: Session,
    round_id: int,
    rubric: RubricDefinition,
    kinds: tuple[str, ...] = HUMAN,
    dimensions_only: bool = False,
) -> dict[str, ItemCounts]:
    """ItemCounts of every rubric item of a round (dimensions, the verdict and each flag;
    only the dimensions with `dimensions_only`), in one grouped query and one pass over the
    ratings in batches: memory grows with the round's tasks, not with its ratings."""
    out: dict[str, ItemCounts] = {}
    rows = gate_queries.score_value_counts(session=session, round_id=round_id, kinds=kinds)
    by_dimension: dict[str, list] = {}
    for dimension, unit, value, n in rows:
        by_dimension.setdefault(dimension, []).append((unit, value, n))
    for dimension, entries in by_dimension.items():
        units, values, n = (np.array(column) for column in zip(*entries, strict=True))
        out[dimension] = ItemCounts.of(units, values, n)
    empty = ItemCounts.of([], [])
    if dimensions_only:
        return {d.key: out.get(d.key, empty) for d in rubric.dimensions}
    flag_keys = [f.key for f in rubric.flags]
    rated = _verdict_rows(session, round_id, kinds, flag_keys)
    all_units, codes = rated[:, 0].astype(np.int64), rated[:, 2]
    voted = ~np.isnan(codes)
    out["verdict"] = ItemCounts.of(all_units[voted], codes[voted])
    for i, key in enumerate(flag_keys):
        out[f"flag:{key}"] = ItemCounts.of(all_units, rated[:, 3 + i].astype(np.int8))
    return {item: out.get(item, empty) for item, _, _ in gate_items(rubric)}


def gate_items(rubric: RubricDefinition) -> list[tuple[str, str, str]]:
    """(item, label, level) of every rubric dimension, the verdict and each flag."""
    items = [(d.key, d.label, d.level) for d in rubric.dimensions]
    items.append(("verdict", "Overall verdict", "nominal"))
    items += [(f"flag:{f.key}", f"Flag: {f.label}", "nominal") for f in rubric.flags]
    return items


def task_ratings(ratings: pd.DataFrame, scores: pd.DataFrame) -> dict[int, TaskRatings]:
    """The gate's view of each task (ratings of one round; scores may hold more): human
    ratings only, gathered in one pass over the rows."""
    humans = ratings[ratings["rater_kind"].isin(HUMAN)]
    scores = scores.merge(humans[["rating_id", "task_version_id"]], on="rating_id")
    per_task: dict[int, TaskRatings] = {}
    for tv, verdict, flags in zip(
        humans["task_version_id"].tolist(),
        humans["verdict"].tolist(),
        humans["flags"].tolist(),
        strict=True,
    ):
        task = per_task.setdefault(int(tv), TaskRatings({}, [], []))
        if isinstance(verdict, str) and verdict:  # missing: None or NaN
            task.verdicts.append(verdict)
        task.flags.append(list(flags or []))
    for tv, dimension, value in zip(
        scores["task_version_id"].tolist(),
        scores["dimension"].tolist(),
        scores["value"].tolist(),
        strict=True,
    ):
        values = per_task[int(tv)].scores.setdefault(dimension, [])
        if value == value:  # NaN: not scored
            values.append(float(value))
    return per_task
