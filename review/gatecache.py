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
from itsmreview.review import agreement, queries
from itsmreview.review.models import ReviewRound, RoundCoincidence
from itsmreview.review.rubrics import RubricDefinition
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


def unit_counts(*, session: Session, round_id: int, task_version_id: int) -> UnitCounts:
    """One task version's current human counts per dimension (read before and after a
    change)."""
    out: UnitCounts = {}
    for dimension, value, n in queries.unit_score_counts(
        session=session, round_id=round_id, task_version_id=task_version_id
    ):
        out.setdefault(dimension, Counter())[float(value)] += int(n)
    return out


def undo(
    after: UnitCounts, *, added: dict[str, float | None], removed: dict[str, float | None]
) -> UnitCounts:
    """A task's counts before one rating's change, from its counts after: less the values
    the rating added, plus those of the revision it replaced (unscored values count for
    nothing)."""
    before = {dimension: Counter(counts) for dimension, counts in after.items()}
    for dimension, value in added.items():
        if value is not None:
            before.setdefault(dimension, Counter())[float(value)] -= 1
    for dimension, value in removed.items():
        if value is not None:
            before.setdefault(dimension, Counter())[float(value)] += 1
    return {d: Counter({v: n for v, n in c.items() if n > 0}) for d, c in before.items()}


def _build(
    *, session: Session, review_round: ReviewRound, rubric: RubricDefinition
) -> dict[str, RoundCoincidence]:
    """The round's rows from its ratings (one grouped query): the first time they are needed."""
    from itsmreview.review.reliability import round_counts

    counts = round_counts(
        session=session, round_id=review_round.id, rubric=rubric, dimensions_only=True
    )
    rows = {}
    for dimension in rubric.dimensions:
        found, pairs = counts[dimension.key], {}
        for row in found.counts:
            _apply(
                pairs,
                Counter({v: int(n) for v, n in zip(found.values.tolist(), row, strict=True) if n}),
                +1,
            )
        rows[dimension.key] = RoundCoincidence(
            round_id=review_round.id, dimension=dimension.key, pairs=pairs
        )
    try:
        with session.begin_nested():
            session.add_all(rows.values())
    except IntegrityError:  # another writer built them first: theirs are as good
        return {
            r.dimension: r
            for r in queries.coincidence_rows(session=session, round_id=review_round.id)
        }
    return rows


def _rows(
    *, session: Session, review_round: ReviewRound, rubric: RubricDefinition, for_update: bool
) -> dict[str, RoundCoincidence]:
    rows = {
        r.dimension: r
        for r in queries.coincidence_rows(
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


def peek(
    *,
    session: Session,
    review_round: ReviewRound,
    rubric: RubricDefinition,
    before: UnitCounts,
    after: UnitCounts,
    dimensions: tuple[str, ...],
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """The alphas of `dimensions` before and after one task's change, from the counts as
    committed now, without locking or writing them (`move` does both, later)."""
    rows = _rows(session=session, review_round=review_round, rubric=rubric, for_update=False)
    was, now = {}, {}
    for d in dimensions:
        pairs = {m: dict(bucket) for m, bucket in rows[d].pairs.items()}
        was[d] = alpha_of_pairs(pairs, rubric.dimension(d).level)
        _apply(pairs, before.get(d, Counter()), -1)
        _apply(pairs, after.get(d, Counter()), +1)
        now[d] = alpha_of_pairs(pairs, rubric.dimension(d).level)
    return was, now


def move(
    *,
    session: Session,
    review_round: ReviewRound,
    rubric: RubricDefinition,
    before: UnitCounts,
    after: UnitCounts,
    dimensions: tuple[str, ...] = (),
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Move the round's counts by one task's change (its counts before and after), reading
    them once under their row locks; returns the alphas of `dimensions` just before and just
    after the move."""
    rows = _rows(session=session, review_round=review_round, rubric=rubric, for_update=True)

    def alphas() -> dict[str, float | None]:
        return {d: alpha_of_pairs(rows[d].pairs, rubric.dimension(d).level) for d in dimensions}

    was = alphas()
    now = utcnow()
    for dimension in set(before) | set(after):
        row = rows.get(dimension)
        if row is None:  # a score of a dimension the rubric does not have
            continue
        pairs = {m: dict(bucket) for m, bucket in row.pairs.items()}
        _apply(pairs, before.get(dimension, Counter()), -1)
        _apply(pairs, after.get(dimension, Counter()), +1)
        row.pairs = pairs
        row.updated_at = now
        session.add(row)
    session.flush()
    return was, alphas()
