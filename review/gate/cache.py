"""The gate's alpha without rereading the round: each rubric dimension's coincidence counts,
stored per round and updated by each submit from the one task it changes.

Krippendorff's alpha depends on the ratings only through the coincidence matrix
o_ck = sum over tasks u of n_uc (n_uk - [c == k]) / (m_u - 1), where n_uc counts the ratings
of value c on task u and m_u its ratings. A submit changes one task's counts, so the matrix
changes by that task's contribution after minus before. The sums are kept as integers per m
(the division happens when alpha is read), so they stay exact however many submits pass.
"""

from collections import Counter

import numpy as np
from itsmreview.db import utcnow
from itsmreview.errors import Busy
from itsmreview.review.gate import agreement
from itsmreview.review.gate.queries import pending as pending_queries
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.gate.round_data import round_counts
from itsmreview.review.models import ReviewRound, RoundCoincidence
from itsmreview.review.rubrics.service import RubricDefinition
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

UnitCounts = dict[str, Counter]  # dimension -> value -> ratings of one task


def _key(value: float) -> str:
    return repr(float(value))


def contribution(counts: Counter) -> tuple[int, Counter]:
    """(m, {"c|k": n_c (n_k - [c == k])}) of one task's counts of one dimension; m < 2
    contributes nothing."""
    m = sum(counts.values())
    pairs: Counter = Counter()
    if m < 2:
        return m, pairs
    for c, n_c in counts.items():
        for k, n_k in counts.items():
            product = n_c * (n_k - (c == k))
            if product:
                pairs[f"{_key(c)}|{_key(k)}"] += product
    return m, pairs


def _apply(pairs: dict, counts: Counter, sign: int) -> None:
    m, contribution_pairs = contribution(counts)
    if m < 2:
        return
    bucket = pairs.setdefault(str(m), {})
    for key, n in contribution_pairs.items():
        total = bucket.get(key, 0) + sign * n
        if total:
            bucket[key] = total
        else:
            bucket.pop(key, None)
    if not bucket:
        pairs.pop(str(m))


def alpha_of_pairs(pairs: dict, level: str) -> float | None:
    """Alpha from stored coincidence counts; None when undefined (no pairable task, or a
    single value among the pairable ratings)."""
    matrix: dict[tuple[float, float], float] = {}
    for m, bucket in pairs.items():
        for key, n in bucket.items():
            c, k = (float(x) for x in key.split("|"))
            matrix[(c, k)] = matrix.get((c, k), 0.0) + n / (int(m) - 1)
    values = np.array(sorted({c for c, _ in matrix}), dtype=float)
    if len(values) < 2:
        return None
    index = {v: i for i, v in enumerate(values.tolist())}
    coincidences = np.zeros((len(values), len(values)))
    for (c, k), o in matrix.items():
        coincidences[index[c], index[k]] = o
    value = float(agreement.alpha_from_coincidences(coincidences, values, level))
    return None if np.isnan(value) else value


Change = tuple[UnitCounts, UnitCounts]  # one task's counts before and after


def _counted(rows) -> dict[int, UnitCounts]:
    out: dict[int, UnitCounts] = {}
    for task_version_id, dimension, value, n in rows:
        out.setdefault(int(task_version_id), {}).setdefault(dimension, Counter())[float(value)] += (
            int(n)
        )
    return out


def current_counts(*, session: Session, round_id: int, tasks) -> dict[int, UnitCounts]:
    """Each task's current human value counts per dimension (`tasks`: a select of versions)."""
    return _counted(
        pending_queries.task_score_counts(
            session=session, round_id=round_id, tasks=tasks, besides_batch=False
        )
    )


def queued_changes(
    *, session: Session, round_id: int, every_queued: bool = False
) -> dict[int, Change]:
    """Each task's counts before and after the batch's queued ratings (those marked by
    `queries.take_batch`; with `every_queued`, all queued ones): after, its current counts
    as if the other queued ratings had not come yet; before, less the values the batch's
    ratings added, plus those of the revisions they replaced (unscored values count for
    nothing). A revision queued and replaced in the same batch leaves as it came: exact for
    any number of them."""
    if every_queued:
        tasks = pending_queries.pending_tasks(round_id=round_id)
    else:
        tasks = pending_queries.pending_tasks(round_id=round_id, applying=True)
    after = _counted(
        pending_queries.task_score_counts(
            session=session, round_id=round_id, tasks=tasks, besides_batch=not every_queued
        )
    )
    added, removed = (
        _counted(
            pending_queries.batch_score_counts(
                session=session, round_id=round_id, replaced=replaced, every_queued=every_queued
            )
        )
        for replaced in (False, True)
    )
    changes = {}
    for task in set(after) | set(added) | set(removed):
        now = after.get(task, {})
        before = {dimension: Counter(counts) for dimension, counts in now.items()}
        for dimension, counts in added.get(task, {}).items():
            before.setdefault(dimension, Counter()).subtract(counts)
        for dimension, counts in removed.get(task, {}).items():
            before.setdefault(dimension, Counter()).update(counts)
        before = {d: Counter({v: n for v, n in c.items() if n > 0}) for d, c in before.items()}
        changes[task] = (before, now)
    return changes


