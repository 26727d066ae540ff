"""A simulator against a log: the comparison's intervals, floors and distributions checked
against independent code (statsmodels, scipy, pm4py, plain loops); the mapping spec's rules
and errors."""

import random
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pm4py
import pytest
from itsmreview.realism import metrics
from itsmreview.realism.mapping import (
    SpecError,
    load_spec,
    map_messages,
    packaged_specs,
    parse_spec,
    simulator_name,
)
from scipy import stats
from scipy.spatial.distance import jensenshannon
from statsmodels.stats.proportion import confint_proportions_2indep

T0 = pd.Timestamp("2024-01-01", tz="UTC")
WAIT = "Accepted-Wait - User"


def _log(cases: dict[str, list[tuple[str, str | None]]]) -> pd.DataFrame:
    rows = [
        (case, activity, T0 + pd.Timedelta(minutes=i), group)
        for case, steps in cases.items()
        for i, (activity, group) in enumerate(steps)
    ]
    return pd.DataFrame(rows, columns=["case_id", "activity", "timestamp", "group"])


def _random_log(seed: int, n_cases: int, wait_share: float = 0.3) -> pd.DataFrame:
    rng = random.Random(seed)
    steps = {}
    for c in range(n_cases):
        acts = [rng.choice(["open", "work", "resolve"]) for _ in range(rng.randint(1, 8))]
        if rng.random() < wait_share:
            acts.insert(rng.randrange(len(acts) + 1), WAIT)
        steps[f"{seed}-{c:04d}"] = [(a, rng.choice("ABC")) for a in acts]
    return _log(steps)


# --- intervals -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x1", "n1", "x2", "n2"),
    [
        (56, 70, 48, 80),
        (9, 10, 3, 10),
        (6, 7, 2, 7),
        (5, 56, 0, 29),
        (0, 10, 0, 20),
        (3, 17, 40, 888),
    ],
)
def test_the_gap_of_two_rates_equals_statsmodels_newcombe(x1, n1, x2, n2):
    ours = metrics.newcombe_difference_interval(x1, n1, x2, n2)
    theirs = confint_proportions_2indep(x1, n1, x2, n2, method="newcomb", compare="diff")
    assert ours == pytest.approx(theirs, abs=1e-9)


def test_the_gap_of_two_means_agrees_with_scipys_bootstrap():
    rng = np.random.default_rng(5)
    a, b = rng.poisson(2.0, 60).astype(float), rng.poisson(3.0, 400).astype(float)
    ours = metrics.bootstrap_difference_interval(a, b, resamples=4000, seed=3)
    theirs = stats.bootstrap(
        (a, b),
        lambda x, y, axis: x.mean(axis) - y.mean(axis),
        method="percentile",
        n_resamples=4000,
        random_state=np.random.default_rng(9),
    ).confidence_interval
    assert ours[0] == pytest.approx(theirs.low, abs=0.08)
    assert ours[1] == pytest.approx(theirs.high, abs=0.08)
    assert ours[0] < a.mean() - b.mean() < ours[1]


# --- distributions -------------------------------------------------------------------------


def test_directly_follows_counts_equal_pm4pys_dfg():
    events = _random_log(2, 80)
    ours = metrics.directly_follows_counts(events).sum()
    frame = pm4py.format_dataframe(
        events.assign(timestamp=events["timestamp"].dt.tz_localize(None)),
        case_id="case_id",
        activity_key="activity",
        timestamp_key="timestamp",
    )
    dfg, _, _ = pm4py.discover_dfg(frame)
    theirs = {f"{a}{metrics.ARROW}{b}": n for (a, b), n in dfg.items()}
    assert {k: int(v) for k, v in ours.items() if v} == theirs


# --- the comparison ------------------------------------------------------------------------


def _split_floor(values: np.ndarray, size: int) -> float:
    """The exact 95% quantile of |mean(part) - mean(rest)| over every part of `size` cases."""
    gaps = [
        abs(values[list(part)].mean() - np.delete(values, list(part)).mean())
        for part in combinations(range(len(values)), size)
    ]
    return float(np.quantile(gaps, 0.95))


