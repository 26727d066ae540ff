"""A log's own behaviour, case by case, with intervals and a noise floor. Pure functions over a
frame of events with the columns case_id, activity, timestamp and (where the log has one) group.

Definitions (issue 36):

- ping-pong: a case whose assignment-group sequence, with consecutive repeats collapsed,
  returns to a group right after one other (A -> B -> A);
- reassignments: changes of assignment group between consecutive events of a case (events
  without a group are skipped);
- wait-user: a case with at least one waiting-for-the-user status; its count per case is the
  number of times the case enters such a status (consecutive wait events count once);
- cancel and reopen: a case with at least one such activity; where a log has no reopen
  activity but records a reopened case by its status (UCI: `Resolved` back to `Active`), a
  reopening is also an event right after one of the `reopen_from` statuses that neither is one
  of them nor closes the case;
- closed with no reply (walk-away): a case in which a wait-user status is directly followed by
  a closing activity (the ticket closed while it waited for its user);
- case length: events per case; activity distribution: the share of events per activity.

Rates carry Wilson score intervals, means per case percentile-bootstrap intervals. The noise
floor of a statistic is the 95th percentile of |half A - half B| over random splits of the
cases into two halves (for the activity distribution, of the Jensen-Shannon divergence).

>>> t = pd.Timestamp("2024-01-01", tz="UTC")
>>> events = pd.DataFrame({"case_id": list("aaaabb"), "activity": list("xwwyxz"),
...                        "timestamp": [t] * 6, "group": list("ABAACC")})
>>> cases = case_table(events, wait_user=("w",))
>>> cases[["length", "reassignments", "ping_pong", "wait_user_entries"]].to_dict("index")
{'a': {'length': 4, 'reassignments': 2, 'ping_pong': True, 'wait_user_entries': 1},
 'b': {'length': 2, 'reassignments': 0, 'ping_pong': False, 'wait_user_entries': 0}}
"""

import math
from statistics import NormalDist

import numpy as np
import pandas as pd

CONFIDENCE = 0.95
RESAMPLES = 1000  # bootstrap resamples of a mean
SPLITS = 200  # random halvings of the cases for the noise floor
SEED = 36
NO_GROUP = "not available: the log has no assignment-group attribute"


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion `successes / n` (Wilson 1927).

    Newcombe (1998), Stat. Med. 17:857-872, Table I, method 3:

    >>> [tuple(round(x, 4) for x in wilson_interval(s, n)) for s, n in [(81, 263), (15, 148)]]
    [(0.2553, 0.3662), (0.0624, 0.1605)]
    >>> [tuple(round(x, 4) for x in wilson_interval(s, n)) for s, n in [(0, 20), (1, 29)]]
    [(0.0, 0.1611), (0.0061, 0.1718)]
    """
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"a proportion needs 0 <= successes <= n and n > 0; got {successes}/{n}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_mean_interval(
    values, *, seed: int = SEED, resamples: int = RESAMPLES, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (Efron & Tibshirani 1993, ch. 13):
    `resamples` resamples with replacement, drawn from a generator seeded with `seed`.

    >>> bootstrap_mean_interval([2.0, 2.0, 2.0])
    (2.0, 2.0)
    >>> low, high = bootstrap_mean_interval(list(range(100)))
    >>> low < 49.5 < high
    True
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("the mean of no values has no interval")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // data.size)  # bounded memory: chunk x n indices at a time
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        means[start : start + size] = data[rng.integers(0, data.size, (size, data.size))].mean(1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def jensen_shannon(p, q) -> np.ndarray | float:
    """Jensen-Shannon divergence (base 2, in [0, 1]) of two count or share vectors, or of
    each row of two matrices (Lin 1991). Zero counts are allowed.

    >>> jensen_shannon([1, 0], [0, 1]), round(jensen_shannon([1, 1], [1, 0]), 4)
    (1.0, 0.3113)
    """
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    p = p / p.sum(axis=-1, keepdims=True)
    q = q / q.sum(axis=-1, keepdims=True)
    m = (p + q) / 2

    def kl(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(a > 0, a * np.log2(a / np.where(b > 0, b, 1)), 0.0)
        return terms.sum(axis=-1)

    out = np.clip((kl(p, m) + kl(q, m)) / 2, 0.0, 1.0)
    return float(out) if out.ndim == 0 else out


def ordered(events: pd.DataFrame) -> pd.DataFrame:
    """Events as plain strings, sorted by case and time (ties kept in their order)."""
    frame = events.assign(
        case_id=events["case_id"].astype("string"), activity=events["activity"].astype("string")
    )
    if "group" in frame:
        frame["group"] = frame["group"].astype("string").replace("", pd.NA)
    return frame.sort_values(["case_id", "timestamp"], kind="stable").reset_index(drop=True)


def _group_moves(frame: pd.DataFrame) -> pd.DataFrame:
    """Events that carry a group, with `moved`: the group differs from the case's previous
    group (the first group of a case is no move)."""
    held = frame.loc[frame["group"].notna(), ["case_id", "group"]]
    before = held.groupby("case_id", sort=False)["group"].shift()
    return held.assign(moved=before.notna() & (held["group"] != before), start=before.isna())


def reassignments(frame: pd.DataFrame, cases: pd.Index) -> pd.Series:
    """Changes of group between consecutive (grouped) events, per case of `cases`."""
    moves = _group_moves(frame)
    return moves.groupby("case_id")["moved"].sum().reindex(cases, fill_value=0).astype(int)


def ping_pong(frame: pd.DataFrame, cases: pd.Index) -> pd.Series:
    """Whether each case's collapsed group sequence has some A -> B -> A."""
    moves = _group_moves(frame)
    collapsed = moves[moves["moved"] | moves["start"]]
    two_back = collapsed.groupby("case_id", sort=False)["group"].shift(2)
    returned = (collapsed["group"] == two_back).fillna(False).astype(bool)
    back = collapsed.loc[returned, "case_id"].unique()
    return pd.Series(cases.isin(back), index=cases)


