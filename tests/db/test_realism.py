"""`itsmreview realism report --log` on both backends: figures equal to a count over the file
the log was imported from, stable JSON, a readable table, clear errors."""

import json
from itertools import groupby

import pandas as pd
import pytest
from itsmreview.cli import app
from itsmreview.coverage.synthetic import generate_log, write_csv
from typer.testing import CliRunner

runner = CliRunner()
WAIT = "Accepted-Wait - User"


def run(*args):
    return runner.invoke(app, list(args))


@pytest.fixture
def small_log(configured, tmp_path):
    """A 300-case synthetic BPI 2013-shaped log, imported as `small`; its rows."""
    rows = generate_log(300, seed=12)
    path = write_csv(rows, tmp_path / "small.csv")
    result = run("log", "import", str(path), "--preset", "bpi2013", "--name", "small")
    assert result.exit_code == 0, result.output
    return rows


def _expected(rows: pd.DataFrame) -> dict:
    """Counts over the generated rows: each case's lists in time order, walked in Python."""
    frame = rows.assign(when=pd.to_datetime(rows["Change Date+Time"], format="ISO8601", utc=True))
    frame = frame.sort_values(["SR Number", "when"], kind="stable")
    out = {"ping_pong": 0, "reassignments": 0, "wait_user": 0, "cancelled": 0}
    for _, case in frame.groupby("SR Number"):
        teams = [t for t, _ in groupby(case["Involved ST"])]
        out["ping_pong"] += any(teams[i] == teams[i + 2] for i in range(len(teams) - 2))
        out["reassignments"] += len(teams) - 1
        out["wait_user"] += WAIT in set(case["Activity"])
        out["cancelled"] += "Completed-Cancelled" in set(case["Activity"])
    return out