def test_the_floor_is_that_of_a_sample_as_large_as_the_simulators():
    real = _random_log(1, 12)
    simulated = _random_log(7, 3)
    report = metrics.compare(real, simulated, wait_user=(WAIT,), splits=20000, seed=4)
    cases = metrics.case_table(real, wait_user=(WAIT,))
    assert report["floor_sample"] == 3
    for metric, column in (("wait_user_rate", "wait_user"), ("case_length", "length")):
        exact = _split_floor(cases[column].to_numpy(dtype=float), 3)
        assert report["metrics"][metric]["noise_floor"] == pytest.approx(exact, rel=0.05), metric


def test_a_simulator_that_never_waits_is_beyond_the_floor_and_the_figures_add_up():
    real = _random_log(3, 2000, wait_share=0.4)
    simulated = _random_log(4, 300, wait_share=0.0)
    report = metrics.compare(real, simulated, wait_user=(WAIT,), seed=1, splits=200)
    wait = report["metrics"]["wait_user_rate"]
    real_rate = real.groupby("case_id")["activity"].agg(lambda a: WAIT in set(a)).mean()
    assert wait["real"]["value"] == pytest.approx(real_rate, abs=1e-6)
    assert wait["simulated"]["value"] == 0.0
    assert wait["gap"] == pytest.approx(-real_rate, abs=1e-6)
    assert wait["verdict"] == "beyond"
    assert wait["gap_interval"][1] < 0
    # same process otherwise: the case length is inside the floor
    length = report["metrics"]["case_length"]
    assert abs(length["gap"]) < length["noise_floor"] * 3
    # the activity distribution: the divergence of the totals, as scipy computes it
    real_totals = real["activity"].value_counts()
    sim_totals = simulated["activity"].value_counts().reindex(real_totals.index, fill_value=0)
    expected = jensenshannon(real_totals, sim_totals, base=2) ** 2
    assert report["activity_distribution"]["divergence"] == pytest.approx(expected, abs=1e-6)
    assert report["activity_distribution"]["verdict"] == "beyond"
    assert report["metrics"]["cancel_rate"]["available"] is False


def test_a_simulator_drawn_from_the_log_itself_stays_mostly_inside_the_floor():
    real = _random_log(5, 3000)
    sample = real[real["case_id"].isin(sorted(set(real["case_id"]))[:200])]
    report = metrics.compare(real, sample, wait_user=(WAIT,), seed=2)
    verdicts = [m["verdict"] for m in report["metrics"].values() if m["available"]]
    assert verdicts.count("inside") >= len(verdicts) - 1
    assert report["directly_follows"]["verdict"] == "inside"


def test_without_groups_on_the_simulated_side_the_group_metrics_say_why():
    real = _random_log(6, 50)
    simulated = _random_log(8, 10).drop(columns="group")
    report = metrics.compare(real, simulated, wait_user=(WAIT,), splits=50)
    assert report["metrics"]["ping_pong_rate"] == {
        "kind": "rate",
        "available": False,
        "reason": metrics.NO_SIMULATED_GROUP,
    }


# --- mapping specs -------------------------------------------------------------------------


SPEC = """
spec: test
version: 2
log: demo-vinst
start_group: Desk
rules:
  - name: status
    tool: [set_status]
    argument: status
    activity: "{status}"
    rewrite: [["^(\\\\w+) - ", "\\\\1-"]]
  - name: handover
    role: agent
    text: "^Handing over to (?P<team>[^:]+):"
    activity: Queued
    group: "{team}"
  - name: reads
    tool: "*"
    activity: null
  - name: asks
    role: agent
    text: "could you"
    activity: Wait
"""


