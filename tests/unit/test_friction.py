"""Waits, team changes and ping-pong of a variant's cases, against counts made by hand."""

import pandas as pd
import pytest
from itsmreview.coverage.friction import friction


def _events(categorical: bool) -> pd.DataFrame:
    rows = [  # case, activity, hour, team
        ("c1", "Open", 0, "Desk"),
        ("c1", "Assign", 2, "Network"),
        ("c1", "Assign", 5, "Desk"),  # back to Desk: ping-pong
        ("c1", "Close", 6, "Desk"),
        ("c2", "Open", 0, "Desk"),
        ("c2", "Assign", 1, None),  # no team recorded: neither a change nor a return
        ("c2", "Assign", 9, "Server"),
        ("c2", "Close", 10, "Server"),
        ("c3", "Open", 0, "Desk"),
        ("c3", "Assign", 4, "Desk"),
        ("c3", "Assign", 5, "Desk"),
        ("c3", "Close", 7, "Desk"),
    ]
    frame = pd.DataFrame(rows, columns=["case_id", "activity", "hour", "role:team"])
    frame["timestamp"] = pd.Timestamp("2024-03-01", tz="UTC") + pd.to_timedelta(
        frame.pop("hour"), unit="h"
    )
    if categorical:  # as the stored events come back from parquet
        for column in ("case_id", "activity", "role:team"):
            frame[column] = frame[column].astype("category")
    return frame.sample(frac=1, random_state=3)  # order must not matter


@pytest.mark.parametrize("categorical", [False, True])
def test_friction_counts_waits_changes_and_returns(categorical):
    found = friction(_events(categorical), "role:team")
    assert found["cases"] == 3
    # step 3 waits 3 h (c1), 8 h (c2), 1 h (c3): median 3; step 2: 2, 1, 4 -> 2; step 4: 1,1,2
    assert found["longest_waits"][0] == {"step": 3, "activity": "Assign", "median_hours": 3.0}
    assert found["longest_waits"][1] == {"step": 2, "activity": "Assign", "median_hours": 2.0}
    # team changes: c1 Desk>Network>Desk = 2, c2 Desk>Server = 1, c3 none
    assert found["median_team_changes"] == 1.0
    assert found["cases_reassigned_share"] == pytest.approx(2 / 3)
    assert found["ping_pong_share"] == pytest.approx(1 / 3)


def test_friction_without_a_team_column_or_events():
    found = friction(_events(False), None)
    assert "ping_pong_share" not in found and found["longest_waits"]
    assert friction(_events(False).head(0), "role:team") == {"cases": 0}
