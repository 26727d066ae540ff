"""Real logs from ../shared/data: our counts equal what pm4py itself computes."""

import pandas as pd
import pytest
from itsmreview.coverage.eventlog import PRESETS, read_log
from itsmreview.coverage.variants import materialise

pytestmark = pytest.mark.realdata


def _ours(path, preset):
    events, _ = read_log(path, PRESETS[preset])
    m = materialise(events)
    raw = m.variants[m.variants.level == "raw"]
    return m, {tuple(s): int(c) for s, c in zip(raw.sequence, raw.case_count, strict=True)}


def test_bpi2013_counts_equal_pm4py(real_file):
    import pm4py

    path = real_file("logs", "bpi2013_incidents.csv.gz")
    m, ours = _ours(path, "bpi2013")
    frame = pd.read_csv(path, encoding="utf-8-sig", dtype={"SR Number": str})
    frame["Change Date+Time"] = pd.to_datetime(
        frame["Change Date+Time"], format="ISO8601", utc=True
    )
    frame = pm4py.format_dataframe(
        frame, case_id="SR Number", activity_key="Activity", timestamp_key="Change Date+Time"
    )
    theirs = {tuple(k): int(v) for k, v in pm4py.get_variants(frame).items()}
    assert m.summary["cases"] == frame["case:concept:name"].nunique() == 7554
    assert m.summary["events"] == len(frame) == 65533
    assert ours == theirs
    assert m.summary["variants"] == len(theirs)


def test_helpdesk_counts_equal_pm4py(real_file):
    import pm4py

    path = real_file("logs", "helpdesk.xes.gz")
    m, ours = _ours(path, "helpdesk")
    log = pm4py.read_xes(str(path))
    theirs = {tuple(k): int(v) for k, v in pm4py.get_variants(log).items()}
    assert m.summary["cases"] == 4580 and m.summary["events"] == 21348
    assert ours == theirs
    roles = set(m.role_values["attribute"])
    assert roles == {"workgroup", "support_section", "responsible_section"}
