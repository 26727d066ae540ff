"""A log's behaviour profile (itsmreview.realism.metrics): each statistic against an independent
computation (the closed Wilson formula or statsmodels, scipy, plain Python over lists) and
hand-worked tiny logs."""

import math
import random
from itertools import groupby

import numpy as np
import pandas as pd
import pytest
from itsmreview.realism import metrics
from itsmreview.realism.vocabulary import vocabulary_for
from scipy import stats
from scipy.spatial.distance import jensenshannon

T0 = pd.Timestamp("2024-01-01", tz="UTC")
WAIT = "Accepted-Wait - User"


def _log(cases: dict[str, list[tuple[str, str | None]]]) -> pd.DataFrame:
    """Events from {case: [(activity, group), ...]}, one minute apart, in that order."""
    rows = [
        (case, activity, T0 + pd.Timedelta(minutes=i), group)
        for case, steps in cases.items()
        for i, (activity, group) in enumerate(steps)
    ]
    return pd.DataFrame(rows, columns=["case_id", "activity", "timestamp", "group"])


# --- intervals -----------------------------------------------------------------------------


def _wilson_closed(s: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson (1927) as (2np + z^2 -/+ z sqrt(z^2 + 4np(1-p))) / (2(n + z^2)), z from scipy."""
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    p = s / n
    root = z * math.sqrt(z * z + 4 * n * p * (1 - p))
    return (2 * n * p + z * z - root) / (2 * (n + z * z)), (2 * n * p + z * z + root) / (
        2 * (n + z * z)
    )


@pytest.mark.parametrize(
    ("s", "n"), [(0, 1), (0, 20), (1, 29), (15, 148), (81, 263), (263, 263), (7, 10), (3, 7554)]
)
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_equals_an_independent_computation(s, n, confidence):
    ours = metrics.wilson_interval(s, n, confidence)
    try:
        from statsmodels.stats.proportion import proportion_confint
    except ImportError:  # not installed here: the closed formula, computed another way
        theirs = _wilson_closed(s, n, confidence)
    else:
        theirs = proportion_confint(s, n, alpha=1 - confidence, method="wilson")
    assert ours == pytest.approx(theirs, abs=1e-12)


def test_wilson_refuses_impossible_proportions():
    for s, n in [(1, 0), (-1, 5), (6, 5)]:
        with pytest.raises(ValueError, match="0 <= successes <= n"):
            metrics.wilson_interval(s, n)


def test_the_bootstrap_is_seeded_and_agrees_with_scipy():
    values = np.random.default_rng(3).poisson(1.3, 800)
    ours = metrics.bootstrap_mean_interval(values, seed=5, resamples=4000)
    assert ours == metrics.bootstrap_mean_interval(values, seed=5, resamples=4000)
    assert ours != metrics.bootstrap_mean_interval(values, seed=6, resamples=4000)
    theirs = stats.bootstrap(
        (values,), np.mean, method="percentile", n_resamples=4000, random_state=1
    ).confidence_interval
    se = values.std(ddof=1) / math.sqrt(len(values))
    assert ours[0] == pytest.approx(theirs.low, abs=0.15 * se)
    assert ours[1] == pytest.approx(theirs.high, abs=0.15 * se)
    assert ours[0] < values.mean() < ours[1]


def test_jensen_shannon_equals_scipy():
    rng = np.random.default_rng(8)
    for _ in range(20):
        p, q = rng.integers(0, 50, 7), rng.integers(0, 50, 7)
        p[rng.integers(7)] = 0  # zero cells on one side only
        q[0] += 1
        p[1] += 1
        assert metrics.jensen_shannon(p, q) == pytest.approx(jensenshannon(p, q, base=2) ** 2)
    rows = metrics.jensen_shannon(np.array([[1, 0], [1, 1]]), np.array([[0, 1], [1, 1]]))
    assert rows.tolist() == pytest.approx([1.0, 0.0])


# --- case statistics -------------------------------------------------------------------------


def test_hand_worked_cases():
    events = _log(
        {
            # A B A: ping-pong, 2 reassignments; two waits (the repeat inside the first counts once)
            "c1": [("x", "A"), (WAIT, "A"), (WAIT, "A"), ("x", "B"), (WAIT, "A"), ("y", "A")],
            # A A B B C: no return, 2 reassignments
            "c2": [("x", "A"), ("x", "A"), ("x", "B"), ("x", "B"), ("x", "C")],
            # A B C A: returns, but not right after one other: no ping-pong, 3 reassignments
            "c3": [("x", "A"), ("x", "B"), ("x", "C"), ("x", "A")],
            # A (none) A B (none) A: groups missing are skipped: A B A, ping-pong, 2 moves
            "c4": [("x", "A"), ("x", None), ("x", "A"), ("x", "B"), ("x", ""), ("x", "A")],
            # one event, cancelled
            "c5": [("Completed-Cancelled", "A")],
        }
    )
    cases = metrics.case_table(events, wait_user=(WAIT,), cancel=("Completed-Cancelled",))
    assert cases["length"].tolist() == [6, 5, 4, 6, 1]
    assert cases["reassignments"].tolist() == [2, 2, 3, 2, 0]
    assert cases["ping_pong"].tolist() == [True, False, False, True, False]
    assert cases["wait_user_entries"].tolist() == [2, 0, 0, 0, 0]
    assert cases["cancelled"].tolist() == [False, False, False, False, True]
    assert not cases["reopened"].any()


def test_events_are_read_in_time_order_whatever_the_row_order():
    events = _log({"c": [("x", "A"), ("x", "B"), ("x", "A")]}).iloc[::-1]
    cases = metrics.case_table(events)
    assert cases.loc["c", "ping_pong"] and cases.loc["c", "reassignments"] == 2


def _random_log(seed: int, n_cases: int = 300) -> pd.DataFrame:
    rng = random.Random(seed)
    steps = {}
    for c in range(n_cases):
        steps[f"case-{c:04d}"] = [
            (rng.choice(["x", "y", WAIT, "z"]), rng.choice(["A", "B", "C", None]))
            for _ in range(rng.randint(1, 12))
        ]
    return _log(steps).sample(frac=1, random_state=seed)  # rows shuffled


def _by_lists(events: pd.DataFrame) -> pd.DataFrame:
    """The same statistics another way: each case's lists, walked in plain Python."""
    frame = events.sort_values("timestamp", kind="stable")
    lists = frame.groupby("case_id").agg(list)
    out = {}
    for case, row in lists.iterrows():
        groups = [g for g in row["group"] if isinstance(g, str) and g]
        collapsed = [g for g, _ in groupby(groups)]
        acts = row["activity"]
        out[case] = {
            "length": len(acts),
            "reassignments": sum(a != b for a, b in zip(groups, groups[1:], strict=False)),
            "ping_pong": any(collapsed[i] == collapsed[i + 2] for i in range(len(collapsed) - 2)),
            "wait_user_entries": sum(
                1 for i, a in enumerate(acts) if a == WAIT and (i == 0 or acts[i - 1] != WAIT)
            ),
        }
    return pd.DataFrame.from_dict(out, orient="index").sort_index()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_case_statistics_equal_an_independent_computation(seed):
    events = _random_log(seed)
    ours = metrics.case_table(events, wait_user=(WAIT,))
    theirs = _by_lists(events)
    for column in theirs.columns:
        assert ours[column].tolist() == theirs[column].tolist(), column
    found = metrics.profile(events, wait_user=(WAIT,), resamples=200, splits=50)["metrics"]
    assert found["ping_pong_rate"]["count"] == int(theirs["ping_pong"].sum())
    assert found["reassignments_per_case"]["value"] == round(theirs["reassignments"].mean(), 6)
    low, high = found["ping_pong_rate"]["interval"]
    expected = _wilson_closed(int(theirs["ping_pong"].sum()), len(theirs), 0.95)
    assert (low, high) == pytest.approx(expected, abs=1e-6)


# --- noise floor ---------------------------------------------------------------------------


def test_the_noise_floor_equals_a_loop_over_the_same_halves():
    events = _random_log(4, n_cases=101)
    cases = metrics.case_table(events, wait_user=(WAIT,)).astype(float)
    counts = metrics.activity_counts(events)
    ours = metrics.noise_floor(cases, counts, splits=60, seed=11)
    rng = np.random.default_rng(11)
    gaps: dict[str, list[float]] = {c: [] for c in [*cases.columns, "activity_distribution"]}
    for _ in range(60):
        order = rng.permutation(len(cases))
        a, b = order[: len(cases) // 2], order[len(cases) // 2 :]
        for column in cases.columns:
            values = cases[column].to_numpy()
            gaps[column].append(abs(values[a].mean() - values[b].mean()))
        half_a, half_b = counts.iloc[a].sum().to_numpy(), counts.iloc[b].sum().to_numpy()
        gaps["activity_distribution"].append(jensenshannon(half_a, half_b, base=2) ** 2)
    for key, found in gaps.items():
        assert ours[key] == pytest.approx(np.quantile(found, 0.95), abs=1e-12), key


def test_the_noise_floor_of_a_rate_is_about_its_sampling_spread():
    """Two halves of n/2 cases of a rate p differ by about 1.96 sqrt(2 p (1-p) / (n/2))."""
    rng = np.random.default_rng(2)
    cases = pd.DataFrame({"flag": (rng.random(4000) < 0.2).astype(float)})
    counts = pd.DataFrame({"a": np.ones(4000)})
    floor = metrics.noise_floor(cases, counts, splits=400, seed=1)["flag"]
    expected = 1.96 * math.sqrt(2 * 0.2 * 0.8 / 2000)
    assert 0.8 * expected < floor < 1.2 * expected


def test_the_noise_floor_needs_two_cases():
    one = _log({"c": [("x", "A")]})
    with pytest.raises(ValueError, match="at least two cases"):
        metrics.profile(one)


# --- the profile ---------------------------------------------------------------------------


def test_without_a_group_ping_pong_and_reassignments_are_not_available():
    events = _random_log(5).drop(columns=["group"])
    found = metrics.profile(events, wait_user=(WAIT,), resamples=100, splits=20)["metrics"]
    for name in ("ping_pong_rate", "reassignments_per_case"):
        assert found[name] == {
            "kind": found[name]["kind"],
            "available": False,
            "reason": "not available: the log has no assignment-group attribute",
        }
    assert found["wait_user_rate"]["available"] and found["case_length"]["available"]
    assert "no reopen activity" in found["reopen_rate"]["reason"]
    named = metrics.profile(events, cancel=("Cancel",), resamples=100, splits=20)["metrics"]
    assert named["cancel_rate"]["reason"] == (
        "not available: the log has no cancel activity (Cancel never occurs)"
    )


def test_the_profile_is_stable_for_a_seed_and_its_distribution_adds_up():
    events = _random_log(6)
    first = metrics.profile(events, wait_user=(WAIT,), resamples=200, splits=40, seed=3)
    assert first == metrics.profile(events, wait_user=(WAIT,), resamples=200, splits=40, seed=3)
    distribution = first["activity_distribution"]
    assert sum(distribution["events"].values()) == len(events) == first["events"]
    assert sum(distribution["share"].values()) == pytest.approx(1, abs=1e-5)
    shown = [m for m in first["metrics"].values() if m["available"]]
    assert len(shown) == 5  # no cancel or reopen activity named
    for found in shown:
        low, high = found["interval"]
        assert low <= found["value"] <= high and found["noise_floor"] >= 0


def test_the_vocabulary_follows_the_preset_and_the_options():
    bpi = vocabulary_for("bpi2013", ["Involved ST", "ST Level"])
    assert (bpi.group, bpi.wait_user, bpi.cancel, bpi.reopen) == (
        "Involved ST",
        (WAIT,),
        ("Completed-Cancelled",),
        (),
    )
    mine = vocabulary_for("bpi2013", ["Involved ST", "ST Level"], group="ST Level", reopen=("R",))
    assert (mine.group, mine.reopen, mine.source) == (
        "ST Level",
        ("R",),
        "preset bpi2013 and options",
    )
    assert vocabulary_for("bpi2013", []).group is None  # imported without the team column
    with pytest.raises(ValueError, match="not a role attribute"):
        vocabulary_for(None, ["priority"], group="team")


# --- the real BPI 2013 log -------------------------------------------------------------------


def _bpi2013_by_rows(path) -> dict:
    """Per case of the raw CSV (csv module, no pandas): events in time order (ties in file
    order), then the statistics over plain lists."""
    import csv
    import gzip
    from datetime import datetime

    rows: dict[str, list] = {}
    with gzip.open(path, "rt", encoding="utf-8-sig", newline="") as handle:
        for i, row in enumerate(csv.DictReader(handle)):
            when = datetime.fromisoformat(row["Change Date+Time"])
            rows.setdefault(row["SR Number"], []).append((when, i, row))
    totals = {"cases": 0, "ping_pong": 0, "reassignments": 0, "wait_user": 0, "entries": 0}
    totals |= {"cancelled": 0, "events": 0, "closed_waiting": 0}
    closing = {"Completed-Resolved", "Completed-Closed"}
    for events in rows.values():
        events.sort(key=lambda e: (e[0], e[1]))
        acts = [r["Activity"] for _, _, r in events]
        teams = [r["Involved ST"] for _, _, r in events if r["Involved ST"]]
        collapsed = [t for t, _ in groupby(teams)]
        entries = sum(
            1 for i, a in enumerate(acts) if a == WAIT and (i == 0 or acts[i - 1] != WAIT)
        )
        totals["cases"] += 1
        totals["events"] += len(acts)
        totals["reassignments"] += sum(a != b for a, b in zip(teams, teams[1:], strict=False))
        totals["ping_pong"] += any(
            collapsed[i] == collapsed[i + 2] for i in range(len(collapsed) - 2)
        )
        totals["entries"] += entries
        totals["wait_user"] += entries > 0
        totals["cancelled"] += "Completed-Cancelled" in acts
        totals["closed_waiting"] += any(
            a == WAIT and b in closing for a, b in zip(acts, acts[1:], strict=False)
        )
    return totals


@pytest.mark.realdata
def test_the_real_bpi2013_profile_equals_a_count_over_the_raw_rows(real_file):
    """BPI 2013 keeps no counter of its own (no reassignment or reopen count column, unlike
    UCI's), so the check is a count over the raw CSV rows."""
    from itsmreview.coverage.eventlog import PRESETS, read_log

    path = real_file("logs", "bpi2013_incidents.csv.gz")
    events, _ = read_log(path, PRESETS["bpi2013"])
    vocab = vocabulary_for("bpi2013", list(PRESETS["bpi2013"].roles))
    frame = events[["case_id", "activity", "timestamp", f"role:{vocab.group}"]]
    frame = frame.rename(columns={f"role:{vocab.group}": "group"})
    found = metrics.profile(
        frame, wait_user=vocab.wait_user, cancel=vocab.cancel, close=vocab.close
    )
    theirs = _bpi2013_by_rows(path)
    assert (found["cases"], found["events"]) == (theirs["cases"], theirs["events"]) == (7554, 65533)
    m = found["metrics"]
    assert m["ping_pong_rate"]["count"] == theirs["ping_pong"]
    assert m["wait_user_rate"]["count"] == theirs["wait_user"]
    assert m["cancel_rate"]["count"] == theirs["cancelled"] == 1
    assert m["no_reply_closure_rate"]["count"] == theirs["closed_waiting"] > 0
    n = theirs["cases"]
    for name, total in [
        ("reassignments_per_case", "reassignments"),
        ("wait_user_per_case", "entries"),
        ("case_length", "events"),
    ]:
        assert m[name]["value"] == pytest.approx(theirs[total] / n, abs=1e-6), name
    assert found["activity_distribution"]["events"][WAIT] == 4217
    assert m["reopen_rate"]["available"] is False
    # the halves of 7,554 real cases differ little: each floor is below the value it guards
    for name in ("ping_pong_rate", "wait_user_rate", "reassignments_per_case", "case_length"):
        assert 0 < m[name]["noise_floor"] < m[name]["value"], name
