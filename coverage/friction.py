"""Timing and friction of a variant's cases: where they wait, how often work changes team and
how often it bounces back to a team it had left (ping-pong). Pure functions over events."""

import pandas as pd

LONGEST_WAITS = 3


def friction(events: pd.DataFrame, team_column: str | None) -> dict:
    """From events (case_id, activity, timestamp[, team_column]) of one variant's cases:
    the steps with the longest median wait before them, and with a team column, the median
    number of team changes per case, the share of cases with any, and the share that return
    to a team they had left.

    >>> t = pd.to_datetime(["2024-01-01 08:00", "2024-01-01 09:00", "2024-01-02 09:00",
    ...                     "2024-01-01 08:00", "2024-01-01 08:30", "2024-01-01 10:30"])
    >>> events = pd.DataFrame({"case_id": list("aaabbb"), "activity": list("XYZXYZ"),
    ...                        "timestamp": t, "team": ["A", "B", "A", "A", "A", "A"]})
    >>> found = friction(events, "team")
    >>> found["longest_waits"][0]["activity"], found["longest_waits"][0]["median_hours"]
    ('Z', 13.0)
    >>> found["cases_reassigned_share"], found["ping_pong_share"], found["median_team_changes"]
    (0.5, 0.5, 1.0)
    """
    out: dict = {"cases": int(events["case_id"].nunique()) if len(events) else 0}
    if events.empty:
        return out
    # plain strings: grouping by categories would cross every category with every other
    frame = events.assign(
        case_id=events["case_id"].astype("string"), activity=events["activity"].astype("string")
    )
    frame = frame.sort_values(["case_id", "timestamp"], kind="stable").reset_index(drop=True)
    frame["step"] = frame.groupby("case_id").cumcount()
    wait = frame.groupby("case_id")["timestamp"].diff().dt.total_seconds() / 3600
    frame["wait_h"] = wait
    waits = (
        frame.dropna(subset=["wait_h"])
        .groupby(["step", "activity"], sort=False)["wait_h"]
        .median()
        .reset_index()
        .nlargest(LONGEST_WAITS, "wait_h")
    )
    out["longest_waits"] = [
        {"step": int(r.step) + 1, "activity": str(r.activity), "median_hours": round(r.wait_h, 2)}
        for r in waits.itertuples()
    ]
    if team_column and team_column in frame:
        teams = frame[team_column].astype("string")
        known = teams.notna() & (teams != "")
        held = pd.DataFrame({"case_id": frame["case_id"][known], "team": teams[known]})
        held["position"] = held.groupby("case_id").cumcount()
        before = held.groupby("case_id")["team"].shift()
        first_seen = held.groupby(["case_id", "team"])["position"].transform("min")
        moved = before.notna() & (held["team"] != before)
        back = moved & (first_seen < held["position"])  # a team the case had been with before
        cases = pd.Index(frame["case_id"].unique())
        changes = held[moved].groupby("case_id").size().reindex(cases, fill_value=0)
        returned = pd.Series(cases.isin(held.loc[back, "case_id"].unique()))
        out["team_attribute"] = team_column
        out["median_team_changes"] = float(changes.astype(float).median())
        out["cases_reassigned_share"] = float((changes > 0).mean())
        out["ping_pong_share"] = float(returned.mean())
    return out
