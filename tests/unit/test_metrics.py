"""Coverage metrics against an independent computation straight from the events."""

import itertools
import random

import pandas as pd
import pytest
from itsmreview.coverage.eventlog import PRESETS, ROLE_PREFIX, read_log
from itsmreview.coverage.metrics import (
    LogTables,
    TaskSource,
    compute_coverage,
    edit_distance,
    greedy_curve,
    js_divergence,
)
from itsmreview.coverage.synthetic import generate_log, write_csv
from itsmreview.coverage.variants import materialise


def tables_of(events: pd.DataFrame) -> LogTables:
    m = materialise(events)
    level = lambda name: m.variants[m.variants.level == name].reset_index(drop=True)  # noqa: E731
    return LogTables(
        raw=level("raw"),
        collapsed=level("collapsed"),
        df_pairs=m.df_pairs,
        activities=m.activities,
        roles=m.role_values,
        n_cases=m.summary["cases"],
    )


def independent(events: pd.DataFrame, sources: list[TaskSource]) -> dict:
    """Coverage by brute force over cases and events, sharing no code with the module."""
    cases = [tuple(g) for _, g in events.groupby("case_id", sort=False)["activity"]]
    declared = {tuple(s) for src in sources for s in src.sequences}
    fold = lambda seq: tuple(k for k, _ in itertools.groupby(seq))  # noqa: E731
    declared_folded = {fold(s) for s in declared}
    pairs = {p for s in declared for p in zip(s, s[1:], strict=False)}
    all_pairs = [p for seq in cases for p in zip(seq, seq[1:], strict=False)]
    acts = {a for s in declared for a in s}
    out = {
        "variant": sum(s in declared for s in cases) / len(cases),
        "collapsed": sum(fold(s) in declared_folded for s in cases) / len(cases),
        "df": sum(p in pairs for p in all_pairs) / len(all_pairs),
        "activity": events["activity"].isin(acts).mean(),
        "roles": {},
    }
    for column in [c for c in events.columns if c.startswith(ROLE_PREFIX)]:
        attribute = column[len(ROLE_PREFIX) :]
        values = set().union(*(src.roles.get(attribute, set()) for src in sources))
        present = events[column].dropna()
        out["roles"][attribute] = present.isin(values).mean()
    return out


def check(events, sources):
    report = compute_coverage(tables_of(events), sources)
    expected = independent(events, sources)
    assert report.variant_coverage == pytest.approx(expected["variant"])
    assert report.variant_coverage_collapsed == pytest.approx(expected["collapsed"])
    assert report.df_coverage == pytest.approx(expected["df"])
    assert report.activity_coverage == pytest.approx(expected["activity"])
    assert report.role_coverage == pytest.approx(expected["roles"])
    return report


def random_sources(events, seed, n=12):
    rng = random.Random(seed)
    cases = [tuple(g) for _, g in events.groupby("case_id", sort=False)["activity"]]
    roles = [c for c in events.columns if c.startswith(ROLE_PREFIX)]
    sources = []
    for i in range(n):
        role = rng.choice(roles)
        value = events[role].dropna().sample(1, random_state=seed + i).iloc[0]
        sources.append(
            TaskSource(f"t{i}", [rng.choice(cases)], {role[len(ROLE_PREFIX) :]: {value}})
        )
    sources.append(TaskSource("absent", [("Invented step", "Closed somehow")]))
    return sources


def test_synthetic_log_matches_independent_computation(tmp_path):
    path = write_csv(generate_log(800, seed=21), tmp_path / "s.csv")
    events, _ = read_log(path, PRESETS["bpi2013"])
    report = check(events, random_sources(events, seed=3))
    assert [a.task_ids for a in report.absent_sequences] == [["absent"]]
    assert len(report.absent_sequences[0].nearest) == 3


@pytest.mark.realdata
@pytest.mark.parametrize(
    "name, preset", [("bpi2013_incidents.csv.gz", "bpi2013"), ("helpdesk.xes.gz", "helpdesk")]
)
def test_real_logs_match_independent_computation(real_file, name, preset):
    events, _ = read_log(real_file("logs", name), PRESETS[preset])
    check(events, random_sources(events, seed=11, n=25))


def test_no_tasks_covers_nothing():
    events, _ = read_log_frame()
    report = compute_coverage(tables_of(events), [])
    assert (report.variant_coverage, report.df_coverage, report.activity_coverage) == (0, 0, 0)
    assert report.js_divergence is None
    assert report.gaps["greedy_tasks_to_reach"] == {"50%": 2, "80%": 3, "90%": 3}


def read_log_frame():
    frame = pd.DataFrame(
        {
            "case_id": ["a", "a", "b", "c"],
            "activity": ["x", "y", "x", "z"],
            "timestamp": pd.to_datetime(["2024-01-01"] * 4, utc=True),
        }
    )
    return frame, None


def test_nearest_variants_are_ranked_by_edit_distance():
    events, _ = read_log_frame()
    report = compute_coverage(tables_of(events), [TaskSource("t", [("x", "y", "q")])])
    nearest = report.absent_sequences[0].nearest
    assert nearest[0]["sequence"] == ["x", "y"] and nearest[0]["distance"] == 1
    assert [n["distance"] for n in nearest] == sorted(n["distance"] for n in nearest)


def test_helpers():
    assert edit_distance("kitten", "sitting") == 3
    assert greedy_curve([0.3, 0.1, 0.25], 0.3) == {"50%": 1, "80%": 2, "90%": 3}
    assert greedy_curve([], 0.95) == {"50%": 0, "80%": 0, "90%": 0}
    assert greedy_curve([0.05], 0.0) == {"50%": None, "80%": None, "90%": None}
    assert js_divergence([1, 1], [1, 1]) == 0
    with pytest.raises(ValueError):
        js_divergence([0, 0], [1, 0])