def recomputed_pairs(
    *, session: Session, review_round: ReviewRound, rubric: RubricDefinition
) -> dict[str, dict]:
    """Each rubric dimension's counts built anew from the round's current human ratings (one
    grouped query), with the ratings still queued left out: what the stored rows must hold."""
    counts = round_counts(
        session=session, round_id=review_round.id, rubric=rubric, dimensions_only=True
    )
    # ratings still queued are applied when their turn comes: counted here as before them
    queued = list(
        queued_changes(session=session, round_id=review_round.id, every_queued=True).values()
    )
    out = {}
    for dimension in rubric.dimensions:
        found, pairs = counts[dimension.key], {}
        for row in found.counts:
            _apply(
                pairs,
                Counter({v: int(n) for v, n in zip(found.values.tolist(), row, strict=True) if n}),
                +1,
            )
        _move_pairs(pairs, dimension.key, [(after, before) for before, after in queued])
        out[dimension.key] = pairs
    return out


REBUILD_TRIES = 5


def _build(
    *, session: Session, review_round: ReviewRound, rubric: RubricDefinition
) -> dict[str, RoundCoincidence]:
    """The round's rows from its ratings: the first time they are needed. Built by an
    applier of the round (the round's gate lock held), so only submits can change what it
    reads: built again while one was queued meanwhile (its rating and queued row commit
    together; only appliers remove queued rows). Raises Busy when submits kept coming for
    every try: the transaction rolls back and the queue is applied later."""
    for _ in range(REBUILD_TRIES):
        queued = pending_queries.pending_count(session=session, round_id=review_round.id)
        pairs = recomputed_pairs(session=session, review_round=review_round, rubric=rubric)
        if pending_queries.pending_count(session=session, round_id=review_round.id) == queued:
            break
    else:
        raise Busy(
            f"round {review_round.name!r}: its agreement counts are being rebuilt while "
            "ratings come in; try again in a moment"
        )
    rows = {
        dimension: RoundCoincidence(round_id=review_round.id, dimension=dimension, pairs=found)
        for dimension, found in pairs.items()
    }
    try:
        with session.begin_nested():
            session.add_all(rows.values())
    except IntegrityError:  # another writer built them first: theirs are as good
        return {
            r.dimension: r
            for r in gate_queries.coincidence_rows(session=session, round_id=review_round.id)
        }
    return rows


def _rows(
    *, session: Session, review_round: ReviewRound, rubric: RubricDefinition, for_update: bool
) -> dict[str, RoundCoincidence]:
    rows = {
        r.dimension: r
        for r in gate_queries.coincidence_rows(
            session=session, round_id=review_round.id, for_update=for_update
        )
    }
    if {d.key for d in rubric.dimensions} <= set(rows):
        return rows
    for row in rows.values():  # a partial set (a rubric dimension added): start again
        session.delete(row)
    session.flush()
    return _build(session=session, review_round=review_round, rubric=rubric)


def ensure(*, session: Session, review_round: ReviewRound, rubric: RubricDefinition) -> None:
    """Make sure the round has its rows (a new round: empty counts)."""
    _rows(session=session, review_round=review_round, rubric=rubric, for_update=False)


def gate_alphas(
    *,
    session: Session,
    review_round: ReviewRound,
    rubric: RubricDefinition,
    dimensions: tuple[str, ...],
) -> dict[str, float | None]:
    """Alpha of each of these rubric dimensions over the round's current human ratings."""
    rows = _rows(session=session, review_round=review_round, rubric=rubric, for_update=False)
    return {d: alpha_of_pairs(rows[d].pairs, rubric.dimension(d).level) for d in dimensions}


def _move_pairs(pairs: dict, dimension: str, changes: list[Change]) -> None:
    for before, after in changes:
        _apply(pairs, before.get(dimension, Counter()), -1)
        _apply(pairs, after.get(dimension, Counter()), +1)


def move(
    *,
    session: Session,
    review_round: ReviewRound,
    rubric: RubricDefinition,
    changes: list[Change],
    dimensions: tuple[str, ...] = (),
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Move the round's counts by some tasks' changes (each task's counts before and after),
    reading them once under their row locks; returns the alphas of `dimensions` just before
    and just after the move."""
    rows = _rows(session=session, review_round=review_round, rubric=rubric, for_update=True)

    def alphas() -> dict[str, float | None]:
        return {d: alpha_of_pairs(rows[d].pairs, rubric.dimension(d).level) for d in dimensions}

    was = alphas()
    now = utcnow()
    for dimension in {d for before, after in changes for d in (*before, *after)}:
        row = rows.get(dimension)
        if row is None:  # a score of a dimension the rubric does not have
            continue
        pairs = {m: dict(bucket) for m, bucket in row.pairs.items()}
        _move_pairs(pairs, dimension, changes)
        row.pairs = pairs
        row.updated_at = now
        session.add(row)
    session.flush()
    return was, alphas()