def test_a_spec_maps_calls_and_texts_and_keeps_what_no_rule_matched():
    spec = parse_spec(SPEC)
    messages = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "Hi"},
        {"role": "agent", "content": "Could you send the log?"},
        {
            "role": "agent",
            "content": "",
            "tool_calls": [
                {"id": "1", "name": "get", "arguments": {}},
                {"id": "2", "name": "set_status", "arguments": {"status": "Accepted - Fixing"}},
                {"id": "3", "name": "set_status", "arguments": {"note": "no status"}},
            ],
        },
        {"role": "tool", "content": "ok", "tool_call_id": "2"},
        {"role": "agent", "content": "Handing over to Network L2: over"},
        {"role": "agent", "content": "Handing over to nobody"},
    ]
    mapped = map_messages(messages, spec)
    assert [(e["activity"], e["group"], e["rule"]) for e in mapped.events] == [
        ("Wait", "Desk", "asks"),
        ("Accepted-Fixing", "Desk", "status"),
        ("Queued", "Network L2", "handover"),
    ]
    # a call without the argument falls through to the next rule that matches ("reads")
    assert mapped.units == 7
    assert mapped.unmapped == [[1, None], [6, None]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "a mapping spec is a YAML mapping"),
        ("spec: a\nversion: 1\nlog: x\nrules: []", "rules: List should have at least 1 item"),
        (SPEC.replace('text: "could you"', 'text: "(unclosed"'), "rules[3].text"),
        (SPEC.replace("name: reads", "name: status"), "two rules are named 'status'"),
        (SPEC.replace('"{status}"', '"{sta tus}"'), "a placeholder is a plain name"),
        (SPEC.replace("version: 2", "version: 0"), "version: Input should be greater"),
        (SPEC + "\nextra: 1", "extra: Extra inputs are not permitted"),
        ("spec: [", "not YAML"),
        (SPEC.replace("spec: test", "spec: ../evil"), "spec: String should match pattern"),
    ],
)
def test_a_bad_spec_is_refused_with_the_place_and_the_format(text, message):
    with pytest.raises(SpecError) as error:
        parse_spec(text, "spec.yaml")
    assert str(error.value).startswith("spec.yaml: ")
    assert message in str(error.value)
    assert "docs/realism.md" in str(error.value) or "YAML" in str(error.value)


def test_a_missing_spec_file_names_the_shipped_specs(tmp_path):
    with pytest.raises(SpecError, match="no such mapping spec file .*demo-itsm"):
        load_spec(tmp_path / "nope.yaml")
    assert {"demo-itsm", "taubench-airline"} <= set(packaged_specs())
    assert load_spec("demo-itsm").log == "demo-vinst"
    with pytest.raises(SpecError):
        load_spec(Path("somewhere") / "demo-itsm")  # a path, not a shipped name


def test_the_simulator_is_the_user_side_backbone():
    assert simulator_name({"user": {"backbone": "gpt-4.1"}, "agent": {"backbone": "x"}}) == (
        "gpt-4.1"
    )
    assert simulator_name({"backbone": "hand-written demo"}) == "hand-written demo"
    assert simulator_name({"reward": 1.0}, fallback="tau-bench gpt-4o") == "tau-bench gpt-4o"
    assert simulator_name(None) == "unnamed"


@pytest.mark.realdata
def test_the_airline_spec_maps_real_taubench_trajectories(real_file):
    from itsmreview.catalog.formats.trajectories import read_taubench

    found = read_taubench(real_file("transcripts", "taubench_gpt4o_airline_even.json"))
    spec = load_spec("taubench-airline")
    raw = [t for runs in found.values() for t in runs]
    mapped = [map_messages(t["messages"], spec) for t in raw]
    counted = {}
    for one in mapped:
        for event in one.events:
            counted[event["activity"]] = counted.get(event["activity"], 0) + 1
    # every transfer and cancel call of the file is one event (an independent count)
    calls = {"transfer_to_human_agents": 0, "cancel_reservation": 0}
    for t in raw:
        for message in t["messages"]:
            for call in message.get("tool_calls") or []:
                if call["name"] in calls:
                    calls[call["name"]] += 1
    assert counted["Queued-Awaiting Assignment"] == calls["transfer_to_human_agents"]
    assert counted["Completed-Cancelled"] == calls["cancel_reservation"]
    assert counted["Accepted-Wait - User"] > 0
    assert all(not one.unmapped for one in mapped)


