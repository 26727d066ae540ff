import pandas as pd
import pytest
from itsmreview.coverage.eventlog import PRESETS, read_log
from itsmreview.coverage.synthetic import generate_log, write_csv, write_xes
from itsmreview.coverage.variants import collapse, materialise


@pytest.fixture(scope="module")
def log():
    return generate_log(600, seed=11)


def test_same_seed_same_log_other_seed_other_log(log):
    assert generate_log(600, seed=11).equals(log)
    assert not generate_log(600, seed=12).equals(log)


def test_shape_follows_the_vinst_process(log):
    assert set(log["Status"]) == {"Accepted", "Queued", "Completed"}
    expected_sub = {
        "In Progress",
        "Awaiting Assignment",
        "Assigned",
        "Wait - User",
        "Wait - Vendor",
        "Wait - Implementation",
        "Resolved",
        "Closed",
        "In Call",
        "Cancelled",
    }
    assert set(log["Sub Status"]) == expected_sub
    assert set(log["ST Level"]) == {"L1", "L2", "L3"}
    per_case = log.groupby("SR Number", sort=False)
    levels = per_case["ST Level"].agg(lambda s: "L1" in set(s) and "L2" in set(s))
    assert levels.mean() > 0.1, "escalation from L1 to L2 should be common"
    teams = per_case["Involved ST"].agg(lambda t: collapse(list(t)))
    ping_pong = teams.map(lambda t: any(t[i] == t[i + 2] != t[i + 1] for i in range(len(t) - 2)))
    assert ping_pong.any(), "some incidents must bounce back to an earlier team"
    waits = per_case["Activity"].agg(lambda a: list(a).count("Accepted-Wait - User"))
    assert (waits >= 2).any(), "wait-user loops repeat"
    times = pd.to_datetime(log["Change Date+Time"], format="ISO8601")
    assert (times.groupby(log["SR Number"]).diff().dropna() >= pd.Timedelta(0)).all()


def test_events_parameter_gives_exactly_that_many_events():
    assert len(generate_log(events=1234, seed=3)) == 1234


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="exactly one"):
        generate_log(10, events=10)
    with pytest.raises(ValueError, match="at least 1"):
        generate_log(0)


def test_csv_reads_with_the_bpi2013_preset_and_xes_with_pm4py(log, tmp_path):
    import pm4py

    csv_events, _ = read_log(write_csv(log, tmp_path / "log.csv.gz"), PRESETS["bpi2013"])
    xes_path = write_xes(log, tmp_path / "log.xes.gz")
    xes = pm4py.read_xes(str(xes_path))
    assert xes["case:concept:name"].nunique() == log["SR Number"].nunique()
    assert len(xes) == len(log)
    xes_events, _ = read_log(xes_path)
    a, b = materialise(csv_events), materialise(xes_events)
    raw = lambda m: m.variants[m.variants.level == "raw"][["sequence", "case_count"]]  # noqa: E731
    assert raw(a).to_dict("records") == raw(b).to_dict("records")