def status_entries(frame: pd.DataFrame, cases: pd.Index, activities) -> pd.Series:
    """How often each case enters one of `activities` (a run of them counts once)."""
    inside = frame["activity"].isin(list(activities))
    before = inside.groupby(frame["case_id"], sort=False).shift(fill_value=False)
    entered = inside & ~before.astype(bool)
    return entered.groupby(frame["case_id"]).sum().reindex(cases, fill_value=0).astype(int)


def reopenings(frame: pd.DataFrame, cases: pd.Index, reopen, reopen_from, close) -> pd.Series:
    """How often each case is reopened: entries into a `reopen` activity, plus events right
    after a `reopen_from` status that are neither such a status nor a closing activity."""
    left = frame.groupby("case_id", sort=False)["activity"].shift()
    settled = set(reopen_from) | set(close)
    back = left.isin(list(reopen_from)) & ~frame["activity"].isin(list(settled))
    leaving = back.groupby(frame["case_id"]).sum().reindex(cases, fill_value=0).astype(int)
    return status_entries(frame, cases, reopen) + leaving


def case_table(
    events: pd.DataFrame,
    *,
    wait_user=(),
    cancel=(),
    reopen=(),
    close=(),
    reopen_from=(),
) -> pd.DataFrame:
    """One row per case (index: case id, sorted): `length`; with a group column
    `reassignments` and `ping_pong`; `wait_user_entries`, `wait_user`, `cancelled`,
    `reopened` and `closed_waiting` (a wait-user status directly followed by a closing
    activity: closed with no reply) from the activities named."""
    frame = ordered(events)
    cases = pd.Index(sorted(frame["case_id"].unique()), name="case_id")
    out = pd.DataFrame(index=cases)
    out["length"] = frame.groupby("case_id").size().reindex(cases).astype(int)
    if "group" in frame and frame["group"].notna().any():
        out["reassignments"] = reassignments(frame, cases)
        out["ping_pong"] = ping_pong(frame, cases)
    out["wait_user_entries"] = status_entries(frame, cases, wait_user)
    out["wait_user"] = out["wait_user_entries"] > 0
    out["cancelled"] = status_entries(frame, cases, cancel) > 0
    out["reopened"] = reopenings(frame, cases, reopen, reopen_from, close) > 0
    out["closed_waiting"] = closed_waiting(frame, cases, wait_user, close)
    return out