# --- conformance ---------------------------------------------------------------------------


def test_fitness_per_case_equals_pm4pys_replay_of_each_trace():
    from itsmreview.realism import conformance

    real = _random_log(11, 300)
    model = conformance.discover(real)
    simulated = _random_log(12, 40, wait_share=0.9)
    ours = conformance.trace_fitness(model, conformance.sequences(simulated))
    frame = pm4py.format_dataframe(
        simulated.assign(timestamp=simulated["timestamp"].dt.tz_localize(None)),
        case_id="case_id",
        activity_key="activity",
        timestamp_key="timestamp",
    )
    diagnostics = pm4py.conformance_diagnostics_token_based_replay(frame, *model)
    cases = frame.groupby("case:concept:name", sort=False).size().index  # pm4py's case order
    theirs = pd.Series([d["trace_fitness"] for d in diagnostics], index=cases.astype(str))
    assert ours.to_dict() == pytest.approx(theirs.sort_index().to_dict(), abs=1e-12)
    overall = pm4py.fitness_token_based_replay(frame, *model)["average_trace_fitness"]
    assert ours.mean() == pytest.approx(overall, abs=1e-12)


def test_fitness_joins_the_comparison_with_its_own_floor():
    from itsmreview.realism import conformance

    real, simulated = _random_log(13, 400), _random_log(14, 50, wait_share=1.0)
    model = conformance.discover(real)
    sample = conformance.sample_cases(conformance.sequences(real), seed=3, size=200)
    assert len(sample) == 200 and sample.index.is_monotonic_increasing
    fitness = (
        conformance.trace_fitness(model, sample),
        conformance.trace_fitness(model, conformance.sequences(simulated)),
    )
    report = metrics.compare(real, simulated, wait_user=(WAIT,), splits=100, fitness=fitness)
    found = report["metrics"]["fitness"]
    assert found["real_sample"] == 200
    assert found["real"]["value"] == pytest.approx(fitness[0].mean(), abs=1e-6)
    assert found["gap"] == pytest.approx(fitness[1].mean() - fitness[0].mean(), abs=1e-6)
    # the floor: 50 sampled real cases (as many as simulated) against the other 150
    direct = metrics.noise_floor(
        fitness[0].to_frame("f"), pd.DataFrame({"c": np.ones(200)}), splits=100, size=50
    )["f"]
    assert found["noise_floor"] == pytest.approx(direct, abs=1e-6)


def test_closed_with_no_reply_is_a_wait_directly_followed_by_a_closing():
    close = ("Completed-Resolved", "Completed-Closed")
    events = _log(
        {
            "walked": [("x", "A"), (WAIT, "A"), ("Completed-Resolved", "A")],
            "came back": [(WAIT, "A"), ("x", "A"), ("Completed-Closed", "A")],
            "waits at the end": [("x", "A"), (WAIT, "A")],
            "twice": [(WAIT, "A"), ("x", "A"), (WAIT, "A"), ("Completed-Closed", "A")],
        }
    )
    cases = metrics.case_table(events, wait_user=(WAIT,), close=close)
    assert cases["closed_waiting"].to_dict() == {
        "came back": False,
        "twice": True,
        "waits at the end": False,
        "walked": True,
    }
    report = metrics.profile(events, wait_user=(WAIT,), close=close, splits=20)
    assert report["metrics"]["no_reply_closure_rate"]["count"] == 2
    without = metrics.profile(events, wait_user=(WAIT,), splits=20)["metrics"]
    assert without["no_reply_closure_rate"]["reason"] == (
        "not available: the log has no closing activity"
    )
    no_wait = metrics.profile(events, close=close, splits=20)["metrics"]
    assert no_wait["no_reply_closure_rate"]["available"] is False