def test_the_report_equals_a_count_over_the_imported_file(small_log):
    result = run("realism", "report", "--log", "small", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    expected = _expected(small_log)
    m = report["metrics"]
    assert (report["log"], report["cases"], report["events"]) == ("small", 300, len(small_log))
    assert m["ping_pong_rate"]["count"] == expected["ping_pong"]
    assert m["wait_user_rate"]["count"] == expected["wait_user"]
    assert m["cancel_rate"]["count"] == expected["cancelled"]
    assert m["reassignments_per_case"]["value"] == round(expected["reassignments"] / 300, 6)
    assert m["reopen_rate"] == {
        "available": False,
        "kind": "rate",
        "reason": "not available: the log has no reopen activity",
    }
    assert report["vocabulary"]["group_attribute"] == "Involved ST"
    assert report["vocabulary"]["wait_user"] == [WAIT]
    for found in (f for f in m.values() if f["available"]):
        assert "noise_floor" in found and len(found["interval"]) == 2
    assert report["activity_distribution"]["noise_floor"] > 0
    # stable: the same bytes again, keys sorted at every level
    again = run("realism", "report", "--log", "small", "--json")
    assert again.stdout == result.stdout
    assert result.stdout == json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    other_seed = json.loads(
        run("realism", "report", "--log", "small", "--json", "--seed", "1").stdout
    )
    assert other_seed["metrics"]["ping_pong_rate"]["count"] == expected["ping_pong"]


def test_the_text_report_is_a_table(small_log):
    result = run("realism", "report", "--log", "small")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("small v1: 300 cases, ")
    header = next(line for line in lines if line.startswith("metric"))
    assert header.split("  ")[0] == "metric" and header.endswith("noise floor")
    ping = next(line for line in lines if line.startswith("ping-pong rate"))
    assert "%" in ping and " - " in ping
    assert any(
        line.startswith("reopen rate") and "not available: the log has no reopen activity" in line
        for line in lines
    )
    assert any(line.startswith("Accepted-In Progress") for line in lines)
    assert lines[-1].startswith("noise floor (Jensen-Shannon divergence): ")


def test_an_unknown_log_or_no_log_is_refused_with_the_names(small_log):
    missing = run("realism", "report", "--log", "nope")
    assert missing.exit_code == 1
    assert "no log named 'nope'; known logs: small" in missing.output
    bare = run("realism", "report")
    assert bare.exit_code == 1 and "give --log NAME" in bare.output
    wrong = run("realism", "report", "--log", "small", "--group", "Team")
    assert wrong.exit_code == 1 and "--group 'Team' is not a role attribute" in wrong.output


def test_a_log_without_groups_says_so_instead_of_zero(configured, tmp_path):
    rows = generate_log(60, seed=3)[["SR Number", "Activity", "Change Date+Time"]]
    path = tmp_path / "bare.csv"
    rows.to_csv(path, index=False)
    imported = run(
        "log", "import", str(path), "--name", "bare", "--case", "SR Number",
        "--activity", "Activity", "--timestamp", "Change Date+Time",
    )  # fmt: skip
    assert imported.exit_code == 0, imported.output
    result = run("realism", "report", "--log", "bare", "--json", "--wait-user", WAIT)
    assert result.exit_code == 0, result.output
    m = json.loads(result.stdout)["metrics"]
    reason = "not available: the log has no assignment-group attribute"
    assert m["ping_pong_rate"]["reason"] == m["reassignments_per_case"]["reason"] == reason
    assert m["wait_user_rate"]["available"]  # named by the option
    text = run("realism", "report", "--log", "bare").stdout
    assert f"ping-pong rate            {reason}" in text
    assert "wait-user rate" in text and "waiting-for-the-user status" in text


def test_a_log_with_its_own_counter_is_checked_against_it(configured, tmp_path):
    from itsmreview.coverage.synthetic_bpi2014 import generate_bpi2014, write_bpi2014

    found = generate_bpi2014(incidents=150, seed=5)
    write_bpi2014(found, tmp_path / "bpi2014")
    imported = run("log", "import", str(tmp_path / "bpi2014"), "--preset", "bpi2014")
    assert imported.exit_code == 0, imported.output
    report = json.loads(run("realism", "report", "--log", "bpi2014", "--json").stdout)
    check = report["counter_checks"]["reassignments_per_case"]
    counter = pd.to_numeric(found["incidents"]["# Reassignments"])
    assert check["attribute"] == "reassignments" and check["cases"] == 150
    assert check["log_mean"] == round(counter.mean(), 6)
    assert check["computed_mean"] == report["metrics"]["reassignments_per_case"]["value"]
    # the counter counts Reassignment events; the definition also counts the first hand-over
    # from the service desk to the group assigned, so the computed mean is never below it
    assert check["computed_mean"] >= check["log_mean"] and 0 <= check["equal_share"] <= 1
    assert report["vocabulary"]["group_attribute"] == "Assignment Group"


def _uci_expected(rows):
    """Per incident, from the rows as written: the counters' last values, and the group
    changes and Resolved -> open returns counted over the rows (plain Python)."""
    out = {}
    for number, found in groupby(rows, key=lambda row: row["number"]):
        found = list(found)
        groups = [row["assignment_group"] for row in found if row["assignment_group"] != "?"]
        states = [row["incident_state"] for row in found]
        out[number] = {
            "kept_moves": int(found[-1]["reassignment_count"]),
            "kept_reopens": int(found[-1]["reopen_count"]),
            "moves": sum(a != b for a, b in zip(groups, groups[1:], strict=False)),
            "reopens": sum(
                a == "Resolved" and b not in ("Resolved", "Closed")
                for a, b in zip(states, states[1:], strict=False)
            ),
        }
    return pd.DataFrame.from_dict(out, orient="index")


def test_a_uci_log_is_checked_against_its_reassignment_and_reopen_counters(configured, tmp_path):
    from uci_log import generate_uci, write_uci

    rows = generate_uci(240, seed=3, lost=0.15)
    path = write_uci(rows, tmp_path / "incident_event_log.csv")
    imported = run("log", "import", str(path), "--preset", "uci-incidents", "--name", "uci")
    assert imported.exit_code == 0, imported.output
    report = json.loads(run("realism", "report", "--log", "uci", "--json").stdout)
    expected = _uci_expected(rows)
    checks = report["counter_checks"]
    moves, reopens = checks["reassignments_per_case"], checks["reopens_per_case"]
    assert moves["attribute"] == "reassignments" and reopens["attribute"] == "reopens"
    assert moves["cases"] == reopens["cases"] == 240
    assert moves["log_mean"] == round(expected["kept_moves"].mean(), 6)
    assert moves["computed_mean"] == round(expected["moves"].mean(), 6)
    assert moves["equal_share"] == round((expected["moves"] == expected["kept_moves"]).mean(), 6)
    assert reopens["log_mean"] == round(expected["kept_reopens"].mean(), 6)
    assert reopens["computed_mean"] == round(expected["reopens"].mean(), 6)
    share = (expected["reopens"] == expected["kept_reopens"]).mean()
    assert reopens["equal_share"] == round(share, 6)
    # lost updates hide some hand-overs and reopenings from the rows, never add any
    assert 0 < moves["equal_share"] < 1 and moves["computed_mean"] < moves["log_mean"]
    assert reopens["computed_mean"] <= reopens["log_mean"]
    # the reopen rate comes from the statuses (no activity says "reopened")
    reopen = report["metrics"]["reopen_rate"]
    assert reopen["available"] and reopen["value"] == round((expected["reopens"] > 0).mean(), 6)
    assert report["vocabulary"]["reopen_from"] == ["Resolved"]
    text = run("realism", "report", "--log", "uci").stdout
    assert "reopenings per case: the log's own counter 'reopens' has mean" in text
    assert "reassignments per case: the log's own counter 'reassignments' has mean" in text


def test_without_lost_updates_the_uci_counters_equal_the_rows(configured, tmp_path):
    from uci_log import generate_uci, write_uci

    path = write_uci(generate_uci(120, seed=9), tmp_path / "uci.csv")
    assert run("log", "import", str(path), "--preset", "uci-incidents").exit_code == 0
    report = json.loads(run("realism", "report", "--log", "uci", "--json").stdout)
    for check in report["counter_checks"].values():
        assert check["equal_share"] == 1.0 and check["computed_mean"] == check["log_mean"]


def test_a_counter_that_is_not_a_count_stops_the_import_naming_the_row(configured, tmp_path):
    from uci_log import generate_uci, write_uci

    rows = generate_uci(5, seed=1)
    rows[3]["reopen_count"] = "two"
    path = write_uci(rows, tmp_path / "uci.csv")
    result = run("log", "import", str(path), "--preset", "uci-incidents")
    assert result.exit_code != 0
    assert "counter column 'reopen_count'" in result.output and "row 5: 'two'" in result.output
    assert run("log", "list", "--json").stdout.strip() in ("[]", "")


def test_a_role_of_the_log_limits_the_profile_to_the_cases_it_takes_part_in(small_log):
    level = "ST Level"
    l3_cases = set(small_log.loc[small_log[level] == "L3", "SR Number"])
    assert 2 <= len(l3_cases) < 300
    result = run("realism", "report", "--log", "small", "--role", f"{level}=L3", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    expected = _expected(small_log[small_log["SR Number"].isin(l3_cases)])
    m = report["metrics"]
    assert report["role"] == {"attribute": level, "value": "L3"}
    assert report["cases"] == len(l3_cases)
    assert m["ping_pong_rate"]["count"] == expected["ping_pong"]
    assert m["wait_user_rate"]["count"] == expected["wait_user"]
    value = round(expected["reassignments"] / len(l3_cases), 6)
    assert m["reassignments_per_case"]["value"] == value
    whole = json.loads(run("realism", "report", "--log", "small", "--json").stdout)
    assert whole["role"] is None and whole["cases"] == 300
    text = run("realism", "report", "--log", "small", "--role", f"{level}=L3").stdout
    assert f"real cases: the {len(l3_cases)} in which ST Level = L3 takes part" in text


def test_a_role_the_log_lacks_is_refused_naming_what_it_has(small_log):
    unknown = run("realism", "report", "--log", "small", "--role", "Level=L3")
    assert unknown.exit_code == 1
    assert "'Level' is not a role attribute of log 'small'" in unknown.output
    assert "ST Level" in unknown.output
    rare = run("realism", "report", "--log", "small", "--role", "ST Level=L9")
    assert rare.exit_code == 1
    assert "0 case(s) of log 'small' have ST Level = 'L9', fewer than two" in rare.output
    assert "L1 (" in rare.output
    malformed = run("realism", "report", "--log", "small", "--role", "L3")
    assert malformed.exit_code != 0 and "'L3' is not ATTRIBUTE=VALUE" in malformed.output