def closed_waiting(frame: pd.DataFrame, cases: pd.Index, wait_user, close) -> pd.Series:
    """Whether each case has a wait-user status directly followed by a closing activity."""
    waiting = frame["activity"].isin(list(wait_user))
    following = frame.groupby("case_id", sort=False)["activity"].shift(-1)
    hit = waiting & following.isin(list(close))
    found = frame.loc[hit, "case_id"].unique()
    return pd.Series(cases.isin(found), index=cases)


def _counts(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Rows per case (index, sorted) and value of `column` (columns, sorted), as a crosstab
    would give them, by one grouped count (crosstab aggregates in Python: ten times slower)."""
    sizes = frame.groupby(["case_id", column], sort=True, observed=True).size()
    table = sizes.unstack(column, fill_value=0).astype("int64")
    return table.sort_index().sort_index(axis=1)


def activity_counts(events: pd.DataFrame) -> pd.DataFrame:
    """Events per case (rows, sorted) and activity (columns, sorted)."""
    return _counts(ordered(events), "activity")


def noise_floor(
    cases: pd.DataFrame,
    counts: pd.DataFrame,
    *,
    splits: int = SPLITS,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
    size: int | None = None,
) -> dict[str, float]:
    """The `confidence` quantile, over `splits` random halvings of the cases (a generator
    seeded with `seed`), of |mean of half A - mean of half B| for each column of `cases`, and
    of the Jensen-Shannon divergence between the halves' activity distributions (key
    `activity_distribution`, from `counts`, cases x activities in the same row order).
    With `size`, part A is `size` random cases and part B the rest: the floor for a sample of
    that size (a simulator's) against the log."""
    n = len(cases)
    if n < 2:
        raise ValueError("a noise floor needs at least two cases, to split them in halves")
    rng = np.random.default_rng(seed)
    values, matrix = cases.to_numpy(dtype=float), counts.to_numpy(dtype=float)
    half = n // 2 if size is None else size
    if not 1 <= half < n:
        raise ValueError(f"a part of {half} cases leaves no rest among {n} cases")
    gaps, divergence = [], []
    chunk = max(1, min(splits, 4_000_000 // n))  # bounded memory: chunk x n at a time
    for start in range(0, splits, chunk):
        in_a = np.zeros((min(chunk, splits - start), n))
        for row in in_a:
            row[rng.permutation(n)[:half]] = 1.0
        # half B is the rest: its sums are the totals minus half A's
        sums_a, counts_a = in_a @ values, in_a @ matrix
        sums_b, counts_b = values.sum(0) - sums_a, matrix.sum(0) - counts_a
        gaps.append(np.abs(sums_a / half - sums_b / (n - half)))
        divergence.append(np.atleast_1d(jensen_shannon(counts_a, counts_b)))
    floors = np.quantile(np.vstack(gaps), confidence, axis=0)
    out = {str(c): float(f) for c, f in zip(cases.columns, floors, strict=True)}
    out["activity_distribution"] = float(np.quantile(np.concatenate(divergence), confidence))
    return out


# metric -> (kind, column of case_table)
METRICS = {
    "ping_pong_rate": ("rate", "ping_pong"),
    "reassignments_per_case": ("mean", "reassignments"),
    "wait_user_rate": ("rate", "wait_user"),
    "wait_user_per_case": ("mean", "wait_user_entries"),
    "cancel_rate": ("rate", "cancelled"),
    "reopen_rate": ("rate", "reopened"),
    "no_reply_closure_rate": ("rate", "closed_waiting"),
    "case_length": ("mean", "length"),
}
DIGITS = 6


def _unavailable(cases: pd.DataFrame, present: set[str], names: dict) -> dict[str, str]:
    """Why a metric cannot be computed, by metric: no group column, or none of the activities
    that mean it occurs in the log."""
    out = {}
    if "reassignments" not in cases:
        out["ping_pong_rate"] = out["reassignments_per_case"] = NO_GROUP
    kinds = {
        "wait_user": ("waiting-for-the-user status", ("wait_user_rate", "wait_user_per_case")),
        "cancel": ("cancel activity", ("cancel_rate",)),
        "reopen": ("reopen activity", ("reopen_rate",)),
        "close": ("closing activity", ("no_reply_closure_rate",)),
    }
    for key, (what, metrics) in kinds.items():
        looked_for = names[key] + (names.get("reopen_from", ()) if key == "reopen" else ())
        if present & set(looked_for):
            continue
        looked = f" ({', '.join(looked_for)} never occurs)" if looked_for else ""
        out |= dict.fromkeys(metrics, f"not available: the log has no {what}{looked}")
    if "wait_user_rate" in out:  # closed while waiting needs the waiting too
        out.setdefault("no_reply_closure_rate", out["wait_user_rate"])
    return out


def _figure(kind: str, values: pd.Series, floor: float, **options) -> dict:
    """One metric's value, interval and noise floor, rounded to DIGITS places."""
    return {
        "kind": kind,
        "available": True,
        **_side(kind, values, **options),
        "noise_floor": round(floor, DIGITS),
    }


def profile(
    events: pd.DataFrame,
    *,
    wait_user=(),
    cancel=(),
    reopen=(),
    close=(),
    reopen_from=(),
    seed: int = SEED,
    resamples: int = RESAMPLES,
    splits: int = SPLITS,
    confidence: float = CONFIDENCE,
) -> dict:
    """A log's behaviour profile: each metric of METRICS with its value, interval and noise
    floor (or `available: false` and the reason), and the activity distribution (events and
    share per activity) with its noise floor. Raises ValueError for fewer than two cases."""
    names = {
        "wait_user": tuple(wait_user),
        "cancel": tuple(cancel),
        "reopen": tuple(reopen),
        "close": tuple(close),
        "reopen_from": tuple(reopen_from),
    }
    cases = case_table(events, **names)
    counts = activity_counts(events).reindex(cases.index)  # the same row order as `cases`
    floors = noise_floor(
        cases.astype(float), counts, splits=splits, seed=seed, confidence=confidence
    )
    missing = _unavailable(cases, set(counts.columns), names)
    metrics = {}
    for name, (kind, column) in METRICS.items():
        if name in missing:
            metrics[name] = {"kind": kind, "available": False, "reason": missing[name]}
            continue
        options = {"seed": seed, "resamples": resamples, "confidence": confidence}
        metrics[name] = _figure(kind, cases[column], floors[column], **options)
    totals = counts.sum().sort_values(ascending=False, kind="stable")
    distribution = {
        "events": {str(a): int(n) for a, n in totals.items()},
        "share": {str(a): round(float(n / totals.sum()), DIGITS) for a, n in totals.items()},
        "noise_floor": round(floors["activity_distribution"], DIGITS),
    }
    return {
        "cases": len(cases),
        "events": int(totals.sum()),
        "metrics": metrics,
        "activity_distribution": distribution,
        "settings": {
            "confidence": confidence,
            "resamples": resamples,
            "splits": splits,
            "seed": seed,
        },
    }


# Simulated against real -------------------------------------------------------------------


def newcombe_difference_interval(
    x1: int, n1: int, x2: int, n2: int, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Interval of the difference of two independent proportions x1/n1 - x2/n2 from their
    Wilson intervals (Newcombe 1998, Stat. Med. 17:873-890, method 10). His worked example,
    56/70 - 48/80, gives 0.0524 to 0.3339:

    >>> tuple(round(x, 4) for x in newcombe_difference_interval(56, 70, 48, 80))
    (0.0524, 0.3339)
    """
    p1, p2 = x1 / n1, x2 / n2
    (l1, u1), (l2, u2) = wilson_interval(x1, n1, confidence), wilson_interval(x2, n2, confidence)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, low), min(1.0, high)


def bootstrap_difference_interval(
    a, b, *, seed: int = SEED, resamples: int = RESAMPLES, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) - mean(b), each resampled on its own."""
    if len(a) == 0 or len(b) == 0:
        raise ValueError("a difference of means needs values on both sides")
    rng = np.random.default_rng(seed)

    def resampled_means(values) -> np.ndarray:
        data, means = np.asarray(values, dtype=float), np.empty(resamples)
        chunk = max(1, 2_000_000 // data.size)
        for start in range(0, resamples, chunk):
            size = min(chunk, resamples - start)
            drawn = rng.integers(0, data.size, (size, data.size))
            means[start : start + size] = data[drawn].mean(1)
        return means

    diffs = resampled_means(a) - resampled_means(b)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(diffs, [tail, 100 - tail])
    return float(low), float(high)


ARROW = " -> "


def directly_follows_counts(events: pd.DataFrame) -> pd.DataFrame:
    """Directly-follows pairs ("a -> b") per case (rows, sorted; cases of one event have a row
    of zeros) and pair (columns, sorted)."""
    frame = ordered(events)
    following = frame.groupby("case_id", sort=False)["activity"].shift(-1)
    pairs = frame.assign(pair=frame["activity"] + ARROW + following).dropna(subset=["pair"])
    cases = pd.Index(sorted(frame["case_id"].unique()), name="case_id")
    return _counts(pairs, "pair").reindex(cases, fill_value=0)


NO_SIMULATED_GROUP = "not available: the mapped transcripts carry no assignment group"
SHOWN_PAIRS = 30


def _side(kind: str, values: pd.Series, **options) -> dict:
    if kind == "rate":
        count = int(values.sum())
        low, high = wilson_interval(count, len(values), options["confidence"])
        extra = {"count": count}
    else:
        low, high = bootstrap_mean_interval(values, **options)
        extra = {"median": round(float(values.median()), DIGITS)}
    return {
        "value": round(float(values.mean()), DIGITS),
        "cases": len(values),
        "interval": [round(low, DIGITS), round(high, DIGITS)],
        **extra,
    }


def _gap(kind: str, simulated: pd.Series, real: pd.Series, floor: float, **options) -> dict:
    gap = float(simulated.mean() - real.mean())
    if kind == "rate":
        interval = newcombe_difference_interval(
            int(simulated.sum()), len(simulated), int(real.sum()), len(real), options["confidence"]
        )
    else:
        interval = bootstrap_difference_interval(simulated, real, **options)
    return {
        "gap": round(gap, DIGITS),
        "gap_interval": [round(x, DIGITS) for x in interval],
        "noise_floor": round(floor, DIGITS),
        "verdict": "inside" if abs(gap) <= floor + 1e-12 else "beyond",
    }


def _distribution(real: pd.DataFrame, simulated: pd.DataFrame, floor: float, shown: int | None):
    totals_real, totals_sim = real.sum(), simulated.sum()
    keys = sorted(set(totals_real.index) | set(totals_sim.index))
    a = totals_real.reindex(keys, fill_value=0).astype(float)
    b = totals_sim.reindex(keys, fill_value=0).astype(float)
    share_a, share_b = a / max(a.sum(), 1), b / max(b.sum(), 1)
    divergence = jensen_shannon(a.to_numpy(), b.to_numpy()) if a.sum() and b.sum() else 1.0
    order = (share_a + share_b).sort_values(ascending=False, kind="stable").index
    order = list(order if shown is None else order[:shown])
    return {
        "divergence": round(float(divergence), DIGITS),
        "noise_floor": round(floor, DIGITS),
        "verdict": "inside" if divergence <= floor + 1e-12 else "beyond",
        "real": {str(k): round(float(share_a[k]), DIGITS) for k in order},
        "simulated": {str(k): round(float(share_b[k]), DIGITS) for k in order},
        "only_simulated": sorted(str(k) for k in keys if a[k] == 0 and b[k] > 0),
        "kinds": len(keys),
    }


def _fitness(real: pd.Series, simulated: pd.Series, *, m: int, splits: int, **options) -> dict:
    """The fitness figure: real (a sample) against simulated, with the floor of the sample."""
    real, simulated = real.astype(float), simulated.astype(float)
    size = min(m, len(real) // 2)
    floor = noise_floor(
        real.to_frame("fitness"),
        pd.DataFrame({"case": np.ones(len(real))}),
        splits=splits,
        seed=options["seed"],
        confidence=options["confidence"],
        size=size,
    )["fitness"]
    return {
        "kind": "mean",
        "available": True,
        "real": _side("mean", real, **options),
        "simulated": _side("mean", simulated, **options),
        **_gap("mean", simulated, real, floor, **options),
        "real_sample": len(real),
    }


def compare(
    real: pd.DataFrame,
    simulated: pd.DataFrame,
    *,
    wait_user=(),
    cancel=(),
    reopen=(),
    close=(),
    reopen_from=(),
    seed: int = SEED,
    resamples: int = RESAMPLES,
    splits: int = SPLITS,
    confidence: float = CONFIDENCE,
    log_activities=None,
    fitness: tuple[pd.Series, pd.Series] | None = None,
) -> dict:
    """Each metric of METRICS for the real cases and for the simulated ones (mapped
    transcripts, one case each), the gap (simulated - real) with its interval, and the noise
    floor at the simulator's sample size: the same statistic between m random real cases and
    the rest, m the number of simulated cases (at most half the log). A gap beyond the floor
    is `beyond`: the simulator departs from the log more than the log departs from itself.
    The activity and directly-follows distributions are compared by Jensen-Shannon divergence
    against the same kind of floor. A metric is available when the log records one of its
    activities: in `log_activities` (the whole log's, when `real` is a part of it), else in
    `real`."""
    names = {
        "wait_user": tuple(wait_user),
        "cancel": tuple(cancel),
        "reopen": tuple(reopen),
        "close": tuple(close),
        "reopen_from": tuple(reopen_from),
    }
    real_cases, sim_cases = case_table(real, **names), case_table(simulated, **names)
    n, m = len(real_cases), len(sim_cases)
    if n < 2:
        raise ValueError("the real side needs at least two cases")
    if m < 1:
        raise ValueError("the simulated side has no case: map transcripts first")
    size = min(m, n // 2)
    options = {"splits": splits, "seed": seed, "confidence": confidence, "size": size}
    real_counts = activity_counts(real).reindex(real_cases.index)
    real_pairs = directly_follows_counts(real).reindex(real_cases.index, fill_value=0)
    floors = noise_floor(real_cases.astype(float), real_counts, **options)
    pair_floor = noise_floor(real_cases[["length"]].astype(float), real_pairs, **options)
    present = set(real_counts.columns if log_activities is None else log_activities)
    missing = _unavailable(real_cases, present, names)
    if "reassignments" not in sim_cases:
        for key in ("ping_pong_rate", "reassignments_per_case"):
            missing.setdefault(key, NO_SIMULATED_GROUP)
    found = {}
    side_options = {"seed": seed, "resamples": resamples, "confidence": confidence}
    for metric, (kind, column) in METRICS.items():
        if metric in missing:
            found[metric] = {"kind": kind, "available": False, "reason": missing[metric]}
            continue
        sim_values = sim_cases[column].astype(float)
        real_values = real_cases[column].astype(float)
        found[metric] = {
            "kind": kind,
            "available": True,
            "real": _side(kind, real_values, **side_options),
            "simulated": _side(kind, sim_values, **side_options),
            **_gap(kind, sim_values, real_values, floors[column], **side_options),
        }
    if fitness is not None:
        found["fitness"] = _fitness(*fitness, m=m, splits=splits, **side_options)
    sim_counts = activity_counts(simulated)
    sim_pairs = directly_follows_counts(simulated)
    return {
        "real_cases": n,
        "simulated_cases": m,
        "floor_sample": size,
        "metrics": found,
        "activity_distribution": _distribution(
            real_counts, sim_counts, floors["activity_distribution"], None
        ),
        "directly_follows": _distribution(
            real_pairs, sim_pairs, pair_floor["activity_distribution"], SHOWN_PAIRS
        ),
        "settings": {
            "confidence": confidence,
            "resamples": resamples,
            "splits": splits,
            "seed": seed,
        },
    }
