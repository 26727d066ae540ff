"""Agreement of a review round and the approval gate applied to its tasks (service layer)."""

import warnings
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.db import utcnow
from itsmreview.errors import InvalidInput, NotFound
from itsmreview.ledger.chain import content_digest
from itsmreview.ledger.service import append_entries, append_entry
from itsmreview.review import agreement, gatecache, queries
from itsmreview.review.approval import Decision, GateConfig, TaskRatings, decide, weak_alphas
from itsmreview.review.models import Adjudication, ReviewRound, Rubric, Verdict
from itsmreview.review.rubrics.service import RubricDefinition
from sqlalchemy.orm.attributes import set_committed_value
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
    rounds = queries.list_rounds(session=session)
    if not rounds:
        raise NotFound("no review round exists yet")
    if name_or_id is None:
        return rounds[-1]
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
        queries.current_ratings_wide(session=session, round_id=review_round.id),
        queries.scores_long(session=session, round_id=review_round.id),
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
    batches = queries.verdicts_and_flags(
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
    packed = queries.packed_ratings(
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
                queries.ratings_by_rater(
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
    rows = queries.score_value_counts(session=session, round_id=round_id, kinds=kinds)
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
        if detail and queries.has_model_ratings(session=session, round_id=review_round.id)
        else None
    )
    names = {}
    if long is not None:
        raters = sorted({int(r) for ratings in long.values() for r in np.unique(ratings.raters)})
        names = queries.experts_by_id(session=session, ids=raters)
    model_names = (
        queries.experts_by_id(
            session=session, ids=sorted(map(int, data.ratings["expert_id"].unique()))
        )
        if data is not None
        else {}
    )
    results = []
    for item, label, level in gate_items(rubric):
        found = counts[item]
        if found.empty:
            results.append(
                ItemAgreement(
                    item,
                    label,
                    agreement.Alpha(None, level, 0, 0, reason="no ratings yet"),
                    None,
                    {},
                    {},
                )
            )
            continue
        result = agreement.alpha_of_counts(
            found.counts, found.values, level, bootstrap=bootstrap, seed=seed
        )
        scale = None
        if item in {d.key for d in rubric.dimensions}:
            low, high = rubric.dimension(item).scale
            scale = list(range(low, high + 1))
        weights = "identity" if level == "nominal" else "quadratic"
        ac = agreement.gwet_of_counts(found.counts, found.values, weights, categories=scale)
        loo, bias, models = {}, {}, {}
        if long is not None:
            ratings = long[item]
            loo = {
                names.get(r, str(r)): v
                for r, v in agreement.leave_one_rater_out_long(
                    ratings.raters, ratings.units, ratings.values, level
                ).items()
            }
            bias = {
                names.get(r, str(r)): v
                for r, v in agreement.rater_bias_long(
                    ratings.raters, ratings.units, ratings.values
                ).items()
            }
        if data is not None:
            models = model_agreement(
                data,
                item,
                level,
                bootstrap=bootstrap,
                seed=seed,
                names=model_names,
            )
        results.append(ItemAgreement(item, label, result, ac, loo, bias, models))
    return review_round, results


def _task_ratings(data: RoundData) -> dict[int, TaskRatings]:
    return task_ratings(data.ratings, data.scores)


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


def alpha_reached(config: GateConfig, alphas: dict[str, float | None]) -> bool:
    """Whether the round's agreement lets tasks be approved: the only way alpha enters a
    task's status (a task's reasons quote the values, its status does not)."""
    return not weak_alphas(config, alphas)


def gate_decisions(
    *, session: Session, data: RoundData
) -> tuple[pd.DataFrame, dict[int, Decision]]:
    """The gate's decision for every task of the round, without storing anything: the
    round's tasks with their stored status, and task version id -> decision."""
    config = gate_config(data.review_round, data.rubric)
    round_alpha = gating_alphas(session=session, review_round=data.review_round, rubric=data.rubric)
    ratings = _task_ratings(data)
    adjudicated = queries.adjudications_of_round(session=session, round_id=data.review_round.id)
    failed = queries.failed_checks(session=session, round_id=data.review_round.id)
    tasks = queries.round_task_statuses(session=session, round_id=data.review_round.id)
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
    _queue_decided(session, data.review_round.id, tasks.itertuples(), decisions, whole=True)
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


def _queue_decided(
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
        if queries.round_has_status(
            session=session, round_id=round_id, status="adjudication", besides=tasks
        ):
            return  # tasks wait that the queue does not hold yet: built whole when read
        _mark_queue_built(session, round_id)  # no other task waits: the queue starts here
    now = utcnow()
    queries.clear_adjudication_queue(
        session=session, round_id=round_id, tasks=None if whole else tasks
    )
    queries.add_to_adjudication_queue(
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


def build_adjudication_queue(*, session: Session, review_round: ReviewRound) -> int:
    """Build the round's adjudication queue from its stored statuses (the tasks waiting for
    a lead) and the gate's reasons for each, and mark it built: once per round, the first
    time it is read (rounds decided before the queue existed). Takes the round's gate lock,
    so no applier changes a status meanwhile. Returns how many tasks wait."""
    queries.lock_gate(session=session, round_id=review_round.id)
    if queue_built_at(session=session, round_id=review_round.id) is not None:
        return queries.adjudication_queue_count(session=session, round_id=review_round.id)
    tasks, reasons = _waiting_with_reasons(session, review_round)
    decisions = {v: Decision("adjudication", r) for v, r in reasons.items()}
    _queue_decided(session, review_round.id, tasks.itertuples(), decisions, whole=True)
    return len(decisions)


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
    queries.store_statuses(session=session, versions=versions, tasks=tasks, at=now)
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
    for version_id, verdict, flags in queries.verdicts_and_flags_of_tasks(
        session=session, round_id=review_round.id, tasks=tasks, kinds=HUMAN
    ):
        rated.setdefault(int(version_id), []).append((verdict, flags))
    adjudicated = queries.adjudications_of_round(
        session=session, round_id=review_round.id, tasks=tasks
    )
    failed = queries.failed_checks(session=session, tasks=tasks)
    decisions, decided = {}, []
    for row in queries.version_status_rows(session=session, round_id=review_round.id, tasks=tasks):
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
    _queue_decided(session, review_round.id, decided, decisions, tasks=tasks)
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
    tasks = queries.one_version(task_version_id)
    return decide_tasks(
        session=session,
        review_round=review_round,
        config=config,
        alphas=alphas,
        counts=gatecache.current_counts(session=session, round_id=review_round.id, tasks=tasks),
        tasks=tasks,
        actors={task_version_id: actor_id},
    )[task_version_id]


def adjudicate(
    *,
    session: Session,
    actor: User,
    task_version_id: int,
    decision: Verdict | str,
    reason: str,
    round_name: str | int | None = None,
) -> Decision:
    """Record a lead's decision on a task of the round, with a reason, and apply it."""
    require_role(actor, Role.lead)
    if not reason.strip():
        raise InvalidInput("an adjudication needs a reason")
    try:
        decision = Verdict(decision)
    except ValueError:
        raise InvalidInput(f"decision {decision!r} is not one of accept, revise, reject") from None
    review_round = find_round(session, round_name)
    if task_version_id not in queries.round_task_ids(session=session, round_id=review_round.id):
        raise NotFound(f"task version {task_version_id} is not in round {review_round.name!r}")
    adjudication = Adjudication(
        round_id=review_round.id,
        task_version_id=task_version_id,
        lead_id=actor.id,
        decision=decision,
        reason=reason.strip(),
    )
    session.add(adjudication)
    session.flush()
    append_entry(
        session=session,
        artifact_type="adjudication",
        artifact_id=str(adjudication.id),
        action="adjudicate",
        source_kind="expert",
        actor_id=actor.id,
        reference=f"round {review_round.name}",
        payload={
            "task_version_id": task_version_id,
            "decision": str(decision),
            "content_sha256": content_digest(adjudication_content(adjudication)),
        },
    )
    config, rubric = current_gate(session=session, round_name=review_round.id)
    return redecide_task(
        session=session,
        review_round=review_round,
        task_version_id=task_version_id,
        config=config,
        alphas=gating_alphas(session=session, review_round=review_round, rubric=rubric),
        actor_id=actor.id,
    )


def adjudication_content(adjudication: Adjudication) -> dict:
    """What an adjudication's ledger entry commits to."""
    return {
        "round_id": adjudication.round_id,
        "task_version_id": adjudication.task_version_id,
        "lead_id": adjudication.lead_id,
        "decision": str(adjudication.decision),
        "reason": adjudication.reason,
    }


def _waiting_with_reasons(
    session: Session, review_round: ReviewRound
) -> tuple[pd.DataFrame, dict[int, list[str]]]:
    """The round's tasks whose stored status is adjudication, and the gate's reasons for
    each, decided again from their own ratings (not the round's)."""
    rubric = RubricDefinition.model_validate(session.get(Rubric, review_round.rubric_id).definition)
    tasks = queries.round_task_statuses(
        session=session, round_id=review_round.id, status="adjudication"
    )
    waiting = queries.round_versions_with_status(round_id=review_round.id, status="adjudication")
    per_task = task_ratings(
        queries.current_ratings_wide(
            session=session, round_id=review_round.id, task_version_id=waiting
        ),
        queries.scores_long(session=session, round_id=review_round.id, task_version_id=waiting),
    )
    config = gate_config(review_round, rubric)
    alphas = gating_alphas(session=session, review_round=review_round, rubric=rubric)
    adjudicated = queries.adjudications_of_round(session=session, round_id=review_round.id)
    reasons = {
        int(v): decide(
            per_task.get(int(v), TaskRatings({}, [], [])), config, alphas, adjudicated.get(int(v))
        ).reasons
        for v in tasks["task_version_id"]
    }
    return tasks, reasons


@dataclass
class QueuePage:
    """One page of a round's adjudication queue as stored."""

    rows: pd.DataFrame  # task_version_id, external_id, title, reasons, decided_at
    total: int  # tasks waiting in the round
    matching: int  # of them, those the search finds
    built_at: object  # when the queue was built (None: not built yet)
    changed_at: object  # when a task last came into it (None: empty)


def adjudication_queue(
    *,
    session: Session,
    actor: User,
    round_name: str | int | None = None,
    search: str = "",
    page: int = 0,
    per_page: int = 25,
) -> QueuePage:
    """The round's tasks waiting for a lead's adjudication, with the gate's reasons, as the
    gate stored them: one page (`page` from 0) of those whose id, title or reasons hold
    `search`, in task order. Reads the materialised queue only. Leads only."""
    require_role(actor, Role.lead)
    review_round = find_round(session, round_name)
    built_at = queue_built_at(session=session, round_id=review_round.id)
    if built_at is None:
        empty = pd.DataFrame(
            columns=["task_version_id", "external_id", "title", "reasons", "decided_at"]
        )
        return QueuePage(empty, 0, 0, None, None)
    search = search.strip()
    total = queries.adjudication_queue_count(session=session, round_id=review_round.id)
    matching = (
        queries.adjudication_queue_count(session=session, round_id=review_round.id, search=search)
        if search
        else total
    )
    last_page = max(0, (matching - 1) // per_page)
    rows = queries.adjudication_queue_page(
        session=session,
        round_id=review_round.id,
        search=search or None,
        offset=min(max(0, page), last_page) * per_page,
        limit=per_page,
    )
    changed_at = queries.adjudication_queue_newest(session=session, round_id=review_round.id)
    return QueuePage(rows, total, matching, built_at, changed_at)


def disagreements(
    *, session: Session, actor: User, round_name: str | int | None = None
) -> pd.DataFrame:
    """Every task of the round waiting for adjudication, with the gate's reasons, decided
    again from the round's ratings (what the stored queue must equal; pages read the queue,
    `adjudication_queue`). Leads only. Columns task_version_id, task_id, external_id,
    title, status, version, is_newest, reasons."""
    require_role(actor, Role.lead)
    review_round = find_round(session, round_name)
    tasks, reasons = _waiting_with_reasons(session, review_round)
    tasks["reasons"] = ["; ".join(reasons[int(v)]) for v in tasks["task_version_id"]]
    return tasks.reset_index(drop=True)


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
    times = queries.submission_times(session=session, round_id=review_round.id)
    if not times:
        return pd.DataFrame(columns=["day", "ratings", "alpha"])
    all_days = pd.to_datetime(pd.Series(times), utc=True).dt.floor("D")
    rows = queries.item_values_with_times(
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
